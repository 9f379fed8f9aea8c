//! Complex arithmetic in WGSL: complex64 and complex128 are `vec2` of their part type (the
//! host's layout, real part first), added and negated as vectors, multiplied, divided and
//! measured by these helpers.

use polytensor_core::{BinaryOp, UnaryOp};

use super::template::instantiate;
use super::ty::Scalar;

/// The helpers `cmul`, `cdiv` (Smith's, which neither overflows nor underflows where the
/// quotient does not), `cabs` (scaled, likewise) and `csqrt` on `vec2<f>`.
pub(crate) fn helpers(f: Scalar) -> String {
    let (top, one) = if f.is_wide() { (63, "1lu") } else { (31, "1u") };
    instantiate(
        include_str!("wgsl/complex.wgsl"),
        &[("F", &f), ("BITS", &f.bits()), ("TOP", &top), ("ONE", &one)],
    )
}

/// The WGSL expression of unary `op` on complex `x` of part type `part`, or `None` where
/// this backend has no complex kernel (the transcendentals of complex128).
pub(crate) fn unary_expression(op: UnaryOp, part: Scalar) -> Option<String> {
    let single = part == Scalar::F32;
    let c = super::ty::Ty::Complex(part);
    Some(match op {
        UnaryOp::Neg => "-x".into(),
        UnaryOp::Abs => "cabs(x)".into(),
        UnaryOp::Sign => format!("select(x / cabs(x), x, all(x == {c}(0.0)))"),
        UnaryOp::Square => "cmul(x, x)".into(),
        UnaryOp::Recip => format!("cdiv({c}(1.0, 0.0), x)"),
        // complex64 only: see `TRANSCENDENTALS`.
        UnaryOp::Sqrt => "csqrt(x)".into(),
        UnaryOp::Rsqrt => format!("cdiv({c}(1.0, 0.0), csqrt(x))"),
        UnaryOp::Exp if single => "cexp(x)".into(),
        UnaryOp::Log if single => "clog(x)".into(),
        UnaryOp::Sin if single => "csin(x)".into(),
        UnaryOp::Cos if single => "ccos(x)".into(),
        UnaryOp::Tanh if single => "ctanh(x)".into(),
        UnaryOp::Sigmoid if single => {
            "cdiv(vec2<f32>(1.0, 0.0), vec2<f32>(1.0, 0.0) + cexp(-x))".into()
        }
        _ => return None,
    })
}

/// complex64 exp, log, sin, cos and tanh from the f32 functions of
/// `super::transcendental` (which a template must carry too): accurate relative to each
/// function's condition, `|f(z)| + |z f'(z)|`, as the conformance suite measures them.
pub(crate) const TRANSCENDENTALS: &str = include_str!("wgsl/complex_transcendental.wgsl");

/// The WGSL expression of binary `op` on complex `x` and `y` (comparisons as a `u32` 0 or
/// 1; a NaN part makes them unequal), or `None` (pow).
pub(crate) fn binary_expression(op: BinaryOp) -> Option<String> {
    let equal = "(all(x == y) && !is_nan(x.x) && !is_nan(x.y) && !is_nan(y.x) && !is_nan(y.y))";
    Some(match op {
        BinaryOp::Add => "x + y".into(),
        BinaryOp::Sub => "x - y".into(),
        BinaryOp::Mul => "cmul(x, y)".into(),
        BinaryOp::Div => "cdiv(x, y)".into(),
        BinaryOp::Eq => format!("select(0u, 1u, {equal})"),
        BinaryOp::Ne => format!("select(1u, 0u, {equal})"),
        _ => return None,
    })
}
