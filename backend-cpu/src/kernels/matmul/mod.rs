//! Batched matmul over strided operands: `[batch.., m, k] x [batch.., k, n]`.
//!
//! f32, f64 and complex go to the `gemm` crate (packed AVX-512 / AVX2+FMA kernels chosen
//! at run time), which takes any strides, so views need no copy. bf16 runs on AVX512-BF16
//! dot-product instructions where the CPU has them ([`bf16_dot`]). Otherwise f16 and bf16
//! are widened to f32 as they are packed, multiplied in f32 and rounded once: by an own
//! AVX2 register tile on AVX2 CPUs without AVX-512 ([`blocked`], [`avx2`]), else by the f32
//! GEMM panel by panel ([`widened`]). Sums are f32, as the conformance tolerances require
//! (gemm's own f16 path rounds partial sums to f16). Integer matmul (wrapping) is a plain
//! i-k-j loop.
//! Small matrices in a batch are multiplied in parallel over the batch, one thread per
//! matrix; large ones one after another, each on every thread.

use num_complex::Complex;
use polytensor_core::layout::contiguous_strides;
use polytensor_core::plan::MatmulDims;
use polytensor_core::{Element, Layout, OutView, Result, StridedRows, TensorView};
use rayon::prelude::*;

use super::unsupported;
use crate::scalar::IntElem;
use crate::strided::{input, output};

mod avx2;
pub(crate) mod bf16_dot;
mod blocked;
pub(crate) mod few_rows;
mod widened;

pub(crate) fn matmul(a: &TensorView<'_>, b: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
    use polytensor_core::DataType as D;
    match a.dtype() {
        D::Float if b.dtype() == D::BFloat16 => rounded_weights(a, b, out),
        D::Float => {
            let (g, sa, sb, dst) = checked::<f32>(a, b, out)?;
            if !few_rows_times_matrix(&g, sa, sb, dst) {
                // SAFETY: as in `gemm_typed`.
                unsafe { run_gemm(&g, Operands(sa.as_ptr(), sb.as_ptr(), dst.as_mut_ptr())) };
            }
            Ok(())
        }
        D::Double => gemm_typed::<f64>(a, b, out),
        D::Half => widened::matmul::<half::f16>(a, b, out),
        D::Complex64 => gemm_typed::<Complex<f32>>(a, b, out),
        D::Complex128 => gemm_typed::<Complex<f64>>(a, b, out),
        D::BFloat16 if bf16_dot::available() => bf16_dot_products(a, b, out),
        D::BFloat16 => widened::matmul::<half::bf16>(a, b, out),
        D::Int32 => integer_matmul::<i32>(a, b, out),
        D::Int64 => integer_matmul::<i64>(a, b, out),
        _ => Err(unsupported("matmul", a)),
    }
}

/// Matrix sizes and strides of one matmul call, and where each batch's matrices start.
struct Geometry {
    m: usize,
    n: usize,
    k: usize,
    /// Strides of `a` along m and k, and of `b` along k and n.
    am: isize,
    ak: isize,
    bk: isize,
    bn: isize,
    /// `[a, b, out]` element offsets of each batch's matrices, in row-major batch order.
    starts: Vec<[isize; 3]>,
}

impl Geometry {
    fn of(la: &Layout, lb: &Layout, lo: &Layout) -> Result<Self> {
        let MatmulDims { batch, m, k, n } = MatmulDims::of(la.shape(), lb.shape(), lo.shape())?;
        let r = batch.len();
        let (sa, sb, so) = (la.strides(), lb.strides(), contiguous_strides(lo.shape()));
        let rows = StridedRows::new(
            &batch,
            [&sa[..r], &sb[..r], &so[..r]],
            [la.offset() as isize, lb.offset() as isize, 0],
        );
        let (len, [ia, ib, io]) = (rows.row_len(), rows.inner_strides());
        let starts = rows
            .flat_map(|[a, b, o]| {
                (0..len as isize).map(move |i| [a + i * ia, b + i * ib, o + i * io])
            })
            .collect();
        Ok(Geometry {
            m,
            n,
            k,
            am: sa[r],
            ak: sa[r + 1],
            bk: sb[r],
            bn: sb[r + 1],
            starts,
        })
    }

