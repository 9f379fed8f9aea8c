//! f16 and bf16 matmul at the f32 GEMM's speed, on CPUs without 16-bit float arithmetic.
//!
//! The products cost `m * n * k` multiply-adds; widening the operands costs `(m + n) * k`
//! conversions. So both operands are widened to f32 one k-panel at a time, as they are
//! packed for the GEMM: every thread converts a share of the panel (F16C `vcvtph2ps` for
//! f16, a shift for bf16) into a dense f32 copy that keeps the operand's orientation (rows
//! of a row-major operand, columns of a transposed one, so the conversion reads contiguous
//! runs). The f32 GEMM multiplies each pair of panels into one f32 accumulator, and the sums
//! are rounded to the 16-bit type once, at the end: products and sums are f32, as the
//! conformance bounds require. The speed is that of the f32 kernels the `gemm` crate picks
//! at run time (AVX-512, NEON, baseline). On AVX2 CPUs without AVX-512, [`matmul`] hands
//! each matrix to [`blocked`] instead, which converts as it packs for its own tile and so
//! saves this path's second packing pass (unless the matrix has too few rows to split).
//!
//! Scratch memory per matrix in flight: a panel of each operand (`(rows + n) * PANEL_K`
//! f32), an f32 accumulator for a block of output rows (at most `BLOCK` sums, or one row),
//! and, when the output has several row blocks, `b` widened whole (at most `WHOLE_B`).

use half::slice::HalfFloatSliceExt;
use polytensor_core::{OutView, Result, TensorView};
use rayon::prelude::*;

use super::{batch_runs_in_parallel, blocked, matrix_parallelism, Geometry};
use crate::scalar::FloatElem;
use crate::strided::{input, output};

/// A 16-bit float that widens to f32 exactly, element by element or a slice at a time.
pub(super) trait Widening: FloatElem<Compute = f32> + Sync {
    /// `dst[i] = src[i]` widened (F16C for f16 where the CPU has it, a shift for bf16).
    fn widen_slice(src: &[Self], dst: &mut [f32]);
    /// `dst[i] = src[i]` rounded to nearest, ties to even.
    fn narrow_slice(src: &[f32], dst: &mut [Self]);
}

macro_rules! widening_through_half {
    ($($t:ty),*) => {$(
        impl Widening for $t {
            fn widen_slice(src: &[Self], dst: &mut [f32]) {
                src.convert_to_f32_slice(dst);
            }
            fn narrow_slice(src: &[f32], dst: &mut [Self]) {
                dst.convert_from_f32_slice(src);
            }
        }
    )*};
}
widening_through_half!(half::f16, half::bf16);

/// k per panel: a panel pair of a 1024-wide matmul is 4 MiB of f32, and the accumulator is
/// read and written once per panel, a small fraction of the GEMM's own traffic.
const PANEL_K: usize = 512;
/// f32 sums per block of output rows: the accumulator is reused block after block, so a
/// large output costs no f32 copy of itself. (Small in tests, so that they reach every
/// branch.)
const BLOCK: usize = if cfg!(test) { 1 << 10 } else { 1 << 21 };
/// The most elements of `b` widened whole (64 MiB of f32), to be shared by every row block
/// rather than widened again for each.
const WHOLE_B: usize = if cfg!(test) { 1 << 12 } else { 1 << 24 };
/// Elements converted per parallel work item.
const GRAIN: usize = 1 << 14;

/// `out = a x b` for 16-bit floats, through f32: on the [`blocked`] AVX2 path where this
/// CPU takes it, else through the `gemm` crate's f32 kernels.
pub(super) fn matmul<H: Widening>(
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    matmul_on::<H>(a, b, out, blocked::available())
}

/// [`matmul`], on the blocked path if `blocked_path` (which must be
/// [`blocked::available`]) and the shape suits it.
fn matmul_on<H: Widening>(
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
    blocked_path: bool,
) -> Result<()> {
    let g = Geometry::of(a.layout(), b.layout(), out.layout())?;
    let (sa, sb, dst) = (input::<H>(a)?, input::<H>(b)?, output::<H>(out)?);
    let per_matrix = g.m * g.n;
    if per_matrix == 0 {
        return Ok(());
    }
    let one = |&[oa, ob, _]: &[isize; 3], out: &mut [H], parallelism| {
        let a = Strided::new(sa, oa, (g.m, g.k), (g.am, g.ak));
        let b = Strided::new(sb, ob, (g.k, g.n), (g.bk, g.bn));
        if blocked_path && g.k > 0 && blocked::suits(g.m, parallelism) {
            blocked::multiply(&a, &b, out, !matches!(parallelism, gemm::Parallelism::None));
        } else {
            multiply(&a, &b, out, parallelism);
        }
    };
    // The output is contiguous, so batch `i` owns `dst[i * m * n..][..m * n]`.
    if batch_runs_in_parallel(&g) {
        dst.par_chunks_mut(per_matrix)
            .zip(&g.starts)
            .for_each(|(out, start)| one(start, out, gemm::Parallelism::None));
    } else {
        let parallelism = matrix_parallelism(&g);
        dst.chunks_mut(per_matrix)
            .zip(&g.starts)
            .for_each(|(out, start)| one(start, out, parallelism));
    }
    Ok(())
}

