//! Deterministic input data: a seeded generator, value domains per op, and the special
//! values (NaN, infinities, signed zeros, subnormals, integer limits) mixed into inputs.

use polytensor_core::dispatch_dtype;
use polytensor_core::dtype::{DTypeClass, DataType};
use polytensor_core::element::{Element, Scalar};

/// SplitMix64: small, fast, and the same on every machine.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded from a case name (FNV-1a), so each case reproduces by name.
    pub fn for_case(name: &str) -> Self {
        let seed = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform float in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
    }

    /// A uniform integer in `[lo, hi]`.
    pub fn int(&mut self, lo: i128, hi: i128) -> i128 {
        lo + (u128::from(self.next_u64()) % ((hi - lo + 1) as u128)) as i128
    }

    /// True with probability `1 / n`.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.next_u64().is_multiple_of(n)
    }
}

/// The range of values an input is drawn from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Domain {
    /// Mixed magnitudes around zero, with special values.
    General,
    /// Strictly positive values (log, sqrt), with special values.
    Positive,
    /// Small magnitudes (exp, pow exponents, integer powers), with special values.
    Small,
    /// Values without specials (matmul and reductions, where NaN would hide everything).
    Finite,
    /// The boundary values of the dtype and its neighbours (casts, integer edge cases).
    Boundaries,
}

/// The largest finite value of a float dtype.
pub fn float_max(dtype: DataType) -> f64 {
    match dtype {
        DataType::Half => 65504.0,
        DataType::BFloat16 => f64::from(half::bf16::MAX.to_f32()),
        DataType::Float | DataType::Complex64 => f64::from(f32::MAX),
        _ => f64::MAX,
    }
}

/// The smallest positive subnormal of a float dtype.
pub fn float_min_subnormal(dtype: DataType) -> f64 {
    match dtype {
        DataType::Half => 2f64.powi(-24),
        DataType::BFloat16 => 2f64.powi(-133),
        DataType::Float | DataType::Complex64 => 2f64.powi(-149),
        _ => f64::from_bits(1),
    }
}

/// `(min, max)` of an integer dtype.
pub fn int_range(dtype: DataType) -> (i128, i128) {
    let bits = dtype.size() as u32 * 8;
    if dtype.is_signed_integer() {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    }
}

/// `value` rounded to `dtype` (exact for values already representable).
pub fn round_to(dtype: DataType, value: Scalar) -> Scalar {
    dispatch_dtype!(dtype, T => T::from_scalar(value).to_scalar(), _ => value)
}

/// An integer as a scalar of `dtype`'s class, wrapped modulo 2^bits (two's complement).
pub fn wrap(dtype: DataType, value: i128) -> Scalar {
    let bits = dtype.size() as u32 * 8;
    let modulus = 1i128 << bits;
    let mut v = value.rem_euclid(modulus);
    if dtype.is_signed_integer() && v >= modulus / 2 {
        v -= modulus;
    }
    if dtype.is_signed_integer() {
        Scalar::I64(v as i64)
    } else {
        Scalar::U64(v as u64)
    }
}

/// The integer value of an integer scalar.
pub fn int_of(value: Scalar) -> i128 {
    match value {
        Scalar::I64(v) => i128::from(v),
        Scalar::U64(v) => i128::from(v),
        Scalar::Bool(b) => i128::from(b),
        Scalar::F64(v) => v as i128,
        Scalar::C64(c) => c.re as i128,
    }
}

fn float_specials(dtype: DataType) -> Vec<f64> {
    let max = float_max(dtype);
    vec![
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        float_min_subnormal(dtype),
        -float_min_subnormal(dtype),
        1.0,
        -1.0,
        0.5,
        -0.5,
        1.5,
        2.5,
        -2.5,
        max,
        -max,
    ]
}

fn int_specials(dtype: DataType) -> Vec<i128> {
    let (min, max) = int_range(dtype);
    let mut values = vec![min, max, 0, 1, 2, max - 1, min + 1];
    if dtype.is_signed_integer() {
        values.extend([-1, -2]);
    }
    values
}

