//! The dialect layers: an op's [`Expr`] rendered as C (OpenCL C and CUDA C, over the names
//! of the dialect headers and `c/*.h`) or as WGSL (over wgpu's `kernels/wgsl/*.wgsl`).
//! Each keeps the node's promise in its language: C computes integers through their
//! unsigned type (wrapping, never undefined) and guards `MIN / -1`; WGSL wraps and defines
//! `MIN / -1` itself, but may assume floats are never NaN, so its float comparisons test
//! NaN on the bits. A function the dialect's library lacks for an element type renders as
//! `None`: the device cannot run that op on that dtype, which is what its capabilities
//! say.

use crate::body::{part, Arith, Cast, Cmp, Expr, Func};
use crate::Elem;

mod kernel;
mod kernel_c;
mod kernel_wgsl;
mod wgsl_cast;

pub use kernel_c::c_kernel;
pub use kernel_wgsl::{wgsl_invocations, wgsl_kernel, wgsl_storage, WGSL_GROUP};
pub use wgsl_cast::wgsl_cast;

/// The names of an elementwise kernel's operands.
const OPERANDS: [&str; 3] = ["x", "y", "z"];

impl Cmp {
    /// The operator of both languages.
    pub fn symbol(self) -> &'static str {
        match self {
            Cmp::Eq => "==",
            Cmp::Ne => "!=",
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
        }
    }
}

impl Func {
    /// The name the helper libraries give it, before the type suffix (`exp` of
    /// `exp_f32`, `exp_c64`): C's names, which WGSL's library follows where it has the
    /// function.
    fn base_name(self) -> &'static str {
        match self {
            Func::Abs => "abs",
            Func::Sign => "sign",
            Func::Sqrt => "sqrt",
            Func::Recip => "recip",
            Func::Exp => "exp",
            Func::Log => "log",
            Func::Sin => "sin",
            Func::Cos => "cos",
            Func::Tanh => "tanh",
            Func::Sigmoid => "sigmoid",
            Func::Relu => "relu",
            Func::Floor => "floor",
            Func::Ceil => "ceil",
            // rint rounds half to even in the default rounding mode.
            Func::RoundEven => "rint",
            Func::Rem => "fmod",
            Func::Pow => "pow",
            Func::MaxNan => "max_nan",
            Func::MinNan => "min_nan",
            Func::Erf => "erf",
            Func::Erfc => "erfc",
        }
    }
}

impl Arith {
    /// The operator of both languages.
    fn symbol(self) -> &'static str {
        match self {
            Arith::Add => "+",
            Arith::Sub => "-",
            Arith::Mul => "*",
            Arith::Div => "/",
            Arith::Rem => "%",
            Arith::And => "&",
            Arith::Or => "|",
            Arith::Xor => "^",
        }
    }
}

/// `expr` over operands of element `e` in C.
pub fn c(expr: &Expr, e: Elem) -> Option<String> {
    c_with(expr, e, &OPERANDS.map(String::from))
}

