//! Direct window kernels for f32 and f64 (`Device::conv2d`, `Device::pool2d`,
//! `Device::conv2d_backprop_input`), on contiguous NHWC tensors, with the padding handled
//! in the loops (no padded copy):
//! - a full convolution is an implicit GEMM: output rows in blocks of [`BLOCK_ROWS`], each
//!   block's im2col panel packed on its thread (it stays in L2) and multiplied by the
//!   filter with one single-threaded `gemm`; fewer rows than a block with much work (a late
//!   layer of a small image) are one GEMM whose columns the threads share; a 1x1
//!   convolution with stride 1 multiplies the input rows themselves; one of fewer than
//!   [`FEW_CHANNELS`] input channels and at most [`FEW_TAPS`] taps runs directly
//!   (`few_channels`);
//! - a depthwise convolution and pooling walk each output row once, the channels innermost
//!   (contiguous in the input, the filter and the output, so the loops vectorise).

use num_traits::Float;
use rayon::prelude::*;

use polytensor_core::alloc::host_vec;
use polytensor_core::plan::window::WindowGeometry;
use polytensor_core::{DataType, Element, Epilogue, OutView, Result, TensorView, UnaryOp};

use super::matmul::{few_rows, gemm_columns, gemm_rows, gemm_rows_apart, gemm_strips, GemmElem};
use super::{few_channels, mixed, unsupported, winograd};
use crate::strided::{input, output, PARALLEL_MIN_ELEMENTS};

/// Output rows per block of the implicit GEMM: a panel of 128 rows of 3x3x64 taps is
/// 288 KiB of f32.
const BLOCK_ROWS: usize = 128;

/// The fewest filters each thread takes where the threads share a GEMM's columns: fewer
/// make GEMMs too narrow for the kernel (DenseNet121's twelve 3x3 layers of 32 filters on
/// 8x8 images took 1.6 ms a run with their columns split in two, 0.85 ms with their rows
/// split); such a GEMM splits its rows instead.
const SHARED_COLUMNS: usize = 64;

/// The fewest rows of a block where the threads split a GEMM of few rows.
const MIN_BLOCK_ROWS: usize = 16;

/// The multiply-adds from which a pointwise convolution, or one of fewer rows than a block,
/// shares its GEMM's columns among the threads (below, one thread does it faster than two
/// can start).
const SHARED_WORK: usize = 1 << 21;

/// The most taps (window size times channels) a few-channel convolution runs directly
/// (`few_channels`): a 3x3 window of up to 3 channels (a picture's first layer: 0.35-0.45x
/// the implicit GEMM's time, 1x224x224x3 and 16x64x64x3 to 32 filters, stride 2, one
/// thread of an AVX2 Zen 3) or a 5x5 of one. A 7x7 window of 3 channels (147 taps) ran as
/// fast either way, and stays a GEMM.
const FEW_TAPS: usize = 32;

/// The most taps (window size times channels) of a filter whose gradient is the
/// convolution of the transposed input rather than a GEMM: so few make GEMMs too thin for
/// the kernel (MNIST's 3x3x1x32: 0.53 against 0.78 ms at batch 32).
const THIN_FILTER_TAPS: usize = 16;

/// Below this many input channels a convolution runs directly (each output pixel's taps
/// times the filter's rows): a GEMM over so short a reduction has nothing to reuse, and
/// packing its panel costs more than the arithmetic.
const FEW_CHANNELS: usize = 8;

/// Filters of at least this many elements are packed in strips (`Device::filter_strip`):
/// 1 MiB of f32. A model's filters together are past what stays in cache between runs, so
/// each call reads its filter from memory, and a GEMM of few rows (a late layer at batch 1)
/// is bound by that read: the filter's rows 2^n bytes apart stream at a third to a half of
/// the bandwidth a strip's contiguous rows do (measured: 9.4 MiB at 4 and 16 rows,
/// 0.74-1.2 ms as rows, 0.43-0.71 ms as strips of 64). From 4 MiB down to 1 MiB, ResNet50
/// and InceptionV3 at batch 1 gained another 5-10%; below, nothing measurable for the
/// memory the copies take.
const STRIPED_FILTER: usize = 1 << 18;

/// Whether the direct kernels run for `dtype`.
pub(crate) fn runs(dtype: DataType) -> bool {
    matches!(dtype, DataType::Float | DataType::Double)
}

/// `Device::filter_strip`: large f32 filters ([`STRIPED_FILTER`]) in strips of 64 output
/// channels (four AVX-512 registers), or 32 where that divides them and 64 does not; else
/// 64, the last strip padded, where the padding is at most an eighth of the filters
/// (Xception's 728: 11 strips and one of 24, 40 zero filters); else as given.
pub(crate) fn filter_strip(
    dtype: DataType,
    [kh, kw, channels, filters]: [usize; 4],
) -> Option<usize> {
    let elements = kh
        .saturating_mul(kw)
        .saturating_mul(channels)
        .saturating_mul(filters);
    if dtype != DataType::Float || elements < STRIPED_FILTER {
        return None;
    }
    let padding = filters.next_multiple_of(64) - filters;
    if filters.is_multiple_of(64) {
        Some(64)
    } else if filters.is_multiple_of(32) {
        Some(32)
    } else {
        (padding.saturating_mul(8) <= filters).then_some(64)
    }
}

/// A filter as the implicit GEMM reads it: its rows (HWIO, `k x filters`), or packed in
/// strips of `width` filters (`[ceil(filters / width), k, width]`, the last strip padded).
#[derive(Clone, Copy)]
enum Filter<'f, T> {
    Rows(&'f [T]),
    Strips(&'f [T], usize),
}

impl<'f, T: GemmElem + Float> Filter<'f, T> {
    /// `out = a x filter` for `m` rows of `k` taps (`a_rows` elements apart) and `n`
    /// filters; `shared`: the threads share the filter's columns (a GEMM of few rows), else
    /// on this thread.
    fn gemm(self, dims: (usize, usize, usize), a: (&[T], usize), out: &mut [T], shared: bool) {
        match self {
            Filter::Rows(b) if shared => gemm_columns(dims, a, b, out),
            Filter::Rows(b) => gemm_rows_apart(dims, a, b, out),
            Filter::Strips(b, width) => gemm_strips(dims, a, b, width, out, shared),
        }
    }

    /// The filter and the width of its strips (HWIO rows: one strip of all `n` filters).
    fn strips(self, n: usize) -> (&'f [T], usize) {
        match self {
            Filter::Rows(b) => (b, n),
            Filter::Strips(b, width) => (b, width),
        }
    }

    /// The filter's rows (HWIO), unpacked where it is in strips (for the kernels that read
    /// it so).
    fn rows(self, k: usize, n: usize) -> std::borrow::Cow<'f, [T]> {
        match self {
            Filter::Rows(b) => std::borrow::Cow::Borrowed(b),
            Filter::Strips(b, width) => {
                let mut rows = vec![T::zero(); k * n];
                for (s, strip) in b.chunks_exact(k * width).enumerate() {
                    // The strip's filters (fewer in a padded last strip).
                    let first = s * width;
                    let filters = width.min(n.saturating_sub(first));
                    for (tap, values) in strip.chunks_exact(width).enumerate() {
                        rows[tap * n + first..][..filters].copy_from_slice(&values[..filters]);
                    }
                }
                std::borrow::Cow::Owned(rows)
            }
        }
    }
}

