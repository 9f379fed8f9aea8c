//! [`TensorShape`]: a fully defined shape, compact like TensorFlow's.

use std::fmt;

use crate::error::{Error, Result};

/// TensorFlow's maximum rank (`TensorShape::MaxDimensions()`).
pub const MAX_RANK: usize = 254;

/// Ranks up to this many dimensions are stored inline, with no heap allocation.
pub const INLINE_RANK: usize = 6;

/// Strides in elements, one per dimension (a [`crate::Layout`]'s, and a shape's row-major
/// strides).
pub type Strides = smallvec::SmallVec<[isize; INLINE_RANK]>;

/// Scratch space for shape edits: inline up to rank 8, so editing small shapes never
/// touches the heap.
type Scratch = smallvec::SmallVec<[usize; 8]>;

/// The largest element count a shape may describe (TensorFlow's `int64` limit).
pub const MAX_ELEMENTS: u64 = i64::MAX as u64;

#[derive(Clone, PartialEq, Eq, Hash)]
enum Repr {
    /// Rank <= 6 and every dim < 2^32: no heap.
    Inline { rank: u8, dims: [u32; INLINE_RANK] },
    /// Anything larger.
    Heap(Box<[u64]>),
}

/// A fully defined tensor shape with TensorFlow's rules: rank <= 254, every dim >= 0, and an
/// element count that fits in an `i64` (checked as dims are added, as TensorFlow does).
///
/// It is 32 bytes and heap-free up to rank 6 with dims below 2^32.
///
/// ```
/// use polytensor_core::TensorShape;
/// let shape = TensorShape::new(&[2, 3, 4]).unwrap();
/// assert_eq!(shape.num_elements(), 24);
/// assert_eq!(shape.to_string(), "[2,3,4]");
/// assert!(TensorShape::new(&[1 << 40, 1 << 40]).is_err()); // overflows i64
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TensorShape {
    repr: Repr,
}

impl Default for TensorShape {
    fn default() -> Self {
        Self::scalar()
    }
}

impl TensorShape {
    /// The shape `target` names for `count` elements, as `tf.reshape` reads it: at most one
    /// dim is `-1`, inferred from the others; every other dim is non-negative and the
    /// product is `count`. An `Err` with TensorFlow's message otherwise.
    ///
    /// ```
    /// use polytensor_core::TensorShape;
    /// assert_eq!(TensorShape::resolve(&[2, -1], 6)?, TensorShape::new(&[2, 3])?);
    /// assert!(TensorShape::resolve(&[4, -1], 6).is_err());
    /// # Ok::<(), polytensor_core::Error>(())
    /// ```
    pub fn resolve(target: &[i64], count: usize) -> Result<TensorShape> {
        let bad = || {
            Error::invalid(format!(
                "Input to reshape is a tensor with {count} values, but the requested shape is \
                 {target:?}"
            ))
        };
        let mut wildcard = None;
        let mut dims = Vec::with_capacity(target.len());
        for (i, &d) in target.iter().enumerate() {
            match d {
                -1 if wildcard.is_none() => {
                    wildcard = Some(i);
                    dims.push(1);
                }
                d => dims.push(usize::try_from(d).map_err(|_| bad())?),
            }
        }
        let known = dims
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .ok_or_else(bad)?;
        if let Some(at) = wildcard {
            if known == 0 || !count.is_multiple_of(known) {
                return Err(bad());
            }
            dims[at] = count / known;
        } else if known != count {
            return Err(bad());
        }
        TensorShape::new(&dims)
    }

    /// The rank-0 shape `[]` (one element).
    pub const fn scalar() -> Self {
        TensorShape {
            repr: Repr::Inline {
                rank: 0,
                dims: [0; INLINE_RANK],
            },
        }
    }

    /// A shape from its dims; an `Err` for rank over 254, a dim over `i64::MAX` or an element
    /// count over `i64::MAX`.
    pub fn new(dims: &[usize]) -> Result<Self> {
        Self::checked(dims)
    }

    /// A shape from signed dims (as protos and TensorFlow hold them); negative dims are an `Err`.
    pub fn from_i64(dims: &[i64]) -> Result<Self> {
        let dims = dims
            .iter()
            .map(|&d| {
                usize::try_from(d)
                    .map_err(|_| Error::InvalidShape(format!("dimension {d} is negative")))
            })
            .collect::<Result<Scratch>>()?;
        Self::checked(&dims)
    }

    /// The number of dimensions.
    #[inline]
    pub fn rank(&self) -> usize {
        match &self.repr {
            Repr::Inline { rank, .. } => *rank as usize,
            Repr::Heap(dims) => dims.len(),
        }
    }

