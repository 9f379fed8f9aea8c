//! Operations as `Tensor` methods: validation, broadcasting and output allocation here,
//! the arithmetic in the device's kernels.

use super::{Storage, Tensor};
use crate::buffer::{EmbeddedBuffer, TensorBuffer};
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::ops::{broadcast_shapes, normalize_axes, BinaryOp, Op, ReduceOp, UnaryOp};
use crate::shape::TensorShape;

macro_rules! unary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name(&self) -> Result<Tensor> {
            self.unary(UnaryOp::$op)
        }
    )*};
}

macro_rules! binary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name(&self, other: &Tensor) -> Result<Tensor> {
            self.binary(BinaryOp::$op, other)
        }
    )*};
}

/// A reduction over `axes` (`sum`), and, where a second name follows, the same over every
/// axis (`sum_all`).
macro_rules! reduce_methods {
    ($($(#[$doc:meta])* $name:ident $(, $all:ident)? => $op:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name(&self, axes: &[isize], keep_dims: bool) -> Result<Tensor> {
            self.reduce(ReduceOp::$op, axes, keep_dims)
        }
        $(
            #[doc = concat!("[`Tensor::", stringify!($name), "`] over every axis, a 0-d tensor ",
                "(TensorFlow's `axis=None`; an empty axis list reduces nothing).")]
            pub fn $all(&self) -> Result<Tensor> {
                self.reduce_all(ReduceOp::$op)
            }
        )?
    )*};
}

impl Tensor {
    /// Apply an elementwise op of one operand.
    pub fn unary(&self, op: UnaryOp) -> Result<Tensor> {
        let device = self.device();
        device.check_supports(Op::Unary(op), self.dtype)?;
        Tensor::produce(
            self.shape().clone(),
            op.output_dtype(self.dtype),
            device,
            |out| device.unary(op, &self.view(), out),
        )
    }

    unary_methods! {
        /// `-x`.
        neg => Neg;
        /// `|x|` (complex: the modulus, as a real tensor).
        abs => Abs;
        /// -1, 0 or 1.
        sign => Sign;
        /// Square root.
        sqrt => Sqrt;
        /// `1 / sqrt(x)`.
        rsqrt => Rsqrt;
        /// `e^x`.
        exp => Exp;
        /// Natural logarithm.
        log => Log;
        /// Sine.
        sin => Sin;
        /// Cosine.
        cos => Cos;
        /// Hyperbolic tangent.
        tanh => Tanh;
        /// Logistic sigmoid.
        sigmoid => Sigmoid;
        /// The error function (real floats).
        erf => Erf;
        /// The complementary error function, `1 - erf(x)` without its cancellation (real
        /// floats).
        erfc => Erfc;
        /// `max(x, 0)`.
        relu => Relu;
        /// `min(max(x, 0), 6)`.
        relu6 => Relu6;
        /// Round toward -inf.
        floor => Floor;
        /// Round toward +inf.
        ceil => Ceil;
        /// Round half to even.
        round => Round;
        /// `1 / x`.
        recip => Recip;
        /// `x * x`.
        square => Square;
        /// Logical not (bool).
        logical_not => Not;
    }

    /// Apply an elementwise op of two operands with NumPy broadcasting. Both must have the
    /// same dtype and device.
    #[inline]
    pub fn binary(&self, op: BinaryOp, other: &Tensor) -> Result<Tensor> {
        match self.embedded_binary(op, other) {
            Some(out) => Ok(out),
            None => self.binary_on_views(op, other),
        }
    }

    /// [`Tensor::binary`] the general way: checks, broadcast views, and the device's
    /// kernel. Kept out of line so that the embedded shortcut stays small.
    #[inline(never)]
    fn binary_on_views(&self, op: BinaryOp, other: &Tensor) -> Result<Tensor> {
        self.check_same_device(other, op.name())?;
        if self.dtype != other.dtype {
            return Err(Error::DTypeMismatch {
                op: op.name(),
                expected: self.dtype.to_string(),
                found: other.dtype,
            });
        }
        let device = self.device();
        device.check_supports(Op::Binary(op), self.dtype)?;
        let out_dtype = op.output_dtype(self.dtype);
        if self.shape() == other.shape() {
            // The common case needs no broadcast views.
            return Tensor::produce(self.shape().clone(), out_dtype, device, |out| {
                device.binary(op, &self.view(), &other.view(), out)
            });
        }
        let shape = broadcast_shapes(self.shape(), other.shape())?;
        let (a, b) = (self.broadcast_to(&shape)?, other.broadcast_to(&shape)?);
        Tensor::produce(shape, out_dtype, device, |out| {
            device.binary(op, &a.view(), &b.view(), out)
        })
    }

