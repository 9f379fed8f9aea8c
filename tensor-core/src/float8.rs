//! The five float8 formats of TensorFlow's `DataType` (`float8_e5m2`, `float8_e4m3fn`,
//! `float8_e4m3fnuz`, `float8_e4m3b11fnuz`, `float8_e5m2fnuz`), as the `ml_dtypes` package
//! that TensorFlow, JAX and NumPy users share defines them: one [`Float8`] description per
//! format, a byte to `f32` decode (exact: every float8 value is an `f32`) and an `f64` to
//! byte encode (round to nearest, ties to even; one rounding from any source that widens
//! exactly to `f64`).
//!
//! Polytensor stores float8 tensors and casts to and from them; it does no arithmetic in
//! float8 (TensorFlow's kernels do none either, beyond casts and matmuls on some GPUs).
//!
//! ```
//! use polytensor_core::float8::Float8;
//! use polytensor_core::DataType;
//! let e4m3 = Float8::of(DataType::Float8E4M3FN).unwrap();
//! assert_eq!(e4m3.encode(448.0), 0x7e);          // the largest finite value
//! assert!(e4m3.decode(e4m3.encode(1000.0)).is_nan()); // no infinity: overflow is NaN
//! assert_eq!(e4m3.decode(e4m3.encode(0.3)), 0.3125);  // rounded to 3 mantissa bits
//! ```

use crate::DataType;

/// How a format spends its special encodings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Specials {
    /// IEEE 754 style: the all-ones exponent holds infinities and NaNs (`e5m2`).
    Ieee,
    /// Finite: no infinities; only the all-ones byte (either sign) is NaN (`e4m3fn`).
    FiniteAllOnesNan,
    /// Finite, unsigned zero: no infinities, no negative zero; `0x80` is the one NaN
    /// (the `fnuz` formats).
    FiniteUnsignedZero,
}

/// One float8 format: its field widths, exponent bias and special values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Float8 {
    /// Bits of exponent.
    pub exponent_bits: u32,
    /// Bits of mantissa (`7 - exponent_bits`).
    pub mantissa_bits: u32,
    /// The exponent bias.
    pub bias: i32,
    /// Where the format keeps its infinities and NaNs.
    pub specials: Specials,
}

impl Float8 {
    /// The format of a float8 `dtype`; `None` for other dtypes.
    pub const fn of(dtype: DataType) -> Option<Float8> {
        use Specials::*;
        let (exponent_bits, bias, specials) = match dtype {
            DataType::Float8E5M2 => (5, 15, Ieee),
            DataType::Float8E4M3FN => (4, 7, FiniteAllOnesNan),
            DataType::Float8E4M3FNUZ => (4, 8, FiniteUnsignedZero),
            DataType::Float8E4M3B11FNUZ => (4, 11, FiniteUnsignedZero),
            DataType::Float8E5M2FNUZ => (5, 16, FiniteUnsignedZero),
            _ => return None,
        };
        Some(Float8 {
            exponent_bits,
            mantissa_bits: 7 - exponent_bits,
            bias,
            specials,
        })
    }

    fn exponent_mask(self) -> u8 {
        ((1u32 << self.exponent_bits) - 1) as u8
    }

    fn mantissa_mask(self) -> u8 {
        ((1u32 << self.mantissa_bits) - 1) as u8
    }

    /// The exponent of the smallest normal value.
    fn min_exponent(self) -> i32 {
        1 - self.bias
    }

    /// The largest finite value.
    pub fn max_finite(self) -> f64 {
        let top = self.exponent_mask() as i32;
        let mantissas = (1u32 << self.mantissa_bits) as f64;
        let (exponent, mantissa) = match self.specials {
            // The all-ones exponent is taken by infinities and NaNs.
            Specials::Ieee => (top - 1, mantissas - 1.0),
            // The all-ones byte is NaN: the largest mantissa below it.
            Specials::FiniteAllOnesNan => (top, mantissas - 2.0),
            Specials::FiniteUnsignedZero => (top, mantissas - 1.0),
        };
        (1.0 + mantissa / mantissas) * power_of_two(exponent - self.bias)
    }

    /// The NaN this format encodes for a NaN of sign `negative` (`ml_dtypes`' quiet NaN).
    fn nan(self, negative: bool) -> u8 {
        let sign = if negative { 0x80 } else { 0 };
        match self.specials {
            Specials::Ieee => sign | (self.exponent_mask() << self.mantissa_bits) | 0b10,
            Specials::FiniteAllOnesNan => sign | 0x7f,
            Specials::FiniteUnsignedZero => 0x80,
        }
    }

    /// The value of `byte`, exactly.
    pub fn decode(self, byte: u8) -> f32 {
        let negative = byte & 0x80 != 0;
        let exponent = (byte >> self.mantissa_bits) & self.exponent_mask();
        let mantissa = byte & self.mantissa_mask();
        let special = match self.specials {
            Specials::FiniteUnsignedZero => (byte == 0x80).then_some(f32::NAN),
            Specials::FiniteAllOnesNan => (byte & 0x7f == 0x7f).then_some(f32::NAN),
            Specials::Ieee if exponent == self.exponent_mask() => Some(if mantissa == 0 {
                f32::INFINITY
            } else {
                f32::NAN
            }),
            Specials::Ieee => None,
        };
        let magnitude = special.unwrap_or_else(|| {
            let scale = |e: i32| power_of_two(e - self.mantissa_bits as i32) as f32;
            if exponent == 0 {
                mantissa as f32 * scale(self.min_exponent())
            } else {
                ((1u32 << self.mantissa_bits) + mantissa as u32) as f32
                    * scale(exponent as i32 - self.bias)
            }
        });
        if negative {
            -magnitude
        } else {
            magnitude
        }
    }

