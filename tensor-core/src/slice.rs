//! [`TensorSlice`]: a hyper-rectangle of a tensor, in TensorFlow's string form.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::shape::{TensorShape, MAX_RANK};

/// The extent of a slice in one dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Extent {
    /// The whole dimension (`-` in the string form, an absent length in the proto).
    Full,
    /// `length` elements from `start` (`start,length`).
    Range {
        /// First index, >= 0.
        start: i64,
        /// Number of elements, > 0.
        length: i64,
    },
}

impl Extent {
    /// A checked range: `start >= 0`, `length > 0`, and `start + length` fits in an `i64`.
    pub fn range(start: i64, length: i64) -> Result<Self> {
        if start < 0 || length <= 0 {
            return Err(Error::InvalidSlice(format!(
                "expected a non-negative start and a positive length, got start = {start}, length = {length}"
            )));
        }
        if start.checked_add(length).is_none() {
            return Err(Error::InvalidSlice(format!(
                "start {start} + length {length} overflows"
            )));
        }
        Ok(Extent::Range { start, length })
    }

    /// The start (0 for a full extent).
    pub fn start(self) -> i64 {
        match self {
            Extent::Full => 0,
            Extent::Range { start, .. } => start,
        }
    }

    /// The length, or `None` for a full extent.
    pub fn length(self) -> Option<i64> {
        match self {
            Extent::Full => None,
            Extent::Range { length, .. } => Some(length),
        }
    }

    /// One past the last index, or `None` for a full extent. (Saturates for a hand-built
    /// `Range` that [`Extent::check`] would refuse.)
    pub fn end(self) -> Option<i64> {
        match self {
            Extent::Full => None,
            Extent::Range { start, length } => Some(start.saturating_add(length)),
        }
    }

    /// `Ok` for a full extent or a range that [`Extent::range`] would make: the variant's
    /// fields are public, so every slice built from extents checks them.
    pub fn check(self) -> Result<Self> {
        match self {
            Extent::Full => Ok(self),
            Extent::Range { start, length } => Extent::range(start, length),
        }
    }
}

/// A slice of a tensor: one [`Extent`] per dimension, as TensorFlow's `TensorSlice`.
///
/// The string form is TensorFlow's: dimensions separated by `:`, each either `-` (full) or
/// `start,length`; the empty string is the rank-0 slice.
///
/// ```
/// use polytensor_core::{TensorShape, TensorSlice};
/// let slice: TensorSlice = "0,10:-:14,1".parse().unwrap();
/// assert_eq!(slice.rank(), 3);
/// assert_eq!(slice.to_string(), "0,10:-:14,1");
/// let shape = TensorShape::new(&[20, 5, 16]).unwrap();
/// assert_eq!(slice.slice_tensor_shape(&shape).unwrap().to_string(), "[10,5,1]");
/// assert!("0,10:x".parse::<TensorSlice>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct TensorSlice {
    extents: Vec<Extent>,
}

impl TensorSlice {
    /// The slice that covers a whole tensor of rank `rank`.
    pub fn full(rank: usize) -> Self {
        Self {
            extents: vec![Extent::Full; rank],
        }
    }

    /// A slice from extents; an `Err` for rank over 254 or a range with a negative start, a
    /// length under 1, or an end past `i64::MAX` (see [`Extent::range`]).
    pub fn new(extents: Vec<Extent>) -> Result<Self> {
        if extents.len() > MAX_RANK {
            return Err(Error::InvalidSlice(format!(
                "rank {} exceeds the maximum rank {MAX_RANK}",
                extents.len()
            )));
        }
        for (d, extent) in extents.iter().enumerate() {
            extent.check().map_err(|e| match e {
                Error::InvalidSlice(why) => Error::InvalidSlice(format!("dimension {d}: {why}")),
                other => other,
            })?;
        }
        Ok(Self { extents })
    }

    /// A slice from `(start, length)` pairs, `None` length meaning the full dimension.
    pub fn from_pairs(pairs: &[(i64, Option<i64>)]) -> Result<Self> {
        let extents = pairs
            .iter()
            .map(|&(start, length)| match length {
                None if start == 0 => Ok(Extent::Full),
                None => Err(Error::InvalidSlice(format!(
                    "a full extent must start at 0, got {start}"
                ))),
                Some(length) => Extent::range(start, length),
            })
            .collect::<Result<Vec<_>>>()?;
        Self::new(extents)
    }

