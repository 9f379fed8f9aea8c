//! Elementwise kernels: one WGSL template for every op of one to three operands over any
//! strided (broadcast, transposed, offset) inputs, writing a contiguous output; the op is a
//! WGSL expression over `x`, `y`, `z`, and the template carries the helpers expressions
//! call (NaN-aware float helpers, conversions, integer powers, `fmod`, transcendentals).
//!
//! The geometry travels in a small storage buffer of `u32`: element count, rank, one
//! offset per input, the (merged) dims, then each input's strides (as `i32` bits, so
//! reversed views work).

use tensor_core::{BinaryOp, DataType, UnaryOp};

use super::storage::{Storage, CONVERSIONS};
use super::transcendental::{POW_F32, TRANSCENDENTALS, TRANSCENDENTALS_F64};

/// Invocations per workgroup.
pub(crate) const WORKGROUP: u32 = 256;

/// The WGSL expression of `op` on `x` and `y` of type `t`, following DESIGN.md's shared
/// semantics (integer `x / 0 = -1`, `x % 0 = x`; WGSL's own rules give `x` and `0`), or
/// `None` where this backend has no exact kernel yet.
pub(crate) fn binary_expression(op: BinaryOp, t: &str) -> Option<String> {
    let float = t.starts_with('f');
    let zero = format!("{t}(0)");
    let all_ones = if t.starts_with('u') {
        format!("~{zero}")
    } else {
        format!("{t}(-1)")
    };
    Some(match op {
        BinaryOp::Add => "x + y".into(),
        BinaryOp::Sub => "x - y".into(),
        BinaryOp::Mul => "x * y".into(),
        BinaryOp::Div if float => "x / y".into(),
        BinaryOp::Div => format!("select(x / y, {all_ones}, y == {zero})"),
        BinaryOp::Rem if !float => format!("select(x % y, x, y == {zero})"),
        BinaryOp::Rem => format!("float_rem_{t}(x, y)"),
        BinaryOp::Pow if !float => format!("pow_{t}(x, y)"),
        // Computed in f64: see `transcendental::POW_F32`.
        BinaryOp::Pow if t == "f32" => "pow_f32(x, y)".into(),
        BinaryOp::Max if float => "float_max(x, y)".into(),
        BinaryOp::Min if float => "float_min(x, y)".into(),
        BinaryOp::Max => "max(x, y)".into(),
        BinaryOp::Min => "min(x, y)".into(),
        _ => return None,
    })
}

/// The WGSL expression of unary `op` on `x` of type `t`, or `None` where this backend has
/// no kernel within the conformance bounds yet.
pub(crate) fn unary_expression(op: UnaryOp, t: &str) -> Option<String> {
    let float = t.starts_with('f');
    let signed = !t.starts_with('u');
    Some(match op {
        UnaryOp::Neg if float => "-x".into(),
        UnaryOp::Neg if signed => "0 - x".into(),
        UnaryOp::Abs if float => "abs(x)".into(),
        // Wrapping: |MIN| = MIN, as two's complement negation gives.
        UnaryOp::Abs if signed => "select(x, 0 - x, x < 0)".into(),
        UnaryOp::Abs => "x".into(),
        UnaryOp::Sign if float => "select(sign(x), x, is_nan(x) || x == 0.0)".into(),
        UnaryOp::Sign if signed => format!("select(select({t}(0), {t}(1), x > 0), {t}(-1), x < 0)"),
        UnaryOp::Sign => format!("min(x, {t}(1))"),
        UnaryOp::Relu if float => "select(0.0, x, x > 0.0 || is_nan(x))".into(),
        UnaryOp::Relu if signed => "max(x, 0)".into(),
        UnaryOp::Relu => "x".into(),
        UnaryOp::Square => "x * x".into(),
        UnaryOp::Floor if float => "floor(x)".into(),
        UnaryOp::Ceil if float => "ceil(x)".into(),
        // A zero result keeps the sign of `x`, as WGSL's round must (lavapipe's f64 round
        // returns +0 for -0.4); `1 / x < 0` tells -0 from +0.
        UnaryOp::Round if float => "round_even(x)".into(),
        // Correctly rounded on every conformant Vulkan device (and f16, bf16 round once
        // more, innocuously); rsqrt's two roundings stay within its 2 ulp.
        UnaryOp::Sqrt if float => "sqrt(x)".into(),
        UnaryOp::Recip if float => "1.0 / x".into(),
        UnaryOp::Rsqrt if float => "1.0 / sqrt(x)".into(),
        // f32 (and f16, bf16 through it) only: see `transcendental`.
        UnaryOp::Exp if t == "f32" => "exp_f32(x)".into(),
        UnaryOp::Log if t == "f32" => "log_f32(x)".into(),
        UnaryOp::Tanh if t == "f32" => "tanh_f32(x)".into(),
        UnaryOp::Sigmoid if t == "f32" => "sigmoid_f32(x)".into(),
        UnaryOp::Exp if t == "f64" => "exp_f64(x)".into(),
        UnaryOp::Log if t == "f64" => "log_f64(x)".into(),
        UnaryOp::Tanh if t == "f64" => "tanh_f64(x)".into(),
        UnaryOp::Sigmoid if t == "f64" => "sigmoid_f64(x)".into(),
        UnaryOp::Sin if t == "f32" => "sin_cos_f32(x, false)".into(),
        UnaryOp::Cos if t == "f32" => "sin_cos_f32(x, true)".into(),
        _ => return None,
    })
}

