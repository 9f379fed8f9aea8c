//! Shapes and slices to and from their protos, with the same validation as the string and
//! constructor forms.

use super::messages::{DimProto, ExtentProto, TensorShapeProto, TensorSliceProto};
use crate::error::{Error, Result};
use crate::partial_shape::PartialTensorShape;
use crate::shape::{TensorShape, MAX_RANK};
use crate::slice::{Extent, TensorSlice};

/// TensorFlow's `TensorSlice::kFullExtent`: a length of -1 means the whole dim.
const FULL_EXTENT: i64 = -1;

fn dims_proto(dims: impl IntoIterator<Item = i64>) -> Vec<DimProto> {
    dims.into_iter()
        .map(|size| DimProto {
            size,
            name: String::new(),
        })
        .collect()
}

fn check_rank(rank: usize) -> Result<()> {
    if rank > MAX_RANK {
        return Err(Error::InvalidProto(format!(
            "the shape has rank {rank}, over the maximum rank {MAX_RANK}"
        )));
    }
    Ok(())
}

impl TensorShape {
    /// The shape as a `TensorShapeProto`.
    pub fn to_proto(&self) -> TensorShapeProto {
        TensorShapeProto {
            dim: dims_proto(self.dims_i64()),
            unknown_rank: false,
        }
    }

    /// A fully defined shape from a proto: every dim >= 0, rank <= 254, the element count
    /// within `i64`. As TensorFlow's `TensorShape(proto)` (and Python's `make_ndarray`) read
    /// it, the `unknown_rank` flag is ignored: the dims are the shape (none: a scalar). Dim
    /// names are ignored.
    pub fn from_proto(proto: &TensorShapeProto) -> Result<Self> {
        check_rank(proto.dim.len())?;
        let dims = proto
            .dim
            .iter()
            .enumerate()
            .map(|(i, d)| {
                usize::try_from(d.size).map_err(|_| {
                    Error::InvalidProto(format!(
                        "dim {i} has size {}: a tensor's dims must be >= 0",
                        d.size
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        TensorShape::new(&dims).map_err(|e| Error::InvalidProto(e.to_string()))
    }
}

impl PartialTensorShape {
    /// The shape as a `TensorShapeProto` (unknown dims are -1).
    pub fn to_proto(&self) -> TensorShapeProto {
        match self.dims_i64() {
            None => TensorShapeProto {
                dim: vec![],
                unknown_rank: true,
            },
            Some(dims) => TensorShapeProto {
                dim: dims_proto(dims),
                unknown_rank: false,
            },
        }
    }

    /// A partial shape from a proto: -1 is an unknown dim, `unknown_rank` an unknown rank.
    pub fn from_proto(proto: &TensorShapeProto) -> Result<Self> {
        check_rank(proto.dim.len())?;
        if proto.unknown_rank {
            if !proto.dim.is_empty() {
                return Err(Error::InvalidProto(
                    "a shape with unknown_rank set must have no dims".into(),
                ));
            }
            return Ok(Self::unknown_rank());
        }
        let dims: Vec<i64> = proto.dim.iter().map(|d| d.size).collect();
        Self::from_i64(&dims).map_err(|e| Error::InvalidProto(e.to_string()))
    }
}

impl TensorSlice {
    /// The slice as a `TensorSliceProto` (a full extent has no length).
    pub fn to_proto(&self) -> TensorSliceProto {
        TensorSliceProto {
            extent: self
                .extents()
                .iter()
                .map(|e| ExtentProto {
                    start: e.start(),
                    length: e.length(),
                })
                .collect(),
        }
    }

    /// A slice from a proto, as TensorFlow's `TensorSlice::BuildTensorSlice` reads it: a
    /// start >= 0 and a length > 0 per extent, or the whole dim, written either as no length
    /// or as `length: -1` (TensorFlow's `kFullExtent`), with start 0.
    pub fn from_proto(proto: &TensorSliceProto) -> Result<Self> {
        check_rank(proto.extent.len())?;
        let extents = proto
            .extent
            .iter()
            .enumerate()
            .map(|(i, e)| match e.length.unwrap_or(FULL_EXTENT) {
                FULL_EXTENT if e.start == 0 => Ok(Extent::Full),
                FULL_EXTENT => Err(Error::InvalidSlice(format!(
                    "extent {i} has start {} but a full length: a full extent starts at 0",
                    e.start
                ))),
                length => Extent::range(e.start, length)
                    .map_err(|err| Error::InvalidSlice(format!("extent {i}: {err}"))),
            })
            .collect::<Result<Vec<_>>>()?;
        TensorSlice::new(extents)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn shapes_round_trip_and_validate() {
        let shape = TensorShape::new(&[2, 0, 3]).unwrap();
        assert_eq!(TensorShape::from_proto(&shape.to_proto()).unwrap(), shape);
        let partial = PartialTensorShape::from_i64(&[-1, 4]).unwrap();
        let proto = partial.to_proto();
        assert_eq!(proto.dim[0].size, -1);
        assert_eq!(PartialTensorShape::from_proto(&proto).unwrap(), partial);
        let unknown = PartialTensorShape::unknown_rank().to_proto();
        assert!(unknown.unknown_rank);
        assert!(!PartialTensorShape::from_proto(&unknown)
            .unwrap()
            .has_known_rank());
        // -1 is not a size of a fully defined shape.
        let err = TensorShape::from_proto(&proto).unwrap_err().to_string();
        assert!(err.contains("dim 0 has size -1"), "{err}");
        let mut big = TensorShape::new(&[1 << 40]).unwrap().to_proto();
        big.dim.push(DimProto {
            size: 1 << 40,
            name: String::new(),
        });
        assert!(TensorShape::from_proto(&big).is_err());
        let deep = TensorShapeProto {
            dim: dims_proto(vec![1; 255]),
            unknown_rank: false,
        };
        assert!(TensorShape::from_proto(&deep)
            .unwrap_err()
            .to_string()
            .contains("rank 255"));
        assert!(PartialTensorShape::from_proto(&TensorShapeProto {
            dim: dims_proto([3]),
            unknown_rank: true
        })
        .is_err());
    }

    #[test]
    fn slices_round_trip_and_validate() {
        let slice: TensorSlice = "-:1,3".parse().unwrap();
        let proto = slice.to_proto();
        assert_eq!(proto.extent[0].length, None);
        assert_eq!(proto.extent[1].length, Some(3));
        // The wire form: extent { } extent { start: 1 length: 3 }.
        assert_eq!(
            proto.encode_to_vec(),
            [0x0a, 0x00, 0x0a, 0x04, 0x08, 0x01, 0x10, 0x03]
        );
        assert_eq!(TensorSlice::from_proto(&proto).unwrap(), slice);
        // TensorFlow's reader takes an explicit length of -1 as the full extent (from start 0).
        let explicit_full = TensorSliceProto {
            extent: vec![
                ExtentProto {
                    start: 0,
                    length: Some(-1),
                },
                ExtentProto {
                    start: 1,
                    length: Some(3),
                },
            ],
        };
        assert_eq!(TensorSlice::from_proto(&explicit_full).unwrap(), slice);
        let bad_cases = [
            (-1, Some(2)),
            (0, Some(0)),
            (i64::MAX, Some(1)),
            (2, None),
            (2, Some(-1)),
            (0, Some(-2)),
        ];
        for (start, length) in bad_cases {
            let bad = TensorSliceProto {
                extent: vec![ExtentProto { start, length }],
            };
            assert!(TensorSlice::from_proto(&bad).is_err(), "{start} {length:?}");
        }
    }
}
