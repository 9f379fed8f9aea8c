//! `Device::segment_reduce` (`polytensor_core::plan::segment`): each output row folds its
//! segment's data rows in order, the rows of the output split between threads; and
//! `Device::scatter_rows`. Gathers move
//! bytes (any fixed-size dtype); sums and maxima compute in the dtype itself (integers
//! wrap), f16 and bf16 in f32, rounded once, as the GPU kernels do.

use num_traits::{One, WrappingAdd, WrappingMul, Zero};
use rayon::prelude::*;

use polytensor_core::plan::segment::{ScatterGeometry, SegmentGeometry, SegmentOp, Segments};
use polytensor_core::{Element, Error, OutView, Result, TensorView};

use super::{by_class, unsupported};
use crate::scalar::{FloatElem, Real};
use crate::strided::{input, output};

/// Elements read and written below which one thread does the whole reduction.
const PARALLEL_ABOVE: usize = 1 << 15;

/// Output elements (bytes, for a gather) each parallel task writes at least.
const TASK_ELEMENTS: usize = 1 << 14;

/// The checked structure of one reduction: each segment's entries and each entry's row.
struct Structure<'a> {
    rows: &'a [i32],
    offsets: &'a [i32],
    width: usize,
}

impl<'a> Structure<'a> {
    /// The rows and offsets of `segments`, every value checked against the geometry.
    fn new(g: &SegmentGeometry, segments: &Segments<'a>) -> Result<Self> {
        let rows = &input::<i32>(&segments.rows)?[segments.rows.layout().offset()..][..g.entries];
        let offsets = &input::<i32>(&segments.offsets)?[segments.offsets.layout().offset()..]
            [..g.segments + 1];
        if let Some(&row) = rows.iter().find(|&&r| r < 0 || r as usize >= g.data_rows) {
            return Err(Error::invalid(format!(
                "a segment reads row {row} of data with {} rows",
                g.data_rows
            )));
        }
        let ordered = offsets.first() == Some(&0)
            && offsets.last().map(|&n| n as usize) == Some(g.entries)
            && offsets.windows(2).all(|w| w[0] <= w[1]);
        if !ordered {
            return Err(Error::invalid(format!(
                "segment offsets must rise from 0 to the {} entries",
                g.entries
            )));
        }
        Ok(Self {
            rows,
            offsets,
            width: g.width,
        })
    }

    /// The entries of segment `s`.
    fn entries(&self, s: usize) -> std::ops::Range<usize> {
        self.offsets[s] as usize..self.offsets[s + 1] as usize
    }

    /// Run `each(segment, output row)` over the output's rows, on several threads when
    /// there is much work (elements read and written).
    fn for_each_segment<T: Send>(&self, out: &mut [T], each: impl Fn(usize, &mut [T]) + Sync) {
        let width = self.width.max(1);
        let work = self
            .rows
            .len()
            .saturating_mul(width)
            .saturating_add(out.len());
        if work > PARALLEL_ABOVE && out.len() > width {
            // Blocks of whole segments, so a task is never as small as one narrow row.
            let rows_per_task = (TASK_ELEMENTS / width).max(1);
            out.par_chunks_mut(width * rows_per_task)
                .enumerate()
                .for_each(|(block, rows)| {
                    for (i, row) in rows.chunks_mut(width).enumerate() {
                        each(block * rows_per_task + i, row);
                    }
                });
        } else {
            out.chunks_mut(width)
                .enumerate()
                .for_each(|(s, row)| each(s, row));
        }
    }
}

/// `Device::segment_reduce`.
pub(crate) fn segment_reduce(
    op: SegmentOp,
    data: &TensorView<'_>,
    segments: &Segments<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    let g = SegmentGeometry::new(op, data, segments, out)?;
    let structure = Structure::new(&g, segments)?;
    if op == SegmentOp::Gather {
        return gather(&structure, data, segments, out);
    }
    by_class!(data.dtype(),
        float F => fold_float::<F>(op, &structure, data, segments, out),
        int I => fold_int::<I>(op, &structure, data, segments, out),
        complex _C => Err(unsupported(op.name(), data)),
        bool => Err(unsupported(op.name(), data)),
        else => Err(unsupported(op.name(), data)),
    )
}

