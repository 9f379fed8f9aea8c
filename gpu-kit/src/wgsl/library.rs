//! The WGSL helper library: the functions kernels call that WGSL lacks or does not promise
//! to the shared semantics (NaN-aware float helpers, f16/bf16 conversions, exact float
//! remainders, integer powers, 64-bit integer conversions, transcendentals within the
//! conformance bounds, complex arithmetic). WGSL has no overloading and no preprocessor,
//! so each helper group is a template written out for one type ([`instantiate`]), and a
//! kernel carries exactly the groups its text calls ([`helpers_for`]): pipelines compile
//! faster without the rest.
//!
//! The transcendentals (`lib/transcendental_f32.wgsl`) are the CPU backend's polynomials
//! (Cephes) in plain multiply-adds, since WGSL only promises `exp` to `3 + 2|x|` ulp, `log`
//! to an absolute 2^-21 and `sin`/`cos` to an absolute 2^-11 on [-pi, pi]; sin and cos
//! reduce every |x| > pi/4 by Payne-Hanek, as a three-part pi/4 would need a fused
//! multiply-add WGSL does not guarantee. f16 and bf16 use them through f32; `pow` of those
//! is computed in f64 (`lib/pow_f32.wgsl`, adapters with SHADER_F64 only). The wgpu
//! backend's `tests/it/transcendentals.rs` checks the bounds over every exponent.

use super::{float_helpers, instantiate, Scalar, CONVERSIONS};

/// One helper group: the calls that need it and its text.
struct Group {
    /// Call prefixes (`name(`) that need the group.
    calls: &'static [&'static str],
    /// The group's WGSL, for the kernel's float type.
    text: fn(Scalar) -> String,
}

/// Every group, in the order they are written out (WGSL declarations may come in any
/// order, so this is only for readable shaders).
const GROUPS: &[Group] = &[
    Group {
        calls: &[
            "pow2(",
            "exponent_f32(",
            "is_nan(",
            "float_max(",
            "float_min(",
            "round_even(",
            "f64_to_f32_odd(",
        ],
        text: float_helpers,
    },
    Group {
        calls: &["f32_to_f16(", "f32_to_bf16(", "int_to_float("],
        text: |_| CONVERSIONS.to_string(),
    },
    Group {
        calls: &["float_rem_f32("],
        text: |_| remainder(Scalar::F32),
    },
    Group {
        calls: &["float_rem_f64("],
        text: |_| remainder(Scalar::F64),
    },
    Group {
        calls: &["pow_i32(", "pow_u32("],
        text: |_| int_powers(Scalar::I32, Scalar::U32),
    },
    Group {
        calls: &["pow_i64(", "pow_u64("],
        text: |_| int_powers(Scalar::I64, Scalar::U64),
    },
    Group {
        calls: &["int64_to_float("],
        text: |_| include_str!("lib/int64.wgsl").to_string(),
    },
    Group {
        calls: &[
            "exp_f32(",
            "log_f32(",
            "tanh_f32(",
            "sigmoid_f32(",
            "sin_cos_f32(",
            "erf_f32(",
            "erfc_f32(",
        ],
        text: |_| include_str!("lib/transcendental_f32.wgsl").to_string(),
    },
    Group {
        calls: &["exp_f64(", "log_f64(", "tanh_f64(", "sigmoid_f64("],
        text: |_| include_str!("lib/transcendental_f64.wgsl").to_string(),
    },
    Group {
        calls: &["pow_f32("],
        text: |_| include_str!("lib/pow_f32.wgsl").to_string(),
    },
    Group {
        calls: &["cmul(", "cdiv(", "cabs(", "csqrt("],
        text: complex_helpers,
    },
    Group {
        calls: &[
            "cexp(",
            "clog(",
            "csin(",
            "ccos(",
            "ctanh(",
            "atan2_f32(",
            "sinh_f32(",
            "cosh_f32(",
        ],
        text: |_| include_str!("lib/complex_transcendental.wgsl").to_string(),
    },
];

