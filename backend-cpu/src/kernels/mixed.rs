//! f32 convolutions and dense layers with bf16 weights: the session's mixed-precision pass
//! (as oneDNN's auto mixed precision) rounds constant weights to bf16 once, when the plan is
//! made. Each
//! call rounds the activations to bf16 as it lays out the GEMM's rows and multiplies on
//! AVX512-BF16 (`vdpbf16ps`: twice the multiply-adds of an f32 FMA per instruction),
//! summing in f32; the epilogue and the result are f32.
//!
//! The filter is read as it is stored (`[k, filters]`, row-major): the register tile loads
//! two rows of it (k and k + 1) and interleaves them into the k-pairs the instruction
//! takes, so nothing is packed per call. The interleaving permutes the columns within
//! each 32-column strip, and the tile puts them back in order once, when it stores.
//!
//! Winograd's 3x3 path keeps its transforms in f32 and runs its 16 GEMMs here, on the
//! transformed filter rounded to bf16. Where the f32 kernels are not GEMMs (a first layer
//! of few channels, a depthwise convolution) or the CPU lacks the instructions, the filter
//! is widened back to f32 and those kernels run (`window.rs`): the weights are rounded
//! either way.

use std::cell::Cell;
use std::ops::Range;

use half::bf16;
use polytensor_core::plan::window::WindowGeometry;
use rayon::prelude::*;

use super::matmul::bf16_dot;
use super::stored::{self, for_rows, tiles, Weights, MR, NR};
use super::window::Finish;
use super::{kept, winograd};

/// k-pairs per block: a block of the filter's strip (256 k by 32 columns, 16 KiB) stays
/// in cache while every row of a work item passes over it.
const KC_PAIRS: usize = 128;

/// Whether the CPU multiplies in bf16 here (else the filter is widened for the f32
/// kernels): it has AVX512-BF16.
pub(super) fn multiplies() -> bool {
    bf16_dot::available()
}

/// Winograd's convolution (`winograd::conv_rounded`) with its 16 GEMMs in bf16. Requires
/// [`multiplies`].
pub(super) fn winograd(
    x: &[f32],
    f: &[bf16],
    g: &WindowGeometry,
    finish: &Finish<'_, f32>,
    out: &mut [f32],
) {
    let (c, k) = (g.channels, g.filters);
    winograd::conv_rounded(
        x,
        f,
        g,
        |u| {
            let mut bits = vec![0u16; u.len()];
            bits.par_chunks_mut(c * k)
                .zip(u.par_chunks(c * k))
                .for_each(|(bits, u)| round_to_bf16(u, bits));
            TransformedFilter { bits, c, k }
        },
        finish,
        out,
    );
}

/// Winograd's transformed filter rounded to bf16: 16 matrices of `[c, k]`, as bits.
struct TransformedFilter {
    bits: Vec<u16>,
    c: usize,
    k: usize,
}

thread_local! {
    /// Each thread's k-pair rows of the GEMMs' left operand, kept between calls.
    static PAIRS: Cell<Vec<u32>> = const { Cell::new(Vec::new()) };
}

impl winograd::Products<f32> for TransformedFilter {
    fn multiply(&self, xi: usize, v: &[f32], m: &mut [f32]) {
        let (c, k) = (self.c, self.k);
        let weights = Bf16Weights {
            bits: &self.bits[xi * c * k..][..c * k],
            k: c,
            n: k,
        };
        kept::with_kept(&PAIRS, 1 << 22, |pairs| {
            weights.lay_rows(v, pairs);
            m.fill(0.0);
            weights.multiply(pairs, 0..k, m);
        });
    }
}

/// `out = conv(x, f)` then `finish`, as an implicit GEMM in bf16 with f32 sums: `x` NHWC
/// f32, `f` HWIO bf16, `out` NHWC f32, all contiguous. Requires [`multiplies`].
pub(super) fn conv(
    x: &[f32],
    f: &[bf16],
    g: &WindowGeometry,
    finish: &Finish<'_, f32>,
    out: &mut [f32],
) {
    let k = g.windows[0].size * g.windows[1].size * g.channels;
    let weights = Bf16Weights {
        bits: bytemuck::cast_slice(f),
        k,
        n: g.filters,
    };
    stored::conv(x, &weights, g, finish, out);
}

