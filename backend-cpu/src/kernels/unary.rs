//! Unary elementwise kernels.

use num_complex::Complex;
use num_traits::{Float, Zero};
use polytensor_core::{Element, OutView, Result, TensorView, UnaryOp};
use rayon::prelude::*;

use super::{by_class, unsupported};
use crate::scalar::{FloatElem, IntElem, Real};
use crate::strided::{map1, map1_runs, map2};
use crate::vmath;

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
    if T::DTYPE == polytensor_core::DataType::Float && vmath::has_kernel(op) {
        return vector_unary_f32(op, x, out);
    }
    type C<T> = <T as FloatElem>::Compute;
    let (zero, one) = (C::<T>::ZERO, C::<T>::ONE);
    let six = (one + one) * (one + one + one);
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
        UnaryOp::Sigmoid => apply!(|v| if v >= zero {
            one / (one + (-v).exp())
        } else {
            let e = v.exp();
            e / (one + e)
        }),
        UnaryOp::Erf => apply!(|v| v.erf()),
        UnaryOp::Erfc => apply!(|v| v.erfc()),
        UnaryOp::Relu => apply!(|v| if v > zero || v.is_nan() { v } else { zero }),
        // NaN and -0.0 compare false both ways, so they stay.
        UnaryOp::Relu6 => apply!(|v| if v < zero {
            zero
        } else if v > six {
            six
        } else {
            v
        }),
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
        UnaryOp::Relu6 => map1(x, out, |v: T| v.max(T::ZERO).min(T::SIX)),
        UnaryOp::Square => map1(x, out, |v: T| v.wrapping_mul(v)),
        _ => Err(unsupported(op, x)),
    }
}

fn complex_unary<R>(op: UnaryOp, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()>
where
    R: Float + polytensor_core::Element,
    Complex<R>: polytensor_core::Element,
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
        UnaryOp::Tanh => apply!(|z| complex_tanh(z)),
        UnaryOp::Sigmoid => apply!(|z| one / (one + (-z).exp())),
        UnaryOp::Recip => apply!(|z| one / z),
        UnaryOp::Square => apply!(|z| z * z),
        _ => Err(unsupported(op, x)),
    }
}

/// `tanh(a + ib)` by Kahan's formulation (as C99 `ctanh`): with `t = tan b`, `s = sinh a`,
/// `tanh z = (beta rho s + i t) / (1 + beta s^2)`, `beta = 1 + t^2`, `rho = sqrt(1 + s^2)`.
/// The textbook `sin(2b) / (cosh 2a + cos 2b)` cancels near the poles and loses every digit.
fn complex_tanh<R: Float>(z: Complex<R>) -> Complex<R> {
    let (a, b) = (z.re, z.im);
    let one = R::one();
    if !a.is_finite() || !b.is_finite() {
        return z.tanh();
    }
    let twenty = R::from(20.0).expect("20 is representable");
    if a.abs() > twenty {
        // tanh a rounds to +-1; the imaginary part is 2 sin 2b e^(-2|a|).
        let four = R::from(4.0).expect("4 is representable");
        let sign = if a < R::zero() { -one } else { one };
        return Complex::new(
            sign,
            four * b.sin() * b.cos() * (-(a.abs() + a.abs())).exp(),
        );
    }
    let t = b.tan();
    let beta = one + t * t;
    let s = a.sinh();
    let rho = (one + s * s).sqrt();
    let denominator = one + beta * s * s;
    Complex::new(beta * rho * s / denominator, t / denominator)
}

/// f32 transcendentals through the vectorised kernels (contiguous runs directly, strided
/// runs gathered into small buffers first).
fn vector_unary_f32(op: UnaryOp, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
    // The caller checked `vmath::has_kernel(op)`, so every run is computed.
    map1_runs(x, out, &|xs: &[f32], os: &mut [f32]| {
        let computed = vmath::unary_f32(op, xs, os);
        debug_assert!(computed, "{op:?} has a vectorised kernel");
    })
}

/// `Device::softmax` for f32: each row's max, its shifted exponentials (the vectorised
/// `exp`), their sum and the scaling by its inverse (or, `log`, the shift and the log of
/// the sum), while the row is in cache; rows split across threads. `false` for other dtypes or a strided
/// `x`.
pub(crate) fn softmax(x: &TensorView<'_>, log: bool, out: &mut OutView<'_>) -> Result<bool> {
    if !one_pass_f32(x, out) {
        return Ok(false);
    }
    let n = x.layout().num_elements();
    let width = x.layout().shape().dims().last().copied().unwrap_or(1);
    let start = x.layout().offset();
    let src = &crate::strided::input::<f32>(x)?[start..start + n];
    let dst = crate::strided::output::<f32>(out)?;
    if n == 0 || width == 0 {
        return Ok(true);
    }
    // Each block through the vectorised softmax of `vmath` (its lanes compiled for this
    // CPU, chosen once per block).
    row_blocks(width, src, dst, |x, out| {
        vmath::softmax_rows_f32(width, log, x, out)
    });
    Ok(true)
}