/// `expr` in C with operand `k` spelled `operands[k]`.
pub fn c_with(expr: &Expr, e: Elem, operands: &[String]) -> Option<String> {
    let t = e.value();
    let w = e.wrapping();
    let go = |x: &Expr| c_with(x, e, operands);
    let signed = e.is_signed();
    Some(match expr {
        Expr::Arg(k) => operands.get(*k)?.clone(),
        Expr::Lowest | Expr::Highest if !e.is_float() => {
            let (lo, hi) = e.int_bounds()?;
            if *expr == Expr::Lowest {
                lo
            } else {
                hi
            }
        }
        Expr::Lowest => match e {
            Elem::F64 => "F64_FROM_BITS((u64)0xfff0000000000000UL)".into(),
            _ => "F32_FROM_BITS(0xff800000u)".into(),
        },
        Expr::Highest => match e {
            Elem::F64 => "F64_FROM_BITS((u64)0x7ff0000000000000UL)".into(),
            _ => "F32_FROM_BITS(0x7f800000u)".into(),
        },
        Expr::Local(name) => (*name).into(),
        Expr::Num(n) if e.is_complex() => {
            let part = e.real()?;
            let make = complex_maker(e);
            format!("{make}({}, {})", part.literal(*n as f64), part.literal(0.0))
        }
        Expr::Num(n) => match e.real() {
            Some(real) => real.literal(*n as f64),
            None => format!("({t}){n}"),
        },
        Expr::AllOnes if signed => format!("({t})-1"),
        Expr::AllOnes => format!("({t})~({w})0"),
        Expr::Neg(a) if e.is_complex() => format!("neg_{t}({})", go(a)?),
        Expr::Neg(a) if e.is_float() => format!("(-{})", go(a)?),
        Expr::Neg(a) => format!("({t})(({w})0 - ({w}){})", go(a)?),
        Expr::Arith(op, a, b) => {
            let (a, b) = (go(a)?, go(b)?);
            let s = op.symbol();
            if e.is_complex() {
                let name = match op {
                    Arith::Add => "add",
                    Arith::Sub => "sub",
                    Arith::Mul => "mul",
                    Arith::Div => "div",
                    _ => return None,
                };
                return Some(format!("{name}_{t}({a}, {b})"));
            }
            if e.is_float() {
                return matches!(op, Arith::Add | Arith::Sub | Arith::Mul | Arith::Div)
                    .then(|| format!("({a} {s} {b})"));
            }
            match op {
                Arith::Add | Arith::Sub | Arith::Mul => {
                    format!("({t})(({w}){a} {s} ({w}){b})")
                }
                Arith::Div if signed => {
                    format!("({b} == ({t})-1 ? ({t})(({w})0 - ({w}){a}) : ({t})({a} / {b}))")
                }
                Arith::Rem if signed => format!("({b} == ({t})-1 ? ({t})0 : ({t})({a} % {b}))"),
                _ => format!("({t})({a} {s} {b})"),
            }
        }
        Expr::Compare(op, a, b) if e.is_complex() => {
            let equal = format!("eq_{t}({}, {})", go(a)?, go(b)?);
            match op {
                Cmp::Eq => equal,
                Cmp::Ne => format!("!{equal}"),
                _ => return None,
            }
        }
        Expr::Compare(op, a, b) => format!("({} {} {})", go(a)?, op.symbol(), go(b)?),
        Expr::Select(cond, a, b) => format!("({} ? {} : {})", go(cond)?, go(a)?, go(b)?),
        Expr::Flag(cond) => format!("(u8)({})", go(cond)?),
        Expr::Call(f, args) => {
            let args = args.iter().map(go).collect::<Option<Vec<_>>>()?;
            c_call(*f, e, &args)?
        }
    })
}

/// A helper library call in C: `<name>_<type>(args)`.
fn c_call(f: Func, e: Elem, args: &[String]) -> Option<String> {
    let list = args.join(", ");
    if e.is_integer() {
        let (t, wide) = (e.value(), if e.is_signed() { "i64" } else { "u64" });
        let (a, b) = (args.first()?, args.get(1)?);
        return (f == Func::Pow).then(|| format!("({t})pow_{wide}(({wide}){a}, ({wide}){b})"));
    }
    let real_only = matches!(
        f,
        Func::Relu
            | Func::Floor
            | Func::Ceil
            | Func::RoundEven
            | Func::Rem
            | Func::MaxNan
            | Func::MinNan
            | Func::Erf
            | Func::Erfc
    );
    let name = match f {
        _ if e.is_complex() && real_only => return None,
        Func::Recip if !e.is_complex() => return None,
        // The real modulus is C's fabs.
        Func::Abs if !e.is_complex() => "fabs",
        _ => f.base_name(),
    };
    let suffix = if e.is_complex() {
        e.value()
    } else {
        e.real()?.name()
    };
    Some(format!("{name}_{suffix}({list})"))
}

/// The C expression converting the value `v` of element `from` into element `to` (its
/// computed type), as [`Cast::between`] decides: C's conversions where they are exact or
/// round once, the helper libraries' single-rounding conversions into f16 and bf16.
pub fn c_cast(from: Elem, to: Elem, v: &str) -> String {
    c_cast_of(&Cast::between(from, to), from, to, v)
}

