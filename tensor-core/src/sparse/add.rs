//! `tf.sparse.add`: sparse + sparse (`SparseAdd`) and sparse + dense
//! (`SparseTensorDenseAdd`). The merged structure is computed on the host from the
//! indices; the values are summed on their device, in TensorFlow's order.

use super::segments::{gather, SegmentList};
use super::{IndexOrder, SparseTensor};
use crate::element::Scalar;
use crate::error::{Error, Result};
use crate::plan::segment::SegmentOp;
use crate::tensor::Tensor;

impl SparseTensor {
    /// `self + other` (`SparseAdd`), both in canonical order with the same dense shape: an
    /// index in both holds the sum of their values, kept only where `thresh <= |sum|`
    /// (TensorFlow's rule, which drops a NaN sum, and with `thresh = 0` nothing else); an
    /// index in one holds its value. The result is in canonical order. An index outside the
    /// dense shape is an `Err` (`indices[i] = [..] is out of bounds: ...`).
    pub fn add(&self, other: &SparseTensor, thresh: f64) -> Result<SparseTensor> {
        self.check_same_shape(other)?;
        if self.dtype() != other.dtype() {
            return Err(Error::invalid(format!(
                "SparseAdd of {} and {} values",
                self.dtype(),
                other.dtype()
            )));
        }
        let rank = self.rank();
        let (a, b) = (
            self.indices.to_vec::<i64>()?,
            other.indices.to_vec::<i64>()?,
        );
        // TensorFlow's kernel merges indices outside the shape into the result; here they
        // are refused, as every other sparse kernel refuses them (ARCHITECTURE.md).
        self.check_indices(&a, IndexOrder::Any)?;
        other.check_indices(&b, IndexOrder::Any)?;
        let (na, nb) = (self.nnz(), other.nnz());
        let a_row = |i: usize| &a[i * rank..(i + 1) * rank];
        let b_row = |j: usize| &b[j * rank..(j + 1) * rank];
        // Each output entry's index row and the value rows it sums (`b`'s after `a`'s).
        let (mut indices, mut keys, mut rows, mut pairs) = (vec![], vec![], vec![], vec![]);
        let (mut i, mut j, mut entries) = (0, 0, 0);
        while i < na || j < nb {
            let entry = entries;
            entries += 1;
            let order = match (i < na, j < nb) {
                (true, true) => a_row(i).cmp(b_row(j)),
                (true, false) => std::cmp::Ordering::Less,
                _ => std::cmp::Ordering::Greater,
            };
            let take_a = order != std::cmp::Ordering::Greater;
            let take_b = order != std::cmp::Ordering::Less;
            indices.extend_from_slice(if take_a { a_row(i) } else { b_row(j) });
            if take_a {
                keys.push(entry);
                rows.push(i);
                i += 1;
            }
            if take_b {
                keys.push(entry);
                rows.push(na + j);
                j += 1;
            }
            if take_a && take_b {
                pairs.push(entry);
            }
        }
        let values = Tensor::concat(&[&self.values, &other.values], 0)?;
        let mut sums = SegmentList::group(&keys, &rows, entries)?.run(
            SegmentOp::Sum,
            &values,
            None,
            Scalar::I64(0),
        )?;
        if !pairs.is_empty() {
            let scalars = sums.to_scalars()?;
            let dropped: Vec<usize> = pairs
                .into_iter()
                .filter(|&e| {
                    // Kept where `thresh <= |sum|`: a NaN sum compares as nothing, so it goes.
                    let magnitude = scalars[e].to_f64().abs();
                    !matches!(
                        thresh.partial_cmp(&magnitude),
                        Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal)
                    )
                })
                .collect();
            if !dropped.is_empty() {
                let kept: Vec<usize> = (0..entries)
                    .filter(|e| dropped.binary_search(e).is_err())
                    .collect();
                sums = gather(&sums, &kept)?;
                indices = kept
                    .iter()
                    .flat_map(|&e| indices[e * rank..(e + 1) * rank].to_vec())
                    .collect();
            }
        }
        self.with_entries(&indices, sums)
    }

    /// `self + dense` (`SparseTensorDenseAdd`) as a dense tensor: each element of `dense`
    /// plus the values stored at its index (repeats add up), in that order.
    pub fn add_dense(&self, dense: &Tensor) -> Result<Tensor> {
        let dims = dense.dims();
        if dims.len() != self.rank() {
            return Err(Error::invalid(format!(
                "Dimensions of a ({}) and b ({}) do not have the same rank",
                self.rank(),
                dims.len()
            )));
        }
        for (d, (&s, &b)) in self.shape.dims().iter().zip(dims.iter()).enumerate() {
            if s != b {
                return Err(Error::invalid(format!(
                    "Dimension {d} does not equal (no broadcasting is supported): sparse side \
                     {s} vs dense side {b}"
                )));
            }
        }
        if dense.dtype() != self.dtype() {
            return Err(Error::invalid(format!(
                "SparseTensorDenseAdd of {} values and a {} tensor",
                self.dtype(),
                dense.dtype()
            )));
        }
        let indices = self.indices.to_vec::<i64>()?;
        self.check_indices(&indices, super::IndexOrder::Any)?;
        let cells = dense.num_elements();
        // Each cell sums its dense element, then the values stored there.
        let mut keys: Vec<usize> = (0..cells).collect();
        keys.extend(self.flat_offsets(&indices));
        let rows: Vec<usize> = (0..keys.len()).collect();
        let values = Tensor::concat(&[&dense.reshape([cells])?, &self.values], 0)?;
        SegmentList::group(&keys, &rows, cells)?
            .run(SegmentOp::Sum, &values, None, Scalar::I64(0))?
            .reshape(dense.shape().clone())
    }

    /// `Err` unless `other` has this tensor's dense shape, with TensorFlow's message.
    fn check_same_shape(&self, other: &SparseTensor) -> Result<()> {
        if self.rank() != other.rank() {
            return Err(Error::invalid(format!(
                "Operands do not have the same ranks; got shapes: {} and {}",
                self.shape, other.shape
            )));
        }
        for (d, (a, b)) in self.shape.iter().zip(other.shape.iter()).enumerate() {
            if a != b {
                return Err(Error::invalid(format!(
                    "Operands' shapes do not match: got {a} and {b} for dimension {d}"
                )));
            }
        }
        Ok(())
    }
}
