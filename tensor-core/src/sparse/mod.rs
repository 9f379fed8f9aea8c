//! TensorFlow's `SparseTensor`: a tensor stored as the coordinates and values of its
//! non-default elements (COO), the seed's fourth special tensor.
//!
//! A sparse tensor of rank `R` with `N` stored elements is three dense tensors:
//! - `indices`: int64 `[N, R]`, one row of coordinates per stored element;
//! - `values`: `[N]`, of any dtype (strings on host devices);
//! - `dense_shape`: int64 `[R]`, the shape of the dense tensor it stands for.
//!
//! [`SparseTensor::new`] checks what TensorFlow's shape function checks (ranks, counts, the
//! index dtype, a non-negative dense shape); [`SparseTensor::validate`] what its kernels'
//! `ValidateSparseTensor` checks (every index in bounds, and, where an op needs canonical
//! order, row-major order without repeats), with TensorFlow's messages.
//!
//! The ops (conversions, reorder, reshape, slice, retain, fill empty rows, add, reductions,
//! sparse x dense matmul, segment reductions, embedding lookups; serialization as
//! TensorFlow's `SerializeSparse` writes it) compute the structure of
//! their result from the indices on the host, as TensorFlow keeps sparse indices in host
//! memory for most of its kernels, and compute the values on the device of the input with
//! one kernel, the segment reduction of [`crate::plan::segment`]: each output value folds
//! its segment of input rows in order, so every device gives the same, deterministic
//! result.
//!
//! ```
//! # use polytensor_core::{Device, Tensor, sparse::SparseTensor};
//! # let cpu: std::sync::Arc<dyn Device> = polytensor_cpu::CpuDevice::shared();
//! # let cpu = &cpu;
//! let values = Tensor::from_slice(&[5i32, 7], [2], cpu)?;
//! let sparse = SparseTensor::from_coo(&[[0, 1], [2, 3]], &values, &[3, 4])?;
//! let dense = sparse.to_dense(None)?; // zeros where nothing is stored
//! assert_eq!(dense.to_vec::<i32>()?, vec![0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7]);
//! assert_eq!(SparseTensor::from_dense(&dense)?.indices().to_vec::<i64>()?, vec![0, 1, 2, 3]);
//! # Ok::<(), polytensor_core::Error>(())
//! ```

mod add;
mod convert;
mod display;
mod matmul;
mod reduce;
mod segment_ops;
mod segments;
mod serialize;
mod structure;

pub use reduce::SparseReduce;
pub use segment_ops::{embedding_lookup_sparse, segment_reduce, Combiner};
pub use structure::FilledRows;

use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::shape::TensorShape;
use crate::tensor::Tensor;

/// TensorFlow's `SparseTensor` (COO): `indices` `[N, R]` int64, `values` `[N]`,
/// `dense_shape` `[R]` int64.
#[derive(Clone)]
pub struct SparseTensor {
    indices: Tensor,
    values: Tensor,
    dense_shape: Tensor,
    /// `dense_shape` read once (it is `R` small numbers).
    shape: TensorShape,
}

/// How much [`SparseTensor::validate`] checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexOrder {
    /// Only that every index is in bounds.
    Any,
    /// Also that the indices are in row-major order, none repeated (TensorFlow's canonical
    /// order, which most sparse kernels require).
    Canonical,
}

