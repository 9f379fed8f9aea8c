//! 3x3 convolutions of stride 1 by Winograd's minimal filtering F(2x2, 3x3) (Lavin and
//! Gray, "Fast Algorithms for Convolutional Neural Networks", 2015): each 2x2 block of
//! output pixels (a tile) comes from a 4x4 block of input pixels in 16 products per
//! channel pair instead of 36, 2.25x fewer multiply-adds than the implicit GEMM.
//!
//! - The filter becomes `U = G g Gᵀ`: 16 matrices of `[channels, filters]`.
//! - Each tile's input becomes `V = Bᵀ d B`: a row of `channels` in each of 16 matrices.
//! - 16 GEMMs: `M[ξ] = V[ξ] U[ξ]`, `[tiles, filters]` each.
//! - The output is `Aᵀ M A`, cropped at the image's edges, then the epilogue.
//!
//! In NHWC the transforms are elementwise over the contiguous channels, so they vectorise;
//! they add and subtract only (and halve the filter), so the results stay within a few ulps
//! of the GEMM's. Many tiles: the threads take blocks of tiles, each block's transforms
//! and GEMMs in its own cache. Few (a small image): the 16 GEMMs are split across the
//! threads. ARCHITECTURE.md records why the CPU takes this path where TensorFlow's does not.

use std::cell::Cell;
use std::thread::LocalKey;

use bytemuck::Pod;
use num_traits::Float;
use polytensor_core::plan::window::WindowGeometry;
use rayon::prelude::*;

use super::kept;
use super::matmul::{gemm_rows, GemmElem};
use super::window::Finish;

/// Tiles per block (whole rows of tiles, at least one): the 16 GEMMs of a block share its
/// transformed input, and each packs the transformed filter once per block.
const BLOCK_TILES: usize = 192;

/// Channels and filters from which a convolution runs here: the transforms cost per tile
/// in proportion to `channels + filters`, the GEMMs in proportion to their product
/// (DenseNet's 32 filters ran 1.7-3x slower here).
const MIN_CHANNELS: usize = 64;

/// Tiles from which a convolution runs here (64 tiles broke even on ResNet's and VGG's
/// last layers: the filter's transform, paid once per call, and the passes between the
/// threads eat the savings).
const MIN_TILES: usize = 128;

/// The multiply-adds Winograd must save (20 per tile, channel and filter) for a call to
/// run here: below, the passes between the threads cost more.
const MIN_SAVED: usize = 1 << 26;

/// Whether the convolution `g` runs by Winograd's F(2x2, 3x3): a 3x3 window of stride 1,
/// no dilation, enough channels, filters and tiles (measured on the zoo's networks).
pub(super) fn applies(g: &WindowGeometry) -> bool {
    let plain = g
        .windows
        .iter()
        .all(|w| w.size == 3 && w.stride == 1 && w.dilation == 1);
    let (c, k, t) = (g.channels, g.filters, tiles(g));
    plain
        && c >= MIN_CHANNELS
        && k >= MIN_CHANNELS
        && t >= MIN_TILES
        && t.saturating_mul(c).saturating_mul(k).saturating_mul(20) >= MIN_SAVED
}

/// The 2x2 tiles that cover the output.
fn tiles(g: &WindowGeometry) -> usize {
    g.batch * g.output[0].div_ceil(2) * g.output[1].div_ceil(2)
}

/// A row of tiles: its image, its index in the image, and its one or two rows of output
/// pixels (one at an odd height's end).
type TileRow<'o, T> = (usize, usize, &'o mut [T]);

/// `out = conv(x, f)` then `finish`, for `g` that [`applies`]: `x` NHWC, `f` HWIO in
/// strips of `width` filters (`[filters / width, 9 * channels, width]`; HWIO itself is one
/// strip of every filter), `out` NHWC, all contiguous.
pub(super) fn conv<T: GemmElem + Float + Pod + Send + Sync>(
    x: &[T],
    (f, width): (&[T], usize),
    g: &WindowGeometry,
    finish: &Finish<'_, T>,
    out: &mut [T],
) {
    let (c, k) = (g.channels, g.filters);
    if out.is_empty() {
        return;
    }
    with_buffer(&FILTERS, 16 * c * k, |u: &mut [T]| {
        transform_filter((f, width), c, k, u);
        convolve(x, g, &Plain { u, c, k }, finish, out);
    });
}