/// `cast` of the C value `v` from `from` to `to`.
fn c_cast_of(cast: &Cast, from: Elem, to: Elem, v: &str) -> String {
    let t = to.value();
    match cast {
        Cast::NonZero if from.is_complex() => format!("(u8)({v}.x != 0 || {v}.y != 0)"),
        Cast::NonZero => format!("(u8)({v} != 0)"),
        Cast::Convert if to.is_complex() => {
            let (p, make) = (part(to).value(), complex_maker(to));
            format!("{make}(({p}){v}.x, ({p}){v}.y)")
        }
        Cast::RoundToOdd => format!("f64_to_f32_odd({v})"),
        Cast::Saturate { lo, hi } => {
            let (Some(real), Some((min, max))) = (from.real(), to.int_bounds()) else {
                return format!("({t}){v}");
            };
            format!(
                "({v} != {v} ? ({t})0 : {v} >= {} ? {max} : {v} < {} ? {min} : ({t}){v})",
                real.literal((hi + 1) as f64),
                real.literal(*lo as f64)
            )
        }
        Cast::IntToFloat {
            bits: bits @ (11 | 8),
        } if from.is_signed() => format!("i64_to_f32_bits((i64){v}, {bits})"),
        Cast::IntToFloat {
            bits: bits @ (11 | 8),
        } => format!("u64_to_f32_bits((u64){v}, {bits})"),
        // C's own conversions round once (to f32: to nearest, ties to even).
        Cast::Convert | Cast::IntToFloat { .. } => format!("({t}){v}"),
        Cast::RealPart(then) => c_cast_of(then, part(from), to, &format!("{v}.x")),
        Cast::ToComplex(then) => {
            let (p, make) = (part(to).value(), complex_maker(to));
            format!("{make}({}, ({p})0)", c_cast_of(then, from, part(to), v))
        }
    }
}

/// The C macro that makes a value of complex element `c` from its parts.
fn complex_maker(c: Elem) -> &'static str {
    if c == Elem::C128 {
        "MAKE_C128"
    } else {
        "MAKE_C64"
    }
}

/// The WGSL type element `e` is computed in (narrow integers and bool widen to 32 bits,
/// f16 and bf16 compute in f32, complex numbers are `vec2` of their part).
pub fn wgsl_type(e: Elem) -> &'static str {
    match e {
        Elem::Bool | Elem::U8 | Elem::U16 | Elem::U32 => "u32",
        Elem::I8 | Elem::I16 | Elem::I32 => "i32",
        Elem::I64 => "i64",
        Elem::U64 => "u64",
        Elem::F16 | Elem::BF16 | Elem::F32 => "f32",
        Elem::F64 => "f64",
        Elem::C64 => "vec2<f32>",
        Elem::C128 => "vec2<f64>",
    }
}

/// `expr` over operands of element `e` in WGSL.
pub fn wgsl(expr: &Expr, e: Elem) -> Option<String> {
    wgsl_with(expr, e, &OPERANDS.map(String::from))
}

/// `expr` in WGSL with operand `k` spelled `operands[k]`.
pub fn wgsl_with(expr: &Expr, e: Elem, operands: &[String]) -> Option<String> {
    let t = wgsl_type(e);
    let go = |x: &Expr| wgsl_with(x, e, operands);
    Some(match expr {
        Expr::Arg(k) => operands.get(*k)?.clone(),
        Expr::Lowest if e.is_float() => format!("{t}(-bitcast<f32>(0x7f800000u))"),
        Expr::Highest if e.is_float() => format!("{t}(bitcast<f32>(0x7f800000u))"),
        Expr::Lowest | Expr::Highest => {
            let (lo, hi) = e.int_range()?;
            crate::wgsl::int_literal(if *expr == Expr::Lowest { lo } else { hi }, t)
        }
        Expr::Local(name) => (*name).into(),
        Expr::Num(n) if e.is_complex() => format!("{t}({n}.0, 0.0)"),
        Expr::Num(n) => format!("{t}({n})"),
        Expr::AllOnes if e.is_signed() => format!("{t}(-1)"),
        Expr::AllOnes => format!("~{t}(0)"),
        Expr::Neg(a) => format!("(-{})", go(a)?),
        Expr::Arith(op, a, b) => {
            let (a, b) = (go(a)?, go(b)?);
            match op {
                Arith::Mul if e.is_complex() => format!("cmul({a}, {b})"),
                Arith::Div if e.is_complex() => format!("cdiv({a}, {b})"),
                Arith::Rem if e.is_float() => return None,
                _ if e.is_complex() && !matches!(op, Arith::Add | Arith::Sub) => return None,
                _ => format!("({a} {} {b})", op.symbol()),
            }
        }
        Expr::Compare(op, a, b) => {
            let (a, b) = (go(a)?, go(b)?);
            let ordered = |symbol: &str| {
                let mut terms = vec![format!("{a} {symbol} {b}")];
                if e.is_complex() {
                    terms[0] = format!("all({a} {symbol} {b})");
                    for v in [&a, &b] {
                        terms.push(format!("!is_nan(({v}).x) && !is_nan(({v}).y)"));
                    }
                } else if e.is_float() {
                    // WGSL may assume no NaNs: test each operand that is not a constant.
                    for v in [&a, &b] {
                        if !v.starts_with(t) {
                            terms.push(format!("!is_nan({v})"));
                        }
                    }
                }
                format!("({})", terms.join(" && "))
            };
            match op {
                Cmp::Ne if e.is_float() || e.is_complex() => format!("!{}", ordered("==")),
                _ if e.is_complex() && *op != Cmp::Eq => return None,
                _ => ordered(op.symbol()),
            }
        }
        Expr::Select(cond, a, b) => format!("select({}, {}, {})", go(b)?, go(a)?, go(cond)?),
        Expr::Flag(cond) => format!("select(0u, 1u, {})", go(cond)?),
        Expr::Call(f, args) => {
            let args = args.iter().map(go).collect::<Option<Vec<_>>>()?;
            wgsl_call(*f, e, &args)?
        }
    })
}

