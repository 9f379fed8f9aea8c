//! [`DataType`]: TensorFlow's element types, with TensorFlow's enum numbers.

use std::fmt;
use std::str::FromStr;

/// The kind of values a dtype holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DTypeClass {
    /// IEEE and brain floating point, including the float8 formats.
    Float,
    /// Two's complement signed integers (including int4 / int2, one byte per element).
    Signed,
    /// Unsigned integers.
    Unsigned,
    /// Complex numbers (pairs of floats).
    Complex,
    /// Booleans, one byte each, always 0 or 1.
    Bool,
    /// Byte strings of any length (not only UTF-8); host devices only.
    String,
    /// Quantized integers (`qint8` ...): storage only, no arithmetic.
    Quantized,
    /// TensorFlow's `resource` and `variant` handles: representable, never computable.
    Opaque,
}

/// A dtype number or name that names no dtype (its message says which and why). It
/// converts into [`crate::Error::InvalidArgument`], so `?` carries it on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DTypeError(String);

impl fmt::Display for DTypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DTypeError {}

macro_rules! data_types {
    ($( $(#[$doc:meta])* $variant:ident = $num:literal, $name:literal, $size:literal, $class:ident, $computable:literal; )*) => {
        /// TensorFlow's `DataType`, with the same enum numbers (`DT_FLOAT = 1` ...), so that
        /// `TensorProto` round trips are lossless.
        ///
        /// ```
        /// use polytensor_core::DataType;
        /// assert_eq!(DataType::Float.as_i32(), 1);
        /// assert_eq!(DataType::BFloat16.name(), "bfloat16");
        /// assert_eq!("complex64".parse::<DataType>().unwrap(), DataType::Complex64);
        /// ```
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(i32)]
        #[non_exhaustive]
        pub enum DataType {
            $( $(#[$doc])* $variant = $num, )*
        }

        impl DataType {
            /// Every dtype, in enum-number order.
            pub const ALL: &'static [DataType] = &[$(DataType::$variant),*];

            /// The name TensorFlow's Python prints (`float32`, `bfloat16`, `string`, ...).
            pub const fn name(self) -> &'static str {
                match self { $(DataType::$variant => $name,)* }
            }

            /// The element size in bytes, as TensorFlow's `DataTypeSize`: 0 for dtypes that are
            /// not plain old data (`string`, `resource`, `variant`).
            pub const fn size(self) -> usize {
                match self { $(DataType::$variant => $size,)* }
            }

            /// The class of values this dtype holds.
            pub const fn class(self) -> DTypeClass {
                match self { $(DataType::$variant => DTypeClass::$class,)* }
            }

            /// Whether polytensor's kernels compute on this dtype at all (float8, int4,
            /// quantized and opaque dtypes are storage-only).
            pub const fn is_computable(self) -> bool {
                match self { $(DataType::$variant => $computable,)* }
            }

            /// The dtype with TensorFlow enum number `value`. Reference dtypes (`DT_FLOAT_REF`,
            /// numbers over 100) and unknown numbers are an `Err`.
            pub fn from_i32(value: i32) -> Result<Self, DTypeError> {
                match value {
                    $($num => Ok(DataType::$variant),)*
                    101..=199 => Err(DTypeError(format!(
                        "dtype {value} is a TensorFlow reference dtype (DT_*_REF), which has no tensor values"))),
                    0 => Err(DTypeError("dtype 0 is DT_INVALID".into())),
                    _ => Err(DTypeError(format!("unknown dtype enum value {value}"))),
                }
            }
        }

        impl FromStr for DataType {
            type Err = DTypeError;
            fn from_str(s: &str) -> Result<Self, DTypeError> {
                match s {
                    $($name => Ok(DataType::$variant),)*
                    "half" => Ok(DataType::Half),
                    "float" => Ok(DataType::Float),
                    "double" => Ok(DataType::Double),
                    _ => Err(DTypeError(format!("unknown dtype name {s:?}"))),
                }
            }
        }
    };
}

data_types! {
    /// `DT_FLOAT`: IEEE binary32.
    Float = 1, "float32", 4, Float, true;
    /// `DT_DOUBLE`: IEEE binary64.
    Double = 2, "float64", 8, Float, true;
    /// `DT_INT32`.
    Int32 = 3, "int32", 4, Signed, true;
    /// `DT_UINT8`.
    UInt8 = 4, "uint8", 1, Unsigned, true;
    /// `DT_INT16`.
    Int16 = 5, "int16", 2, Signed, true;
    /// `DT_INT8`.
    Int8 = 6, "int8", 1, Signed, true;
    /// `DT_STRING`: arbitrary byte strings, on host devices only.
    String = 7, "string", 0, String, false;
    /// `DT_COMPLEX64`: two f32.
    Complex64 = 8, "complex64", 8, Complex, true;
    /// `DT_INT64`.
    Int64 = 9, "int64", 8, Signed, true;
    /// `DT_BOOL`.
    Bool = 10, "bool", 1, Bool, true;
    /// `DT_QINT8`: quantized int8.
    QInt8 = 11, "qint8", 1, Quantized, false;
    /// `DT_QUINT8`: quantized uint8.
    QUInt8 = 12, "quint8", 1, Quantized, false;
    /// `DT_QINT32`: quantized int32.
    QInt32 = 13, "qint32", 4, Quantized, false;
    /// `DT_BFLOAT16`: brain float (8 exponent bits, 7 mantissa bits).
    BFloat16 = 14, "bfloat16", 2, Float, true;
    /// `DT_QINT16`: quantized int16.
    QInt16 = 15, "qint16", 2, Quantized, false;
    /// `DT_QUINT16`: quantized uint16.
    QUInt16 = 16, "quint16", 2, Quantized, false;
    /// `DT_UINT16`.
    UInt16 = 17, "uint16", 2, Unsigned, true;
    /// `DT_COMPLEX128`: two f64.
    Complex128 = 18, "complex128", 16, Complex, true;
    /// `DT_HALF`: IEEE binary16.
    Half = 19, "float16", 2, Float, true;
    /// `DT_RESOURCE`: a handle to a resource; not a value type.
    Resource = 20, "resource", 0, Opaque, false;
    /// `DT_VARIANT`: a type-erased value; not a value type.
    Variant = 21, "variant", 0, Opaque, false;
    /// `DT_UINT32`.
    UInt32 = 22, "uint32", 4, Unsigned, true;
    /// `DT_UINT64`.
    UInt64 = 23, "uint64", 8, Unsigned, true;
    /// `DT_FLOAT8_E5M2`.
    Float8E5M2 = 24, "float8_e5m2", 1, Float, false;
    /// `DT_FLOAT8_E4M3FN`.
    Float8E4M3FN = 25, "float8_e4m3fn", 1, Float, false;
    /// `DT_FLOAT8_E4M3FNUZ`.
    Float8E4M3FNUZ = 26, "float8_e4m3fnuz", 1, Float, false;
    /// `DT_FLOAT8_E4M3B11FNUZ`.
    Float8E4M3B11FNUZ = 27, "float8_e4m3b11fnuz", 1, Float, false;
    /// `DT_FLOAT8_E5M2FNUZ`.
    Float8E5M2FNUZ = 28, "float8_e5m2fnuz", 1, Float, false;
    /// `DT_INT4`: stored one element per byte, as TensorFlow does.
    Int4 = 29, "int4", 1, Signed, false;
    /// `DT_UINT4`: stored one element per byte.
    UInt4 = 30, "uint4", 1, Unsigned, false;
    /// `DT_INT2`: stored one element per byte.
    Int2 = 31, "int2", 1, Signed, false;
    /// `DT_UINT2`: stored one element per byte.
    UInt2 = 32, "uint2", 1, Unsigned, false;
}

impl DataType {
    /// TensorFlow's enum number (`DT_FLOAT` = 1 ...).
    pub const fn as_i32(self) -> i32 {
        self as i32
    }

    /// Whether this is a floating point dtype (including bfloat16 and the float8 formats).
    pub const fn is_float(self) -> bool {
        matches!(self.class(), DTypeClass::Float)
    }

    /// Whether this is a signed or unsigned integer dtype.
    pub const fn is_integer(self) -> bool {
        matches!(self.class(), DTypeClass::Signed | DTypeClass::Unsigned)
    }

    /// Whether this is a signed integer dtype.
    pub const fn is_signed_integer(self) -> bool {
        matches!(self.class(), DTypeClass::Signed)
    }

    /// Whether this is an unsigned integer dtype.
    pub const fn is_unsigned_integer(self) -> bool {
        matches!(self.class(), DTypeClass::Unsigned)
    }

    /// Whether this is a complex dtype.
    pub const fn is_complex(self) -> bool {
        matches!(self.class(), DTypeClass::Complex)
    }

    /// Whether values of this dtype are plain bytes of a fixed size (everything but
    /// `string`, `resource` and `variant`).
    pub const fn is_pod(self) -> bool {
        self.size() != 0
    }

    /// Whether this dtype holds numbers that kernels compute on (floats, integers, complex),
    /// as opposed to bool, string or storage-only dtypes.
    pub const fn is_numeric(self) -> bool {
        self.is_computable() && !matches!(self, DataType::Bool)
    }

    /// The values an element of this one-byte dtype may hold, for the dtypes that use only
    /// some byte values: bool (0 and 1), int4, uint4, int2 and uint2 (one element per byte).
    /// `None` for dtypes whose every byte pattern is a value.
    pub const fn byte_range(self) -> Option<(i16, i16)> {
        match self {
            DataType::Bool => Some((0, 1)),
            DataType::Int4 => Some((-8, 7)),
            DataType::UInt4 => Some((0, 15)),
            DataType::Int2 => Some((-2, 1)),
            DataType::UInt2 => Some((0, 3)),
            _ => None,
        }
    }

    /// Whether `byte` is a valid element of this one-byte dtype (always true for dtypes
    /// without a [`byte_range`](DataType::byte_range)). A signed sub-byte integer may come
    /// in either of the forms its ecosystem writes: sign-extended (TensorFlow's C++, `0xf8`
    /// for int4 -8) or in the low bits (ml_dtypes and NumPy, `0x08`); both read as the low
    /// bits, sign-extended. Every way into a tensor checks this, so kernels and encoders can
    /// rely on it.
    pub const fn is_valid_byte(self, byte: u8) -> bool {
        match self.valid_byte_window() {
            None => true,
            Some((shift, limit)) => byte.wrapping_add(shift) <= limit,
        }
    }

    /// The valid bytes of a one-byte dtype with a [`byte_range`](DataType::byte_range) as
    /// one window of the byte circle: `byte` is valid when `byte + shift` (wrapping) is at
    /// most `limit`. For a signed dtype the sign-extended values (`0xf8..=0xff` for int4)
    /// and the low-bits form (`0x00..=0x0f`) are adjacent on the circle, so shifting by
    /// `-min` makes them one range, `0..=(-min) + (max - min)`. `None` where every byte is
    /// valid.
    const fn valid_byte_window(self) -> Option<(u8, u8)> {
        match self.byte_range() {
            None => None,
            Some((min, max)) => Some(((-min) as u8, (max - 2 * min) as u8)),
        }
    }

    /// The index of the first byte of `bytes` that is not a valid element of this dtype
    /// ([`is_valid_byte`](DataType::is_valid_byte)), or `None`. Returns at once for the
    /// dtypes whose every byte is a value; otherwise the check is a branch-free maximum over
    /// blocks of bytes, which the compiler vectorises, and a search only in a block that
    /// holds an invalid byte.
    pub fn first_invalid_byte(self, bytes: &[u8]) -> Option<usize> {
        const BLOCK: usize = 4096;
        let (shift, limit) = self.valid_byte_window()?;
        bytes.chunks(BLOCK).enumerate().find_map(|(block, chunk)| {
            let highest = chunk
                .iter()
                .fold(0u8, |high, &b| high.max(b.wrapping_add(shift)));
            if highest <= limit {
                return None;
            }
            let at = chunk.iter().position(|&b| b.wrapping_add(shift) > limit)?;
            Some(block * BLOCK + at)
        })
    }

    /// The element a raw byte holds as TensorFlow's C++ reads it (through `ml_dtypes` and
    /// C++ `bool`): any non-zero byte is true; int4, uint4, int2 and uint2 keep their low
    /// bits, sign-extended for the signed ones. Identity for other dtypes.
    pub const fn canonical_byte(self, byte: u8) -> u8 {
        let bits = match self {
            DataType::Bool => return (byte != 0) as u8,
            DataType::Int4 | DataType::UInt4 => 4,
            DataType::Int2 | DataType::UInt2 => 2,
            _ => return byte,
        };
        low_bits(byte as u64, bits, self.is_signed_integer()) as u8
    }

    /// For complex dtypes, the dtype of one component (`complex64` -> `float32`); otherwise `self`.
    pub const fn real_dtype(self) -> DataType {
        match self {
            DataType::Complex64 => DataType::Float,
            DataType::Complex128 => DataType::Double,
            other => other,
        }
    }

    /// The alignment in bytes that elements of this dtype need in memory (a complex
    /// number, that of its components; 1 for dtypes without a fixed size).
    pub const fn alignment(self) -> usize {
        match self.class() {
            DTypeClass::Complex => self.size() / 2,
            _ if self.size() == 0 => 1,
            _ => self.size(),
        }
    }
}

/// The low `bits` (1 to 64) of `value` as an integer: sign-extended if `signed`, else
/// zero-extended. How sub-byte and narrow integers are read from the bytes holding them.
pub(crate) const fn low_bits(value: u64, bits: u32, signed: bool) -> i64 {
    let unused = 64 - bits;
    if signed {
        ((value << unused) as i64) >> unused
    } else {
        ((value << unused) >> unused) as i64
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of dtypes, as a bit set over TensorFlow enum numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct DTypeSet(u64);

impl DTypeSet {
    /// The empty set.
    pub const EMPTY: DTypeSet = DTypeSet(0);

    /// A set of the given dtypes.
    pub fn of(dtypes: &[DataType]) -> Self {
        dtypes.iter().fold(Self::EMPTY, |set, &d| set.with(d))
    }

    /// Every computable dtype for which `keep` is true.
    pub fn filter(keep: impl Fn(DataType) -> bool) -> Self {
        Self::of(
            &DataType::ALL
                .iter()
                .copied()
                .filter(|&d| d.is_computable() && keep(d))
                .collect::<Vec<_>>(),
        )
    }

    /// This set with `dtype` added.
    pub const fn with(self, dtype: DataType) -> Self {
        DTypeSet(self.0 | (1u64 << dtype as u32))
    }

    /// Whether `dtype` is in the set.
    pub const fn contains(self, dtype: DataType) -> bool {
        self.0 & (1u64 << dtype as u32) != 0
    }

    /// The dtypes in the set, in enum-number order.
    pub fn iter(self) -> impl Iterator<Item = DataType> {
        DataType::ALL
            .iter()
            .copied()
            .filter(move |&d| self.contains(d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enum_numbers_match_tensorflow() {
        let expected = [
            (DataType::Float, 1),
            (DataType::Double, 2),
            (DataType::Int32, 3),
            (DataType::UInt8, 4),
            (DataType::Int16, 5),
            (DataType::Int8, 6),
            (DataType::String, 7),
            (DataType::Complex64, 8),
            (DataType::Int64, 9),
            (DataType::Bool, 10),
            (DataType::BFloat16, 14),
            (DataType::UInt16, 17),
            (DataType::Complex128, 18),
            (DataType::Half, 19),
            (DataType::UInt32, 22),
            (DataType::UInt64, 23),
            (DataType::Float8E5M2, 24),
            (DataType::Float8E4M3FN, 25),
            (DataType::Int4, 29),
        ];
        for (dtype, number) in expected {
            assert_eq!(dtype.as_i32(), number, "{dtype}");
            assert_eq!(DataType::from_i32(number).unwrap(), dtype);
        }
    }

    #[test]
    fn names_round_trip_and_sizes() {
        for &dtype in DataType::ALL {
            assert_eq!(dtype.name().parse::<DataType>().unwrap(), dtype);
            assert_eq!(DataType::from_i32(dtype.as_i32()).unwrap(), dtype);
        }
        assert_eq!(DataType::Half.name(), "float16");
        assert_eq!(DataType::Complex128.size(), 16);
        assert_eq!(DataType::String.size(), 0);
        assert!(!DataType::String.is_pod());
        assert!(DataType::BFloat16.is_float());
        assert!(DataType::UInt16.is_unsigned_integer());
        assert_eq!(DataType::Complex64.real_dtype(), DataType::Float);
    }

    #[test]
    fn bad_numbers_and_names_are_errors() {
        assert!(DataType::from_i32(0).is_err());
        let reference = DataType::from_i32(101).unwrap_err().to_string();
        assert!(reference.contains("reference"), "{reference}");
        assert!(DataType::from_i32(99).is_err());
        assert!(DataType::from_i32(-1).is_err());
        assert!("float33".parse::<DataType>().is_err());
    }

    #[test]
    fn byte_rules_of_bool_and_sub_byte_ints() {
        let valid = |d: DataType| (0..=255u8).filter(|&b| d.is_valid_byte(b)).count();
        assert_eq!(valid(DataType::Bool), 2);
        // Signed sub-byte ints: sign-extended or low-bits form (-8 is 0xf8 or 0x08).
        assert_eq!(valid(DataType::Int4), 24);
        assert_eq!(valid(DataType::UInt4), 16);
        assert_eq!(valid(DataType::Int2), 6);
        assert_eq!(valid(DataType::UInt2), 4);
        assert_eq!(valid(DataType::UInt8), 256);
        assert!(DataType::Int4.is_valid_byte(0xf8) && DataType::Int4.is_valid_byte(0x08));
        assert!(!DataType::Int4.is_valid_byte(0x10) && !DataType::Int4.is_valid_byte(0xf7));
        for d in [
            DataType::Bool,
            DataType::Int4,
            DataType::UInt4,
            DataType::Int2,
            DataType::UInt2,
        ] {
            for b in 0..=255u8 {
                let c = d.canonical_byte(b);
                assert!(d.is_valid_byte(c), "{d} {b}");
                assert_eq!(d.canonical_byte(c), c, "{d} {b}");
            }
        }
        // Both forms of a signed value read as the same (sign-extended) value.
        for (d, byte, value) in [
            (DataType::Int4, 0x08, 0xf8),
            (DataType::Int4, 0xf8, 0xf8),
            (DataType::Int4, 0x0f, 0xff),
            (DataType::Int4, 0x07, 0x07),
            (DataType::Int2, 0x02, 0xfe),
            (DataType::Int2, 0x01, 0x01),
            (DataType::UInt4, 0x0f, 0x0f),
        ] {
            assert!(d.is_valid_byte(byte));
            assert_eq!(d.canonical_byte(byte), value, "{d} {byte:#x}");
        }
        assert_eq!(DataType::Int4.canonical_byte(0x0f), 0xff);
        assert_eq!(DataType::UInt4.canonical_byte(0xff), 0x0f);
        assert_eq!(DataType::Int2.canonical_byte(0x06), 0xfe);
        assert_eq!(DataType::Bool.canonical_byte(7), 1);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "millions of safe byte comparisons; Miri checks unsafe code, and this has none"
    )]
    fn first_invalid_byte_agrees_with_is_valid_byte() {
        for d in DataType::ALL.iter().copied().filter(|d| d.size() == 1) {
            let all: Vec<u8> = (0..=255u8).collect();
            let first = all.iter().position(|&b| !d.is_valid_byte(b));
            assert_eq!(d.first_invalid_byte(&all), first, "{d}");
            for b in 0..=255u8 {
                // One byte placed past the first block, in a run of valid zeros.
                let mut long = vec![0u8; 10_000];
                long[9_001] = b;
                let expected = (!d.is_valid_byte(b)).then_some(9_001);
                assert_eq!(d.first_invalid_byte(&long), expected, "{d} {b:#x}");
            }
        }
        assert_eq!(DataType::Float.first_invalid_byte(&[0xff; 64]), None);
        assert_eq!(DataType::Bool.first_invalid_byte(&[]), None);
    }

    #[test]
    fn dtype_sets() {
        let set = DTypeSet::of(&[DataType::Float, DataType::UInt64]);
        assert!(set.contains(DataType::Float));
        assert!(!set.contains(DataType::Double));
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            vec![DataType::Float, DataType::UInt64]
        );
        let floats = DTypeSet::filter(DataType::is_float);
        assert_eq!(floats.iter().count(), 4);
    }
}