impl SparseTensor {
    /// A sparse tensor from its three components, checked as TensorFlow's
    /// `SparseTensor` constructor and shape function check them: `indices` an int64 matrix,
    /// `values` a vector with one value per index row, `dense_shape` an int64 vector with one
    /// dim per index column, none negative. Indices are not checked against the shape here
    /// ([`validate`](Self::validate) does).
    pub fn new(indices: Tensor, values: Tensor, dense_shape: Tensor) -> Result<Self> {
        if indices.dtype() != DataType::Int64 || dense_shape.dtype() != DataType::Int64 {
            return Err(Error::invalid(format!(
                "SparseTensor indices and dense_shape must be int64, not {} and {}",
                indices.dtype(),
                dense_shape.dtype()
            )));
        }
        if indices.rank() != 2 {
            return Err(Error::invalid(format!(
                "Input indices should be a matrix but received shape {}",
                indices.shape()
            )));
        }
        if values.rank() != 1 || dense_shape.rank() != 1 {
            return Err(Error::invalid(format!(
                "Inputs values and dense_shape should be vectors but received shapes: {} and {}",
                values.shape(),
                dense_shape.shape()
            )));
        }
        let (count, rank) = (indices.dims()[0], indices.dims()[1]);
        if count != values.dims()[0] {
            return Err(Error::invalid(format!(
                "Number of elements in index ({count}) and values ({}) do not match.",
                values.dims()[0]
            )));
        }
        if rank != dense_shape.dims()[0] {
            return Err(Error::invalid(format!(
                "Index rank ({rank}) and shape rank ({}) do not match.",
                dense_shape.dims()[0]
            )));
        }
        let dims = dense_shape.to_vec::<i64>()?;
        let dims = dims
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|_| {
                Error::InvalidShape(format!("a SparseTensor's dense_shape {dims:?} is negative"))
            })?;
        let shape = TensorShape::new(&dims)?;
        Ok(SparseTensor {
            indices,
            values,
            dense_shape,
            shape,
        })
    }

    /// A sparse tensor from index rows, `values` (on any device) and the dense shape: the
    /// indices and shape are made on `values`' device.
    pub fn from_coo<const R: usize>(
        indices: &[[i64; R]],
        values: &Tensor,
        dense_shape: &[i64],
    ) -> Result<Self> {
        let flat: Vec<i64> = indices.iter().flatten().copied().collect();
        Self::assemble(&flat, values.clone(), dense_shape, values.device())
    }

    /// A sparse tensor of `values` at the host-computed index rows `indices` (one of
    /// `dims.len()` coordinates per value) with the dense shape `dims`, the indices and the
    /// shape made on `device`.
    fn assemble(
        indices: &[i64],
        values: Tensor,
        dims: &[i64],
        device: &std::sync::Arc<dyn crate::device::Device>,
    ) -> Result<Self> {
        Self::new(
            Tensor::from_slice(indices, [values.num_elements(), dims.len()], device)?,
            values,
            Tensor::from_slice(dims, [dims.len()], device)?,
        )
    }

    /// A sparse tensor of `values` at the host-computed index rows `indices` with this
    /// tensor's dense shape, the indices made on this tensor's indices' device.
    fn with_entries(&self, indices: &[i64], values: Tensor) -> Result<Self> {
        Self::new(
            Tensor::from_slice(
                indices,
                [values.num_elements(), self.rank()],
                self.indices.device(),
            )?,
            values,
            self.dense_shape.clone(),
        )
    }

    /// The coordinates, int64 `[N, R]`.
    pub fn indices(&self) -> &Tensor {
        &self.indices
    }

    /// The stored values, `[N]`.
    pub fn values(&self) -> &Tensor {
        &self.values
    }

    /// The dense shape as a tensor, int64 `[R]`.
    pub fn dense_shape(&self) -> &Tensor {
        &self.dense_shape
    }

    /// The shape of the dense tensor this stands for.
    pub fn shape(&self) -> &TensorShape {
        &self.shape
    }

    /// The rank `R`.
    pub fn rank(&self) -> usize {
        self.shape.rank()
    }

    /// The number of stored elements `N`.
    pub fn nnz(&self) -> usize {
        self.values.dims()[0]
    }

    /// The dtype of the values.
    pub fn dtype(&self) -> DataType {
        self.values.dtype()
    }

    /// Check the indices as TensorFlow's `ValidateSparseTensor` does: each in bounds
    /// (`indices[i] = [..] is out of bounds: need 0 <= index < [..]`), and for
    /// [`IndexOrder::Canonical`] in row-major order (`... is out of order. ...`) without
    /// repeats (`... is repeated`).
    pub fn validate(&self, order: IndexOrder) -> Result<()> {
        self.check_indices(&self.indices.to_vec::<i64>()?, order)
    }

    /// [`validate`](Self::validate) of `indices`, the index rows read on the host.
    pub(crate) fn check_indices(&self, indices: &[i64], order: IndexOrder) -> Result<()> {
        let rank = self.rank();
        let dims: Vec<i64> = self.shape.iter().map(|d| d as i64).collect();
        let rows = |i: usize| &indices[i * rank..(i + 1) * rank];
        for i in 0..self.nnz() {
            let row = rows(i);
            if row.iter().zip(&dims).any(|(&x, &d)| x < 0 || x >= d) {
                return Err(Error::invalid(format!(
                    "indices[{i}] = {} is out of bounds: need 0 <= index < {}",
                    bracketed(row),
                    bracketed(&dims)
                )));
            }
            if order == IndexOrder::Canonical && i > 0 {
                match rows(i - 1).cmp(row) {
                    std::cmp::Ordering::Less => {}
                    std::cmp::Ordering::Equal => {
                        return Err(Error::invalid(format!(
                            "indices[{i}] = {} is repeated",
                            bracketed(row)
                        )))
                    }
                    std::cmp::Ordering::Greater => {
                        return Err(Error::invalid(format!(
                            "indices[{i}] = {} is out of order. Many sparse ops require sorted \
                             indices.\n    Use `tf.sparse.reorder` to create a correctly ordered \
                             copy.",
                            bracketed(row)
                        )))
                    }
                }
            }
        }
        Ok(())
    }
}

/// `[1,2,3]`, as TensorFlow's messages print an index row.
fn bracketed(values: &[i64]) -> String {
    let items: Vec<String> = values.iter().map(i64::to_string).collect();
    format!("[{}]", items.join(","))
}
