//! [`Element`]: the Rust types that tensors hold, and [`Scalar`], a dtype-independent value.
//!
//! Conversions between element types go through [`Scalar`], which holds any element value
//! exactly (integers as 64-bit, floats as f64, complex as two f64). [`Element::from_scalar`]
//! implements polytensor's cast semantics once, for every pair of dtypes:
//! float to integer truncates toward zero and saturates, NaN becomes 0 (Rust's `as`);
//! integer to integer wraps (two's complement truncation, as TensorFlow's casts do);
//! anything to bool is `!= 0` (NaN is true); bool to anything is 0 or 1; complex to real
//! takes the real part; every conversion into a float type rounds once, to nearest even.

use std::fmt::Debug;

use half::{bf16, f16};
use num_complex::Complex;

use crate::dtype::DataType;

/// A value of any element dtype, held exactly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    /// A boolean.
    Bool(bool),
    /// A signed integer (any signed dtype).
    I64(i64),
    /// An unsigned integer (any unsigned dtype).
    U64(u64),
    /// A real float (any float dtype; f16, bf16 and f32 convert to f64 exactly).
    F64(f64),
    /// A complex number (complex64 converts exactly).
    C64(Complex<f64>),
}

impl Scalar {
    /// The value as f64 (complex: the real part; may round for large 64-bit integers).
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => f64::from(u8::from(b)),
            Scalar::I64(v) => v as f64,
            Scalar::U64(v) => v as f64,
            Scalar::F64(v) => v,
            Scalar::C64(c) => c.re,
        }
    }
}

impl Scalar {
    /// `Err` unless `dtype` holds this value (rounding a float to a float dtype is fine):
    /// a fraction, a NaN or infinity, or a value out of range is refused for an integer
    /// dtype, anything but 0 and 1 for bool, an imaginary part for a real dtype. TensorFlow
    /// refuses these where a constant operand (`Pad`'s value, `SparseToDense`'s default) is
    /// converted to the tensor's dtype; polytensor does not silently truncate them.
    ///
    /// ```
    /// use polytensor_core::{DataType, Scalar};
    /// assert!(Scalar::F64(2.0).check_representable(DataType::Int32).is_ok());
    /// let error = Scalar::F64(1.5).check_representable(DataType::Int32).unwrap_err();
    /// assert!(error.to_string().contains("Expected int32, but got 1.5"));
    /// ```
    pub fn check_representable(self, dtype: DataType) -> crate::error::Result<()> {
        let (value, imaginary) = match self {
            Scalar::Bool(b) => (f64::from(u8::from(b)), 0.0),
            Scalar::C64(c) => (c.re, c.im),
            _ => (self.to_f64(), 0.0),
        };
        let integer_range = |dtype: DataType| -> Option<(i128, i128)> {
            use DataType::*;
            Some(match dtype {
                Bool => (0, 1),
                Int8 | QInt8 => (i8::MIN.into(), i8::MAX.into()),
                Int16 | QInt16 => (i16::MIN.into(), i16::MAX.into()),
                Int32 | QInt32 => (i32::MIN.into(), i32::MAX.into()),
                Int64 => (i64::MIN.into(), i64::MAX.into()),
                UInt8 | QUInt8 => (0, u8::MAX.into()),
                UInt16 | QUInt16 => (0, u16::MAX.into()),
                UInt32 => (0, u32::MAX.into()),
                UInt64 => (0, u64::MAX.into()),
                other => {
                    let (low, high) = other.byte_range()?;
                    (low.into(), high.into())
                }
            })
        };
        let exact = |v: Scalar| -> Option<i128> {
            match v {
                Scalar::Bool(b) => Some(i128::from(b)),
                Scalar::I64(v) => Some(v.into()),
                Scalar::U64(v) => Some(v.into()),
                _ if value.is_finite() && value.fract() == 0.0 && imaginary == 0.0 => {
                    // Integral and finite; beyond i128 it is out of every range below.
                    (value.abs() < 1e38).then_some(value as i128)
                }
                _ => None,
            }
        };
        let fits = match integer_range(dtype) {
            Some((low, high)) => exact(self).is_some_and(|v| (low..=high).contains(&v)),
            None => dtype.is_complex() || imaginary == 0.0,
        };
        if fits {
            return Ok(());
        }
        let shown = match self {
            Scalar::C64(c) => format!("({}+{}j)", c.re, c.im),
            Scalar::Bool(b) => b.to_string(),
            Scalar::I64(v) => v.to_string(),
            Scalar::U64(v) => v.to_string(),
            Scalar::F64(v) => v.to_string(),
        };
        Err(crate::error::Error::invalid(format!(
            "Expected {}, but got {shown}, which {} cannot hold",
            dtype.name(),
            dtype.name()
        )))
    }
}

