//! Operation descriptors: which ops exist, which dtypes each is defined for, what dtype it
//! produces, and NumPy broadcasting. Devices implement the kernels; this module is the one
//! place that says what the kernels mean.

use std::fmt;

use crate::dtype::{DTypeClass, DTypeSet, DataType};
use crate::element::Scalar;
use crate::error::{Error, Result};
use crate::shape::TensorShape;

macro_rules! op_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$doc:meta])* $variant:ident = $text:literal),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $($(#[$doc])* $variant),* }

        impl $name {
            /// Every variant.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The op's name (`add`, `sqrt`, ...).
            pub const fn name(self) -> &'static str {
                match self { $($name::$variant => $text),* }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

op_enum! {
    /// Elementwise ops of one operand.
    UnaryOp {
        /// `-x` (wrapping for signed integers).
        Neg = "neg",
        /// `|x|` (wrapping: `abs(MIN) = MIN`; the modulus for complex, giving a real dtype).
        Abs = "abs",
        /// -1, 0 or 1 (NaN stays NaN, -0.0 stays -0.0; `z / |z|` for complex).
        Sign = "sign",
        /// Square root.
        Sqrt = "sqrt",
        /// `1 / sqrt(x)`.
        Rsqrt = "rsqrt",
        /// `e^x`.
        Exp = "exp",
        /// Natural logarithm.
        Log = "log",
        /// Sine.
        Sin = "sin",
        /// Cosine.
        Cos = "cos",
        /// Hyperbolic tangent.
        Tanh = "tanh",
        /// `1 / (1 + e^-x)`.
        Sigmoid = "sigmoid",
        /// The error function, `2 / sqrt(pi)` times the integral of `e^(-t^2)` from 0 to `x`.
        Erf = "erf",
        /// The complementary error function, `1 - erf(x)`, exact where it is tiny.
        Erfc = "erfc",
        /// `max(x, 0)`, NaN propagating.
        Relu = "relu",
        /// `min(max(x, 0), 6)`, NaN propagating, `-0.0` kept (TensorFlow's `relu6`).
        Relu6 = "relu6",
        /// Round toward -inf.
        Floor = "floor",
        /// Round toward +inf.
        Ceil = "ceil",
        /// Round half to even (as TensorFlow, NumPy and PyTorch do).
        Round = "round",
        /// `1 / x`.
        Recip = "recip",
        /// `x * x` (wrapping for integers).
        Square = "square",
        /// Logical not, on bool.
        Not = "not",
    }
}

op_enum! {
    /// Elementwise ops of two operands, with NumPy broadcasting.
    BinaryOp {
        /// `a + b` (wrapping for integers).
        Add = "add",
        /// `a - b` (wrapping for integers).
        Sub = "sub",
        /// `a * b` (wrapping for integers).
        Mul = "mul",
        /// `a / b`; integers truncate, with `x / 0 = -1` (all bits set) and `MIN / -1 = MIN`.
        Div = "div",
        /// Truncated remainder (sign of `a`); integers: `x % 0 = x`, `MIN % -1 = 0`.
        Rem = "rem",
        /// `a ^ b`; integers: wrapping, negative exponents give `0` except for bases 1 and -1.
        Pow = "pow",
        /// The larger; NaN if either is NaN.
        Max = "max",
        /// The smaller; NaN if either is NaN.
        Min = "min",
        /// `(a - b) * (a - b)` (wrapping for integers; TensorFlow's `squared_difference`).
        SquaredDifference = "squared_difference",
        /// `a == b`, giving bool.
        Eq = "eq",
        /// `a != b`, giving bool.
        Ne = "ne",
        /// `a < b`, giving bool.
        Lt = "lt",
        /// `a <= b`, giving bool.
        Le = "le",
        /// `a > b`, giving bool.
        Gt = "gt",
        /// `a >= b`, giving bool.
        Ge = "ge",
        /// Logical and, on bool.
        And = "and",
        /// Logical or, on bool.
        Or = "or",
        /// Logical exclusive or, on bool.
        Xor = "xor",
    }
}

op_enum! {
    /// Reductions over a set of axes.
    ReduceOp {
        /// Sum (0 over no elements).
        Sum = "sum",
        /// Product (1 over no elements).
        Prod = "prod",
        /// Arithmetic mean (NaN over no elements for floats, 0 for integers, which truncate).
        Mean = "mean",
        /// Maximum, NaN propagating (the dtype's lowest value, or -inf, over no elements).
        Max = "max",
        /// Minimum, NaN propagating (the dtype's highest value, or +inf, over no elements).
        Min = "min",
        /// Index along the one reduced axis (`Tensor::reduce` takes exactly one, as
        /// TensorFlow's `ArgMax` does; kernels compute the row-major flat index within the
        /// reduced axes) of the first maximum (a NaN counts as the maximum); int64; an error
        /// over no elements.
        ArgMax = "argmax",
        /// As `ArgMax`, for the first minimum.
        ArgMin = "argmin",
    }
}

/// An operation family, with the op: what devices are asked whether they support.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// An elementwise op of one operand.
    Unary(UnaryOp),
    /// An elementwise op of two operands.
    Binary(BinaryOp),
    /// `where(cond, a, b)`: elements of `a` where `cond`, else of `b` (dtype of `a`, `b`).
    Where,
    /// Conversion between dtypes (dtype: either side).
    Cast,
    /// Batched matrix multiplication.
    Matmul,
    /// A reduction.
    Reduce(ReduceOp),
    /// Setting every element to one value.
    Fill,
    /// `start + i * step`.
    Arange,
    /// Materialising a strided layout into a contiguous buffer (any fixed-size dtype).
    Copy,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Unary(op) => write!(f, "{op}"),
            Op::Binary(op) => write!(f, "{op}"),
            Op::Reduce(op) => write!(f, "reduce_{op}"),
            Op::Where => f.write_str("where"),
            Op::Cast => f.write_str("cast"),
            Op::Matmul => f.write_str("matmul"),
            Op::Fill => f.write_str("fill"),
            Op::Arange => f.write_str("arange"),
            Op::Copy => f.write_str("copy"),
        }
    }
}