/// The helper groups `text` calls, directly or through other helpers, written out for
/// float type `float` (`f32`, or `f64` in kernels that compute on f64 or complex128; the
/// float helpers and complex helpers are instantiated for it).
pub fn helpers_for(float: Scalar, text: &str) -> String {
    let mut included = vec![false; GROUPS.len()];
    let mut helpers = String::new();
    // Helpers call helpers: add groups until nothing new is called.
    loop {
        let called = |g: &Group| g.calls.iter().any(|c| calls(text, c) || calls(&helpers, c));
        let Some(next) = (0..GROUPS.len()).find(|&k| !included[k] && called(&GROUPS[k])) else {
            return helpers;
        };
        included[next] = true;
        helpers += &(GROUPS[next].text)(float);
    }
}

/// Whether `text` calls `call` (a `name(` not preceded by an identifier character, so
/// that `cexp(` does not count as a call of `exp(`).
fn calls(text: &str, call: &str) -> bool {
    text.match_indices(call).any(|(at, _)| {
        !text[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The exact float remainder of C's `fmod` on float type `t`, as `float_rem_<t>`: WGSL's
/// `%` is `x - y * trunc(x / y)`, which rounds, so the significands are reduced by
/// shift-and-subtract instead.
fn remainder(t: Scalar) -> String {
    let wide = t == Scalar::F64;
    let (suffix, bits) = if wide { ("lu", 52) } else { ("u", 23) };
    let hex = |v: u64| format!("{v:#x}{suffix}");
    let magnitude = if wide {
        u64::MAX >> 1
    } else {
        u64::from(u32::MAX >> 1)
    };
    instantiate(
        include_str!("lib/float_rem.wgsl"),
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
fn int_powers(i: Scalar, u: Scalar) -> String {
    instantiate(include_str!("lib/int_pow.wgsl"), &[("I", &i), ("U", &u)])
}

/// The complex helpers `cmul`, `cdiv` (Smith's, which neither overflows nor underflows
/// where the quotient does not), `cabs` (scaled, likewise) and `csqrt` on `vec2<f>`:
/// complex64 and complex128 are `vec2` of their part type (the host's layout, real part
/// first), added and negated as vectors.
pub fn complex_helpers(f: Scalar) -> String {
    let (top, one) = if f.is_wide() { (63, "1lu") } else { (31, "1u") };
    instantiate(
        include_str!("lib/complex.wgsl"),
        &[("F", &f), ("BITS", &f.bits()), ("TOP", &top), ("ONE", &one)],
    )
}

/// `value` as a WGSL expression of integer type `t` (WGSL's abstract integers are 64-bit
/// signed, so the extremes of i64 and u64 are built from smaller literals).
pub fn int_literal(value: i128, t: impl std::fmt::Display) -> String {
    if value < -i128::from(i64::MAX) {
        format!("{t}({} - 1)", -i128::from(i64::MAX))
    } else if value > i128::from(i64::MAX) {
        format!("~{t}(0)")
    } else {
        format!("{t}({value})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_carries_the_helpers_it_calls_and_theirs() {
        // exp_f32 calls is_nan and pow2: the float helpers come along.
        let text = helpers_for(Scalar::F32, "return exp_f32(x);");
        assert!(text.contains("fn exp_f32("));
        assert!(text.contains("fn is_nan(v: f32)"));
        assert!(!text.contains("fn pow_i32("));
        // A complex exponential needs the f32 transcendentals it is built on.
        let text = helpers_for(Scalar::F32, "return cexp(x);");
        assert!(text.contains("fn cexp(") && text.contains("fn exp_f32("));
        // Nothing called, nothing carried; a longer name is not a call of a shorter one.
        assert_eq!(helpers_for(Scalar::F32, "return x + y;"), "");
        assert!(!calls("cexp(x)", "exp("));
    }
}
