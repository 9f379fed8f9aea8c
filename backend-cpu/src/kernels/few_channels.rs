//! A convolution of few input channels (a network's first layer: the one channel of a
//! digit or a spectrogram). A GEMM over so short a reduction has nothing to reuse, so each
//! output row is computed directly:
//! - the row's taps are packed into a small panel, transposed: one line per tap (filter
//!   row, filter column, input channel), one column per output pixel, zero where the tap
//!   falls in the padding, so edges need no other loop;
//! - each block of [`PIXELS`] pixels times two registers of output channels is accumulated
//!   in registers over the taps (a broadcast of the pixel's value times the filter's line of
//!   channels) and stored once.

use std::borrow::Cow;
use std::ops::Range;

use num_traits::Float;
use rayon::prelude::*;

use polytensor_core::plan::window::WindowGeometry;

use super::window::{fused_multiply_add, Finish};

/// Output channels a register holds: 256 bits of f32.
const LANES: usize = 8;

/// Output pixels a block accumulates at once: independent chains of multiply-adds that keep
/// the FMA units busy (one pixel's chain waits on each multiply-add's latency).
const PIXELS: usize = 4;

/// `out = conv(x, f)` then `finish`, on contiguous NHWC `x` and `out`, HWIO `f`.
pub(super) fn conv<T: Float + Send + Sync>(
    x: &[T],
    f: &[T],
    g: &WindowGeometry,
    finish: &Finish<'_, T>,
    out: &mut [T],
) {
    let [oh, ow] = g.output;
    let o = g.filters;
    let fused = fused_multiply_add();
    // Two registers of channels a block, one where that is all there are.
    let halves = if o <= LANES { 1 } else { 2 };
    let width = o.next_multiple_of(halves * LANES);
    let filter = padded_filter(f, o, width);
    let runs = inside_runs(g);
    out.par_chunks_mut(ow * o)
        .enumerate()
        .for_each_init(Vec::new, |panel, (row, out)| {
            let (image, y) = (row / oh, row % oh);
            pack_row(x, g, &runs, (image, y), panel);
            let rows = Rows {
                panel,
                pixels: ow,
                filter: &filter,
                width,
            };
            match (fused, halves) {
                // SAFETY: `fused` is true only where the CPU has AVX2 and FMA.
                #[cfg(target_arch = "x86_64")]
                (true, 1) => unsafe { multiply_fma::<T, 1>(&rows, out) },
                // SAFETY: as above.
                #[cfg(target_arch = "x86_64")]
                (true, _) => unsafe { multiply_fma::<T, 2>(&rows, out) },
                (_, 1) => multiply::<T, false, 1>(&rows, out),
                _ => multiply::<T, false, 2>(&rows, out),
            }
            finish.apply(out, row * ow * o, o);
        });
}

/// `f` (rows of `filters` output channels) with each row zero-padded to `width`: as it is
/// where that is its width.
fn padded_filter<T: Float>(f: &[T], filters: usize, width: usize) -> Cow<'_, [T]> {
    if width == filters {
        return Cow::Borrowed(f);
    }
    let mut padded = vec![T::zero(); f.len() / filters * width];
    for (row, line) in f.chunks_exact(filters).zip(padded.chunks_exact_mut(width)) {
        line[..filters].copy_from_slice(row);
    }
    Cow::Owned(padded)
}

/// For each filter column `b`, the output pixels whose tap `b` lies inside the image (a
/// run of the row, from `xo * stride + b * dilation` in `before..before + iw`) and the
/// input column of the run's first pixel. The same for every output row.
fn inside_runs(g: &WindowGeometry) -> Vec<(Range<usize>, usize)> {
    let column = &g.windows[1];
    let (ow, before) = (g.output[1], g.before[1]);
    (0..column.size)
        .map(|b| {
            let offset = b * column.dilation;
            let end = (before + g.input[1])
                .saturating_sub(offset)
                .div_ceil(column.stride)
                .min(ow);
            let start = before
                .saturating_sub(offset)
                .div_ceil(column.stride)
                .min(end);
            // Unused where the run is empty.
            let w = (start * column.stride + offset).saturating_sub(before);
            (start..end, w)
        })
        .collect()
}

