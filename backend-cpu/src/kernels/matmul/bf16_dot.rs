//! bf16 matmul on AVX512-BF16 (`vdpbf16ps`): each instruction multiplies 16 pairs of bf16
//! from both operands and adds both products to 16 f32 accumulators, twice the
//! multiply-adds of an f32 FMA. Nothing is widened in memory; sums are kept in f32 and
//! rounded to bf16 once.
//!
//! The blocking is BLIS's: `b` is packed per `KC` block of k into `NR`-column strips of
//! k-pairs (one 32-bit lane per column and pair, as the instruction reads them), `a` into
//! `MR`-row strips of k-pairs, per `MC`-row block on each thread; an `MR x NR` tile of
//! accumulators (24 registers) stays in registers across the block.
//!
//! As the instruction defines: bf16 subnormal inputs count as zero and subnormal results
//! flush to zero (values below 1.2e-38). The other rounding is f32's, pair by pair.

use half::bf16;
use rayon::prelude::*;

use super::Geometry;

/// Rows of the register tile.
const MR: usize = 12;
/// Columns of the register tile (two 16-lane registers).
const NR: usize = 32;
/// k per packed block (even: k is packed in pairs). Keeps a `b` strip (`KC x NR` bf16,
/// 16 KiB) in L1 and an `a` block (`MC x KC`, 24 KiB) in L2.
const KC: usize = 256;
/// Rows of `a` per work item: a multiple of `MR`, small enough to spread 1024 rows evenly.
const MC: usize = 4 * MR;

/// Whether this CPU runs the kernel (AVX-512F and AVX512-BF16), checked once.
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *AVAILABLE.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bf16")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Two bf16 (as bits) as one 32-bit lane: `lo` (even k) in the low half, as `vdpbf16ps`
/// pairs them.
fn pair(lo: u16, hi: u16) -> u32 {
    u32::from(lo) | (u32::from(hi) << 16)
}

/// One batch's operands, as bf16 bits: `a` from position `a0` with strides
/// `(g.am, g.ak)`, `b` from `b0` with strides `(g.bk, g.bn)`.
struct Operands<'a> {
    g: &'a Geometry,
    a: &'a [u16],
    a0: isize,
    b: &'a [u16],
    b0: isize,
}

impl Operands<'_> {
    /// Pairs `(p, p + 1)` of a k-block starting at `k0` with both elements inside `k`.
    fn whole_pairs(&self, k0: usize, pairs: usize) -> usize {
        ((self.g.k - k0) / 2).min(pairs)
    }

    /// `b[k0..k0 + 2 * pairs, ..]` as `NR`-column strips, each `pairs` rows of `NR` lanes;
    /// lanes past `k` or `n` are zero.
    fn pack_b(&self, k0: usize, pairs: usize, packed: &mut [u32]) {
        let (g, whole) = (self.g, self.whole_pairs(k0, pairs));
        packed
            .par_chunks_mut(pairs * NR)
            .enumerate()
            .for_each(|(strip, out)| {
                let j0 = strip * NR;
                let cols = (g.n - j0).min(NR);
                for (q, row) in out.chunks_exact_mut(NR).enumerate() {
                    let p = k0 + 2 * q;
                    let lo = self.b0 + p as isize * g.bk + j0 as isize * g.bn;
                    let (row, padding) = row.split_at_mut(cols);
                    padding.fill(0);
                    if q >= whole {
                        // The odd last k: its partner is zero.
                        for (j, lane) in row.iter_mut().enumerate() {
                            *lane = pair(self.b[(lo + j as isize * g.bn) as usize], 0);
                        }
                    } else if g.bn == 1 {
                        let (lo, hi) = (lo as usize, (lo + g.bk) as usize);
                        let (lo, hi) = (&self.b[lo..lo + cols], &self.b[hi..hi + cols]);
                        for (lane, (&x, &y)) in row.iter_mut().zip(lo.iter().zip(hi)) {
                            *lane = pair(x, y);
                        }
                    } else {
                        for (j, lane) in row.iter_mut().enumerate() {
                            let at = lo + j as isize * g.bn;
                            *lane = pair(self.b[at as usize], self.b[(at + g.bk) as usize]);
                        }
                    }
                }
            });
    }

    /// `a[i0.., k0..k0 + 2 * pairs]` as `MR`-row strips, each `pairs` rows of `MR` lanes,
    /// into a zeroed `packed` (rows past `m` stay zero).
    fn pack_a(&self, i0: usize, k0: usize, pairs: usize, packed: &mut [u32]) {
        let (g, whole) = (self.g, self.whole_pairs(k0, pairs));
        for (strip, out) in packed.chunks_exact_mut(pairs * MR).enumerate() {
            let first = i0 + strip * MR;
            for (r, i) in (first..g.m.min(first + MR)).enumerate() {
                let row = self.a0 + i as isize * g.am + k0 as isize * g.ak;
                let at = |p: usize| self.a[(row + p as isize * g.ak) as usize];
                let lanes = out.chunks_exact_mut(MR).map(|lanes| &mut lanes[r]);
                let contiguous = (g.ak == 1).then(|| &self.a[row as usize..][..2 * whole]);
                // A row of pairs in place is already lanes (little-endian) when aligned.
                match contiguous.map(bytemuck::try_cast_slice::<u16, u32>) {
                    Some(Ok(pairs)) => lanes.zip(pairs).for_each(|(lane, &p)| *lane = p),
                    _ => lanes
                        .take(whole)
                        .enumerate()
                        .for_each(|(q, lane)| *lane = pair(at(2 * q), at(2 * q + 1))),
                }
                if whole < pairs {
                    out[whole * MR + r] = pair(at(2 * whole), 0);
                }
            }
        }
    }
}

