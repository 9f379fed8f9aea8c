//! Binary elementwise kernels (inputs already broadcast), comparisons and `where`.

use num_complex::Complex;
use num_traits::Float;
use polytensor_core::{dispatch_dtype, BinaryOp, Element, OutView, Result, TensorView};

use super::{by_class, unsupported};
use crate::scalar::{maximum, minimum, FloatElem, IntElem, Real};
use crate::strided::{map2, map3};

pub(crate) fn binary(
    op: BinaryOp,
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    if op.is_comparison() {
        return by_class!(a.dtype(),
            float F => compare::<F>(op, a, b, out),
            int I => compare::<I>(op, a, b, out),
            complex R => equality::<Complex<R>>(op, a, b, out),
            bool => compare::<bool>(op, a, b, out),
            else => Err(unsupported(op, a)),
        );
    }
    by_class!(a.dtype(),
        float F => float_binary::<F>(op, a, b, out),
        int I => int_binary::<I>(op, a, b, out),
        complex R => complex_binary::<R>(op, a, b, out),
        bool => logical(op, a, b, out),
        else => Err(unsupported(op, a)),
    )
}

fn float_binary<T: FloatElem>(
    op: BinaryOp,
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    macro_rules! apply {
        (|$x:ident, $y:ident| $body:expr) => {
            map2(a, b, out, |x: T, y: T| {
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
        _ => Err(unsupported(op, a)),
    }
}

fn int_binary<T: IntElem>(
    op: BinaryOp,
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    match op {
        BinaryOp::Add => map2(a, b, out, |x: T, y: T| x.wrapping_add(y)),
        BinaryOp::Sub => map2(a, b, out, |x: T, y: T| x.wrapping_sub(y)),
        BinaryOp::Mul => map2(a, b, out, |x: T, y: T| x.wrapping_mul(y)),
        BinaryOp::Div => map2(a, b, out, |x: T, y: T| x.div_convention(y)),
        BinaryOp::Rem => map2(a, b, out, |x: T, y: T| x.rem_convention(y)),
        BinaryOp::Pow => map2(a, b, out, |x: T, y: T| x.pow_convention(y)),
        BinaryOp::Max => map2(a, b, out, |x: T, y: T| x.max(y)),
        BinaryOp::Min => map2(a, b, out, |x: T, y: T| x.min(y)),
        _ => Err(unsupported(op, a)),
    }
}

fn complex_binary<R>(
    op: BinaryOp,
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<()>
where
    R: Float + Element,
    Complex<R>: Element,
{
    type Z<R> = Complex<R>;
    match op {
        BinaryOp::Add => map2(a, b, out, |x: Z<R>, y: Z<R>| x + y),
        BinaryOp::Sub => map2(a, b, out, |x: Z<R>, y: Z<R>| x - y),
        BinaryOp::Mul => map2(a, b, out, |x: Z<R>, y: Z<R>| x * y),
        BinaryOp::Div => map2(a, b, out, |x: Z<R>, y: Z<R>| x / y),
        BinaryOp::Pow => map2(a, b, out, |x: Z<R>, y: Z<R>| x.powc(y)),
        _ => Err(unsupported(op, a)),
    }
}

fn logical(
    op: BinaryOp,
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    match op {
        BinaryOp::And => map2(a, b, out, |x: bool, y: bool| x & y),
        BinaryOp::Or => map2(a, b, out, |x: bool, y: bool| x | y),
        BinaryOp::Xor => map2(a, b, out, |x: bool, y: bool| x ^ y),
        _ => Err(unsupported(op, a)),
    }
}

fn compare<T: Element + PartialOrd>(
    op: BinaryOp,
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    match op {
        BinaryOp::Lt => map2(a, b, out, |x: T, y: T| x < y),
        BinaryOp::Le => map2(a, b, out, |x: T, y: T| x <= y),
        BinaryOp::Gt => map2(a, b, out, |x: T, y: T| x > y),
        BinaryOp::Ge => map2(a, b, out, |x: T, y: T| x >= y),
        _ => equality::<T>(op, a, b, out),
    }
}

fn equality<T: Element>(
    op: BinaryOp,
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    match op {
        BinaryOp::Eq => map2(a, b, out, |x: T, y: T| x == y),
        BinaryOp::Ne => map2(a, b, out, |x: T, y: T| x != y),
        _ => Err(unsupported(op, a)),
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