impl Op {
    /// Every op of every family.
    pub fn all() -> Vec<Op> {
        let mut ops: Vec<Op> = UnaryOp::ALL.iter().map(|&o| Op::Unary(o)).collect();
        ops.extend(BinaryOp::ALL.iter().map(|&o| Op::Binary(o)));
        ops.extend([Op::Where, Op::Cast, Op::Matmul]);
        ops.extend(ReduceOp::ALL.iter().map(|&o| Op::Reduce(o)));
        ops.extend([Op::Fill, Op::Arange, Op::Copy]);
        ops
    }

    /// How many ops [`Op::all`] lists.
    pub const COUNT: usize = UnaryOp::ALL.len() + BinaryOp::ALL.len() + ReduceOp::ALL.len() + 6;

    /// This op's position in [`Op::all`] (a table index).
    pub const fn index(self) -> usize {
        let (unary, binary, reduce) =
            (UnaryOp::ALL.len(), BinaryOp::ALL.len(), ReduceOp::ALL.len());
        match self {
            Op::Unary(op) => op as usize,
            Op::Binary(op) => unary + op as usize,
            Op::Where => unary + binary,
            Op::Cast => unary + binary + 1,
            Op::Matmul => unary + binary + 2,
            Op::Reduce(op) => unary + binary + 3 + op as usize,
            Op::Fill => unary + binary + 3 + reduce,
            Op::Arange => unary + binary + 4 + reduce,
            Op::Copy => unary + binary + 5 + reduce,
        }
    }

