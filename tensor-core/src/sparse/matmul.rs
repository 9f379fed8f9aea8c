//! `tf.sparse.sparse_dense_matmul` (`SparseTensorDenseMatMul`): a sparse matrix times a
//! dense one, as a weighted segment sum. The segments are the rows of `op(A)`, each entry
//! reads the row of `op(B)` its column names, weighted by its value; so each output element
//! folds its row's entries in their order, deterministically, on the values' device.

use super::segments::SegmentList;
use super::SparseTensor;
use crate::element::Scalar;
use crate::error::{Error, Result};
use crate::plan::segment::SegmentOp;
use crate::tensor::Tensor;

impl SparseTensor {
    /// `op(self) x op(b)`, where `op` conjugate-transposes with `adjoint_a` / `adjoint_b`:
    /// `self` a sparse matrix, `b` a dense matrix of the values' dtype on their device. The
    /// indices may be in any order; repeated indices add up. Errors are TensorFlow's:
    /// `Tensor 'b' is not a matrix`, `Cannot multiply A and B because inner dimension does
    /// not match: ...`, `k (5) from index[1,1] out of bounds (>=3)`.
    pub fn sparse_dense_matmul(
        &self,
        b: &Tensor,
        adjoint_a: bool,
        adjoint_b: bool,
    ) -> Result<Tensor> {
        if self.rank() != 2 {
            return Err(Error::invalid("Tensor 'a_shape' is not a vector of 2 dims"));
        }
        if b.rank() != 2 {
            return Err(Error::invalid("Tensor 'b' is not a matrix"));
        }
        if b.dtype() != self.dtype() {
            return Err(Error::invalid(format!(
                "SparseTensorDenseMatMul multiplies {} values by a {} matrix",
                self.dtype(),
                b.dtype()
            )));
        }
        let [rows, cols] = [self.shape.dim_size(0), self.shape.dim_size(1)];
        let (m, k) = if adjoint_a {
            (cols, rows)
        } else {
            (rows, cols)
        };
        let b_dims = b.dims();
        let (inner, n) = if adjoint_b {
            (b_dims[1], b_dims[0])
        } else {
            (b_dims[0], b_dims[1])
        };
        if k != inner {
            return Err(Error::invalid(format!(
                "Cannot multiply A and B because inner dimension does not match: {k} vs. \
                 {inner}.  Did you forget a transpose?  Dimensions of A: [{rows}, {cols}).  \
                 Dimensions of B: [{},{}]",
                b_dims[0], b_dims[1]
            )));
        }
        let indices = self.indices.to_vec::<i64>()?;
        let (row_col, col_col) = if adjoint_a { (1, 0) } else { (0, 1) };
        let mut keys = Vec::with_capacity(self.nnz());
        let mut reads = Vec::with_capacity(self.nnz());
        for i in 0..self.nnz() {
            let (r, c) = (indices[2 * i + row_col], indices[2 * i + col_col]);
            let check = |value: i64, name: &str, column: usize, bound: usize| {
                if value < 0 || value as usize >= bound {
                    return Err(Error::invalid(format!(
                        "{name} ({value}) from index[{i},{column}] out of bounds (>={bound})"
                    )));
                }
                Ok(value as usize)
            };
            keys.push(check(r, "m", row_col, m)?);
            reads.push(check(c, "k", col_col, k)?);
        }
        let mut values = self.values.clone();
        let mut dense = b.clone();
        if adjoint_a && values.dtype().is_complex() {
            values = values.conj()?;
        }
        if adjoint_b {
            dense = dense.transpose(0, 1)?;
            if dense.dtype().is_complex() {
                dense = dense.conj()?;
            }
        }
        if n == 0 {
            return Tensor::zeros([m, 0], self.dtype(), self.values.device());
        }
        SegmentList::group(&keys, &reads, m)?.run(
            SegmentOp::Sum,
            &dense,
            Some(&values),
            Scalar::I64(0),
        )
    }
}
