//! `Device::max_pool_grad`: TensorFlow's `MaxPoolGrad` in one pass, each image on its own
//! thread: per window, the gradient added at the first element (row-major, padding
//! skipped) that equals the window's maximum, channels innermost.

use polytensor_core::plan::window::WindowGeometry;
use polytensor_core::{DataType, Element, OutView, Result, TensorView};

use crate::strided::{contiguous_input, output, run_items, SharedOut};

/// [`Device::max_pool_grad`](polytensor_core::Device::max_pool_grad) on the CPU, for float32
/// and float64.
pub(crate) fn max_pool_grad(
    x: &TensorView<'_>,
    y: &TensorView<'_>,
    dy: &TensorView<'_>,
    geometry: &WindowGeometry,
    out: &mut OutView<'_>,
) -> Result<bool> {
    match x.dtype() {
        DataType::Float => run::<f32>(x, y, dy, geometry, out),
        DataType::Double => run::<f64>(x, y, dy, geometry, out),
        _ => Ok(false),
    }
}

/// The elements of a contiguous view of `count` elements, or `None`.
fn elements<'a, T: Element>(view: &TensorView<'a>, count: usize) -> Result<Option<&'a [T]>> {
    Ok(contiguous_input::<T>(view)?.filter(|values| values.len() == count))
}

fn run<T: Number + Send + Sync>(
    x: &TensorView<'_>,
    y: &TensorView<'_>,
    dy: &TensorView<'_>,
    g: &WindowGeometry,
    out: &mut OutView<'_>,
) -> Result<bool> {
    let [h, w] = g.input;
    let [oh, ow] = g.output;
    let c = g.channels;
    let image = h * w * c;
    let pooled = oh * ow * c;
    let (Some(x), Some(y), Some(dy)) = (
        elements::<T>(x, g.batch * image)?,
        elements::<T>(y, g.batch * pooled)?,
        elements::<T>(dy, g.batch * pooled)?,
    ) else {
        return Ok(false);
    };
    let grad = output::<T>(out)?;
    let shared = SharedOut::new(grad);
    let avx2 = super::window::fused_multiply_add();
    run_items(g.batch, g.batch > 1, &|b| {
        // SAFETY: each item owns image `b` of the output.
        let grad = unsafe { shared.run(b * image, image) };
        let operands = Image {
            x: &x[b * image..][..image],
            y: &y[b * pooled..][..pooled],
            dy: &dy[b * pooled..][..pooled],
            grad,
        };
        #[cfg(target_arch = "x86_64")]
        if avx2 {
            // SAFETY: `avx2` is true only where the CPU has AVX2 (and FMA).
            unsafe { image_grad_avx2(operands, g) };
            return;
        }
        let _ = avx2;
        image_grad(operands, g);
    });
    Ok(true)
}

/// One image's operands: its input, the pool's output and its gradient, and the input's
/// gradient to write.
struct Image<'a, T> {
    x: &'a [T],
    y: &'a [T],
    dy: &'a [T],
    grad: &'a mut [T],
}

/// [`image_grad`] compiled for AVX2 (the channels eight lanes at a time).
///
/// # Safety
///
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn image_grad_avx2<T: Number>(image: Image<'_, T>, g: &WindowGeometry) {
    image_grad(image, g);
}

/// What the kernel's element types do.
trait Number:
    Element
    + PartialEq
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
{
}

impl Number for f32 {}
impl Number for f64 {}

/// One image's gradient: zeroed (on its thread, just before its sums, so in cache), then
/// each window's gradient added at its first maximum.
#[inline(always)]
fn image_grad<T: Number>(Image { x, y, dy, grad }: Image<'_, T>, g: &WindowGeometry) {
    let [h, w] = g.input;
    let [oh, ow] = g.output;
    let c = g.channels;
    let zero = T::from_scalar(polytensor_core::Scalar::F64(0.0));
    let one = T::from_scalar(polytensor_core::Scalar::F64(1.0));
    let finite = all_finite(dy, zero);
    grad.fill(zero);
    let [top, left] = g.before.map(|b| b as isize);
    let [wh, ww] = g.windows;
    // Per channel, 1 until the window's first maximum is found, then 0.
    let mut pending = vec![one; c];
    for i in 0..oh {
        for j in 0..ow {
            pending.fill(one);
            let at = (i * ow + j) * c;
            let (best, step) = (&y[at..at + c], &dy[at..at + c]);
            for a in 0..wh.size {
                let row = (i * wh.stride + a) as isize - top;
                if row < 0 || row >= h as isize {
                    continue;
                }
                for t in 0..ww.size {
                    let col = (j * ww.stride + t) as isize - left;
                    if col < 0 || col >= w as isize {
                        continue;
                    }
                    let pixel = (row as usize * w + col as usize) * c;
                    let (values, sums) = (&x[pixel..pixel + c], &mut grad[pixel..pixel + c]);
                    let window = Tap {
                        pending: &mut pending,
                        values,
                        best,
                        step,
                        sums,
                    };
                    if finite {
                        window.first_maxima::<true>(zero, one);
                    } else {
                        window.first_maxima::<false>(zero, one);
                    }
                }
            }
        }
    }
}

/// Whether every value is finite: `d * 0` is 0 for a finite `d` and NaN otherwise, and a
/// sum of those is NaN where any is. Eight sums side by side, without an early exit, so
/// that the loop vectorises.
#[inline(always)]
fn all_finite<T: Number>(values: &[T], zero: T) -> bool {
    const LANES: usize = 8;
    let mut sums = [zero; LANES];
    let chunks = values.chunks_exact(LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (sum, &d) in sums.iter_mut().zip(chunk) {
            *sum = *sum + d * zero;
        }
    }
    for (sum, &d) in sums.iter_mut().zip(tail) {
        *sum = *sum + d * zero;
    }
    sums.iter().all(|&s| s == zero)
}

/// One tap of a window, across its channels: the input's values there, the window's
/// maxima and gradients, the gradient's sums there, and which channels still look for
/// their window's first maximum (1) or found it (0).
struct Tap<'a, T> {
    pending: &'a mut [T],
    values: &'a [T],
    best: &'a [T],
    step: &'a [T],
    sums: &'a mut [T],
}

impl<T> Tap<'_, T>
where
    T: Copy
        + PartialEq
        + std::ops::Add<Output = T>
        + std::ops::Sub<Output = T>
        + std::ops::Mul<Output = T>,
{
    /// Where the value is the window's maximum and no earlier tap was, add the gradient
    /// and mark the channel found. Arithmetic on 0/1 multipliers, so that the channels
    /// vectorise: a miss adds `0 * dy`, zero where `dy` is finite (`FINITE`); otherwise a
    /// select adds zero, as an infinite or NaN `dy` must reach its maximum alone.
    #[inline(always)]
    fn first_maxima<const FINITE: bool>(self, zero: T, one: T) {
        let lanes = self.pending.iter_mut().zip(self.values).zip(self.best);
        let lanes = lanes.zip(self.step).zip(self.sums.iter_mut());
        for ((((left, &v), &top), &d), sum) in lanes {
            let take = if v == top { *left } else { zero };
            *left = *left - take;
            *sum = *sum
                + if FINITE {
                    take * d
                } else if take == one {
                    d
                } else {
                    zero
                };
        }
    }
}
