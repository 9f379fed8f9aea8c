//! Fast paths for float sums and means over the layouts that dominate real programs: the
//! reduced axes forming one contiguous run per output (sum of everything, row sums), the
//! kept axes forming one contiguous run (column sums), and column sums under one leading
//! kept axis (a global average pool over NHWC's H and W); and for f32 maxima and minima of
//! a contiguous tensor over consecutive axes (a global max pool). Other layouts take the
//! general path in `reduce`.

use polytensor_core::{Layout, OutView, ReduceOp, Result, Scalar, StridedRows, TensorView};
use rayon::prelude::*;

use crate::scalar::{FloatElem, Real};
use crate::strided::{for_each_row, input, output, run_items, SharedOut, PARALLEL_MIN_ELEMENTS};

/// Elements summed in f32 (or the compute type) lanes before the partial sum joins an f64
/// total: short enough that lane rounding stays far below the conformance tolerance.
const CHUNK: usize = 1024;
const LANES: usize = 16;

/// The sum of a contiguous run: 16 independent lanes (which the compiler vectorises) per
/// chunk, chunks added in f64.
// Always inlined, so that it takes the caller's target features (the softmax's rows).
#[inline(always)]
pub(crate) fn sum_run<T: FloatElem>(values: &[T]) -> f64 {
    values
        .chunks(CHUNK)
        .map(|chunk| {
            let mut lanes = [<T::Compute as Real>::ZERO; LANES];
            let mut groups = chunk.chunks_exact(LANES);
            for group in &mut groups {
                for (lane, &v) in lanes.iter_mut().zip(group) {
                    *lane = *lane + v.widen();
                }
            }
            let tail: f64 = groups.remainder().iter().map(|&v| v.widen().to_f64()).sum();
            // The lanes added pairwise (four vector steps, not sixteen dependent adds).
            let mut wide: [f64; LANES] = std::array::from_fn(|i| lanes[i].to_f64());
            for half in [8, 4, 2, 1] {
                for i in 0..half {
                    wide[i] += wide[i + half];
                }
            }
            wide[0] + tail
        })
        .sum()
}

/// The sum of a contiguous run on every thread.
fn sum_run_parallel<T: FloatElem>(values: &[T]) -> f64 {
    if values.len() < PARALLEL_MIN_ELEMENTS {
        return sum_run(values);
    }
    values.par_chunks(CHUNK * 16).map(sum_run).sum()
}

/// Dims and strides of `layout` split into kept and reduced axes.
fn split_axes(layout: &Layout, axes: &[usize]) -> [(Vec<usize>, Vec<isize>); 2] {
    let (mut kept, mut reduced) = ((vec![], vec![]), (vec![], vec![]));
    for (i, (d, &s)) in layout.shape().iter().zip(layout.strides()).enumerate() {
        let side = if axes.contains(&i) {
            &mut reduced
        } else {
            &mut kept
        };
        side.0.push(d);
        side.1.push(s);
    }
    [kept, reduced]
}

/// If `dims`/`strides` walk one contiguous run, its length.
fn contiguous_run(dims: &[usize], strides: &[isize]) -> Option<usize> {
    let rows = StridedRows::new(dims, [strides], [0]);
    (rows.num_rows() <= 1 && (rows.row_len() <= 1 || rows.inner_strides()[0] == 1))
        .then(|| rows.row_len() * rows.num_rows())
}

