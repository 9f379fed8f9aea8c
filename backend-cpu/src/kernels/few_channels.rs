//! A convolution of few input channels (a network's first layer: the one channel of a
//! digit or a spectrogram, the three of a picture). A GEMM over so short a reduction has
//! nothing to reuse, so each output row is computed directly:
//! - the input rows its windows read are copied, zero-padded left and right, one after
//!   another, so that every pixel's every tap is one offset plus the pixel's column times
//!   the stride, and edges need no other loop;
//! - each block of [`PIXELS`] pixels times two registers of output channels is accumulated
//!   in registers over the taps (a broadcast of the pixel's value times the filter's line of
//!   channels) and stored once.

use std::borrow::Cow;

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
    if out.is_empty() {
        return;
    }
    let [oh, ow] = g.output;
    let o = g.filters;
    let fused = fused_multiply_add();
    // Two registers of channels a block, one where that is all there are.
    let halves = if o <= LANES { 1 } else { 2 };
    let width = o.next_multiple_of(halves * LANES);
    let filter = padded_filter(f, o, width);
    let window = PaddedRows::of(g);
    out.par_chunks_mut(ow * o)
        .enumerate()
        .for_each_init(Vec::new, |padded, (row, out)| {
            let (image, y) = (row / oh, row % oh);
            window.pad_rows(x, g, (image, y), padded);
            let rows = Rows {
                padded,
                window: &window,
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

/// Where a window's taps lie in its input rows, padded: each row `line` elements (the
/// left padding, the input row, zeros to the last column any pixel reads), the filter's
/// rows of them one after another.
struct PaddedRows {
    /// Elements of a padded row.
    line: usize,
    /// Each tap's offset (filter row, filter column, input channel, in HWIO order) from a
    /// pixel's first: the pixel at column `xo` reads tap `t` at `offsets[t] + xo * step`.
    offsets: Vec<usize>,
    /// Elements between neighbouring pixels' windows.
    step: usize,
    /// The last element any pixel reads: the largest offset plus the last pixel's column
    /// times the step.
    last: usize,
}

impl PaddedRows {
    /// The padded rows' length and the taps' offsets in them for the windows of `g`.
    fn of(g: &WindowGeometry) -> Self {
        let [kh, kw] = [g.windows[0].size, g.windows[1].size];
        let (c, column) = (g.channels, &g.windows[1]);
        // The last padded column a pixel reads, or the input row's end, whichever is later.
        let reach = (g.output[1] - 1) * column.stride + (kw - 1) * column.dilation + 1;
        let line = reach.max(g.before[1] + g.input[1]) * c;
        let offsets: Vec<usize> = (0..kh)
            .flat_map(|a| {
                (0..kw).flat_map(move |b| {
                    (0..c).map(move |ci| a * line + b * column.dilation * c + ci)
                })
            })
            .collect();
        let step = column.stride * c;
        let last = offsets.iter().max().copied().unwrap_or(0) + (g.output[1] - 1) * step;
        PaddedRows {
            line,
            offsets,
            step,
            last,
        }
    }

    /// The input rows output row `y` of image `image` reads into `padded`, each padded to
    /// [`PaddedRows::line`] (all zeros where the filter's row falls in the padding).
    fn pad_rows<T: Float>(
        &self,
        x: &[T],
        g: &WindowGeometry,
        (image, y): (usize, usize),
        padded: &mut Vec<T>,
    ) {
        let (c, iw) = (g.channels, g.input[1]);
        let left = g.before[1] * c;
        padded.resize(g.windows[0].size * self.line, T::zero());
        for (a, line) in padded.chunks_exact_mut(self.line).enumerate() {
            let Some(h) = g.tap(0, y, a) else {
                line.fill(T::zero());
                continue;
            };
            let start = (image * g.input[0] + h) * iw * c;
            let (before, rest) = line.split_at_mut(left);
            let (row, after) = rest.split_at_mut(iw * c);
            before.fill(T::zero());
            row.copy_from_slice(&x[start..start + iw * c]);
            after.fill(T::zero());
        }
    }
}

/// One output row's operands: its window's padded input rows and the padded filter.
struct Rows<'a, T> {
    /// The padded input rows ([`PaddedRows::pad_rows`]).
    padded: &'a [T],
    /// Where the taps lie in them.
    window: &'a PaddedRows,
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
    // Every pixel's every tap lies in the padded rows, which makes `block`'s reads safe.
    assert!(
        rows.window.last < rows.padded.len(),
        "the taps lie in the padded rows"
    );
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
    let step = rows.window.step;
    let lines = rows.filter.chunks_exact(rows.width);
    for (weights, &offset) in lines.zip(&rows.window.offsets) {
        let (weights, _) = weights[first..first + H * LANES].as_chunks::<LANES>();
        let weights: &[[T; LANES]; H] = weights.try_into().expect("H registers");
        let at = offset + xo * step;
        // SAFETY: `at + p * step` is at most the largest offset plus the last pixel's column
        // times the step (`xo + p < rows.pixels`): `PaddedRows::last`, which `multiply` asserted
        // is in bounds.
        let values: [T; P] =
            std::array::from_fn(|p| unsafe { *rows.padded.get_unchecked(at + p * step) });
        madd_block::<T, FUSED, P, H>(&mut acc, &values, weights);
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
