//! Element arithmetic with polytensor's semantics, one trait per class of dtype.
//!
//! Floats compute in a wider type ([`FloatElem::Compute`]: f32 for f16, bf16 and f32; f64 for
//! f64) and round once to the element type, which gives correctly rounded results for
//! `+ - * /` and `sqrt` on f16 and bf16. Integers wrap, with the XLA division convention.

use half::{bf16, f16};
use polytensor_core::Element;

/// A native float that kernels compute in.
pub(crate) trait Real:
    Copy
    + Send
    + Sync
    + PartialOrd
    + std::ops::Neg<Output = Self>
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Rem<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    fn sqrt(self) -> Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn tanh(self) -> Self;
    fn erf(self) -> Self;
    /// The complementary error function.
    fn erfc(self) -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    fn round_ties_even(self) -> Self;
    fn powf(self, exponent: Self) -> Self;
    fn abs(self) -> Self;
    fn is_nan(self) -> bool;
    fn to_f64(self) -> f64;
    fn from_f64(value: f64) -> Self;
}

macro_rules! real_impl {
    ($($t:ty),*) => {$(
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline] fn sqrt(self) -> Self { <$t>::sqrt(self) }
            #[inline] fn exp(self) -> Self { <$t>::exp(self) }
            #[inline] fn ln(self) -> Self { <$t>::ln(self) }
            #[inline] fn sin(self) -> Self { <$t>::sin(self) }
            #[inline] fn cos(self) -> Self { <$t>::cos(self) }
            #[inline] fn tanh(self) -> Self { <$t>::tanh(self) }
            #[inline] fn erf(self) -> Self { libm::Libm::<$t>::erf(self) }
            #[inline] fn erfc(self) -> Self { libm::Libm::<$t>::erfc(self) }
            #[inline] fn floor(self) -> Self { <$t>::floor(self) }
            #[inline] fn ceil(self) -> Self { <$t>::ceil(self) }
            #[inline] fn round_ties_even(self) -> Self { <$t>::round_ties_even(self) }
            #[inline] fn powf(self, exponent: Self) -> Self { <$t>::powf(self, exponent) }
            #[inline] fn abs(self) -> Self { <$t>::abs(self) }
            #[inline] fn is_nan(self) -> bool { <$t>::is_nan(self) }
            #[inline] fn to_f64(self) -> f64 { self as f64 }
            #[inline] fn from_f64(value: f64) -> Self { value as $t }
        }
    )*};
}
real_impl!(f32, f64);

/// A float element type and the native float it computes in.
pub(crate) trait FloatElem: Element + PartialOrd {
    type Compute: Real;
    fn widen(self) -> Self::Compute;
    fn narrow(value: Self::Compute) -> Self;
}

macro_rules! float_elem_impl {
    ($($t:ty => $c:ty, |$w:ident| $widen:expr, |$n:ident| $narrow:expr;)*) => {$(
        impl FloatElem for $t {
            type Compute = $c;
            #[inline] fn widen(self) -> $c { let $w = self; $widen }
            #[inline] fn narrow(value: $c) -> Self { let $n = value; $narrow }
        }
    )*};
}
float_elem_impl! {
    f32 => f32, |x| x, |x| x;
    f64 => f64, |x| x, |x| x;
    f16 => f32, |x| x.to_f32(), |x| f16::from_f32(x);
    bf16 => f32, |x| x.to_f32(), |x| bf16::from_f32(x);
}

/// NaN-propagating maximum with `+0 > -0`, as IEEE 754-2019 `maximum`.
#[inline]
pub(crate) fn maximum<R: Real>(a: R, b: R) -> R {
    if a.is_nan() || b.is_nan() {
        return a + b;
    }
    if a > b || (a == b && a == R::ZERO && R::ONE / a > R::ZERO) {
        a
    } else {
        b
    }
}

/// NaN-propagating minimum with `-0 < +0`, as IEEE 754-2019 `minimum`.
#[inline]
pub(crate) fn minimum<R: Real>(a: R, b: R) -> R {
    if a.is_nan() || b.is_nan() {
        return a + b;
    }
    if a < b || (a == b && a == R::ZERO && R::ONE / a < R::ZERO) {
        a
    } else {
        b
    }
}