    /// Dim `i` (panics if `i >= rank`, like slice indexing; see [`TensorShape::get`]).
    pub fn dim_size(&self, i: usize) -> usize {
        self.get(i)
            .unwrap_or_else(|| panic!("dimension index {i} out of range for rank {}", self.rank()))
    }

    /// Dim `i`, or `None` if `i >= rank`.
    #[inline]
    pub fn get(&self, i: usize) -> Option<usize> {
        match &self.repr {
            Repr::Inline { rank, dims } => (i < *rank as usize).then(|| dims[i] as usize),
            Repr::Heap(dims) => dims.get(i).map(|&d| d as usize),
        }
    }

    /// The dims, as a small vector (no heap for rank <= 6).
    pub fn dims(&self) -> smallvec::SmallVec<[usize; INLINE_RANK]> {
        (0..self.rank()).map(|i| self.dim_size(i)).collect()
    }

    /// The row-major (C order) strides of this shape, in elements: empty dims count as 1, so
    /// strides stay distinct, and they saturate rather than overflow. Public as
    /// [`contiguous_strides`](crate::layout::contiguous_strides).
    #[inline]
    pub(crate) fn row_major_strides(&self) -> Strides {
        fn fill<D: Copy + Into<u64>>(dims: &[D], strides: &mut [isize]) {
            let mut step = 1isize;
            for (stride, &d) in strides.iter_mut().zip(dims).rev() {
                *stride = step;
                step = step.saturating_mul(d.into().max(1) as isize);
            }
        }
        match &self.repr {
            Repr::Inline { rank, dims } => {
                let rank = (*rank as usize).min(INLINE_RANK);
                let mut strides = [0; INLINE_RANK];
                fill(&dims[..rank], &mut strides[..rank]);
                Strides::from_buf_and_len(strides, rank)
            }
            Repr::Heap(dims) => {
                let mut strides = Strides::from_elem(0, dims.len());
                fill(dims, &mut strides);
                strides
            }
        }
    }

    /// An iterator over the dims.
    #[inline]
    pub fn iter(&self) -> Dims<'_> {
        match &self.repr {
            Repr::Inline { rank, dims } => Dims::Inline(dims[..*rank as usize].iter()),
            Repr::Heap(dims) => Dims::Heap(dims.iter()),
        }
    }

    /// The number of elements (1 for a scalar, 0 if any dim is 0). Never overflows: every
    /// constructor checks it.
    #[inline]
    pub fn num_elements(&self) -> usize {
        match &self.repr {
            Repr::Inline { rank, dims } => dims[..*rank as usize]
                .iter()
                .fold(1, |n, &d| n * d as usize),
            Repr::Heap(dims) => dims.iter().fold(1, |n, &d| n * d as usize),
        }
    }

    /// Whether the shape has no elements (some dim is 0).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.iter().any(|d| d == 0)
    }

    /// Whether the shape is rank 0.
    pub fn is_scalar(&self) -> bool {
        self.rank() == 0
    }

    /// Append a dimension.
    pub fn add_dim(&mut self, size: usize) -> Result<()> {
        let rank = self.rank();
        self.insert_dim(rank, size)
    }

    /// Insert a dimension before index `i` (`i == rank` appends).
    pub fn insert_dim(&mut self, i: usize, size: usize) -> Result<()> {
        let mut dims: Scratch = self.iter().collect();
        if i > dims.len() {
            return Err(Error::AxisOutOfRange {
                axis: i as isize,
                rank: dims.len() + 1,
            });
        }
        dims.insert(i, size);
        *self = Self::checked(&dims)?;
        Ok(())
    }

    /// Set dimension `i` to `size`.
    pub fn set_dim(&mut self, i: usize, size: usize) -> Result<()> {
        let mut dims: Scratch = self.iter().collect();
        let rank = dims.len();
        let slot = dims.get_mut(i).ok_or(Error::AxisOutOfRange {
            axis: i as isize,
            rank,
        })?;
        *slot = size;
        *self = Self::checked(&dims)?;
        Ok(())
    }

    /// Remove dimension `i`.
    pub fn remove_dim(&mut self, i: usize) -> Result<()> {
        self.remove_dim_range(i, i + 1)
    }

    /// Remove dimensions `begin..end` (TensorFlow's `RemoveDimRange`, without negative indices).
    pub fn remove_dim_range(&mut self, begin: usize, end: usize) -> Result<()> {
        let mut dims: Scratch = self.iter().collect();
        if begin > end || end > dims.len() {
            return Err(Error::InvalidArgument(format!(
                "cannot remove dims {begin}..{end} from a shape of rank {}",
                dims.len()
            )));
        }
        dims.drain(begin..end);
        *self = Self::checked(&dims)?;
        Ok(())
    }

    /// Remove the last `n` dimensions.
    pub fn remove_last_dims(&mut self, n: usize) -> Result<()> {
        let rank = self.rank();
        let begin = rank.checked_sub(n).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "cannot remove {n} dims from a shape of rank {rank}"
            ))
        })?;
        self.remove_dim_range(begin, rank)
    }

    /// This shape followed by `other`'s dims.
    pub fn concatenate(&self, other: &TensorShape) -> Result<TensorShape> {
        let dims: Scratch = self.iter().chain(other.iter()).collect();
        Self::checked(&dims)
    }

    /// Whether both shapes have the same rank and dims (TensorFlow's `IsSameSize`).
    pub fn is_same_size(&self, other: &TensorShape) -> bool {
        self.rank() == other.rank() && self.iter().eq(other.iter())
    }

    /// The dims as `i64`, as protos and TensorFlow hold them.
    pub fn dims_i64(&self) -> Vec<i64> {
        self.iter().map(|d| d as i64).collect()
    }

    fn checked(dims: &[usize]) -> Result<Self> {
        if dims.len() > MAX_RANK {
            return Err(Error::InvalidShape(format!(
                "rank {} exceeds the maximum rank {MAX_RANK}",
                dims.len()
            )));
        }
        if let Some(&d) = dims.iter().find(|&&d| d as u64 > MAX_ELEMENTS) {
            return Err(Error::InvalidShape(format!(
                "dimension {d} of {dims:?} exceeds the largest dimension TensorFlow allows, \
                 {MAX_ELEMENTS} (int64)"
            )));
        }
        let mut count: u64 = 1;
        for &d in dims {
            count = (d as u64)
                .checked_mul(count)
                .filter(|&c| c <= MAX_ELEMENTS)
                .ok_or_else(|| {
                    Error::InvalidShape(format!(
                        "the element count of {dims:?} overflows (limit {MAX_ELEMENTS})"
                    ))
                })?;
        }
        let inline = dims.len() <= INLINE_RANK && dims.iter().all(|&d| d <= u32::MAX as usize);
        let repr = if inline {
            let mut packed = [0u32; INLINE_RANK];
            for (slot, &d) in packed.iter_mut().zip(dims) {
                *slot = d as u32;
            }
            Repr::Inline {
                rank: dims.len() as u8,
                dims: packed,
            }
        } else {
            Repr::Heap(dims.iter().map(|&d| d as u64).collect())
        };
        Ok(TensorShape { repr })
    }
}