/// `Device::scatter_rows`: the fill everywhere (one memset where its bytes are all equal),
/// then each data row at its output row, as bytes.
pub(crate) fn scatter_rows(
    data: &TensorView<'_>,
    rows: &TensorView<'_>,
    fill: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    write_rows(data, rows, Some(fill), out)
}

/// `Device::assign_rows`: data row `j` into row `rows[j]` of `out`, the others kept.
pub(crate) fn assign_rows(
    data: &TensorView<'_>,
    rows: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    write_rows(data, rows, None, out)
}

/// Data row `j` into row `rows[j]` of `out`; every other row `fill`, or kept without one.
fn write_rows(
    data: &TensorView<'_>,
    rows: &TensorView<'_>,
    fill: Option<&TensorView<'_>>,
    out: &mut OutView<'_>,
) -> Result<()> {
    let g = ScatterGeometry::new(data, rows, fill, out)?;
    let size = data.dtype().size();
    let row_bytes = g.width * size;
    let rows = &input::<i32>(rows)?[rows.layout().offset()..][..g.entries];
    if let Some(&row) = rows.iter().find(|&&r| r < 0 || r as usize >= g.out_rows) {
        return Err(Error::invalid(format!(
            "scatter_rows writes row {row} of an output with {} rows",
            g.out_rows
        )));
    }
    let fill = fill.map(contiguous_bytes).transpose()?;
    let source = contiguous_bytes(data)?;
    let target = out
        .host_bytes_mut()
        .ok_or_else(|| Error::invalid("a CPU segment output is not in host memory"))?;
    if let Some(fill) = fill {
        fill_with(target, fill);
    }
    if row_bytes == 0 {
        return Ok(());
    }
    for (j, &row) in rows.iter().enumerate() {
        let at = row as usize * row_bytes;
        target[at..at + row_bytes].copy_from_slice(&source[j * row_bytes..(j + 1) * row_bytes]);
    }
    Ok(())
}

/// Every element of `target` set to the bytes `fill`: one memset where they are all equal.
fn fill_with(target: &mut [u8], fill: &[u8]) {
    match fill.first() {
        Some(&byte) if fill.iter().all(|&b| b == byte) => target.fill(byte),
        _ => target
            .chunks_exact_mut(fill.len())
            .for_each(|e| e.copy_from_slice(fill)),
    }
}

/// The bytes of a contiguous view's elements.
fn contiguous_bytes<'a>(view: &TensorView<'a>) -> Result<&'a [u8]> {
    let size = view.dtype().size();
    let host = view
        .host_bytes()
        .ok_or_else(|| Error::invalid("a CPU segment operand is not in host memory"))?;
    let start = view.layout().offset() * size;
    Ok(&host[start..start + view.layout().num_elements() * size])
}

/// The contiguous elements of `view`.
fn elements<'a, T: Element>(view: &TensorView<'a>) -> Result<&'a [T]> {
    let layout = view.layout();
    Ok(&input::<T>(view)?[layout.offset()..][..layout.num_elements()])
}

/// [`SegmentOp::Gather`]: each segment's last row, or the fill value, as bytes.
fn gather(
    s: &Structure<'_>,
    data: &TensorView<'_>,
    segments: &Segments<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    let size = data.dtype().size();
    let fill = contiguous_bytes(&segments.fill)?;
    let source = contiguous_bytes(data)?;
    let row_bytes = s.width * size;
    let target = out
        .host_bytes_mut()
        .ok_or_else(|| Error::invalid("a CPU segment output is not in host memory"))?;
    if row_bytes == 0 {
        return Ok(());
    }
    // Every element the fill value first, then the rows of the segments that have one.
    fill_with(target, fill);
    let copy = |seg: usize, row: &mut [u8]| {
        if let Some(entry) = s.entries(seg).last() {
            let from = s.rows[entry] as usize * row_bytes;
            row.copy_from_slice(&source[from..from + row_bytes]);
        }
    };
    if s.rows.len() * row_bytes > PARALLEL_ABOVE {
        let gathered = Structure {
            width: row_bytes,
            ..*s
        };
        gathered.for_each_segment(target, copy);
    } else {
        for seg in (0..s.offsets.len() - 1).filter(|&seg| s.offsets[seg] < s.offsets[seg + 1]) {
            copy(seg, &mut target[seg * row_bytes..(seg + 1) * row_bytes]);
        }
    }
    Ok(())
}