    /// Whether the op has a meaning for `dtype` (independent of any device): a bit test in a
    /// table built at compile time, since ops ask it on every call.
    #[inline]
    pub fn is_defined_for(self, dtype: DataType) -> bool {
        self.defined_dtypes().contains(dtype)
    }

    /// Every dtype the op has a meaning for.
    #[inline]
    pub const fn defined_dtypes(self) -> DTypeSet {
        match self {
            Op::Unary(op) => DEFINED_UNARY[op as usize],
            Op::Binary(op) => DEFINED_BINARY[op as usize],
            Op::Reduce(op) => DEFINED_REDUCE[op as usize],
            _ => defined_set(self),
        }
    }
}

/// The [`Op::defined_dtypes`] of every op of one family, by variant index.
macro_rules! defined_table {
    ($family:ident, $variant:ident) => {{
        let mut table = [DTypeSet::EMPTY; $family::ALL.len()];
        let mut i = 0;
        while i < table.len() {
            table[i] = defined_set(Op::$variant($family::ALL[i]));
            i += 1;
        }
        table
    }};
}

const DEFINED_UNARY: [DTypeSet; UnaryOp::ALL.len()] = defined_table!(UnaryOp, Unary);
const DEFINED_BINARY: [DTypeSet; BinaryOp::ALL.len()] = defined_table!(BinaryOp, Binary);
const DEFINED_REDUCE: [DTypeSet; ReduceOp::ALL.len()] = defined_table!(ReduceOp, Reduce);

/// The dtypes `op` has a meaning for, from [`defined`].
const fn defined_set(op: Op) -> DTypeSet {
    let mut set = DTypeSet::EMPTY;
    let mut i = 0;
    while i < DataType::ALL.len() {
        if defined(op, DataType::ALL[i]) {
            set = set.with(DataType::ALL[i]);
        }
        i += 1;
    }
    set
}

/// The rule behind [`Op::is_defined_for`], by dtype class.
const fn defined(op: Op, dtype: DataType) -> bool {
    use DTypeClass::*;
    if matches!(op, Op::Copy) {
        return dtype.is_pod();
    }
    if matches!(op, Op::Cast) && crate::float8::Float8::of(dtype).is_some() {
        // Float8 is storage-only, but casts to and from it are defined.
        return true;
    }
    if !dtype.is_computable() {
        return false;
    }
    let class = dtype.class();
    let real = matches!(class, Float | Signed | Unsigned);
    let numeric = real || matches!(class, Complex);
    match op {
        Op::Unary(op) => match op {
            UnaryOp::Not => matches!(class, Bool),
            UnaryOp::Neg => matches!(class, Float | Signed | Complex),
            UnaryOp::Abs | UnaryOp::Sign | UnaryOp::Square => numeric,
            UnaryOp::Relu | UnaryOp::Relu6 => real,
            UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::Erf | UnaryOp::Erfc => {
                matches!(class, Float)
            }
            _ => matches!(class, Float | Complex),
        },
        Op::Binary(op) => match op {
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Pow => {
                numeric
            }
            BinaryOp::Rem | BinaryOp::Max | BinaryOp::Min => real,
            // Complex operands would need `(a - b) * conj(a - b)`: not yet.
            BinaryOp::SquaredDifference => matches!(class, Float | Signed),
            BinaryOp::Eq | BinaryOp::Ne => true,
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => !matches!(class, Complex),
            BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => matches!(class, Bool),
        },
        Op::Reduce(op) => match op {
            ReduceOp::Sum | ReduceOp::Prod | ReduceOp::Mean => numeric,
            _ => real,
        },
        Op::Matmul => matches!(
            dtype,
            DataType::Half
                | DataType::BFloat16
                | DataType::Float
                | DataType::Double
                | DataType::Complex64
                | DataType::Complex128
                | DataType::Int32
                | DataType::Int64
        ),
        Op::Arange => numeric,
        Op::Where | Op::Cast | Op::Fill | Op::Copy => true,
    }
}