/// The float helpers every map and reduction template carries, for float type `t` (`f32`,
/// or `f64` where the device has SHADER_F64 and SHADER_INT64, which its bit tests need):
/// the f32 power of two `pow2`, and `is_nan`, `float_max`, `float_min`, `round_even` on `t`. WGSL lets
/// compilers assume there are no NaNs (`x != x` folds to false on lavapipe), so NaN is
/// tested on the bits; `max` and `min` propagate NaN and order -0 below +0, as the shared
/// semantics require. f64 templates also get the round-to-odd narrowing that makes f64 to
/// f16/bf16 a single rounding.
pub(crate) fn float_helpers(t: &str) -> String {
    let (bits, is_nan) = if t == "f64" {
        (
            "u64",
            "return (bitcast<u64>(v) & 0x7ffffffffffffffflu) > 0x7ff0000000000000lu;",
        )
    } else {
        (
            "u32",
            "return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;",
        )
    };
    let integral = if t == "f64" {
        "4503599627370496.0" // 2^52
    } else {
        "8388608.0" // 2^23
    };
    let mut helpers = format!(
        r#"
// 2^n for n in [-126, 127], built from its bits (exact, unlike a device's `exp2`).
fn pow2(n: i32) -> f32 {{
    return bitcast<f32>(u32(n + 127) << 23u);
}}

fn is_nan(v: {t}) -> bool {{
    {is_nan}
}}

fn float_max(x: {t}, y: {t}) -> {t} {{
    let zeros = bitcast<{t}>(bitcast<{bits}>(x) & bitcast<{bits}>(y));
    return select(select(select(max(x, y), zeros, x == y), y, is_nan(y)), x, is_nan(x));
}}

fn float_min(x: {t}, y: {t}) -> {t} {{
    let zeros = bitcast<{t}>(bitcast<{bits}>(x) | bitcast<{bits}>(y));
    return select(select(select(min(x, y), zeros, x == y), y, is_nan(y)), x, is_nan(x));
}}

// Round half to even, exactly, keeping the sign of a zero result: lavapipe's f64 `round`
// returns +0 for -0.4 and, in some shaders, 1 for 1.5. Below {integral} every `x - floor(x)`
// and parity test is exact; from there on every float is an integer (or inf or NaN).
fn round_even(x: {t}) -> {t} {{
    let r = floor(x);
    let d = x - r;
    let odd = r - 2.0 * floor(r * 0.5) != 0.0;
    let y = select(r, r + 1.0, d > 0.5 || (d == 0.5 && odd));
    let zero = select({t}(0.0), {t}(-0.0), x < 0.0 || 1.0 / x < 0.0);
    return select(select(y, zero, y == 0.0), x, !(abs(x) < {integral}));
}}
"#
    );
    if t == "f64" {
        helpers.push_str(
            r#"
// x rounded to f32 toward zero, with the last bit set if that was inexact (round to odd):
// rounding this once more to a narrower float rounds x correctly.
fn f64_to_f32_odd(x: f64) -> f32 {
    var r = f32(x);
    if (is_nan(x) || abs(f64(r)) <= abs(x)) {
        if (f64(r) != x && !is_nan(x)) {
            r = bitcast<f32>(bitcast<u32>(r) | 1u);
        }
        return r;
    }
    r = bitcast<f32>(bitcast<u32>(r) - 1u);
    return bitcast<f32>(bitcast<u32>(r) | 1u);
}
"#,
        );
    }
    helpers
}

