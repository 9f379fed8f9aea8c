//! Direct window kernels for f32 and f64 (`Device::conv2d`, `Device::pool2d`), on contiguous
//! NHWC tensors, with the padding handled in the loops (no padded copy):
//! - a full convolution is an implicit GEMM: output rows in blocks of [`BLOCK_ROWS`], each
//!   block's im2col panel packed on its thread (it stays in L2) and multiplied by the
//!   filter with one single-threaded `gemm`; a 1x1 convolution with stride 1 multiplies the
//!   input rows themselves; one of fewer than [`FEW_CHANNELS`] input channels (a first
//!   layer) runs directly, each tap times the filter's row of outputs;
//! - a depthwise convolution and pooling walk each output row once, the channels innermost
//!   (contiguous in the input, the filter and the output, so the loops vectorise).

use num_traits::Float;
use rayon::prelude::*;

use polytensor_core::plan::window::WindowGeometry;
use polytensor_core::{DataType, Element, Epilogue, OutView, Result, TensorView, UnaryOp};

use super::matmul::{gemm_rows, GemmElem};
use super::unsupported;
use crate::strided::{input, output};

/// Output rows per block of the implicit GEMM: a panel of 128 rows of 3x3x64 taps is
/// 288 KiB of f32.
const BLOCK_ROWS: usize = 128;

/// Below this many input channels a convolution runs directly (each output pixel's taps
/// times the filter's rows): a GEMM over so short a reduction has nothing to reuse, and
/// packing its panel costs more than the arithmetic.
const FEW_CHANNELS: usize = 8;

/// Whether the direct kernels run for `dtype`.
pub(crate) fn runs(dtype: DataType) -> bool {
    matches!(dtype, DataType::Float | DataType::Double)
}

/// The elements of a contiguous view.
fn elements<'a, T: Element>(view: &TensorView<'a>) -> Result<&'a [T]> {
    let start = view.layout().offset();
    Ok(&input::<T>(view)?[start..start + view.layout().num_elements()])
}

/// `Device::conv2d`.
pub(crate) fn conv2d(
    x: &TensorView<'_>,
    filter: &TensorView<'_>,
    g: &WindowGeometry,
    depthwise: bool,
    epilogue: &Epilogue<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    match x.dtype() {
        DataType::Float => conv_typed::<f32>(x, filter, g, depthwise, epilogue, out),
        DataType::Double => conv_typed::<f64>(x, filter, g, depthwise, epilogue, out),
        _ => Err(unsupported("conv2d", x)),
    }
}

fn conv_typed<T: GemmElem + Float + Send + Sync>(
    x: &TensorView<'_>,
    filter: &TensorView<'_>,
    g: &WindowGeometry,
    depthwise: bool,
    epilogue: &Epilogue<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    let (x, f) = (elements::<T>(x)?, elements::<T>(filter)?);
    let finish = Finish {
        scale: epilogue.scale.as_ref().map(elements::<T>).transpose()?,
        shift: epilogue.shift.as_ref().map(elements::<T>).transpose()?,
        activation: epilogue.activation,
    };
    let out = output::<T>(out)?;
    if depthwise {
        depthwise_conv(x, f, g, &finish, out);
    } else if g.channels < FEW_CHANNELS {
        few_channels_conv(x, f, g, &finish, out);
    } else {
        implicit_gemm(x, f, g, &finish, out);
    }
    Ok(())
}

/// A convolution's epilogue on host elements: per channel `activation(v * scale + shift)`.
struct Finish<'a, T> {
    scale: Option<&'a [T]>,
    shift: Option<&'a [T]>,
    activation: Option<UnaryOp>,
}

impl<T: Float> Finish<'_, T> {
    /// Apply to `rows` of one value per channel (nothing to do without an epilogue). Every
    /// element is stored, selected rather than branched on, so the loops vectorise.
    fn apply(&self, rows: &mut [T], channels: usize) {
        if self.scale.is_none() && self.shift.is_none() && self.activation.is_none() {
            return;
        }
        let (zero, six) = (T::zero(), T::from(6.0).unwrap_or_else(T::zero));
        for row in rows.chunks_exact_mut(channels) {
            match (self.scale, self.shift) {
                (Some(a), Some(b)) => row
                    .iter_mut()
                    .zip(a.iter().zip(b))
                    .for_each(|(v, (&a, &b))| *v = *v * a + b),
                (Some(a), None) => row.iter_mut().zip(a).for_each(|(v, &a)| *v = *v * a),
                (None, Some(b)) => row.iter_mut().zip(b).for_each(|(v, &b)| *v = *v + b),
                (None, None) => {}
            }
            match self.activation {
                // NaN stays (it is not <= 0); -0 becomes +0: the CPU's `relu`.
                Some(UnaryOp::Relu) => row.iter_mut().for_each(|v| {
                    let x = *v;
                    *v = if x <= zero { zero } else { x };
                }),
                // NaN and -0 stay: the CPU's `relu6`.
                Some(UnaryOp::Relu6) => row.iter_mut().for_each(|v| {
                    let x = *v;
                    *v = if x < zero {
                        zero
                    } else if x > six {
                        six
                    } else {
                        x
                    };
                }),
                _ => {}
            }
        }
    }
}

