//! [`DataType`] to and from DLPack's [`DLDataType`].

use super::ffi::{code, DLDataType};
use crate::dtype::DataType;
use crate::error::{Error, Result};

/// How a dtype's elements sit in memory, as DLPack sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DlpackDType {
    /// The DLPack type.
    pub dl: DLDataType,
    /// Whether it is a sub-byte type stored one element per byte (int4, uint4, int2, uint2:
    /// TensorFlow's layout), which only the versioned struct can say
    /// (`DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED`).
    pub padded: bool,
}

/// The DLPack type of `dtype`, or an `Err` for the dtypes DLPack has no code for (strings,
/// the quantized integers, resources and variants).
pub(crate) fn to_dlpack(dtype: DataType) -> Result<DlpackDType> {
    use DataType as D;
    let (code, bits) = match dtype {
        D::Half => (code::FLOAT, 16),
        D::Float => (code::FLOAT, 32),
        D::Double => (code::FLOAT, 64),
        D::BFloat16 => (code::BFLOAT, 16),
        D::Int8 => (code::INT, 8),
        D::Int16 => (code::INT, 16),
        D::Int32 => (code::INT, 32),
        D::Int64 => (code::INT, 64),
        D::UInt8 => (code::UINT, 8),
        D::UInt16 => (code::UINT, 16),
        D::UInt32 => (code::UINT, 32),
        D::UInt64 => (code::UINT, 64),
        D::Bool => (code::BOOL, 8),
        D::Complex64 => (code::COMPLEX, 64),
        D::Complex128 => (code::COMPLEX, 128),
        D::Float8E5M2 => (code::FLOAT8_E5M2, 8),
        D::Float8E4M3FN => (code::FLOAT8_E4M3FN, 8),
        D::Float8E4M3FNUZ => (code::FLOAT8_E4M3FNUZ, 8),
        D::Float8E4M3B11FNUZ => (code::FLOAT8_E4M3B11FNUZ, 8),
        D::Float8E5M2FNUZ => (code::FLOAT8_E5M2FNUZ, 8),
        D::Int4 => (code::INT, 4),
        D::UInt4 => (code::UINT, 4),
        D::Int2 => (code::INT, 2),
        D::UInt2 => (code::UINT, 2),
        D::String
        | D::QInt8
        | D::QUInt8
        | D::QInt16
        | D::QUInt16
        | D::QInt32
        | D::Resource
        | D::Variant => {
            return Err(Error::invalid(format!(
                "DLPack has no type for {dtype} tensors"
            )))
        }
    };
    Ok(DlpackDType {
        dl: DLDataType::scalar(code, bits),
        padded: bits < 8,
    })
}

/// The dtype of DLPack type `dl`; `padded` says whether sub-byte types come one element
/// per byte. An `Err` for vector types (lanes other than 1), packed sub-byte types and
/// codes or widths polytensor has no dtype for.
pub(crate) fn from_dlpack(dl: DLDataType, padded: bool) -> Result<DataType> {
    use DataType as D;
    if dl.lanes != 1 {
        return Err(Error::invalid(format!(
            "DLPack vector types are not supported ({} lanes of code {} with {} bits)",
            dl.lanes, dl.code, dl.bits
        )));
    }
    let dtype = match (dl.code, dl.bits) {
        (code::FLOAT, 16) => D::Half,
        (code::FLOAT, 32) => D::Float,
        (code::FLOAT, 64) => D::Double,
        (code::BFLOAT, 16) => D::BFloat16,
        (code::INT, 8) => D::Int8,
        (code::INT, 16) => D::Int16,
        (code::INT, 32) => D::Int32,
        (code::INT, 64) => D::Int64,
        (code::UINT, 8) => D::UInt8,
        (code::UINT, 16) => D::UInt16,
        (code::UINT, 32) => D::UInt32,
        (code::UINT, 64) => D::UInt64,
        (code::BOOL, 8) => D::Bool,
        (code::COMPLEX, 64) => D::Complex64,
        (code::COMPLEX, 128) => D::Complex128,
        (code::FLOAT8_E5M2, 8) => D::Float8E5M2,
        (code::FLOAT8_E4M3FN, 8) => D::Float8E4M3FN,
        (code::FLOAT8_E4M3FNUZ, 8) => D::Float8E4M3FNUZ,
        (code::FLOAT8_E4M3B11FNUZ, 8) => D::Float8E4M3B11FNUZ,
        (code::FLOAT8_E5M2FNUZ, 8) => D::Float8E5M2FNUZ,
        (code::INT | code::UINT, 4 | 2) if !padded => {
            return Err(Error::invalid(format!(
                "packed {}-bit integers are not supported: polytensor stores one element per \
                 byte (DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED)",
                dl.bits
            )))
        }
        (code::INT, 4) => D::Int4,
        (code::UINT, 4) => D::UInt4,
        (code::INT, 2) => D::Int2,
        (code::UINT, 2) => D::UInt2,
        (code, bits) => {
            return Err(Error::invalid(format!(
                "DLPack type code {code} with {bits} bits has no polytensor dtype"
            )))
        }
    };
    Ok(dtype)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_nameable_dtype_round_trips() {
        for &dtype in DataType::ALL {
            match to_dlpack(dtype) {
                Ok(d) => assert_eq!(from_dlpack(d.dl, d.padded).unwrap(), dtype),
                Err(e) => assert!(
                    !dtype.is_pod() || dtype.class() == crate::DTypeClass::Quantized,
                    "{dtype}: {e}"
                ),
            }
        }
    }

    #[test]
    fn refuses_what_it_cannot_name() {
        assert!(from_dlpack(DLDataType::scalar(code::FLOAT, 32), false).is_ok());
        let vector = DLDataType {
            lanes: 4,
            ..DLDataType::scalar(code::FLOAT, 32)
        };
        assert!(from_dlpack(vector, false)
            .unwrap_err()
            .to_string()
            .contains("4 lanes"));
        assert!(from_dlpack(DLDataType::scalar(code::INT, 4), false).is_err());
        assert!(from_dlpack(DLDataType::scalar(code::OPAQUE_HANDLE, 64), false).is_err());
        assert!(from_dlpack(DLDataType::scalar(99, 8), false).is_err());
        assert!(to_dlpack(DataType::String).is_err());
        assert!(to_dlpack(DataType::QInt8).is_err());
    }
}