    fn flops(&self) -> usize {
        self.m * self.n * self.k
    }
}

/// Element types the `gemm` crate multiplies (it dispatches on the type at run time).
/// An element type `gemm` multiplies.
pub(crate) trait GemmElem: Element + num_traits::Zero + num_traits::One {}
impl GemmElem for f32 {}
impl GemmElem for f64 {}
impl GemmElem for Complex<f32> {}
impl GemmElem for Complex<f64> {}

/// Below this many multiply-adds per matrix, a batch runs one matrix per thread.
const SMALL_MATMUL: usize = 1 << 22;
/// Below this many multiply-adds, one matrix runs on one thread.
const SINGLE_THREAD_MATMUL: usize = 1 << 15;

/// Raw operand pointers that may cross threads: each batch writes its own disjoint output
/// matrix, and the inputs are only read.
#[derive(Clone, Copy)]
struct Operands<T>(*const T, *const T, *mut T);
// SAFETY: see the type's docs; the threads of one matmul call are joined before it returns.
unsafe impl<T> Send for Operands<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Operands<T> {}

impl<T> Operands<T> {
    /// The pointers (a method, so closures capture the `Send` wrapper, not its fields).
    fn parts(self) -> (*const T, *const T, *mut T) {
        (self.0, self.1, self.2)
    }
}

/// Whether a batch runs one matrix per thread (small matrices), rather than one matrix
/// after another, each with [`matrix_parallelism`].
fn batch_runs_in_parallel(g: &Geometry) -> bool {
    g.starts.len() > 1 && g.flops() < SMALL_MATMUL
}

/// How many threads `gemm` uses for one matrix of `g` when matrices run one after another.
fn matrix_parallelism(g: &Geometry) -> gemm::Parallelism {
    match rayon::current_num_threads() {
        threads if threads > 1 && g.flops() >= SINGLE_THREAD_MATMUL => {
            gemm::Parallelism::Rayon(threads)
        }
        _ => gemm::Parallelism::None,
    }
}

/// Multiply every batch with `gemm` (`dst = lhs x rhs`).
///
/// # Safety
///
/// `operands` must point at buffers where every position that `g` reaches is valid, the
/// output must be disjoint from the inputs and written by nothing else during the call.
unsafe fn run_gemm<T: GemmElem>(g: &Geometry, operands: Operands<T>) {
    let one = |&[oa, ob, oo]: &[isize; 3], parallelism: gemm::Parallelism| {
        let (a, b, dst) = operands.parts();
        // SAFETY: guaranteed by the caller; batches write disjoint output matrices.
        unsafe {
            gemm::gemm(
                g.m,
                g.n,
                g.k,
                dst.offset(oo),
                1,
                g.n as isize,
                false,
                a.offset(oa),
                g.ak,
                g.am,
                b.offset(ob),
                g.bn,
                g.bk,
                T::zero(),
                T::one(),
                false,
                false,
                false,
                parallelism,
            );
        }
    };
    if batch_runs_in_parallel(g) {
        g.starts
            .par_iter()
            .for_each(|s| one(s, gemm::Parallelism::None));
    } else {
        let parallelism = matrix_parallelism(g);
        g.starts.iter().for_each(|s| one(s, parallelism));
    }
}