impl UnaryOp {
    /// The dtype the op produces for input `dtype` (`abs` of complex is real).
    pub fn output_dtype(self, dtype: DataType) -> DataType {
        match self {
            UnaryOp::Abs => dtype.real_dtype(),
            _ => dtype,
        }
    }
}

impl BinaryOp {
    /// Whether the op produces bool whatever its inputs (comparisons).
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        )
    }

    /// The dtype the op produces for inputs of `dtype`.
    pub fn output_dtype(self, dtype: DataType) -> DataType {
        if self.is_comparison() {
            DataType::Bool
        } else {
            dtype
        }
    }
}

impl ReduceOp {
    /// The dtype the reduction produces for input `dtype`.
    pub fn output_dtype(self, dtype: DataType) -> DataType {
        match self {
            ReduceOp::ArgMax | ReduceOp::ArgMin => DataType::Int64,
            _ => dtype,
        }
    }
}

/// Element `i` of `arange(start, .., step)`, computed exactly for integer arguments (in
/// i128, wrapping) and in f64 otherwise, before any conversion to the output dtype.
///
/// ```
/// use polytensor_core::{ops::arange_value, Scalar};
/// assert_eq!(arange_value(Scalar::I64(-3), Scalar::I64(2), 4), Scalar::I64(5));
/// assert_eq!(arange_value(Scalar::F64(0.5), Scalar::F64(0.25), 2), Scalar::F64(1.0));
/// ```
pub fn arange_value(start: Scalar, step: Scalar, i: usize) -> Scalar {
    let int = |s: Scalar| match s {
        Scalar::I64(v) => Some(i128::from(v)),
        Scalar::U64(v) => Some(i128::from(v)),
        _ => None,
    };
    match (int(start), int(step)) {
        (Some(a), Some(s)) => {
            let v = a.wrapping_add((i as i128).wrapping_mul(s));
            match (i64::try_from(v), u64::try_from(v)) {
                (Ok(v), _) => Scalar::I64(v),
                (_, Ok(v)) => Scalar::U64(v),
                _ => Scalar::I64(v as i64),
            }
        }
        _ => Scalar::F64(start.to_f64() + i as f64 * step.to_f64()),
    }
}

/// The little-endian bytes of `count` elements of `arange(start, .., step)` as `dtype`
/// (each computed by [`arange_value`], then converted), for backends that build it on the
/// host; `None` for a dtype without a fixed-size element.
///
/// ```
/// use polytensor_core::{ops::arange_bytes, DataType, Scalar};
/// let bytes = arange_bytes(DataType::UInt8, Scalar::I64(250), Scalar::I64(3), 3).unwrap();
/// assert_eq!(bytes, vec![250, 253, 0]);
/// ```
pub fn arange_bytes(dtype: DataType, start: Scalar, step: Scalar, count: usize) -> Option<Vec<u8>> {
    crate::dispatch_dtype!(dtype,
        T => {
            use crate::element::Element;
            let values: Vec<T> = (0..count)
                .map(|i| T::from_scalar(arange_value(start, step, i)))
                .collect();
            Some(crate::element::as_bytes(&values).to_vec())
        },
        _ => None)
}

/// The shape that `a` and `b` broadcast to by NumPy rules (align trailing dims; each pair
/// equal, or one of them 1).
///
/// ```
/// use polytensor_core::{ops::broadcast_shapes, TensorShape};
/// let a = TensorShape::new(&[4, 1, 3]).unwrap();
/// let b = TensorShape::new(&[5, 1]).unwrap();
/// assert_eq!(broadcast_shapes(&a, &b).unwrap().to_string(), "[4,5,3]");
/// ```
pub fn broadcast_shapes(a: &TensorShape, b: &TensorShape) -> Result<TensorShape> {
    let rank = a.rank().max(b.rank());
    let dim = |s: &TensorShape, i: usize| {
        let lead = rank - s.rank();
        if i < lead {
            1
        } else {
            s.dim_size(i - lead)
        }
    };
    let dims = (0..rank)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Ok(x),
            (1, y) => Ok(y),
            (x, 1) => Ok(x),
            (x, y) => Err(Error::shape(
                "broadcast",
                format!("shapes {a} and {b} are incompatible: {x} vs {y} in dimension {i}"),
            )),
        })
        .collect::<Result<smallvec::SmallVec<[usize; 8]>>>()?;
    TensorShape::new(&dims)
}