/// The exact float remainder of C's `fmod` on float type `t` (`f32`, or `f64` in templates
/// with 64-bit integers), as `float_rem_<t>`: WGSL's `%` is `x - y * trunc(x / y)`, which
/// rounds, so the significands are reduced by shift-and-subtract instead.
fn remainder_helper(t: &str) -> String {
    let wide = t == "f64";
    let (u, s, bits) = if wide {
        ("u64", "lu", 52)
    } else {
        ("u32", "u", 23)
    };
    let hidden = format!("{:#x}{s}", 1u64 << bits);
    let mantissa = format!("{:#x}{s}", (1u64 << bits) - 1);
    let magnitude = format!(
        "{:#x}{s}",
        if wide {
            u64::MAX >> 1
        } else {
            u64::from(u32::MAX >> 1)
        }
    );
    let sign_bit = format!("{:#x}{s}", if wide { 1u64 << 63 } else { 1 << 31 });
    let infinity = format!("{:#x}{s}", if wide { 0x7ffu64 << 52 } else { 0xff << 23 });
    let nan = format!("{:#x}{s}", if wide { 0xfffu64 << 51 } else { 0x1ff << 22 });
    format!(
        r#"
struct Unpacked_{t} {{
    m: {u},
    e: i32,
}}

// The significand of a finite nonzero magnitude `a` with its hidden bit set, and its
// exponent (subnormals normalised).
fn unpack_significand_{t}(a: {u}) -> Unpacked_{t} {{
    var e = i32(u32(a >> {bits}u));
    var m = a & {mantissa};
    if (e == 0) {{
        e = 1;
        while ((m & {hidden}) == 0{s}) {{
            m <<= 1u;
            e -= 1;
        }}
    }} else {{
        m |= {hidden};
    }}
    return Unpacked_{t}(m, e);
}}

fn float_rem_{t}(x: {t}, y: {t}) -> {t} {{
    let ux = bitcast<{u}>(x);
    let sign = ux & {sign_bit};
    let ax = ux & {magnitude};
    let ay = bitcast<{u}>(y) & {magnitude};
    if (ay == 0{s} || ay > {infinity} || ax >= {infinity}) {{
        return bitcast<{t}>({nan});
    }}
    if (ax < ay) {{
        return x;
    }}
    if (ax == ay) {{
        return bitcast<{t}>(sign);
    }}
    let px = unpack_significand_{t}(ax);
    let py = unpack_significand_{t}(ay);
    var m = px.m;
    var e = px.e;
    for (; e > py.e; e--) {{
        if (m >= py.m) {{
            m -= py.m;
        }}
        if (m == 0{s}) {{
            return bitcast<{t}>(sign);
        }}
        m <<= 1u;
    }}
    if (m >= py.m) {{
        m -= py.m;
    }}
    if (m == 0{s}) {{
        return bitcast<{t}>(sign);
    }}
    while ((m & {hidden}) == 0{s}) {{
        m <<= 1u;
        e -= 1;
    }}
    if (e > 0) {{
        return bitcast<{t}>(sign | ({u}(u32(e)) << {bits}u) | (m & {mantissa}));
    }}
    return bitcast<{t}>(sign | (m >> u32(1 - e)));
}}
"#
    )
}

/// Integer powers by squaring for the signed and unsigned types `i` and `u` of one width
/// (wrapping; negative exponents give 0 except for bases 1 and -1), as `pow_<type>`.
fn pow_helpers(i: &str, u: &str) -> String {
    format!(
        r#"
fn pow_{u}(base: {u}, exponent: {u}) -> {u} {{
    var acc = {u}(1);
    var b = base;
    var e = exponent;
    while (e > {u}(0)) {{
        if ((e & {u}(1)) == {u}(1)) {{
            acc *= b;
        }}
        b *= b;
        e >>= 1u;
    }}
    return acc;
}}

fn pow_{i}(base: {i}, exponent: {i}) -> {i} {{
    if (exponent < {i}(0)) {{
        if (base == {i}(1)) {{
            return {i}(1);
        }}
        if (base == {i}(-1)) {{
            return select({i}(-1), {i}(1), (exponent & {i}(1)) == {i}(0));
        }}
        return {i}(0);
    }}
    return bitcast<{i}>(pow_{u}(bitcast<{u}>(base), bitcast<{u}>(exponent)));
}}
"#
    )
}

