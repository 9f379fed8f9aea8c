//! Complex arithmetic in WGSL: complex64 and complex128 are `vec2` of their part type (the
//! host's layout, real part first), added and negated as vectors, multiplied, divided and
//! measured by these helpers.

use tensor_core::{BinaryOp, UnaryOp};

/// The part type of a complex value type (`vec2<f32>` -> `f32`), or `None` for a real one.
pub(crate) fn part_type(value_type: &str) -> Option<&str> {
    value_type
        .strip_prefix("vec2<")?
        .strip_suffix('>')
        .filter(|p| p.starts_with('f'))
}

/// The helpers `cmul`, `cdiv` (Smith's, which neither overflows nor underflows where the
/// quotient does not) and `cabs` (scaled, likewise) on `vec2<f>`.
pub(crate) fn helpers(f: &str) -> String {
    format!(
        r#"
fn cmul(a: vec2<{f}>, b: vec2<{f}>) -> vec2<{f}> {{
    return vec2<{f}>(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}}

fn cdiv(a: vec2<{f}>, b: vec2<{f}>) -> vec2<{f}> {{
    if (abs(b.x) >= abs(b.y)) {{
        let r = b.y / b.x;
        let d = b.x + b.y * r;
        return vec2<{f}>((a.x + a.y * r) / d, (a.y - a.x * r) / d);
    }}
    let r = b.x / b.y;
    let d = b.x * r + b.y;
    return vec2<{f}>((a.x * r + a.y) / d, (a.y * r - a.x) / d);
}}

fn cabs(a: vec2<{f}>) -> {f} {{
    let m = max(abs(a.x), abs(a.y));
    if (m == 0.0) {{
        return m;
    }}
    let s = a / m;
    return m * sqrt(s.x * s.x + s.y * s.y);
}}
"#
    )
}

/// The WGSL expression of unary `op` on complex `x` of value type `c`, or `None` where this
/// backend has no complex kernel (the transcendentals, sqrt, rsqrt).
pub(crate) fn unary_expression(op: UnaryOp, c: &str) -> Option<String> {
    Some(match op {
        UnaryOp::Neg => "-x".into(),
        UnaryOp::Abs => "cabs(x)".into(),
        UnaryOp::Sign => format!("select(x / cabs(x), x, all(x == {c}(0.0)))"),
        UnaryOp::Square => "cmul(x, x)".into(),
        UnaryOp::Recip => format!("cdiv({c}(1.0, 0.0), x)"),
        _ => return None,
    })
}

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