/// `out = x w` for an f32 `x` of `[rows, k]` (row-major) and a bf16 `w` of `[k, n]`
/// (row-major), `out` `[rows, n]`: a dense layer with rounded weights. Requires
/// [`multiplies`].
pub(crate) fn matmul(x: &[f32], w: &[bf16], k: usize, n: usize, out: &mut [f32]) {
    let weights = Bf16Weights {
        bits: bytemuck::cast_slice(w),
        k,
        n,
    };
    stored::matmul(x, &weights, out);
}

/// `dst[i] = src[i]` rounded to the nearest bf16, ties to even (NaN stays NaN), as bits.
fn round_to_bf16(src: &[f32], dst: &mut [u16]) {
    #[cfg(target_arch = "x86_64")]
    if bf16_dot::available() {
        // SAFETY: `available()` says the CPU has AVX-512F and AVX512-BF16.
        return unsafe { round_to_bf16_avx512(src, dst) };
    }
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = bf16::from_f32(s).to_bits();
    }
}

/// [`round_to_bf16`] 16 lanes at a time (`vcvtneps2bf16`: nearest, ties to even).
///
/// # Safety
///
/// The CPU has AVX-512F and AVX512-BF16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn round_to_bf16_avx512(src: &[f32], dst: &mut [u16]) {
    use std::arch::x86_64::*;
    let n = src.len().min(dst.len());
    let whole = n / 16 * 16;
    for (s, d) in src[..whole]
        .chunks_exact(16)
        .zip(dst[..whole].chunks_exact_mut(16))
    {
        // SAFETY: 16 f32 read from `s` and 16 u16 written to `d`, both that long
        // (unaligned); `__m256bh` and `__m256i` are both 32 bytes.
        unsafe {
            let rounded = _mm512_cvtneps_pbh(_mm512_loadu_ps(s.as_ptr()));
            let bits: __m256i = std::mem::transmute(rounded);
            _mm256_storeu_si256(d.as_mut_ptr().cast(), bits);
        }
    }
    for (d, &s) in dst[whole..n].iter_mut().zip(&src[whole..n]) {
        *d = half::bf16::from_f32(s).to_bits();
    }
}

/// bf16 weights as the GEMM's right operand: `[k, n]`, row-major, as bits.
struct Bf16Weights<'a> {
    bits: &'a [u16],
    k: usize,
    n: usize,
}

impl Weights for Bf16Weights<'_> {
    type Lane = u32;

    fn k(&self) -> usize {
        self.k
    }

    fn n(&self) -> usize {
        self.n
    }

    /// Each row rounded to bf16 and zero-padded to whole k-pairs, as 32-bit lanes (the
    /// even k in the low half).
    fn lay_rows(&self, src: &[f32], pairs: &mut Vec<u32>) {
        let (k, per_row) = (self.k, self.k.div_ceil(2));
        pairs.clear();
        pairs.resize(src.len() / k * per_row, 0);
        for (row, lanes) in src.chunks_exact(k).zip(pairs.chunks_exact_mut(per_row)) {
            round_to_bf16(row, &mut bytemuck::cast_slice_mut::<u32, u16>(lanes)[..k]);
        }
    }

    fn multiply(&self, a: &[u32], columns: Range<usize>, c: &mut [f32]) {
        let (k, n) = (self.k, self.n);
        let lda = k.div_ceil(2);
        let rows = a.len() / lda;
        let ldc = columns.len();
        assert!(
            self.bits.len() == k * n
                && columns.end <= n
                && columns.start.is_multiple_of(NR)
                && a.len() == rows * lda
                && c.len() == rows * ldc,
            "mixed GEMM operands"
        );
        tiles(
            rows,
            lda,
            KC_PAIRS,
            columns.clone(),
            |r0, tile_rows, pairs, j0, cols| {
                let tile = Tile {
                    a: &a[r0 * lda..],
                    lda,
                    b: &self.bits[j0..],
                    n,
                    k,
                    pairs,
                    c: &mut c[r0 * ldc + j0 - columns.start..],
                    ldc,
                    cols,
                };
                // SAFETY: the caller runs this only where `multiplies` (AVX512-BF16); the
                // tile's bounds are checked by `rows`.
                for_rows!(tile_rows, R => unsafe { tile.rows::<R>() })
            },
        );
    }
}

