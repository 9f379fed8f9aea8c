//! Binary elementwise kernels (inputs already broadcast), comparisons and `where`.

use num_complex::Complex;
use num_traits::Float;
use polytensor_core::{
    dispatch_dtype, BinaryOp, DataType, Element, EmbeddedBuffer, Error, OutView, Result, TensorView,
};

use super::{by_class, unsupported};
use crate::scalar::{maximum, minimum, FloatElem, IntElem, Real};
use crate::strided::{map2, map3};

pub(crate) fn binary(
    op: BinaryOp,
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    binary_on(op, a.dtype(), Views { a, b, out })
}

/// Where a binary kernel reads its operands and writes its result: tensor views of any
/// layout, or the first elements of embedded tensors. Each op's body is written once, over
/// this.
pub(crate) trait Operands2 {
    /// `out[i] = f(a[i], b[i])`.
    fn map<A: Element, B: Element, O: Element>(self, f: impl Fn(A, B) -> O + Sync) -> Result<()>;

    /// The error for an op this kernel does not run on these operands.
    fn unsupported(&self, op: BinaryOp) -> Error;
}

/// Broadcast views of any layout, through the strided drivers.
struct Views<'v, 'a, 'o> {
    a: &'v TensorView<'a>,
    b: &'v TensorView<'a>,
    out: &'v mut OutView<'o>,
}

impl Operands2 for Views<'_, '_, '_> {
    #[inline]
    fn map<A: Element, B: Element, O: Element>(self, f: impl Fn(A, B) -> O + Sync) -> Result<()> {
        map2(self.a, self.b, self.out, f)
    }

    fn unsupported(&self, op: BinaryOp) -> Error {
        unsupported(op, self.a)
    }
}

/// The first `len` elements of embedded tensors: the shortcut of
/// [`polytensor_core::Device::embedded_binary`], through the same kernels.
pub(crate) struct Embedded<'e> {
    pub len: usize,
    pub a: &'e EmbeddedBuffer,
    pub b: &'e EmbeddedBuffer,
    pub out: &'e mut EmbeddedBuffer,
}

impl Operands2 for Embedded<'_> {
    #[inline]
    fn map<A: Element, B: Element, O: Element>(self, f: impl Fn(A, B) -> O + Sync) -> Result<()> {
        let len = self.len;
        match (
            self.a.elements::<A>(len),
            self.b.elements::<B>(len),
            self.out.elements_mut::<O>(len),
        ) {
            (Some(xs), Some(ys), Some(os)) => {
                os.iter_mut()
                    .zip(xs.iter().zip(ys))
                    .for_each(|(o, (&x, &y))| *o = f(x, y));
                Ok(())
            }
            _ => Err(Error::invalid(format!(
                "{len} elements do not fit an embedded buffer"
            ))),
        }
    }

    fn unsupported(&self, op: BinaryOp) -> Error {
        Error::invalid(format!("no embedded shortcut for {op}"))
    }
}

/// `op` on `dtype` operands from `io`.
pub(crate) fn binary_on(op: BinaryOp, dtype: DataType, io: impl Operands2) -> Result<()> {
    if op.is_comparison() {
        return by_class!(dtype,
            float F => compare::<F>(op, io),
            int I => compare::<I>(op, io),
            complex R => equality::<Complex<R>>(op, io),
            bool => compare::<bool>(op, io),
            else => Err(io.unsupported(op)),
        );
    }
    by_class!(dtype,
        float F => float_binary::<F>(op, io),
        int I => int_binary::<I>(op, io),
        complex R => complex_binary::<R>(op, io),
        bool => logical(op, io),
        else => Err(io.unsupported(op)),
    )
}

