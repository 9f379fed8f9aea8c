//! Reductions over any set of axes of a strided input, one template for every op and
//! element type: an op is an accumulator (`identity`, `lift`, `combine`) and a `store`.
//!
//! The template has four variants ([`Variant`]). `Tree`: one workgroup per output element;
//! each invocation folds a strided share of the reduced elements, then the workgroup
//! combines the 256 partial results in a tree in workgroup memory. `Serial`: one
//! invocation per output element, for reductions too short to feed a workgroup. Long
//! reductions into few outputs (a whole-tensor sum) would leave all but a few workgroups
//! idle, so they split: `Split` runs several workgroups per output, each writing a partial
//! accumulator, and `Gather` combines each output's partials. `combine` is associative and
//! commutative for every op (arg-reductions break ties on the index), so every variant
//! gives the sequential result up to float rounding.
//!
//! The geometry holds: outputs, reduced count, kept rank, reduced rank, input offset,
//! parts per output, the kept dims and strides, then the reduced dims and strides.

use polytensor_core::plan::Coalesced;
use polytensor_core::ReduceOp;
use polytensor_gpu_kit::wgsl::float_helpers;
use polytensor_gpu_kit::wgsl::Storage;
use polytensor_gpu_kit::wgsl::{Scalar, Ty};

/// Invocations per workgroup.
pub(crate) const WORKGROUP: u32 = 256;

/// Reductions this short run one invocation per output.
pub(crate) const SERIAL_BELOW: usize = 64;

/// How the reduced elements of one output are spread over invocations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Variant {
    /// One workgroup per output, partial results combined in a tree.
    Tree,
    /// One invocation per output.
    Serial,
    /// The first pass of a long reduction into few outputs: several workgroups per output
    /// (the geometry's `parts`), each writing its tree's result as a partial accumulator.
    Split,
    /// The second pass: one invocation per output combines its `parts` partials.
    Gather,
}

/// Reduced elements each workgroup of a split reduction folds at least.
const PART: usize = 16 * WORKGROUP as usize;

/// Workgroups a reduction aims to keep busy before it splits outputs into parts.
const BUSY: usize = 1024;

/// The variant for `outputs` reductions of `count` elements each, and the parts each
/// output is split into (1 unless the variant is [`Variant::Split`]).
pub(crate) fn plan(outputs: usize, count: usize) -> (Variant, usize) {
    if count < SERIAL_BELOW {
        return (Variant::Serial, 1);
    }
    let parts = (count / PART).min(BUSY / outputs.max(1));
    if parts > 1 {
        (Variant::Split, parts)
    } else {
        (Variant::Tree, 1)
    }
}

/// Bytes of one partial accumulator in a split's scratch buffer (the largest `Acc`: a
/// 64-bit value and a `u32` index, padded to 16).
pub(crate) const PARTIAL_BYTES: usize = 16;

/// The geometry words of a reduction of `kept`/`reduced` dims (with the input's strides
/// along them) starting at element `offset`, each output split into `parts`.
pub(crate) fn geometry(
    kept: &[usize],
    kept_strides: &[isize],
    reduced: &[usize],
    reduced_strides: &[isize],
    offset: usize,
    parts: usize,
) -> Vec<u32> {
    let bits = |s: &isize| *s as i32 as u32;
    // Merging dims keeps the row-major order of outputs and of reduced elements, so
    // arg-reductions' indices are unchanged.
    let (kept, [kept_strides]) = coalesced(kept, kept_strides);
    let (reduced, [reduced_strides]) = coalesced(reduced, reduced_strides);
    let mut words = vec![
        kept.iter().product::<usize>() as u32,
        reduced.iter().product::<usize>() as u32,
        kept.len() as u32,
        reduced.len() as u32,
        offset as u32,
        parts as u32,
    ];
    words.extend(kept.iter().map(|&d| d as u32));
    words.extend(kept_strides.iter().map(bits));
    words.extend(reduced.iter().map(|&d| d as u32));
    words.extend(reduced_strides.iter().map(bits));
    words
}

/// One operand's dims and strides, [`Coalesced`].
fn coalesced(dims: &[usize], strides: &[isize]) -> (Vec<usize>, [Vec<isize>; 1]) {
    let plan = Coalesced::new(dims, &[strides]);
    (plan.dims().to_vec(), [plan.strides(0).to_vec()])
}