/// Output row `y` of image `image`'s taps into `panel`: line `t` (tap `(a, b, ci)` of the
/// filter, in HWIO order) holds, for each output pixel, the input value it multiplies, or
/// zero in the padding. `runs` are [`inside_runs`].
fn pack_row<T: Float>(
    x: &[T],
    g: &WindowGeometry,
    runs: &[(Range<usize>, usize)],
    (image, y): (usize, usize),
    panel: &mut Vec<T>,
) {
    let kh = g.windows[0].size;
    let (c, ow, iw) = (g.channels, g.output[1], g.input[1]);
    let step = g.windows[1].stride * c;
    panel.resize(kh * runs.len() * c * ow, T::zero());
    let mut lines = panel.chunks_exact_mut(ow);
    for a in 0..kh {
        let h = g.tap(0, y, a);
        for (inside, w) in runs {
            for ci in 0..c {
                let Some(line) = lines.next() else { return };
                let Some(h) = h.filter(|_| !inside.is_empty()) else {
                    line.fill(T::zero());
                    continue;
                };
                line[..inside.start].fill(T::zero());
                line[inside.end..].fill(T::zero());
                let run = &mut line[inside.clone()];
                let first = ((image * g.input[0] + h) * iw + w) * c + ci;
                if step == 1 {
                    // One channel, stride 1: the run is a run of the input row.
                    run.copy_from_slice(&x[first..first + run.len()]);
                } else {
                    let values = x[first..].iter().step_by(step);
                    for (value, &v) in run.iter_mut().zip(values) {
                        *value = v;
                    }
                }
            }
        }
    }
}

/// One output row's operands: its transposed taps and the padded filter.
struct Rows<'a, T> {
    /// The packed taps ([`pack_row`]): a line of `pixels` values per tap.
    panel: &'a [T],
    /// Output pixels in the row.
    pixels: usize,
    /// The filter, a line of `width` output channels per tap ([`padded_filter`]).
    filter: &'a [T],
    /// The filter's padded line length, a multiple of a block's channels.
    width: usize,
}

/// [`multiply`] compiled for AVX2 and FMA.
///
/// # Safety
///
/// The CPU must have AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn multiply_fma<T: Float, const H: usize>(rows: &Rows<'_, T>, out: &mut [T]) {
    multiply::<T, true, H>(rows, out);
}

/// `out` (a row of pixels of `out.len() / pixels` channels) = the taps times the filter
/// (`FUSED`: with fused multiply-adds), in blocks of `H` registers of channels: blocks of
/// [`PIXELS`] pixels, then the row's remaining pixels one by one.
#[inline(always)]
fn multiply<T: Float, const FUSED: bool, const H: usize>(rows: &Rows<'_, T>, out: &mut [T]) {
    let channels = out.len() / rows.pixels;
    for first in (0..channels).step_by(H * LANES) {
        let mut xo = 0;
        while xo + PIXELS <= rows.pixels {
            block::<T, FUSED, PIXELS, H>(rows, first, xo, channels, out);
            xo += PIXELS;
        }
        while xo < rows.pixels {
            block::<T, FUSED, 1, H>(rows, first, xo, channels, out);
            xo += 1;
        }
    }
}

/// Output channels `first..first + H * LANES` (fewer at the end) of pixels `xo..xo + P`,
/// each pixel's accumulators in registers over all the taps.
#[inline(always)]
fn block<T: Float, const FUSED: bool, const P: usize, const H: usize>(
    rows: &Rows<'_, T>,
    first: usize,
    xo: usize,
    channels: usize,
    out: &mut [T],
) {
    let mut acc = [[[T::zero(); LANES]; H]; P];
    let lines = rows.filter.chunks_exact(rows.width);
    for (weights, values) in lines.zip(rows.panel.chunks_exact(rows.pixels)) {
        let (weights, _) = weights[first..first + H * LANES].as_chunks::<LANES>();
        let weights: &[[T; LANES]; H] = weights.try_into().expect("H registers");
        let values: &[T; P] = values[xo..xo + P].try_into().expect("P pixels");
        madd_block::<T, FUSED, P, H>(&mut acc, values, weights);
    }
    let cols = (H * LANES).min(channels - first);
    for (p, acc) in acc.iter().enumerate() {
        let pixel = &mut out[(xo + p) * channels + first..][..cols];
        for (lanes, acc) in pixel.chunks_mut(LANES).zip(acc) {
            if let Ok(lanes) = <&mut [T; LANES]>::try_from(&mut *lanes) {
                // A whole register: a store, not a call of `memcpy`.
                *lanes = *acc;
            } else {
                let width = lanes.len();
                lanes.copy_from_slice(&acc[..width]);
            }
        }
    }
}

/// `acc[p] += values[p] * weights` for each pixel `p` (`FUSED`: with fused multiply-adds).
/// Written with indices: the compiler keeps this form's accumulators in vector registers
/// (iterators over the nested arrays were left as scalar multiply-adds).
#[inline(always)]
#[allow(clippy::needless_range_loop)]
fn madd_block<T: Float, const FUSED: bool, const P: usize, const H: usize>(
    acc: &mut [[[T; LANES]; H]; P],
    values: &[T; P],
    weights: &[[T; LANES]; H],
) {
    for p in 0..P {
        for h in 0..H {
            for l in 0..LANES {
                let (v, w, a) = (values[p], weights[h][l], acc[p][h][l]);
                acc[p][h][l] = if FUSED { v.mul_add(w, a) } else { a + v * w };
            }
        }
    }
}
