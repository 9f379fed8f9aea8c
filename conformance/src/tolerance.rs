//! The tolerance table: how far a device's result may be from the reference, per op and dtype.
//!
//! | op | integers, bool | float (f16, bf16, f32, f64) | complex |
//! |---|---|---|---|
//! | neg abs sign relu floor ceil round square recip sqrt add sub mul div rem max min, comparisons, logical, where, cast, fill, arange, copy | exact | exact (correctly rounded; `-0.0` and `+0.0` must match) | exact for neg, add, sub; 4 ulp of the operands' magnitude otherwise |
//! | rsqrt exp log sin cos tanh sigmoid | - | 2 ulp (4 for tanh, sigmoid) | 8 ulp of the result's magnitude |
//! | pow | exact | 4 ulp | 16 ulp |
//! | sum, mean, matmul | exact (wrapping) | 1 ulp + `n * u_acc * sum(|term|)` | the same per component |
//! | prod | exact (wrapping) | 1 ulp + `n * u_acc * prod(|x|)` | the same |
//! | max min argmax argmin | exact | exact | - |
//!
//! `ulp` is the spacing of the dtype at the reference's magnitude (f16 and bf16 at their own
//! precision); `u_acc` is the unit roundoff of the accumulator a backend must use at least
//! (f32 for f16, bf16 and f32; f64 for f64); `n` the number of terms. The accumulation
//! bound holds for any summation order.
//!
//! A device may declare float arithmetic WGSL allows ([`FloatSemantics`]): division, `sqrt`
//! and `1/x` within 2.5 ulp ([`declared`]), and f32 subnormals flushed to zero (judged
//! against the reference of the flushed inputs, flushed: `crate::execute`).

use polytensor_core::device::FloatSemantics;
use polytensor_core::dtype::DataType;
use polytensor_core::ops::{BinaryOp, Op, ReduceOp, UnaryOp};

/// How a result is compared with the reference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Tolerance {
    /// Bit-exact (NaN matches NaN; the sign of zero matters for floats).
    Exact,
    /// Within this many ulps of the dtype at the reference's scale.
    Ulps(f64),
    /// Accumulated: 1 ulp plus `terms * u_acc * scale`.
    Accumulated,
    /// An accumulation and then an epilogue (a fused convolution's scale, shift and
    /// activation): [`Tolerance::Accumulated`] plus 3 ulp of the dtype at the scale, the
    /// roundings of the intermediate results where a device composes the epilogue in the
    /// dtype instead of fusing it (a scaled sum and a shift can cancel far below them).
    Epilogue,
}

/// The tolerance of `op` on `dtype` (the input dtype).
pub fn tolerance(op: Op, dtype: DataType) -> Tolerance {
    let complex = dtype.is_complex();
    if !(dtype.is_float() || complex) {
        return Tolerance::Exact;
    }
    match op {
        Op::Unary(u) => match u {
            UnaryOp::Neg => Tolerance::Exact,
            UnaryOp::Rsqrt
            | UnaryOp::Exp
            | UnaryOp::Log
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Erf
                if !complex =>
            {
                Tolerance::Ulps(2.0)
            }
            UnaryOp::Tanh | UnaryOp::Sigmoid | UnaryOp::Erfc if !complex => Tolerance::Ulps(4.0),
            _ if complex => Tolerance::Ulps(8.0),
            _ => Tolerance::Exact,
        },
        Op::Binary(b) => match b {
            BinaryOp::Pow if complex => Tolerance::Ulps(16.0),
            BinaryOp::Pow => Tolerance::Ulps(4.0),
            // The difference is rounded before it is squared: 1.5 ulp at most.
            BinaryOp::SquaredDifference => Tolerance::Ulps(2.0),
            BinaryOp::Mul | BinaryOp::Div if complex => Tolerance::Ulps(4.0),
            _ => Tolerance::Exact,
        },
        Op::Matmul => Tolerance::Accumulated,
        Op::Reduce(ReduceOp::Sum | ReduceOp::Mean | ReduceOp::Prod) => Tolerance::Accumulated,
        _ => Tolerance::Exact,
    }
}

/// [`tolerance`] on a device whose float arithmetic is `semantics`: where it declares
/// division, `sqrt` and `1/x` within WGSL's bound, 2.5 ulp for them (real floats).
pub fn declared(op: Op, dtype: DataType, semantics: FloatSemantics) -> Tolerance {
    let divides = matches!(
        op,
        Op::Binary(BinaryOp::Div) | Op::Unary(UnaryOp::Sqrt | UnaryOp::Recip)
    );
    if semantics.inexact_division && divides && dtype.is_float() {
        return Tolerance::Ulps(2.5);
    }
    tolerance(op, dtype)
}

/// `(mantissa bits, minimum normal exponent)` of a float dtype (or a complex one's parts).
fn float_format(dtype: DataType) -> (i32, i32) {
    match dtype.real_dtype() {
        DataType::Half => (10, -14),
        DataType::BFloat16 => (7, -126),
        DataType::Float => (23, -126),
        _ => (52, -1022),
    }
}

/// The spacing of `dtype`'s values at magnitude `m` (the subnormal spacing below the normals).
pub fn ulp(dtype: DataType, m: f64) -> f64 {
    let (bits, emin) = float_format(dtype);
    let exponent = if m > 0.0 && m.is_finite() {
        m.log2().floor() as i32
    } else {
        emin
    };
    2f64.powi(exponent.max(emin) - bits)
}

/// The unit roundoff of the accumulator a backend must use at least for `dtype`.
pub fn accumulator_roundoff(dtype: DataType) -> f64 {
    match dtype.real_dtype() {
        DataType::Double => 2f64.powi(-53),
        _ => 2f64.powi(-24),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_semantics_widen_only_division_and_roots() {
        let gpu = FloatSemantics {
            flushes_subnormals: true,
            inexact_division: true,
        };
        let ieee = FloatSemantics::default();
        let div = Op::Binary(BinaryOp::Div);
        assert_eq!(declared(div, DataType::Float, ieee), Tolerance::Exact);
        assert_eq!(declared(div, DataType::Float, gpu), Tolerance::Ulps(2.5));
        let sqrt = Op::Unary(UnaryOp::Sqrt);
        assert_eq!(
            declared(sqrt, DataType::BFloat16, gpu),
            Tolerance::Ulps(2.5)
        );
        // Integer division stays exact; other ops keep their tolerance.
        assert_eq!(declared(div, DataType::Int32, gpu), Tolerance::Exact);
        let add = Op::Binary(BinaryOp::Add);
        assert_eq!(declared(add, DataType::Float, gpu), Tolerance::Exact);
    }
}