/// The elements of a contiguous view.
fn elements<'a, T: Element>(view: &TensorView<'a>) -> Result<&'a [T]> {
    let start = view.layout().offset();
    Ok(&input::<T>(view)?[start..start + view.layout().num_elements()])
}

/// `Device::conv2d`: f32 and f64, and f32 with bf16 weights (the session's mixed precision,
/// [`mixed`]).
pub(crate) fn conv2d(
    x: &TensorView<'_>,
    filter: &TensorView<'_>,
    g: &WindowGeometry,
    depthwise: bool,
    epilogue: &Epilogue<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    match (x.dtype(), filter.dtype()) {
        (DataType::Float, DataType::BFloat16) => conv_mixed(x, filter, g, depthwise, epilogue, out),
        (DataType::Float, _) => conv_typed::<f32>(x, filter, g, depthwise, epilogue, out),
        (DataType::Double, _) => conv_typed::<f64>(x, filter, g, depthwise, epilogue, out),
        _ => Err(unsupported("conv2d", x)),
    }
}

/// Which kernel runs a convolution.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ConvPath {
    Depthwise,
    /// Few input channels and taps: each tap times the filter's row of outputs
    /// (`few_channels`).
    FewChannels,
    /// Winograd's minimal filtering, by the tiling given.
    Winograd(winograd::Tiles),
    /// The implicit GEMM.
    Gemm,
}

impl ConvPath {
    fn of(g: &WindowGeometry, depthwise: bool) -> Self {
        if depthwise {
            ConvPath::Depthwise
        } else if g.channels < FEW_CHANNELS
            && g.windows[0].size * g.windows[1].size * g.channels <= FEW_TAPS
        {
            ConvPath::FewChannels
        } else if let Some(tiles) = winograd::tiling(g) {
            ConvPath::Winograd(tiles)
        } else {
            ConvPath::Gemm
        }
    }

    /// `out = conv(x, f)` then `finish`, on contiguous NHWC `x` and `out`, HWIO `f`.
    fn run<T: GemmElem + Float + bytemuck::Pod + Send + Sync>(
        self,
        x: &[T],
        f: &[T],
        g: &WindowGeometry,
        finish: &Finish<'_, T>,
        out: &mut [T],
    ) {
        self.run_filter(x, Filter::Rows(f), g, finish, out);
    }

    /// [`ConvPath::run`] with the filter as rows or strips: the implicit GEMM reads strips
    /// as they are, the other kernels the rows unpacked.
    fn run_filter<T: GemmElem + Float + bytemuck::Pod + Send + Sync>(
        self,
        x: &[T],
        f: Filter<'_, T>,
        g: &WindowGeometry,
        finish: &Finish<'_, T>,
        out: &mut [T],
    ) {
        let taps = g.windows[0].size * g.windows[1].size * g.channels;
        let rows = || f.rows(taps, g.filters);
        match self {
            ConvPath::Depthwise => depthwise_conv(x, &rows(), g, finish, out),
            ConvPath::FewChannels => few_channels::conv(x, &rows(), g, finish, out),
            ConvPath::Winograd(tiles) => {
                winograd::conv(x, f.strips(g.filters), g, tiles, finish, out)
            }
            ConvPath::Gemm => implicit_gemm(x, f, g, finish, out),
        }
    }
}

fn conv_typed<T: GemmElem + Float + bytemuck::Pod + Send + Sync>(
    x: &TensorView<'_>,
    filter: &TensorView<'_>,
    g: &WindowGeometry,
    depthwise: bool,
    epilogue: &Epilogue<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    let (x, f) = (elements::<T>(x)?, elements::<T>(filter)?);
    let finish = Finish::of(epilogue)?;
    // A filter of rank 3 is one `filter_strip` packed.
    let f = match filter.layout().shape().dims()[..] {
        [strips, taps, width] if !depthwise && width > 0 && strips == g.filters.div_ceil(width) => {
            let expected = g.windows[0].size * g.windows[1].size * g.channels;
            if taps != expected {
                return Err(polytensor_core::Error::invalid(format!(
                    "conv2d: a packed filter of {taps} taps for {expected}"
                )));
            }
            Filter::Strips(f, width)
        }
        _ => Filter::Rows(f),
    };
    ConvPath::of(g, depthwise).run_filter(x, f, g, &finish, output::<T>(out)?);
    Ok(())
}

/// An f32 convolution with a bf16 filter: its GEMMs (the implicit GEMM's, Winograd's) in
/// bf16 where [`mixed::multiplies`], else the f32 kernels on the filter widened.
fn conv_mixed(
    x: &TensorView<'_>,
    filter: &TensorView<'_>,
    g: &WindowGeometry,
    depthwise: bool,
    epilogue: &Epilogue<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    let (x, f) = (elements::<f32>(x)?, elements::<half::bf16>(filter)?);
    let finish = Finish::of(epilogue)?;
    let out = output::<f32>(out)?;
    match ConvPath::of(g, depthwise) {
        ConvPath::Gemm if mixed::multiplies() => mixed::conv(x, f, g, &finish, out),
        // Mixed precision keeps F(2x2, 3x3), else the implicit GEMM (`conv_rounded`).
        ConvPath::Winograd(_) if mixed::multiplies() && winograd::narrow(g) => {
            mixed::winograd(x, f, g, &finish, out)
        }
        ConvPath::Winograd(_) if mixed::multiplies() => mixed::conv(x, f, g, &finish, out),
        path => {
            let wide: Vec<f32> = f.iter().map(|v| v.to_f32()).collect();
            path.run(x, &wide, g, &finish, out);
        }
    }
    Ok(())
}