/// [`conv`] of an f32 image by a bf16 filter with the 16 GEMMs in bf16 (the mixed
/// precision of `mixed.rs`): the filter is widened and transformed in f32, then `rounded`
/// makes the GEMMs' right operands of the transformed filter.
pub(super) fn conv_rounded<P: Products<f32>>(
    x: &[f32],
    f: &[half::bf16],
    g: &WindowGeometry,
    rounded: impl FnOnce(&[f32]) -> P,
    finish: &Finish<'_, f32>,
    out: &mut [f32],
) {
    let (c, k) = (g.channels, g.filters);
    if out.is_empty() {
        return;
    }
    let wide: Vec<f32> = f.iter().map(|v| v.to_f32()).collect();
    with_buffer(&FILTERS, 16 * c * k, |u: &mut [f32]| {
        transform_filter((&wide, k), c, k, u);
        convolve(x, g, &rounded(u), finish, out);
    });
}

/// The 16 GEMMs' right operands (the transformed filter) and how they multiply.
pub(super) trait Products<T>: Sync {
    /// `m = v u[xi]` for `v` of `[tiles, channels]` and `m` of `[tiles, filters]`.
    fn multiply(&self, xi: usize, v: &[T], m: &mut [T]);
}

/// The transformed filter as it is: 16 matrices of `[c, k]`, multiplied by the f32 or f64
/// GEMM.
struct Plain<'a, T> {
    u: &'a [T],
    c: usize,
    k: usize,
}

impl<T: GemmElem + Sync> Products<T> for Plain<'_, T> {
    fn multiply(&self, xi: usize, v: &[T], m: &mut [T]) {
        let (c, k) = (self.c, self.k);
        gemm_rows(v.len() / c, k, c, v, &self.u[xi * c * k..][..c * k], m);
    }
}

/// [`conv`] with the transformed filter's `products`.
fn convolve<T: GemmElem + Float + Pod + Send + Sync>(
    x: &[T],
    g: &WindowGeometry,
    u: &impl Products<T>,
    finish: &Finish<'_, T>,
    out: &mut [T],
) {
    let k = g.filters;
    let [oh, ow] = g.output;
    let across = ow.div_ceil(2);
    let mut rows: Vec<TileRow<'_, T>> = out
        .chunks_mut(oh * ow * k)
        .enumerate()
        .flat_map(|(image, pixels)| {
            pixels
                .chunks_mut(2 * ow * k)
                .enumerate()
                .map(move |(row, slice)| (image, row, slice))
        })
        .collect();
    // Where a row of tiles' pixels start in the output.
    let first_of = |image: usize, row: usize| (image * oh + 2 * row) * ow * k;
    let per_block = (BLOCK_TILES / across).max(1);
    let blocks = rows.len().div_ceil(per_block);
    if blocks >= 2 * rayon::current_num_threads() {
        rows.par_chunks_mut(per_block).for_each(|block| {
            with_scratch(g, block.len() * across, |s| {
                run_block(x, g, u, block, s, false)
            });
            for (image, row, pixels) in block {
                finish.apply(pixels, first_of(*image, *row), k);
            }
        });
    } else {
        with_scratch(g, rows.len() * across, |s| {
            run_block(x, g, u, &mut rows, s, true)
        });
        rows.par_iter_mut()
            .for_each(|(image, row, pixels)| finish.apply(pixels, first_of(*image, *row), k));
    }
}

/// The buffers of one block: the transformed input, the GEMMs' products, and a row of
/// zeros (the padding's pixels) and one that takes the pixels cropped away.
struct Scratch<'s, T> {
    v: &'s mut [T],
    m: &'s mut [T],
    zeros: &'s [T],
    cropped: &'s mut [T],
}

/// The most 8-byte words a thread keeps in each buffer between calls (32 MiB: VGG's
/// 512 x 512 transformed filter is 16).
const KEPT_WORDS: usize = 1 << 22;

