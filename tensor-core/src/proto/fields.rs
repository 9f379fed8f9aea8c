//! Which typed field of a `TensorProto` carries each dtype, and the conversions between
//! little-endian element bytes and that field's values, both ways.

use super::messages::TensorProto;
use crate::dtype::DataType;
use crate::error::{Error, Result};

/// The integer dtypes carried in `int_val`: their width in bits and signedness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IntKind {
    bits: u32,
    signed: bool,
}

impl IntKind {
    fn min(self) -> i64 {
        if self.signed {
            -(1i64 << (self.bits - 1))
        } else {
            0
        }
    }

    fn max(self) -> i64 {
        if self.signed {
            (1i64 << (self.bits - 1)) - 1
        } else {
            (1i64 << self.bits) - 1
        }
    }

    /// The value of one element's bytes. Sub-byte dtypes (int4, int2, ...) are stored one
    /// per byte; only their low bits count, sign-extended for the signed ones, so both the
    /// sign-extended form (TensorFlow's C++) and the nibble form (ml_dtypes) read the same.
    fn read(self, bytes: &[u8]) -> i64 {
        let mut raw = [0u8; 8];
        raw[..bytes.len()].copy_from_slice(bytes);
        crate::dtype::low_bits(u64::from_le_bytes(raw), self.bits, self.signed)
    }
}

/// The typed field of a dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Field {
    /// `half_val`: the raw 16 bits (float16, bfloat16).
    Half,
    /// `float_val`.
    Float,
    /// `double_val`.
    Double,
    /// `int_val`, with the dtype's range.
    Int(IntKind),
    /// `int64_val`.
    Int64,
    /// `uint32_val`.
    UInt32,
    /// `uint64_val`.
    UInt64,
    /// `bool_val`.
    Bool,
    /// `scomplex_val`, parts interleaved.
    SComplex,
    /// `dcomplex_val`, parts interleaved.
    DComplex,
    /// `string_val`.
    String,
    /// `float8_val`, one byte per value.
    Float8,
}

impl Field {
    /// The field of `dtype`, or an `Err` for dtypes with no values (`resource`, `variant`).
    pub(crate) fn of(dtype: DataType) -> Result<Field> {
        use DataType as D;
        let int = |bits, signed| Field::Int(IntKind { bits, signed });
        Ok(match dtype {
            D::Half | D::BFloat16 => Field::Half,
            D::Float => Field::Float,
            D::Double => Field::Double,
            D::Int8 | D::QInt8 => int(8, true),
            D::UInt8 | D::QUInt8 => int(8, false),
            D::Int16 | D::QInt16 => int(16, true),
            D::UInt16 | D::QUInt16 => int(16, false),
            D::Int32 | D::QInt32 => int(32, true),
            D::Int4 => int(4, true),
            D::UInt4 => int(4, false),
            D::Int2 => int(2, true),
            D::UInt2 => int(2, false),
            D::Int64 => Field::Int64,
            D::UInt32 => Field::UInt32,
            D::UInt64 => Field::UInt64,
            D::Bool => Field::Bool,
            D::Complex64 => Field::SComplex,
            D::Complex128 => Field::DComplex,
            D::String => Field::String,
            D::Float8E5M2
            | D::Float8E4M3FN
            | D::Float8E4M3FNUZ
            | D::Float8E4M3B11FNUZ
            | D::Float8E5M2FNUZ => Field::Float8,
            other => {
                return Err(Error::InvalidProto(format!(
                    "{other} tensors are not supported: their resource_handle_val and \
                     variant_val fields are not read or written"
                )))
            }
        })
    }