/// Sum or mean of a float tensor over `axes` by a fast path, or `None` if the layout has none.
pub(crate) fn try_sum<T: FloatElem>(
    op: ReduceOp,
    x: &TensorView<'_>,
    axes: &[usize],
    out: &mut OutView<'_>,
) -> Option<Result<()>> {
    if !matches!(op, ReduceOp::Sum | ReduceOp::Mean) {
        return None;
    }
    let layout = x.layout();
    let [(kept, kept_strides), (reduced, reduced_strides)] = split_axes(layout, axes);
    let count: usize = reduced.iter().product();
    let finish = move |sum: f64| -> T {
        let value = if op == ReduceOp::Mean {
            sum / count as f64
        } else {
            sum
        };
        T::from_scalar(Scalar::F64(value))
    };
    if count == 0 {
        // Nothing to read (the buffer may be empty): every output is the empty sum.
        return Some(output::<T>(out).map(|dst| dst.fill(finish(0.0))));
    }
    if let Some(run) = contiguous_run(&reduced, &reduced_strides) {
        return Some(inner_sums(x, out, run, (&kept, &kept_strides), finish));
    }
    if let Some(width) = contiguous_run(&kept, &kept_strides) {
        return Some(outer_sums(
            x,
            out,
            width,
            (&reduced, &reduced_strides),
            finish,
        ));
    }
    // A leading kept axis over kept axes that are one contiguous run (a global average pool
    // over NHWC's H and W): the column sums of each leading index.
    if kept.len() >= 2 && !axes.contains(&0) {
        if let Some(width) = contiguous_run(&kept[1..], &kept_strides[1..]) {
            return Some(batched_outer_sums(
                x,
                out,
                (kept[0], kept_strides[0]),
                width,
                (&reduced, &reduced_strides),
                finish,
            ));
        }
    }
    None
}

/// Where each row of the kept run starts, from `offset`: one per index of the reduced dims.
fn row_starts(reduced: &[usize], reduced_strides: &[isize], offset: isize) -> Vec<isize> {
    let rows = StridedRows::new(reduced, [reduced_strides], [offset]);
    let (len, [step]) = (rows.row_len(), rows.inner_strides());
    // Each row's starts extended from a range (which knows its length, so the loop is
    // plain stores): a `flat_map` collected element by element took 40% of a bias's
    // gradient (25088 rows of 32).
    let mut starts = Vec::with_capacity(rows.num_rows() * len);
    for [s] in rows {
        starts.extend((0..len as isize).map(|i| s + i * step));
    }
    starts
}

/// [`outer_sums`] for each index of a leading kept axis of `batch` entries `stride` apart,
/// into consecutive blocks of the output.
fn batched_outer_sums<T: FloatElem>(
    x: &TensorView<'_>,
    out: &mut OutView<'_>,
    (batch, stride): (usize, isize),
    width: usize,
    (reduced, reduced_strides): (&[usize], &[isize]),
    finish: impl Fn(f64) -> T + Sync,
) -> Result<()> {
    let data = input::<T>(x)?;
    let dst = output::<T>(out)?;
    let offset = x.layout().offset() as isize;
    let starts = row_starts(reduced, reduced_strides, 0);
    dst.par_chunks_mut(width.max(1))
        .take(batch)
        .enumerate()
        .for_each(|(b, block)| {
            let base = offset + b as isize * stride;
            let starts: Vec<usize> = starts.iter().map(|&s| (base + s) as usize).collect();
            let mut totals = vec![0f64; block.len()];
            add_rows(data, &starts, 0, &mut totals);
            for (o, t) in block.iter_mut().zip(totals) {
                *o = finish(t);
            }
        });
    Ok(())
}

