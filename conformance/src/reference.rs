//! The reference: what every op must compute, written naively and independently of any
//! backend. Floats compute in f64 and round once to the dtype; integers compute exactly in
//! i128 and wrap; complex numbers compute in `Complex<f64>`.
//!
//! Each result carries a `scale`: the magnitude its error is measured against (the result
//! itself for elementwise ops, the sum of the magnitudes of the terms for sums and matmul).

use num_complex::Complex;

use super::data::{int_of, round_to, wrap};
use polytensor_core::dtype::{DTypeClass, DataType};
use polytensor_core::element::Scalar;
use polytensor_core::ops::{BinaryOp, ReduceOp, UnaryOp};

/// An expected element: its value and the magnitude errors are measured against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Expected {
    /// The exact result, rounded to the output dtype.
    pub value: Scalar,
    /// The magnitude of the computation (for tolerances relative to it).
    pub scale: f64,
    /// How many terms were accumulated (1 for elementwise ops).
    pub terms: usize,
}

impl Expected {
    fn exact(value: Scalar) -> Self {
        Expected {
            value,
            scale: magnitude(value),
            terms: 1,
        }
    }

    fn rounded(dtype: DataType, value: Scalar) -> Self {
        Self::exact(round_to(dtype, value))
    }
}

/// `|value|` (the modulus for complex).
pub fn magnitude(value: Scalar) -> f64 {
    match value {
        Scalar::C64(c) => c.norm(),
        other => other.to_f64().abs(),
    }
}

fn complex(value: Scalar) -> Complex<f64> {
    match value {
        Scalar::C64(c) => c,
        other => Complex::new(other.to_f64(), 0.0),
    }
}

/// `tanh(a + ib) = (sinh a cosh a + i sin b cos b) / (sinh^2 a + cos^2 b)`: the denominator
/// is a sum of squares, so nothing cancels near the poles (the textbook
/// `cosh 2a + cos 2b` does).
fn complex_tanh(z: Complex<f64>) -> Complex<f64> {
    let (a, b) = (z.re, z.im);
    if !a.is_finite() || !b.is_finite() {
        return z.tanh();
    }
    if a.abs() > 20.0 {
        return Complex::new(a.signum(), 2.0 * (2.0 * b).sin() * (-2.0 * a.abs()).exp());
    }
    let denominator = a.sinh().powi(2) + b.cos().powi(2);
    Complex::new(a.sinh() * a.cosh(), b.sin() * b.cos()) / denominator
}

/// IEEE 754-2019 `maximum`: NaN propagates, `+0 > -0`.
fn maximum(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == b {
        if a.is_sign_positive() {
            a
        } else {
            b
        }
    } else {
        a.max(b)
    }
}

/// IEEE 754-2019 `minimum`: NaN propagates, `-0 < +0`.
fn minimum(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == b {
        if a.is_sign_negative() {
            a
        } else {
            b
        }
    } else {
        a.min(b)
    }
}