/// The input pixel `[image, h, w, ..]`'s channels.
fn pixel<'a, T>(x: &'a [T], g: &WindowGeometry, image: usize, h: usize, w: usize) -> &'a [T] {
    let at = ((image * g.input[0] + h) * g.input[1] + w) * g.channels;
    &x[at..at + g.channels]
}

fn implicit_gemm<T: GemmElem + Float + Send + Sync>(
    x: &[T],
    f: &[T],
    g: &WindowGeometry,
    finish: &Finish<'_, T>,
    out: &mut [T],
) {
    let [kh, kw] = [g.windows[0].size, g.windows[1].size];
    let (c, o) = (g.channels, g.filters);
    let k = kh * kw * c;
    let pointwise = kh == 1
        && kw == 1
        && g.windows.iter().all(|w| w.stride == 1)
        && g.before == [0, 0]
        && g.output == g.input;
    let [oh, ow] = g.output;
    out.par_chunks_mut(BLOCK_ROWS * o)
        .enumerate()
        .for_each_init(Vec::new, |panel: &mut Vec<T>, (block, out)| {
            let first = block * BLOCK_ROWS;
            let rows = out.len() / o;
            if pointwise {
                gemm_rows(rows, o, k, &x[first * k..(first + rows) * k], f, out);
                finish.apply(out, o);
                return;
            }
            panel.resize(rows * k, T::zero());
            for (i, taps) in panel.chunks_exact_mut(k).enumerate() {
                let row = first + i;
                let (image, y, xo) = (row / (oh * ow), (row / ow) % oh, row % ow);
                for a in 0..kh {
                    let h = g.tap(0, y, a);
                    for b in 0..kw {
                        let tap = &mut taps[(a * kw + b) * c..][..c];
                        match (h, g.tap(1, xo, b)) {
                            // A few channels (a first layer's 1 or 3) are not worth a memcpy.
                            (Some(h), Some(w)) if c < 8 => {
                                let src = pixel(x, g, image, h, w);
                                tap.iter_mut().zip(src).for_each(|(d, &v)| *d = v);
                            }
                            (Some(h), Some(w)) => tap.copy_from_slice(pixel(x, g, image, h, w)),
                            _ => tap.fill(T::zero()),
                        }
                    }
                }
            }
            gemm_rows(rows, o, k, panel, f, out);
            finish.apply(out, o);
        });
}

/// A convolution of few input channels (a network's first layer): per output pixel, each
/// tap's channels times the filter's row of all outputs, the outputs innermost.
fn few_channels_conv<T: Float + Send + Sync>(
    x: &[T],
    f: &[T],
    g: &WindowGeometry,
    finish: &Finish<'_, T>,
    out: &mut [T],
) {
    let [oh, ow] = g.output;
    let fused = fused_multiply_add();
    out.par_chunks_mut(ow * g.filters)
        .enumerate()
        .for_each(|(row, out)| {
            let (image, y) = (row / oh, row % oh);
            #[cfg(target_arch = "x86_64")]
            if fused {
                // SAFETY: `fused` is true only where the CPU has AVX2 and FMA.
                unsafe { few_channels_row_fma(x, f, g, image, y, out) };
                finish.apply(out, g.filters);
                return;
            }
            let _ = fused;
            few_channels_row::<T, false>(x, f, g, image, y, out);
            finish.apply(out, g.filters);
        });
}

/// [`few_channels_row`] compiled for AVX2 and FMA.
///
/// # Safety
///
/// The CPU must have AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn few_channels_row_fma<T: Float>(
    x: &[T],
    f: &[T],
    g: &WindowGeometry,
    image: usize,
    y: usize,
    out: &mut [T],
) {
    few_channels_row::<T, true>(x, f, g, image, y, out);
}

/// Output row `y` of image `image` of a few-channel convolution (`FUSED`: with fused
/// multiply-adds).
#[inline(always)]
fn few_channels_row<T: Float, const FUSED: bool>(
    x: &[T],
    f: &[T],
    g: &WindowGeometry,
    image: usize,
    y: usize,
    out: &mut [T],
) {
    let [kh, kw] = [g.windows[0].size, g.windows[1].size];
    let (c, o) = (g.channels, g.filters);
    let madd = |a: T, x: T, f: T| if FUSED { x.mul_add(f, a) } else { a + x * f };
    out.fill(T::zero());
    for a in 0..kh {
        let Some(h) = g.tap(0, y, a) else { continue };
        for (xo, acc) in out.chunks_exact_mut(o).enumerate() {
            for b in 0..kw {
                let Some(w) = g.tap(1, xo, b) else { continue };
                let xs = pixel(x, g, image, h, w);
                let taps = &f[(a * kw + b) * c * o..][..c * o];
                for (&v, weights) in xs.iter().zip(taps.chunks_exact(o)) {
                    for (a, &wv) in acc.iter_mut().zip(weights) {
                        *a = madd(*a, v, wv);
                    }
                }
            }
        }
    }
}

