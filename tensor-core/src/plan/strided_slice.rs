//! TensorFlow's `StridedSlice` resolved against a shape (its `ValidateStridedSliceOp`):
//! the sparse spec with its five masks made dense, then each input dim's start, step and
//! length, and the output shape with new axes added and shrunk axes removed.

use crate::error::{Error, Result};

/// A strided slice as TensorFlow's `StridedSlice` op takes it: `begin`, `end` and
/// `strides` of one length, and the masks (bit `i` refers to entry `i`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StridedSliceSpec {
    /// First index per entry (negative counts from the end).
    pub begin: Vec<i64>,
    /// One past the last index per entry (negative counts from the end).
    pub end: Vec<i64>,
    /// The step per entry (non-zero; negative walks backwards).
    pub strides: Vec<i64>,
    /// Entries whose `begin` is ignored (the dim's first element in walking order).
    pub begin_mask: i64,
    /// Entries whose `end` is ignored (past the dim's last element in walking order).
    pub end_mask: i64,
    /// The entry that stands for as many full dims as the others leave (at most one bit).
    pub ellipsis_mask: i64,
    /// Entries that insert a new dim of size 1.
    pub new_axis_mask: i64,
    /// Entries that take one element (at `begin`) and remove the dim.
    pub shrink_axis_mask: i64,
}

/// One input dim of a resolved strided slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlicedDim {
    /// The first index taken (meaningless when `len` is 0).
    pub start: usize,
    /// The step between taken indices.
    pub step: isize,
    /// How many indices are taken.
    pub len: usize,
    /// Whether the dim is removed from the output (a shrunk axis, `len` 1).
    pub shrink: bool,
}

/// A strided slice resolved against an input shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StridedSlicePlan {
    /// Per input dim, in order.
    pub dims: Vec<SlicedDim>,
    /// The output shape: input dims not shrunk, with new axes (size 1) where the spec puts
    /// them. Each entry is `Some(input dim)` or `None` for a new axis.
    pub output: Vec<Option<usize>>,
}

impl StridedSlicePlan {
    /// The output dims.
    pub fn output_dims(&self) -> Vec<usize> {
        self.output
            .iter()
            .map(|d| d.map_or(1, |d| self.dims[d].len))
            .collect()
    }
}

impl StridedSliceSpec {
    /// Resolve against `shape`, with TensorFlow's errors for a bad spec.
    pub fn resolve(&self, shape: &[usize]) -> Result<StridedSlicePlan> {
        let n = self.begin.len();
        if self.end.len() != n || self.strides.len() != n {
            return Err(Error::invalid(format!(
                "Expected begin, end, and strides to be 1D equal size tensors, but got shapes \
                 [{n}], [{}], and [{}] instead.",
                self.end.len(),
                self.strides.len()
            )));
        }
        if n > 64 {
            return Err(Error::invalid("a strided slice has at most 64 entries"));
        }
        let bit = |mask: i64, i: usize| i < 64 && (mask >> i) & 1 == 1;
        if self.ellipsis_mask.count_ones() > 1 {
            return Err(Error::invalid(
                "Multiple ellipses in slice spec not allowed",
            ));
        }
        // A spec without an ellipsis has one implied after its last entry.
        let (entries, ellipsis) = match (0..n).find(|&i| bit(self.ellipsis_mask, i)) {
            Some(at) => (n, at),
            None => (n + 1, n),
        };
        let rank = shape.len();
        let mut dims = Vec::with_capacity(rank);
        let mut output = Vec::new();
        for i in 0..entries {
            if i == ellipsis {
                // The dims the other (real) entries do not name.
                let named = (i + 1..n).filter(|&j| !bit(self.new_axis_mask, j)).count();
                let until = rank.saturating_sub(named).max(dims.len());
                while dims.len() < until {
                    let d = dims.len();
                    dims.push(SlicedDim {
                        start: 0,
                        step: 1,
                        len: shape[d],
                        shrink: false,
                    });
                    output.push(Some(d));
                }
                continue;
            }
            if bit(self.new_axis_mask, i) {
                output.push(None);
                continue;
            }
            let d = dims.len();
            let &size = shape.get(d).ok_or_else(|| {
                Error::invalid(format!(
                    "Index out of range using input dim {d}; input has only {rank} dims"
                ))
            })?;
            let sliced = self.dim(i, size, d)?;
            if !sliced.shrink {
                output.push(Some(d));
            }
            dims.push(sliced);
        }
        Ok(StridedSlicePlan { dims, output })
    }

    /// Entry `i` over input dim `d` of `size` elements.
    fn dim(&self, i: usize, size: usize, d: usize) -> Result<SlicedDim> {
        let bit = |mask: i64| (mask >> i) & 1 == 1;
        let stride = self.strides[i];
        let size_i = i64::try_from(size).map_err(|_| Error::invalid("dim too large"))?;
        if bit(self.shrink_axis_mask) {
            let begin = self.begin[i];
            let at = if begin < 0 { begin + size_i } else { begin };
            if at < 0 || at >= size_i {
                return Err(Error::invalid(format!(
                    "slice index {begin} of dimension {d} out of bounds."
                )));
            }
            return Ok(SlicedDim {
                start: at as usize,
                step: 1,
                len: 1,
                shrink: true,
            });
        }
        if stride == 0 {
            return Err(Error::invalid(format!("strides[{i}] must be non-zero")));
        }
        let forward = stride > 0;
        // Canonical bounds: forward in [0, size], backward in [-1, size - 1].
        let (lo, hi) = if forward {
            (0, size_i)
        } else {
            (-1, size_i - 1)
        };
        // A masked begin is the first element in walking order, a masked end one past the last.
        let canonical = |x: i64, masked: bool, first: bool| -> i64 {
            match (masked, first) {
                (true, true) => {
                    if forward {
                        0
                    } else {
                        size_i - 1
                    }
                }
                (true, false) => {
                    if forward {
                        size_i
                    } else {
                        -1
                    }
                }
                (false, _) => (if x < 0 { x.saturating_add(size_i) } else { x }).clamp(lo, hi),
            }
        };
        let begin = canonical(self.begin[i], bit(self.begin_mask), true);
        let end = canonical(self.end[i], bit(self.end_mask), false);
        // Both in [-1, size]: the distance and step are small and positive here.
        let distance = if forward { end - begin } else { begin - end };
        let len = (distance.max(0) as u64).div_ceil(stride.unsigned_abs());
        Ok(SlicedDim {
            start: if len > 0 { begin as usize } else { 0 },
            step: isize::try_from(stride).map_err(|_| Error::invalid("stride too large"))?,
            len: len as usize,
            shrink: false,
        })
    }
}