/// Each output sums one contiguous run of `run` elements.
fn inner_sums<T: FloatElem>(
    x: &TensorView<'_>,
    out: &mut OutView<'_>,
    run: usize,
    (kept, kept_strides): (&[usize], &[isize]),
    finish: impl Fn(f64) -> T + Sync,
) -> Result<()> {
    let data = input::<T>(x)?;
    let dst = output::<T>(out)?;
    let base = x.layout().offset();
    if dst.len() == 1 {
        dst[0] = finish(sum_run_parallel(&data[base..base + run]));
        return Ok(());
    }
    let out_strides: Vec<isize> =
        polytensor_core::layout::contiguous_strides(&polytensor_core::TensorShape::new(kept)?)
            .to_vec();
    let rows = StridedRows::new(kept, [kept_strides, &out_strides], [base as isize, 0]);
    let [sx, so] = rows.inner_strides();
    let shared = SharedOut::new(dst);
    let outputs = rows.num_rows() * rows.row_len();
    let per_output = |[px, po]: [isize; 2], len: usize| {
        for i in 0..len {
            let start = (px + i as isize * sx) as usize;
            // SAFETY: each work item owns its output elements (see `for_each_row`).
            unsafe {
                shared.write(
                    (po + i as isize * so) as usize,
                    finish(sum_run(&data[start..start + run])),
                )
            };
        }
    };
    if outputs * run >= PARALLEL_MIN_ELEMENTS && outputs >= rayon::current_num_threads() {
        // Parallel over outputs, each task a span of whole runs within one row of outputs.
        let span = (PARALLEL_MIN_ELEMENTS / run).clamp(1, rows.row_len());
        let spans_per_row = rows.row_len().div_ceil(span);
        run_items(rows.num_rows() * spans_per_row, true, &|task| {
            let (row, first) = (task / spans_per_row, task % spans_per_row * span);
            let [px, po] = rows.row_start(row);
            let start = [px + first as isize * sx, po + first as isize * so];
            per_output(start, span.min(rows.row_len() - first));
        });
    } else {
        for_each_row(&rows, per_output);
    }
    Ok(())
}

/// Rows added in the compute type before their partial sums join the f64 totals.
const ROW_GROUP: usize = 64;

/// Add the `width`-element rows starting at `starts` (plus `first`) into the f64 `totals`,
/// through compute-type partial sums over groups of rows so that the inner loop vectorises,
/// with the widest vectors this CPU has.
fn add_rows<T: FloatElem>(data: &[T], starts: &[usize], first: usize, totals: &mut [f64]) {
    crate::vmath::widest(AddRows {
        data,
        starts,
        first,
        totals,
    });
}

/// [`add_rows`]' operands, a kernel for [`crate::vmath::widest`].
struct AddRows<'a, T> {
    /// The rows' elements.
    data: &'a [T],
    /// Where each row starts in `data`.
    starts: &'a [usize],
    /// The first column summed.
    first: usize,
    /// The column sums, as many as the columns summed.
    totals: &'a mut [f64],
}

impl<T: FloatElem> crate::vmath::Vectorised for AddRows<'_, T> {
    type Output = ();

    #[inline(always)]
    fn run(self) {
        add_rows_with(self.data, self.starts, self.first, self.totals);
    }
}

/// [`add_rows`]' loop, inlined into each instruction-set variant.
#[inline(always)]
fn add_rows_with<T: FloatElem>(data: &[T], starts: &[usize], first: usize, totals: &mut [f64]) {
    let width = totals.len();
    let mut partial = vec![<T::Compute as Real>::ZERO; width];
    for group in starts.chunks(ROW_GROUP) {
        partial.fill(<T::Compute as Real>::ZERO);
        let row = |start: usize| &data[start + first..start + first + width];
        // Four rows per pass over `partial`: a quarter of the partial-sum loads and stores.
        let mut quads = group.chunks_exact(4);
        for quad in &mut quads {
            let (a, b, c, d) = (row(quad[0]), row(quad[1]), row(quad[2]), row(quad[3]));
            for ((((p, &a), &b), &c), &d) in partial.iter_mut().zip(a).zip(b).zip(c).zip(d) {
                *p = *p + ((a.widen() + b.widen()) + (c.widen() + d.widen()));
            }
        }
        for &start in quads.remainder() {
            for (p, &v) in partial.iter_mut().zip(row(start)) {
                *p = *p + v.widen();
            }
        }
        for (t, p) in totals.iter_mut().zip(&partial) {
            *t += p.to_f64();
        }
    }
}

/// The widest row that the row-split path keeps whole per task (its partial sums stay in
/// the L2 cache).
const ROW_SPLIT_MAX_WIDTH: usize = 1 << 16;