/// An integer element type with wrapping arithmetic and the XLA division convention.
pub(crate) trait IntElem: Element + Ord {
    const MIN: Self;
    const ZERO: Self;
    /// 6 (`relu6`'s cap).
    const SIX: Self;
    const SIGNED: bool;
    fn wrapping_add(self, other: Self) -> Self;
    fn wrapping_sub(self, other: Self) -> Self;
    fn wrapping_mul(self, other: Self) -> Self;
    fn wrapping_neg(self) -> Self;
    fn wrapping_abs(self) -> Self;
    fn signum(self) -> Self;
    /// `a / b` truncating; `x / 0 = -1` (all bits set), `MIN / -1 = MIN`.
    fn div_convention(self, other: Self) -> Self;
    /// Truncated remainder; `x % 0 = x`, `MIN % -1 = 0`.
    fn rem_convention(self, other: Self) -> Self;
    /// Wrapping power; a negative exponent gives 0 except for bases 1 and -1.
    fn pow_convention(self, exponent: Self) -> Self;
    fn to_i128(self) -> i128;
    fn from_i128_wrapping(value: i128) -> Self;
}

macro_rules! int_elem_impl {
    ($signed:literal: $($t:ty),*) => {$(
        impl IntElem for $t {
            const MIN: Self = <$t>::MIN;
            const ZERO: Self = 0;
            const SIX: Self = 6;
            const SIGNED: bool = $signed;
            #[inline] fn wrapping_add(self, o: Self) -> Self { <$t>::wrapping_add(self, o) }
            #[inline] fn wrapping_sub(self, o: Self) -> Self { <$t>::wrapping_sub(self, o) }
            #[inline] fn wrapping_mul(self, o: Self) -> Self { <$t>::wrapping_mul(self, o) }
            #[inline] fn wrapping_neg(self) -> Self { <$t>::wrapping_neg(self) }
            #[inline] fn wrapping_abs(self) -> Self {
                if self < 0 as $t { <$t>::wrapping_neg(self) } else { self }
            }
            #[inline] fn signum(self) -> Self {
                if self > 0 as $t { 1 } else if self == 0 { 0 } else { (0 as $t).wrapping_sub(1) }
            }
            #[inline] fn div_convention(self, o: Self) -> Self {
                if o == 0 { !0 } else { <$t>::wrapping_div(self, o) }
            }
            #[inline] fn rem_convention(self, o: Self) -> Self {
                if o == 0 { self } else { <$t>::wrapping_rem(self, o) }
            }
            #[inline] fn pow_convention(self, exponent: Self) -> Self {
                #[allow(unused_comparisons)]
                if exponent < 0 as $t {
                    return match self as i128 {
                        1 => 1,
                        -1 => if exponent.to_i128() % 2 == 0 { 1 } else { self },
                        _ => 0,
                    };
                }
                let (mut base, mut e, mut acc) = (self, exponent as u128, 1 as $t);
                while e > 0 {
                    if e & 1 == 1 {
                        acc = acc.wrapping_mul(base);
                    }
                    base = base.wrapping_mul(base);
                    e >>= 1;
                }
                acc
            }
            #[inline] fn to_i128(self) -> i128 { self as i128 }
            #[inline] fn from_i128_wrapping(value: i128) -> Self { value as $t }
        }
    )*};
}
int_elem_impl!(true: i8, i16, i32, i64);
int_elem_impl!(false: u8, u16, u32, u64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_conventions() {
        assert_eq!(7i32.div_convention(0), -1);
        assert_eq!(7u8.div_convention(0), 255);
        assert_eq!(i32::MIN.div_convention(-1), i32::MIN);
        assert_eq!((-7i32).div_convention(2), -3);
        assert_eq!(7i16.rem_convention(0), 7);
        assert_eq!(i64::MIN.rem_convention(-1), 0);
        assert_eq!((-7i32).rem_convention(2), -1);
        assert_eq!(i8::MIN.wrapping_abs(), i8::MIN);
        assert_eq!((-5i8).signum(), -1);
        assert_eq!(3u32.signum(), 1);
        assert_eq!(2i32.pow_convention(10), 1024);
        assert_eq!(2i8.pow_convention(8), 0);
        assert_eq!(3u8.pow_convention(5), 243);
        assert_eq!(2i32.pow_convention(-1), 0);
        assert_eq!((-1i32).pow_convention(-3), -1);
        assert_eq!((-1i32).pow_convention(-4), 1);
        assert_eq!(1i64.pow_convention(i64::MIN), 1);
    }

    #[test]
    fn nan_propagating_extrema() {
        assert!(maximum(f32::NAN, 1.0).is_nan());
        assert!(minimum(1.0, f64::NAN).is_nan());
        assert_eq!(maximum(-0.0f32, 0.0).to_bits(), 0.0f32.to_bits());
        assert_eq!(maximum(0.0f32, -0.0).to_bits(), 0.0f32.to_bits());
        assert_eq!(minimum(0.0f64, -0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(maximum(2.0f64, 3.0), 3.0);
    }
}
