//! The body of every elementwise op, written once: a typed expression ([`Expr`]) over the
//! operands `x`, `y`, `z` with the shared semantics of DESIGN.md, which each GPU language
//! renders through its dialect ([`crate::render`]: C for OpenCL and CUDA, WGSL for wgpu).
//!
//! The nodes carry meaning, not spelling: `Arith` is IEEE arithmetic on floats and
//! wrapping arithmetic on integers; integer `Div` and `Rem` truncate and assume a divisor
//! that is not zero (`MIN / -1 = MIN`, `MIN % -1 = 0`); `Compare` is IEEE's (false when an
//! operand is NaN, `!=` true); a [`Func`] is a function of a dialect's helper library with
//! the same contract in every language. How a dialect keeps these promises (C's unsigned
//! casts, WGSL's NaN tests on the bits) is the renderer's business, so an op's body here
//! is all there is of it on the GPU side.

use polytensor_core::{BinaryOp, UnaryOp};

use crate::Elem;

/// Arithmetic on two values of the element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arith {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b` (integers: truncating; `b` is not zero).
    Div,
    /// The truncated remainder of integers (`b` is not zero).
    Rem,
    /// Bitwise and (integers and bool).
    And,
    /// Bitwise or.
    Or,
    /// Bitwise exclusive or.
    Xor,
}

/// A comparison (IEEE's on floats).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    /// `a == b`.
    Eq,
    /// `a != b` (true when either is NaN).
    Ne,
    /// `a < b`.
    Lt,
    /// `a <= b`.
    Le,
    /// `a > b`.
    Gt,
    /// `a >= b`.
    Ge,
}

/// A function of the helper libraries, with one contract in every dialect (DESIGN.md's
/// shared semantics; the conformance suite holds each dialect to it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Func {
    /// `|x|` (of a complex number: its real modulus).
    Abs,
    /// -1, 0 or 1 (NaN and signed zeros kept); of a complex number, `x / |x|`.
    Sign,
    /// Square root.
    Sqrt,
    /// `1 / x` of a complex number.
    Recip,
    /// `e^x`.
    Exp,
    /// Natural logarithm.
    Log,
    /// Sine.
    Sin,
    /// Cosine.
    Cos,
    /// Hyperbolic tangent.
    Tanh,
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    /// `max(x, 0)`, NaN kept.
    Relu,
    /// Round toward -inf.
    Floor,
    /// Round toward +inf.
    Ceil,
    /// Round half to even.
    RoundEven,
    /// C's `fmod`: the exact truncated remainder of floats.
    Rem,
    /// `x^y` (integers: wrapping, by squaring; negative exponents give 0 except for bases
    /// 1 and -1).
    Pow,
    /// The larger, NaN propagating, -0 below +0.
    MaxNan,
    /// The smaller, NaN propagating, -0 below +0.
    MinNan,
    /// The error function.
    Erf,
    /// The complementary error function.
    Erfc,
}

/// A typed expression over the operands, computed in the element type it is rendered
/// for. A `Compare` is a truth value that only `Select` and `Flag` take.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// Operand `k` (`x`, `y`, `z`).
    Arg(usize),
    /// A local of a loop kernel ([`crate::ir::Local`]) holding a value of the element type.
    Local(&'static str),
    /// The small integer `n` in the element type.
    Num(i32),
    /// Every bit set: -1, or an unsigned type's maximum.
    AllOnes,
    /// The lowest value of the type: -inf, or the smallest integer.
    Lowest,
    /// The highest value of the type: +inf, or the largest integer.
    Highest,
    /// Negation (IEEE, or wrapping).
    Neg(Box<Expr>),
    /// Arithmetic of two values.
    Arith(Arith, Box<Expr>, Box<Expr>),
    /// A comparison: a condition.
    Compare(Cmp, Box<Expr>, Box<Expr>),
    /// The value of the first when the condition holds, else of the second.
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
    /// A condition as a bool element (0 or 1).
    Flag(Box<Expr>),
    /// A function of the helper libraries.
    Call(Func, Vec<Expr>),
}

/// `x`.
pub fn x() -> Expr {
    Expr::Arg(0)
}

/// `y`.
pub fn y() -> Expr {
    Expr::Arg(1)
}

/// The small integer `n`.
pub fn num(n: i32) -> Expr {
    Expr::Num(n)
}

impl Expr {
    fn arith(self, op: Arith, other: Expr) -> Expr {
        Expr::Arith(op, Box::new(self), Box::new(other))
    }

    /// The comparison `self op other`.
    pub fn cmp(self, op: Cmp, other: Expr) -> Expr {
        Expr::Compare(op, Box::new(self), Box::new(other))
    }

    /// `self ? then : otherwise`, `self` a condition.
    pub fn then(self, then: Expr, otherwise: Expr) -> Expr {
        Expr::Select(Box::new(self), Box::new(then), Box::new(otherwise))
    }