/// Every boundary value of `dtype` worth a cast: the specials plus the limits of every
/// integer dtype and their neighbours, as values of `dtype` (rounded or wrapped).
fn boundaries(dtype: DataType) -> Vec<Scalar> {
    let mut raw: Vec<f64> = Vec::new();
    for d in [
        DataType::Int8,
        DataType::Int16,
        DataType::Int32,
        DataType::Int64,
        DataType::UInt8,
        DataType::UInt16,
        DataType::UInt32,
        DataType::UInt64,
    ] {
        let (lo, hi) = int_range(d);
        for v in [lo, hi] {
            raw.extend([v as f64, v as f64 + 1.0, v as f64 - 1.0]);
        }
    }
    raw.extend([
        0.49, 0.5, 0.51, -0.5, -0.99, 255.5, 65535.5, 1e10, -1e10, 1e20, 3e38, -3e38, 1e300,
    ]);
    let class = dtype.class();
    let mut values: Vec<Scalar> = match class {
        DTypeClass::Float => {
            let mut v: Vec<Scalar> = float_specials(dtype).into_iter().map(Scalar::F64).collect();
            v.extend(raw.iter().map(|&x| Scalar::F64(x)));
            v
        }
        DTypeClass::Complex => {
            let mut v: Vec<Scalar> = float_specials(dtype)
                .into_iter()
                .chain(raw.iter().copied())
                .map(|x| Scalar::C64(num_complex::Complex::new(x, -0.5)))
                .collect();
            v.push(Scalar::C64(num_complex::Complex::new(0.0, 1.0)));
            v.push(Scalar::C64(num_complex::Complex::new(f64::NAN, 0.0)));
            v
        }
        DTypeClass::Signed | DTypeClass::Unsigned => {
            let mut ints = int_specials(dtype);
            for d in [
                DataType::Int8,
                DataType::Int16,
                DataType::Int32,
                DataType::UInt8,
                DataType::UInt16,
                DataType::UInt32,
            ] {
                let (lo, hi) = int_range(d);
                ints.extend([lo, hi, lo - 1, hi + 1]);
            }
            ints.into_iter().map(|v| wrap(dtype, v)).collect()
        }
        _ => vec![Scalar::Bool(false), Scalar::Bool(true)],
    };
    values.iter_mut().for_each(|v| *v = round_to(dtype, *v));
    values
}

/// `n` values of `dtype` from `domain`, drawn by `rng`, exactly representable in `dtype`.
pub fn values(dtype: DataType, n: usize, domain: Domain, rng: &mut Rng) -> Vec<Scalar> {
    if domain == Domain::Boundaries {
        let base = boundaries(dtype);
        return (0..n)
            .map(|i| {
                if i < base.len() {
                    base[i]
                } else {
                    base[rng.int(0, base.len() as i128 - 1) as usize]
                }
            })
            .collect();
    }
    let specials = domain != Domain::Finite && n >= 4;
    let value = |rng: &mut Rng| -> Scalar {
        match dtype.class() {
            DTypeClass::Bool => Scalar::Bool(rng.one_in(2)),
            DTypeClass::Signed | DTypeClass::Unsigned => {
                let (min, max) = int_range(dtype);
                if specials && rng.one_in(8) {
                    let s = int_specials(dtype);
                    return wrap(dtype, s[rng.int(0, s.len() as i128 - 1) as usize]);
                }
                let v = match domain {
                    Domain::Small => rng.int(min.max(-6), max.min(9)),
                    Domain::Positive => rng.int(1, max.min(1000)),
                    Domain::Finite => rng.int(min.max(-20), max.min(20)),
                    _ => {
                        if rng.one_in(2) {
                            rng.int(min.max(-300), max.min(300))
                        } else {
                            rng.int(min, max)
                        }
                    }
                };
                wrap(dtype, v)
            }
            DTypeClass::Float | DTypeClass::Complex => {
                let real = |rng: &mut Rng| -> f64 {
                    if specials && rng.one_in(10) {
                        // Complex arithmetic on infinities, huge or subnormal parts has no single
                        // right answer (inf - inf inside a product, hypot of subnormals); complex
                        // inputs get zeros and moderate specials only.
                        let s: Vec<f64> = float_specials(dtype)
                            .into_iter()
                            .filter(|v| {
                                !dtype.is_complex()
                                    || *v == 0.0
                                    || (v.abs() >= 0.5 && v.abs() <= 2.5)
                            })
                            .collect();
                        return s[rng.int(0, s.len() as i128 - 1) as usize];
                    }
                    match domain {
                        Domain::Positive => rng.uniform(0.01, 100.0),
                        Domain::Small => rng.uniform(-4.0, 4.0),
                        Domain::Finite => rng.uniform(-2.0, 2.0),
                        _ => {
                            let magnitude = 10f64.powf(rng.uniform(-3.0, 3.0));
                            if rng.one_in(2) {
                                magnitude
                            } else {
                                -magnitude
                            }
                        }
                    }
                };
                if dtype.is_complex() {
                    Scalar::C64(num_complex::Complex::new(real(rng), real(rng)))
                } else {
                    Scalar::F64(real(rng))
                }
            }
            _ => Scalar::U64(0),
        }
    };
    (0..n).map(|_| round_to(dtype, value(rng))).collect()
}

/// Little-endian bytes of `values` as elements of `dtype`.
pub fn to_bytes(dtype: DataType, values: &[Scalar]) -> Vec<u8> {
    fn encode<T: Element>(values: &[Scalar]) -> Vec<u8> {
        let typed: Vec<T> = values.iter().map(|&v| T::from_scalar(v)).collect();
        // SAFETY: `T: Element` has no padding; the Vec holds `size_of_val` initialised bytes.
        unsafe {
            std::slice::from_raw_parts(
                typed.as_ptr() as *const u8,
                std::mem::size_of_val(typed.as_slice()),
            )
        }
        .to_vec()
    }
    dispatch_dtype!(dtype, T => encode::<T>(values), _ => Vec::new())
}