/// `block(x, out)` over blocks of whole `width`-element rows of `src` and `dst`: one block
/// below [`crate::strided::PARALLEL_MIN_ELEMENTS`], else blocks of a few thousand elements
/// at least, split across threads.
fn row_blocks(
    width: usize,
    src: &[f32],
    dst: &mut [f32],
    block: impl Fn(&[f32], &mut [f32]) + Sync,
) {
    if src.len() < crate::strided::PARALLEL_MIN_ELEMENTS {
        block(src, dst);
    } else {
        let rows = (4096 / width).max(1) * width;
        src.par_chunks(rows)
            .zip(dst.par_chunks_mut(rows))
            .for_each(|(x, out)| block(x, out));
    }
}

/// `Device::layer_norm` for f32: each row's mean and biased variance (sums in the lanes of
/// the `Mean` kernel, the squared differences laid in the output row first), then `x * inv
/// + (-mean * inv + beta)` with `inv = rsqrt(var + epsilon) * gamma`, each op rounded as
/// the graph's ops round; blocks of rows split across threads. `false` for other dtypes, a
/// strided `x`, or `gamma`/`beta` that are not contiguous f32 of one value per column.
pub(crate) fn layer_norm(
    x: &TensorView<'_>,
    gamma: Option<&TensorView<'_>>,
    beta: Option<&TensorView<'_>>,
    epsilon: f64,
    out: &mut OutView<'_>,
) -> Result<bool> {
    use super::reduce_fast::sum_run;
    if !one_pass_f32(x, out) {
        return Ok(false);
    }
    let n = x.layout().num_elements();
    let width = x.layout().shape().dims().last().copied().unwrap_or(1);
    let (Some(gamma), Some(beta)) = (per_column(gamma, width)?, per_column(beta, width)?) else {
        return Ok(false);
    };
    let start = x.layout().offset();
    let src = &crate::strided::input::<f32>(x)?[start..start + n];
    let dst = crate::strided::output::<f32>(out)?;
    if n == 0 || width == 0 {
        return Ok(true);
    }
    let epsilon = epsilon as f32;
    let count = width as f64;
    let row = |x: &[f32], out: &mut [f32]| {
        let mean = (sum_run(x) / count) as f32;
        for (o, &v) in out.iter_mut().zip(x) {
            *o = (v - mean) * (v - mean);
        }
        let variance = (sum_run(out) / count) as f32;
        let inv = 1.0 / (variance + epsilon).sqrt();
        let negated = -mean;
        for (c, (o, &v)) in out.iter_mut().zip(x).enumerate() {
            let scale = gamma.map_or(inv, |g| inv * g[c]);
            let shift = beta.map_or(negated * scale, |b| negated * scale + b[c]);
            *o = v * scale + shift;
        }
    };
    row_blocks(width, src, dst, |x, out| {
        x.chunks_exact(width)
            .zip(out.chunks_exact_mut(width))
            .for_each(|(x, out)| row(x, out))
    });
    Ok(true)
}

/// A layer normalization's `gamma` or `beta`: `Some(None)` when absent, `Some(values)` when
/// contiguous f32 of `width` values, `None` (the ops run instead) otherwise.
fn per_column<'a>(v: Option<&TensorView<'a>>, width: usize) -> Result<Option<Option<&'a [f32]>>> {
    let Some(v) = v else { return Ok(Some(None)) };
    if v.dtype() != polytensor_core::DataType::Float
        || !v.layout().is_contiguous()
        || v.layout().num_elements() != width
    {
        return Ok(None);
    }
    let start = v.layout().offset();
    Ok(Some(Some(
        &crate::strided::input::<f32>(v)?[start..start + width],
    )))
}

/// `Device::swish` for f32: `x * sigmoid(beta * x)` in one vectorised pass, pieces split
/// across threads. `false` for other dtypes or a strided `x`.
pub(crate) fn swish(x: &TensorView<'_>, beta: f64, out: &mut OutView<'_>) -> Result<bool> {
    if !one_pass_f32(x, out) {
        return Ok(false);
    }
    let beta = beta as f32;
    map1_runs(x, out, &|xs: &[f32], os: &mut [f32]| {
        vmath::swish_f32(beta, xs, os)
    })?;
    Ok(true)
}

