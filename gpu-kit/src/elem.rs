//! How each dtype is stored in device memory and computed on in a C-family kernel.

use polytensor_core::{DTypeClass, DataType};

/// A float type that kernels compute in: the part type of floats and complex numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Real {
    /// `f32` (also what f16 and bf16 compute in).
    F32,
    /// `f64`.
    F64,
}

impl Real {
    /// The C type name.
    pub fn name(self) -> &'static str {
        match self {
            Real::F32 => "f32",
            Real::F64 => "f64",
        }
    }

    /// A literal of this type for an exactly representable `value`.
    pub fn literal(self, value: f64) -> String {
        let text = if value.fract() == 0.0 && value.abs() < 1e17 {
            format!("{value:.1}")
        } else {
            format!("{value:e}")
        };
        match self {
            Real::F32 => format!("{text}f"),
            Real::F64 => text,
        }
    }
}

/// A dtype as a kernel sees it: the C type its elements are stored as, and the type it is
/// computed in (f16 and bf16 are stored as their 16 bits and computed in f32; bool is a
/// byte 0 or 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Elem {
    /// bool, a byte 0 or 1.
    Bool,
    /// int8.
    I8,
    /// int16.
    I16,
    /// int32.
    I32,
    /// int64.
    I64,
    /// uint8.
    U8,
    /// uint16.
    U16,
    /// uint32.
    U32,
    /// uint64.
    U64,
    /// IEEE binary16, computed in f32.
    F16,
    /// bfloat16, computed in f32.
    BF16,
    /// float.
    F32,
    /// double.
    F64,
    /// complex64, `float2` (real part first).
    C64,
    /// complex128, `double2`.
    C128,
}

impl Elem {
    /// The kernel type of `dtype`, or `None` for dtypes kernels do not compute on
    /// (strings, quantized, sub-byte and 8-bit floats).
    pub fn of(dtype: DataType) -> Option<Elem> {
        Some(match dtype {
            DataType::Bool => Elem::Bool,
            DataType::Int8 => Elem::I8,
            DataType::Int16 => Elem::I16,
            DataType::Int32 => Elem::I32,
            DataType::Int64 => Elem::I64,
            DataType::UInt8 => Elem::U8,
            DataType::UInt16 => Elem::U16,
            DataType::UInt32 => Elem::U32,
            DataType::UInt64 => Elem::U64,
            DataType::Half => Elem::F16,
            DataType::BFloat16 => Elem::BF16,
            DataType::Float => Elem::F32,
            DataType::Double => Elem::F64,
            DataType::Complex64 => Elem::C64,
            DataType::Complex128 => Elem::C128,
            _ => return None,
        })
    }

    /// The dtype of this element type (the raw move types are the unsigned integers of
    /// their size, and complex128).
    pub fn dtype(self) -> DataType {
        match self {
            Elem::Bool => DataType::Bool,
            Elem::I8 => DataType::Int8,
            Elem::I16 => DataType::Int16,
            Elem::I32 => DataType::Int32,
            Elem::I64 => DataType::Int64,
            Elem::U8 => DataType::UInt8,
            Elem::U16 => DataType::UInt16,
            Elem::U32 => DataType::UInt32,
            Elem::U64 => DataType::UInt64,
            Elem::F16 => DataType::Half,
            Elem::BF16 => DataType::BFloat16,
            Elem::F32 => DataType::Float,
            Elem::F64 => DataType::Double,
            Elem::C64 => DataType::Complex64,
            Elem::C128 => DataType::Complex128,
        }
    }