/// 64-bit integer helpers, for templates on devices with SHADER_INT64: powers, and
/// magnitudes rounded once to floats of `p` significant bits (the magnitude is first cut
/// to 32 bits with a sticky bit, which keeps the rounding single).
fn int64_helpers() -> String {
    pow_helpers("i64", "u64")
        + r#"
fn int64_to_float(m: u64, negative: bool, p: u32) -> f32 {
    let high = u32(m >> 32u);
    if (high == 0u) {
        return int_to_float(u32(m), negative, p);
    }
    let shift = 32u - countLeadingZeros(high);
    let cut = u32(m >> shift) | select(0u, 1u, (m & ((1lu << shift) - 1lu)) != 0lu);
    return int_to_float(cut, negative, p) * pow2(i32(shift));
}
"#
}

/// The WGSL source of `out[i] = apply(in0[p0(i)], in1[p1(i)], ...)` with inputs and output
/// stored as `inputs` and `output`, `apply`'s body `expression` over `x`, `y`, `z`; `flat`
/// for geometry of one dim (see [`geometry`]).
pub(crate) fn map_source(
    inputs: &[Storage],
    output: Storage,
    expression: &str,
    flat: bool,
) -> String {
    const NAMES: [&str; 3] = ["x", "y", "z"];
    let n = inputs.len();
    let value = output.value_type();
    let float = if inputs
        .iter()
        .chain([&output])
        .any(|s| s.value_type().contains("f64"))
    {
        "f64"
    } else {
        "f32"
    };
    let mut source = format!(
        "{}{}{CONVERSIONS}{}",
        float_helpers(float),
        remainder_helper("f32"),
        pow_helpers("i32", "u32")
    );
    if float == "f32" {
        source += TRANSCENDENTALS;
    } else {
        source += TRANSCENDENTALS_F64;
    }
    if let Some(part) = inputs
        .iter()
        .chain([&output])
        .find_map(|s| super::complex::part_type(s.value_type()))
    {
        source += &super::complex::helpers(part);
        // They build on the f32 functions, which f64 templates (casts) do not carry.
        if part == "f32" && float == "f32" {
            source += super::complex::TRANSCENDENTALS;
        }
    }
    // Helpers that need SHADER_F64 go only into the kernels that call them.
    if expression.contains("pow_f32(") {
        source += POW_F32;
    }
    if inputs
        .iter()
        .chain([&output])
        .any(|s| s.value_type().contains("64"))
    {
        source += &int64_helpers();
        if float == "f64" {
            source += &remainder_helper("f64");
        }
    }
    source.push_str("@group(0) @binding(0) var<storage, read> geometry: array<u32>;\n");
    for (k, storage) in inputs.iter().enumerate() {
        source += &format!(
            "@group(0) @binding({}) var<storage, read> in{k}: array<{}>;\n",
            k + 1,
            storage.array_type()
        );
    }
    source += &format!(
        "@group(0) @binding({}) var<storage, read_write> out: array<{}>;\n",
        n + 1,
        output.array_type()
    );
    let params: Vec<String> = inputs
        .iter()
        .zip(NAMES)
        .map(|(storage, name)| format!("{name}: {}", storage.value_type()))
        .collect();
    source += &format!(
        "fn apply({}) -> {value} {{\n    return {expression};\n}}\n",
        params.join(", ")
    );
    let positions: String = (0..n)
        .map(|k| format!("    var p{k} = bitcast<i32>(geometry[{}u]);\n", 2 + k))
        .collect();
    let steps: String = (0..n)
        .map(|k| {
            format!(
                "        p{k} += index * bitcast<i32>(geometry[{}u + {}u * rank + u32(d)]);\n",
                2 + n,
                k + 1
            )
        })
        .collect();
    let args: Vec<String> = inputs
        .iter()
        .enumerate()
        .map(|(k, storage)| storage.load(&format!("in{k}"), &format!("p{k}")))
        .collect();
    let element = if flat {
        // One dim: positions are affine in the index, no division.
        let positions: String = (0..n)
            .map(|k| {
                format!(
                    "    let p{k} = bitcast<i32>(geometry[{}u]) + i32(i) * bitcast<i32>(geometry[{}u]);\n",
                    2 + k,
                    3 + n + k
                )
            })
            .collect();
        format!(
            "\nfn element(i: u32) -> {value} {{\n{positions}    return apply({});\n}}\n",
            args.join(", ")
        )
    } else {
        format!(
            r#"
fn element(i: u32) -> {value} {{
    let rank = geometry[1];
    var rest = i;
{positions}    for (var d = i32(rank) - 1; d >= 0; d--) {{
        let dim = geometry[{n2}u + u32(d)];
        let index = i32(rest % dim);
        rest = rest / dim;
{steps}    }}
    return apply({args});
}}
"#,
            n2 = 2 + n,
            args = args.join(", ")
        )
    };
    source += &element;
    let body = output.store_body("geometry[0]");
    source += &format!(
        r#"
@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {{
    let i = id.x + id.y * groups.x * {WORKGROUP}u;
{body}}}
"#
    );
    source
}