/// Normalise, check and sort a set of reduction axes (negative axes count from the end;
/// duplicates are an error).
pub fn normalize_axes(axes: &[isize], rank: usize) -> Result<Vec<usize>> {
    let mut normalized = axes
        .iter()
        .map(|&a| crate::layout::normalize_axis(a, rank))
        .collect::<Result<Vec<_>>>()?;
    normalized.sort_unstable();
    if normalized.windows(2).any(|w| w[0] == w[1]) {
        return Err(Error::invalid(format!("duplicate axes in {axes:?}")));
    }
    Ok(normalized)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions() {
        assert!(Op::Unary(UnaryOp::Sqrt).is_defined_for(DataType::BFloat16));
        assert!(!Op::Unary(UnaryOp::Sqrt).is_defined_for(DataType::Int32));
        assert!(Op::Unary(UnaryOp::Neg).is_defined_for(DataType::Int8));
        assert!(!Op::Unary(UnaryOp::Neg).is_defined_for(DataType::UInt8));
        assert!(Op::Binary(BinaryOp::And).is_defined_for(DataType::Bool));
        assert!(!Op::Binary(BinaryOp::Add).is_defined_for(DataType::Bool));
        assert!(!Op::Binary(BinaryOp::Lt).is_defined_for(DataType::Complex64));
        assert!(Op::Matmul.is_defined_for(DataType::Int64));
        assert!(!Op::Matmul.is_defined_for(DataType::Int8));
        assert!(!Op::Fill.is_defined_for(DataType::String));
        assert!(Op::Cast.is_defined_for(DataType::Float8E5M2));
        let indices: Vec<usize> = Op::all().into_iter().map(Op::index).collect();
        assert_eq!(indices, (0..Op::COUNT).collect::<Vec<_>>());
        assert!(!Op::Cast.is_defined_for(DataType::Int4));
        assert_eq!(
            UnaryOp::Abs.output_dtype(DataType::Complex128),
            DataType::Double
        );
        assert_eq!(BinaryOp::Le.output_dtype(DataType::Float), DataType::Bool);
        assert_eq!(
            ReduceOp::ArgMin.output_dtype(DataType::Half),
            DataType::Int64
        );
        assert_eq!(Op::Reduce(ReduceOp::Sum).to_string(), "reduce_sum");
        assert!(Op::all().len() > 40);
    }

    #[test]
    fn the_compiled_tables_follow_the_rule_for_every_op_and_dtype() {
        for op in Op::all() {
            for &dtype in DataType::ALL {
                assert_eq!(
                    op.is_defined_for(dtype),
                    defined(op, dtype),
                    "{op} on {dtype}"
                );
            }
        }
    }

    #[test]
    fn broadcasting() {
        let s = |d: &[usize]| TensorShape::new(d).unwrap();
        assert_eq!(broadcast_shapes(&s(&[]), &s(&[2, 3])).unwrap(), s(&[2, 3]));
        assert_eq!(
            broadcast_shapes(&s(&[0, 1]), &s(&[1, 5])).unwrap(),
            s(&[0, 5])
        );
        let err = broadcast_shapes(&s(&[2, 3]), &s(&[4]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("[2,3]") && err.contains("[4]"), "{err}");
        assert_eq!(normalize_axes(&[-1, 0], 3).unwrap(), vec![0, 2]);
        assert!(normalize_axes(&[1, -2], 3).is_err());
        assert!(normalize_axes(&[3], 3).is_err());
    }
}