/// The WGSL accumulator of `op` over values of type `t` whose dtype spans `lowest` to
/// `highest` (WGSL expressions): the type declarations and the `identity`, `lift`,
/// `combine` and `store` functions.
fn accumulator(op: ReduceOp, t: Ty, (lowest, highest): (&str, &str)) -> String {
    let zero = format!("{t}(0)");
    // An accumulator of the value type itself, storing `finish` of the result `a`.
    let plain = |identity: String, combine: &str, finish: &str| {
        format!(
            "alias Acc = {t};
fn identity() -> Acc {{ return {identity}; }}
fn lift(x: {t}, index: u32) -> Acc {{ return x; }}
fn combine(a: Acc, b: Acc) -> Acc {{ return {combine}; }}
fn store(j: u32, a: Acc, count: u32) {{ out[j] = {finish}; }}
"
        )
    };
    let real = match t {
        Ty::Complex(part) => {
            return match op {
                ReduceOp::Prod if part == Scalar::F32 => scaled_product(t, "cmul(a.m, b.m)"),
                ReduceOp::Prod => plain(format!("{t}(1.0, 0.0)"), "cmul(a, b)", "a"),
                ReduceOp::Mean => plain(zero, "a + b", &format!("a / {part}(count)")),
                _ => plain(zero, "a + b", "a"),
            };
        }
        Ty::Real(s) => s,
        // Raw words are moved, never reduced.
        Ty::Words(_) => return String::new(),
    };
    let float = real.is_float();
    match op {
        ReduceOp::Sum => plain(zero, "a + b", "a"),
        ReduceOp::Prod if real == Scalar::F32 => scaled_product(t, "a.m * b.m"),
        ReduceOp::Prod => plain(format!("{t}(1)"), "a * b", "a"),
        ReduceOp::Max if float => plain(lowest.into(), "float_max(a, b)", "a"),
        ReduceOp::Min if float => plain(highest.into(), "float_min(a, b)", "a"),
        ReduceOp::Max => plain(lowest.into(), "max(a, b)", "a"),
        ReduceOp::Min => plain(highest.into(), "min(a, b)", "a"),
        ReduceOp::Mean if float => plain(zero, "a + b", &format!("a / {t}(count)")),
        ReduceOp::Mean => integer_mean(real),
        ReduceOp::ArgMax | ReduceOp::ArgMin => {
            let wins = if op == ReduceOp::ArgMax { ">" } else { "<" };
            let nan = |v: &str| {
                if float {
                    format!("is_nan({v})")
                } else {
                    "false".into()
                }
            };
            format!(
                "struct Acc {{ value: {t}, index: u32 }}
const NONE = 0xffffffffu;
fn identity() -> Acc {{ return Acc({zero}, NONE); }}
fn lift(x: {t}, index: u32) -> Acc {{ return Acc(x, index); }}
// The first NaN, else the first extreme value; an empty side loses.
fn combine(a: Acc, b: Acc) -> Acc {{
    if (a.index == NONE) {{ return b; }}
    if (b.index == NONE) {{ return a; }}
    let an = {a_nan};
    let bn = {b_nan};
    var a_wins = a.value {wins} b.value;
    if (an || bn || a.value == b.value) {{
        a_wins = (an && !bn) || (an == bn && a.index < b.index);
    }}
    if (a_wins) {{ return a; }}
    return b;
}}
// An int64 index: the low word, then a zero high word.
fn store(j: u32, a: Acc, count: u32) {{
    out[2u * j] = select(a.index, 0u, a.index == NONE);
    out[2u * j + 1u] = 0u;
}}
",
                a_nan = nan("a.value"),
                b_nan = nan("b.value"),
            )
        }
    }
}