    /// [`Tensor::binary`] of two embedded tensors (the host device's scalars) of one dtype
    /// and shape, each contiguous from its first element, through the device's
    /// [`Device::embedded_binary`](crate::Device::embedded_binary): no views, no checks
    /// that cannot fail. `None` sends the caller the general way.
    #[inline]
    fn embedded_binary(&self, op: BinaryOp, other: &Tensor) -> Option<Tensor> {
        let (Storage::Embedded(a), Storage::Embedded(b)) = (&self.storage, &other.storage) else {
            return None;
        };
        let dense = |t: &Tensor| t.layout.is_contiguous() && t.layout.offset() == 0;
        if self.dtype != other.dtype
            || self.shape() != other.shape()
            || !dense(self)
            || !dense(other)
        {
            return None;
        }
        let mut out = EmbeddedBuffer::empty();
        let len = self.num_elements();
        if !a
            .device()
            .embedded_binary(op, self.dtype, len, a, b, &mut out)
        {
            return None;
        }
        Some(Tensor {
            dtype: op.output_dtype(self.dtype),
            // Dense from offset 0, so the row-major layout of this shape (see `Layout`).
            layout: self.layout.clone(),
            storage: Storage::Embedded(out),
        })
    }

    binary_methods! {
        /// `a + b`.
        add => Add;
        /// `a - b`.
        sub => Sub;
        /// `a * b`.
        mul => Mul;
        /// `a / b` (integer convention in [`BinaryOp::Div`]).
        div => Div;
        /// Truncated remainder.
        rem => Rem;
        /// `a ^ b`.
        pow => Pow;
        /// Elementwise maximum, NaN propagating.
        maximum => Max;
        /// Elementwise minimum, NaN propagating.
        minimum => Min;
        /// `(a - b) * (a - b)` (TensorFlow's `squared_difference`).
        squared_difference => SquaredDifference;
        /// `a == b` as bool.
        eq => Eq;
        /// `a != b` as bool.
        ne => Ne;
        /// `a < b` as bool.
        lt => Lt;
        /// `a <= b` as bool.
        le => Le;
        /// `a > b` as bool.
        gt => Gt;
        /// `a >= b` as bool.
        ge => Ge;
        /// Logical and (bool).
        logical_and => And;
        /// Logical or (bool).
        logical_or => Or;
        /// Logical xor (bool).
        logical_xor => Xor;
    }

    /// Elements of `on_true` where `self` (bool) is true, else of `on_false`; all three
    /// broadcast together.
    pub fn where_(&self, on_true: &Tensor, on_false: &Tensor) -> Result<Tensor> {
        self.check_same_device(on_true, "where")?;
        self.check_same_device(on_false, "where")?;
        if self.dtype != DataType::Bool {
            return Err(Error::DTypeMismatch {
                op: "where",
                expected: "bool condition".into(),
                found: self.dtype,
            });
        }
        if on_true.dtype != on_false.dtype {
            return Err(Error::DTypeMismatch {
                op: "where",
                expected: on_true.dtype.to_string(),
                found: on_false.dtype,
            });
        }
        let device = self.device();
        device.check_supports(Op::Where, on_true.dtype)?;
        let shape = broadcast_shapes(
            &broadcast_shapes(self.shape(), on_true.shape())?,
            on_false.shape(),
        )?;
        let (c, a, b) = (
            self.broadcast_to(&shape)?,
            on_true.broadcast_to(&shape)?,
            on_false.broadcast_to(&shape)?,
        );
        Tensor::produce(shape, on_true.dtype, device, |out| {
            device.select(&c.view(), &a.view(), &b.view(), out)
        })
    }

    /// Convert to `dtype` (float to int truncates and saturates, NaN to 0; see
    /// [`crate::element`]). Casting to the same dtype returns this tensor.
    pub fn cast(&self, dtype: DataType) -> Result<Tensor> {
        if dtype == self.dtype {
            return Ok(self.clone());
        }
        let device = self.device();
        device.check_supports(Op::Cast, self.dtype)?;
        device.check_supports(Op::Cast, dtype)?;
        Tensor::produce(self.shape().clone(), dtype, device, |out| {
            device.cast(&self.view(), out)
        })
    }