/// `Device::gelu` for f32: `(0.5 * x) * erfc(-x * (1/√2))` in one vectorised pass, pieces
/// split across threads. `false` for other dtypes or a strided `x`.
pub(crate) fn gelu(x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<bool> {
    if !one_pass_f32(x, out) {
        return Ok(false);
    }
    map1_runs(x, out, &|xs: &[f32], os: &mut [f32]| {
        vmath::gelu_f32(xs, os)
    })?;
    Ok(true)
}

/// `Device::hard_swish` for f32: `x * (clamp(x + 3, 0, 6) / 6)` (or `* (1/6)` where not
/// `divide`), each op rounded as its own kernel rounds, in one pass split across threads.
/// `false` for other dtypes or a strided `x`.
pub(crate) fn hard_swish(x: &TensorView<'_>, divide: bool, out: &mut OutView<'_>) -> Result<bool> {
    if !one_pass_f32(x, out) {
        return Ok(false);
    }
    let sixth = 1.0f32 / 6.0;
    map1_runs(x, out, &|xs: &[f32], os: &mut [f32]| {
        for (o, &x) in os.iter_mut().zip(xs) {
            let clamped = (x + 3.0).clamp(0.0, 6.0);
            *o = x * if divide {
                clamped / 6.0
            } else {
                clamped * sixth
            };
        }
    })?;
    Ok(true)
}

/// `Device::unary_grad` for f32 and f64: TensorFlow's gradient of `op` from `value` and
/// `dy` in one pass, each element computed by the very operations, in the very order, of
/// the elementwise ops `Tensor::unary_grad` composes (so the results are the same bits).
/// `false` for other dtypes, or inputs of different dtypes.
pub(crate) fn unary_grad(
    op: UnaryOp,
    value: &TensorView<'_>,
    dy: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<bool> {
    use polytensor_core::DataType;
    if value.dtype() != dy.dtype() || out.dtype() != dy.dtype() {
        return Ok(false);
    }
    match dy.dtype() {
        DataType::Float => grad_of::<f32>(op, value, dy, out),
        DataType::Double => grad_of::<f64>(op, value, dy, out),
        _ => Ok(false),
    }
}

/// A float that is 1 where a condition holds and 0 where not, made from the condition's
/// bits so that the loops computing it vectorise (a branch or a select of two constants
/// compiles to a table lookup per element).
trait Indicator: Copy {
    fn indicator(holds: bool) -> Self;
}

impl Indicator for f32 {
    #[inline(always)]
    fn indicator(holds: bool) -> f32 {
        f32::from_bits((holds as u32).wrapping_neg() & 1f32.to_bits())
    }
}

impl Indicator for f64 {
    #[inline(always)]
    fn indicator(holds: bool) -> f64 {
        f64::from_bits((holds as u64).wrapping_neg() & 1f64.to_bits())
    }
}

fn grad_of<T: Float + Indicator + Element + Send + Sync>(
    op: UnaryOp,
    value: &TensorView<'_>,
    dy: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<bool> {
    let number = |v: f64| T::from(v).unwrap_or_else(T::zero);
    let (zero, one, six, half) = (T::zero(), T::one(), number(6.0), number(0.5));
    let mask = T::indicator;
    match op {
        // dy * (x > 0), a product (a NaN gradient stays NaN).
        UnaryOp::Relu => map2(value, dy, out, move |x: T, d: T| d * mask(x > zero))?,
        UnaryOp::Relu6 => map2(value, dy, out, move |x: T, d: T| {
            d * mask(x > zero && x < six)
        })?,
        // dy * y * (1 - y), in that order.
        UnaryOp::Sigmoid => map2(value, dy, out, move |y: T, d: T| d * y * (one - y))?,
        // dy * (1 - y * y).
        UnaryOp::Tanh => map2(value, dy, out, move |y: T, d: T| d * (one - y * y))?,
        // 0.5 * dy / y.
        UnaryOp::Sqrt => map2(value, dy, out, move |y: T, d: T| half * d / y)?,
        // -0.5 * (dy * y) * (y * y).
        UnaryOp::Rsqrt => map2(value, dy, out, move |y: T, d: T| -half * (d * y) * (y * y))?,
        // -dy * y * y.
        UnaryOp::Recip => map2(value, dy, out, move |y: T, d: T| -d * y * y)?,
        _ => return Ok(false),
    }
    Ok(true)
}

/// Whether the one-pass f32 kernels take `x` for `out`: contiguous f32 of `out`'s shape.
fn one_pass_f32(x: &TensorView<'_>, out: &OutView<'_>) -> bool {
    x.dtype() == polytensor_core::DataType::Float
        && x.layout().is_contiguous()
        && x.layout().shape() == out.layout().shape()
}