/// A helper library call (or builtin) in WGSL; `None` where wgpu's library has no
/// function within the conformance bounds for `e`.
fn wgsl_call(f: Func, e: Elem, args: &[String]) -> Option<String> {
    let t = wgsl_type(e);
    let a = args.first()?;
    let b = || args.get(1);
    if e.is_integer() {
        return (f == Func::Pow).then_some(format!("pow_{t}({a}, {})", b()?));
    }
    let single = matches!(e, Elem::C64 | Elem::F16 | Elem::BF16 | Elem::F32);
    if e.is_complex() {
        return Some(match f {
            Func::Abs => format!("cabs({a})"),
            Func::Sign => format!("select({a} / cabs({a}), {a}, all({a} == {t}(0.0)))"),
            Func::Sqrt => format!("csqrt({a})"),
            Func::Recip => format!("cdiv({t}(1.0, 0.0), {a})"),
            // complex64 only: the complex transcendentals build on the f32 ones.
            Func::Exp if single => format!("cexp({a})"),
            Func::Log if single => format!("clog({a})"),
            Func::Sin if single => format!("csin({a})"),
            Func::Cos if single => format!("ccos({a})"),
            Func::Tanh if single => format!("ctanh({a})"),
            Func::Sigmoid if single => format!("cdiv({t}(1.0, 0.0), {t}(1.0, 0.0) + cexp(-{a}))"),
            _ => return None,
        });
    }
    Some(match f {
        Func::Abs => format!("abs({a})"),
        Func::Sign => format!("select(sign({a}), {a}, is_nan({a}) || {a} == 0.0)"),
        // Correctly rounded on every conformant Vulkan device.
        Func::Sqrt => format!("sqrt({a})"),
        Func::Floor => format!("floor({a})"),
        Func::Ceil => format!("ceil({a})"),
        Func::RoundEven => format!("round_even({a})"),
        Func::Relu => format!("select(0.0, {a}, {a} > 0.0 || is_nan({a}))"),
        Func::MaxNan => format!("float_max({a}, {})", b()?),
        Func::MinNan => format!("float_min({a}, {})", b()?),
        Func::Rem => format!("float_rem_{t}({a}, {})", b()?),
        // WGSL's builtins are too inexact: the library's own, per type.
        Func::Exp | Func::Log | Func::Tanh | Func::Sigmoid | Func::Erf | Func::Erfc => {
            // No f64 erf: lavapipe flushes f64 subnormals, which erf of tiny arguments
            // returns (x + x * r), so it could not meet the bound there (nor erfc, whose
            // tail reaches them).
            if matches!(f, Func::Erf | Func::Erfc) && !single {
                return None;
            }
            format!("{}_{t}({a})", f.base_name())
        }
        Func::Sin if single => format!("sin_cos_f32({a}, false)"),
        Func::Cos if single => format!("sin_cos_f32({a}, true)"),
        // Computed in f64 (`pow_f32.wgsl`), so f32 and narrower only.
        Func::Pow if single => format!("pow_f32({a}, {})", b()?),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body;
    use polytensor_core::{BinaryOp, DataType, Op, UnaryOp};

    #[test]
    fn casts_name_the_single_rounding_helpers() {
        assert_eq!(c_cast(Elem::F64, Elem::F16, "x"), "f64_to_f32_odd(x)");
        assert_eq!(
            c_cast(Elem::I64, Elem::BF16, "x"),
            "i64_to_f32_bits((i64)x, 8)"
        );
        assert!(c_cast(Elem::F32, Elem::U8, "x").contains("256.0f"));
        assert_eq!(
            c_cast(Elem::C128, Elem::Bool, "x"),
            "(u8)(x.x != 0 || x.y != 0)"
        );
        assert_eq!(
            c(&body::select(), Elem::Bool).as_deref(),
            Some("((x != (u8)0) ? y : z)")
        );
    }

    /// The body of `op` on `dtype`, if it has one.
    fn body_of(op: Op, e: Elem) -> Option<Expr> {
        match op {
            Op::Unary(u) => body::unary(u, e),
            Op::Binary(b) => body::binary(b, e),
            _ => None,
        }
    }

    #[test]
    fn every_defined_op_has_a_body_and_c_renders_it() {
        for &dtype in DataType::ALL {
            let Some(e) = Elem::of(dtype) else { continue };
            let ops = UnaryOp::ALL.iter().map(|&u| Op::Unary(u));
            for op in ops.chain(BinaryOp::ALL.iter().map(|&b| Op::Binary(b))) {
                let body = body_of(op, e);
                assert_eq!(body.is_some(), op.is_defined_for(dtype), "{op} on {dtype}");
                if let Some(body) = body {
                    assert!(c(&body, e).is_some(), "{op} on {dtype} in C");
                }
            }
        }
    }

    #[test]
    fn each_dialect_keeps_the_nodes_promises() {
        let div = body::binary(BinaryOp::Div, Elem::I32).unwrap();
        // C guards MIN / -1 and computes in the unsigned type; WGSL defines both itself.
        assert_eq!(
            c(&div, Elem::I32).unwrap(),
            "((y == (i32)0) ? (i32)-1 : (y == (i32)-1 ? (i32)((u32)0 - (u32)x) : (i32)(x / y)))"
        );
        assert_eq!(
            wgsl(&div, Elem::I32).unwrap(),
            "select((x / y), i32(-1), (y == i32(0)))"
        );
        // WGSL may assume there are no NaNs: its float comparisons test them on the bits.
        let lt = body::binary(BinaryOp::Lt, Elem::F16).unwrap();
        assert_eq!(c(&lt, Elem::F16).unwrap(), "(u8)((x < y))");
        assert_eq!(
            wgsl(&lt, Elem::F16).unwrap(),
            "select(0u, 1u, (x < y && !is_nan(x) && !is_nan(y)))"
        );
        let add = body::binary(BinaryOp::Add, Elem::U8).unwrap();
        assert_eq!(c(&add, Elem::U8).unwrap(), "(u8)((u32)x + (u32)y)");
        assert_eq!(wgsl(&add, Elem::U8).unwrap(), "(x + y)");
        let mul = body::binary(BinaryOp::Mul, Elem::C64).unwrap();
        assert_eq!(c(&mul, Elem::C64).unwrap(), "mul_c64(x, y)");
        assert_eq!(wgsl(&mul, Elem::C64).unwrap(), "cmul(x, y)");
    }

    #[test]
    fn a_function_a_library_lacks_renders_as_none() {
        // wgpu's library has sin and cos of f32 only, and no complex128 transcendentals.
        let sin = body::unary(UnaryOp::Sin, Elem::F64).unwrap();
        assert_eq!(c(&sin, Elem::F64).unwrap(), "sin_f64(x)");
        assert!(wgsl(&sin, Elem::F64).is_none());
        let exp = body::unary(UnaryOp::Exp, Elem::C128).unwrap();
        assert!(wgsl(&exp, Elem::C128).is_none());
        assert_eq!(wgsl(&exp, Elem::C64).unwrap(), "cexp(x)");
    }
}