    /// Matrix product `[.., m, k] x [.., k, n] -> [.., m, n]` with broadcast batch dims.
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        self.matmul_t(other, false, false)
    }

    /// `matmul`'s error for operands whose reduced dims differ.
    fn inner_dims_differ(&self, other: &Tensor, transpose_a: bool, transpose_b: bool) -> Error {
        Error::shape(
            "matmul",
            format!(
                "inner dims differ: {} x {} (transpose_a={transpose_a}, transpose_b={transpose_b})",
                self.shape(),
                other.shape()
            ),
        )
    }

    /// Matrix product with either operand transposed first (its last two dims swapped).
    ///
    /// Besides operands of one dtype, an f32 `self` times bf16 weights (a matrix: `other`
    /// of rank 2) gives f32, multiplied in bf16 with f32 sums, on a device where
    /// [`Device::bf16_weights`](crate::Device::bf16_weights) holds: the session's mixed precision.
    pub fn matmul_t(&self, other: &Tensor, transpose_a: bool, transpose_b: bool) -> Result<Tensor> {
        self.check_same_device(other, "matmul")?;
        let mixed = self.dtype == DataType::Float
            && other.dtype == DataType::BFloat16
            && other.rank() == 2
            && self.rank() >= 2
            && self.device().bf16_weights();
        if mixed {
            let a = if transpose_a { self.t()? } else { self.clone() };
            let b = if transpose_b {
                other.t()?
            } else {
                other.clone()
            };
            let (a, b) = (a.contiguous()?, b.contiguous()?);
            let (ad, [k2, n]) = (a.dims(), [b.dims()[0], b.dims()[1]]);
            let (m, k) = (ad[ad.len() - 2], ad[ad.len() - 1]);
            if k != k2 {
                return Err(self.inner_dims_differ(other, transpose_a, transpose_b));
            }
            let batch = TensorShape::new(&ad[..ad.len() - 2])?;
            let device = self.device();
            return Tensor::produce(
                batch.concatenate(&TensorShape::new(&[m, n])?)?,
                DataType::Float,
                device,
                |out| device.matmul(&a.view(), &b.view(), out),
            );
        }
        if self.dtype != other.dtype {
            return Err(Error::DTypeMismatch {
                op: "matmul",
                expected: self.dtype.to_string(),
                found: other.dtype,
            });
        }
        if self.rank() < 2 || other.rank() < 2 {
            return Err(Error::shape(
                "matmul",
                format!(
                    "operands need rank >= 2, got {} and {}",
                    self.shape(),
                    other.shape()
                ),
            ));
        }
        let device = self.device();
        device.check_supports(Op::Matmul, self.dtype)?;
        let a = if transpose_a { self.t()? } else { self.clone() };
        let b = if transpose_b {
            other.t()?
        } else {
            other.clone()
        };
        let (ad, bd) = (a.dims(), b.dims());
        let (m, k) = (ad[ad.len() - 2], ad[ad.len() - 1]);
        let (k2, n) = (bd[bd.len() - 2], bd[bd.len() - 1]);
        if k != k2 {
            return Err(self.inner_dims_differ(other, transpose_a, transpose_b));
        }
        let batch_a = TensorShape::new(&ad[..ad.len() - 2])?;
        let batch_b = TensorShape::new(&bd[..bd.len() - 2])?;
        let batch = broadcast_shapes(&batch_a, &batch_b)?;
        let a = a.broadcast_to(batch.concatenate(&TensorShape::new(&[m, k])?)?)?;
        let b = b.broadcast_to(batch.concatenate(&TensorShape::new(&[k, n])?)?)?;
        Tensor::produce(
            batch.concatenate(&TensorShape::new(&[m, n])?)?,
            self.dtype,
            device,
            |out| device.matmul(&a.view(), &b.view(), out),
        )
    }

    /// Reduce over `axes` (negative count from the end; empty means none), keeping the
    /// reduced dims as size 1 if `keep_dims`. `argmax` and `argmin` take exactly one axis,
    /// as TensorFlow's `ArgMax` does.
    pub fn reduce(&self, op: ReduceOp, axes: &[isize], keep_dims: bool) -> Result<Tensor> {
        if matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin) && axes.len() != 1 {
            return Err(Error::invalid(format!(
                "{op} takes exactly one axis, got {axes:?} (TensorFlow: dim must be a scalar)"
            )));
        }
        let axes = normalize_axes(axes, self.rank())?;
        let device = self.device();
        device.check_supports(Op::Reduce(op), self.dtype)?;
        let dims = self.dims();
        let reduced: usize = axes.iter().map(|&a| dims[a]).product();
        let kept: Vec<usize> = (0..dims.len())
            .filter_map(|i| match (axes.contains(&i), keep_dims) {
                (false, _) => Some(dims[i]),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect();
        Tensor::produce(
            TensorShape::new(&kept)?,
            op.output_dtype(self.dtype),
            device,
            |out| {
                if reduced == 0 && matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin) {
                    return Err(Error::invalid(format!(
                        "{op} over axes {axes:?} of shape {} reduces no elements",
                        self.shape()
                    )));
                }
                device.reduce(op, &self.view(), &axes, out)
            },
        )
    }

    /// Reduce over every axis to a scalar (TensorFlow's `axis=None`; an empty axis list,
    /// as in TensorFlow, reduces nothing).
    pub fn reduce_all(&self, op: ReduceOp) -> Result<Tensor> {
        let axes: Vec<isize> = (0..self.rank() as isize).collect();
        self.reduce(op, &axes, false)
    }

    reduce_methods! {
        /// Sum over `axes`.
        sum, sum_all => Sum;
        /// Product over `axes`.
        prod, prod_all => Prod;
        /// Mean over `axes`.
        mean, mean_all => Mean;
        /// Maximum over `axes`.
        max, max_all => Max;
        /// Minimum over `axes`.
        min, min_all => Min;
        /// Index of the maximum along the one axis in `axes` (int64; TensorFlow's `ArgMax`).
        argmax => ArgMax;
        /// Index of the minimum along the one axis in `axes` (int64).
        argmin => ArgMin;
    }
}