/// The reference of a unary op on `x` of `dtype`.
pub fn unary(op: UnaryOp, dtype: DataType, x: Scalar) -> Expected {
    let out = op.output_dtype(dtype);
    match dtype.class() {
        DTypeClass::Bool => Expected::exact(Scalar::Bool(!matches!(x, Scalar::Bool(true)))),
        DTypeClass::Signed | DTypeClass::Unsigned => {
            let v = int_of(x);
            let r = match op {
                UnaryOp::Neg => -v,
                UnaryOp::Abs => v.abs(),
                UnaryOp::Sign => v.signum(),
                UnaryOp::Relu => v.max(0),
                UnaryOp::Relu6 => v.clamp(0, 6),
                UnaryOp::Square => v.wrapping_mul(v),
                _ => v,
            };
            Expected::exact(wrap(dtype, r))
        }
        DTypeClass::Complex => {
            let z = complex(x);
            let one = Complex::new(1.0, 0.0);
            // (f(z), f'(z)): a complex function evaluated in floating point is accurate
            // relative to its condition, |f(z)| + |z f'(z)|, which is the scale used.
            let (r, derivative) = match op {
                UnaryOp::Neg => (-z, one),
                UnaryOp::Abs => return Expected::rounded(out, Scalar::F64(z.norm())),
                UnaryOp::Sign => (
                    if z.norm() == 0.0 { z } else { z / z.norm() },
                    Complex::new(0.0, 0.0),
                ),
                UnaryOp::Sqrt => (z.sqrt(), one / (z.sqrt() * 2.0)),
                UnaryOp::Rsqrt => (one / z.sqrt(), -(one / (z.sqrt() * z)) / 2.0),
                UnaryOp::Exp => (z.exp(), z.exp()),
                UnaryOp::Log => (z.ln(), one / z),
                UnaryOp::Sin => (z.sin(), z.cos()),
                UnaryOp::Cos => (z.cos(), -z.sin()),
                UnaryOp::Tanh => {
                    let t = complex_tanh(z);
                    (t, one - t * t)
                }
                UnaryOp::Sigmoid => {
                    let s = one / (one + (-z).exp());
                    (s, s * (one - s))
                }
                UnaryOp::Recip => (one / z, -(one / (z * z))),
                UnaryOp::Square => (z * z, z * 2.0),
                _ => (z, one),
            };
            let value = round_to(out, Scalar::C64(r));
            let condition = r.norm() + (z * derivative).norm();
            Expected {
                value,
                scale: if condition.is_finite() {
                    condition
                } else {
                    r.norm()
                },
                terms: 1,
            }
        }
        _ => {
            let v = x.to_f64();
            let r = match op {
                UnaryOp::Neg => -v,
                UnaryOp::Abs => v.abs(),
                UnaryOp::Sign => {
                    if v > 0.0 {
                        1.0
                    } else if v < 0.0 {
                        -1.0
                    } else {
                        v
                    }
                }
                UnaryOp::Sqrt => v.sqrt(),
                UnaryOp::Rsqrt => 1.0 / v.sqrt(),
                UnaryOp::Exp => v.exp(),
                UnaryOp::Log => v.ln(),
                UnaryOp::Sin => v.sin(),
                UnaryOp::Cos => v.cos(),
                UnaryOp::Tanh => v.tanh(),
                UnaryOp::Erf => libm::erf(v),
                UnaryOp::Erfc => libm::erfc(v),
                // exp(x) / (1 + exp(x)) for negative x: it keeps the subnormal results of
                // f64 that 1 / (1 + exp(-x)) would lose to exp's overflow.
                UnaryOp::Sigmoid if v < 0.0 => v.exp() / (1.0 + v.exp()),
                UnaryOp::Sigmoid => 1.0 / (1.0 + (-v).exp()),
                UnaryOp::Relu => {
                    if v.is_nan() || v > 0.0 {
                        v
                    } else {
                        0.0
                    }
                }
                // NaN and -0.0 compare false both ways, so they stay (TensorFlow's).
                UnaryOp::Relu6 if v < 0.0 => 0.0,
                UnaryOp::Relu6 if v > 6.0 => 6.0,
                UnaryOp::Relu6 => v,
                UnaryOp::Floor => v.floor(),
                UnaryOp::Ceil => v.ceil(),
                UnaryOp::Round => v.round_ties_even(),
                UnaryOp::Recip => 1.0 / v,
                UnaryOp::Square => v * v,
                UnaryOp::Not => v,
            };
            Expected::rounded(out, Scalar::F64(r))
        }
    }
}

fn compare<T: PartialOrd>(op: BinaryOp, a: T, b: T) -> bool {
    match op {
        BinaryOp::Eq => a == b,
        BinaryOp::Ne => a != b,
        BinaryOp::Lt => a < b,
        BinaryOp::Le => a <= b,
        BinaryOp::Gt => a > b,
        _ => a >= b,
    }
}

/// Integer power with polytensor's convention (wrapping; negative exponents give 0 except
/// for bases 1 and -1).
fn int_pow(dtype: DataType, base: i128, exponent: i128) -> Scalar {
    if exponent < 0 {
        return wrap(
            dtype,
            match base {
                1 => 1,
                -1 => {
                    if exponent % 2 == 0 {
                        1
                    } else {
                        -1
                    }
                }
                _ => 0,
            },
        );
    }
    let (mut acc, mut b, mut e) = (1i128, base, exponent);
    while e > 0 {
        if e & 1 == 1 {
            acc = int_of(wrap(dtype, acc.wrapping_mul(b)));
        }
        b = int_of(wrap(dtype, b.wrapping_mul(b)));
        e >>= 1;
    }
    wrap(dtype, acc)
}

