//! `tf.sparse.reduce_sum` and `tf.sparse.reduce_max` (`SparseReduceSum`, `SparseReduceMax`
//! and their `...Sparse` forms): the stored values folded over some axes. Each stored value
//! lands in the output cell of its index without the reduced axes; the cells are segments
//! (every cell of a dense output, the occupied ones of a sparse output), folded in the
//! values' order on their device. Missing elements take no part: a sum of none is zero, and
//! so is a dense maximum of none, as in TensorFlow.

use super::segments::SegmentList;
use super::SparseTensor;
use crate::element::Scalar;
use crate::error::{Error, Result};
use crate::plan::segment::SegmentOp;
use crate::shape::TensorShape;
use crate::tensor::Tensor;

/// Which fold a sparse reduction is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SparseReduce {
    /// `SparseReduceSum`.
    Sum,
    /// `SparseReduceMax`: the largest stored value (NaN as TensorFlow folds it).
    Max,
}

impl SparseReduce {
    fn op(self) -> SegmentOp {
        match self {
            SparseReduce::Sum => SegmentOp::Sum,
            SparseReduce::Max => SegmentOp::Max,
        }
    }
}

/// Where each stored value lands: its output cell, the cells' shape with and without the
/// reduced dims kept, and the kept dims.
struct Landing {
    cells: Vec<usize>,
    kept: Vec<usize>,
    shape: TensorShape,
    dims: Vec<usize>,
    reduced: Vec<bool>,
}

impl SparseTensor {
    /// `op` over `axes` (negative counts from the end; repeats allowed; none: nothing is
    /// reduced, as the raw op does), as a dense tensor; `keep_dims` keeps the reduced dims
    /// with size 1. `Invalid reduction dimension 5, for input with 2 dimensions.` as in
    /// TensorFlow.
    pub fn reduce(&self, op: SparseReduce, axes: &[i64], keep_dims: bool) -> Result<Tensor> {
        let landing = self.landing(axes, keep_dims)?;
        let entries: Vec<usize> = (0..self.nnz()).collect();
        let cells: usize = landing.kept.iter().product();
        let list = SegmentList::group(&landing.cells, &entries, cells)?;
        list.run(op.op(), &self.values, None, Scalar::I64(0))?
            .reshape(landing.shape)
    }

    /// `op` over `axes` as a sparse tensor (`SparseReduceSumSparse`): one stored value per
    /// output cell that some value lands in, in row-major order.
    pub fn reduce_sparse(
        &self,
        op: SparseReduce,
        axes: &[i64],
        keep_dims: bool,
    ) -> Result<SparseTensor> {
        let landing = self.landing(axes, keep_dims)?;
        let mut occupied = landing.cells.clone();
        occupied.sort_unstable();
        occupied.dedup();
        let segment_of = |cell: usize| occupied.binary_search(&cell).unwrap_or_default();
        let keys: Vec<usize> = landing.cells.iter().map(|&c| segment_of(c)).collect();
        let entries: Vec<usize> = (0..self.nnz()).collect();
        let list = SegmentList::group(&keys, &entries, occupied.len())?;
        let values = list.run(op.op(), &self.values, None, Scalar::I64(0))?;
        let rank = landing.shape.rank();
        let mut indices = Vec::with_capacity(occupied.len() * rank);
        for &cell in &occupied {
            let start = indices.len();
            let mut rest = cell;
            for (d, &size) in landing.dims.iter().enumerate().rev() {
                if landing.reduced[d] && !keep_dims {
                    continue;
                }
                indices.push(if landing.reduced[d] {
                    0
                } else {
                    (rest % size) as i64
                });
                if !landing.reduced[d] {
                    rest /= size;
                }
            }
            indices[start..].reverse();
        }
        let dims = landing.shape.dims_i64();
        SparseTensor::assemble(&indices, values, &dims, self.indices.device())
    }

    /// The output cell of each stored value (the indices checked in bounds).
    fn landing(&self, axes: &[i64], keep_dims: bool) -> Result<Landing> {
        let rank = self.rank();
        let mut reduced = vec![false; rank];
        for &axis in axes {
            let resolved = if axis < 0 { axis + rank as i64 } else { axis };
            if resolved < 0 || resolved >= rank as i64 {
                return Err(Error::invalid(format!(
                    "Invalid reduction dimension {axis}, for input with {rank} dimensions."
                )));
            }
            reduced[resolved as usize] = true;
        }
        let indices = self.indices.to_vec::<i64>()?;
        self.check_indices(&indices, super::IndexOrder::Any)?;
        let dims = self.shape.dims();
        let kept: Vec<usize> = (0..rank)
            .filter(|&d| !reduced[d])
            .map(|d| dims[d])
            .collect();
        let shape: Vec<usize> = (0..rank)
            .filter_map(|d| match (reduced[d], keep_dims) {
                (false, _) => Some(dims[d]),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect();
        let cells = (0..self.nnz())
            .map(|i| {
                let row = &indices[i * rank..(i + 1) * rank];
                (0..rank)
                    .filter(|&d| !reduced[d])
                    .fold(0usize, |cell, d| cell * dims[d] + row[d] as usize)
            })
            .collect();
        Ok(Landing {
            cells,
            kept,
            shape: TensorShape::new(&shape)?,
            dims: dims.to_vec(),
            reduced,
        })
    }
}
