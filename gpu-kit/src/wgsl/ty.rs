//! The WGSL types the kernels compute on, typed: templates ask a type what it is
//! ([`Scalar::is_float`], [`Ty::part`]) instead of testing its spelling, and print it
//! (`Display`) where they write WGSL.

use std::fmt;

/// A WGSL scalar type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scalar {
    /// `f32`.
    F32,
    /// `f64` (SHADER_F64).
    F64,
    /// `i32`.
    I32,
    /// `u32`.
    U32,
    /// `i64` (SHADER_INT64).
    I64,
    /// `u64` (SHADER_INT64).
    U64,
}

impl Scalar {
    /// The WGSL spelling.
    pub fn name(self) -> &'static str {
        match self {
            Scalar::F32 => "f32",
            Scalar::F64 => "f64",
            Scalar::I32 => "i32",
            Scalar::U32 => "u32",
            Scalar::I64 => "i64",
            Scalar::U64 => "u64",
        }
    }

    /// Whether it is a float type.
    pub fn is_float(self) -> bool {
        matches!(self, Scalar::F32 | Scalar::F64)
    }

    /// Whether it is a signed integer type.
    pub fn is_signed_integer(self) -> bool {
        matches!(self, Scalar::I32 | Scalar::I64)
    }

    /// Whether it is 64 bits wide (needs SHADER_INT64 or SHADER_F64).
    pub fn is_wide(self) -> bool {
        matches!(self, Scalar::F64 | Scalar::I64 | Scalar::U64)
    }

    /// The unsigned integer type of the same width (its bits).
    pub fn bits(self) -> Scalar {
        if self.is_wide() {
            Scalar::U64
        } else {
            Scalar::U32
        }
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A WGSL value type: a scalar, a complex number as `vec2` of its float part type, or raw
/// words (`vec2<u32>`, `vec4<u32>`) of an element that is only moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ty {
    /// A scalar.
    Real(Scalar),
    /// A complex number: `vec2` of its part type.
    Complex(Scalar),
    /// Raw words of an element that is only moved (`vec2<u32>`, `vec4<u32>`).
    Words(u32),
}

impl Ty {
    /// The scalar of a real type.
    pub fn real(self) -> Option<Scalar> {
        match self {
            Ty::Real(s) => Some(s),
            _ => None,
        }
    }

    /// The part type of a complex type.
    pub fn part(self) -> Option<Scalar> {
        match self {
            Ty::Complex(p) => Some(p),
            _ => None,
        }
    }

    /// Whether its scalars are 64 bits wide.
    pub fn is_wide(self) -> bool {
        match self {
            Ty::Real(s) | Ty::Complex(s) => s.is_wide(),
            Ty::Words(_) => false,
        }
    }

    /// Whether its scalars are `f64`.
    pub fn is_f64(self) -> bool {
        matches!(self, Ty::Real(Scalar::F64) | Ty::Complex(Scalar::F64))
    }
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Real(s) => write!(f, "{s}"),
            Ty::Complex(p) => write!(f, "vec2<{p}>"),
            Ty::Words(n) => write!(f, "vec{n}<u32>"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_print_as_wgsl() {
        assert_eq!(Ty::Complex(Scalar::F64).to_string(), "vec2<f64>");
        assert_eq!(Ty::Words(4).to_string(), "vec4<u32>");
        assert_eq!(Ty::Real(Scalar::I64).to_string(), "i64");
        assert!(Scalar::F64.is_float() && Scalar::U64.is_wide() && !Scalar::I32.is_wide());
        assert_eq!(Scalar::I64.bits(), Scalar::U64);
    }
}
