//! Ops that move stored elements without combining them: `tf.sparse.reshape`
//! (`SparseReshape`), `tf.sparse.slice` (`SparseSlice`), `tf.sparse.retain` and
//! `tf.sparse.fill_empty_rows` (`SparseFillEmptyRows`). The new indices are computed on the
//! host; the values are gathered on their device (a reshape keeps them as they are).

use super::segments::{gather, SegmentList};
use super::{bracketed, IndexOrder, SparseTensor};
use crate::alloc::host_vec;
use crate::element::Scalar;
use crate::error::{Error, Result};
use crate::plan::segment::SegmentOp;

/// What [`SparseTensor::fill_empty_rows`] returns beside the filled tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilledRows {
    /// Whether each row of the input was empty (and got the default value).
    pub empty_row_indicator: Vec<bool>,
    /// Where each input value went in the output (`reverse_index_map`).
    pub reverse_index_map: Vec<i64>,
}

impl SparseTensor {
    /// The same elements in a tensor of shape `new_shape` (one dim may be `-1`, inferred),
    /// each at the index with its row-major position (`SparseReshape`).
    pub fn reshape(&self, new_shape: &[i64]) -> Result<SparseTensor> {
        let dense = self.shape.num_elements();
        let (shown, inferred) = resolve_shape(new_shape)?;
        let known = shown
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .ok_or_else(|| Error::invalid("SparseReshape's requested shape is too large"))?;
        let (input, output) = (
            bracketed(&self.shape.dims_i64()),
            bracketed(&shown_i64(&shown)),
        );
        let mut dims = shown.clone();
        if let Some(at) = inferred {
            if known == 0 || !dense.is_multiple_of(known) {
                return Err(Error::invalid(format!(
                    "Input to reshape is a SparseTensor with {dense} dense values, but the \
                     requested shape requires a multiple of {known}. input_shape={input} \
                     output_shape={output}"
                )));
            }
            dims[at] = dense / known;
        } else if known != dense {
            return Err(Error::invalid(format!(
                "Input to reshape is a tensor with {dense} dense values, but the requested \
                 shape has {known}. input_shape={input} output_shape={output}"
            )));
        }
        let indices = self.indices.to_vec::<i64>()?;
        self.check_indices(&indices, IndexOrder::Any)?;
        let rank = dims.len();
        let mut moved = Vec::with_capacity(self.nnz() * rank);
        for flat in self.flat_offsets(&indices) {
            let start = moved.len();
            let mut rest = flat;
            for &d in dims.iter().rev() {
                moved.push((rest % d.max(1)) as i64);
                rest /= d.max(1);
            }
            moved[start..].reverse();
        }
        let shape: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        SparseTensor::assemble(&moved, self.values.clone(), &shape, self.indices.device())
    }

    /// The elements inside the box `start .. start + size` (clipped to the dense shape),
    /// moved to start at the origin, in their order (`SparseSlice`). The result's dense
    /// shape is the clipped box.
    pub fn slice(&self, start: &[i64], size: &[i64]) -> Result<SparseTensor> {
        let rank = self.rank();
        if start.len() != rank || size.len() != rank {
            return Err(Error::invalid(format!(
                "Expected start and size to have {rank} elements each, got {} and {}",
                start.len(),
                size.len()
            )));
        }
        if let Some(d) = (0..rank).find(|&d| start[d] < 0 || size[d] < 0) {
            return Err(Error::invalid(format!(
                "SparseSlice needs a non-negative start and size, got {} and {} in dimension {d}",
                start[d], size[d]
            )));
        }
        let dims = self.shape.dims_i64();
        let end: Vec<i64> = (0..rank)
            .map(|d| start[d].saturating_add(size[d]).min(dims[d]))
            .collect();
        let shape: Vec<i64> = (0..rank).map(|d| (end[d] - start[d]).max(0)).collect();
        let indices = self.indices.to_vec::<i64>()?;
        let mut kept = Vec::new();
        let mut moved = Vec::new();
        for i in 0..self.nnz() {
            let row = &indices[i * rank..(i + 1) * rank];
            if (0..rank).all(|d| row[d] >= start[d] && row[d] < end[d]) {
                kept.push(i);
                moved.extend((0..rank).map(|d| row[d] - start[d]));
            }
        }
        SparseTensor::assemble(
            &moved,
            gather(&self.values, &kept)?,
            &shape,
            self.indices.device(),
        )
    }