impl From<f64> for Scalar {
    fn from(v: f64) -> Self {
        Scalar::F64(v)
    }
}
impl From<f32> for Scalar {
    fn from(v: f32) -> Self {
        Scalar::F64(f64::from(v))
    }
}
impl From<i64> for Scalar {
    fn from(v: i64) -> Self {
        Scalar::I64(v)
    }
}
impl From<i32> for Scalar {
    fn from(v: i32) -> Self {
        Scalar::I64(i64::from(v))
    }
}
impl From<u64> for Scalar {
    fn from(v: u64) -> Self {
        Scalar::U64(v)
    }
}
impl From<bool> for Scalar {
    fn from(v: bool) -> Self {
        Scalar::Bool(v)
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that is the element type of a dtype.
///
/// # Safety
///
/// Implemented only in this crate (the trait is sealed). Every implementor is `Copy`, has
/// no padding, has size `DTYPE.size()`, and every value of it is valid for the bytes it is
/// stored as. `bool` is the one type with invalid bit patterns: polytensor keeps bool
/// storage at 0 or 1 everywhere (kernels write only those, and every path that turns
/// foreign bytes into bool, such as `bitcast`, validates them).
pub unsafe trait Element:
    sealed::Sealed + Copy + Send + Sync + PartialEq + Debug + Default + 'static
{
    /// The dtype of this element type.
    const DTYPE: DataType;

    /// This value as an exact [`Scalar`].
    fn to_scalar(self) -> Scalar;

    /// Convert a scalar with polytensor's cast semantics (see the module docs).
    fn from_scalar(value: Scalar) -> Self;

    /// Cast from another element type with polytensor's cast semantics.
    #[inline]
    fn cast_from<U: Element>(value: U) -> Self {
        Self::from_scalar(value.to_scalar())
    }
}

/// The bytes of `data` in memory (little-endian on every platform polytensor runs on).
///
/// ```
/// assert_eq!(polytensor_core::element::as_bytes(&[1u16, 2]), &[1, 0, 2, 0]);
/// ```
pub fn as_bytes<T: Element>(data: &[T]) -> &[u8] {
    // SAFETY: `T: Element` has no padding, so its memory is `size_of_val(data)` initialised
    // bytes, borrowed for as long as `data`.
    unsafe { std::slice::from_raw_parts(data.as_ptr() as *const u8, std::mem::size_of_val(data)) }
}

/// The little-endian bytes of `value` converted to `dtype` with cast semantics, or `None`
/// for a dtype without a fixed-size element.
///
/// ```
/// use polytensor_core::{element::scalar_bytes, DataType, Scalar};
/// assert_eq!(scalar_bytes(Scalar::F64(-0.0), DataType::Half), Some(vec![0x00, 0x80]));
/// assert_eq!(scalar_bytes(Scalar::I64(300), DataType::UInt8), Some(vec![44]));
/// ```
pub fn scalar_bytes(value: Scalar, dtype: DataType) -> Option<Vec<u8>> {
    crate::dispatch_dtype!(dtype,
        T => Some(as_bytes(&[T::from_scalar(value)]).to_vec()),
        _ => None)
}

/// `value` as f64 rounded to odd: exact below 2^53, otherwise truncated with the lowest
/// mantissa bit set when bits were lost. Rounding that to a narrower float then rounds
/// exactly once, as a direct conversion would.
fn u64_to_f64_round_odd(value: u64) -> f64 {
    let bits = 64 - value.leading_zeros();
    if bits <= 53 {
        return value as f64;
    }
    let shift = bits - 53;
    let kept = value >> shift;
    let sticky = u64::from(value & ((1u64 << shift) - 1) != 0);
    // 2^shift from its bits: exact (`powi` promises no precision, and Miri varies it).
    let scale = f64::from_bits(u64::from(1023 + shift) << 52);
    ((kept | sticky) as f64) * scale
}

fn i64_to_f64_round_odd(value: i64) -> f64 {
    let magnitude = u64_to_f64_round_odd(value.unsigned_abs());
    if value < 0 {
        -magnitude
    } else {
        magnitude
    }
}

/// `value` as f32 rounded to odd: exact when representable, otherwise truncated toward
/// zero with the lowest mantissa bit set (a sticky bit). Rounding that to a 16-bit float
/// rounds exactly once.
fn f64_to_f32_round_odd(value: f64) -> f32 {
    let nearest = value as f32;
    if !value.is_finite() || f64::from(nearest) == value {
        return nearest;
    }
    if nearest.is_infinite() {
        return f32::MAX.copysign(nearest);
    }
    let mut bits = nearest.to_bits();
    if f64::from(nearest).abs() > value.abs() {
        bits -= 1;
    }
    f32::from_bits(bits | 1)
}

/// `value` rounded once, to nearest even, to f16 (`half`'s own f64 path rounds twice).
pub fn f16_from_f64(value: f64) -> f16 {
    f16::from_f32(f64_to_f32_round_odd(value))
}

/// `value` rounded once, to nearest even, to bf16 (`half`'s own f64 path truncates first).
pub fn bf16_from_f64(value: f64) -> bf16 {
    bf16::from_f32(f64_to_f32_round_odd(value))
}

macro_rules! integer_element {
    ($($t:ty => $dtype:ident, $wide:ident);* $(;)?) => {$(
        impl sealed::Sealed for $t {}
        // SAFETY: a primitive integer: no padding, every bit pattern valid, size matches.
        unsafe impl Element for $t {
            const DTYPE: DataType = DataType::$dtype;
            #[inline]
            fn to_scalar(self) -> Scalar {
                Scalar::$wide(self as _)
            }
            #[inline]
            fn from_scalar(value: Scalar) -> Self {
                match value {
                    Scalar::Bool(b) => <$t>::from(b),
                    Scalar::I64(v) => v as $t,
                    Scalar::U64(v) => v as $t,
                    Scalar::F64(v) => v as $t,
                    Scalar::C64(c) => c.re as $t,
                }
            }
        }
    )*};
}

integer_element! {
    i8 => Int8, I64; i16 => Int16, I64; i32 => Int32, I64; i64 => Int64, I64;
    u8 => UInt8, U64; u16 => UInt16, U64; u32 => UInt32, U64; u64 => UInt64, U64;
}

macro_rules! native_float_element {
    ($($t:ty => $dtype:ident);* $(;)?) => {$(
        impl sealed::Sealed for $t {}
        // SAFETY: a primitive float: no padding, every bit pattern valid, size matches.
        unsafe impl Element for $t {
            const DTYPE: DataType = DataType::$dtype;
            #[inline]
            fn to_scalar(self) -> Scalar {
                Scalar::F64(self as f64)
            }
            #[inline]
            fn from_scalar(value: Scalar) -> Self {
                match value {
                    Scalar::Bool(b) => <$t>::from(u8::from(b)),
                    Scalar::I64(v) => v as $t,
                    Scalar::U64(v) => v as $t,
                    Scalar::F64(v) => v as $t,
                    Scalar::C64(c) => c.re as $t,
                }
            }
        }
    )*};
}

native_float_element! { f32 => Float; f64 => Double; }

macro_rules! half_float_element {
    ($($t:ty => $dtype:ident, $from_f64:ident);* $(;)?) => {$(
        impl sealed::Sealed for $t {}
        // SAFETY: a 16-bit float (repr(transparent) over u16): every bit pattern valid.
        unsafe impl Element for $t {
            const DTYPE: DataType = DataType::$dtype;
            #[inline]
            fn to_scalar(self) -> Scalar {
                Scalar::F64(self.to_f64())
            }
            #[inline]
            fn from_scalar(value: Scalar) -> Self {
                match value {
                    Scalar::Bool(b) => <$t>::from_f32(f32::from(u8::from(b))),
                    Scalar::I64(v) => $from_f64(i64_to_f64_round_odd(v)),
                    Scalar::U64(v) => $from_f64(u64_to_f64_round_odd(v)),
                    Scalar::F64(v) => $from_f64(v),
                    Scalar::C64(c) => $from_f64(c.re),
                }
            }
        }
    )*};
}

half_float_element! { f16 => Half, f16_from_f64; bf16 => BFloat16, bf16_from_f64; }

macro_rules! complex_element {
    ($($t:ty => $dtype:ident, $part:ty);* $(;)?) => {$(
        impl sealed::Sealed for $t {}
        // SAFETY: Complex<T> is repr(C) { re: T, im: T } of floats: no padding, all bits valid.
        unsafe impl Element for $t {
            const DTYPE: DataType = DataType::$dtype;
            #[inline]
            fn to_scalar(self) -> Scalar {
                Scalar::C64(Complex::new(self.re as f64, self.im as f64))
            }
            #[inline]
            fn from_scalar(value: Scalar) -> Self {
                match value {
                    Scalar::C64(c) => Complex::new(c.re as $part, c.im as $part),
                    real => Complex::new(<$part>::from_scalar(real), 0.0),
                }
            }
        }
    )*};
}

complex_element! { Complex<f32> => Complex64, f32; Complex<f64> => Complex128, f64; }

impl sealed::Sealed for bool {}
// SAFETY: bool is one byte; polytensor keeps bool storage at 0 or 1 (see the trait docs).
unsafe impl Element for bool {
    const DTYPE: DataType = DataType::Bool;
    #[inline]
    fn to_scalar(self) -> Scalar {
        Scalar::Bool(self)
    }
    #[inline]
    fn from_scalar(value: Scalar) -> Self {
        match value {
            Scalar::Bool(b) => b,
            Scalar::I64(v) => v != 0,
            Scalar::U64(v) => v != 0,
            Scalar::F64(v) => v != 0.0,
            Scalar::C64(c) => c.re != 0.0 || c.im != 0.0,
        }
    }
}

/// Expand `$body` once per computable dtype, with `$t` bound to its element type.
///
/// ```
/// use polytensor_core::{dispatch_dtype, DataType, Element};
/// fn size_of_dtype(dtype: DataType) -> Option<usize> {
///     dispatch_dtype!(dtype, T => Some(std::mem::size_of::<T>()), _ => None)
/// }
/// assert_eq!(size_of_dtype(DataType::BFloat16), Some(2));
/// assert_eq!(size_of_dtype(DataType::String), None);
/// ```
#[macro_export]
macro_rules! dispatch_dtype {
    ($dtype:expr, $t:ident => $body:expr, _ => $fallback:expr) => {{
        use $crate::DataType as __DT;
        match $dtype {
            __DT::Float => {
                type $t = f32;
                $body
            }
            __DT::Double => {
                type $t = f64;
                $body
            }
            __DT::Half => {
                type $t = $crate::half::f16;
                $body
            }
            __DT::BFloat16 => {
                type $t = $crate::half::bf16;
                $body
            }
            __DT::Int8 => {
                type $t = i8;
                $body
            }
            __DT::Int16 => {
                type $t = i16;
                $body
            }
            __DT::Int32 => {
                type $t = i32;
                $body
            }
            __DT::Int64 => {
                type $t = i64;
                $body
            }
            __DT::UInt8 => {
                type $t = u8;
                $body
            }
            __DT::UInt16 => {
                type $t = u16;
                $body
            }
            __DT::UInt32 => {
                type $t = u32;
                $body
            }
            __DT::UInt64 => {
                type $t = u64;
                $body
            }
            __DT::Bool => {
                type $t = bool;
                $body
            }
            __DT::Complex64 => {
                type $t = $crate::num_complex::Complex<f32>;
                $body
            }
            __DT::Complex128 => {
                type $t = $crate::num_complex::Complex<f64>;
                $body
            }
            #[allow(unreachable_patterns)]
            _ => $fallback,
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_to_int_truncates_and_saturates() {
        assert_eq!(i32::cast_from(-2.7f32), -2);
        assert_eq!(u8::cast_from(300.0f64), 255);
        assert_eq!(u8::cast_from(-5.0f32), 0);
        assert_eq!(i64::cast_from(f64::NAN), 0);
        assert_eq!(i16::cast_from(f32::INFINITY), i16::MAX);
        assert_eq!(i8::cast_from(f16::from_f32(-1000.0)), i8::MIN);
    }

    #[test]
    fn int_to_int_wraps_and_bool_is_nonzero() {
        assert_eq!(u8::cast_from(-1i32), 255);
        assert_eq!(i8::cast_from(200u64), -56);
        assert!(bool::cast_from(f32::NAN));
        assert!(!bool::cast_from(-0.0f64));
        assert_eq!(f32::cast_from(true), 1.0);
        assert!(bool::cast_from(Complex::new(0.0f32, 1.0)));
    }

    #[test]
    fn complex_conversions() {
        assert_eq!(f64::cast_from(Complex::new(1.5f64, 2.0)), 1.5);
        assert_eq!(Complex::<f32>::cast_from(3i8), Complex::new(3.0, 0.0));
        assert_eq!(
            Complex::<f32>::cast_from(Complex::new(1.0f64, -2.0)),
            Complex::new(1.0f32, -2.0)
        );
    }

    #[test]
    fn wide_integers_round_once_into_half_types() {
        // 2^60 + 2^52 + 1: the halfway point of bf16 plus a little, so it must round up;
        // a double rounding through f64 would land on the tie and round to even (down).
        let value = (1u64 << 60) + (1u64 << 52) + 1;
        let direct = bf16::cast_from(value);
        assert_eq!(direct.to_f64(), (1u64 << 60) as f64 + (1u64 << 53) as f64);
        assert_eq!(bf16::cast_from(-(value as i64)).to_f64(), -direct.to_f64());
        assert_eq!(f16::cast_from(70000i32), f16::INFINITY);
        // Just above the halfway point between two f16 values, by less than f32 can hold.
        // Powers of two as exact quotients (`powi` promises no precision).
        let two_to_minus = |n: u32| 1.0 / (1u64 << n) as f64;
        let above_tie = 1.0 + two_to_minus(11) + two_to_minus(40);
        assert_eq!(f16::cast_from(above_tie).to_f64(), 1.0 + two_to_minus(10));
        assert_eq!(
            bf16::cast_from(1.0 + two_to_minus(8) + two_to_minus(40)).to_f64(),
            1.0 + two_to_minus(7)
        );
        assert_eq!(f16::cast_from(1e-30f64).to_f64(), 0.0);
        assert!(bf16::cast_from(f64::NAN).is_nan());
        assert_eq!(bf16::cast_from(-1e300f64), bf16::NEG_INFINITY);
        assert_eq!(f16::cast_from(2049u16).to_f32(), 2048.0);
    }
}
