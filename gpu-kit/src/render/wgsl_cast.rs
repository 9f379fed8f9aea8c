//! Casts in WGSL, with the steps the kit's [`Cast::between`] decides (the shared cast
//! semantics): float to int truncates and saturates with NaN to 0, ints wrap (the
//! narrowing store drops the high bits), anything to bool is "not zero" (NaN is not zero),
//! bool is 0 or 1, and ints become floats rounded once.

use polytensor_core::DTypeClass::{Bool, Float, Signed};
use polytensor_core::DataType;

use crate::body::Cast;
use crate::wgsl::{int_literal, Scalar, Storage};
use crate::Elem;

/// The WGSL expression converting the value `v` of element `from` into element `to`, or
/// `None` where WGSL holds neither as a computed value.
pub fn wgsl_cast(from: Elem, to: Elem, v: &str) -> Option<String> {
    spell(&Cast::between(from, to), from.dtype(), to.dtype(), v)
}

/// `cast` of the WGSL value `v` from `from` to `to`.
fn spell(cast: &Cast, from: DataType, to: DataType, v: &str) -> Option<String> {
    let target = Storage::of(to)?.value_type();
    if from.is_complex() || to.is_complex() {
        return Some(match cast {
            Cast::NonZero => format!(
                "select(0u, 1u, {v}.x != 0.0 || {v}.y != 0.0 || is_nan({v}.x) || is_nan({v}.y))"
            ),
            Cast::RealPart(then) => spell(then, from.real_dtype(), to, &format!("{v}.x"))?,
            Cast::ToComplex(then) => {
                format!("{target}({}, 0.0)", spell(then, from, to.real_dtype(), v)?)
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