/// An iterator over a [`TensorShape`]'s dims, straight from its storage.
#[derive(Clone, Debug)]
pub enum Dims<'a> {
    /// Dims stored inline.
    Inline(std::slice::Iter<'a, u32>),
    /// Dims stored on the heap.
    Heap(std::slice::Iter<'a, u64>),
}

impl Iterator for Dims<'_> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        match self {
            Dims::Inline(dims) => dims.next().map(|&d| d as usize),
            Dims::Heap(dims) => dims.next().map(|&d| d as usize),
        }
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        let len = self.len();
        (len, Some(len))
    }
}

impl DoubleEndedIterator for Dims<'_> {
    #[inline]
    fn next_back(&mut self) -> Option<usize> {
        match self {
            Dims::Inline(dims) => dims.next_back().map(|&d| d as usize),
            Dims::Heap(dims) => dims.next_back().map(|&d| d as usize),
        }
    }
}

impl ExactSizeIterator for Dims<'_> {
    #[inline]
    fn len(&self) -> usize {
        match self {
            Dims::Inline(dims) => dims.len(),
            Dims::Heap(dims) => dims.len(),
        }
    }
}

impl fmt::Display for TensorShape {
    /// TensorFlow's `TensorShape::DebugString`: `[2,3]`, `[]` for a scalar.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

impl fmt::Debug for TensorShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TensorShape{self}")
    }
}

/// Anything that names a shape: `[2, 3]`, `&[2, 3][..]`, `vec![2, 3]`, a `TensorShape`.
/// Conversion checks TensorFlow's limits.
pub trait IntoShape {
    /// The shape, or an `Err` if it breaks TensorFlow's limits.
    fn into_shape(self) -> Result<TensorShape>;
}