    /// The slice covering exactly `shape` from its origin (every dim as a range; an empty
    /// dim, which no range can express, as full).
    pub fn covering(shape: &TensorShape) -> Self {
        let extents = shape
            .iter()
            .map(|d| Extent::range(0, d as i64).unwrap_or(Extent::Full))
            .collect();
        Self { extents }
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.extents.len()
    }

    /// The extents.
    pub fn extents(&self) -> &[Extent] {
        &self.extents
    }

    /// The extent of dimension `d`, or `None` if `d >= rank`.
    pub fn extent(&self, d: usize) -> Option<Extent> {
        self.extents.get(d).copied()
    }

    /// Whether dimension `d` is full.
    pub fn is_full_at(&self, d: usize) -> bool {
        matches!(self.extent(d), Some(Extent::Full))
    }

    /// Whether every dimension is full.
    pub fn is_full(&self) -> bool {
        self.extents.iter().all(|e| matches!(e, Extent::Full))
    }

    fn check_rank(&self, other: &TensorSlice, op: &str) -> Result<()> {
        if self.rank() != other.rank() {
            return Err(Error::InvalidSlice(format!(
                "{op}: slices of different ranks: {self:?} has rank {}, {other:?} has rank {}",
                self.rank(),
                other.rank()
            )));
        }
        Ok(())
    }

    /// The intersection, `Ok(None)` if it is empty; an `Err` if the ranks differ.
    pub fn intersect(&self, other: &TensorSlice) -> Result<Option<TensorSlice>> {
        self.check_rank(other, "intersect")?;
        let mut extents = Vec::with_capacity(self.rank());
        for (&a, &b) in self.extents.iter().zip(&other.extents) {
            let extent = match (a, b) {
                (Extent::Full, e) | (e, Extent::Full) => e,
                (a, b) => {
                    let start = a.start().max(b.start());
                    let end = a.end().unwrap_or(0).min(b.end().unwrap_or(0));
                    if end <= start {
                        return Ok(None);
                    }
                    Extent::Range {
                        start,
                        length: end - start,
                    }
                }
            };
            extents.push(extent);
        }
        Ok(Some(TensorSlice { extents }))
    }

    /// Whether the two slices share any element.
    pub fn overlaps(&self, other: &TensorSlice) -> bool {
        matches!(self.intersect(other), Ok(Some(_)))
    }

    /// The shape of this slice of a tensor of shape `shape`; an `Err` if the ranks differ or
    /// the slice reaches past the shape.
    pub fn slice_tensor_shape(&self, shape: &TensorShape) -> Result<TensorShape> {
        if self.rank() != shape.rank() {
            return Err(Error::InvalidSlice(format!(
                "slice {self} has rank {} but shape {shape} has rank {}",
                self.rank(),
                shape.rank()
            )));
        }
        let dims = self
            .extents
            .iter()
            .zip(shape.iter())
            .enumerate()
            .map(|(d, (&extent, size))| match extent {
                Extent::Full => Ok(size),
                Extent::Range { start, length } if (start + length) as u64 <= size as u64 => {
                    Ok(length as usize)
                }
                Extent::Range { .. } => Err(Error::InvalidSlice(format!(
                    "extent in dimension {d} out of bounds: shape = {shape}, slice = {self}"
                ))),
            })
            .collect::<Result<Vec<_>>>()?;
        TensorShape::new(&dims)
    }

    /// `sub` (which must lie within `self`) relative to `self`'s origin, as TensorFlow's
    /// `ComputeRelative`.
    pub fn compute_relative(&self, sub: &TensorSlice) -> Result<TensorSlice> {
        self.check_rank(sub, "compute_relative")?;
        let mut extents = Vec::with_capacity(self.rank());
        for (d, (&base, &part)) in self.extents.iter().zip(&sub.extents).enumerate() {
            let extent = match (base, part) {
                (Extent::Full, part) => part,
                (Extent::Range { .. }, Extent::Full) => {
                    return Err(Error::InvalidSlice(format!(
                        "compute_relative: dimension {d} of {sub} is full, which {self} does not contain"
                    )))
                }
                (base, part) => {
                    if part.start() < base.start() || part.end() > base.end() {
                        return Err(Error::InvalidSlice(format!(
                            "compute_relative: dimension {d} of {sub} is not within {self}"
                        )));
                    }
                    Extent::Range {
                        start: part.start() - base.start(),
                        length: part.length().unwrap_or(0),
                    }
                }
            };
            extents.push(extent);
        }
        Ok(TensorSlice { extents })
    }