/// The WGSL expression of comparison `op` on `x` and `y` stored as `t`, as a `u32` 0 or 1.
/// Float comparisons are false (`ne`: true) when either side is NaN, tested on the bits.
pub(crate) fn compare_expression(op: BinaryOp, t: &str) -> Option<String> {
    let symbol = match op {
        BinaryOp::Eq => "==",
        BinaryOp::Ne => "==",
        BinaryOp::Lt => "<",
        BinaryOp::Le => "<=",
        BinaryOp::Gt => ">",
        BinaryOp::Ge => ">=",
        _ => return None,
    };
    let ordered = if t.starts_with('f') {
        format!("(x {symbol} y && !is_nan(x) && !is_nan(y))")
    } else {
        format!("(x {symbol} y)")
    };
    let truth = if op == BinaryOp::Ne {
        format!("!{ordered}")
    } else {
        ordered
    };
    Some(format!("select(0u, 1u, {truth})"))
}

/// The WGSL expression converting `x` of `from` into `to` with the shared cast semantics:
/// float to int truncates and saturates with NaN to 0, ints wrap (the narrowing store
/// drops the high bits), anything to bool is "not zero" (NaN is not zero), bool is 0 or 1,
/// and ints become floats rounded once. `None` unless both dtypes are computed on here.
pub(crate) fn cast_expression(from: DataType, to: DataType) -> Option<String> {
    let target = Storage::of(to)?.value_type();
    match (from.is_complex(), to.is_complex()) {
        (false, false) => real_cast(from, to, "x"),
        (true, true) => Some(format!("{target}(x)")),
        // Complex to bool is "either part is not zero"; to anything else, the real part.
        (true, false) if to == DataType::Bool => {
            Some("select(0u, 1u, x.x != 0.0 || x.y != 0.0 || is_nan(x.x) || is_nan(x.y))".into())
        }
        (true, false) => real_cast(from.real_dtype(), to, "x.x"),
        (false, true) => Some(format!(
            "{target}({}, 0.0)",
            real_cast(from, to.real_dtype(), "x")?
        )),
    }
}

/// [`cast_expression`] between real dtypes (and bool) of the value `v`.
fn real_cast(from: DataType, to: DataType, v: &str) -> Option<String> {
    use tensor_core::DTypeClass::{Bool, Float, Signed};
    let (source, target) = (Storage::of(from)?, Storage::of(to)?);
    let (s, t) = (source.value_type(), target.value_type());
    let (wide_source, wide_target) = (s.ends_with("64"), t.ends_with("64"));
    Some(match (from.class(), to.class()) {
        (Float, Bool) => format!("select(0u, 1u, {v} != 0.0 || is_nan({v}))"),
        (_, Bool) => format!("select(0u, 1u, {v} != {s}(0))"),
        (Float, Float) if s == "f64" && t != "f64" => match to {
            DataType::Float => format!("f32({v})"),
            _ => format!("f64_to_f32_odd({v})"),
        },
        (Float, Float) | (Bool, _) => format!("{t}({v})"),
        (Float, _) => {
            // Saturate outside [lo, hi], truncate inside; the bounds are exact in f32.
            let (lo, hi) = integer_bounds(to)?;
            format!(
                "select(select(select({t}({v}), {}, {v} >= {hi}.0 + 1.0), {}, {v} < {lo}.0), \
                 {t}(0), is_nan({v}))",
                int_literal(hi, t),
                int_literal(lo, t)
            )
        }
        (_, Float) if t == "f64" => format!("f64({v})"),
        (_, Float) => {
            let bits = match to {
                DataType::Half => 11,
                DataType::BFloat16 => 8,
                _ => 24,
            };
            let (convert, unsigned) = if wide_source {
                ("int64_to_float", "u64")
            } else {
                ("int_to_float", "u32")
            };
            if from.class() == Signed {
                format!(
                    "{convert}(select(bitcast<{unsigned}>({v}), {unsigned}(0) - bitcast<{unsigned}>({v}), \
                     {v} < 0), {v} < 0, {bits}u)"
                )
            } else {
                format!("{convert}({v}, false, {bits}u)")
            }
        }
        // Between integer widths: sign- or zero-extend by the source's signedness, or cut.
        _ if wide_source && !wide_target => format!("bitcast<{t}>(u32(bitcast<u64>({v})))"),
        _ if wide_target && !wide_source => {
            let extended = if from.class() == Signed { "i64" } else { "u64" };
            format!("bitcast<{t}>({extended}({v}))")
        }
        _ => format!("bitcast<{t}>({v})"),
    })
}