/// `acc += a x b` for one batch (`acc` is the row-major `m x n` f32 result). Requires
/// [`available`].
pub(super) fn multiply(
    g: &Geometry,
    a: &[bf16],
    a0: isize,
    b: &[bf16],
    b0: isize,
    acc: &mut [f32],
) {
    if g.m == 0 || g.n == 0 {
        return;
    }
    let (a, b) = (bytemuck::cast_slice(a), bytemuck::cast_slice(b));
    let ops = Operands { g, a, a0, b, b0 };
    let strips = g.n.div_ceil(NR);
    let mut packed_b = vec![0u32; KC / 2 * NR * strips];
    for k0 in (0..g.k).step_by(KC) {
        let pairs = (g.k - k0).min(KC).div_ceil(2);
        let packed_b = &mut packed_b[..pairs * NR * strips];
        ops.pack_b(k0, pairs, packed_b);
        let packed_b = &*packed_b;
        acc.par_chunks_mut(MC * g.n)
            .enumerate()
            .for_each(|(block, c)| {
                let (i0, rows) = (block * MC, c.len() / g.n);
                let mut packed_a = vec![0u32; pairs * rows.next_multiple_of(MR)];
                ops.pack_a(i0, k0, pairs, &mut packed_a);
                for (strip, b_strip) in packed_b.chunks_exact(pairs * NR).enumerate() {
                    let j0 = strip * NR;
                    let cols = (g.n - j0).min(NR);
                    for (s, a_strip) in packed_a.chunks_exact(pairs * MR).enumerate() {
                        let tile_rows = (rows - s * MR).min(MR);
                        let c = &mut c[s * MR * g.n + j0..];
                        // SAFETY: `available()` was checked by the caller; the strips hold
                        // `pairs` rows of MR and NR lanes; `c` starts at the tile's first
                        // element and holds `tile_rows` rows of `g.n` (the last one at
                        // least `cols` long), which is all the tile writes.
                        unsafe { tile(pairs, a_strip, b_strip, c, g.n, tile_rows, cols) };
                    }
                }
            });
    }
}