/// A `rows x cols` matrix of 16-bit floats inside `data`, from `base`, with strides.
pub(super) struct Strided<'a, H> {
    pub(super) data: &'a [H],
    pub(super) base: isize,
    pub(super) dims: (usize, usize),
    pub(super) strides: (isize, isize),
}

impl<'a, H: Widening> Strided<'a, H> {
    fn new(data: &'a [H], base: isize, dims: (usize, usize), strides: (isize, isize)) -> Self {
        Strided {
            data,
            base,
            dims,
            strides,
        }
    }

    /// Columns `first..first + count` (rows of `b` when `self` is `b`) as a matrix of their
    /// own.
    fn columns(&self, first: usize, count: usize) -> Self {
        Strided {
            dims: (self.dims.0, count),
            base: self.base + first as isize * self.strides.1,
            ..*self
        }
    }

    fn rows(&self, first: usize, count: usize) -> Self {
        Strided {
            dims: (count, self.dims.1),
            base: self.base + first as isize * self.strides.0,
            ..*self
        }
    }

    /// A dense f32 copy in `dst` (resized to fit), made of lines along the unit stride
    /// (rows, or columns of a column-major matrix), widened in parallel. Returns the copy's
    /// `(row, column)` strides.
    fn widen_into(&self, dst: &mut Vec<f32>) -> (isize, isize) {
        let ((rows, cols), (rs, cs)) = (self.dims, self.strides);
        let column_major = cs != 1 && rs == 1;
        let (lines, len, line_stride, step) = if column_major {
            (cols, rows, cs, rs)
        } else {
            (rows, cols, rs, cs)
        };
        dst.resize(lines * len, 0.0);
        if let Some(fit) = GRAIN.checked_div(len) {
            let lines_per_item = fit.max(1);
            let widen_lines = |(item, block): (usize, &mut [f32])| {
                for (l, line) in block.chunks_exact_mut(len).enumerate() {
                    let start = self.base + ((item * lines_per_item + l) as isize) * line_stride;
                    if step == 1 {
                        let start = start as usize;
                        H::widen_slice(&self.data[start..start + len], line);
                    } else {
                        for (j, value) in line.iter_mut().enumerate() {
                            *value = self.data[(start + j as isize * step) as usize].widen();
                        }
                    }
                }
            };
            let items = dst.par_chunks_mut(lines_per_item * len).enumerate();
            if lines * len > GRAIN {
                items.for_each(widen_lines);
            } else {
                dst.chunks_mut(lines_per_item * len)
                    .enumerate()
                    .for_each(widen_lines);
            }
        }
        if column_major {
            (1, rows as isize)
        } else {
            (cols as isize, 1)
        }
    }
}

/// `out = a x b` (row-major `m x n`): a block of rows at a time, each summed in f32 one
/// k-panel pair at a time, then rounded into `out`.
fn multiply<H: Widening>(
    a: &Strided<'_, H>,
    b: &Strided<'_, H>,
    out: &mut [H],
    parallelism: gemm::Parallelism,
) {
    let ((m, k), n) = (a.dims, b.dims.1);
    if k == 0 {
        out.fill(H::narrow(0.0));
        return;
    }
    let mut scratch = Scratch::take();
    let Scratch {
        panel_a,
        panel_b,
        whole_b,
        acc,
    } = &mut scratch;
    let block_rows = (BLOCK / n).clamp(1, m);
    // With several row blocks, `b` is widened whole, once, where that fits.
    let whole_b_strides = (m > block_rows && k * n <= WHOLE_B).then(|| b.widen_into(whole_b));
    // Every sum is written by the first panel's GEMM (which does not read `acc`) before it
    // is read, so whatever an earlier call left in `acc` is never seen.
    acc.resize(block_rows * n, 0.0);
    for (block, out) in out.chunks_mut(block_rows * n).enumerate() {
        let rows = out.len() / n;
        let (a, acc) = (a.rows(block * block_rows, rows), &mut acc[..rows * n]);
        for k0 in (0..k).step_by(PANEL_K) {
            let depth = PANEL_K.min(k - k0);
            let (ars, acs) = a.columns(k0, depth).widen_into(panel_a);
            let (pb, (brs, bcs)) = match whole_b_strides {
                Some((rs, cs)) => (&whole_b[k0 * rs as usize..], (rs, cs)),
                None => {
                    let strides = b.rows(k0, depth).widen_into(panel_b);
                    (&panel_b[..], strides)
                }
            };
            // SAFETY: the panels are dense `rows x depth` and `depth x n` f32 matrices with
            // the strides `widen_into` returned (a panel of the whole of `b` starts at its
            // row `k0`), `acc` holds the row-major `rows x n` result, and nothing else
            // touches any of them during the call.
            unsafe {
                gemm::gemm(
                    rows,
                    n,
                    depth,
                    acc.as_mut_ptr(),
                    1,
                    n as isize,
                    k0 > 0,
                    panel_a.as_ptr(),
                    acs,
                    ars,
                    pb.as_ptr(),
                    bcs,
                    brs,
                    1.0,
                    1.0,
                    false,
                    false,
                    false,
                    parallelism,
                );
            }
        }
        narrow(acc, out);
    }
    scratch.keep();
}