    /// Grow `self` to the smallest slice that covers both `self` and `other`.
    pub fn update_to_cover(&mut self, other: &TensorSlice) -> Result<()> {
        self.check_rank(other, "update_to_cover")?;
        for (mine, &theirs) in self.extents.iter_mut().zip(&other.extents) {
            *mine = match (*mine, theirs) {
                (Extent::Full, _) | (_, Extent::Full) => Extent::Full,
                (a, b) => {
                    let start = a.start().min(b.start());
                    let end = a.end().unwrap_or(0).max(b.end().unwrap_or(0));
                    Extent::Range {
                        start,
                        length: end - start,
                    }
                }
            };
        }
        Ok(())
    }
}

impl FromStr for TensorSlice {
    type Err = Error;

    /// Parse TensorFlow's form (`"0,10:-:14,1"`) as TensorFlow's `TensorSlice::Parse` does:
    /// empty items between separators are skipped (`"0,10::-"` is `"0,10:-"`, `"0,,2"` is
    /// `"0,2"`), and each number may carry surrounding ASCII whitespace and a sign
    /// (`" +1 , 2"`). Anything else, a number outside `i64`, and a range whose end passes
    /// `i64::MAX` are an `Err` that names the offending part. [`Display`](fmt::Display)
    /// writes the canonical form.
    fn from_str(s: &str) -> Result<Self> {
        let extents = s
            .split(':')
            .filter(|item| !item.is_empty())
            .enumerate()
            .map(|(d, item)| {
                parse_extent(item)
                    .map_err(|why| Error::InvalidSlice(format!("dimension {d} of {s:?}: {why}")))
            })
            .collect::<Result<Vec<_>>>()?;
        Self::new(extents)
    }
}

/// One item of the string form: `-`, or `start,length` with empty parts skipped.
fn parse_extent(item: &str) -> std::result::Result<Extent, String> {
    if item == "-" {
        return Ok(Extent::Full);
    }
    let parts: Vec<&str> = item.split(',').filter(|p| !p.is_empty()).collect();
    let [start, length] = parts[..] else {
        return Err(format!("expected \"start,length\" or \"-\", got {item:?}"));
    };
    let start = parse_i64(start, "start")?;
    let length = parse_i64(length, "length")?;
    Extent::range(start, length).map_err(|e| match e {
        Error::InvalidSlice(why) => why,
        other => other.to_string(),
    })
}

/// An integer as TensorFlow's `safe_strto64` (`absl::SimpleAtoi`) reads it: ASCII whitespace
/// around it, an optional `+` or `-`, then decimal digits only, within `i64`.
fn parse_i64(text: &str, what: &str) -> std::result::Result<i64, String> {
    // absl's whitespace includes the vertical tab, which Rust's ASCII whitespace does not.
    let trimmed = text.trim_matches(|c: char| c.is_ascii_whitespace() || c == '\x0b');
    let digits = trimmed.strip_prefix(['+', '-']).unwrap_or(trimmed);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{what} {text:?} is not an integer"));
    }
    trimmed
        .parse::<i64>()
        .map_err(|_| format!("{what} {text:?} does not fit in an int64"))
}

