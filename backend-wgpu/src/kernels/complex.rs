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
/// quotient does not), `cabs` (scaled, likewise) and `csqrt` on `vec2<f>`.
pub(crate) fn helpers(f: &str) -> String {
    let sign_bit = if f == "f64" {
        "(bitcast<u64>(z.y) >> 63u) == 1lu"
    } else {
        "(bitcast<u32>(z.y) >> 31u) == 1u"
    };
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

// The principal square root; the imaginary part's sign follows z's, zeros included.
fn csqrt(z: vec2<{f}>) -> vec2<{f}> {{
    if (z.x == 0.0 && z.y == 0.0) {{
        return vec2<{f}>(0.0, z.y);
    }}
    let t = sqrt((abs(z.x) + cabs(z)) * 0.5);
    if (z.x >= 0.0) {{
        return vec2<{f}>(t, z.y / (2.0 * t));
    }}
    let negative = {sign_bit};
    return vec2<{f}>(abs(z.y) / (2.0 * t), select(t, -t, negative));
}}
"#
    )
}

/// The WGSL expression of unary `op` on complex `x` of value type `c`, or `None` where this
/// backend has no complex kernel (the transcendentals of complex128).
pub(crate) fn unary_expression(op: UnaryOp, c: &str) -> Option<String> {
    let single = c == "vec2<f32>";
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
pub(crate) const TRANSCENDENTALS: &str = r#"
fn atan_f32(v: f32) -> f32 {
    let a = abs(v);
    var base = 0.0;
    var t = a;
    if (a > 2.414213562) {
        base = 1.570796327;
        t = -1.0 / a;
    } else if (a > 0.414213562) {
        base = 0.785398163;
        t = (a - 1.0) / (a + 1.0);
    }
    let z = t * t;
    let p = (((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z
        - 3.33329491539e-1) * z * t + t;
    let r = base + p;
    return select(r, -r, v < 0.0);
}

fn negative_sign(v: f32) -> bool {
    return (bitcast<u32>(v) >> 31u) == 1u;
}

// atan2 with IEEE's signed zeros: atan2(+-0, +0) = +-0, atan2(+-0, -0) = +-pi.
fn atan2_f32(y: f32, x: f32) -> f32 {
    let pi = 3.14159265;
    var r = 0.0;
    if (y == 0.0) {
        r = select(0.0, pi, negative_sign(x));
    } else if (abs(y) <= abs(x)) {
        r = atan_f32(abs(y) / abs(x));
        r = select(r, pi - r, x < 0.0);
    } else {
        r = 1.57079633 - atan_f32(abs(x) / abs(y));
        r = select(r, pi - r, x < 0.0);
    }
    return select(r, -r, negative_sign(y));
}

fn sinh_f32(v: f32) -> f32 {
    let a = abs(v);
    var r = 0.0;
    if (a < 0.5) {
        let z = a * a;
        r = a + a * z * (1.0 / 6.0 + z * (1.0 / 120.0 + z / 5040.0));
    } else {
        let e = exp_f32(a);
        r = 0.5 * (e - 1.0 / e);
    }
    return select(r, -r, v < 0.0);
}

fn cosh_f32(v: f32) -> f32 {
    let e = exp_f32(abs(v));
    return 0.5 * (e + 1.0 / e);
}

fn cexp(z: vec2<f32>) -> vec2<f32> {
    let m = exp_f32(z.x);
    if (z.y == 0.0) {
        return vec2<f32>(m, z.y);
    }
    return m * vec2<f32>(sin_cos_f32(z.y, true), sin_cos_f32(z.y, false));
}

fn clog(z: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(log_f32(cabs(z)), atan2_f32(z.y, z.x));
}

fn csin(z: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(sin_cos_f32(z.x, false) * cosh_f32(z.y), sin_cos_f32(z.x, true) * sinh_f32(z.y));
}

fn ccos(z: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(sin_cos_f32(z.x, true) * cosh_f32(z.y), -sin_cos_f32(z.x, false) * sinh_f32(z.y));
}

// Kahan's tanh: with t = tan y, b = 1 + t^2, s = sinh x, tanh(x + iy) =
// (b s cosh x + i t) / (1 + b s^2), which stays accurate near the poles on the imaginary
// axis; far from it, tanh is sign(x) + i 4 sin y cos y e^-2|x|.
fn ctanh(z: vec2<f32>) -> vec2<f32> {
    if (abs(z.x) > 20.0) {
        let tail = 4.0 * sin_cos_f32(z.y, false) * sin_cos_f32(z.y, true) * exp_f32(-2.0 * abs(z.x));
        return vec2<f32>(select(1.0, -1.0, z.x < 0.0), tail);
    }
    let t = sin_cos_f32(z.y, false) / sin_cos_f32(z.y, true);
    let b = 1.0 + t * t;
    let s = sinh_f32(z.x);
    let d = 1.0 + b * s * s;
    return vec2<f32>(b * s * sqrt(1.0 + s * s) / d, t / d);
}
"#;

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
