//! [`PartialTensorShape`]: a shape with unknown dims or an unknown rank.

use std::fmt;

use smallvec::SmallVec;

use crate::error::{Error, Result};
use crate::shape::{TensorShape, INLINE_RANK, MAX_ELEMENTS, MAX_RANK};

/// A dimension that may be unknown.
pub type Dim = Option<usize>;

/// A shape that may be partly or wholly unknown, as TensorFlow's `PartialTensorShape`:
/// dims are `None` when unknown, and the rank itself may be unknown.
///
/// ```
/// use polytensor_core::PartialTensorShape;
/// let a = PartialTensorShape::from_i64(&[-1, 3]).unwrap();
/// let b = PartialTensorShape::from_i64(&[2, -1]).unwrap();
/// assert_eq!(a.to_string(), "[?,3]");
/// assert!(a.is_compatible_with(&b));
/// assert_eq!(a.merge_with(&b).unwrap().to_string(), "[2,3]");
/// assert_eq!(PartialTensorShape::unknown_rank().to_string(), "<unknown>");
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct PartialTensorShape {
    dims: Option<SmallVec<[Dim; INLINE_RANK]>>,
}

impl PartialTensorShape {
    /// A shape whose rank is unknown.
    pub fn unknown_rank() -> Self {
        Self { dims: None }
    }

    /// A shape of known rank from dims that may be unknown; an `Err` for rank over 254, a
    /// known dim over `i64::MAX`, or, as TensorFlow's `PartialTensorShape::IsValid` checks,
    /// known dims before the first unknown one whose product overflows `i64`.
    pub fn new(dims: &[Dim]) -> Result<Self> {
        if dims.len() > MAX_RANK {
            return Err(Error::InvalidShape(format!(
                "rank {} exceeds the maximum rank {MAX_RANK}",
                dims.len()
            )));
        }
        let mut count: Option<u64> = Some(1);
        for &dim in dims {
            let Some(d) = dim else {
                count = None;
                continue;
            };
            if d as u64 > MAX_ELEMENTS {
                return Err(Error::InvalidShape(format!(
                    "dimension {d} of {dims:?} exceeds the largest dimension TensorFlow \
                     allows, {MAX_ELEMENTS} (int64)"
                )));
            }
            if let Some(n) = count {
                count = Some(
                    (d as u64)
                        .checked_mul(n)
                        .filter(|&c| c <= MAX_ELEMENTS)
                        .ok_or_else(|| {
                            Error::InvalidShape(format!(
                                "the element count of {dims:?} overflows (limit {MAX_ELEMENTS})"
                            ))
                        })?,
                );
            }
        }
        Ok(Self {
            dims: Some(dims.iter().copied().collect()),
        })
    }

    /// A shape from TensorFlow's signed form: -1 is an unknown dim; below -1 is an `Err`.
    pub fn from_i64(dims: &[i64]) -> Result<Self> {
        let dims = dims
            .iter()
            .map(|&d| match d {
                -1 => Ok(None),
                d if d < -1 => Err(Error::InvalidShape(format!(
                    "dimension {d} is invalid: only -1 means unknown"
                ))),
                d => Ok(Some(d as usize)),
            })
            .collect::<Result<Vec<_>>>()?;
        Self::new(&dims)
    }

    /// Whether the rank is known.
    pub fn has_known_rank(&self) -> bool {
        self.dims.is_some()
    }

    /// The rank, or `None` if unknown.
    pub fn rank(&self) -> Option<usize> {
        self.dims.as_ref().map(|d| d.len())
    }

    /// The dims, or `None` if the rank is unknown.
    pub fn dims(&self) -> Option<&[Dim]> {
        self.dims.as_deref()
    }

    /// The dims in TensorFlow's signed form (-1 unknown), or `None` if the rank is unknown.
    pub fn dims_i64(&self) -> Option<Vec<i64>> {
        self.dims()
            .map(|dims| dims.iter().map(|d| d.map_or(-1, |d| d as i64)).collect())
    }

    /// Whether the rank and every dim are known.
    pub fn is_fully_defined(&self) -> bool {
        self.dims().is_some_and(|d| d.iter().all(Option::is_some))
    }

    /// The element count if fully defined and representable.
    pub fn num_elements(&self) -> Option<usize> {
        self.to_shape().ok().map(|s| s.num_elements())
    }

