//! [`Layout`]: how a tensor's elements sit in its buffer (shape, strides, offset).

use smallvec::SmallVec;

use crate::error::{Error, Result};
use crate::shape::TensorShape;

pub use crate::shape::Strides;

/// Normalise a possibly negative axis against `rank` (`-1` is the last axis).
pub fn normalize_axis(axis: isize, rank: usize) -> Result<usize> {
    let resolved = if axis < 0 { axis + rank as isize } else { axis };
    if resolved < 0 || resolved >= rank as isize {
        return Err(Error::AxisOutOfRange { axis, rank });
    }
    Ok(resolved as usize)
}

/// Which of `rank` dims TensorFlow's `ReverseV2` reverses for `axes` (negative count from
/// the end): an axis out of range or given twice is an `Err` with TensorFlow's message.
pub fn reversed_axes(axes: &[i64], rank: usize) -> Result<Vec<bool>> {
    let mut reversed = vec![false; rank];
    for (i, &axis) in axes.iter().enumerate() {
        let at = normalize_axis(axis as isize, rank).map_err(|_| {
            Error::invalid(format!(
                "'axis'[{i}] = {axis} is out of valid range [0, {}",
                rank.saturating_sub(1)
            ))
        })?;
        if std::mem::replace(&mut reversed[at], true) {
            return Err(Error::invalid(format!(
                "axis {at} specified more than once."
            )));
        }
    }
    Ok(reversed)
}

/// The row-major (C order) strides of `shape`: empty dims count as 1, so strides stay
/// distinct, and they saturate rather than overflow.
#[inline]
pub fn contiguous_strides(shape: &TensorShape) -> Strides {
    shape.row_major_strides()
}

/// Whether `strides` walk `shape` in row-major order with no gaps (dims of size 1 and empty
/// shapes place no constraint), and whether they are exactly [`contiguous_strides`] (which
/// counts empty dims as 1 and saturates).
fn row_major(shape: &TensorShape, strides: &[isize]) -> (bool, bool) {
    let (mut contiguous, mut canonical) = (true, true);
    let mut expected = 1isize;
    for (d, &s) in shape.iter().zip(strides).rev() {
        if s != expected {
            canonical = false;
            contiguous &= d == 1;
        }
        expected = expected.saturating_mul(d.max(1) as isize);
    }
    (contiguous || shape.is_empty(), canonical)
}

/// The shape, strides (in elements) and offset (in elements) of a tensor in its buffer.
///
/// Strides may be zero (broadcast) or negative (reversed views imported through DLPack).
/// Every kernel on every backend accepts any layout. A contiguous layout always has the
/// row-major strides, dims of size 1 included (strides given for those are replaced), so
/// contiguous layouts of one shape are equal whatever view made them.
///
/// ```
/// use polytensor_core::{Layout, TensorShape};
/// let l = Layout::contiguous(TensorShape::new(&[2, 3]).unwrap());
/// assert_eq!(l.strides(), &[3, 1]);
/// let t = l.transpose(0, 1).unwrap();
/// assert_eq!(t.strides(), &[1, 3]);
/// assert!(!t.is_contiguous());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Layout {
    shape: TensorShape,
    strides: Strides,
    offset: usize,
    /// `is_contiguous`, computed once: every kernel asks, most of them per call.
    contiguous: bool,
}

impl Layout {
    /// The row-major layout of `shape` at offset 0.
    #[inline]
    pub fn contiguous(shape: TensorShape) -> Self {
        let strides = contiguous_strides(&shape);
        Self {
            shape,
            strides,
            offset: 0,
            contiguous: true,
        }
    }

    /// A layout from parts already checked by the caller, with its contiguity computed. A
    /// contiguous layout gets the row-major strides: they differ from `strides` at most in
    /// dims of size 1 or in an empty shape, which no element position depends on, so every
    /// contiguous layout of a shape has the same strides.
    fn assemble(shape: TensorShape, strides: Strides, offset: usize) -> Self {
        let (contiguous, canonical) = row_major(&shape, &strides);
        let strides = if contiguous && !canonical {
            contiguous_strides(&shape)
        } else {
            strides
        };
        Self {
            shape,
            strides,
            offset,
            contiguous,
        }
    }