/// One register tile: `c[r][j] += sum over pairs q of a[r][q] . (b[2q][j], b[2q + 1][j])`
/// for `r` below the tile's rows and `j < cols`.
struct Tile<'a> {
    /// The tile's first row of k-pairs (rows `lda` apart).
    a: &'a [u32],
    lda: usize,
    /// The filter from the tile's first column (rows `n` apart, `k` of them).
    b: &'a [u16],
    n: usize,
    k: usize,
    /// The k-pairs this block sums.
    pairs: Range<usize>,
    /// The tile's first output (rows `ldc` apart).
    c: &'a mut [f32],
    ldc: usize,
    cols: usize,
}

impl Tile<'_> {
    /// The tile for `R` rows.
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512F/BW and AVX512-BF16.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    unsafe fn rows<const R: usize>(self) {
        use std::arch::x86_64::*;
        let Tile {
            a,
            lda,
            b,
            n,
            k,
            pairs,
            c,
            ldc,
            cols,
        } = self;
        assert!(
            R <= MR
                && cols <= NR
                && pairs.end <= lda
                && a.len() >= (R - 1) * lda + pairs.end
                && b.len() >= (k - 1) * n + cols
                && c.len() >= (R - 1) * ldc + cols,
            "mixed GEMM tile bounds"
        );
        let load: __mmask32 = if cols == NR { !0 } else { (1 << cols) - 1 };
        let mut acc = [[_mm512_setzero_ps(); 2]; R];
        for q in pairs {
            // Filter rows 2q and 2q + 1 (zero past k), interleaved into k-pair lanes:
            // 128-bit lane L of `lo` holds columns 8L..8L + 4, of `hi` 8L + 4..8L + 8.
            // SAFETY: rows 2q and 2q + 1 < k start inside `b` and `cols` lanes of each are
            // read (the assertion); masked lanes are not read.
            let (lo, hi) = unsafe {
                let even = _mm512_maskz_loadu_epi16(load, b.as_ptr().add(2 * q * n).cast());
                let odd = if 2 * q + 1 < k {
                    _mm512_maskz_loadu_epi16(load, b.as_ptr().add((2 * q + 1) * n).cast())
                } else {
                    _mm512_setzero_si512()
                };
                let lo = _mm512_unpacklo_epi16(even, odd);
                let hi = _mm512_unpackhi_epi16(even, odd);
                (
                    std::mem::transmute::<__m512i, __m512bh>(lo),
                    std::mem::transmute::<__m512i, __m512bh>(hi),
                )
            };
            for (r, sums) in acc.iter_mut().enumerate() {
                let pair = _mm512_set1_epi32(a[r * lda + q] as i32);
                // SAFETY: both are 64 bytes of lanes.
                let pair: __m512bh = unsafe { std::mem::transmute(pair) };
                sums[0] = _mm512_dpbf16_ps(sums[0], pair, lo);
                sums[1] = _mm512_dpbf16_ps(sums[1], pair, hi);
            }
        }
        // Columns back in order: [lo 0..4, hi 0..4, lo 4..8, hi 4..8] and so on.
        let first = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
        let second =
            _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
        for (r, [lo, hi]) in acc.into_iter().enumerate() {
            let halves = [
                _mm512_permutex2var_ps(lo, first, hi),
                _mm512_permutex2var_ps(lo, second, hi),
            ];
            for (half, sums) in halves.into_iter().enumerate() {
                let lanes = cols.saturating_sub(half * 16).min(16);
                if lanes == 0 {
                    continue;
                }
                let mask: __mmask16 = if lanes == 16 { !0 } else { (1 << lanes) - 1 };
                // SAFETY: lanes `[r * ldc + 16 * half, + lanes)` are inside `c` (the
                // assertion); masked lanes are neither read nor written.
                unsafe {
                    let at = c.as_mut_ptr().add(r * ldc + 16 * half);
                    let old = _mm512_maskz_loadu_ps(mask, at);
                    _mm512_mask_storeu_ps(at, mask, _mm512_add_ps(old, sums));
                }
            }
        }
    }

    /// Never called: the kernel runs only where AVX512-BF16 is ([`multiplies`]).
    #[cfg(not(target_arch = "x86_64"))]
    unsafe fn rows<const R: usize>(self) {
        unreachable!("the mixed-precision GEMM needs x86-64 AVX512-BF16")
    }
}