/// The smallest and largest value of integer `dtype`.
pub(crate) fn integer_bounds(dtype: DataType) -> Option<(i128, i128)> {
    let bits = match dtype {
        DataType::Int8 | DataType::UInt8 => 8,
        DataType::Int16 | DataType::UInt16 => 16,
        DataType::Int32 | DataType::UInt32 => 32,
        DataType::Int64 | DataType::UInt64 => 64,
        _ => return None,
    };
    Some(if dtype.class() == tensor_core::DTypeClass::Signed {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    })
}

/// `value` as a WGSL expression of integer type `t` (WGSL's abstract integers are 64-bit
/// signed, so the extremes of i64 and u64 are built from smaller literals).
pub(crate) fn int_literal(value: i128, t: &str) -> String {
    if value < -i128::from(i64::MAX) {
        format!("{t}({} - 1)", -i128::from(i64::MAX))
    } else if value > i128::from(i64::MAX) {
        format!("~{t}(0)")
    } else {
        format!("{t}({value})")
    }
}

/// The WGSL expression of a logical op on bools (bytes 0 or 1).
pub(crate) fn logical_expression(op: BinaryOp) -> Option<&'static str> {
    match op {
        BinaryOp::And => Some("x & y"),
        BinaryOp::Or => Some("x | y"),
        BinaryOp::Xor => Some("x ^ y"),
        _ => None,
    }
}

/// The geometry buffer's words for an output of `dims` read from inputs at `offsets` with
/// `strides`: count, rank, one offset per input, the dims, then each input's strides; and
/// whether it has one dim (a flat kernel). The dims are coalesced first, so contiguous
/// and uniformly strided inputs become flat.
pub(crate) fn geometry(
    dims: &[usize],
    offsets: &[usize],
    strides: &[&[isize]],
) -> (Vec<u32>, bool) {
    let plan = tensor_core::plan::Coalesced::new(dims, strides);
    let mut words = vec![plan.num_elements() as u32, plan.rank() as u32];
    words.extend(offsets.iter().map(|&o| o as u32));
    words.extend(plan.dims().iter().map(|&d| d as u32));
    for k in 0..strides.len() {
        words.extend(plan.strides(k).iter().map(|&s| s as i32 as u32));
    }
    (words, plan.is_flat())
}

/// `count` workgroups as `(x, y)` with `x <= limit`.
pub(crate) fn workgroups(count: usize, limit: u32) -> (u32, u32) {
    let groups = count.max(1) as u64;
    let x = groups.min(u64::from(limit));
    (x as u32, groups.div_ceil(x) as u32)
}

#[cfg(test)]
mod tests {
    use super::geometry;

    #[test]
    fn geometry_merges_what_strides_allow() {
        // Contiguous [2,3,4] and a broadcast scalar: flat.
        let (words, flat) = geometry(&[2, 3, 4], &[5, 0], &[&[12, 4, 1], &[0, 0, 0]]);
        assert!(flat);
        assert_eq!(words, vec![24, 1, 5, 0, 24, 1, 0]);
        // A transposed [3,2] cannot merge; the size-1 dim goes.
        let (words, flat) = geometry(&[3, 1, 2], &[0], &[&[1, 9, 3]]);
        assert!(!flat);
        assert_eq!(words, vec![6, 2, 0, 3, 2, 1, 3]);
        // A scalar is one flat element.
        assert_eq!(geometry(&[], &[7], &[&[]]), (vec![1, 1, 7, 1, 0], true));
    }
}