    /// `self` (a condition) as a bool element.
    pub fn flag(self) -> Expr {
        Expr::Flag(Box::new(self))
    }
}

macro_rules! arith_operators {
    ($($trait:ident $method:ident => $op:ident;)*) => {$(
        impl std::ops::$trait for Expr {
            type Output = Expr;
            /// The node of this arithmetic (IEEE on floats, wrapping on integers).
            fn $method(self, other: Expr) -> Expr {
                self.arith(Arith::$op, other)
            }
        }
    )*};
}

arith_operators! {
    Add add => Add;
    Sub sub => Sub;
    Mul mul => Mul;
    Div div => Div;
}

impl std::ops::Neg for Expr {
    type Output = Expr;
    /// Negation (IEEE, or wrapping).
    fn neg(self) -> Expr {
        Expr::Neg(Box::new(self))
    }
}

/// `f(args)`.
pub fn call(f: Func, args: impl IntoIterator<Item = Expr>) -> Expr {
    Expr::Call(f, args.into_iter().collect())
}

/// The body of unary `op` on `x` of element `e`, or `None` where the op is not defined
/// for it.
pub fn unary(op: UnaryOp, e: Elem) -> Option<Expr> {
    use UnaryOp as U;
    if e == Elem::Bool {
        return (op == U::Not).then(|| x().cmp(Cmp::Eq, num(0)).flag());
    }
    let function = |f: Func| Some(call(f, [x()]));
    if e.is_float() || e.is_complex() {
        let complex = e.is_complex();
        return match op {
            U::Neg => Some(-x()),
            U::Abs => function(Func::Abs),
            U::Sign => function(Func::Sign),
            U::Sqrt => function(Func::Sqrt),
            U::Rsqrt if complex => Some(call(Func::Recip, [call(Func::Sqrt, [x()])])),
            U::Rsqrt => Some(num(1) / call(Func::Sqrt, [x()])),
            U::Recip if complex => function(Func::Recip),
            U::Recip => Some(num(1) / x()),
            U::Square => Some(x() * x()),
            U::Exp => function(Func::Exp),
            U::Log => function(Func::Log),
            U::Sin => function(Func::Sin),
            U::Cos => function(Func::Cos),
            U::Tanh => function(Func::Tanh),
            U::Sigmoid => function(Func::Sigmoid),
            U::Relu if !complex => function(Func::Relu),
            U::Relu6 if !complex => Some(relu6()),
            U::Floor if !complex => function(Func::Floor),
            U::Ceil if !complex => function(Func::Ceil),
            U::Round if !complex => function(Func::RoundEven),
            U::Erf if !complex => function(Func::Erf),
            U::Erfc if !complex => function(Func::Erfc),
            _ => None,
        };
    }
    let signed = e.is_signed();
    let negative = || x().cmp(Cmp::Lt, num(0));
    let positive = || x().cmp(Cmp::Gt, num(0));
    match op {
        U::Neg if signed => Some(-x()),
        U::Abs if signed => Some(negative().then(-x(), x())),
        U::Relu if signed => Some(positive().then(x(), num(0))),
        U::Abs | U::Relu => Some(x()),
        U::Relu6 => Some(relu6()),
        U::Sign if signed => Some(positive().then(num(1), negative().then(num(-1), num(0)))),
        U::Sign => Some(x().cmp(Cmp::Ne, num(0)).then(num(1), num(0))),
        U::Square => Some(x() * x()),
        _ => None,
    }
}

/// `min(max(x, 0), 6)` as TensorFlow computes it: NaN and -0.0 compare false both ways,
/// so they stay.
fn relu6() -> Expr {
    x().cmp(Cmp::Lt, num(0))
        .then(num(0), x().cmp(Cmp::Gt, num(6)).then(num(6), x()))
}