/// The f32 buffers of one matrix product. A thread keeps its last one between calls while
/// it is at most `KEPT_SCRATCH` bytes, as `gemm` keeps its packing buffers: a fresh
/// allocation would fault in its pages again on every call.
#[derive(Default)]
struct Scratch {
    panel_a: Vec<f32>,
    panel_b: Vec<f32>,
    whole_b: Vec<f32>,
    acc: Vec<f32>,
}

/// The most scratch memory a thread keeps between calls (16 MiB: a 1024^3 product, or one
/// of 4096 x 256 x 4096, runs entirely in kept memory).
const KEPT_SCRATCH: usize = 16 << 20;

thread_local! {
    static KEPT: std::cell::Cell<Option<Scratch>> = const { std::cell::Cell::new(None) };
}

impl Scratch {
    /// This thread's kept scratch, or a new one (a nested call on the same thread, made
    /// while rayon waits, finds none and makes its own).
    fn take() -> Self {
        KEPT.take().unwrap_or_default()
    }

    /// Keep this scratch for the thread's next call, if it is small enough.
    fn keep(self) {
        let parts = [&self.panel_a, &self.panel_b, &self.whole_b, &self.acc];
        let bytes: usize = parts.iter().map(|v| v.capacity() * 4).sum();
        if bytes <= KEPT_SCRATCH {
            KEPT.set(Some(self));
        }
    }
}

/// Round f32 sums to the 16-bit type (nearest, ties to even), in parallel.
pub(super) fn narrow<H: Widening>(acc: &[f32], out: &mut [H]) {
    out.par_chunks_mut(GRAIN)
        .zip(acc.par_chunks(GRAIN))
        .for_each(|(o, a)| H::narrow_slice(a, o));
}

#[cfg(test)]
mod tests {
    use half::{bf16, f16};
    use polytensor_core::{DataType, Element, Tensor};

    use super::{blocked, matmul_on, Widening, PANEL_K};
    use crate::CpuDevice;

    /// Values whose products and sums are exact in f32 (small integers, halves), so the
    /// result is exact whatever the order of accumulation.
    fn exact<H: Element + Widening>(dims: &[usize], seed: usize) -> Tensor {
        let n: usize = dims.iter().product();
        let values: Vec<H> = (0..n)
            .map(|i| H::narrow(((i * 7 + seed * 13) % 9) as f32 * 0.5 - 2.0))
            .collect();
        Tensor::from_slice(&values, dims, &CpuDevice::shared()).unwrap()
    }

    /// The product by the definition, in f64, rounded once.
    fn reference<H: Element + Widening>(a: &Tensor, b: &Tensor) -> Vec<H> {
        let (da, db) = (a.shape().dims(), b.shape().dims());
        let (r, m, k, n) = (
            da.len(),
            da[da.len() - 2],
            da[da.len() - 1],
            db[db.len() - 1],
        );
        let batch: usize = da[..r - 2].iter().product();
        let (va, vb) = (
            a.contiguous().unwrap().to_vec::<H>().unwrap(),
            b.contiguous().unwrap().to_vec::<H>().unwrap(),
        );
        let mut out = Vec::new();
        for t in 0..batch {
            for i in 0..m {
                for j in 0..n {
                    let sum: f64 = (0..k)
                        .map(|p| {
                            let x = va[t * m * k + i * k + p].widen() as f64;
                            x * vb[t * k * n + p * n + j].widen() as f64
                        })
                        .sum();
                    out.push(H::narrow(sum as f32));
                }
            }
        }
        out
    }