/// `Device::channel_affine` for f32 and f64: `x` copied into `out` a block of rows at a
/// time, each block finished while it is in cache. `false` for other dtypes, a strided `x`
/// or another activation.
pub(crate) fn channel_affine(
    x: &TensorView<'_>,
    epilogue: &Epilogue<'_>,
    out: &mut OutView<'_>,
) -> Result<bool> {
    let takes = matches!(
        epilogue.activation,
        None | Some(UnaryOp::Relu | UnaryOp::Relu6)
    );
    if !takes || !x.layout().is_contiguous() || x.layout().shape() != out.layout().shape() {
        return Ok(false);
    }
    match x.dtype() {
        DataType::Float => affine_typed::<f32>(x, epilogue, out).map(|()| true),
        DataType::Double => affine_typed::<f64>(x, epilogue, out).map(|()| true),
        _ => Ok(false),
    }
}

fn affine_typed<T: Float + Element + Send + Sync>(
    x: &TensorView<'_>,
    epilogue: &Epilogue<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    let channels = x.layout().shape().dims().last().copied().unwrap_or(1);
    let finish = Finish::of(epilogue)?;
    for part in [finish.scale, finish.shift].into_iter().flatten() {
        if part.len() != channels {
            return Err(polytensor_core::Error::invalid(format!(
                "channel_affine: a vector of {} for {channels} channels",
                part.len()
            )));
        }
    }
    let x = elements::<T>(x)?;
    let out = output::<T>(out)?;
    if channels == 0 || out.is_empty() {
        return Ok(());
    }
    // About 64 KiB of rows per block, whole rows of channels.
    let block = ((16 << 10) / channels).max(1) * channels;
    let pass = |(i, (out, x)): (usize, (&mut [T], &[T]))| {
        out.copy_from_slice(x);
        finish.apply(out, i * block, channels);
    };
    if out.len() < PARALLEL_MIN_ELEMENTS {
        out.chunks_mut(block)
            .zip(x.chunks(block))
            .enumerate()
            .for_each(pass);
    } else {
        out.par_chunks_mut(block)
            .zip(x.par_chunks(block))
            .enumerate()
            .for_each(pass);
    }
    Ok(())
}

/// A convolution's epilogue on host elements: per channel `activation(v * scale + shift +
/// residual)`.
pub(super) struct Finish<'a, T> {
    pub(super) scale: Option<&'a [T]>,
    pub(super) shift: Option<&'a [T]>,
    /// The whole output's residual (its shape).
    pub(super) residual: Option<&'a [T]>,
    pub(super) activation: Option<UnaryOp>,
}

impl<'a, T: Element> Finish<'a, T> {
    /// The epilogue's vectors (and residual) as host elements.
    fn of(epilogue: &Epilogue<'a>) -> Result<Self> {
        Ok(Finish {
            scale: epilogue.scale.as_ref().map(elements::<T>).transpose()?,
            shift: epilogue.shift.as_ref().map(elements::<T>).transpose()?,
            residual: epilogue.residual.as_ref().map(elements::<T>).transpose()?,
            activation: epilogue.activation,
        })
    }
}