fn float_binary<T: FloatElem>(op: BinaryOp, io: impl Operands2) -> Result<()> {
    macro_rules! apply {
        (|$x:ident, $y:ident| $body:expr) => {
            io.map(|x: T, y: T| {
                let ($x, $y) = (x.widen(), y.widen());
                T::narrow($body)
            })
        };
    }
    match op {
        BinaryOp::Add => apply!(|x, y| x + y),
        BinaryOp::Sub => apply!(|x, y| x - y),
        BinaryOp::Mul => apply!(|x, y| x * y),
        BinaryOp::Div => apply!(|x, y| x / y),
        BinaryOp::Rem => apply!(|x, y| x % y),
        BinaryOp::Pow => apply!(|x, y| x.powf(y)),
        BinaryOp::Max => apply!(|x, y| maximum(x, y)),
        BinaryOp::Min => apply!(|x, y| minimum(x, y)),
        BinaryOp::SquaredDifference => apply!(|x, y| (x - y) * (x - y)),
        _ => Err(io.unsupported(op)),
    }
}

fn int_binary<T: IntElem>(op: BinaryOp, io: impl Operands2) -> Result<()> {
    match op {
        BinaryOp::Add => io.map(|x: T, y: T| x.wrapping_add(y)),
        BinaryOp::Sub => io.map(|x: T, y: T| x.wrapping_sub(y)),
        BinaryOp::Mul => io.map(|x: T, y: T| x.wrapping_mul(y)),
        BinaryOp::Div => io.map(|x: T, y: T| x.div_convention(y)),
        BinaryOp::Rem => io.map(|x: T, y: T| x.rem_convention(y)),
        BinaryOp::Pow => io.map(|x: T, y: T| x.pow_convention(y)),
        BinaryOp::Max => io.map(|x: T, y: T| x.max(y)),
        BinaryOp::Min => io.map(|x: T, y: T| x.min(y)),
        BinaryOp::SquaredDifference if T::SIGNED => io.map(|x: T, y: T| {
            let d = x.wrapping_sub(y);
            d.wrapping_mul(d)
        }),
        _ => Err(io.unsupported(op)),
    }
}

fn complex_binary<R>(op: BinaryOp, io: impl Operands2) -> Result<()>
where
    R: Float + Element,
    Complex<R>: Element,
{
    type Z<R> = Complex<R>;
    match op {
        BinaryOp::Add => io.map(|x: Z<R>, y: Z<R>| x + y),
        BinaryOp::Sub => io.map(|x: Z<R>, y: Z<R>| x - y),
        BinaryOp::Mul => io.map(|x: Z<R>, y: Z<R>| x * y),
        BinaryOp::Div => io.map(|x: Z<R>, y: Z<R>| x / y),
        BinaryOp::Pow => io.map(|x: Z<R>, y: Z<R>| x.powc(y)),
        _ => Err(io.unsupported(op)),
    }
}

fn logical(op: BinaryOp, io: impl Operands2) -> Result<()> {
    match op {
        BinaryOp::And => io.map(|x: bool, y: bool| x & y),
        BinaryOp::Or => io.map(|x: bool, y: bool| x | y),
        BinaryOp::Xor => io.map(|x: bool, y: bool| x ^ y),
        _ => Err(io.unsupported(op)),
    }
}

fn compare<T: Element + PartialOrd>(op: BinaryOp, io: impl Operands2) -> Result<()> {
    match op {
        BinaryOp::Lt => io.map(|x: T, y: T| x < y),
        BinaryOp::Le => io.map(|x: T, y: T| x <= y),
        BinaryOp::Gt => io.map(|x: T, y: T| x > y),
        BinaryOp::Ge => io.map(|x: T, y: T| x >= y),
        _ => equality::<T>(op, io),
    }
}

fn equality<T: Element>(op: BinaryOp, io: impl Operands2) -> Result<()> {
    match op {
        BinaryOp::Eq => io.map(|x: T, y: T| x == y),
        BinaryOp::Ne => io.map(|x: T, y: T| x != y),
        _ => Err(io.unsupported(op)),
    }
}

/// `out = cond ? a : b`.
pub(crate) fn select(
    cond: &TensorView<'_>,
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    dispatch_dtype!(a.dtype(),
        T => map3(cond, a, b, out, |c: bool, x: T, y: T| if c { x } else { y }),
        _ => Err(unsupported("where", a)))
}
