//! Between sparse and dense: `tf.sparse.to_dense` (`SparseToDense`), `tf.sparse.from_dense`
//! and `tf.sparse.reorder` (`SparseReorder`). The structure is computed on the host from
//! the indices; the values move on their device (segment gathers).

use super::segments::{gather, SegmentList};
use super::{IndexOrder, SparseTensor};
use crate::dtype::DataType;
use crate::element::{Element, Scalar};
use crate::error::{Error, Result};
use crate::plan::segment::SegmentOp;
use crate::tensor::Tensor;

impl SparseTensor {
    /// The dense tensor: each stored value at its index, `default` elsewhere (`None`:
    /// TensorFlow's default, zero or the empty string). The indices must be canonical (in
    /// row-major order, none repeated), as `tf.sparse.to_dense` with `validate_indices`
    /// requires; [`reorder`](Self::reorder) first where they are not. A default the dtype
    /// cannot hold (0.5 for int32) is an `Err`.
    pub fn to_dense(&self, default: Option<Scalar>) -> Result<Tensor> {
        self.scatter(default, IndexOrder::Canonical)
    }

    /// [`to_dense`](Self::to_dense) without the order check, as `SparseToDense` with
    /// `validate_indices = false`: indices in any order, of a repeated index the last value.
    /// Indices must still be in bounds.
    pub fn to_dense_unordered(&self, default: Option<Scalar>) -> Result<Tensor> {
        self.scatter(default, IndexOrder::Any)
    }

    /// The dense tensor, the indices checked to `order`: the values scattered on their
    /// device to their elements, `default` elsewhere (of a repeated index, the last value).
    fn scatter(&self, default: Option<Scalar>, order: IndexOrder) -> Result<Tensor> {
        let indices = self.indices.to_vec::<i64>()?;
        self.check_indices(&indices, order)?;
        let cells = self.flat_offsets(&indices);
        let fill = default.unwrap_or(Scalar::I64(0));
        if self.dtype() != DataType::String {
            fill.check_representable(self.dtype())?;
        }
        if self.dtype() == DataType::String {
            if default.is_some() {
                return Err(Error::invalid(
                    "a string SparseTensor's default is the empty string: pass None",
                ));
            }
            // Strings live on the host: a gather there.
            let entries: Vec<usize> = (0..cells.len()).collect();
            let list = SegmentList::group(&cells, &entries, self.shape.num_elements())?;
            return list
                .run(SegmentOp::Gather, &self.values, None, fill)?
                .reshape(self.shape.clone());
        }
        // Of a repeated index the last value: only unvalidated indices repeat.
        let (cells, values) = match order {
            IndexOrder::Canonical => (cells, self.values.clone()),
            IndexOrder::Any => last_of_each_cell(cells, &self.values)?,
        };
        let device = self.values.device();
        let rows = cells
            .iter()
            .map(|&cell| i32::try_from(cell))
            .collect::<std::result::Result<Vec<i32>, _>>()
            .map_err(|_| Error::invalid("to_dense of more than 2^31 - 1 elements"))?;
        values
            .scatter_rows(
                &Tensor::from_slice(&rows, [rows.len()], device)?,
                self.shape.num_elements(),
                fill,
            )?
            .reshape(self.shape.clone())
    }

    /// The sparse form of `dense`: its elements that are not zero (not `0`, `false`, `0.0`,
    /// `-0.0` or the empty string; NaN counts as non-zero), in row-major order, as
    /// `tf.sparse.from_dense`. The components are on `dense`'s device.
    pub fn from_dense(dense: &Tensor) -> Result<Self> {
        let device = dense.device();
        let kept: Vec<usize> = if dense.dtype() == DataType::String {
            let strings = dense.to_strings()?;
            (0..strings.len())
                .filter(|&i| !strings[i].is_empty())
                .collect()
        } else if dense.dtype().is_computable() {
            let scalars = dense.to_scalars()?;
            // Stored where the value is true as a bool: not 0, `false`, 0.0 or -0.0 (NaN is).
            (0..scalars.len())
                .filter(|&i| bool::from_scalar(scalars[i]))
                .collect()
        } else {
            let size = dense.dtype().size();
            let bytes = dense.to_bytes()?;
            (0..dense.num_elements())
                .filter(|&i| bytes[i * size..(i + 1) * size].iter().any(|&b| b != 0))
                .collect()
        };
        let dims = dense.dims();
        let mut indices = Vec::with_capacity(kept.len() * dims.len());
        for &flat in &kept {
            let start = indices.len();
            let mut rest = flat;
            for &d in dims.iter().rev() {
                indices.push((rest % d) as i64);
                rest /= d;
            }
            indices[start..].reverse();
        }
        let shape: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        let flat = dense.reshape([dense.num_elements()])?;
        Self::assemble(&indices, gather(&flat, &kept)?, &shape, device)
    }

    /// The same tensor with its indices in canonical (row-major) order, values moved with
    /// them; repeated indices stay (in their order), as `tf.sparse.reorder`.
    pub fn reorder(&self) -> Result<Self> {
        let indices = self.indices.to_vec::<i64>()?;
        self.check_indices(&indices, IndexOrder::Any)?;
        let rank = self.rank();
        let row = |i: usize| &indices[i * rank..(i + 1) * rank];
        let mut order: Vec<usize> = (0..self.nnz()).collect();
        order.sort_by(|&a, &b| row(a).cmp(row(b)));
        let sorted: Vec<i64> = order.iter().flat_map(|&i| row(i)).copied().collect();
        self.with_entries(&sorted, gather(&self.values, &order)?)
    }

    /// Each stored element's position in the row-major dense tensor, from the index rows
    /// (checked to be in bounds).
    pub(super) fn flat_offsets(&self, indices: &[i64]) -> Vec<usize> {
        let rank = self.rank();
        let strides = self.shape.row_major_strides();
        (0..self.nnz())
            .map(|i| {
                indices[i * rank..(i + 1) * rank]
                    .iter()
                    .zip(strides.iter())
                    .map(|(&x, &s)| x as usize * s as usize)
                    .sum()
            })
            .collect()
    }
}

/// The cells of `values` (one per value) with only the last value of each repeated cell
/// kept (gathered on the values' device); the values as they are where no cell repeats.
fn last_of_each_cell(cells: Vec<usize>, values: &Tensor) -> Result<(Vec<usize>, Tensor)> {
    let mut last: Vec<(usize, usize)> = cells.iter().copied().zip(0..).collect();
    last.sort_by_key(|&(cell, _)| cell);
    if last.windows(2).all(|w| w[0].0 != w[1].0) {
        return Ok((cells, values.clone()));
    }
    last.reverse();
    last.dedup_by_key(|&mut (cell, _)| cell);
    let picks: Vec<usize> = last.iter().map(|&(_, entry)| entry).collect();
    let kept = last.iter().map(|&(cell, _)| cell).collect();
    Ok((kept, gather(values, &picks)?))
}