/// The kept axes are one contiguous run of `width` elements: accumulate whole rows into
/// per-column sums. Many narrow rows split the rows across threads (each reads a contiguous
/// band and keeps its own totals); few wide rows split the columns.
fn outer_sums<T: FloatElem>(
    x: &TensorView<'_>,
    out: &mut OutView<'_>,
    width: usize,
    (reduced, reduced_strides): (&[usize], &[isize]),
    finish: impl Fn(f64) -> T + Sync,
) -> Result<()> {
    let data = input::<T>(x)?;
    let dst = output::<T>(out)?;
    let starts: Vec<usize> = row_starts(reduced, reduced_strides, x.layout().offset() as isize)
        .iter()
        .map(|&s| s as usize)
        .collect();
    let threads = rayon::current_num_threads();
    let parallel = width * starts.len() >= PARALLEL_MIN_ELEMENTS;
    if parallel && width <= ROW_SPLIT_MAX_WIDTH && starts.len() >= 4 * threads {
        let band = starts
            .len()
            .div_ceil(4 * threads)
            .next_multiple_of(ROW_GROUP);
        let totals = starts
            .par_chunks(band)
            .map(|band| {
                let mut totals = vec![0f64; width];
                add_rows(data, band, 0, &mut totals);
                totals
            })
            .reduce_with(|mut a, b| {
                a.iter_mut().zip(b).for_each(|(a, b)| *a += b);
                a
            })
            .unwrap_or_else(|| vec![0f64; width]);
        for (o, t) in dst.iter_mut().zip(totals) {
            *o = finish(t);
        }
        return Ok(());
    }
    let block = if parallel { 1024 } else { width.max(1) };
    dst.par_chunks_mut(block)
        .enumerate()
        .for_each(|(b, out_block)| {
            let mut totals = vec![0f64; out_block.len()];
            add_rows(data, &starts, b * block, &mut totals);
            for (o, t) in out_block.iter_mut().zip(totals) {
                *o = finish(t);
            }
        });
    Ok(())
}

/// The larger of two f32 as `reduce`'s `maximum` has it (NaN wins, `+0` over `-0`), without
/// branches, so that the loops vectorise.
#[inline(always)]
fn larger(a: f32, b: f32) -> f32 {
    let picked = if a > b { a } else { b };
    // Equal: `+0` over `-0` (bits and-ed); otherwise the same bits.
    let equal = f32::from_bits(a.to_bits() & b.to_bits());
    let picked = if a == b { equal } else { picked };
    if a.is_nan() || b.is_nan() {
        a + b
    } else {
        picked
    }
}

/// The smaller of two f32 as `reduce`'s `minimum` has it (NaN wins, `-0` under `+0`).
#[inline(always)]
fn smaller(a: f32, b: f32) -> f32 {
    let picked = if a < b { a } else { b };
    let equal = f32::from_bits(a.to_bits() | b.to_bits());
    let picked = if a == b { equal } else { picked };
    if a.is_nan() || b.is_nan() {
        a + b
    } else {
        picked
    }
}

/// The largest of `values` as [`larger`] has it, in 16 independent lanes (which the
/// compiler vectorises); `-inf` for none.
// Always inlined, so that it takes the caller's target features (the softmax's rows).
#[inline(always)]
pub(crate) fn max_run(values: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let mut groups = values.chunks_exact(LANES);
    for group in &mut groups {
        for (lane, &v) in lanes.iter_mut().zip(group) {
            *lane = larger(*lane, v);
        }
    }
    // The lanes folded pairwise (four vector steps, not sixteen dependent ones).
    for half in [8, 4, 2, 1] {
        for i in 0..half {
            lanes[i] = larger(lanes[i], lanes[i + half]);
        }
    }
    groups
        .remainder()
        .iter()
        .fold(lanes[0], |m, &v| larger(m, v))
}