thread_local! {
    /// Each thread's transformed filters, kept between calls ([`kept`]).
    static FILTERS: Cell<Vec<u64>> = const { Cell::new(Vec::new()) };
    /// Each thread's block buffers ([`Scratch`]), kept likewise.
    static BLOCKS: Cell<Vec<u64>> = const { Cell::new(Vec::new()) };
}

/// `f` on `len` elements of this thread's buffer `slot` (contents unspecified).
fn with_buffer<T: Pod, R>(
    slot: &'static LocalKey<Cell<Vec<u64>>>,
    len: usize,
    f: impl FnOnce(&mut [T]) -> R,
) -> R {
    let words = (len * std::mem::size_of::<T>()).div_ceil(8);
    kept::with_kept(slot, KEPT_WORDS, |buffer| {
        if buffer.len() < words {
            buffer.resize(words, 0);
        }
        let elements: &mut [T] = bytemuck::cast_slice_mut(&mut buffer[..words]);
        f(&mut elements[..len])
    })
}

/// `f` on the [`Scratch`] of a block of `tiles` tiles, from this thread's buffer.
fn with_scratch<T: Pod + Float, R>(
    g: &WindowGeometry,
    tiles: usize,
    f: impl FnOnce(Scratch<'_, T>) -> R,
) -> R {
    let (c, k) = (g.channels, g.filters);
    with_buffer(
        &BLOCKS,
        16 * tiles * (c + k) + c + 4 * k,
        |buffer: &mut [T]| {
            let (v, rest) = buffer.split_at_mut(16 * tiles * c);
            let (m, rest) = rest.split_at_mut(16 * tiles * k);
            let (zeros, cropped) = rest.split_at_mut(c);
            zeros.fill(T::zero());
            f(Scratch {
                v,
                m,
                zeros,
                cropped,
            })
        },
    )
}

/// Transform the tiles of `rows`, multiply (the 16 GEMMs across the threads if
/// `share_gemms`, else on this thread) and write the output pixels.
fn run_block<T: GemmElem + Float + Pod + Send + Sync>(
    x: &[T],
    g: &WindowGeometry,
    u: &impl Products<T>,
    rows: &mut [TileRow<'_, T>],
    mut s: Scratch<'_, T>,
    share_gemms: bool,
) {
    let (c, k) = (g.channels, g.filters);
    let across = g.output[1].div_ceil(2);
    let tiles = rows.len() * across;
    for (r, &mut (image, row, _)) in rows.iter_mut().enumerate() {
        for col in 0..across {
            let slot = r * across + col;
            // The 16 input pixels' channels (zeros in the padding).
            let d: [&[T]; 16] = std::array::from_fn(|i| {
                match (g.tap(0, 2 * row, i / 4), g.tap(1, 2 * col, i % 4)) {
                    (Some(h), Some(w)) => {
                        &x[((image * g.input[0] + h) * g.input[1] + w) * c..][..c]
                    }
                    _ => &s.zeros[..c],
                }
            });
            let mut matrices = s.v.chunks_exact_mut(tiles * c);
            let v: [&mut [T]; 16] = std::array::from_fn(|_| match matrices.next() {
                Some(matrix) => &mut matrix[slot * c..][..c],
                None => &mut [],
            });
            transform::<T, InputTransform, 16, 16>(d, v);
        }
    }
    let multiply = |(xi, m): (usize, &mut [T])| {
        let v = &s.v[xi * tiles * c..][..tiles * c];
        u.multiply(xi, v, m);
    };
    if share_gemms {
        s.m.par_chunks_mut(tiles * k).enumerate().for_each(multiply);
    } else {
        s.m.chunks_mut(tiles * k).enumerate().for_each(multiply);
    }
    let (m, cropped) = (&s.m, &mut s.cropped);
    let untransform = |r: usize, pixels: &mut [T], cropped: &mut [T]| {
        let width = g.output[1];
        for col in 0..across {
            let slot = r * across + col;
            let products: [&[T]; 16] = std::array::from_fn(|xi| &m[(xi * tiles + slot) * k..][..k]);
            // The tile's four pixels, those outside the image into parts of `cropped`.
            let (top, bottom) = pixels.split_at_mut((width * k).min(pixels.len()));
            let mut spare = cropped.chunks_exact_mut(k);
            let mut slots: [&mut [T]; 4] = Default::default();
            for (i, line) in [top, bottom].into_iter().enumerate() {
                let mut line = line.get_mut(2 * col * k..).unwrap_or_default();
                for j in 0..2 {
                    slots[i * 2 + j] = if line.len() >= k {
                        let (pixel, rest) = std::mem::take(&mut line).split_at_mut(k);
                        line = rest;
                        pixel
                    } else {
                        spare.next().unwrap_or_default()
                    };
                }
            }
            transform::<T, OutputTransform, 16, 4>(products, slots);
        }
    };
    if share_gemms {
        rows.par_iter_mut().enumerate().for_each_init(
            || vec![T::zero(); 4 * k],
            |spare, (r, (_, _, pixels))| untransform(r, pixels, spare),
        );
    } else {
        for (r, (_, _, pixels)) in rows.iter_mut().enumerate() {
            untransform(r, pixels, cropped);
        }
    }
}

/// `U = G g Gᵀ` for every channel and filter of the filter `f` (HWIO in strips of `width`
/// filters, as [`conv`] takes it): 16 matrices of `[c, k]`, `G = [[1, 0, 0], [½, ½, ½],
/// [½, -½, ½], [0, 0, 1]]`. Channels split across threads.
fn transform_filter<T: Float + Send + Sync>(
    (f, width): (&[T], usize),
    c: usize,
    k: usize,
    u: &mut [T],
) {
    // Per channel: the 16 rows of `k` it owns, one in each matrix.
    let mut rows: Vec<Vec<&mut [T]>> = (0..c).map(|_| Vec::with_capacity(16)).collect();
    for matrix in u.chunks_mut(c * k) {
        for (channel, row) in matrix.chunks_mut(k).enumerate() {
            rows[channel].push(row);
        }
    }
    rows.par_iter_mut().enumerate().for_each(|(channel, out)| {
        for (strip, first) in (0..k).step_by(width.max(1)).enumerate() {
            // Tap `(a, b)` of this channel: a row of this strip's filters.
            let taps: [&[T]; 9] = std::array::from_fn(|t| {
                &f[strip * 9 * c * width + (t * c + channel) * width..][..width]
            });
            let mut rows = out.iter_mut();
            let out: [&mut [T]; 16] = std::array::from_fn(|_| match rows.next() {
                Some(row) => &mut row[first..first + width],
                None => &mut [],
            });
            transform::<T, FilterTransform, 9, 16>(taps, out);
        }
    });
}

/// Values of each row a transform holds at once, in local arrays: what lets it vectorise
/// (the rows themselves are too many pointers, which may alias, for that).
const CHUNK: usize = 16;

/// One of the three transforms, elementwise over rows: `I` rows in, `O` rows out.
trait Transform<T, const I: usize, const O: usize> {
    /// The outputs at position `l` of a chunk of the input rows (`[row][l]`).
    fn at(e: &[[T; CHUNK]; I], l: usize) -> [T; O];
}

/// `U = G g Gᵀ` of a channel's 3x3 taps (row-major), `G = [[1, 0, 0], [½, ½, ½], [½, -½,
/// ½], [0, 0, 1]]`.
struct FilterTransform;
impl<T: Float> Transform<T, 9, 16> for FilterTransform {
    #[inline(always)]
    fn at(g: &[[T; CHUNK]; 9], j: usize) -> [T; 16] {
        let half = T::one() / (T::one() + T::one());
        let g_rows = |[x0, x1, x2]: [T; 3]| [x0, (x0 + x1 + x2) * half, (x0 - x1 + x2) * half, x2];
        // `G g`, a column at a time, then `(G g) Gᵀ`, a row at a time.
        let c0 = g_rows([g[0][j], g[3][j], g[6][j]]);
        let c1 = g_rows([g[1][j], g[4][j], g[7][j]]);
        let c2 = g_rows([g[2][j], g[5][j], g[8][j]]);
        let [u0, u1, u2, u3] = g_rows([c0[0], c1[0], c2[0]]);
        let [u4, u5, u6, u7] = g_rows([c0[1], c1[1], c2[1]]);
        let [u8, u9, u10, u11] = g_rows([c0[2], c1[2], c2[2]]);
        let [u12, u13, u14, u15] = g_rows([c0[3], c1[3], c2[3]]);
        [
            u0, u1, u2, u3, u4, u5, u6, u7, u8, u9, u10, u11, u12, u13, u14, u15,
        ]
    }
}

/// `V = Bᵀ d B` of a tile's 16 input pixels (row-major 4x4),
/// `Bᵀ = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]`.
struct InputTransform;
impl<T: Float> Transform<T, 16, 16> for InputTransform {
    #[inline(always)]
    fn at(e: &[[T; CHUNK]; 16], i: usize) -> [T; 16] {
        // `Bᵀ d`, a column at a time, then `(Bᵀ d) B`, a row at a time.
        let c0 = b_rows([e[0][i], e[4][i], e[8][i], e[12][i]]);
        let c1 = b_rows([e[1][i], e[5][i], e[9][i], e[13][i]]);
        let c2 = b_rows([e[2][i], e[6][i], e[10][i], e[14][i]]);
        let c3 = b_rows([e[3][i], e[7][i], e[11][i], e[15][i]]);
        let [v0, v1, v2, v3] = b_rows([c0[0], c1[0], c2[0], c3[0]]);
        let [v4, v5, v6, v7] = b_rows([c0[1], c1[1], c2[1], c3[1]]);
        let [v8, v9, v10, v11] = b_rows([c0[2], c1[2], c2[2], c3[2]]);
        let [v12, v13, v14, v15] = b_rows([c0[3], c1[3], c2[3], c3[3]]);
        [
            v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15,
        ]
    }
}

/// `Y = Aᵀ M A` of a tile's 16 products (row-major 4x4) into its 2x2 output pixels,
/// `Aᵀ = [[1, 1, 1, 0], [0, 1, -1, -1]]`.
struct OutputTransform;
impl<T: Float> Transform<T, 16, 4> for OutputTransform {
    #[inline(always)]
    fn at(e: &[[T; CHUNK]; 16], i: usize) -> [T; 4] {
        // `Aᵀ M`, a column at a time, then `(Aᵀ M) A`, a row at a time.
        let c0 = a_rows([e[0][i], e[4][i], e[8][i], e[12][i]]);
        let c1 = a_rows([e[1][i], e[5][i], e[9][i], e[13][i]]);
        let c2 = a_rows([e[2][i], e[6][i], e[10][i], e[14][i]]);
        let c3 = a_rows([e[3][i], e[7][i], e[11][i], e[15][i]]);
        let [y0, y1] = a_rows([c0[0], c1[0], c2[0], c3[0]]);
        let [y2, y3] = a_rows([c0[1], c1[1], c2[1], c3[1]]);
        [y0, y1, y2, y3]
    }
}

/// `outputs[o][l] = X::at(inputs, l)[o]` elementwise over rows of the outputs' length,
/// compiled for the widest vectors this CPU has.
fn transform<T: Float, X: Transform<T, I, O>, const I: usize, const O: usize>(
    inputs: [&[T]; I],
    outputs: [&mut [T]; O],
) {
    match crate::vmath::isa() {
        // SAFETY: `isa()` found the features each function is compiled for on this CPU.
        #[cfg(target_arch = "x86_64")]
        crate::vmath::Isa::Avx512 => unsafe { transform_avx512::<T, X, I, O>(inputs, outputs) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        crate::vmath::Isa::Avx2 => unsafe { transform_avx2::<T, X, I, O>(inputs, outputs) },
        _ => transform_rows::<T, X, I, O>(inputs, outputs),
    }
}

/// [`transform_rows`] for AVX-512.
///
/// # Safety
///
/// The CPU must have AVX-512 (F, DQ, VL, BW), AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")]
unsafe fn transform_avx512<T: Float, X: Transform<T, I, O>, const I: usize, const O: usize>(
    inputs: [&[T]; I],
    outputs: [&mut [T]; O],
) {
    transform_rows::<T, X, I, O>(inputs, outputs)
}

/// [`transform_rows`] for AVX2.
///
/// # Safety
///
/// The CPU must have AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn transform_avx2<T: Float, X: Transform<T, I, O>, const I: usize, const O: usize>(
    inputs: [&[T]; I],
    outputs: [&mut [T]; O],
) {
    transform_rows::<T, X, I, O>(inputs, outputs)
}

/// [`transform`]'s loop, a chunk of [`CHUNK`] values of each row at a time.
#[inline(always)]
fn transform_rows<T: Float, X: Transform<T, I, O>, const I: usize, const O: usize>(
    inputs: [&[T]; I],
    mut outputs: [&mut [T]; O],
) {
    let n = outputs.iter().map(|r| r.len()).min().unwrap_or(0);
    let mut chunk = [[T::zero(); CHUNK]; I];
    let mut results = [[T::zero(); CHUNK]; O];
    let compute = |chunk: &[[T; CHUNK]; I], results: &mut [[T; CHUNK]; O]| {
        for l in 0..CHUNK {
            for (rows, value) in results.iter_mut().zip(X::at(chunk, l)) {
                rows[l] = value;
            }
        }
    };
    // Whole chunks copy arrays of a constant length, inline (the copies of the tail call
    // `memcpy`, which per chunk cost as much as the transform).
    let whole = n - n % CHUNK;
    for at in (0..whole).step_by(CHUNK) {
        for (rows, input) in chunk.iter_mut().zip(&inputs) {
            if let Ok(values) = <&[T; CHUNK]>::try_from(&input[at..at + CHUNK]) {
                *rows = *values;
            }
        }
        compute(&chunk, &mut results);
        for (output, rows) in outputs.iter_mut().zip(&results) {
            if let Ok(values) = <&mut [T; CHUNK]>::try_from(&mut output[at..at + CHUNK]) {
                *values = *rows;
            }
        }
    }
    if whole < n {
        let width = n - whole;
        for (rows, input) in chunk.iter_mut().zip(&inputs) {
            rows[..width].copy_from_slice(&input[whole..n]);
        }
        compute(&chunk, &mut results);
        for (output, rows) in outputs.iter_mut().zip(&results) {
            output[whole..n].copy_from_slice(&rows[..width]);
        }
    }
}

/// `Bᵀ x` for a column `x` of 4.
#[inline(always)]
fn b_rows<T: Float>([x0, x1, x2, x3]: [T; 4]) -> [T; 4] {
    [x0 - x2, x1 + x2, x2 - x1, x1 - x3]
}

/// `Aᵀ x` for a column `x` of 4.
#[inline(always)]
fn a_rows<T: Float>([x0, x1, x2, x3]: [T; 4]) -> [T; 2] {
    [x0 + x1 + x2, x1 - x2 - x3]
}

#[cfg(test)]
mod tests {
    use polytensor_core::plan::window::Window;
    use polytensor_core::UnaryOp;

    use super::*;

    /// A convolution by its definition, in f64.
    fn direct(x: &[f64], f: &[f64], g: &WindowGeometry) -> Vec<f64> {
        let (c, k) = (g.channels, g.filters);
        let [oh, ow] = g.output;
        let mut out = vec![0f64; g.batch * oh * ow * k];
        for n in 0..g.batch {
            for y in 0..oh {
                for xo in 0..ow {
                    for a in 0..3 {
                        for b in 0..3 {
                            let (Some(h), Some(w)) = (g.tap(0, y, a), g.tap(1, xo, b)) else {
                                continue;
                            };
                            for ch in 0..c {
                                let v = x[((n * g.input[0] + h) * g.input[1] + w) * c + ch];
                                for j in 0..k {
                                    let weight = f[((a * 3 + b) * c + ch) * k + j];
                                    out[((n * oh + y) * ow + xo) * k + j] += v * weight;
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// Values in [-0.5, 0.5) that f32 holds exactly.
    fn values(len: usize, seed: u32) -> Vec<f64> {
        (0..len)
            .map(|i| {
                let h = (i as u32 ^ seed).wrapping_mul(2_654_435_761);
                f64::from(h >> 8) / f64::from(1u32 << 24) - 0.5
            })
            .collect()
    }

    /// Every edge of the tiling against the definition, in `T`, within `tolerance`: SAME
    /// with odd and even sizes, VALID, an explicit asymmetric padding, a single row of
    /// tiles, and enough rows of tiles for blocks of them on every thread, with a shift and
    /// a `Relu` after. (The public path, with its thresholds, is `keras_vgg_block` in the
    /// models tests, against TensorFlow.)
    fn matches_the_definition<T: GemmElem + Float + Pod + Send + Sync>(tolerance: f64) {
        let window = Window {
            size: 3,
            stride: 1,
            dilation: 1,
        };
        // (batch, input, padding before, output, channels, filters).
        let cases = [
            (8, [200, 2], [1, 1], [200, 2], 3, 4),
            (2, [7, 9], [1, 1], [7, 9], 5, 6),
            (1, [8, 6], [1, 1], [8, 6], 17, 3),
            (1, [9, 7], [0, 0], [7, 5], 4, 20),
            (3, [5, 6], [2, 0], [6, 4], 3, 2),
            (1, [3, 12], [1, 1], [3, 12], 16, 16),
        ];
        let of = |v: &[f64]| -> Vec<T> { v.iter().map(|&x| T::from(x).unwrap()).collect() };
        for (batch, input, before, output, channels, filters) in cases {
            let g = WindowGeometry {
                batch,
                input,
                channels,
                windows: [window, window],
                before,
                output,
                filters,
            };
            let x = values(batch * input[0] * input[1] * channels, 1);
            let f = values(9 * channels * filters, 2);
            let shift = values(filters, 3);
            let shift_t = of(&shift);
            // A residual of the output's shape: each tile's pixels find theirs.
            let residual = values(batch * output[0] * output[1] * filters, 4);
            let residual_t = of(&residual);
            let finish = Finish {
                scale: None,
                shift: Some(&shift_t[..]),
                residual: Some(&residual_t[..]),
                activation: Some(UnaryOp::Relu),
            };
            let mut out = vec![T::nan(); batch * output[0] * output[1] * filters];
            conv(&of(&x), (&of(&f), filters), &g, &finish, &mut out);
            let want = direct(&x, &f, &g);
            for (i, (&got, &want)) in out.iter().zip(&want).enumerate() {
                let want = (want + shift[i % filters] + residual[i]).max(0.0);
                let got = got.to_f64().unwrap();
                assert!(
                    (got - want).abs() <= tolerance,
                    "{g:?} at {i}: got {got}, want {want}"
                );
            }
        }
    }

    /// The transforms compiled for each instruction set this CPU has give the baseline's
    /// bits (they add, subtract and halve only).
    #[test]
    #[cfg(target_arch = "x86_64")]
    #[cfg_attr(miri, ignore = "Miri runs only the instructions a build enables")]
    fn every_instruction_set_transforms_alike() {
        use crate::vmath::{detected, Isa};
        let rows: Vec<Vec<f32>> = (0..16)
            .map(|r| values(37, r).iter().map(|&v| v as f32).collect())
            .collect();
        let run = |isa: Isa| {
            let mut out = vec![vec![0f32; 37]; 16];
            let inputs: [&[f32]; 16] = std::array::from_fn(|i| &rows[i][..]);
            let mut slots = out.iter_mut();
            let outputs: [&mut [f32]; 16] = std::array::from_fn(|_| match slots.next() {
                Some(row) => &mut row[..],
                None => &mut [],
            });
            match isa {
                // SAFETY: only called for an instruction set this CPU has (below).
                Isa::Avx512 => unsafe {
                    transform_avx512::<f32, InputTransform, 16, 16>(inputs, outputs)
                },
                // SAFETY: as above.
                Isa::Avx2 => unsafe {
                    transform_avx2::<f32, InputTransform, 16, 16>(inputs, outputs)
                },
                _ => transform_rows::<f32, InputTransform, 16, 16>(inputs, outputs),
            }
            out
        };
        let baseline = run(Isa::Baseline);
        let available = match detected() {
            Isa::Avx512 => vec![Isa::Avx2, Isa::Avx512],
            Isa::Avx2 => vec![Isa::Avx2],
            _ => vec![],
        };
        for isa in available {
            assert_eq!(run(isa), baseline, "{isa:?}");
        }
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "thousands of GEMMs; Miri checks the CPU kernels elsewhere"
    )]
    fn winograd_matches_the_definition_at_every_edge() {
        matches_the_definition::<f32>(1e-5);
        matches_the_definition::<f64>(1e-13);
    }
}