fn depthwise_conv<T: Float + Send + Sync>(
    x: &[T],
    f: &[T],
    g: &WindowGeometry,
    finish: &Finish<'_, T>,
    out: &mut [T],
) {
    let [oh, ow] = g.output;
    let channels = g.channels * g.filters;
    let fused = fused_multiply_add();
    out.par_chunks_mut(ow * channels)
        .enumerate()
        .for_each(|(row, out)| {
            let (image, y) = (row / oh, row % oh);
            #[cfg(target_arch = "x86_64")]
            if fused {
                // SAFETY: `fused` is true only where the CPU has AVX2 and FMA.
                unsafe { depthwise_row_fma(x, f, g, image, y, out) };
                finish.apply(out, channels);
                return;
            }
            let _ = fused;
            depthwise_row::<T, false>(x, f, g, image, y, out);
            finish.apply(out, channels);
        });
}

/// Whether this CPU has AVX2 and FMA (detected once).
fn fused_multiply_add() -> bool {
    static FMA: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FMA.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

/// [`depthwise_row`] compiled for AVX2 and FMA.
///
/// # Safety
///
/// The CPU must have AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn depthwise_row_fma<T: Float>(
    x: &[T],
    f: &[T],
    g: &WindowGeometry,
    image: usize,
    y: usize,
    out: &mut [T],
) {
    depthwise_row::<T, true>(x, f, g, image, y, out);
}

/// Output row `y` of image `image` of a depthwise convolution: each pixel's taps inside
/// the image, channels innermost (`FUSED`: with fused multiply-adds).
#[inline(always)]
fn depthwise_row<T: Float, const FUSED: bool>(
    x: &[T],
    f: &[T],
    g: &WindowGeometry,
    image: usize,
    y: usize,
    out: &mut [T],
) {
    let [kh, kw] = [g.windows[0].size, g.windows[1].size];
    let (c, m) = (g.channels, g.filters);
    let madd = |a: T, x: T, f: T| if FUSED { x.mul_add(f, a) } else { a + x * f };
    out.fill(T::zero());
    for i in 0..kh {
        let Some(h) = g.tap(0, y, i) else { continue };
        for (xo, acc) in out.chunks_exact_mut(c * m).enumerate() {
            for j in 0..kw {
                let Some(w) = g.tap(1, xo, j) else { continue };
                let xs = pixel(x, g, image, h, w);
                let fs = &f[(i * kw + j) * c * m..][..c * m];
                if m == 1 {
                    for ((a, &xv), &fv) in acc.iter_mut().zip(xs).zip(fs) {
                        *a = madd(*a, xv, fv);
                    }
                } else {
                    for (ch, &xv) in xs.iter().enumerate() {
                        for q in 0..m {
                            let at = ch * m + q;
                            acc[at] = madd(acc[at], xv, fs[at]);
                        }
                    }
                }
            }
        }
    }
}

/// `Device::pool2d`.
pub(crate) fn pool2d(
    x: &TensorView<'_>,
    g: &WindowGeometry,
    max: bool,
    out: &mut OutView<'_>,
) -> Result<()> {
    match x.dtype() {
        DataType::Float => pool_typed::<f32>(x, g, max, out),
        DataType::Double => pool_typed::<f64>(x, g, max, out),
        _ => Err(unsupported("pool2d", x)),
    }
}

/// The larger of two values as the shared semantics order them: NaN wins, -0 < +0.
fn maximum<T: Float>(a: T, b: T) -> T {
    if a.is_nan() {
        a
    } else if b.is_nan() || b > a || (b == a && a.is_sign_negative()) {
        b
    } else {
        a
    }
}

fn pool_typed<T: Float + Element + Send + Sync>(
    x: &TensorView<'_>,
    g: &WindowGeometry,
    max: bool,
    out: &mut OutView<'_>,
) -> Result<()> {
    let x = elements::<T>(x)?;
    let out = output::<T>(out)?;
    let [kh, kw] = [g.windows[0].size, g.windows[1].size];
    let c = g.channels;
    let [oh, ow] = g.output;
    out.par_chunks_mut(ow * c)
        .enumerate()
        .for_each(|(row, out)| {
            let (image, y) = (row / oh, row % oh);
            let rows = (0..kh).filter_map(|i| g.tap(0, y, i));
            for (xo, acc) in out.chunks_exact_mut(c).enumerate() {
                acc.fill(if max { T::neg_infinity() } else { T::zero() });
                let mut count = 0usize;
                for h in rows.clone() {
                    for w in (0..kw).filter_map(|j| g.tap(1, xo, j)) {
                        let xs = pixel(x, g, image, h, w);
                        if max {
                            acc.iter_mut()
                                .zip(xs)
                                .for_each(|(a, &v)| *a = maximum(*a, v));
                        } else {
                            acc.iter_mut().zip(xs).for_each(|(a, &v)| *a = *a + v);
                        }
                        count += 1;
                    }
                }
                if !max {
                    let count = T::from(count).unwrap_or_else(T::one);
                    acc.iter_mut().for_each(|a| *a = *a / count);
                }
            }
        });
    Ok(())
}