    /// The field's name in `tensor.proto`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Field::Half => "half_val",
            Field::Float => "float_val",
            Field::Double => "double_val",
            Field::Int(_) => "int_val",
            Field::Int64 => "int64_val",
            Field::UInt32 => "uint32_val",
            Field::UInt64 => "uint64_val",
            Field::Bool => "bool_val",
            Field::SComplex => "scomplex_val",
            Field::DComplex => "dcomplex_val",
            Field::String => "string_val",
            Field::Float8 => "float8_val",
        }
    }

    /// Store the elements in `bytes` (little-endian, `size` bytes each) in this field.
    pub(crate) fn write(self, proto: &mut TensorProto, bytes: &[u8], size: usize) {
        let elements = bytes.chunks_exact(size);
        match self {
            Field::Half => {
                proto.half_val = lanes::<2>(bytes)
                    .map(|b| u16::from_le_bytes(b).into())
                    .collect();
            }
            Field::Float => proto.float_val = lanes::<4>(bytes).map(f32::from_le_bytes).collect(),
            Field::Double => proto.double_val = lanes::<8>(bytes).map(f64::from_le_bytes).collect(),
            // Every int_val kind has at most 32 bits, so the value fits.
            Field::Int(kind) => proto.int_val = elements.map(|e| kind.read(e) as i32).collect(),
            Field::Int64 => proto.int64_val = lanes::<8>(bytes).map(i64::from_le_bytes).collect(),
            Field::UInt32 => proto.uint32_val = lanes::<4>(bytes).map(u32::from_le_bytes).collect(),
            Field::UInt64 => proto.uint64_val = lanes::<8>(bytes).map(u64::from_le_bytes).collect(),
            Field::Bool => proto.bool_val = bytes.iter().map(|&b| b != 0).collect(),
            Field::SComplex => {
                proto.scomplex_val = lanes::<4>(bytes).map(f32::from_le_bytes).collect()
            }
            Field::DComplex => {
                proto.dcomplex_val = lanes::<8>(bytes).map(f64::from_le_bytes).collect()
            }
            Field::Float8 => proto.float8_val = bytes.to_vec(),
            Field::String => unreachable!("strings are written from the string buffer"),
        }
    }

    /// The number of values the field holds in `proto`: complex parts count as one value
    /// per pair, and an odd last part is not a value (TensorFlow's C++ `NumElements` is the
    /// part count over 2; Python's `zip(it, it)` drops it too).
    pub(crate) fn count(self, proto: &TensorProto) -> Result<usize> {
        Ok(match self {
            Field::Half => proto.half_val.len(),
            Field::Float => proto.float_val.len(),
            Field::Double => proto.double_val.len(),
            Field::Int(_) => proto.int_val.len(),
            Field::Int64 => proto.int64_val.len(),
            Field::UInt32 => proto.uint32_val.len(),
            Field::UInt64 => proto.uint64_val.len(),
            Field::Bool => proto.bool_val.len(),
            Field::SComplex => proto.scomplex_val.len() / 2,
            Field::DComplex => proto.dcomplex_val.len() / 2,
            Field::String => proto.string_val.len(),
            Field::Float8 => proto.float8_val.len(),
        })
    }

    /// The little-endian bytes of the field's values, `size` bytes per element, checking
    /// that each value is in the dtype's range.
    pub(crate) fn read(self, proto: &TensorProto, size: usize) -> Result<Vec<u8>> {
        fn collect<T, const N: usize>(values: &[T], f: impl Fn(&T) -> [u8; N]) -> Vec<u8> {
            values.iter().flat_map(f).collect()
        }
        Ok(match self {
            Field::Half => {
                let mut out = Vec::with_capacity(proto.half_val.len() * 2);
                for (i, &v) in proto.half_val.iter().enumerate() {
                    let bits = u16::try_from(v).map_err(|_| out_of_range(self, i, v, 0, 65535))?;
                    out.extend_from_slice(&bits.to_le_bytes());
                }
                out
            }
            Field::Float => collect(&proto.float_val, |v| v.to_le_bytes()),
            Field::Double => collect(&proto.double_val, |v| v.to_le_bytes()),
            Field::Int(kind) => {
                let mut out = Vec::with_capacity(proto.int_val.len() * size);
                for (i, &v) in proto.int_val.iter().enumerate() {
                    let v = i64::from(v);
                    if v < kind.min() || v > kind.max() {
                        return Err(out_of_range(self, i, v, kind.min(), kind.max()));
                    }
                    out.extend_from_slice(&v.to_le_bytes()[..size]);
                }
                out
            }
            Field::Int64 => collect(&proto.int64_val, |v| v.to_le_bytes()),
            Field::UInt32 => collect(&proto.uint32_val, |v| v.to_le_bytes()),
            Field::UInt64 => collect(&proto.uint64_val, |v| v.to_le_bytes()),
            Field::Bool => proto.bool_val.iter().map(|&b| u8::from(b)).collect(),
            Field::SComplex => collect(whole_pairs(&proto.scomplex_val), |v| v.to_le_bytes()),
            Field::DComplex => collect(whole_pairs(&proto.dcomplex_val), |v| v.to_le_bytes()),
            Field::Float8 => proto.float8_val.clone(),
            Field::String => unreachable!("strings are read as strings"),
        })
    }
}

fn out_of_range(field: Field, i: usize, v: impl std::fmt::Display, min: i64, max: i64) -> Error {
    Error::InvalidProto(format!(
        "{} value {i} is {v}, outside the dtype's range {min}..={max}",
        field.name()
    ))
}

/// The complex parts that form whole (re, im) pairs: an odd last part is dropped.
fn whole_pairs<T>(parts: &[T]) -> &[T] {
    &parts[..parts.len() / 2 * 2]
}

/// `bytes` as little-endian `N`-byte lanes, each mapped by the caller.
fn lanes<const N: usize>(bytes: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
    bytes
        .chunks_exact(N)
        .map(|c| c.try_into().expect("chunks_exact gives N bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_byte_ints_read_both_forms() {
        let int4 = IntKind {
            bits: 4,
            signed: true,
        };
        assert_eq!(int4.read(&[0x08]), -8);
        assert_eq!(int4.read(&[0xf8]), -8);
        assert_eq!(int4.read(&[0x07]), 7);
        let uint4 = IntKind {
            bits: 4,
            signed: false,
        };
        assert_eq!(uint4.read(&[0xff]), 15);
        assert_eq!((int4.min(), int4.max(), uint4.max()), (-8, 7, 15));
    }
}