    /// A layout from parts; an `Err` if the stride count differs from the rank, or an
    /// element's position is negative (a negative stride walking back past the offset) or
    /// past `isize::MAX`. So every element of every layout lies in `0..=isize::MAX`, and
    /// every layout derived from one (narrow, select, permute, broadcast, squeeze,
    /// unsqueeze, reshape) reaches only positions of its source, in that range too.
    pub fn new(shape: TensorShape, strides: &[isize], offset: usize) -> Result<Self> {
        if strides.len() != shape.rank() {
            return Err(Error::invalid(format!(
                "{} strides given for a shape of rank {}",
                strides.len(),
                shape.rank()
            )));
        }
        let layout = Self::assemble(shape, strides.into(), offset);
        if let Some((lo, _)) = layout.span_checked()? {
            if lo < 0 {
                return Err(Error::invalid(format!(
                    "the layout {layout:?} reaches position {lo}, before its buffer's start"
                )));
            }
        }
        Ok(layout)
    }

    /// The shape.
    #[inline]
    pub fn shape(&self) -> &TensorShape {
        &self.shape
    }

    /// The strides, in elements.
    #[inline]
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }

    /// The offset of element `[0, ..., 0]`, in elements.
    #[inline]
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The rank.
    #[inline]
    pub fn rank(&self) -> usize {
        self.shape.rank()
    }

    /// The number of elements.
    #[inline]
    pub fn num_elements(&self) -> usize {
        self.shape.num_elements()
    }

    /// Whether the elements are in row-major order with no gaps (dims of size 1 and empty
    /// tensors place no constraint).
    #[inline]
    pub fn is_contiguous(&self) -> bool {
        self.contiguous
    }

    /// The smallest and largest element positions reached, or `None` if there are no elements.
    pub fn span(&self) -> Option<(isize, isize)> {
        self.span_checked().ok().flatten()
    }

    fn span_checked(&self) -> Result<Option<(isize, isize)>> {
        if self.shape.is_empty() {
            return Ok(None);
        }
        let overflow = || Error::invalid(format!("the layout {self:?} overflows isize"));
        let mut lo = isize::try_from(self.offset).map_err(|_| overflow())?;
        let mut hi = lo;
        for (d, &s) in self.shape.iter().zip(&self.strides) {
            let reach = s.checked_mul(d as isize - 1).ok_or_else(overflow)?;
            if reach < 0 {
                lo = lo.checked_add(reach).ok_or_else(overflow)?;
            } else {
                hi = hi.checked_add(reach).ok_or_else(overflow)?;
            }
        }
        Ok(Some((lo, hi)))
    }

    /// Check that every element lies within a buffer of `len` elements.
    pub fn check_fits(&self, len: usize) -> Result<()> {
        match self.span_checked()? {
            None => Ok(()),
            Some((lo, hi)) if lo >= 0 && (hi as usize) < len => Ok(()),
            Some((lo, hi)) => Err(Error::invalid(format!(
                "layout {self:?} reaches elements {lo}..={hi}, outside a buffer of {len} elements"
            ))),
        }
    }

    /// The position in the buffer of the element at `index`.
    pub fn position(&self, index: &[usize]) -> Result<usize> {
        if index.len() != self.rank() {
            return Err(Error::invalid(format!(
                "index of rank {} into a tensor of rank {}",
                index.len(),
                self.rank()
            )));
        }
        let mut pos = self.offset as isize;
        for (axis, ((&i, d), &s)) in index
            .iter()
            .zip(self.shape.iter())
            .zip(&self.strides)
            .enumerate()
        {
            if i >= d {
                return Err(Error::invalid(format!(
                    "index {i} out of range for dimension {axis} of size {d}"
                )));
            }
            // In range, so within the span that every layout checks when it is made.
            pos += i as isize * s;
        }
        Ok(pos as usize)
    }

    /// The dims permuted: result dim `i` is input dim `perm[i]`.
    pub fn permute(&self, perm: &[usize]) -> Result<Self> {
        let rank = self.rank();
        let mut seen = vec![false; rank];
        if perm.len() != rank
            || perm
                .iter()
                .any(|&p| p >= rank || std::mem::replace(&mut seen[p], true))
        {
            return Err(Error::invalid(format!(
                "{perm:?} is not a permutation of the {rank} dims of {}",
                self.shape
            )));
        }
        let dims: Vec<usize> = perm.iter().map(|&p| self.shape.dim_size(p)).collect();
        Ok(Self::assemble(
            TensorShape::new(&dims)?,
            perm.iter().map(|&p| self.strides[p]).collect(),
            self.offset,
        ))
    }

    /// Swap two dims (negative axes count from the end).
    pub fn transpose(&self, a: isize, b: isize) -> Result<Self> {
        let rank = self.rank();
        let (a, b) = (normalize_axis(a, rank)?, normalize_axis(b, rank)?);
        let mut perm: Vec<usize> = (0..rank).collect();
        perm.swap(a, b);
        self.permute(&perm)
    }

    /// Broadcast to `shape` by NumPy rules: missing leading dims and dims of size 1 get
    /// stride 0.
    pub fn broadcast_to(&self, shape: &TensorShape) -> Result<Self> {
        let (rank, target) = (self.rank(), shape.rank());
        let mismatch = || {
            Error::shape(
                "broadcast_to",
                format!("cannot broadcast {} to {shape}", self.shape),
            )
        };
        if rank > target {
            return Err(mismatch());
        }
        let lead = target - rank;
        let mut strides: Strides = SmallVec::from_elem(0, target);
        for i in 0..rank {
            let (have, want) = (self.shape.dim_size(i), shape.dim_size(lead + i));
            strides[lead + i] = if have == want {
                self.strides[i]
            } else if have == 1 {
                0
            } else {
                return Err(mismatch());
            };
        }
        Ok(Self::assemble(shape.clone(), strides, self.offset))
    }

    /// Elements `start..start + len` of dim `dim`.
    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Result<Self> {
        let size = self.shape.get(dim).ok_or(Error::AxisOutOfRange {
            axis: dim as isize,
            rank: self.rank(),
        })?;
        if start.checked_add(len).is_none_or(|end| end > size) {
            return Err(Error::invalid(format!(
                "narrow of dim {dim} to {start}..{} is outside its size {size}",
                start.saturating_add(len)
            )));
        }
        let mut shape = self.shape.clone();
        shape.set_dim(dim, len)?;
        let offset = if shape.is_empty() {
            // No elements, so no position to move to (and an empty layout's strides were
            // never checked against a span: they may be anything).
            self.offset
        } else {
            // The new first element is an element of this (non-empty) layout, whose
            // positions lie in its checked span, so none of this can overflow.
            (self.offset as isize + start as isize * self.strides[dim]) as usize
        };
        Ok(Self::assemble(shape, self.strides.clone(), offset))
    }

    /// Element `index` of dim `dim`, with that dim removed.
    pub fn select(&self, dim: usize, index: usize) -> Result<Self> {
        let narrowed = self.narrow(dim, index, 1)?;
        narrowed.squeeze(dim)
    }

    /// Remove dim `dim`, which must have size 1.
    pub fn squeeze(&self, dim: usize) -> Result<Self> {
        match self.shape.get(dim) {
            Some(1) => {}
            Some(d) => {
                return Err(Error::shape(
                    "squeeze",
                    format!("dim {dim} of {} has size {d}, not 1", self.shape),
                ))
            }
            None => {
                return Err(Error::AxisOutOfRange {
                    axis: dim as isize,
                    rank: self.rank(),
                })
            }
        }
        let mut shape = self.shape.clone();
        shape.remove_dim(dim)?;
        let mut strides = self.strides.clone();
        strides.remove(dim);
        Ok(Self::assemble(shape, strides, self.offset))
    }

    /// Insert a dim of size 1 before `dim` (`dim == rank` appends).
    pub fn unsqueeze(&self, dim: usize) -> Result<Self> {
        let mut shape = self.shape.clone();
        shape.insert_dim(dim, 1)?;
        // A dim of size 1 is never stepped along, so any stride is correct; PyTorch's choice
        // (the next dim's extent) where it fits keeps contiguous views contiguous, and the
        // next dim's own stride where it would overflow.
        let stride = match self.strides.get(dim) {
            Some(&next) => next
                .checked_mul(self.shape.dim_size(dim) as isize)
                .unwrap_or(next),
            None => 1,
        };
        let mut strides = self.strides.clone();
        strides.insert(dim, stride);
        Ok(Self::assemble(shape, strides, self.offset))
    }

    /// The same elements with shape `shape`, in row-major order, without moving data, if
    /// the strides allow it (`None` if a copy is needed). The element counts must match.
    pub fn reshape(&self, shape: &TensorShape) -> Result<Option<Self>> {
        if shape.num_elements() != self.num_elements() {
            return Err(Error::shape(
                "reshape",
                format!(
                    "cannot reshape {} ({} elements) to {shape} ({} elements)",
                    self.shape,
                    self.num_elements(),
                    shape.num_elements()
                ),
            ));
        }
        if self.is_contiguous() {
            return Ok(Some(Self::assemble(
                shape.clone(),
                contiguous_strides(shape),
                self.offset,
            )));
        }
        Ok(self.reshape_strided(shape))
    }

    /// Reshape a non-contiguous, non-empty view (PyTorch's `computeStride`): walk the old
    /// dims from the innermost, splitting them into chunks that are contiguous within
    /// themselves, and give each chunk's elements to the new dims that cover exactly them.
    fn reshape_strided(&self, shape: &TensorShape) -> Option<Self> {
        let old_dims: Vec<usize> = self.shape.iter().collect();
        let old_strides = &self.strides;
        let new_dims: Vec<usize> = shape.iter().collect();
        let mut strides: Strides = SmallVec::from_elem(0, new_dims.len());
        let mut view_d = new_dims.len() as isize - 1;
        let mut chunk_base_stride = *old_strides.last()?;
        let (mut tensor_numel, mut view_numel) = (1usize, 1usize);
        for tensor_d in (0..old_dims.len()).rev() {
            tensor_numel *= old_dims[tensor_d];
            let chunk_ends = tensor_d == 0
                || (old_dims[tensor_d - 1] != 1
                    && old_strides[tensor_d - 1] != tensor_numel as isize * chunk_base_stride);
            if !chunk_ends {
                continue;
            }
            while view_d >= 0 && (view_numel < tensor_numel || new_dims[view_d as usize] == 1) {
                // Element counts fit (shapes are checked); a stride past isize (possible only
                // for a size-1 dim beyond a huge chunk) means copying instead.
                strides[view_d as usize] = (view_numel as isize).checked_mul(chunk_base_stride)?;
                view_numel *= new_dims[view_d as usize];
                view_d -= 1;
            }
            if view_numel != tensor_numel {
                return None;
            }
            if tensor_d > 0 {
                chunk_base_stride = old_strides[tensor_d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
        (view_d == -1).then(|| Self::assemble(shape.clone(), strides, self.offset))
    }

    /// Reinterpret element positions for an element type `num / den` times the size: used by
    /// bitcast. `None` if the offset or a stride that is stepped along (a dim of more than
    /// one element, in a shape that has elements) does not scale exactly; a stride that is
    /// never stepped along becomes 0 where it does not scale.
    pub fn rescale(&self, num: usize, den: usize) -> Option<(usize, Strides)> {
        let scale = |v: isize| -> Option<isize> {
            let scaled = v.checked_mul(num as isize)?;
            (scaled % den as isize == 0).then_some(scaled / den as isize)
        };
        let offset = scale(self.offset as isize)? as usize;
        let empty = self.shape.is_empty();
        let strides = self
            .strides
            .iter()
            .zip(self.shape.iter())
            .map(|(&s, d)| match scale(s) {
                None if empty || d == 1 => Some(0),
                scaled => scaled,
            })
            .collect::<Option<Strides>>()?;
        Some((offset, strides))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(dims: &[usize]) -> TensorShape {
        TensorShape::new(dims).unwrap()
    }

    /// Every element position of a layout in row-major index order, by unravelling each
    /// flat index (the naive reference; `plan::StridedRows` is the fast walk).
    fn positions(l: &Layout) -> Vec<isize> {
        let dims = l.shape().dims();
        (0..l.num_elements())
            .map(|mut flat| {
                let mut position = l.offset() as isize;
                for (d, &dim) in dims.iter().enumerate().rev() {
                    position += (flat % dim) as isize * l.strides()[d];
                    flat /= dim;
                }
                position
            })
            .collect()
    }

    #[test]
    fn contiguity_and_span() {
        let l = Layout::contiguous(shape(&[2, 3, 4]));
        assert_eq!(l.strides(), &[12, 4, 1]);
        assert!(l.is_contiguous());
        assert_eq!(l.span(), Some((0, 23)));
        assert!(l.check_fits(24).is_ok());
        assert!(l.check_fits(23).is_err());
        let t = l.permute(&[2, 0, 1]).unwrap();
        assert_eq!(t.shape(), &shape(&[4, 2, 3]));
        assert!(!t.is_contiguous());
        assert!(l.permute(&[0, 0, 1]).is_err());
        assert!(l.transpose(0, 3).is_err());
        assert!(Layout::contiguous(shape(&[0, 5])).span().is_none());
        assert!(Layout::new(shape(&[2]), &[1, 1], 0).is_err());
    }

    #[test]
    fn broadcast_narrow_squeeze() {
        let l = Layout::contiguous(shape(&[3, 1]));
        let b = l.broadcast_to(&shape(&[2, 3, 4])).unwrap();
        assert_eq!(b.strides(), &[0, 1, 0]);
        assert!(l.broadcast_to(&shape(&[2, 4])).is_err());
        assert!(l.broadcast_to(&shape(&[1])).is_err());
        let n = Layout::contiguous(shape(&[4, 5])).narrow(1, 2, 3).unwrap();
        assert_eq!((n.offset(), n.shape().to_string()), (2, "[4,3]".into()));
        assert_eq!(positions(&n)[..4], [2, 3, 4, 7]);
        assert!(Layout::contiguous(shape(&[4])).narrow(0, 3, 2).is_err());
        let s = Layout::contiguous(shape(&[4, 5])).select(0, 2).unwrap();
        assert_eq!(positions(&s), vec![10, 11, 12, 13, 14]);
        let u = s.unsqueeze(0).unwrap();
        assert_eq!(u.shape().to_string(), "[1,5]");
        assert!(u.squeeze(1).is_err());
        assert_eq!(u.squeeze(0).unwrap(), s);
    }

    #[test]
    fn reshape_views_and_copies() {
        let l = Layout::contiguous(shape(&[2, 6]));
        let r = l.reshape(&shape(&[3, 4])).unwrap().unwrap();
        assert_eq!(r.strides(), &[4, 1]);
        assert!(l.reshape(&shape(&[5])).is_err());
        // A transposed matrix cannot be flattened without a copy ...
        let t = Layout::contiguous(shape(&[3, 4])).transpose(0, 1).unwrap();
        assert!(t.reshape(&shape(&[12])).unwrap().is_none());
        // ... but splitting one of its dims keeps it a view with the same elements.
        let split = t.reshape(&shape(&[2, 2, 3])).unwrap().unwrap();
        assert_eq!(positions(&split), positions(&t));
        // Narrowed rows of a wide matrix flatten their inner dims.
        let wide = Layout::contiguous(shape(&[4, 2, 3]))
            .narrow(0, 1, 2)
            .unwrap();
        let flat = wide.reshape(&shape(&[2, 6])).unwrap().unwrap();
        assert_eq!(positions(&flat), positions(&wide));
        let with_ones = wide.reshape(&shape(&[1, 2, 1, 6])).unwrap().unwrap();
        assert_eq!(positions(&with_ones), positions(&wide));
    }

    #[test]
    fn huge_strides_never_overflow() {
        // A layout whose span just fits isize, as a DLPack import may have.
        let stride = isize::MAX / 2;
        let l = Layout::new(shape(&[2, 3]), &[stride, 1], 0).unwrap();
        for dim in 0..=2 {
            let u = l.unsqueeze(dim).unwrap();
            assert_eq!(u.shape().num_elements(), 6);
            assert_eq!(positions(&u), positions(&l), "unsqueeze({dim})");
        }
        assert!(Layout::new(shape(&[3, 3]), &[stride, 1], 0).is_err());
        assert!(Layout::new(shape(&[2]), &[1], usize::MAX).is_err());
        // Negative strides may not walk back past the start of the buffer.
        assert!(Layout::new(shape(&[3]), &[-1], 1).is_err());
        let reversed = Layout::new(shape(&[3]), &[-1], 2).unwrap();
        assert_eq!(positions(&reversed.narrow(0, 1, 2).unwrap()), vec![1, 0]);
        let narrowed = l.narrow(0, 1, 1).unwrap();
        assert_eq!(narrowed.offset(), stride as usize);
        assert_eq!(l.position(&[1, 2]).unwrap(), stride as usize + 2);
        assert!(l.position(&[2, 0]).is_err());
        // An empty layout's strides are never checked against a span (it has none), so
        // views of it keep its offset rather than step by a stride that may overflow.
        let empty = Layout::new(
            shape(&[0, 3]),
            &[0, isize::MAX / 3],
            isize::MAX as usize / 2,
        );
        let empty = empty.unwrap();
        assert_eq!(empty.narrow(1, 2, 1).unwrap().offset(), empty.offset());
        assert_eq!(empty.select(1, 2).unwrap().offset(), empty.offset());
        // Reshapes that would need a stride past isize copy instead of wrapping.
        let t = l.transpose(0, 1).unwrap();
        assert!(t.reshape(&shape(&[6])).unwrap().is_none());
        assert!(t.reshape(&shape(&[3, 2, 1])).unwrap().is_some());
    }

    #[test]
    fn contiguous_layouts_of_a_shape_are_equal_whatever_made_them() {
        let given = Layout::new(shape(&[2, 1, 3]), &[3, 99, 1], 0).unwrap();
        assert_eq!(given, Layout::contiguous(shape(&[2, 1, 3])));
        let row = Layout::contiguous(shape(&[6])).narrow(0, 2, 3).unwrap();
        let unsqueezed = row.unsqueeze(0).unwrap();
        assert_eq!(unsqueezed.strides(), &[3, 1]);
        assert_eq!(unsqueezed.offset(), 2);
        let empty = Layout::new(shape(&[0, 4]), &[-5, 9], 0).unwrap();
        assert_eq!(
            empty.strides(),
            Layout::contiguous(shape(&[0, 4])).strides()
        );
        // A stride that is not stepped along is free, so it never stops a bitcast.
        let bytes = Layout::new(shape(&[4, 4]), &[4, 1], 0).unwrap();
        let one_row = bytes.narrow(0, 1, 1).unwrap().select(1, 0).unwrap();
        assert_eq!(one_row.rescale(1, 4), Some((1, Strides::from_slice(&[0]))));
        let strided = Layout::new(shape(&[2]), &[2], 0).unwrap();
        assert_eq!(strided.rescale(1, 4), None);
    }

    #[test]
    fn rescale_for_bitcast() {
        let l = Layout::contiguous(shape(&[4])).narrow(0, 2, 2).unwrap();
        assert_eq!(l.rescale(4, 1).unwrap().0, 8);
        assert!(l.narrow(0, 1, 1).unwrap().rescale(1, 2).is_none());
        assert!(normalize_axis(-1, 3).unwrap() == 2 && normalize_axis(3, 3).is_err());
    }
}