/// `c[r * ldc + j] += sum_q a[q][r] . b[q][j]` for `r < rows`, `j < cols`: one register
/// tile over `pairs` k-pairs.
///
/// # Safety
///
/// The CPU has AVX-512F and AVX512-BF16; `a` holds `pairs * MR` and `b` `pairs * NR`
/// lanes; `c` holds `(rows - 1) * ldc + cols` elements; `rows <= MR`, `cols <= NR`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn tile(
    pairs: usize,
    a: &[u32],
    b: &[u32],
    c: &mut [f32],
    ldc: usize,
    rows: usize,
    cols: usize,
) {
    use std::arch::x86_64::*;
    debug_assert!(a.len() >= pairs * MR && b.len() >= pairs * NR);
    debug_assert!(rows <= MR && cols <= NR && c.len() >= (rows - 1) * ldc + cols);
    let mut acc = [[_mm512_setzero_ps(); 2]; MR];
    let (a, b) = (a.as_ptr(), b.as_ptr());
    for q in 0..pairs {
        // SAFETY: `q < pairs`, so both lane groups are inside the strips (caller's
        // contract); unaligned loads; `__m512i` and `__m512bh` are both 64 bytes of lanes.
        unsafe {
            let lanes = b.add(q * NR);
            let b_lo: __m512bh = std::mem::transmute(_mm512_loadu_si512(lanes.cast()));
            let b_hi: __m512bh = std::mem::transmute(_mm512_loadu_si512(lanes.add(16).cast()));
            for (r, row) in acc.iter_mut().enumerate() {
                let a_pair: __m512bh =
                    std::mem::transmute(_mm512_set1_epi32(*a.add(q * MR + r) as i32));
                row[0] = _mm512_dpbf16_ps(row[0], a_pair, b_lo);
                row[1] = _mm512_dpbf16_ps(row[1], a_pair, b_hi);
            }
        }
    }
    for (r, row) in acc.iter().enumerate().take(rows) {
        for (half, sums) in row.iter().enumerate() {
            let lanes = cols.saturating_sub(half * 16).min(16);
            if lanes == 0 {
                continue;
            }
            let mask: __mmask16 = if lanes == 16 { !0 } else { (1 << lanes) - 1 };
            // SAFETY: lanes `[r * ldc + half * 16, + lanes)` are inside `c` (caller's
            // contract); masked lanes are neither read nor written.
            unsafe {
                let at = c.as_mut_ptr().add(r * ldc + half * 16);
                let old = _mm512_maskz_loadu_ps(mask, at);
                _mm512_mask_storeu_ps(at, mask, _mm512_add_ps(old, *sums));
            }
        }
    }
}

/// Never called: [`available`] is false off x86-64.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn tile(_: usize, _: &[u32], _: &[u32], _: &mut [f32], _: usize, _: usize, _: usize) {
    unreachable!("the bf16 dot-product kernel needs x86-64 AVX512-BF16")
}

#[cfg(test)]
mod tests {
    use half::bf16;
    use polytensor_core::{DataType, OutView, Result, Tensor, TensorView};

    use super::super::{bf16_dot_products, widened};
    use super::available;
    use crate::CpuDevice;

    type Kernel = fn(&TensorView<'_>, &TensorView<'_>, &mut OutView<'_>) -> Result<()>;

    /// Small integers: every product and sum is exact in f32, so both paths must agree
    /// bit for bit whatever their order of accumulation.
    fn integers(dims: &[usize], seed: usize) -> Tensor {
        let n: usize = dims.iter().product();
        let values: Vec<bf16> = (0..n)
            .map(|i| bf16::from_f32(((i * 7 + seed * 13) % 9) as f32 - 4.0))
            .collect();
        Tensor::from_slice(&values, dims, &CpuDevice::shared()).unwrap()
    }

    fn run(kernel: Kernel, a: &Tensor, b: &Tensor, dims: &[usize]) -> Vec<bf16> {
        let mut out = Tensor::zeros(dims, DataType::BFloat16, &CpuDevice::shared()).unwrap();
        kernel(&a.view(), &b.view(), &mut out.try_out_view().unwrap()).unwrap();
        out.to_vec::<bf16>().unwrap()
    }

    #[test]
    fn dot_products_match_widening_on_every_edge() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX512-BF16");
            return;
        }
        // Partial register tiles and strips, odd k, k across several KC blocks, batches,
        // and a transposed (strided) operand.
        for (batch, m, n, k) in [
            (1, 1, 1, 1),
            (1, 13, 33, 3),
            (1, 25, 47, 257),
            (1, 48, 64, 512),
            (2, 50, 31, 601),
            (3, 12, 32, 2),
        ] {
            let a = integers(&[batch, m, k], 1);
            let b_t = integers(&[batch, n, k], 2);
            let b = b_t.transpose(-1, -2).unwrap();
            let dims = [batch, m, n];
            let fast = run(bf16_dot_products, &a, &b, &dims);
            let wide = run(widened::matmul::<bf16>, &a, &b, &dims);
            assert_eq!(fast, wide, "batch {batch}, {m}x{k} @ {k}x{n}");
        }
    }

    #[test]
    fn nan_and_infinity_propagate() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX512-BF16");
            return;
        }
        let cpu = CpuDevice::shared();
        let a = Tensor::from_slice(
            &[bf16::NAN, bf16::ONE, bf16::INFINITY, bf16::ONE],
            [2, 2],
            &cpu,
        )
        .unwrap();
        let b = integers(&[2, 2], 3);
        let got = run(bf16_dot_products, &a, &b, &[2, 2]);
        assert!(got[0].is_nan() && got[1].is_nan(), "{got:?}");
        assert!(got[2].is_infinite() || got[2].is_nan(), "{got:?}");
    }
}