    /// The elements whose entry of `to_retain` (one per stored element) is true, in their
    /// order (`tf.sparse.retain`).
    pub fn retain(&self, to_retain: &[bool]) -> Result<SparseTensor> {
        if to_retain.len() != self.nnz() {
            return Err(Error::invalid(format!(
                "retain takes one flag per stored value ({}), got {}",
                self.nnz(),
                to_retain.len()
            )));
        }
        let kept: Vec<usize> = (0..self.nnz()).filter(|&i| to_retain[i]).collect();
        let rank = self.rank();
        let indices = self.indices.to_vec::<i64>()?;
        let rows: Vec<i64> = kept
            .iter()
            .flat_map(|&i| indices[i * rank..(i + 1) * rank].iter().copied())
            .collect();
        self.with_entries(&rows, gather(&self.values, &kept)?)
    }

    /// Every row (first index) with no stored element gets one, `default` at
    /// `[row, 0, ..., 0]` (`SparseFillEmptyRows`; string values get the empty string). The
    /// elements are grouped by row, each row's in their order, an empty row's new element
    /// in its place.
    pub fn fill_empty_rows(&self, default: Scalar) -> Result<(SparseTensor, FilledRows)> {
        let rank = self.rank();
        if rank == 0 {
            return Err(Error::invalid(
                "SparseFillEmptyRows needs a SparseTensor of rank 1 or more",
            ));
        }
        if self.dtype() != crate::dtype::DataType::String {
            default.check_representable(self.dtype())?;
        }
        let indices = self.indices.to_vec::<i64>()?;
        self.check_indices(&indices, IndexOrder::Any)?;
        let rows = self.shape.dim_size(0);
        let row_of: Vec<usize> = (0..self.nnz())
            .map(|i| indices[i * rank] as usize)
            .collect();
        let mut counts = host_vec(rows, 0usize, "SparseFillEmptyRows' rows")?;
        for &r in &row_of {
            counts[r] += 1;
        }
        // Each row's first output position: its elements, or its one default.
        let mut first = host_vec(rows, 0usize, "SparseFillEmptyRows' rows")?;
        let mut total = 0;
        for (start, &count) in first.iter_mut().zip(&counts) {
            *start = total;
            total += count.max(1);
        }
        let mut picks: Vec<Option<usize>> = host_vec(total, None, "SparseFillEmptyRows' output")?;
        let entries = total
            .checked_mul(rank)
            .ok_or_else(|| Error::invalid("SparseFillEmptyRows' output overflows"))?;
        let mut out_indices = host_vec(entries, 0i64, "SparseFillEmptyRows' output")?;
        let mut next = first.clone();
        let mut reverse = Vec::with_capacity(self.nnz());
        for (i, &r) in row_of.iter().enumerate() {
            let at = next[r];
            next[r] += 1;
            picks[at] = Some(i);
            out_indices[at * rank..(at + 1) * rank]
                .copy_from_slice(&indices[i * rank..(i + 1) * rank]);
            reverse.push(at as i64);
        }
        let empty: Vec<bool> = counts.iter().map(|&c| c == 0).collect();
        for (r, _) in empty.iter().enumerate().filter(|(_, &e)| e) {
            out_indices[first[r] * rank] = r as i64;
        }
        let values =
            SegmentList::picks(picks)?.run(SegmentOp::Gather, &self.values, None, default)?;
        let filled = self.with_entries(&out_indices, values)?;
        Ok((
            filled,
            FilledRows {
                empty_row_indicator: empty,
                reverse_index_map: reverse,
            },
        ))
    }
}

/// A requested shape's dims with `-1` shown as 1, and where the `-1` is; TensorFlow's
/// messages for two `-1`s or another negative dim.
fn resolve_shape(new_shape: &[i64]) -> Result<(Vec<usize>, Option<usize>)> {
    let mut inferred = None;
    let mut dims = Vec::with_capacity(new_shape.len());
    for (d, &size) in new_shape.iter().enumerate() {
        if size == -1 {
            if let Some(earlier) = inferred {
                return Err(Error::invalid(format!(
                    "only one output dimension may be -1, not both {earlier} and {d}"
                )));
            }
            inferred = Some(d);
            dims.push(1);
        } else if size < 0 {
            return Err(Error::invalid(format!(
                "size {d} must be non-negative, not {size}"
            )));
        } else {
            dims.push(usize::try_from(size).map_err(|_| Error::invalid("shape too large"))?);
        }
    }
    Ok((dims, inferred))
}

/// Dims as `i64`s, for messages.
fn shown_i64(dims: &[usize]) -> Vec<i64> {
    dims.iter().map(|&d| d as i64).collect()
}
