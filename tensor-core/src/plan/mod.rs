//! Launch plans that every backend shares: how an op's index space is laid out before a
//! kernel walks it. Backends differ in how they run a plan (a CPU loop, a WGSL, OpenCL C or
//! CUDA kernel), never in how it is made, so each plan is computed here once.
//!
//! - [`Coalesced`]: the dims of an elementwise op over `N` operands, simplified (size-1
//!   dims dropped, neighbours merged where every operand's strides allow).
//! - [`StridedRows`]: a coalesced shape walked row by row (the CPU's loop).
//! - [`ReducedAxes`]: a layout split into kept and reduced dims.
//! - [`MatmulDims`] and [`MatmulPlan`]: a batched matmul's sizes and strides.
//! - [`window`]: the output sizes and paddings of convolution and pooling windows.
//! - [`strided_slice`]: TensorFlow's `StridedSlice` spec resolved against a shape.
//! - [`segment`]: the operands and sizes of a segment reduction (the sparse ops' kernel).

use smallvec::SmallVec;

use crate::error::{Error, Result};

mod matmul;
mod reduce;
mod rows;
pub mod segment;
pub mod strided_slice;
pub mod window;

pub use matmul::{MatmulDims, MatmulPlan};
pub use reduce::ReducedAxes;
pub use rows::StridedRows;

/// Dims kept inline before a plan spills to the heap.
const INLINE_RANK: usize = 6;

/// A shape and each operand's strides along it, simplified without changing the row-major
/// order of the elements: dims of size 1 dropped, and neighbours merged wherever every
/// operand's strides allow. At least one dim remains (a scalar is `[1]`; an empty shape is
/// `[0]`), so a kernel always has an innermost dim.
///
/// ```
/// use polytensor_core::plan::Coalesced;
/// // A contiguous [2,3,4] next to a broadcast scalar: one flat dim.
/// let plan = Coalesced::new(&[2, 3, 4], &[&[12, 4, 1], &[0, 0, 0]]);
/// assert_eq!((plan.dims(), plan.strides(0), plan.strides(1)), (&[24][..], &[1][..], &[0][..]));
/// // A transposed [3,2] cannot merge; the size-1 dim goes.
/// let plan = Coalesced::new(&[3, 1, 2], &[&[1, 9, 3]]);
/// assert_eq!((plan.dims(), plan.strides(0)), (&[3, 2][..], &[1, 3][..]));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coalesced {
    dims: SmallVec<[usize; INLINE_RANK]>,
    /// Operand `k`'s strides, `rank` of them, at `k * rank`.
    strides: SmallVec<[isize; INLINE_RANK]>,
}

impl Coalesced {
    /// Coalesce `dims` read by operands with `strides` (each of `dims.len()` entries).
    pub fn new(dims: &[usize], strides: &[&[isize]]) -> Self {
        let operands = strides.len();
        let mut merged: SmallVec<[usize; INLINE_RANK]> = SmallVec::new();
        let mut per_operand: SmallVec<[SmallVec<[isize; INLINE_RANK]>; 3]> =
            (0..operands).map(|_| SmallVec::new()).collect();
        if dims.contains(&0) {
            return Self {
                dims: SmallVec::from_slice(&[0]),
                strides: SmallVec::from_elem(0, operands),
            };
        }
        for (axis, &d) in dims.iter().enumerate() {
            if d == 1 {
                continue;
            }
            // The outer dim joins this one if, for every operand, stepping it once is
            // stepping this one `d` times.
            let joins = !merged.is_empty()
                && strides
                    .iter()
                    .zip(&per_operand)
                    .all(|(s, m)| m.last().copied() == s[axis].checked_mul(d as isize));
            if joins {
                *merged.last_mut().expect("joins needs a previous dim") *= d;
                for (m, s) in per_operand.iter_mut().zip(strides) {
                    *m.last_mut().expect("one stride per merged dim") = s[axis];
                }
            } else {
                merged.push(d);
                for (m, s) in per_operand.iter_mut().zip(strides) {
                    m.push(s[axis]);
                }
            }
        }
        if merged.is_empty() {
            merged.push(1);
            per_operand.iter_mut().for_each(|m| m.push(0));
        }
        Self {
            dims: merged,
            strides: per_operand.into_iter().flatten().collect(),
        }
    }

    /// The coalesced dims (at least one).
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// How many dims remain.
    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// The number of operands.
    pub fn operands(&self) -> usize {
        self.strides.len() / self.rank()
    }

    /// Operand `k`'s strides along [`Coalesced::dims`].
    pub fn strides(&self, k: usize) -> &[isize] {
        let rank = self.rank();
        &self.strides[k * rank..(k + 1) * rank]
    }

    /// The number of elements.
    pub fn num_elements(&self) -> usize {
        self.dims.iter().product()
    }

    /// Whether one dim remains: positions are affine in the flat index.
    pub fn is_flat(&self) -> bool {
        self.rank() == 1
    }
}

/// `value` as an `i64` for a kernel argument, or `Err` naming `what` (every size, stride and
/// offset of a valid layout fits; this guards the conversion, not the layout).
pub fn kernel_int(value: isize, what: &str) -> Result<i64> {
    i64::try_from(value).map_err(|_| Error::invalid(format!("{what} {value} does not fit i64")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Layout, TensorShape};

    #[test]
    fn coalescing_keeps_order_and_handles_edges() {
        let plan = Coalesced::new(&[], &[&[], &[]]);
        assert_eq!((plan.dims(), plan.strides(1)), (&[1][..], &[0][..]));
        let plan = Coalesced::new(&[2, 0, 3], &[&[isize::MAX / 2, 5, isize::MAX / 3]]);
        assert_eq!((plan.dims(), plan.num_elements()), (&[0][..], 0));
        // Huge strides that would overflow when multiplied never merge (nor panic).
        let plan = Coalesced::new(&[2, 3], &[&[isize::MAX / 2, isize::MAX / 2]]);
        assert_eq!(plan.rank(), 2);
        let plan = Coalesced::new(&[4, 1, 5], &[&[5, 7, 1], &[0, 0, 1]]);
        assert_eq!(plan.dims(), &[4, 5]);
        assert_eq!(
            (plan.strides(0), plan.strides(1)),
            (&[5, 1][..], &[0, 1][..])
        );
        assert!(!plan.is_flat());
    }

    #[test]
    fn matmul_plans_coalesce_batches() {
        let shape = |d: &[usize]| TensorShape::new(d).unwrap();
        let a = Layout::contiguous(shape(&[2, 3, 4, 5]));
        let b = Layout::contiguous(shape(&[5, 6]))
            .broadcast_to(&shape(&[2, 3, 5, 6]))
            .unwrap();
        let out = Layout::contiguous(shape(&[2, 3, 4, 6]));
        let plan = MatmulPlan::new(&a, &b, &out).unwrap();
        assert_eq!((plan.m, plan.k, plan.n), (4, 5, 6));
        assert_eq!((plan.a_strides, plan.b_strides), ([5, 1], [6, 1]));
        assert_eq!(plan.batch.dims(), &[6]);
        assert_eq!(plan.batch.strides(0), &[20]);
        assert_eq!(plan.batch.strides(1), &[0]);
        assert_eq!(plan.batch.strides(2), &[24]);
        assert_eq!(plan.batches(), 6);
    }
}
