//! Elementwise kernels: one WGSL template for every op of one to three operands over any
//! strided (broadcast, transposed, offset) inputs, writing a contiguous output; the op is a
//! WGSL expression over `x`, `y`, `z` (an op's body rendered by the kit,
//! `polytensor_kernels_c::render::wgsl`; casts are written here), and the template carries
//! the helpers expressions call (NaN-aware float helpers, conversions, integer powers,
//! `fmod`, transcendentals).
//!
//! The geometry travels in a small storage buffer of `u32`: element count, rank, one
//! offset per input, the (merged) dims, then each input's strides (as `i32` bits, so
//! reversed views work).

use polytensor_core::DataType;
use polytensor_kernels_c::body::Cast;
use polytensor_kernels_c::Elem;

use super::transcendental::{POW_F32, TRANSCENDENTALS, TRANSCENDENTALS_F64};
use polytensor_kernels_c::wgsl::{float_helpers, instantiate};
use polytensor_kernels_c::wgsl::{Scalar, Ty};
use polytensor_kernels_c::wgsl::{Storage, CONVERSIONS};

/// Invocations per workgroup.
pub(crate) const WORKGROUP: u32 = 256;

/// The exact float remainder of C's `fmod` on float type `t` (`f32`, or `f64` in templates
/// with 64-bit integers), as `float_rem_<t>`: WGSL's `%` is `x - y * trunc(x / y)`, which
/// rounds, so the significands are reduced by shift-and-subtract instead.
fn remainder_helper(t: Scalar) -> String {
    let wide = t == Scalar::F64;
    let (suffix, bits) = if wide { ("lu", 52) } else { ("u", 23) };
    let hex = |v: u64| format!("{v:#x}{suffix}");
    let magnitude = if wide {
        u64::MAX >> 1
    } else {
        u64::from(u32::MAX >> 1)
    };
    instantiate(
        include_str!("wgsl/float_rem.wgsl"),
        &[
            ("T", &t),
            ("U", &t.bits()),
            ("S", &suffix),
            ("BITS", &bits),
            ("HIDDEN", &hex(1 << bits)),
            ("MANTISSA", &hex((1 << bits) - 1)),
            ("MAGNITUDE", &hex(magnitude)),
            ("SIGN_BIT", &hex(if wide { 1 << 63 } else { 1 << 31 })),
            (
                "INFINITY",
                &hex(if wide { 0x7ff << 52 } else { 0xff << 23 }),
            ),
            ("NAN", &hex(if wide { 0xfff << 51 } else { 0x1ff << 22 })),
        ],
    )
}

/// Integer powers by squaring for the signed and unsigned types `i` and `u` of one width
/// (wrapping; negative exponents give 0 except for bases 1 and -1), as `pow_<type>`.
fn pow_helpers(i: Scalar, u: Scalar) -> String {
    instantiate(include_str!("wgsl/int_pow.wgsl"), &[("I", &i), ("U", &u)])
}

/// 64-bit integer helpers, for templates on devices with SHADER_INT64: powers, and
/// magnitudes rounded once to floats of `p` significant bits (the magnitude is first cut
/// to 32 bits with a sticky bit, which keeps the rounding single).
fn int64_helpers() -> String {
    pow_helpers(Scalar::I64, Scalar::U64) + include_str!("wgsl/int64.wgsl")
}