    /// `value` rounded to this format (to nearest, ties to even). Magnitudes past the
    /// largest finite value after rounding become infinity where the format has one and
    /// NaN where it has not, as `ml_dtypes` converts; infinities likewise; NaN is NaN. The
    /// `fnuz` formats give `+0` for every zero.
    pub fn encode(self, value: f64) -> u8 {
        let negative = value.is_sign_negative();
        if value.is_nan() {
            return self.nan(negative);
        }
        let sign = if negative { 0x80 } else { 0 };
        let overflow = || match self.specials {
            Specials::Ieee => sign | (self.exponent_mask() << self.mantissa_bits),
            _ => self.nan(negative),
        };
        let magnitude = value.abs();
        if magnitude.is_infinite() {
            return overflow();
        }
        // The exponent of the value's leading bit, no smaller than the smallest normal's
        // (below it the spacing is the subnormals').
        let exponent = if magnitude == 0.0 {
            self.min_exponent()
        } else {
            leading_exponent(magnitude).max(self.min_exponent())
        };
        let quantum = power_of_two(exponent - self.mantissa_bits as i32);
        // Exact: a power-of-two scaling of a finite f64 well inside its range.
        let units = (magnitude / quantum).round_ties_even();
        if units * quantum > self.max_finite() {
            return overflow();
        }
        let units = units as u32;
        let hidden = 1u32 << self.mantissa_bits;
        let bits = if units == 0 {
            0
        } else if units < hidden {
            // Subnormal (only at the smallest exponent).
            units
        } else if units == 2 * hidden {
            // Rounded up to the next power of two.
            ((exponent + 1 + self.bias) as u32) << self.mantissa_bits
        } else {
            (((exponent + self.bias) as u32) << self.mantissa_bits) | (units - hidden)
        } as u8;
        if bits == 0 && self.specials == Specials::FiniteUnsignedZero {
            0
        } else {
            sign | bits
        }
    }
}

/// `2^exponent`, exactly, for the exponents of float8 formats (well inside f64's normal
/// range), built from its bits: `powi` may be inexact (and is, deliberately, under Miri).
fn power_of_two(exponent: i32) -> f64 {
    debug_assert!((-1022..=1023).contains(&exponent));
    f64::from_bits(((exponent + 1023) as u64) << 52)
}

/// `floor(log2(x))` of a positive finite `x`, from its bits (subnormal `f64`s included).
fn leading_exponent(x: f64) -> i32 {
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    if biased == 0 {
        // Subnormal: the position of the highest set mantissa bit.
        let mantissa = bits & ((1 << 52) - 1);
        -1022 - (mantissa.leading_zeros() as i32 - 11)
    } else {
        biased - 1023
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<Float8> {
        [
            DataType::Float8E5M2,
            DataType::Float8E4M3FN,
            DataType::Float8E4M3FNUZ,
            DataType::Float8E4M3B11FNUZ,
            DataType::Float8E5M2FNUZ,
        ]
        .map(|d| Float8::of(d).unwrap())
        .to_vec()
    }

    #[test]
    fn largest_values_are_those_of_ml_dtypes() {
        let max: Vec<f64> = all().iter().map(|f| f.max_finite()).collect();
        assert_eq!(max, [57344.0, 448.0, 240.0, 30.0, 57344.0]);
    }

    #[test]
    fn every_value_encodes_back_to_its_byte() {
        for format in all() {
            for byte in 0..=255u8 {
                let value = format.decode(byte);
                if value.is_nan() {
                    assert!(format.decode(format.encode(value as f64)).is_nan());
                } else if value == 0.0 && format.specials == Specials::FiniteUnsignedZero {
                    assert_eq!(format.encode(value as f64), 0);
                } else {
                    assert_eq!(format.encode(value as f64), byte, "{format:?} {value}");
                }
            }
        }
    }

    #[test]
    fn ties_go_to_even_and_overflow_follows_the_format() {
        let e5m2 = Float8::of(DataType::Float8E5M2).unwrap();
        // 1.125 lies halfway between 1.0 (even) and 1.25.
        assert_eq!(e5m2.decode(e5m2.encode(1.125)), 1.0);
        assert_eq!(e5m2.decode(e5m2.encode(1.375)), 1.5);
        assert_eq!(e5m2.decode(e5m2.encode(61440.0)), f32::INFINITY);
        assert_eq!(e5m2.decode(e5m2.encode(61439.0)), 57344.0);
        let fnuz = Float8::of(DataType::Float8E4M3FNUZ).unwrap();
        assert_eq!(fnuz.encode(-0.0), 0);
        assert_eq!(fnuz.encode(-1e-9), 0);
        assert!(fnuz.decode(fnuz.encode(f64::INFINITY)).is_nan());
        assert_eq!(leading_exponent(f64::from_bits(1)), -1074);
    }
}