/// The accumulator of an f32 or complex64 product: a significand scaled into [1, 2) by a
/// power of two and that power, so that partial products neither overflow nor underflow
/// where the whole product (and the f64 reference) does not; the result is scaled back
/// once. `multiply` combines the significands `a.m` and `b.m`.
fn scaled_product(t: Ty, multiply: &str) -> String {
    let (one, magnitude) = if t == Ty::Real(Scalar::F32) {
        ("1.0", "abs(a.m)")
    } else {
        ("vec2<f32>(1.0, 0.0)", "max(abs(a.m.x), abs(a.m.y))")
    };
    format!(
        "struct Acc {{ m: {t}, e: i32 }}
// a with its significand's largest part scaled into [1, 2); zeros, infinities and NaNs
// stay as they are.
fn normalized(a: Acc) -> Acc {{
    let big = bitcast<u32>({magnitude});
    if (big == 0u || big >= 0x7f800000u) {{
        return a;
    }}
    var k = i32(big >> 23u) - 127;
    if (k == -127) {{
        // A subnormal: its top bit, 31 - clz, stands for 2^(31 - clz - 149).
        k = -118 - i32(countLeadingZeros(big));
    }}
    let first = clamp(k, -126, 126);
    return Acc(a.m * pow2(-first) * pow2(first - k), a.e + k);
}}
fn identity() -> Acc {{ return Acc({one}, 0); }}
fn lift(x: {t}, index: u32) -> Acc {{ return normalized(Acc(x, 0)); }}
fn combine(a: Acc, b: Acc) -> Acc {{ return normalized(Acc({multiply}, a.e + b.e)); }}
// m 2^e in at most three scalings, each within f32's exponents: it rounds once.
fn store(j: u32, a: Acc, count: u32) {{
    var m = a.m;
    var e = clamp(a.e, -400, 400);
    for (var step = 0; step < 3 && e != 0; step++) {{
        let k = clamp(e, -126, 127);
        m = m * pow2(k);
        e -= k;
    }}
    out[j] = m;
}}
"
    )
}

/// The accumulator of an integer mean: the exact sum in two words of the value's width
/// (`u32` for 32-bit and narrower values, `u64` for 64-bit ones; the high word carries the
/// sign of signed values), divided by the count truncating toward zero, and wrapped to
/// the value type, as the shared semantics define it.
fn integer_mean(t: Scalar) -> String {
    let signed = t.is_signed_integer();
    let (w, bits) = if t.is_wide() {
        ("u64", 64)
    } else {
        ("u32", 32)
    };
    let top = bits - 1;
    let (extend, negative) = if signed {
        (
            format!("select({w}(0), ~{w}(0), x < 0)"),
            format!("(a.y >> {top}u) == {w}(1)"),
        )
    } else {
        (format!("{w}(0)"), "false".to_string())
    };
    format!(
        "alias Acc = vec2<{w}>;
fn identity() -> Acc {{ return Acc({w}(0), {w}(0)); }}
fn lift(x: {t}, index: u32) -> Acc {{ return Acc(bitcast<{w}>(x), {extend}); }}
fn combine(a: Acc, b: Acc) -> Acc {{
    let low = a.x + b.x;
    return Acc(low, a.y + b.y + select({w}(0), {w}(1), low < a.x));
}}
fn negate(a: Acc) -> Acc {{
    return combine(Acc(~a.x, ~a.y), Acc({w}(1), {w}(0)));
}}
// The low word of the double-width `a / d`, by long division.
fn quotient(a: Acc, d: u32) -> {w} {{
    let divisor = {w}(d);
    var q = {w}(0);
    var r = {w}(0);
    for (var bit = {last}i; bit >= 0; bit--) {{
        let word = select(a.x, a.y, bit >= {bits});
        let carry = r >> {top}u;
        r = (r << 1u) | ((word >> (u32(bit) & {top}u)) & {w}(1));
        if (carry == {w}(1) || r >= divisor) {{
            r -= divisor;
            if (bit < {bits}) {{
                q |= {w}(1) << u32(bit);
            }}
        }}
    }}
    return q;
}}
fn store(j: u32, a: Acc, count: u32) {{
    if (count == 0u) {{
        out[j] = {t}(0);
        return;
    }}
    let negative = {negative};
    let q = quotient(select(a, negate(a), negative), count);
    out[j] = bitcast<{t}>(select(q, {w}(0) - q, negative));
}}
",
        last = 2 * bits - 1
    )
}