impl fmt::Display for TensorSlice {
    /// TensorFlow's `DebugString`: `0,10:-:14,1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (d, extent) in self.extents.iter().enumerate() {
            if d > 0 {
                f.write_str(":")?;
            }
            match extent {
                Extent::Full => f.write_str("-")?,
                Extent::Range { start, length } => write!(f, "{start},{length}")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(text: &str) -> TensorSlice {
        text.parse().unwrap()
    }

    #[test]
    fn parse_and_print_round_trip() {
        for text in ["", "-", "0,10:-:14,1", "1,2:3,4", "-:-"] {
            assert_eq!(s(text).to_string(), text);
        }
        assert_eq!(s("").rank(), 0);
        assert!(s("-:-").is_full());
        assert!(!s("0,1:-").is_full());
        assert!(s("0,1:-").is_full_at(1));
        assert_eq!(s("3,4").extent(0).unwrap().end(), Some(7));
    }

    #[test]
    fn malformed_strings_name_the_problem() {
        let cases = [
            ("0,10:x", "dimension 1"),
            ("1", "start,length"),
            ("1,2,3", "start,length"),
            ("-1,2", "non-negative start"),
            ("1,0", "positive length"),
            ("a,2", "not an integer"),
            ("1,", "start,length"),
            ("99999999999999999999,1", "int64"),
            ("9223372036854775807,1", "overflows"),
            ("+-1,2", "not an integer"),
            ("1 2,3", "not an integer"),
            ("0x1,2", "not an integer"),
            (" -,1", "not an integer"),
            ("0,10: - ", "dimension 1"),
            ("1,\u{a0}2", "not an integer"),
        ];
        for (text, needle) in cases {
            let err = text.parse::<TensorSlice>().unwrap_err().to_string();
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }

    #[test]
    fn tensorflow_leniency_is_accepted_and_canonicalised() {
        // What TensorFlow's TensorSlice::Parse accepts (str_util::Split with SkipEmpty, then
        // safe_strto64), with the canonical string polytensor writes.
        let cases = [
            ("0,10::-", "0,10:-"),
            ("0,,2", "0,2"),
            ("0,2:", "0,2"),
            (":0,2", "0,2"),
            (":", ""),
            ("::", ""),
            (",1,2,", "1,2"),
            (" 1 , 2 ", "1,2"),
            ("+1,+2", "1,2"),
            ("\t3,\n4\x0b:-", "3,4:-"),
            ("-0,1", "0,1"),
            ("007,010", "7,10"),
        ];
        for (text, canonical) in cases {
            let slice = s(text);
            assert_eq!(slice.to_string(), canonical, "{text:?}");
            assert_eq!(s(canonical), slice);
        }
    }

    #[test]
    fn constructors_check_every_extent() {
        let overflowing = Extent::Range {
            start: i64::MAX - 1,
            length: 2,
        };
        let err = TensorSlice::new(vec![Extent::Full, overflowing]).unwrap_err();
        assert!(err.to_string().contains("dimension 1"), "{err}");
        for (start, length) in [(-1, 1), (0, 0), (0, -5), (i64::MAX, 1)] {
            assert!(TensorSlice::new(vec![Extent::Range { start, length }]).is_err());
        }
        assert_eq!(overflowing.end(), Some(i64::MAX));
        let ok = TensorSlice::new(vec![Extent::Range {
            start: i64::MAX - 2,
            length: 2,
        }])
        .unwrap();
        let shape = TensorShape::new(&[4]).unwrap();
        assert!(ok.slice_tensor_shape(&shape).is_err());
    }

    #[test]
    fn intersect() {
        assert_eq!(
            s("0,10:-").intersect(&s("5,10:2,3")).unwrap(),
            Some(s("5,5:2,3"))
        );
        assert_eq!(s("0,5").intersect(&s("5,5")).unwrap(), None);
        assert_eq!(s("-").intersect(&s("-")).unwrap(), Some(s("-")));
        assert!(s("-").intersect(&s("-:-")).is_err());
        assert!(s("1,3").overlaps(&s("3,1")));
        assert!(!s("1,2").overlaps(&s("3,1")));
    }

    #[test]
    fn slice_shape() {
        let shape = TensorShape::new(&[10, 4]).unwrap();
        assert_eq!(
            s("2,8:-").slice_tensor_shape(&shape).unwrap().to_string(),
            "[8,4]"
        );
        let err = s("2,9:-")
            .slice_tensor_shape(&shape)
            .unwrap_err()
            .to_string();
        assert!(err.contains("dimension 0"), "{err}");
        assert!(s("-").slice_tensor_shape(&shape).is_err());
        assert_eq!(TensorSlice::covering(&shape), s("0,10:0,4"));
    }

    #[test]
    fn relative_and_cover() {
        assert_eq!(
            s("2,8:-").compute_relative(&s("3,2:1,2")).unwrap(),
            s("1,2:1,2")
        );
        assert!(s("2,8").compute_relative(&s("1,2")).is_err());
        assert!(s("2,8").compute_relative(&s("-")).is_err());
        let mut cover = s("2,3:1,1");
        cover.update_to_cover(&s("7,1:-")).unwrap();
        assert_eq!(cover, s("2,6:-"));
        assert!(cover.update_to_cover(&s("-")).is_err());
    }

    #[test]
    fn from_pairs() {
        assert_eq!(
            TensorSlice::from_pairs(&[(0, None), (2, Some(3))]).unwrap(),
            s("-:2,3")
        );
        assert!(TensorSlice::from_pairs(&[(1, None)]).is_err());
    }
}