#[cfg(test)]
mod tests {
    use half::bf16;
    use polytensor_core::{Conv2dOptions, ConvEpilogue, DataType, Padding, Tensor, UnaryOp};

    use crate::CpuDevice;

    use crate::kernels::test_data::{integers, shift};

    #[test]
    fn bf16_filters_give_the_f32_kernels_bits_on_every_edge() {
        if !super::bf16_dot::available() {
            eprintln!("skipped: this CPU has no AVX512-BF16");
            return;
        }
        let cpu = CpuDevice::shared();
        // (batch, h, w, channels, window, stride, filters, padding): pointwise, im2col, odd
        // k, partial column strips, one row and few rows (the columns split), many rows;
        // then Winograd's path.
        let cases = [
            (1, 2, 2, 64, 1, 1, 45, Padding::Valid),
            (1, 1, 1, 7, 3, 1, 33, Padding::Same),
            (2, 9, 11, 9, 3, 2, 70, Padding::Same),
            (3, 20, 20, 16, 1, 1, 64, Padding::Valid),
            (
                1,
                6,
                6,
                32,
                3,
                1,
                200,
                Padding::Explicit(vec![(2, 0), (1, 1)]),
            ),
            (4, 17, 13, 24, 5, 1, 31, Padding::Valid),
            (1, 2, 2, 300, 3, 1, 96, Padding::Same),
            // Winograd's F(2x2, 3x3), its GEMMs in bf16, where the f32 kernels take it too
            // (images or batches too small for F(4x4, 3x3)): one block a thread, few, and
            // odd sizes.
            (32, 9, 9, 96, 3, 1, 96, Padding::Same),
            (2, 16, 16, 256, 3, 1, 256, Padding::Same),
            (1, 17, 35, 256, 3, 1, 128, Padding::Valid),
        ];
        for (batch, h, w, c, window, stride, filters, padding) in cases {
            let x = integers(&[batch, h, w, c], 1, 0.25);
            let x = Tensor::from_slice(&x, [batch, h, w, c], &cpu).unwrap();
            let f = integers(&[window, window, c, filters], 2, 1.0);
            let f: Vec<bf16> = f.into_iter().map(bf16::from_f32).collect();
            let f = Tensor::from_slice(&f, [window, window, c, filters], &cpu).unwrap();
            let options = Conv2dOptions {
                strides: [stride, stride],
                padding: padding.clone(),
                ..Conv2dOptions::default()
            };
            let shift = shift(filters, &cpu);
            let wide = f.cast(DataType::Float).unwrap();
            let plain = x.conv2d(&wide, &options).unwrap();
            let residual = integers(&plain.dims(), 5, 2.0);
            let residual = Tensor::from_slice(&residual, plain.dims(), &cpu).unwrap();
            let epilogue = ConvEpilogue {
                shift: Some(shift.clone()),
                residual: Some(residual.clone()),
                activation: Some(UnaryOp::Relu),
                ..ConvEpilogue::default()
            };
            let mixed = x.conv2d_fused(&f, &options, false, &epilogue).unwrap();
            let want = x.conv2d_fused(&wide, &options, false, &epilogue).unwrap();
            let case = format!(
                "batch {batch}, {h}x{w}x{c}, window {window}, stride {stride}, {filters} filters"
            );
            assert_eq!(mixed.dims(), want.dims());
            assert_eq!(
                mixed.to_vec::<f32>().unwrap(),
                want.to_vec::<f32>().unwrap(),
                "{case}"
            );
            // The f32 kernels' epilogue (each block finding its rows of the residual) is
            // the ops one after another.
            let ops = plain.add(&shift).unwrap().add(&residual).unwrap();
            let ops = ops.unary(UnaryOp::Relu).unwrap();
            assert_eq!(
                want.to_vec::<f32>().unwrap(),
                ops.to_vec::<f32>().unwrap(),
                "{case}"
            );
        }
    }