/// The WGSL source of `out[i] = apply(in0[p0(i)], in1[p1(i)], ...)` with inputs and output
/// stored as `inputs` and `output`, `apply`'s body `expression` over `x`, `y`, `z`; `flat`
/// for geometry of one dim (see [`geometry`]).
pub(crate) fn map_source(
    inputs: &[Storage],
    output: Storage,
    expression: &str,
    flat: bool,
    offset: bool,
) -> String {
    const NAMES: [&str; 3] = ["x", "y", "z"];
    let n = inputs.len();
    let value = output.value_type();
    let types: Vec<Ty> = inputs
        .iter()
        .chain([&output])
        .map(|s| s.value_type())
        .collect();
    let float = if types.iter().any(|t| t.is_f64()) {
        Scalar::F64
    } else {
        Scalar::F32
    };
    let mut source = format!(
        "{}{}{CONVERSIONS}{}",
        float_helpers(float),
        remainder_helper(Scalar::F32),
        pow_helpers(Scalar::I32, Scalar::U32)
    );
    if float == Scalar::F32 {
        source += TRANSCENDENTALS;
    } else {
        source += TRANSCENDENTALS_F64;
    }
    if let Some(part) = types.iter().find_map(|t| t.part()) {
        source += &super::complex::helpers(part);
        // They build on the f32 functions, which f64 templates (casts) do not carry.
        if part == Scalar::F32 && float == Scalar::F32 {
            source += super::complex::TRANSCENDENTALS;
        }
    }
    // Helpers that need SHADER_F64 go only into the kernels that call them.
    if expression.contains("pow_f32(") {
        source += POW_F32;
    }
    if types.iter().any(|t| t.is_wide()) {
        source += &int64_helpers();
        if float == Scalar::F64 {
            source += &remainder_helper(Scalar::F64);
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
    // The output's offset follows the strides; a kernel for outputs at their buffer's start
    // stores from a constant 0.
    let base = if offset {
        format!("geometry[{}u + {}u * geometry[1]]", 2 + n, n + 1)
    } else {
        "0u".to_string()
    };
    let body = output.store_body("out", "geometry[0]", &base);
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

/// The WGSL expression converting `x` of `from` into `to`, with the steps the kit's
/// [`Cast::between`] decides (the shared cast semantics): float to int truncates and
/// saturates with NaN to 0, ints wrap (the narrowing store drops the high bits), anything
/// to bool is "not zero" (NaN is not zero), bool is 0 or 1, and ints become floats rounded
/// once. `None` unless both dtypes are computed on here.
pub(crate) fn cast_expression(from: DataType, to: DataType) -> Option<String> {
    let cast = Cast::between(Elem::of(from)?, Elem::of(to)?);
    spell_cast(&cast, from, to, "x")
}

/// `cast` of the WGSL value `v` from `from` to `to`.
fn spell_cast(cast: &Cast, from: DataType, to: DataType, v: &str) -> Option<String> {
    use polytensor_core::DTypeClass::{Bool, Float, Signed};
    let target = Storage::of(to)?.value_type();
    if from.is_complex() || to.is_complex() {
        return Some(match cast {
            Cast::NonZero => format!(
                "select(0u, 1u, {v}.x != 0.0 || {v}.y != 0.0 || is_nan({v}.x) || is_nan({v}.y))"
            ),
            Cast::RealPart(then) => spell_cast(then, from.real_dtype(), to, &format!("{v}.x"))?,
            Cast::ToComplex(then) => {
                format!(
                    "{target}({}, 0.0)",
                    spell_cast(then, from, to.real_dtype(), v)?
                )
            }
            _ => format!("{target}({v})"),
        });
    }
    let (s, t) = (real_type(from)?, real_type(to)?);
    let (wide_source, wide_target) = (s.is_wide(), t.is_wide());
    Some(match cast {
        Cast::NonZero if from.class() == Float => {
            format!("select(0u, 1u, {v} != 0.0 || is_nan({v}))")
        }
        Cast::NonZero => format!("select(0u, 1u, {v} != {s}(0))"),
        Cast::RoundToOdd => format!("f64_to_f32_odd({v})"),
        Cast::Saturate { lo, hi } => format!(
            // The bounds are exact in f32.
            "select(select(select({t}({v}), {}, {v} >= {hi}.0 + 1.0), {}, {v} < {lo}.0), \
             {t}(0), is_nan({v}))",
            int_literal(*hi, t),
            int_literal(*lo, t)
        ),
        Cast::IntToFloat { bits } => {
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
        // Floats, bool and integers to f64: WGSL's conversion.
        _ if from.class() == Float || from.class() == Bool || to.class() == Float => {
            format!("{t}({v})")
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

/// The scalar type real (or bool) `dtype` is computed as.
fn real_type(dtype: DataType) -> Option<Scalar> {
    Storage::of(dtype)?.value_type().real()
}

/// `value` as a WGSL expression of integer type `t` (WGSL's abstract integers are 64-bit
/// signed, so the extremes of i64 and u64 are built from smaller literals).
pub(crate) fn int_literal(value: i128, t: Scalar) -> String {
    if value < -i128::from(i64::MAX) {
        format!("{t}({} - 1)", -i128::from(i64::MAX))
    } else if value > i128::from(i64::MAX) {
        format!("~{t}(0)")
    } else {
        format!("{t}({value})")
    }
}

/// The geometry buffer's words for an output of `dims` read from inputs at `offsets` with
/// `strides` and written from element `out_offset` of its buffer: count, rank, one offset
/// per input, the dims, each input's strides, then the output's offset; and whether it has
/// one dim (a flat kernel). The dims are coalesced first, so contiguous and uniformly
/// strided inputs become flat.
pub(crate) fn geometry(
    dims: &[usize],
    offsets: &[usize],
    strides: &[&[isize]],
    out_offset: usize,
) -> (Vec<u32>, bool) {
    let plan = polytensor_core::plan::Coalesced::new(dims, strides);
    let mut words = vec![plan.num_elements() as u32, plan.rank() as u32];
    words.extend(offsets.iter().map(|&o| o as u32));
    words.extend(plan.dims().iter().map(|&d| d as u32));
    for k in 0..strides.len() {
        words.extend(plan.strides(k).iter().map(|&s| s as i32 as u32));
    }
    words.push(out_offset as u32);
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
        let (words, flat) = geometry(&[2, 3, 4], &[5, 0], &[&[12, 4, 1], &[0, 0, 0]], 9);
        assert!(flat);
        assert_eq!(words, vec![24, 1, 5, 0, 24, 1, 0, 9]);
        // A transposed [3,2] cannot merge; the size-1 dim goes.
        let (words, flat) = geometry(&[3, 1, 2], &[0], &[&[1, 9, 3]], 0);
        assert!(!flat);
        assert_eq!(words, vec![6, 2, 0, 3, 2, 1, 3, 0]);
        // A scalar is one flat element.
        assert_eq!(
            geometry(&[], &[7], &[&[]], 0),
            (vec![1, 1, 7, 1, 0, 0], true)
        );
    }
}