impl<T: Float> Finish<'_, T> {
    /// Apply to `rows` of one value per channel, which start at element `first` of the
    /// output (nothing to do without an epilogue). Every element is stored, selected
    /// rather than branched on, so the loops vectorise.
    pub(super) fn apply(&self, rows: &mut [T], first: usize, channels: usize) {
        if self.scale.is_none()
            && self.shift.is_none()
            && self.residual.is_none()
            && self.activation.is_none()
        {
            return;
        }
        let (zero, six) = (T::zero(), T::from(6.0).unwrap_or_else(T::zero));
        let residual = self.residual.map(|r| &r[first..first + rows.len()]);
        for (i, row) in rows.chunks_exact_mut(channels).enumerate() {
            match (self.scale, self.shift) {
                (Some(a), Some(b)) => row
                    .iter_mut()
                    .zip(a.iter().zip(b))
                    .for_each(|(v, (&a, &b))| *v = *v * a + b),
                (Some(a), None) => row.iter_mut().zip(a).for_each(|(v, &a)| *v = *v * a),
                (None, Some(b)) => row.iter_mut().zip(b).for_each(|(v, &b)| *v = *v + b),
                (None, None) => {}
            }
            if let Some(residual) = residual {
                let residual = &residual[i * channels..][..channels];
                row.iter_mut().zip(residual).for_each(|(v, &r)| *v = *v + r);
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
    f: Filter<'_, T>,
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
    let total = out.len() / o;
    let threads = rayon::current_num_threads();
    if let Some(plan) = windows_in_place(g) {
        return gemm_in_place(x, f, g, &plan, finish, out);
    }
    // A few rows (a late layer of a small image at batch 1): the filter streamed once, on
    // the threads (`few_rows`). Fewer rows than a block with much work, or a pointwise
    // convolution of fewer than 8 blocks a thread: one GEMM whose columns the threads share,
    // each packing only its part of the filter once (blocks of rows packed the filter once
    // per block, and a few blocks left a thread idle: Xception's 728-channel layers at batch
    // 16 ran 1.16x longer). Both take the panel packed whole. Otherwise the threads take
    // blocks of rows, each block's panel in L2.
    let few = total <= few_rows::FEW_ROWS;
    let few_blocks = total < BLOCK_ROWS || (pointwise && total < 8 * threads * BLOCK_ROWS);
    let shared = few_blocks && total * k * o >= SHARED_WORK;
    if few || (threads > 1 && shared && o >= SHARED_COLUMNS * threads) {
        let packed;
        let a = if pointwise {
            &x[..total * k]
        } else {
            let mut panel = vec![T::zero(); total * k];
            pack_taps(x, g, 0, &mut panel);
            packed = panel;
            &packed
        };
        if few {
            few_rows::multiply((total, o, k), (a, k), f.strips(o), out);
        } else {
            f.gemm((total, o, k), (a, k), out, true);
        }
        if out.len() < PARALLEL_MIN_ELEMENTS {
            finish.apply(out, 0, o);
        } else {
            out.par_chunks_mut(BLOCK_ROWS * o)
                .enumerate()
                .for_each(|(i, rows)| finish.apply(rows, i * BLOCK_ROWS * o, o));
        }
        return;
    }
    // Fewer rows than the threads have blocks, with much work (DenseNet's 3x3 layers of 32
    // filters on an 8x8 image): as many blocks as threads, each packing its own rows.
    let block_rows = if shared && total < threads * BLOCK_ROWS {
        total
            .div_ceil(threads)
            .next_multiple_of(8)
            .clamp(MIN_BLOCK_ROWS, BLOCK_ROWS)
    } else {
        BLOCK_ROWS
    };
    out.par_chunks_mut(block_rows * o)
        .enumerate()
        .for_each_init(Vec::new, |panel: &mut Vec<T>, (block, out)| {
            let (first, rows) = (block * block_rows, out.len() / o);
            if pointwise {
                f.gemm(
                    (rows, o, k),
                    (&x[first * k..(first + rows) * k], k),
                    out,
                    false,
                );
            } else {
                panel.resize(rows * k, T::zero());
                pack_taps(x, g, first, panel);
                f.gemm((rows, o, k), (panel, k), out, false);
            }
            finish.apply(out, first * o, o);
        });
}

/// Output pixels a row, with their whole window inside it, from which [`windows_in_place`]
/// takes a convolution (fewer make GEMMs too short for their calls; their panels are small
/// anyway).
const IN_PLACE_PIXELS: usize = 16;

/// Where the windows of a row's output pixels are runs of the input: one pixel high, two
/// or more wide, not dilated across (Keras's `Conv1D`, which TensorFlow runs as `[1, k]` windows on `[batch,
/// 1, width, channels]`). Then output pixel `p`'s window is `k_w * channels` consecutive
/// values from input pixel `p * stride - before`, and the implicit GEMM reads the rows of
/// the pixels whose windows lie inside the input in place, `stride * channels` apart: no
/// im2col copy. The pixels at the edges whose windows reach into the padding are packed.
struct InPlace {
    /// The output pixels of a row whose windows lie inside the input.
    inside: std::ops::Range<usize>,
    /// Where the first of them starts in its input row (elements).
    first: usize,
    /// Elements between consecutive pixels' windows.
    apart: usize,
}

/// The [`InPlace`] plan of `g`, where its windows are runs of the input and at least
/// [`IN_PLACE_PIXELS`] a row lie inside it; `None` otherwise.
fn windows_in_place(g: &WindowGeometry) -> Option<InPlace> {
    let [high, across] = g.windows;
    // A 1x1 window keeps the pointwise path (blocks of rows across the image's rows).
    if high.size != 1 || across.size < 2 || across.dilation != 1 || across.stride == 0 {
        return None;
    }
    let (iw, ow, before) = (g.input[1], g.output[1], g.before[1]);
    // The first pixel whose window starts inside the row, and one past the last whose
    // window ends inside it.
    let start = before.div_ceil(across.stride);
    let end = ow.min(((iw + before).checked_sub(across.size)? / across.stride) + 1);
    let inside = start..end.max(start);
    (inside.len() >= IN_PLACE_PIXELS).then(|| InPlace {
        first: (start * across.stride - before) * g.channels,
        inside,
        apart: across.stride * g.channels,
    })
}

/// [`implicit_gemm`] where [`windows_in_place`] holds: per row of output pixels, GEMMs of
/// up to [`BLOCK_ROWS`] pixels whose rows are read from the input in place, and the edge
/// pixels' windows packed. The rows and their blocks split across the threads; where the
/// blocks are too few for that, each block's filters do.
fn gemm_in_place<T: GemmElem + Float + Send + Sync>(
    x: &[T],
    f: Filter<'_, T>,
    g: &WindowGeometry,
    plan: &InPlace,
    finish: &Finish<'_, T>,
    out: &mut [T],
) {
    let (c, o) = (g.channels, g.filters);
    let k = g.windows[1].size * c;
    let [oh, ow] = g.output;
    let [ih, iw] = g.input;
    let InPlace {
        ref inside,
        first,
        apart,
    } = *plan;
    let threads = rayon::current_num_threads();
    let blocks = out.len() / (ow * o) * inside.len().div_ceil(BLOCK_ROWS);
    let shared = blocks < 2 * threads && threads > 1 && o >= 16 * threads;
    let row = |panel: &mut Vec<T>, (r, out): (usize, &mut [T])| {
        let (image, y) = (r / oh, r % oh);
        let Some(h) = g.tap(0, y, 0) else {
            // A row of the padding.
            out.fill(T::zero());
            finish.apply(out, r * ow * o, o);
            return;
        };
        let input = &x[(image * ih + h) * iw * c..][..iw * c];
        let (before, rest) = out.split_at_mut(inside.start * o);
        let (middle, after) = rest.split_at_mut(inside.len() * o);
        middle
            .par_chunks_mut(BLOCK_ROWS * o)
            .enumerate()
            .for_each(|(block, pixels)| {
                let a = &input[first + block * BLOCK_ROWS * apart..];
                f.gemm((pixels.len() / o, o, k), (a, apart), pixels, shared);
            });
        // The edges: their windows packed, zeros in the padding.
        for (pixels, at) in [(before, 0), (after, inside.end)] {
            let count = pixels.len() / o;
            if count > 0 {
                panel.resize(count * k, T::zero());
                pack_taps(x, g, r * ow + at, panel);
                f.gemm((count, o, k), (panel, k), pixels, shared);
            }
        }
        finish.apply(out, r * ow * o, o);
    };
    out.par_chunks_mut(ow * o)
        .enumerate()
        .for_each_init(Vec::new, row);
}

/// The im2col rows of output rows `first..` into `panel` (one row of `k_h * k_w *
/// channels` taps per output pixel, zero where a tap falls in the padding).
pub(super) fn pack_taps<T: Float>(x: &[T], g: &WindowGeometry, first: usize, panel: &mut [T]) {
    let [kh, kw] = [g.windows[0].size, g.windows[1].size];
    let c = g.channels;
    let k = kh * kw * c;
    let [oh, ow] = g.output;
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
                finish.apply(out, row * ow * channels, channels);
                return;
            }
            let _ = fused;
            depthwise_row::<T, false>(x, f, g, image, y, out);
            finish.apply(out, row * ow * channels, channels);
        });
}