    /// The C type elements are stored as.
    pub fn storage(self) -> &'static str {
        match self {
            Elem::Bool | Elem::U8 => "u8",
            Elem::F16 | Elem::BF16 | Elem::U16 => "u16",
            other => other.value(),
        }
    }

    /// The C type kernels compute in.
    pub fn value(self) -> &'static str {
        match self {
            Elem::Bool | Elem::U8 => "u8",
            Elem::I8 => "i8",
            Elem::I16 => "i16",
            Elem::I32 => "i32",
            Elem::I64 => "i64",
            Elem::U16 => "u16",
            Elem::U32 => "u32",
            Elem::U64 => "u64",
            Elem::F16 | Elem::BF16 | Elem::F32 => "f32",
            Elem::F64 => "f64",
            Elem::C64 => "c64",
            Elem::C128 => "c128",
        }
    }

    /// The computed value of a stored element `stored`.
    pub fn load(self, stored: &str) -> String {
        match self {
            Elem::F16 => format!("f16_to_f32({stored})"),
            Elem::BF16 => format!("bf16_to_f32({stored})"),
            _ => stored.to_string(),
        }
    }

    /// The stored form of a computed `value` (f16 and bf16 round once, to nearest even).
    pub fn store(self, value: &str) -> String {
        match self {
            Elem::F16 => format!("f32_to_f16({value})"),
            Elem::BF16 => format!("f32_to_bf16({value})"),
            _ => value.to_string(),
        }
    }

    /// The float type of a float or complex element (its part type), else `None`.
    pub fn real(self) -> Option<Real> {
        match self {
            Elem::F16 | Elem::BF16 | Elem::F32 | Elem::C64 => Some(Real::F32),
            Elem::F64 | Elem::C128 => Some(Real::F64),
            _ => None,
        }
    }

    /// Whether this is complex64 or complex128.
    pub fn is_complex(self) -> bool {
        matches!(self, Elem::C64 | Elem::C128)
    }

    /// Whether this is a real float (f16, bf16, f32, f64).
    pub fn is_float(self) -> bool {
        self.real().is_some() && !self.is_complex()
    }

    /// Whether this is a signed integer.
    pub fn is_signed(self) -> bool {
        matches!(self, Elem::I8 | Elem::I16 | Elem::I32 | Elem::I64)
    }

    /// Whether this is an integer (not bool).
    pub fn is_integer(self) -> bool {
        self.bits().is_some() && self != Elem::Bool
    }

    /// The width of an integer (bool: 8), else `None`.
    pub fn bits(self) -> Option<u32> {
        match self {
            Elem::Bool | Elem::I8 | Elem::U8 => Some(8),
            Elem::I16 | Elem::U16 => Some(16),
            Elem::I32 | Elem::U32 => Some(32),
            Elem::I64 | Elem::U64 => Some(64),
            _ => None,
        }
    }

    /// The unsigned type integer arithmetic wraps in: `u32` up to 32 bits, else `u64`
    /// (C promotes narrower operands to `int`, where a product could overflow).
    pub fn wrapping(self) -> &'static str {
        if self.bits() == Some(64) {
            "u64"
        } else {
            "u32"
        }
    }

    /// Whether a program using this element needs f64.
    pub fn needs_fp64(self) -> bool {
        self.real() == Some(Real::F64)
    }

    /// The C type of a same-sized raw move (copy, where, fill): bits, never values.
    pub fn raw(self) -> &'static str {
        match self {
            Elem::C64 | Elem::I64 | Elem::U64 | Elem::F64 => "u64",
            Elem::C128 => "raw16",
            Elem::I32 | Elem::U32 | Elem::F32 => "u32",
            Elem::I16 | Elem::U16 | Elem::F16 | Elem::BF16 => "u16",
            Elem::Bool | Elem::I8 | Elem::U8 => "u8",
        }
    }

    /// The dtype's class.
    pub fn class(self) -> DTypeClass {
        match self {
            Elem::Bool => DTypeClass::Bool,
            Elem::I8 | Elem::I16 | Elem::I32 | Elem::I64 => DTypeClass::Signed,
            Elem::U8 | Elem::U16 | Elem::U32 | Elem::U64 => DTypeClass::Unsigned,
            Elem::C64 | Elem::C128 => DTypeClass::Complex,
            _ => DTypeClass::Float,
        }
    }

    /// The smallest and largest value of an integer type.
    pub fn int_range(self) -> Option<(i128, i128)> {
        let bits = self.bits().filter(|_| self.is_integer())?;
        Some(if self.is_signed() {
            (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        } else {
            (0, (1i128 << bits) - 1)
        })
    }

    /// The smallest and largest value of an integer type as C expressions of its type.
    pub fn int_bounds(self) -> Option<(String, String)> {
        let bits = self.bits()?;
        let t = self.value();
        Some(if self.is_signed() {
            (
                format!("(({t})((u64)0 - ((u64)1 << {})))", bits - 1),
                format!("(({t})(((u64)1 << {}) - (u64)1))", bits - 1),
            )
        } else {
            (
                format!("(({t})0)"),
                format!("(({t})(~(u64)0 >> {}))", 64 - bits),
            )
        })
    }
}