/// The data, the weights (where given) and the fill value of a fold, as elements of `T`.
type Operands<'a, T> = (&'a [T], Option<&'a [T]>, T);

/// [`Operands`] of a fold of `data` through `segments`.
fn operands<'a, T: Element>(
    data: &TensorView<'a>,
    segments: &Segments<'a>,
) -> Result<Operands<'a, T>> {
    Ok((
        elements::<T>(data)?,
        segments.weights.as_ref().map(elements::<T>).transpose()?,
        elements::<T>(&segments.fill)?[0],
    ))
}

/// Sums, means and maxima of floats, computed in `T::Compute` (f32 for f16 and bf16).
fn fold_float<T: FloatElem>(
    op: SegmentOp,
    s: &Structure<'_>,
    data: &TensorView<'_>,
    segments: &Segments<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    let (x, weights, fill) = operands::<T>(data, segments)?;
    let target = output::<T>(out)?;
    let width = s.width;
    s.for_each_segment(target, |seg, row| {
        let entries = s.entries(seg);
        if entries.is_empty() {
            let empty = if op == SegmentOp::Max {
                fill
            } else {
                T::narrow(T::Compute::ZERO)
            };
            row.fill(empty);
            return;
        }
        // The segment's rows folded into one row of accumulators, entry by entry (each
        // element still folds its entries in order), so the inner loop runs along rows.
        let mut acc = vec![T::Compute::ZERO; width];
        let (mut total, mut squares) = (T::Compute::ZERO, T::Compute::ZERO);
        for (n, entry) in entries.enumerate() {
            let start = s.rows[entry] as usize * width;
            let values = &x[start..start + width];
            if op == SegmentOp::Max {
                for (a, v) in acc.iter_mut().zip(values) {
                    let v = v.widen();
                    *a = if n > 0 && *a > v { *a } else { v };
                }
                continue;
            }
            let w = weights.map_or(T::Compute::ONE, |w| w[entry].widen());
            for (a, v) in acc.iter_mut().zip(values) {
                *a = *a + w * v.widen();
            }
            total = total + w;
            squares = squares + w * w;
        }
        let divisor = match op {
            SegmentOp::Mean => Some(total),
            SegmentOp::SqrtN => Some(squares.sqrt()),
            _ => None,
        };
        for (slot, a) in row.iter_mut().zip(acc) {
            *slot = T::narrow(divisor.map_or(a, |d| a / d));
        }
    });
    Ok(())
}

/// Sums and maxima of integers, wrapping as TensorFlow's do.
fn fold_int<T: Element + Ord + WrappingAdd + WrappingMul + Zero + One>(
    op: SegmentOp,
    s: &Structure<'_>,
    data: &TensorView<'_>,
    segments: &Segments<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    let (x, weights, fill) = operands::<T>(data, segments)?;
    let target = output::<T>(out)?;
    let width = s.width;
    s.for_each_segment(target, |seg, row| {
        let entries = s.entries(seg);
        let mut started = false;
        row.fill(if op == SegmentOp::Max {
            fill
        } else {
            T::zero()
        });
        for entry in entries {
            let start = s.rows[entry] as usize * width;
            let values = &x[start..start + width];
            if op == SegmentOp::Max {
                for (a, &v) in row.iter_mut().zip(values) {
                    *a = if started { (*a).max(v) } else { v };
                }
                started = true;
                continue;
            }
            let w = weights.map_or(T::one(), |w| w[entry]);
            for (a, v) in row.iter_mut().zip(values) {
                *a = a.wrapping_add(&w.wrapping_mul(v));
            }
        }
    });
    Ok(())
}