/// The reference of a binary op on `a`, `b` of `dtype`.
pub fn binary(op: BinaryOp, dtype: DataType, a: Scalar, b: Scalar) -> Expected {
    match dtype.class() {
        DTypeClass::Bool => {
            let (x, y) = (
                matches!(a, Scalar::Bool(true)),
                matches!(b, Scalar::Bool(true)),
            );
            Expected::exact(Scalar::Bool(match op {
                BinaryOp::And => x & y,
                BinaryOp::Or => x | y,
                BinaryOp::Xor => x ^ y,
                _ => compare(op, x, y),
            }))
        }
        DTypeClass::Signed | DTypeClass::Unsigned => {
            let (x, y) = (int_of(a), int_of(b));
            if op.is_comparison() {
                return Expected::exact(Scalar::Bool(compare(op, x, y)));
            }
            Expected::exact(match op {
                BinaryOp::Add => wrap(dtype, x + y),
                BinaryOp::Sub => wrap(dtype, x - y),
                BinaryOp::Mul => wrap(dtype, x.wrapping_mul(y)),
                BinaryOp::Div if y == 0 => wrap(dtype, -1),
                BinaryOp::Div => wrap(dtype, x / y),
                BinaryOp::Rem if y == 0 => wrap(dtype, x),
                BinaryOp::Rem => wrap(dtype, x % y),
                BinaryOp::Pow => int_pow(dtype, x, y),
                BinaryOp::Max => wrap(dtype, x.max(y)),
                BinaryOp::SquaredDifference => {
                    let d = int_of(wrap(dtype, x - y));
                    wrap(dtype, d.wrapping_mul(d))
                }
                _ => wrap(dtype, x.min(y)),
            })
        }
        DTypeClass::Complex => {
            let (x, y) = (complex(a), complex(b));
            let r = match op {
                BinaryOp::Eq => return Expected::exact(Scalar::Bool(x == y)),
                BinaryOp::Ne => return Expected::exact(Scalar::Bool(x != y)),
                BinaryOp::Add => x + y,
                BinaryOp::Sub => x - y,
                BinaryOp::Mul => {
                    let value = round_to(dtype, Scalar::C64(x * y));
                    return Expected {
                        value,
                        scale: x.norm() * y.norm(),
                        terms: 2,
                    };
                }
                BinaryOp::Div => {
                    let value = round_to(dtype, Scalar::C64(x / y));
                    return Expected {
                        value,
                        scale: x.norm() / y.norm(),
                        terms: 4,
                    };
                }
                _ => {
                    // exp(y ln x): relative error grows with |y ln x|.
                    let r = x.powc(y);
                    let w = (y * x.ln()).norm();
                    let scale = r.norm() * (1.0 + if w.is_finite() { w } else { 0.0 });
                    return Expected {
                        value: round_to(dtype, Scalar::C64(r)),
                        scale,
                        terms: 1,
                    };
                }
            };
            Expected::rounded(dtype, Scalar::C64(r))
        }
        _ => {
            let (x, y) = (a.to_f64(), b.to_f64());
            if op.is_comparison() {
                return Expected::exact(Scalar::Bool(compare(op, x, y)));
            }
            let r = match op {
                BinaryOp::Add => x + y,
                BinaryOp::Sub => x - y,
                BinaryOp::Mul => x * y,
                BinaryOp::Div => x / y,
                BinaryOp::Rem => x % y,
                BinaryOp::Pow => x.powf(y),
                BinaryOp::Max => maximum(x, y),
                BinaryOp::SquaredDifference => (x - y) * (x - y),
                _ => minimum(x, y),
            };
            Expected::rounded(dtype, Scalar::F64(r))
        }
    }
}

/// Sum of `terms` (each with its magnitude) in `dtype`: exact wrapping for integers, f64 for floats.
fn accumulate(dtype: DataType, terms: impl Iterator<Item = Scalar>, mean: bool) -> Expected {
    let mut count = 0usize;
    match dtype.class() {
        DTypeClass::Signed | DTypeClass::Unsigned => {
            let sum: i128 = terms
                .map(|t| {
                    count += 1;
                    int_of(t)
                })
                .sum();
            let value = if mean {
                if count == 0 {
                    0
                } else {
                    sum / count as i128
                }
            } else {
                sum
            };
            Expected {
                value: wrap(dtype, value),
                scale: 0.0,
                terms: count,
            }
        }
        _ => {
            let (mut sum, mut scale) = (Complex::new(0.0, 0.0), 0.0);
            for t in terms {
                count += 1;
                sum += complex(t);
                scale += magnitude(t);
            }
            if mean {
                sum /= count as f64;
                scale /= count as f64;
            }
            let value = if dtype.is_complex() {
                Scalar::C64(sum)
            } else {
                Scalar::F64(sum.re)
            };
            Expected {
                value: round_to(dtype, value),
                scale,
                terms: count,
            }
        }
    }
}