/// The geometry of a matmul whose operands and output are host elements of type `T`, and
/// those elements.
type Checked<'a, 'o, T> = (Geometry, &'a [T], &'a [T], &'o mut [T]);

fn checked<'a, 'o, T: Element>(
    a: &TensorView<'a>,
    b: &TensorView<'a>,
    out: &'o mut OutView<'_>,
) -> Result<Checked<'a, 'o, T>> {
    let g = Geometry::of(a.layout(), b.layout(), out.layout())?;
    Ok((g, input::<T>(a)?, input::<T>(b)?, output::<T>(out)?))
}

fn gemm_typed<T: GemmElem>(
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    let (g, sa, sb, dst) = checked::<T>(a, b, out)?;
    // SAFETY: the input layouts were checked against their buffers when the tensors were
    // made and `Geometry::of` checked that the shapes agree, so every position gemm reads
    // is inside `sa` / `sb`; `dst` is the uniquely owned contiguous output.
    unsafe { run_gemm(&g, Operands(sa.as_ptr(), sb.as_ptr(), dst.as_mut_ptr())) };
    Ok(())
}

/// Below this many elements of `b`, a product of few rows goes to `gemm` (in cache, its
/// packed kernel is the faster).
const FEW_ROWS_MATRIX: usize = 1 << 18;

/// A few rows times a large matrix whose rows are contiguous (a dense layer at batch 8 or
/// less: VGG16's 4096 x 4096 weights at batch 1) by [`few_rows`], which reads `b` once, in
/// order: bound by memory, which `gemm`'s packing read twice. Returns `false` (nothing
/// done) for any other shape.
fn few_rows_times_matrix(g: &Geometry, a: &[f32], b: &[f32], out: &mut [f32]) -> bool {
    let [oa, ob, oo] = match g.starts[..] {
        [start] => start,
        _ => return false,
    };
    let (m, n, k) = (g.m, g.n, g.k);
    let rows_apart = |stride: isize, len: usize| usize::try_from(stride).ok().filter(|&s| s >= len);
    let (Some(a_rows), Some(b_rows)) = (
        rows_apart(g.am, k).or((m == 1).then_some(k)),
        rows_apart(g.bk, n),
    ) else {
        return false;
    };
    let (oa, ob, oo) = (oa as usize, ob as usize, oo as usize);
    if m > few_rows::FEW_ROWS
        || g.ak != 1
        || g.bn != 1
        || k * n < FEW_ROWS_MATRIX
        || spans(k, b_rows, n).saturating_add(ob) > b.len()
    {
        return false;
    }
    few_rows::multiply(
        (m, n, k),
        (&a[oa..], a_rows),
        (&b[ob..], b_rows),
        &mut out[oo..],
    );
    true
}

/// `out = a x b` for row-major `a` (`m x k`), `b` (`k x n`) and `out` (`m x n`), on this
/// thread (callers run several at once).
pub(crate) fn gemm_rows<T: GemmElem>(
    m: usize,
    n: usize,
    k: usize,
    a: &[T],
    b: &[T],
    out: &mut [T],
) {
    gemm_rows_apart((m, n, k), (a, k), b, out);
}

/// [`gemm_rows`] with the rows of `a` (`k` values each) `a_rows` elements apart, which may
/// overlap (`a_rows < k`: a 1-D convolution's windows read from its input in place).
pub(crate) fn gemm_rows_apart<T: GemmElem>(
    (m, n, k): (usize, usize, usize),
    (a, a_rows): (&[T], usize),
    b: &[T],
    out: &mut [T],
) {
    assert!(
        spans(m, a_rows, k) <= a.len() && b.len() >= k * n && out.len() >= m * n,
        "gemm_rows operands"
    );
    // SAFETY: the assertion keeps every position read or written (`a`'s rows `a_rows`
    // apart, `b` and `out` row-major with the given dims) inside the slices; `out` is
    // borrowed mutably, so nothing else reads it.
    unsafe {
        gemm_block_of(
            (m, n, k),
            (a.as_ptr(), a_rows),
            (b.as_ptr(), n),
            (out.as_mut_ptr(), n),
        )
    };
}

/// The elements that `rows` rows of `len` values, `apart` elements apart, span (0 for
/// none; saturating, so that an assertion against a slice's length holds or fails).
fn spans(rows: usize, apart: usize, len: usize) -> usize {
    match rows {
        0 => 0,
        _ => (rows - 1).saturating_mul(apart).saturating_add(len),
    }
}

/// [`gemm_rows_apart`] with the columns split across the pool's threads: each thread packs
/// and multiplies only its part of `b`, what a GEMM of few rows (a late layer of a small
/// image) needs to use every core without packing all of `b` on each.
pub(crate) fn gemm_columns<T: GemmElem>(
    (m, n, k): (usize, usize, usize),
    (a, a_rows): (&[T], usize),
    b: &[T],
    out: &mut [T],
) {
    assert!(
        spans(m, a_rows, k) <= a.len() && b.len() >= k * n && out.len() >= m * n,
        "gemm_columns operands"
    );
    let threads = rayon::current_num_threads().max(1);
    // Whole registers of columns per part.
    let width = n.div_ceil(threads).next_multiple_of(16).min(n).max(1);
    let operands = Operands(a.as_ptr(), b.as_ptr(), out.as_mut_ptr());
    (0..n.div_ceil(width)).into_par_iter().for_each(|part| {
        let (a, b, out) = operands.parts();
        let columns = part * width..n.min((part + 1) * width);
        // SAFETY: the assertion keeps every position read or written inside the slices;
        // each part writes its own columns of `out` (rows `n` apart), which is borrowed
        // mutably for the call, and the parts are joined before it returns.
        unsafe {
            gemm_block_of(
                (m, columns.len(), k),
                (a, a_rows),
                (b.add(columns.start), n),
                (out.add(columns.start), n),
            );
        }
    });
}

/// `out = a x b` for row-major `a` (`m x k`, rows `a_rows` apart as [`gemm_rows_apart`]
/// takes them) and `out` (`m x n`), `b` laid out in strips of `width` columns
/// (`[ceil(n / width), k, width]`, each strip contiguous, the last padded: a filter packed
/// by `Device::filter_strip`), one `gemm` per strip, so that each reads its part of `b`
/// from memory in order. `parallel`: the strips split across the pool's threads (a GEMM of
/// few rows); else on this thread.
pub(crate) fn gemm_strips<T: GemmElem>(
    (m, n, k): (usize, usize, usize),
    (a, a_rows): (&[T], usize),
    b: &[T],
    width: usize,
    out: &mut [T],
    parallel: bool,
) {
    let strips = n.div_ceil(width.max(1));
    assert!(
        width > 0
            && spans(m, a_rows, k) <= a.len()
            && b.len() >= strips.saturating_mul(k).saturating_mul(width)
            && out.len() >= m * n,
        "gemm_strips operands"
    );
    let operands = Operands(a.as_ptr(), b.as_ptr(), out.as_mut_ptr());
    let strip = |s: usize| {
        let (a, b, out) = operands.parts();
        // The strip's columns (fewer in a padded last strip).
        let columns = width.min(n - s * width);
        // SAFETY: the assertion keeps every position read or written inside the slices:
        // strip `s` is `k * width` elements of `b` from `s * k * width`, of which the
        // `columns` first of each row are read, and writes columns `s * width..` (`columns`
        // of them, within `n`) of the `m` rows of `out` (row stride `n`), which no other
        // strip writes; `out` is borrowed mutably for the call, and parallel strips are
        // joined before it returns.
        unsafe {
            gemm_block_of(
                (m, columns, k),
                (a, a_rows),
                (b.add(s * k * width), width),
                (out.add(s * width), n),
            );
        }
    };
    if parallel {
        (0..strips).into_par_iter().for_each(strip);
    } else {
        (0..strips).for_each(strip);
    }
}

/// `out = a x b` on this thread for row-major `a` (`m x k`, rows `a_rows` apart), `b` (`k x n`,
/// rows `b_rows` apart) and `out` (`m x n`, rows `out_rows` apart): one block of columns of
/// a larger product.
///
/// # Safety
///
/// Every row and column given lies inside its allocation; nothing else reads or writes
/// those elements of `out` during the call.
unsafe fn gemm_block_of<T: GemmElem>(
    (m, n, k): (usize, usize, usize),
    (a, a_rows): (*const T, usize),
    (b, b_rows): (*const T, usize),
    (out, out_rows): (*mut T, usize),
) {
    // SAFETY: the caller's contract.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out,
            1,
            out_rows as isize,
            false,
            a,
            1,
            a_rows as isize,
            b,
            1,
            b_rows as isize,
            T::zero(),
            T::one(),
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// An f32 `a` times bf16 weights (`Device::bf16_weights`): every batch's rows as one GEMM
/// in bf16 with f32 sums (`mixed.rs`). `a` and `b` must be contiguous, `b` a matrix.
fn rounded_weights(a: &TensorView<'_>, b: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
    let (la, lb) = (a.layout(), b.layout());
    let (bd, ad) = (lb.shape().dims(), la.shape().dims());
    let (sa, sb, dst) = (
        input::<f32>(a)?,
        input::<half::bf16>(b)?,
        output::<f32>(out)?,
    );
    if bd.first() == Some(&0) {
        // An empty sum.
        dst.fill(0.0);
        return Ok(());
    }
    match (&bd[..], ad.last()) {
        (&[k, n], Some(&ka))
            if k == ka
                && la.is_contiguous()
                && lb.is_contiguous()
                && dst.len() == la.shape().num_elements() / k.max(1) * n
                && super::mixed::multiplies() =>
        {
            let (a0, b0) = (la.offset(), lb.offset());
            let a = &sa[a0..a0 + la.shape().num_elements()];
            super::mixed::matmul(a, &sb[b0..b0 + k * n], k, n, dst);
            Ok(())
        }
        _ => Err(polytensor_core::Error::invalid(format!(
            "matmul of f32 by bf16 weights needs a contiguous f32 operand, a contiguous \
             bf16 matrix and AVX512-BF16; got {} by {}",
            la.shape(),
            lb.shape()
        ))),
    }
}

/// A bf16 matmul on AVX512-BF16, one batch after another, each on every thread.
fn bf16_dot_products(a: &TensorView<'_>, b: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
    let (g, sa, sb, dst) = checked::<half::bf16>(a, b, out)?;
    let mut acc = vec![0f32; g.m * g.n];
    for &[oa, ob, oo] in &g.starts {
        acc.fill(0.0);
        bf16_dot::multiply(&g, sa, oa, sb, ob, &mut acc);
        let oo = oo as usize;
        widened::narrow(&acc, &mut dst[oo..oo + g.m * g.n]);
    }
    Ok(())
}

/// An integer element type the plain loop runs on, with its (wrapping) accumulator.
trait IntegerMatmul: IntElem {}
impl IntegerMatmul for i32 {}
impl IntegerMatmul for i64 {}

fn integer_matmul<T: IntegerMatmul>(
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    let (g, sa, sb, dst) = checked::<T>(a, b, out)?;
    let at = |base: isize, i: usize, s: isize| (base + i as isize * s) as usize;
    let mut acc = vec![T::ZERO; g.n];
    for &[base_a, base_b, base_o] in &g.starts {
        for i in 0..g.m {
            acc.fill(T::ZERO);
            let row_a = base_a + i as isize * g.am;
            for p in 0..g.k {
                let x = sa[at(row_a, p, g.ak)];
                let row_b = base_b + p as isize * g.bk;
                for (j, slot) in acc.iter_mut().enumerate() {
                    *slot = slot.wrapping_add(x.wrapping_mul(sb[at(row_b, j, g.bn)]));
                }
            }
            let row_o = at(base_o, i, g.n as isize);
            dst[row_o..row_o + g.n].copy_from_slice(&acc);
        }
    }
    Ok(())
}