/// The WGSL source of reduction `op` of an input stored as `input` whose dtype spans
/// `bounds`, into words of the input's value type (`u32` pairs, an int64, for
/// arg-reductions).
pub(crate) fn source(
    op: ReduceOp,
    input: Storage,
    bounds: (&str, &str),
    variant: Variant,
) -> String {
    let t = input.value_type();
    let accumulator = accumulator(op, t, bounds);
    let output = if matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin) {
        Ty::Real(Scalar::U32)
    } else {
        t
    };
    let load = input.load("x", "base + reduced_position(r)");
    // A split's first pass writes partial accumulators; its second reads them.
    let input_type = if variant == Variant::Gather {
        "Acc".to_string()
    } else {
        input.array_type().to_string()
    };
    let output_binding = if variant == Variant::Split {
        // The partials take the output's binding; `store` is not called in this pass but
        // must still compile, so `out` becomes a private dummy.
        format!(
            "var<storage, read_write> partials: array<Acc>;\nvar<private> out: array<{output}, 1>;"
        )
    } else {
        format!("var<storage, read_write> out: array<{output}>;")
    };
    let mut head = format!(
        r#"
{helpers}
@group(0) @binding(0) var<storage, read> geometry: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<{input_type}>;
@group(0) @binding(2) {output_binding}

{accumulator}
// Element position of output `j`'s first input (row-major over the kept dims).
fn kept_position(j: u32) -> i32 {{
    let rank = geometry[2];
    var position = i32(geometry[4]);
    var rest = j;
    for (var d = i32(rank) - 1; d >= 0; d--) {{
        let dim = geometry[6u + u32(d)];
        position += i32(rest % dim) * bitcast<i32>(geometry[6u + rank + u32(d)]);
        rest = rest / dim;
    }}
    return position;
}}

// Element offset of reduced element `r` (row-major over the reduced dims).
fn reduced_position(r: u32) -> i32 {{
    let kept = geometry[2];
    let rank = geometry[3];
    let dims = 6u + 2u * kept;
    if (rank == 1u) {{
        return i32(r) * bitcast<i32>(geometry[dims + 1u]);
    }}
    var position = 0;
    var rest = r;
    for (var d = i32(rank) - 1; d >= 0; d--) {{
        let dim = geometry[dims + u32(d)];
        position += i32(rest % dim) * bitcast<i32>(geometry[dims + rank + u32(d)]);
        rest = rest / dim;
    }}
    return position;
}}
"#,
        helpers = float_helpers(if t.is_f64() { Scalar::F64 } else { Scalar::F32 })
            + &t.part()
                .map_or(String::new(), polytensor_gpu_kit::wgsl::complex_helpers),
    );
    if variant != Variant::Gather {
        head += &format!(
            r#"
// The fold of reduced elements `first`, `first + step`, ... of output `j`.
fn fold(j: u32, first: u32, step: u32) -> Acc {{
    let base = kept_position(j);
    var acc = identity();
    for (var r = first; r < geometry[1]; r += step) {{
        acc = combine(acc, lift({load}, r));
    }}
    return acc;
}}
"#
        );
    }
    let main = match variant {
        Variant::Serial => format!(
            r#"
@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {{
    let j = id.x + id.y * groups.x * {WORKGROUP}u;
    if (j < geometry[0]) {{
        store(j, fold(j, 0u, 1u), geometry[1]);
    }}
}}
"#
        ),
        Variant::Gather => format!(
            r#"
@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {{
    let j = id.x + id.y * groups.x * {WORKGROUP}u;
    let parts = geometry[5];
    if (j < geometry[0]) {{
        var acc = identity();
        for (var q = 0u; q < parts; q++) {{
            acc = combine(acc, x[j * parts + q]);
        }}
        store(j, acc, geometry[1]);
    }}
}}
"#
        ),
        Variant::Tree | Variant::Split => format!(
            r#"
var<workgroup> partial: array<Acc, {WORKGROUP}>;

@compute @workgroup_size({WORKGROUP})
fn main(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {{
    // Workgroup g folds part g % parts of output g / parts.
    let g = group.x + group.y * groups.x;
    let parts = geometry[5];
    let j = g / parts;
    if (j >= geometry[0]) {{
        return;
    }}
    partial[lane] = fold(j, (g % parts) * {WORKGROUP}u + lane, parts * {WORKGROUP}u);
    workgroupBarrier();
    for (var width = {half}u; width > 0u; width >>= 1u) {{
        if (lane < width) {{
            partial[lane] = combine(partial[lane], partial[lane + width]);
        }}
        workgroupBarrier();
    }}
    if (lane == 0u) {{
        {finish}
    }}
}}
"#,
            half = WORKGROUP / 2,
            finish = if variant == Variant::Split {
                "partials[g] = partial[0];"
            } else {
                "store(j, partial[0], geometry[1]);"
            }
        ),
    };
    head + &main
}