    /// Every edge case on both paths: blocked (where this CPU has it) and `gemm`'s.
    fn check<H: Element + Widening>(dtype: DataType) {
        check_path::<H>(dtype, false);
        if blocked::available() {
            check_path::<H>(dtype, true);
        } else {
            eprintln!("blocked path skipped: this CPU has no AVX2 and FMA, or has AVX-512");
        }
    }

    fn check_path<H: Element + Widening>(dtype: DataType, blocked_path: bool) {
        // Partial panels, k across several panels, several row blocks (with `b` widened
        // whole, and again per block), batches run in parallel and one after another,
        // transposed and broadcast operands, empty dims.
        // Under Miri (slow, and its gemm runs the portable kernels) the small cases only.
        let cases: &[(usize, usize, usize, usize)] = &[
            (3, 12, 32, 0),
            (2, 0, 3, 4),
            (2, 70, 16, 2),
            (1, 1, 1, 1),
            (1, 13, 33, 3),
            (1, 100, 20, 30),
            (2, 200, 16, 40),
            (1, 70, 50, PANEL_K + 7),
            (4, 9, 5, 2 * PANEL_K + 1),
            (1, 300, 200, 100),
        ];
        for &(batch, m, n, k) in &cases[..if cfg!(miri) { 3 } else { cases.len() }] {
            let a = exact::<H>(&[batch, m, k], 1);
            let b = exact::<H>(&[batch, k, n], 2);
            let transposed_a = exact::<H>(&[batch, k, m], 3).transpose(-1, -2).unwrap();
            let transposed_b = exact::<H>(&[batch, n, k], 4).transpose(-1, -2).unwrap();
            for (a, b) in [(&a, &b), (&transposed_a, &b), (&a, &transposed_b)] {
                let mut out = Tensor::zeros([batch, m, n], dtype, &CpuDevice::shared()).unwrap();
                let mut view = out.try_out_view().unwrap();
                matmul_on::<H>(&a.view(), &b.view(), &mut view, blocked_path).unwrap();
                let want = reference::<H>(a, b);
                assert_eq!(
                    out.to_vec::<H>().unwrap(),
                    want,
                    "{batch} x {m}x{k} @ {k}x{n}"
                );
            }
        }
        // A row broadcast as a matrix (stride 0 along m), and an operand with no unit
        // stride (strides [2, 80]: every other element of a transposed matrix).
        let row = exact::<H>(&[1, 40], 5).broadcast_to([30, 40]).unwrap();
        let no_unit_stride = exact::<H>(&[20, 40, 2], 6)
            .narrow(2, 0, 1)
            .and_then(|t| t.squeeze(2))
            .and_then(|t| t.transpose(0, 1))
            .unwrap();
        let mut out = Tensor::zeros([30, 20], dtype, &CpuDevice::shared()).unwrap();
        let (a, b) = (row.view(), no_unit_stride.view());
        matmul_on::<H>(&a, &b, &mut out.try_out_view().unwrap(), blocked_path).unwrap();
        assert_eq!(
            out.to_vec::<H>().unwrap(),
            reference::<H>(&row, &no_unit_stride)
        );
    }

    #[test]
    fn f16_products_are_exact_where_f32_is() {
        check::<f16>(DataType::Half);
    }

    /// The bf16 fallback, forced: this is what runs on CPUs without AVX512-BF16.
    #[test]
    fn bf16_fallback_products_are_exact_where_f32_is() {
        check::<bf16>(DataType::BFloat16);
    }

    #[test]
    fn one_rounding_at_the_end() {
        // 1 + 2^-12 + ... : each partial sum rounded to f16 would lose the small terms.
        let k = 64;
        let a: Vec<f16> = (0..k)
            .map(|i| f16::from_f32(if i == 0 { 1.0 } else { 1.0 / 2048.0 }))
            .collect();
        let ones = vec![f16::ONE; k];
        let cpu = CpuDevice::shared();
        let a = Tensor::from_slice(&a, [1, k], &cpu).unwrap();
        let b = Tensor::from_slice(&ones, [k, 1], &cpu).unwrap();
        let mut out = Tensor::zeros([1, 1], DataType::Half, &cpu).unwrap();
        let want = f16::from_f32(1.0 + 63.0 / 2048.0);
        for blocked_path in [false, blocked::available()] {
            let mut view = out.try_out_view().unwrap();
            matmul_on::<f16>(&a.view(), &b.view(), &mut view, blocked_path).unwrap();
            assert_eq!(out.to_vec::<f16>().unwrap(), [want]);
        }
    }
}
