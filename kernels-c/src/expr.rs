//! The C expression of every elementwise op and cast over computed values `x`, `y`, `z`,
//! following DESIGN.md's shared semantics: integers wrap (computed in an unsigned type),
//! `x / 0 = -1` (all bits set), `x % 0 = x`, `MIN / -1 = MIN`, `MIN % -1 = 0`; float
//! `max`/`min` propagate NaN; casts from float truncate and saturate with NaN to 0.
//! `None` where an op is not defined for the element type.

use polytensor_core::{BinaryOp, DTypeClass, UnaryOp};

use crate::{Elem, Real};

/// The expression of unary `op` on `x` of element type `e` (its result has type
/// `op.output_dtype`'s element: `abs` of complex is real).
pub fn unary(op: UnaryOp, e: Elem) -> Option<String> {
    let t = e.value();
    if e == Elem::Bool {
        return (op == UnaryOp::Not).then(|| "(u8)(x == 0)".into());
    }
    if let Some(real) = e.real() {
        let r = real.name();
        if e.is_complex() {
            return complex_unary(op, t);
        }
        let one = real.literal(1.0);
        return Some(match op {
            UnaryOp::Neg => "-x".into(),
            UnaryOp::Abs => format!("fabs_{r}(x)"),
            UnaryOp::Sign => format!("sign_{r}(x)"),
            UnaryOp::Sqrt => format!("sqrt_{r}(x)"),
            UnaryOp::Rsqrt => format!("{one} / sqrt_{r}(x)"),
            UnaryOp::Exp => format!("exp_{r}(x)"),
            UnaryOp::Log => format!("log_{r}(x)"),
            UnaryOp::Sin => format!("sin_{r}(x)"),
            UnaryOp::Cos => format!("cos_{r}(x)"),
            UnaryOp::Tanh => format!("tanh_{r}(x)"),
            UnaryOp::Sigmoid => format!("sigmoid_{r}(x)"),
            UnaryOp::Relu => format!("relu_{r}(x)"),
            UnaryOp::Floor => format!("floor_{r}(x)"),
            UnaryOp::Ceil => format!("ceil_{r}(x)"),
            // rint rounds half to even in the default rounding mode.
            UnaryOp::Round => format!("rint_{r}(x)"),
            UnaryOp::Recip => format!("{one} / x"),
            UnaryOp::Square => "x * x".into(),
            UnaryOp::Not => return None,
        });
    }
    let w = e.wrapping();
    let signed = e.is_signed();
    Some(match op {
        UnaryOp::Neg if signed => format!("({t})(({w})0 - ({w})x)"),
        UnaryOp::Abs if signed => format!("(x < 0 ? ({t})(({w})0 - ({w})x) : x)"),
        UnaryOp::Relu if signed => format!("(x > 0 ? x : ({t})0)"),
        UnaryOp::Abs | UnaryOp::Relu => "x".into(),
        UnaryOp::Sign if signed => format!("({t})((x > 0) - (x < 0))"),
        UnaryOp::Sign => format!("({t})(x != 0)"),
        UnaryOp::Square => format!("({t})(({w})x * ({w})x)"),
        _ => return None,
    })
}

/// [`unary`] on complex `x` of type `c`.
fn complex_unary(op: UnaryOp, c: &str) -> Option<String> {
    Some(match op {
        UnaryOp::Neg => format!("neg_{c}(x)"),
        UnaryOp::Abs => format!("abs_{c}(x)"),
        UnaryOp::Sign => format!("sign_{c}(x)"),
        UnaryOp::Square => format!("mul_{c}(x, x)"),
        UnaryOp::Recip => format!("recip_{c}(x)"),
        UnaryOp::Sqrt => format!("sqrt_{c}(x)"),
        UnaryOp::Rsqrt => format!("recip_{c}(sqrt_{c}(x))"),
        UnaryOp::Exp => format!("exp_{c}(x)"),
        UnaryOp::Log => format!("log_{c}(x)"),
        UnaryOp::Sin => format!("sin_{c}(x)"),
        UnaryOp::Cos => format!("cos_{c}(x)"),
        UnaryOp::Tanh => format!("tanh_{c}(x)"),
        UnaryOp::Sigmoid => format!("sigmoid_{c}(x)"),
        _ => return None,
    })
}