/// Whether this CPU has AVX2 and FMA (detected once).
pub(super) fn fused_multiply_add() -> bool {
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

/// `Device::conv2d_backprop_input`.
pub(crate) fn conv2d_backprop_input(
    dy: &TensorView<'_>,
    filter: &TensorView<'_>,
    g: &WindowGeometry,
    out: &mut OutView<'_>,
) -> Result<()> {
    operand_sizes(
        "conv2d_backprop_input",
        g,
        [
            (dy.layout().num_elements(), g.output_elements(g.filters)?),
            (filter.layout().num_elements(), g.filter_elements()?),
            (out.layout().num_elements(), g.input_elements()?),
        ],
    )?;
    match dy.dtype() {
        DataType::Float => backprop_input_typed::<f32>(dy, filter, g, out),
        DataType::Double => backprop_input_typed::<f64>(dy, filter, g, out),
        _ => Err(unsupported("conv2d_backprop_input", dy)),
    }
}

/// `Err` naming `op` unless each operand has the elements `g` asks of it (`counts`: got,
/// wanted).
fn operand_sizes(op: &str, g: &WindowGeometry, counts: [(usize, usize); 3]) -> Result<()> {
    if counts.iter().any(|(got, want)| got != want) {
        return Err(polytensor_core::Error::invalid(format!(
            "{op}: operands of {counts:?} elements (got, wanted) for {g:?}"
        )));
    }
    Ok(())
}

/// The transposed convolution as TensorFlow's CPU kernel computes it: each gradient pixel's
/// row of filters times the transposed filter gives its taps' contributions (one GEMM over
/// blocks of [`BLOCK_ROWS`] pixels), which col2im adds into the image, image by image.
fn backprop_input_typed<T: GemmElem + Float + Send + Sync>(
    dy: &TensorView<'_>,
    filter: &TensorView<'_>,
    g: &WindowGeometry,
    out: &mut OutView<'_>,
) -> Result<()> {
    let (dy, f) = (elements::<T>(dy)?, elements::<T>(filter)?);
    let out = output::<T>(out)?;
    let [kh, kw] = [g.windows[0].size, g.windows[1].size];
    let (c, o) = (g.channels, g.filters);
    let taps = kh * kw * c;
    // The filter as [filters, taps].
    // Sizes from the caller's geometry: refused, not aborted on, where the host cannot
    // hold them.
    let too_large = || polytensor_core::Error::invalid("conv2d_backprop_input: too large");
    let mut ft = host_vec(
        taps.checked_mul(o).ok_or_else(too_large)?,
        T::zero(),
        "filter",
    )?;
    for (t, row) in f.chunks_exact(o.max(1)).enumerate() {
        for (j, &v) in row.iter().enumerate() {
            ft[j * taps + t] = v;
        }
    }
    let [oh, ow] = g.output;
    let pixels = g.batch * oh * ow;
    let image = g.input[0] * g.input[1] * c;
    if image == 0 {
        return Ok(());
    }
    // Each image's columns (its gradient pixels times the transposed filter) made and
    // added into it on one thread, in L2, where there are images for every thread; else
    // every image's columns at once, their rows split across the threads.
    let per_image = oh * ow;
    if g.batch >= rayon::current_num_threads() && taps > 0 {
        per_image.checked_mul(taps).ok_or_else(too_large)?;
        out.par_chunks_mut(image).enumerate().for_each_init(
            Vec::new,
            |columns: &mut Vec<T>, (n, picture)| {
                columns.resize(per_image * taps, T::zero());
                let gradient = &dy[n * per_image * o..(n + 1) * per_image * o];
                gemm_rows(per_image, taps, o, gradient, &ft, columns);
                col2im(columns, g, picture);
            },
        );
        return Ok(());
    }
    let columns_len = pixels.checked_mul(taps).ok_or_else(too_large)?;
    let mut columns = host_vec(columns_len, T::zero(), "columns")?;
    if taps > 0 {
        columns
            .par_chunks_mut(BLOCK_ROWS * taps)
            .enumerate()
            .for_each(|(block, cols)| {
                let first = block * BLOCK_ROWS;
                let rows = cols.len() / taps;
                gemm_rows(rows, taps, o, &dy[first * o..(first + rows) * o], &ft, cols);
            });
    }
    out.par_chunks_mut(image)
        .enumerate()
        .for_each(|(n, picture)| {
            let taps_of_image = per_image * taps;
            col2im(
                &columns[n * taps_of_image..(n + 1) * taps_of_image],
                g,
                picture,
            );
        });
    Ok(())
}

/// Col2im: one image's columns (per gradient pixel, each tap's channels) added into the
/// image where the taps read it, the image zeroed first.
fn col2im<T: Float>(columns: &[T], g: &WindowGeometry, picture: &mut [T]) {
    let [kh, kw] = [g.windows[0].size, g.windows[1].size];
    let c = g.channels;
    let taps = kh * kw * c;
    let [oh, ow] = g.output;
    picture.fill(T::zero());
    for y in 0..oh {
        for x in 0..ow {
            let row = &columns[(y * ow + x) * taps..][..taps];
            for a in 0..kh {
                let Some(h) = g.tap(0, y, a) else { continue };
                for b in 0..kw {
                    let Some(w) = g.tap(1, x, b) else { continue };
                    let to = &mut picture[(h * g.input[1] + w) * c..][..c];
                    let from = &row[(a * kw + b) * c..][..c];
                    to.iter_mut().zip(from).for_each(|(d, &v)| *d = *d + v);
                }
            }
        }
    }
}

/// `Device::conv2d_backprop_filter`: f32 and f64 (`false` for other dtypes).
pub(crate) fn conv2d_backprop_filter(
    x: &TensorView<'_>,
    dy: &TensorView<'_>,
    g: &WindowGeometry,
    out: &mut OutView<'_>,
) -> Result<bool> {
    operand_sizes(
        "conv2d_backprop_filter",
        g,
        [
            (x.layout().num_elements(), g.input_elements()?),
            (dy.layout().num_elements(), g.output_elements(g.filters)?),
            (out.layout().num_elements(), g.filter_elements()?),
        ],
    )?;
    // A filter of few taps (a first layer's): the convolution of the transposed input.
    let taps = g.windows[0].size * g.windows[1].size * g.channels;
    let thin = g.channels < FEW_CHANNELS && taps <= THIN_FILTER_TAPS;
    if thin || !x.layout().is_contiguous() || !dy.layout().is_contiguous() {
        return Ok(false);
    }
    match x.dtype() {
        DataType::Float => backprop_filter_typed::<f32>(x, dy, g, out),
        DataType::Double => backprop_filter_typed::<f64>(x, dy, g, out),
        _ => Ok(false),
    }
}

/// The bytes of im2col panel a thread of [`backprop_filter_typed`] keeps (in L2).
const FILTER_GRAD_PANEL: usize = 1 << 18;

/// The filter's gradient as TensorFlow's CPU kernel computes it, blocked: the output pixels
/// in chunks, each chunk's im2col panel (`pixels x taps`, in L2) packed and its transpose
/// times the chunk's gradient rows added into the thread's sums (one GEMM, `taps x filters`
/// over the chunk's pixels); the threads take runs of chunks, and their sums are added.
fn backprop_filter_typed<T: GemmElem + Float + Send + Sync>(
    x: &TensorView<'_>,
    dy: &TensorView<'_>,
    g: &WindowGeometry,
    out: &mut OutView<'_>,
) -> Result<bool> {
    let (x, dy) = (elements::<T>(x)?, elements::<T>(dy)?);
    let out = output::<T>(out)?;
    let [kh, kw] = [g.windows[0].size, g.windows[1].size];
    let (taps, o) = (kh * kw * g.channels, g.filters);
    let pixels = g.batch * g.output[0] * g.output[1];
    if taps == 0 || o == 0 || pixels == 0 {
        out.fill(T::zero());
        return Ok(true);
    }
    let rows = (FILTER_GRAD_PANEL / std::mem::size_of::<T>() / taps).clamp(8, 1024);
    let chunks = pixels.div_ceil(rows);
    let parts = rayon::current_num_threads().clamp(1, chunks);
    let per_part = chunks.div_ceil(parts);
    let sums = |part: usize| -> Vec<T> {
        let mut sums = vec![T::zero(); taps * o];
        let mut panel = vec![T::zero(); rows * taps];
        for chunk in part * per_part..chunks.min((part + 1) * per_part) {
            let first = chunk * rows;
            let count = rows.min(pixels - first);
            let panel = &mut panel[..count * taps];
            pack_taps(x, g, first, panel);
            let gradient = &dy[first * o..(first + count) * o];
            // SAFETY: `panel` holds `count` rows of `taps` (read as its transpose: row `t`
            // is column `t`, `taps` apart), `gradient` `count` rows of `o`, `sums` `taps`
            // rows of `o`, each borrowed for the call.
            unsafe {
                gemm::gemm(
                    taps,
                    o,
                    count,
                    sums.as_mut_ptr(),
                    1,
                    o as isize,
                    true,
                    panel.as_ptr(),
                    taps as isize,
                    1,
                    gradient.as_ptr(),
                    1,
                    o as isize,
                    T::one(),
                    T::one(),
                    false,
                    false,
                    false,
                    gemm::Parallelism::None,
                );
            }
        }
        sums
    };
    let partial: Vec<Vec<T>> = (0..parts).into_par_iter().map(sums).collect();
    out.fill(T::zero());
    for sums in &partial {
        out.iter_mut().zip(sums).for_each(|(o, &s)| *o = *o + s);
    }
    Ok(true)
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
/// One select of conditions joined without short circuits, so that a block of channels
/// vectorises.
#[inline(always)]
fn maximum<T: Float>(a: T, b: T) -> T {
    let b_is_larger = b.is_nan() | (b > a) | ((b == a) & a.is_sign_negative());
    if !a.is_nan() & b_is_larger {
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
    let [oh, ow] = g.output;
    let c = g.channels;
    out.par_chunks_mut(ow * c)
        .enumerate()
        .for_each_init(Vec::new, |taps, (row, out)| {
            let at = [row / oh, row % oh];
            crate::vmath::widest(PoolRow {
                x,
                g,
                max,
                at,
                taps,
                out,
            });
        });
    Ok(())
}

/// One output row of a pool, [`pool_row`] compiled for the widest vectors (the max's NaN
/// and sign checks in 16 lanes on AVX-512; baseline x86-64 has 4).
struct PoolRow<'x, 'r, T> {
    /// The input, contiguous NHWC.
    x: &'x [T],
    /// The pool's windows over it.
    g: &'r WindowGeometry,
    /// A max pool, else an average.
    max: bool,
    /// The output row: `[image, y]`.
    at: [usize; 2],
    /// The thread's buffer for a max pool's taps.
    taps: &'r mut Vec<&'x [T]>,
    /// The row's output pixels' channels.
    out: &'r mut [T],
}

impl<T: Float> crate::vmath::Vectorised for PoolRow<'_, '_, T> {
    type Output = ();

    #[inline(always)]
    fn run(self) {
        pool_row(self.x, self.g, self.max, self.at, self.taps, self.out);
    }
}

/// The channels a max pool folds at a time, in registers: each block of an output pixel
/// is folded over all of its window's taps and stored once (a max folded into the output
/// keeps a NaN by a masked store per tap, microcoded on AVX2: twice as slow).
const POOL_LANES: usize = 16;

/// One output row `[image, y]` of a max (or average) pool, each pixel's channels folded
/// over its window's taps: maxima [`POOL_LANES`] channels at a time in registers, sums
/// into the output a tap at a time (a plain add, which vectorises there).
#[inline(always)]
fn pool_row<'x, T: Float>(
    x: &'x [T],
    g: &WindowGeometry,
    max: bool,
    [image, y]: [usize; 2],
    taps: &mut Vec<&'x [T]>,
    out: &mut [T],
) {
    let kw = g.windows[1].size;
    let c = g.channels;
    let rows = (0..g.windows[0].size).filter_map(|i| g.tap(0, y, i));
    for (xo, pooled) in out.chunks_exact_mut(c).enumerate() {
        let columns = || (0..kw).filter_map(|j| g.tap(1, xo, j));
        if !max {
            pooled.fill(T::zero());
            let mut count = 0usize;
            for h in rows.clone() {
                for w in columns() {
                    fold(pooled, pixel(x, g, image, h, w), false);
                    count += 1;
                }
            }
            let count = T::from(count).unwrap_or_else(T::one);
            pooled.iter_mut().for_each(|s| *s = *s / count);
            continue;
        }
        taps.clear();
        for h in rows.clone() {
            taps.extend(columns().map(|w| pixel(x, g, image, h, w)));
        }
        let mut blocks = pooled.chunks_exact_mut(POOL_LANES);
        for (b, block) in blocks.by_ref().enumerate() {
            let mut maxima = [T::neg_infinity(); POOL_LANES];
            for tap in taps.iter() {
                fold(&mut maxima, &tap[b * POOL_LANES..][..POOL_LANES], true);
            }
            block.copy_from_slice(&maxima);
        }
        let block = blocks.into_remainder();
        let first = c - block.len();
        block.fill(T::neg_infinity());
        for tap in taps.iter() {
            fold(block, &tap[first..], true);
        }
    }
}

/// Fold one tap's `values` into the running maxima (or sums) `folded`.
#[inline(always)]
fn fold<T: Float>(folded: &mut [T], values: &[T], max: bool) {
    let lanes = folded.iter_mut().zip(values);
    if max {
        lanes.for_each(|(m, &v)| *m = maximum(*m, v));
    } else {
        lanes.for_each(|(s, &v)| *s = *s + v);
    }
}

#[cfg(test)]
mod tests {
    use polytensor_core::{
        Conv2dOptions, ConvEpilogue, DataType, PackedFilter, Padding, Tensor, UnaryOp,
    };

    use crate::CpuDevice;

    use crate::kernels::test_data::{integers, shift};

    #[test]
    #[cfg_attr(
        miri,
        ignore = "filters of megabytes: the allocator's madvise, which Miri cannot call, and hours"
    )]
    fn packed_filters_give_the_rows_bits_on_every_path() {
        let cpu = CpuDevice::shared();
        // (batch, h, w, channels, window, filters): few rows (the threads share the
        // strips), blocks of rows, Winograd (reading the strips), pointwise few rows,
        // strips of 32, and padded last strips (Xception's 728 filters) on the same paths.
        let cases = [
            (1, 2, 2, 512, 3, 256),
            (2, 9, 9, 256, 3, 512),
            (4, 16, 16, 256, 3, 512),
            (1, 4, 4, 2048, 1, 512),
            (1, 3, 3, 2048, 1, 544),
            (1, 6, 6, 728, 1, 728),
            (2, 9, 9, 256, 3, 360),
            (4, 16, 16, 256, 3, 360),
            (1, 3, 3, 512, 3, 232),
        ];
        for (batch, h, w, c, window, filters) in cases {
            let x = integers(&[batch, h, w, c], 1, 0.25);
            let x = Tensor::from_slice(&x, [batch, h, w, c], &cpu).unwrap();
            let f = integers(&[window, window, c, filters], 2, 1.0);
            let f = Tensor::from_slice(&f, [window, window, c, filters], &cpu).unwrap();
            let packed = PackedFilter::new(&f)
                .unwrap()
                .expect("a filter this large packs");
            let epilogue = ConvEpilogue {
                shift: Some(shift(filters, &cpu)),
                activation: Some(UnaryOp::Relu),
                ..ConvEpilogue::default()
            };
            let options = Conv2dOptions {
                padding: Padding::Same,
                ..Conv2dOptions::default()
            };
            let want = x.conv2d_fused(&f, &options, false, &epilogue).unwrap();
            let got = x.conv2d_packed(&packed, &options, &epilogue).unwrap();
            assert_eq!(got.dims(), want.dims());
            assert_eq!(
                got.to_vec::<f32>().unwrap(),
                want.to_vec::<f32>().unwrap(),
                "[{batch},{h},{w},{c}] by {window}x{window} to {filters}"
            );
        }
    }

    /// A convolution of `dims` (NHWC) by a `window` of `filters` (HWIO) with `strides` and
    /// explicit `pads` (`(before, after)` per spatial dim), a shift and `Relu` after it, has
    /// the definition's values (exact: the data are small multiples of 1/4); by a packed
    /// filter where `packed`.
    fn check_against_the_definition(
        dims: [usize; 4],
        window: [usize; 2],
        strides: [usize; 2],
        pads: [(usize, usize); 2],
        filters: usize,
        packed: bool,
    ) {
        let cpu = CpuDevice::shared();
        let [batch, height, width, c] = dims;
        let [kh, kw] = window;
        let x = integers(&dims, 1, 0.25);
        let f = integers(&[kh, kw, c, filters], 2, 1.0);
        let [(top, bottom), (left, right)] = pads;
        let oh = (height + top + bottom - kh) / strides[0] + 1;
        let ow = (width + left + right - kw) / strides[1] + 1;
        let mut want = vec![0f32; batch * oh * ow * filters];
        for (pixel, out) in want.chunks_exact_mut(filters).enumerate() {
            let (image, y, p) = (pixel / (oh * ow), pixel / ow % oh, pixel % ow);
            for (t, taps) in f.chunks_exact(c * filters).enumerate() {
                let (Some(h), Some(w)) = (
                    (y * strides[0] + t / kw)
                        .checked_sub(top)
                        .filter(|&h| h < height),
                    (p * strides[1] + t % kw)
                        .checked_sub(left)
                        .filter(|&w| w < width),
                ) else {
                    continue;
                };
                let values = &x[((image * height + h) * width + w) * c..][..c];
                for (&v, weights) in values.iter().zip(taps.chunks_exact(filters)) {
                    out.iter_mut().zip(weights).for_each(|(o, &w)| *o += v * w);
                }
            }
            out.iter_mut()
                .enumerate()
                .for_each(|(j, o)| *o = (*o + j as f32 - 9.0).max(0.0));
        }
        let x = Tensor::from_slice(&x, dims, &cpu).unwrap();
        let f = Tensor::from_slice(&f, [kh, kw, c, filters], &cpu).unwrap();
        let options = Conv2dOptions {
            strides,
            padding: Padding::Explicit(pads.to_vec()),
            ..Conv2dOptions::default()
        };
        let epilogue = ConvEpilogue {
            shift: Some(shift(filters, &cpu)),
            activation: Some(UnaryOp::Relu),
            ..ConvEpilogue::default()
        };
        let got = if packed {
            let packed = PackedFilter::new(&f)
                .unwrap()
                .expect("a filter this large packs");
            x.conv2d_packed(&packed, &options, &epilogue).unwrap()
        } else {
            x.conv2d_fused(&f, &options, false, &epilogue).unwrap()
        };
        assert_eq!(got.dims(), [batch, oh, ow, filters]);
        assert_eq!(
            got.to_vec::<f32>().unwrap(),
            want,
            "{dims:?} by {window:?} of strides {strides:?}, padding {pads:?}, to {filters}"
        );
    }

    /// A convolution of few input channels (a first layer's) has the definition's values:
    /// one, two and three channels; 3x3, 5x5 and 1x7 windows; strides 1 and 2; padding on
    /// one side, on both, and wider than the window (pixels with no tap inside); rows
    /// narrower than a block of pixels; one register of filters, part of one, part of a
    /// second, and two blocks and a remainder.
    #[test]
    fn few_channels_match_the_definition() {
        let same = [(1, 1), (1, 1)];
        let cases = [
            ([2, 9, 11, 1], [3, 3], [1, 1], same, 32),
            ([1, 8, 8, 3], [3, 3], [2, 2], [(0, 1), (0, 1)], 16),
            ([3, 7, 6, 2], [3, 3], [1, 1], [(3, 3), (2, 4)], 5),
            ([1, 10, 10, 1], [5, 5], [2, 2], [(2, 2), (2, 2)], 8),
            ([2, 5, 3, 3], [3, 3], [1, 2], same, 12),
            ([1, 4, 20, 2], [1, 7], [1, 1], [(0, 0), (3, 3)], 37),
            ([1, 6, 3, 1], [3, 3], [1, 1], [(0, 0), (0, 0)], 9),
        ];
        for (dims, window, strides, pads, filters) in cases {
            check_against_the_definition(dims, window, strides, pads, filters, false);
        }
    }

    /// `[1, k]` windows (Keras's `Conv1D`) read their rows from the input in place, and
    /// pack those of the pixels at the padded edges: the definition's values on every split
    /// (rows across threads, a long row's blocks, the filters or strips of few blocks),
    /// strides 1 and 2, padding across and in height, an image of several rows, and a
    /// packed filter.
    #[test]
    #[cfg_attr(miri, ignore = "a packed filter of megabytes: the allocator's madvise")]
    fn one_dimensional_windows_read_the_input_in_place() {
        // ([batch, height, width, channels], width of the window, stride, padding,
        // filters, packed).
        let none = [(0, 0), (0, 0)];
        let cases = [
            ([8, 1, 40, 16], 3, 1, none, 32, false),
            ([1, 1, 700, 8], 5, 1, [(0, 0), (2, 2)], 16, false),
            ([1, 1, 128, 64], 5, 1, none, 64, false),
            ([2, 1, 37, 8], 4, 2, none, 20, false),
            ([2, 3, 20, 8], 3, 1, none, 24, false),
            ([4, 1, 30, 16], 5, 1, [(0, 0), (2, 2)], 32, false),
            ([1, 1, 40, 32], 4, 2, [(0, 0), (3, 1)], 48, false),
            ([2, 2, 24, 8], 3, 1, [(1, 0), (1, 1)], 16, false),
            ([1, 1, 24, 512], 4, 1, none, 256, true),
            ([3, 1, 20, 512], 4, 1, [(0, 0), (1, 2)], 256, true),
        ];
        for (dims, window, stride, pads, filters, packed) in cases {
            check_against_the_definition(dims, [1, window], [1, stride], pads, filters, packed);
        }
    }

    /// The implicit GEMM's splits have the definition's values: blocks of rows, few rows
    /// split in two (DenseNet's 32 filters on an 8x8 image), few rows whose filters the
    /// threads share, a stride of 2, and few rows of a packed filter split in two.
    #[test]
    #[cfg_attr(miri, ignore = "a packed filter of megabytes: the allocator's madvise")]
    fn the_implicit_gemm_matches_the_definition_on_every_split() {
        let same = [(1, 1), (1, 1)];
        let cases = [
            ([2, 12, 12, 40], [3, 3], [1, 1], same, 24, false),
            ([1, 8, 8, 128], [3, 3], [1, 1], same, 32, false),
            ([1, 5, 5, 256], [3, 3], [1, 1], same, 256, false),
            ([1, 9, 9, 64], [3, 3], [2, 2], [(0, 1), (0, 1)], 96, false),
            ([1, 8, 8, 512], [3, 3], [1, 1], same, 64, true),
        ];
        for (dims, window, strides, pads, filters, packed) in cases {
            check_against_the_definition(dims, window, strides, pads, filters, packed);
        }
    }

    #[test]
    fn small_and_f64_filters_stay_as_given() {
        let cpu = CpuDevice::shared();
        let cases = [
            (DataType::Float, [3, 3, 64, 64], None),
            (DataType::Double, [3, 3, 512, 512], None),
            (DataType::Float, [3, 3, 512, 512], Some(64)),
            (DataType::Float, [1, 1, 2048, 544], Some(32)),
            // 64 where 32 does not divide the filters: the last strip padded, by an eighth
            // of them at most.
            (DataType::Float, [1, 1, 728, 728], Some(64)),
            (DataType::Float, [1, 1, 4096, 500], Some(64)),
            (DataType::Float, [3, 3, 4096, 40], None),
            (DataType::Float, [1, 1, 4096, 480], Some(32)),
        ];
        for (dtype, dims, want) in cases {
            assert_eq!(cpu.filter_strip(dtype, dims), want, "{dtype:?} {dims:?}");
        }
        let f = Tensor::zeros([3, 3, 8, 16], DataType::Float, &cpu).unwrap();
        assert!(PackedFilter::new(&f).unwrap().is_none());
    }

    /// The max pool folds channels in blocks of [`super::POOL_LANES`] and a remainder:
    /// every channel of 37 (two blocks and five) is its window's maximum as the shared
    /// semantics order values (a NaN wins, +0 beats -0), overlapping 3x3 windows at a
    /// stride of 2 with SAME padding.
    #[test]
    fn max_pool_blocks_keep_nans_and_signed_zeros() {
        use polytensor_core::{DataFormat, Pool2dOptions};
        let cpu = CpuDevice::shared();
        let [h, w, c] = [5, 6, 37];
        let mut values: Vec<f32> = (0..h * w * c)
            .map(|i| ((i * 7919) % 97) as f32 - 60.0)
            .collect();
        // Channel 3 is -0 everywhere but one +0; channel 20 all -0; channel 33 holds a NaN.
        for p in 0..h * w {
            values[p * c + 3] = -0.0;
            values[p * c + 20] = -0.0;
        }
        values[(2 * w + 2) * c + 3] = 0.0;
        values[(w + 1) * c + 33] = f32::NAN;
        let x = Tensor::from_slice(&values, [1, h, w, c], &cpu).unwrap();
        let options = Pool2dOptions {
            window: [3, 3],
            strides: [2, 2],
            padding: Padding::Same,
            format: DataFormat::Nhwc,
        };
        let y = x.max_pool2d(&options).unwrap();
        let [oh, ow] = [3, 3];
        assert_eq!(y.dims(), [1, oh, ow, c]);
        let got = y.to_vec::<f32>().unwrap();
        for (i, j, k) in
            (0..oh).flat_map(|i| (0..ow).flat_map(move |j| (0..c).map(move |k| (i, j, k))))
        {
            let taps = (0..3).flat_map(|a| (0..3).map(move |b| (2 * i + a, 2 * j + b)));
            // SAME padding before: one row (5 rows pad 2 in all), no column (6 pad 1).
            let taps = taps.filter(|&(r, s)| (1..=h).contains(&r) && s < w);
            let window: Vec<f32> = taps
                .map(|(r, s)| values[((r - 1) * w + s) * c + k])
                .collect();
            let want = if window.iter().any(|v| v.is_nan()) {
                f32::NAN
            } else if window.iter().all(|&v| v == 0.0) {
                if window.iter().any(|v| v.is_sign_positive()) {
                    0.0
                } else {
                    -0.0
                }
            } else {
                window.iter().copied().fold(f32::NEG_INFINITY, f32::max)
            };
            let have = got[(i * ow + j) * c + k];
            let same = (want.is_nan() && have.is_nan()) || want.to_bits() == have.to_bits();
            assert!(same, "pixel ({i}, {j}) channel {k}: {have} where {want}");
        }
    }
}
