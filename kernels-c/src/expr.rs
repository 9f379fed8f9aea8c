//! The C expression of every cast and of `where` over computed values `x`, `y`, `z`,
//! following DESIGN.md's shared semantics: casts from float truncate and saturate with NaN
//! to 0, ints wrap. (The ops' bodies are [`crate::body`]'s, rendered by
//! [`crate::render`].)

use polytensor_core::DTypeClass;

use crate::{Elem, Real};

/// `where(cond, a, b)` on raw moves: `x` the condition, `y` and `z` the values.
pub const SELECT: &str = "(x != 0 ? y : z)";

/// The expression converting `x` of element `from` into element `to` (its computed type):
/// float to int truncates and saturates with NaN to 0, ints wrap (C's conversion to a
/// narrower type keeps the low bits), anything to bool is "not zero" (NaN is not zero),
/// ints and f64 reach f16 and bf16 with one rounding; complex to real takes the real part.
pub fn cast(from: Elem, to: Elem) -> String {
    match (from.is_complex(), to.is_complex()) {
        (false, false) => real_cast(from, to, "x"),
        (true, true) => {
            let (part, make) = complex_parts(to);
            format!("{make}(({part})x.x, ({part})x.y)")
        }
        (true, false) if to == Elem::Bool => "(u8)(x.x != 0 || x.y != 0)".into(),
        (true, false) => real_cast(part_elem(from), to, "x.x"),
        (false, true) => {
            let (part, make) = complex_parts(to);
            let real = real_cast(from, part_elem(to), "x");
            format!("{make}({real}, ({part})0)")
        }
    }
}

/// The part type and constructor macro of a complex element.
fn complex_parts(c: Elem) -> (&'static str, &'static str) {
    if c == Elem::C128 {
        ("f64", "MAKE_C128")
    } else {
        ("f32", "MAKE_C64")
    }
}

/// The real element of a complex one's parts.
fn part_elem(c: Elem) -> Elem {
    if c == Elem::C128 {
        Elem::F64
    } else {
        Elem::F32
    }
}

/// [`cast`] between real elements (and bool) of the value `v`.
fn real_cast(from: Elem, to: Elem, v: &str) -> String {
    let t = to.value();
    let narrow_bits = match to {
        Elem::F16 => Some(11),
        Elem::BF16 => Some(8),
        _ => None,
    };
    match (from.class(), to.class()) {
        (_, DTypeClass::Bool) => format!("(u8)({v} != 0)"),
        (DTypeClass::Bool, _) => format!("({t}){v}"),
        (DTypeClass::Float, DTypeClass::Float) => {
            if from.real() == Some(Real::F64) && narrow_bits.is_some() {
                format!("f64_to_f32_odd({v})")
            } else {
                format!("({t}){v}")
            }
        }
        (DTypeClass::Float, _) => {
            let real = from.real().expect("a float element");
            let (lo, hi) = to.int_bounds().expect("an integer element");
            let bits = to.bits().expect("an integer element");
            let signed = to.is_signed();
            let low = if signed {
                -(2f64.powi(bits as i32 - 1))
            } else {
                0.0
            };
            let high = if signed {
                2f64.powi(bits as i32 - 1)
            } else {
                2f64.powi(bits as i32)
            };
            format!(
                "({v} != {v} ? ({t})0 : {v} >= {} ? {hi} : {v} < {} ? {lo} : ({t}){v})",
                real.literal(high),
                real.literal(low)
            )
        }
        (_, DTypeClass::Float) => match narrow_bits {
            Some(p) if from.is_signed() => format!("i64_to_f32_bits((i64){v}, {p})"),
            Some(p) => format!("u64_to_f32_bits((u64){v}, {p})"),
            None => format!("({t}){v}"),
        },
        // Between integers: C sign- or zero-extends by the source, or keeps the low bits.
        _ => format!("({t}){v}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_name_the_single_rounding_helpers() {
        assert_eq!(cast(Elem::F64, Elem::F16), "f64_to_f32_odd(x)");
        assert_eq!(cast(Elem::I64, Elem::BF16), "i64_to_f32_bits((i64)x, 8)");
        assert!(cast(Elem::F32, Elem::U8).contains("256.0f"));
        assert_eq!(cast(Elem::C128, Elem::Bool), "(u8)(x.x != 0 || x.y != 0)");
    }
}