/// The expression of binary `op` on `x` and `y` of element type `e` (comparisons give a
/// `u8` 0 or 1).
pub fn binary(op: BinaryOp, e: Elem) -> Option<String> {
    let t = e.value();
    if op.is_comparison() {
        return Some(compare(op, e));
    }
    if e == Elem::Bool {
        return Some(match op {
            BinaryOp::And => "(u8)(x & y)".into(),
            BinaryOp::Or => "(u8)(x | y)".into(),
            BinaryOp::Xor => "(u8)(x ^ y)".into(),
            _ => return None,
        });
    }
    if e.is_complex() {
        return Some(match op {
            BinaryOp::Add => format!("add_{t}(x, y)"),
            BinaryOp::Sub => format!("sub_{t}(x, y)"),
            BinaryOp::Mul => format!("mul_{t}(x, y)"),
            BinaryOp::Div => format!("div_{t}(x, y)"),
            BinaryOp::Pow => format!("pow_{t}(x, y)"),
            _ => return None,
        });
    }
    if let Some(real) = e.real() {
        let r = real.name();
        return Some(match op {
            BinaryOp::Add => "x + y".into(),
            BinaryOp::Sub => "x - y".into(),
            BinaryOp::Mul => "x * y".into(),
            BinaryOp::Div => "x / y".into(),
            BinaryOp::Rem => format!("fmod_{r}(x, y)"),
            BinaryOp::Pow => format!("pow_{r}(x, y)"),
            BinaryOp::Max => format!("max_nan_{r}(x, y)"),
            BinaryOp::Min => format!("min_nan_{r}(x, y)"),
            _ => return None,
        });
    }
    let w = e.wrapping();
    let signed = e.is_signed();
    Some(match op {
        BinaryOp::Add => format!("({t})(({w})x + ({w})y)"),
        BinaryOp::Sub => format!("({t})(({w})x - ({w})y)"),
        BinaryOp::Mul => format!("({t})(({w})x * ({w})y)"),
        BinaryOp::Div if signed => {
            format!("(y == 0 ? ({t})-1 : y == -1 ? ({t})(({w})0 - ({w})x) : ({t})(x / y))")
        }
        BinaryOp::Div => format!("(y == 0 ? ({t})~({w})0 : ({t})(x / y))"),
        BinaryOp::Rem if signed => format!("(y == 0 ? x : y == -1 ? ({t})0 : ({t})(x % y))"),
        BinaryOp::Rem => format!("(y == 0 ? x : ({t})(x % y))"),
        BinaryOp::Pow if signed => format!("({t})pow_i64((i64)x, (i64)y)"),
        BinaryOp::Pow => format!("({t})pow_u64((u64)x, (u64)y)"),
        BinaryOp::Max => "(x > y ? x : y)".into(),
        BinaryOp::Min => "(x < y ? x : y)".into(),
        _ => return None,
    })
}

/// A comparison as a `u8` 0 or 1 (C's comparisons are false on NaN, `!=` true).
fn compare(op: BinaryOp, e: Elem) -> String {
    if e.is_complex() {
        let t = e.value();
        return match op {
            BinaryOp::Ne => format!("(u8)!eq_{t}(x, y)"),
            _ => format!("(u8)eq_{t}(x, y)"),
        };
    }
    let symbol = match op {
        BinaryOp::Eq => "==",
        BinaryOp::Ne => "!=",
        BinaryOp::Lt => "<",
        BinaryOp::Le => "<=",
        BinaryOp::Gt => ">",
        _ => ">=",
    };
    format!("(u8)(x {symbol} y)")
}

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
    fn every_defined_op_has_an_expression() {
        use polytensor_core::{DataType, Op};
        for &dtype in DataType::ALL {
            let Some(e) = Elem::of(dtype) else { continue };
            for &op in UnaryOp::ALL {
                if Op::Unary(op).is_defined_for(dtype) {
                    assert!(unary(op, e).is_some(), "{op} on {dtype}");
                }
            }
            for &op in BinaryOp::ALL {
                if Op::Binary(op).is_defined_for(dtype) {
                    assert!(binary(op, e).is_some(), "{op} on {dtype}");
                }
            }
        }
    }

    #[test]
    fn casts_name_the_single_rounding_helpers() {
        assert_eq!(cast(Elem::F64, Elem::F16), "f64_to_f32_odd(x)");
        assert_eq!(cast(Elem::I64, Elem::BF16), "i64_to_f32_bits((i64)x, 8)");
        assert!(cast(Elem::F32, Elem::U8).contains("256.0f"));
        assert_eq!(cast(Elem::C128, Elem::Bool), "(u8)(x.x != 0 || x.y != 0)");
    }
}