/// The reference of a reduction of `values` (one reduced block, row-major) of `dtype`.
pub fn reduce(op: ReduceOp, dtype: DataType, values: &[Scalar]) -> Expected {
    match op {
        ReduceOp::Sum => accumulate(dtype, values.iter().copied(), false),
        ReduceOp::Mean => accumulate(dtype, values.iter().copied(), true),
        ReduceOp::Prod => {
            if dtype.is_integer() {
                let p = values.iter().fold(1i128, |p, &v| {
                    int_of(wrap(dtype, p.wrapping_mul(int_of(v))))
                });
                return Expected::exact(wrap(dtype, p));
            }
            let p = values
                .iter()
                .fold(Complex::new(1.0, 0.0), |p, &v| p * complex(v));
            let value = if dtype.is_complex() {
                Scalar::C64(p)
            } else {
                Scalar::F64(p.re)
            };
            let scale = values.iter().map(|&v| magnitude(v)).product();
            Expected {
                value: round_to(dtype, value),
                scale,
                terms: values.len(),
            }
        }
        ReduceOp::Max | ReduceOp::Min => {
            if dtype.is_integer() {
                let (lo, hi) = super::data::int_range(dtype);
                let ints = values.iter().map(|&v| int_of(v));
                let r = if op == ReduceOp::Max {
                    ints.fold(lo, i128::max)
                } else {
                    ints.fold(hi, i128::min)
                };
                return Expected::exact(wrap(dtype, r));
            }
            let floats = values.iter().map(|v| v.to_f64());
            let r = if op == ReduceOp::Max {
                floats.fold(f64::NEG_INFINITY, maximum)
            } else {
                floats.fold(f64::INFINITY, minimum)
            };
            Expected::rounded(dtype, Scalar::F64(r))
        }
        ReduceOp::ArgMax | ReduceOp::ArgMin => {
            let key = |v: Scalar| {
                if dtype.is_integer() {
                    int_of(v) as f64
                } else {
                    v.to_f64()
                }
            };
            let mut best: Option<(usize, Scalar)> = None;
            for (i, &v) in values.iter().enumerate() {
                if key(v).is_nan() {
                    best = Some((i, v));
                    break;
                }
                let better = match best {
                    None => true,
                    Some((_, b)) if dtype.is_integer() => {
                        let (x, y) = (int_of(v), int_of(b));
                        if op == ReduceOp::ArgMax {
                            x > y
                        } else {
                            x < y
                        }
                    }
                    Some((_, b)) => {
                        if op == ReduceOp::ArgMax {
                            key(v) > key(b)
                        } else {
                            key(v) < key(b)
                        }
                    }
                };
                if better {
                    best = Some((i, v));
                }
            }
            Expected::exact(Scalar::I64(best.map_or(0, |(i, _)| i as i64)))
        }
    }
}

/// The reference dot product of `a` and `b` (one output element of a matmul).
pub fn dot(dtype: DataType, a: &[Scalar], b: &[Scalar]) -> Expected {
    if dtype.is_integer() {
        let sum: i128 = a
            .iter()
            .zip(b)
            .map(|(&x, &y)| int_of(wrap(dtype, int_of(x).wrapping_mul(int_of(y)))))
            .sum();
        return Expected {
            value: wrap(dtype, sum),
            scale: 0.0,
            terms: a.len(),
        };
    }
    let (mut sum, mut scale) = (Complex::new(0.0, 0.0), 0.0);
    for (&x, &y) in a.iter().zip(b) {
        let p = complex(x) * complex(y);
        sum += p;
        scale += magnitude(x) * magnitude(y);
    }
    let value = if dtype.is_complex() {
        Scalar::C64(sum)
    } else {
        Scalar::F64(sum.re)
    };
    Expected {
        value: round_to(dtype, value),
        scale,
        terms: a.len().max(1),
    }
}

/// The reference of a cast of `x` to `to`: the cast semantics of [`polytensor_core::element`],
/// restated: truncation toward zero with saturation for floats to integers (NaN to 0),
/// wrapping between integers, `!= 0` to bool, real part from complex, one rounding to floats.
pub fn cast(x: Scalar, to: DataType) -> Expected {
    let value = match to.class() {
        DTypeClass::Bool => Scalar::Bool(match x {
            Scalar::C64(c) => c.re != 0.0 || c.im != 0.0,
            Scalar::F64(v) => v != 0.0,
            other => int_of(other) != 0,
        }),
        DTypeClass::Signed | DTypeClass::Unsigned => {
            let (lo, hi) = super::data::int_range(to);
            match x {
                Scalar::F64(_) | Scalar::C64(_) => {
                    let v = complex(x).re;
                    let i = if v.is_nan() {
                        0
                    } else if v >= hi as f64 {
                        hi
                    } else if v <= lo as f64 {
                        lo
                    } else {
                        v.trunc() as i128
                    };
                    wrap(to, i.clamp(lo, hi))
                }
                other => wrap(to, int_of(other)),
            }
        }
        DTypeClass::Complex => match x {
            Scalar::C64(c) => round_to(to, Scalar::C64(c)),
            other => Scalar::C64(Complex::new(round_to(to.real_dtype(), other).to_f64(), 0.0)),
        },
        _ => match x {
            Scalar::C64(c) => round_to(to, Scalar::F64(c.re)),
            other => round_to(to, other),
        },
    };
    Expected::exact(value)
}
