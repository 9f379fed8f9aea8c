//! Unary elementwise kernels.

use num_complex::Complex;
use num_traits::{Float, Zero};
use tensor_core::{OutView, Result, TensorView, UnaryOp};

use super::{by_class, unsupported};
use crate::scalar::{FloatElem, IntElem, Real};
use crate::strided::map1;

pub(crate) fn unary(op: UnaryOp, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
    by_class!(x.dtype(),
        float F => float_unary::<F>(op, x, out),
        int I => int_unary::<I>(op, x, out),
        complex R => complex_unary::<R>(op, x, out),
        bool => match op {
            UnaryOp::Not => map1(x, out, |v: bool| !v),
            _ => Err(unsupported(op, x)),
        },
        else => Err(unsupported(op, x)),
    )
}

fn float_unary<T: FloatElem>(op: UnaryOp, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
    type C<T> = <T as FloatElem>::Compute;
    let (zero, one) = (C::<T>::ZERO, C::<T>::ONE);
    macro_rules! apply {
        (|$v:ident| $body:expr) => {
            map1(x, out, |v: T| {
                let $v = v.widen();
                T::narrow($body)
            })
        };
    }
    match op {
        UnaryOp::Neg => apply!(|v| -v),
        UnaryOp::Abs => apply!(|v| v.abs()),
        UnaryOp::Sign => apply!(|v| if v > zero {
            one
        } else if v < zero {
            -one
        } else {
            v
        }),
        UnaryOp::Sqrt => apply!(|v| v.sqrt()),
        UnaryOp::Rsqrt => apply!(|v| one / v.sqrt()),
        UnaryOp::Exp => apply!(|v| v.exp()),
        UnaryOp::Log => apply!(|v| v.ln()),
        UnaryOp::Sin => apply!(|v| v.sin()),
        UnaryOp::Cos => apply!(|v| v.cos()),
        UnaryOp::Tanh => apply!(|v| v.tanh()),
        UnaryOp::Sigmoid => apply!(|v| one / (one + (-v).exp())),
        UnaryOp::Relu => apply!(|v| if v > zero || v.is_nan() { v } else { zero }),
        UnaryOp::Floor => apply!(|v| v.floor()),
        UnaryOp::Ceil => apply!(|v| v.ceil()),
        UnaryOp::Round => apply!(|v| v.round_ties_even()),
        UnaryOp::Recip => apply!(|v| one / v),
        UnaryOp::Square => apply!(|v| v * v),
        UnaryOp::Not => Err(unsupported(op, x)),
    }
}

fn int_unary<T: IntElem>(op: UnaryOp, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
    match op {
        UnaryOp::Neg if T::SIGNED => map1(x, out, |v: T| v.wrapping_neg()),
        UnaryOp::Abs => map1(x, out, |v: T| v.wrapping_abs()),
        UnaryOp::Sign => map1(x, out, |v: T| v.signum()),
        UnaryOp::Relu => map1(x, out, |v: T| v.max(T::ZERO)),
        UnaryOp::Square => map1(x, out, |v: T| v.wrapping_mul(v)),
        _ => Err(unsupported(op, x)),
    }
}

fn complex_unary<R>(op: UnaryOp, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()>
where
    R: Float + tensor_core::Element,
    Complex<R>: tensor_core::Element,
{
    let one = Complex::new(R::one(), R::zero());
    macro_rules! apply {
        (|$z:ident| $body:expr) => {
            map1(x, out, |$z: Complex<R>| $body)
        };
    }
    match op {
        UnaryOp::Neg => apply!(|z| -z),
        UnaryOp::Abs => map1(x, out, |z: Complex<R>| z.norm()),
        UnaryOp::Sign => apply!(|z| if z.is_zero() { z } else { z / z.norm() }),
        UnaryOp::Sqrt => apply!(|z| z.sqrt()),
        UnaryOp::Rsqrt => apply!(|z| one / z.sqrt()),
        UnaryOp::Exp => apply!(|z| z.exp()),
        UnaryOp::Log => apply!(|z| z.ln()),
        UnaryOp::Sin => apply!(|z| z.sin()),
        UnaryOp::Cos => apply!(|z| z.cos()),
        UnaryOp::Tanh => apply!(|z| z.tanh()),
        UnaryOp::Sigmoid => apply!(|z| one / (one + (-z).exp())),
        UnaryOp::Recip => apply!(|z| one / z),
        UnaryOp::Square => apply!(|z| z * z),
        _ => Err(unsupported(op, x)),
    }
}