    /// Whether some fully defined shape is described by both `self` and `other`.
    pub fn is_compatible_with(&self, other: &PartialTensorShape) -> bool {
        match (self.dims(), other.dims()) {
            (Some(a), Some(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .zip(b)
                        .all(|(x, y)| x.is_none() || y.is_none() || x == y)
            }
            _ => true,
        }
    }

    /// The most specific shape compatible with both; an `Err` with TensorFlow's message if
    /// they are incompatible.
    pub fn merge_with(&self, other: &PartialTensorShape) -> Result<PartialTensorShape> {
        let (a, b) = match (self.dims(), other.dims()) {
            (None, _) => return Ok(other.clone()),
            (_, None) => return Ok(self.clone()),
            (Some(a), Some(b)) => (a, b),
        };
        if a.len() != b.len() {
            return Err(Error::invalid(format!(
                "PartialTensorShape: Incompatible ranks during merge: {} vs. {}",
                a.len(),
                b.len()
            )));
        }
        let merged = a
            .iter()
            .zip(b)
            .map(|(&x, &y)| match (x, y) {
                (Some(x), Some(y)) if x != y => Err(Error::invalid(format!(
                    "PartialTensorShape: Incompatible shapes during merge: {self} vs. {other}"
                ))),
                _ => Ok(x.or(y)),
            })
            .collect::<Result<Vec<_>>>()?;
        Self::new(&merged)
    }

    /// This shape followed by `other`; unknown rank if either rank is unknown.
    pub fn concatenate(&self, other: &PartialTensorShape) -> Result<PartialTensorShape> {
        match (self.dims(), other.dims()) {
            (Some(a), Some(b)) => Self::new(&[a, b].concat()),
            _ => Ok(Self::unknown_rank()),
        }
    }

    /// The fully defined shape; an `Err` if anything is unknown.
    pub fn to_shape(&self) -> Result<TensorShape> {
        let dims = self.dims().ok_or_else(|| {
            Error::InvalidShape("the rank is unknown, so the shape is not fully defined".into())
        })?;
        let known = dims
            .iter()
            .enumerate()
            .map(|(i, d)| {
                d.ok_or_else(|| {
                    Error::InvalidShape(format!(
                        "dimension {i} of {self} is unknown, so the shape is not fully defined"
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        TensorShape::new(&known)
    }
}

impl From<&TensorShape> for PartialTensorShape {
    fn from(shape: &TensorShape) -> Self {
        Self {
            dims: Some(shape.iter().map(Some).collect()),
        }
    }
}

impl From<TensorShape> for PartialTensorShape {
    fn from(shape: TensorShape) -> Self {
        Self::from(&shape)
    }
}

impl TryFrom<&PartialTensorShape> for TensorShape {
    type Error = Error;
    fn try_from(shape: &PartialTensorShape) -> Result<Self> {
        shape.to_shape()
    }
}

impl fmt::Display for PartialTensorShape {
    /// TensorFlow's `DebugString`: `[?,3]`, `<unknown>` for an unknown rank.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(dims) = self.dims() else {
            return f.write_str("<unknown>");
        };
        f.write_str("[")?;
        for (i, d) in dims.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match d {
                Some(d) => write!(f, "{d}")?,
                None => f.write_str("?")?,
            }
        }
        f.write_str("]")
    }
}

impl fmt::Debug for PartialTensorShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PartialTensorShape{self}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(dims: &[i64]) -> PartialTensorShape {
        PartialTensorShape::from_i64(dims).unwrap()
    }

    #[test]
    fn known_dims_follow_tensorflows_limits() {
        // A known dim above i64::MAX would read back as -1, unknown: refused.
        assert!(PartialTensorShape::new(&[Some(usize::MAX)]).is_err());
        assert!(PartialTensorShape::new(&[None, Some(1 << 63)]).is_err());
        assert_eq!(
            PartialTensorShape::new(&[None, Some(i64::MAX as usize)])
                .unwrap()
                .dims_i64(),
            Some(vec![-1, i64::MAX])
        );
        // Known dims before the first unknown one may not overflow; after it, TensorFlow
        // cannot know the count, and neither checks.
        assert!(PartialTensorShape::from_i64(&[1 << 40, 1 << 40, -1]).is_err());
        assert!(PartialTensorShape::from_i64(&[1 << 40, 1 << 40]).is_err());
        assert!(PartialTensorShape::from_i64(&[-1, 1 << 40, 1 << 40]).is_ok());
    }

    #[test]
    fn definedness_and_conversion() {
        assert!(p(&[2, 3]).is_fully_defined());
        assert!(!p(&[2, -1]).is_fully_defined());
        assert!(!PartialTensorShape::unknown_rank().is_fully_defined());
        assert_eq!(p(&[2, 3]).to_shape().unwrap().to_string(), "[2,3]");
        assert!(p(&[2, -1])
            .to_shape()
            .unwrap_err()
            .to_string()
            .contains("dimension 1"));
        assert!(PartialTensorShape::unknown_rank().to_shape().is_err());
        assert!(PartialTensorShape::from_i64(&[-2]).is_err());
        assert_eq!(p(&[]).to_shape().unwrap(), TensorShape::scalar());
        assert_eq!(p(&[4, -1]).dims_i64().unwrap(), vec![4, -1]);
        assert_eq!(p(&[4, 5]).num_elements(), Some(20));
    }

    #[test]
    fn compatibility_and_merge() {
        let unknown = PartialTensorShape::unknown_rank();
        assert!(p(&[2, 3]).is_compatible_with(&unknown));
        assert!(p(&[2, -1]).is_compatible_with(&p(&[-1, 4])));
        assert!(!p(&[2, 3]).is_compatible_with(&p(&[2, 4])));
        assert!(!p(&[2]).is_compatible_with(&p(&[2, 1])));
        assert_eq!(p(&[2, -1]).merge_with(&p(&[-1, 4])).unwrap(), p(&[2, 4]));
        assert_eq!(unknown.merge_with(&p(&[1])).unwrap(), p(&[1]));
        assert!(p(&[2, 3]).merge_with(&p(&[2, 4])).is_err());
        assert!(p(&[2]).merge_with(&p(&[2, 3])).is_err());
    }

    #[test]
    fn concatenate_and_display() {
        assert_eq!(p(&[-1]).concatenate(&p(&[3])).unwrap().to_string(), "[?,3]");
        let unknown = PartialTensorShape::unknown_rank();
        assert_eq!(
            p(&[1]).concatenate(&unknown).unwrap().to_string(),
            "<unknown>"
        );
        assert_eq!(p(&[]).to_string(), "[]");
        let shape = TensorShape::new(&[5, 6]).unwrap();
        assert_eq!(PartialTensorShape::from(&shape).to_string(), "[5,6]");
    }
}