impl IntoShape for TensorShape {
    fn into_shape(self) -> Result<TensorShape> {
        Ok(self)
    }
}
impl IntoShape for &TensorShape {
    fn into_shape(self) -> Result<TensorShape> {
        Ok(self.clone())
    }
}
impl IntoShape for &[usize] {
    fn into_shape(self) -> Result<TensorShape> {
        TensorShape::new(self)
    }
}
impl<const N: usize> IntoShape for [usize; N] {
    fn into_shape(self) -> Result<TensorShape> {
        TensorShape::new(&self)
    }
}
impl<const N: usize> IntoShape for &[usize; N] {
    fn into_shape(self) -> Result<TensorShape> {
        TensorShape::new(self)
    }
}
impl IntoShape for Vec<usize> {
    fn into_shape(self) -> Result<TensorShape> {
        TensorShape::new(&self)
    }
}
impl IntoShape for &Vec<usize> {
    fn into_shape(self) -> Result<TensorShape> {
        TensorShape::new(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reshape_dims_resolve_one_wildcard() {
        let resolve = |t: &[i64], n| TensorShape::resolve(t, n).map(|s| s.dims().to_vec());
        assert_eq!(resolve(&[2, -1], 6).unwrap(), [2, 3]);
        assert_eq!(resolve(&[6], 6).unwrap(), [6]);
        assert_eq!(resolve(&[-1], 0).unwrap(), [0]);
        assert!(resolve(&[4, -1], 6).is_err());
        assert!(resolve(&[-1, -1], 6).is_err());
        assert!(resolve(&[-2, 3], 6).is_err());
        assert!(resolve(&[0, -1], 0).is_err());
        assert!(resolve(&[i64::MAX, i64::MAX], 6).is_err());
    }

    #[test]
    fn compact_size() {
        assert!(std::mem::size_of::<TensorShape>() <= 32);
    }

    #[test]
    fn basic_operations() {
        let mut s = TensorShape::new(&[2, 3]).unwrap();
        assert_eq!(s.rank(), 2);
        assert_eq!(s.num_elements(), 6);
        s.add_dim(4).unwrap();
        assert_eq!(s.to_string(), "[2,3,4]");
        s.insert_dim(0, 5).unwrap();
        assert_eq!(s.dims().as_slice(), &[5, 2, 3, 4]);
        s.set_dim(1, 7).unwrap();
        assert_eq!(s.dim_size(1), 7);
        s.remove_dim(0).unwrap();
        assert_eq!(s.to_string(), "[7,3,4]");
        s.remove_last_dims(2).unwrap();
        assert_eq!(s.to_string(), "[7]");
        let c = s.concatenate(&TensorShape::new(&[1, 2]).unwrap()).unwrap();
        assert_eq!(c.to_string(), "[7,1,2]");
        assert!(c.is_same_size(&TensorShape::new(&[7, 1, 2]).unwrap()));
        assert!(!c.is_same_size(&TensorShape::new(&[7, 2]).unwrap()));
        assert_eq!(TensorShape::scalar().num_elements(), 1);
        assert_eq!(TensorShape::scalar().to_string(), "[]");
        assert!(TensorShape::new(&[3, 0, 5]).unwrap().is_empty());
    }

    #[test]
    fn tensorflow_limits() {
        assert!(TensorShape::from_i64(&[2, -1]).is_err());
        assert!(TensorShape::new(&vec![1; 254]).is_ok());
        assert!(TensorShape::new(&vec![1; 255]).is_err());
        assert!(TensorShape::new(&[1 << 31, 1 << 31, 1]).is_ok());
        assert!(TensorShape::new(&[1 << 31, 1 << 31, 2]).is_err());
        // TensorFlow checks the product as dims are added: a 0 after an overflow does not help.
        assert!(TensorShape::new(&[1 << 62, 0]).is_ok());
        assert!(TensorShape::new(&[1 << 62, 4, 0]).is_err());
        // Every dim is an int64 to TensorFlow, even in an empty shape.
        let err = TensorShape::new(&[0, usize::MAX]).unwrap_err().to_string();
        assert!(err.contains("int64"), "{err}");
        assert!(
            TensorShape::new(&[0, i64::MAX as usize]).is_ok_and(|s| s.dims_i64()[1] == i64::MAX)
        );
        assert!(TensorShape::new(&[0, 1 << 63]).is_err());
        let mut s = TensorShape::new(&[1 << 40]).unwrap();
        assert!(s.add_dim(1 << 40).is_err());
        assert_eq!(
            s.to_string(),
            "[1099511627776]",
            "a failed add leaves the shape as it was"
        );
        assert!(s.set_dim(3, 1).is_err());
        assert!(s.remove_dim_range(1, 0).is_err());
        assert!(s.remove_last_dims(2).is_err());
    }

    #[test]
    fn large_dims_and_ranks_use_the_heap_correctly() {
        let big = TensorShape::new(&[1 << 33, 2]).unwrap();
        assert_eq!(big.num_elements(), 1 << 34);
        let rank8 = TensorShape::new(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        assert_eq!(rank8.num_elements(), 40320);
        assert_eq!(rank8.dim_size(7), 8);
        let mut shrunk = rank8.clone();
        shrunk.remove_dim_range(0, 4).unwrap();
        assert_eq!(shrunk, TensorShape::new(&[5, 6, 7, 8]).unwrap());
    }
}