/// The body of binary `op` on `x` and `y` of element `e` (comparisons give a bool
/// element), or `None` where the op is not defined for it.
pub fn binary(op: BinaryOp, e: Elem) -> Option<Expr> {
    use BinaryOp as B;
    let compare = |cmp: Cmp| Some(x().cmp(cmp, y()).flag());
    match op {
        B::Eq => return compare(Cmp::Eq),
        B::Ne => return compare(Cmp::Ne),
        B::Lt | B::Le | B::Gt | B::Ge if e.is_complex() => return None,
        B::Lt => return compare(Cmp::Lt),
        B::Le => return compare(Cmp::Le),
        B::Gt => return compare(Cmp::Gt),
        B::Ge => return compare(Cmp::Ge),
        _ => {}
    }
    let bits = |a: Arith| Some(x().arith(a, y()));
    if e == Elem::Bool {
        return match op {
            B::And => bits(Arith::And),
            B::Or => bits(Arith::Or),
            B::Xor => bits(Arith::Xor),
            _ => None,
        };
    }
    let function = |f: Func| Some(call(f, [x(), y()]));
    let float = e.is_float() || e.is_complex();
    match op {
        B::Add => Some(x() + y()),
        B::Sub => Some(x() - y()),
        B::Mul => Some(x() * y()),
        B::Div if float => Some(x() / y()),
        B::SquaredDifference if e.is_float() || e.is_signed() => Some((x() - y()) * (x() - y())),
        B::Pow => function(Func::Pow),
        _ if e.is_complex() => None,
        B::Rem if float => function(Func::Rem),
        B::Max if float => function(Func::MaxNan),
        B::Min if float => function(Func::MinNan),
        // Integers: x / 0 = -1 (all bits set), x % 0 = x.
        B::Div => Some(y().cmp(Cmp::Eq, num(0)).then(Expr::AllOnes, x() / y())),
        B::Rem => Some(
            y().cmp(Cmp::Eq, num(0))
                .then(x(), x().arith(Arith::Rem, y())),
        ),
        B::Max => Some(x().cmp(Cmp::Gt, y()).then(x(), y())),
        B::Min => Some(x().cmp(Cmp::Lt, y()).then(x(), y())),
        _ => None,
    }
}

/// `where`'s body: `y` where the condition `x` (a bool element) holds, else `z`. The
/// values move as raw bits (no arithmetic touches them), so it renders in the condition's
/// element.
pub fn select() -> Expr {
    x().cmp(Cmp::Ne, num(0)).then(y(), Expr::Arg(2))
}

/// How a value becomes another element type (DESIGN.md's cast semantics), decided here
/// once; each language spells the steps ([`crate::render::c_cast`],
/// [`crate::render::wgsl_cast`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cast {
    /// To bool: not zero (NaN is not zero; a complex value: either part).
    NonZero,
    /// The language's own conversion, exact or rounded once: any float to a wider or equal
    /// one or f64 to f32, bool to anything, an integer to f64, integers to integers
    /// (extended by the source's signedness, or cut to the low bits), a complex value to
    /// the other complex type part by part.
    Convert,
    /// f64 to f16 or bf16: to f32 rounded to odd, so that the narrowing store rounds once.
    RoundToOdd,
    /// A float to an integer: NaN to 0, `lo` below `lo`, `hi` from `hi + 1` on (both
    /// bounds exact in every float type), truncated toward zero inside.
    Saturate {
        /// The target's smallest value.
        lo: i128,
        /// The target's largest value.
        hi: i128,
    },
    /// An integer to a float of `bits` significant bits (24: f32, 11: f16, 8: bf16),
    /// rounded once (to nearest, ties to even).
    IntToFloat {
        /// The target's significand bits.
        bits: u32,
    },
    /// A complex value's real part, then this cast from the part's type.
    RealPart(Box<Cast>),
    /// This cast into the part type of a complex target, with an imaginary part of 0.
    ToComplex(Box<Cast>),
}

impl Cast {
    /// The cast from `from` to `to`.
    pub fn between(from: Elem, to: Elem) -> Cast {
        match (from.is_complex(), to.is_complex()) {
            (true, true) => Cast::Convert,
            (true, false) if to == Elem::Bool => Cast::NonZero,
            (true, false) => Cast::RealPart(Box::new(Cast::between(part(from), to))),
            (false, true) => Cast::ToComplex(Box::new(Cast::between(from, part(to)))),
            (false, false) => real_cast(from, to),
        }
    }
}

/// The real element of a complex one's parts.
pub fn part(c: Elem) -> Elem {
    if c == Elem::C128 {
        Elem::F64
    } else {
        Elem::F32
    }
}

/// [`Cast::between`] real elements (and bool).
fn real_cast(from: Elem, to: Elem) -> Cast {
    let narrow_bits = match to {
        Elem::F16 => Some(11),
        Elem::BF16 => Some(8),
        Elem::F32 => Some(24),
        _ => None,
    };
    if to == Elem::Bool {
        return Cast::NonZero;
    }
    if from == Elem::Bool {
        return Cast::Convert;
    }
    match (from.is_float(), to.is_float(), narrow_bits) {
        (true, true, Some(11 | 8)) if from == Elem::F64 => Cast::RoundToOdd,
        (true, true, _) => Cast::Convert,
        (true, false, _) => {
            let (lo, hi) = to.int_range().unwrap_or((i64::MIN.into(), i64::MAX.into()));
            Cast::Saturate { lo, hi }
        }
        (false, true, Some(bits)) => Cast::IntToFloat { bits },
        // An integer to f64 (every 32-bit one exactly; C and WGSL round 64-bit ones once),
        // and integers to integers.
        _ => Cast::Convert,
    }
}
