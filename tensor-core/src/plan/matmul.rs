//! A batched matmul's sizes ([`MatmulDims`]) and its launch geometry ([`MatmulPlan`]).

use super::Coalesced;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::shape::TensorShape;

/// The sizes of a batched matmul `[batch.., m, k] x [batch.., k, n] -> [batch.., m, n]`,
/// checked against the output's shape (batch dims already broadcast by the caller).
///
/// ```
/// use polytensor_core::{plan::MatmulDims, TensorShape};
/// let shape = |d: &[usize]| TensorShape::new(d).unwrap();
/// let dims = MatmulDims::of(&shape(&[2, 3, 4]), &shape(&[2, 4, 5]), &shape(&[2, 3, 5])).unwrap();
/// assert_eq!((dims.batch, dims.m, dims.k, dims.n), (vec![2], 3, 4, 5));
/// assert!(MatmulDims::of(&shape(&[3, 4]), &shape(&[5, 6]), &shape(&[3, 6])).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatmulDims {
    /// The batch dims, shared by both operands and the output.
    pub batch: Vec<usize>,
    /// Rows of `a` and of the output.
    pub m: usize,
    /// Columns of `a`, rows of `b`: the summed dim.
    pub k: usize,
    /// Columns of `b` and of the output.
    pub n: usize,
}

impl MatmulDims {
    /// The sizes of `a x b -> out`, or a shape error naming all three shapes.
    pub fn of(a: &TensorShape, b: &TensorShape, out: &TensorShape) -> Result<Self> {
        let mismatch = || {
            Error::shape(
                "matmul",
                format!("operands {a} x {b} for output {out} (each needs rank >= 2)"),
            )
        };
        let (a_dims, b_dims, o_dims) = (a.dims(), b.dims(), out.dims());
        let split = |dims: &[usize]| match dims {
            [batch @ .., rows, cols] => Some((batch.to_vec(), *rows, *cols)),
            _ => None,
        };
        let ((batch, m, k), (b_batch, k2, n), (o_batch, m2, n2)) = (
            split(&a_dims).ok_or_else(mismatch)?,
            split(&b_dims).ok_or_else(mismatch)?,
            split(&o_dims).ok_or_else(mismatch)?,
        );
        if batch != b_batch || batch != o_batch || k != k2 || m != m2 || n != n2 {
            return Err(mismatch());
        }
        Ok(MatmulDims { batch, m, k, n })
    }
}

/// The geometry of a batched matmul `out[b] = a[b] x b[b]` over operands with any strides:
/// the sizes, each operand's row and column strides, and its batch strides over the
/// (coalesced) batch dims. Offsets stay with the operands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatmulPlan {
    /// Rows of `a` and of the output.
    pub m: usize,
    /// The summed dim.
    pub k: usize,
    /// Columns of `b` and of the output.
    pub n: usize,
    /// `a`'s strides along `m` and `k`.
    pub a_strides: [isize; 2],
    /// `b`'s strides along `k` and `n`.
    pub b_strides: [isize; 2],
    /// The batch dims, coalesced over `a`, `b` and the output (contiguous).
    pub batch: Coalesced,
}

impl MatmulPlan {
    /// The plan of `a x b -> out`, checking the shapes as [`MatmulDims::of`] does; `out` is
    /// written contiguously.
    pub fn new(a: &Layout, b: &Layout, out: &Layout) -> Result<Self> {
        let MatmulDims { batch, m, k, n } = MatmulDims::of(a.shape(), b.shape(), out.shape())?;
        let r = batch.len();
        let (sa, sb) = (a.strides(), b.strides());
        let out_strides = crate::layout::contiguous_strides(out.shape());
        let batch = Coalesced::new(&batch, &[&sa[..r], &sb[..r], &out_strides[..r]]);
        Ok(Self {
            m,
            k,
            n,
            a_strides: [sa[r], sa[r + 1]],
            b_strides: [sb[r], sb[r + 1]],
            batch,
        })
    }

    /// The number of matrices multiplied.
    pub fn batches(&self) -> usize {
        self.batch.num_elements()
    }
}