/// The maximum or minimum of a contiguous f32 tensor over consecutive `axes`, as `[outer,
/// reduced, inner]`: each outer block's rows folded into one of `inner` values, blocks
/// split across threads. `None` for any other op, dtype or layout.
pub(crate) fn try_extreme_f32(
    op: ReduceOp,
    x: &TensorView<'_>,
    axes: &[usize],
    out: &mut OutView<'_>,
) -> Option<Result<()>> {
    if !matches!(op, ReduceOp::Max | ReduceOp::Min) {
        return None;
    }
    let layout = x.layout();
    let consecutive = axes.windows(2).all(|w| w[1] == w[0] + 1);
    if x.dtype() != polytensor_core::DataType::Float
        || !layout.is_contiguous()
        || axes.is_empty()
        || !consecutive
    {
        return None;
    }
    let dims = layout.shape().dims();
    let (first, last) = (axes[0], axes[axes.len() - 1]);
    let outer: usize = dims[..first].iter().product();
    let reduced: usize = dims[first..=last].iter().product();
    let inner: usize = dims[last + 1..].iter().product();
    if reduced == 0 || outer * inner == 0 {
        // The empty reduction's identity comes from the general path.
        return None;
    }
    let shape = [outer, reduced, inner];
    Some(match op {
        ReduceOp::Max => fold_rows::<true>(x, out, shape),
        _ => fold_rows::<false>(x, out, shape),
    })
}

/// `out[o, j]` = the largest (`MAX`) or smallest over `r` of `x[o, r, j]`, for the
/// contiguous f32 `x` as `[outer, reduced, inner]` (none of them 0): each outer block's rows
/// folded into one, blocks split across threads when large.
fn fold_rows<const MAX: bool>(
    x: &TensorView<'_>,
    out: &mut OutView<'_>,
    [outer, reduced, inner]: [usize; 3],
) -> Result<()> {
    let start = x.layout().offset();
    let src = &input::<f32>(x)?[start..start + outer * reduced * inner];
    let dst = output::<f32>(out)?;
    let block = |(o, acc): (usize, &mut [f32])| {
        fold_block::<MAX>(&src[o * reduced * inner..(o + 1) * reduced * inner], acc);
    };
    if outer * reduced * inner < PARALLEL_MIN_ELEMENTS {
        dst.chunks_exact_mut(inner).enumerate().for_each(block);
    } else {
        dst.par_chunks_exact_mut(inner).enumerate().for_each(block);
    }
    Ok(())
}

/// The `acc.len()`-wide rows of `rows` folded into `acc` by [`larger`] (`MAX`) or
/// [`smaller`], with the widest vectors this CPU has (the baseline's lack a blend, which
/// the NaN and signed-zero selects need).
fn fold_block<const MAX: bool>(rows: &[f32], acc: &mut [f32]) {
    crate::vmath::widest(FoldBlock::<MAX> { rows, acc });
}

/// [`fold_block`]'s operands, a kernel for [`crate::vmath::widest`].
struct FoldBlock<'a, const MAX: bool> {
    /// The rows, each `acc.len()` wide.
    rows: &'a [f32],
    /// The fold.
    acc: &'a mut [f32],
}

impl<const MAX: bool> crate::vmath::Vectorised for FoldBlock<'_, MAX> {
    type Output = ();

    #[inline(always)]
    fn run(self) {
        fold_block_with::<MAX>(self.rows, self.acc);
    }
}

/// [`fold_block`]'s loop, inlined into each instruction-set variant.
#[inline(always)]
fn fold_block_with<const MAX: bool>(rows: &[f32], acc: &mut [f32]) {
    let inner = acc.len();
    acc.copy_from_slice(&rows[..inner]);
    for row in rows.chunks_exact(inner).skip(1) {
        for (a, &v) in acc.iter_mut().zip(row) {
            *a = if MAX { larger(*a, v) } else { smaller(*a, v) };
        }
    }
}