    #[test]
    fn bf16_weights_give_the_f32_matmuls_bits() {
        if !super::bf16_dot::available() {
            eprintln!("skipped: this CPU has no AVX512-BF16");
            return;
        }
        let cpu = CpuDevice::shared();
        // One row (columns split), a tile's worth, odd k, partial strips, batches, and
        // both operands transposed (made contiguous first).
        for (batch, m, k, n, transposed) in [
            (1, 1, 4096, 300, false),
            (1, 5, 7, 33, false),
            (3, 47, 129, 64, false),
            (2, 200, 64, 512, false),
            (1, 30, 40, 50, true),
        ] {
            let a = integers(&[batch, m, k], 3, 0.25);
            let a = Tensor::from_slice(&a, [batch, m, k], &cpu).unwrap();
            let w = integers(&[k, n], 4, 1.0);
            let w: Vec<bf16> = w.into_iter().map(bf16::from_f32).collect();
            let w = Tensor::from_slice(&w, [k, n], &cpu).unwrap();
            let (a, w) = if transposed {
                let a = a.transpose(-1, -2).unwrap().contiguous().unwrap();
                let w = w.transpose(0, 1).unwrap().contiguous().unwrap();
                (a, w)
            } else {
                (a, w)
            };
            let mixed = a.matmul_t(&w, transposed, transposed).unwrap();
            let wide = w.cast(DataType::Float).unwrap();
            let want = a.matmul_t(&wide, transposed, transposed).unwrap();
            assert_eq!(mixed.dims(), want.dims());
            assert_eq!(
                mixed.to_vec::<f32>().unwrap(),
                want.to_vec::<f32>().unwrap(),
                "[{batch}, {m}, {k}] x [{k}, {n}]"
            );
        }
        // Weights with batch dims are not a matrix: their dtype must be the operand's.
        let a = Tensor::from_slice(&[1f32; 4], [1, 2, 2], &cpu).unwrap();
        let w = Tensor::from_slice(&[bf16::ONE; 4], [1, 2, 2], &cpu).unwrap();
        let error = a.matmul(&w).unwrap_err().to_string();
        assert!(error.contains("bfloat16"), "{error}");
    }

    #[test]
    fn activations_are_rounded_to_bf16_and_summed_in_f32() {
        if !super::bf16_dot::available() {
            eprintln!("skipped: this CPU has no AVX512-BF16");
            return;
        }
        let cpu = CpuDevice::shared();
        // 1 + 2^-10 rounds to 1 in bf16; 64 of them summed in f32 give 64, where f32
        // products would give 64.0625. NaN in one pixel spreads to its outputs only.
        let mut x = vec![1.0 + 2f32.powi(-10); 2 * 64];
        x[64] = f32::NAN;
        let x = Tensor::from_slice(&x, [1, 1, 2, 64], &cpu).unwrap();
        let f = Tensor::from_slice(&[bf16::ONE; 64], [1, 1, 64, 1], &cpu).unwrap();
        let y = x.conv2d(&f, &Conv2dOptions::default()).unwrap();
        let y = y.to_vec::<f32>().unwrap();
        assert_eq!(y[0], 64.0);
        assert!(y[1].is_nan(), "{y:?}");
    }
}
