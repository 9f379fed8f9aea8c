//! 3x3 convolutions of stride 1 by Winograd's minimal filtering F(m x m, 3x3) (Lavin and
//! Gray, "Fast Algorithms for Convolutional Neural Networks", 2015): each m x m block of
//! output pixels (a tile) comes from an n x n block of input pixels (n = m + 2) in n²
//! products per channel pair instead of 9 m². F(2x2, 3x3) takes 16 products for 36
//! (2.25x fewer multiply-adds than the implicit GEMM), F(4x4, 3x3) 36 for 144 (4x).
//!
//! - The filter becomes `U = G g Gᵀ`: n² matrices of `[channels, filters]`.
//! - Each tile's input becomes `V = Bᵀ d B`: a row of `channels` in each of n² matrices.
//! - n² GEMMs: `M[ξ] = V[ξ] U[ξ]`, `[tiles, filters]` each.
//! - The output is `Aᵀ M A`, cropped at the image's edges, then the epilogue.
//!
//! A tiling is its three one-dimensional transforms ([`Tiling`]); the code around them is
//! one for both. In NHWC the transforms are elementwise over the contiguous channels, so
//! they vectorise. F(2x2, 3x3)'s add, subtract and halve, so its results stay within a few
//! ulps of the GEMM's; F(4x4, 3x3)'s multiply by up to 8 and 1/24, which costs a few more
//! bits (within 1e-5 of the definition on the unit test's data, as F(2x2, 3x3)). Many
//! tiles: the threads take blocks of tiles, each block's transforms and GEMMs in its own
//! cache. Few (a small image): the GEMMs are split across the threads. ARCHITECTURE.md
//! records why the CPU takes this path where TensorFlow's does not.

use std::cell::Cell;
use std::marker::PhantomData;
use std::thread::LocalKey;

use bytemuck::Pod;
use num_traits::Float;
use polytensor_core::plan::window::WindowGeometry;
use rayon::prelude::*;

use super::kept;
use super::matmul::{gemm_rows, GemmElem};
use super::window::Finish;

/// Products per block (whole rows of tiles, at least one; 192 tiles of F(2x2, 3x3)): the
/// GEMMs of a block share its transformed input, and each packs the transformed filter
/// once per block.
const BLOCK_PRODUCTS: usize = 192 * 16;

/// Channels (and for F(2x2, 3x3) filters) from which a convolution runs here: the
/// transforms cost per tile in proportion to `channels + filters`, the GEMMs in proportion
/// to their product (DenseNet's 32 filters ran 1.7-3x slower by F(2x2, 3x3)).
const MIN_CHANNELS: usize = 64;

/// F(2x2, 3x3)'s tiles from which a convolution runs by it (64 tiles broke even on
/// ResNet's and VGG's last layers: the filter's transform, paid once per call, and the
/// passes between the threads eat the savings).
const MIN_TILES: usize = 128;

/// The multiply-adds F(2x2, 3x3) must save (20 per tile, channel and filter) for a call
/// to run by it: below, the passes between the threads cost more.
const MIN_SAVED: usize = 1 << 26;

/// F(4x4, 3x3)'s tiles from which a convolution runs by it. Fewer filters than
/// [`MIN_CHANNELS`] need twice as many (DenseNet121's 32 of 128 channels: 1.2-1.6x faster
/// than the implicit GEMM at 256 tiles, 6% slower at 64). Measured in the zoo's models,
/// where the layers do not find their filters in cache: at 16 tiles (ResNet50's 4x4 layers
/// at batch 16, its 16x16 and VGG16's at batch 1) the filter's transform per call and the
/// 36 small GEMMs ran 5-100% slower than the implicit GEMM; at 64 (VGG16's 8x8 layers of
/// 512 channels at batch 16, 32x32 layers at batch 1) 10-30% faster than F(2x2, 3x3).
fn min_wide_tiles(k: usize) -> usize {
    if k < MIN_CHANNELS {
        128
    } else {
        64
    }
}

/// Filters from which F(4x4, 3x3) may run a convolution ([`min_wide_tiles`]).
const MIN_WIDE_FILTERS: usize = 32;

/// Winograd's tilings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tiles {
    /// F(2x2, 3x3): 2.25x fewer multiply-adds than the implicit GEMM, a small transform.
    Two,
    /// F(4x4, 3x3): 4x fewer, 36 GEMMs, a transform of larger terms.
    Four,
}

/// The tiling by which the convolution `g` runs, if any: a 3x3 window of stride 1, no
/// dilation, enough channels and filters, and for each tiling enough tiles (measured on
/// the zoo's networks).
pub(super) fn tiling(g: &WindowGeometry) -> Option<Tiles> {
    let plain = g
        .windows
        .iter()
        .all(|w| w.size == 3 && w.stride == 1 && w.dilation == 1);
    let (c, k) = (g.channels, g.filters);
    if !plain || c < MIN_CHANNELS || k < MIN_WIDE_FILTERS {
        return None;
    }
    let [oh, ow] = g.output;
    let wide = g.batch * oh.div_ceil(4) * ow.div_ceil(4);
    // At least three quarters of the tiles' pixels in the image (InceptionV3's 9x9 layers
    // take 144 pixels for 81, and ran about 20% slower than the implicit GEMM).
    let covered = 4 * g.batch * oh * ow >= 3 * 16 * wide;
    if covered && wide >= min_wide_tiles(k) {
        return Some(Tiles::Four);
    }
    narrow(g).then_some(Tiles::Two)
}

/// Whether F(2x2, 3x3) pays off for `g` (a plain 3x3 convolution): enough channels,
/// filters, tiles and savings.
pub(super) fn narrow(g: &WindowGeometry) -> bool {
    let (c, k) = (g.channels, g.filters);
    let t = g.batch * g.output[0].div_ceil(2) * g.output[1].div_ceil(2);
    c >= MIN_CHANNELS
        && k >= MIN_CHANNELS
        && t >= MIN_TILES
        && t.saturating_mul(c).saturating_mul(k).saturating_mul(20) >= MIN_SAVED
}

/// A row of tiles: its image, its index in the image, and its rows of output pixels (as
/// many as a tile's side, fewer at the image's end).
type TileRow<'o, T> = (usize, usize, &'o mut [T]);

/// `out = conv(x, f)` then `finish` by the tiling `tiles` (a 3x3 convolution of stride 1
/// with no dilation, as [`tiling`] picks): `x` NHWC, `f` HWIO in strips of `width` filters
/// (`[ceil(filters / width), 9 * channels, width]`, the last padded; HWIO itself is one
/// strip of every filter),
/// `out` NHWC, all contiguous.
pub(super) fn conv<T: GemmElem + Float + Pod + Send + Sync>(
    x: &[T],
    f: (&[T], usize),
    g: &WindowGeometry,
    tiles: Tiles,
    finish: &Finish<'_, T>,
    out: &mut [T],
) {
    match tiles {
        Tiles::Four => conv_tiled::<T, F4, 6, 4, 36, 16>(x, f, g, finish, out),
        Tiles::Two => conv_tiled::<T, F2, 4, 2, 16, 4>(x, f, g, finish, out),
    }
}

/// [`conv`] by the tiling `W`: `N` input and `M` output pixels a side, `P = N * N`
/// products and `Q = M * M` output pixels a tile.
fn conv_tiled<
    T: GemmElem + Float + Pod + Send + Sync,
    W: Tiling<N, M>,
    const N: usize,
    const M: usize,
    const P: usize,
    const Q: usize,
>(
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
    with_buffer(&FILTERS, P * c * k, |u: &mut [T]| {
        transform_filter::<T, W, N, M, P>((f, width), c, k, u);
        convolve::<T, W, N, M, P, Q>(x, g, &Plain { u, c, k }, finish, out);
    });
}

/// [`conv`] of an f32 image by a bf16 filter with the 16 GEMMs of F(2x2, 3x3) in bf16 (the
/// mixed precision of `mixed.rs`; F(4x4, 3x3)'s larger transform would cost the rounded
/// filter more bits): the filter is widened and transformed in f32, then `rounded` makes
/// the GEMMs' right operands of the transformed filter.
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
        transform_filter::<f32, F2, 4, 2, 16>((&wide, k), c, k, u);
        convolve::<f32, F2, 4, 2, 16, 4>(x, g, &rounded(u), finish, out);
    });
}

/// The GEMMs' right operands (the transformed filter) and how they multiply.
pub(super) trait Products<T>: Sync {
    /// `m = v u[xi]` for `v` of `[tiles, channels]` and `m` of `[tiles, filters]`.
    fn multiply(&self, xi: usize, v: &[T], m: &mut [T]);
}

/// The transformed filter as it is: a matrix of `[c, k]` per product, multiplied by the
/// f32 or f64 GEMM.
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

/// [`conv_tiled`] with the transformed filter's `products`.
fn convolve<
    T: GemmElem + Float + Pod + Send + Sync,
    W: Tiling<N, M>,
    const N: usize,
    const M: usize,
    const P: usize,
    const Q: usize,
>(
    x: &[T],
    g: &WindowGeometry,
    u: &impl Products<T>,
    finish: &Finish<'_, T>,
    out: &mut [T],
) {
    let k = g.filters;
    let [oh, ow] = g.output;
    let across = ow.div_ceil(M);
    let mut rows: Vec<TileRow<'_, T>> = out
        .chunks_mut(oh * ow * k)
        .enumerate()
        .flat_map(|(image, pixels)| {
            pixels
                .chunks_mut(M * ow * k)
                .enumerate()
                .map(move |(row, slice)| (image, row, slice))
        })
        .collect();
    // Where a row of tiles' pixels start in the output.
    let first_of = |image: usize, row: usize| (image * oh + M * row) * ow * k;
    let per_block = (BLOCK_PRODUCTS / (P * across)).max(1);
    let blocks = rows.len().div_ceil(per_block);
    if blocks >= 2 * rayon::current_num_threads() {
        rows.par_chunks_mut(per_block).for_each(|block| {
            with_scratch::<T, P, Q, _>(g, block.len() * across, |s| {
                run_block::<T, W, N, M, P, Q>(x, g, u, block, s, false)
            });
            for (image, row, pixels) in block {
                finish.apply(pixels, first_of(*image, *row), k);
            }
        });
    } else {
        with_scratch::<T, P, Q, _>(g, rows.len() * across, |s| {
            run_block::<T, W, N, M, P, Q>(x, g, u, &mut rows, s, true)
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

/// The most 8-byte words a thread keeps in each buffer between calls (64 MiB: VGG's
/// 512 x 512 filter transformed for F(4x4, 3x3) is 36; allocating it per call cost more
/// than the transform saved).
const KEPT_WORDS: usize = 1 << 23;

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

/// `f` on the [`Scratch`] of a block of `tiles` tiles of `P` products and `Q` output
/// pixels, from this thread's buffer.
fn with_scratch<T: Pod + Float, const P: usize, const Q: usize, R>(
    g: &WindowGeometry,
    tiles: usize,
    f: impl FnOnce(Scratch<'_, T>) -> R,
) -> R {
    let (c, k) = (g.channels, g.filters);
    with_buffer(
        &BLOCKS,
        P * tiles * (c + k) + c + Q * k,
        |buffer: &mut [T]| {
            let (v, rest) = buffer.split_at_mut(P * tiles * c);
            let (m, rest) = rest.split_at_mut(P * tiles * k);
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

/// Transform the tiles of `rows`, multiply (the `P` GEMMs across the threads if
/// `share_gemms`, else on this thread) and write the output pixels.
fn run_block<
    T: GemmElem + Float + Pod + Send + Sync,
    W: Tiling<N, M>,
    const N: usize,
    const M: usize,
    const P: usize,
    const Q: usize,
>(
    x: &[T],
    g: &WindowGeometry,
    u: &impl Products<T>,
    rows: &mut [TileRow<'_, T>],
    mut s: Scratch<'_, T>,
    share_gemms: bool,
) {
    let (c, k) = (g.channels, g.filters);
    let across = g.output[1].div_ceil(M);
    let tiles = rows.len() * across;
    for (r, &mut (image, row, _)) in rows.iter_mut().enumerate() {
        for col in 0..across {
            let slot = r * across + col;
            // The tile's input pixels' channels (zeros in the padding).
            let d: [&[T]; P] = std::array::from_fn(|i| {
                match (g.tap(0, M * row, i / N), g.tap(1, M * col, i % N)) {
                    (Some(h), Some(w)) => {
                        &x[((image * g.input[0] + h) * g.input[1] + w) * c..][..c]
                    }
                    _ => &s.zeros[..c],
                }
            });
            let mut matrices = s.v.chunks_exact_mut(tiles * c);
            let v: [&mut [T]; P] = std::array::from_fn(|_| match matrices.next() {
                Some(matrix) => &mut matrix[slot * c..][..c],
                None => &mut [],
            });
            transform::<T, InputTransform<W, N, M>, P, P>(d, v);
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
            let products: [&[T]; P] = std::array::from_fn(|xi| &m[(xi * tiles + slot) * k..][..k]);
            // The tile's output pixels, those outside the image into parts of `cropped`.
            let mut lines = pixels.chunks_mut(width * k);
            let mut spare = cropped.chunks_exact_mut(k);
            let mut slots: [&mut [T]; Q] = std::array::from_fn(|_| <&mut [T]>::default());
            for i in 0..M {
                let mut line = lines
                    .next()
                    .and_then(|line| line.get_mut(M * col * k..))
                    .unwrap_or_default();
                for j in 0..M {
                    slots[i * M + j] = if line.len() >= k {
                        let (pixel, rest) = std::mem::take(&mut line).split_at_mut(k);
                        line = rest;
                        pixel
                    } else {
                        spare.next().unwrap_or_default()
                    };
                }
            }
            transform::<T, OutputTransform<W, N, M>, P, Q>(products, slots);
        }
    };
    if share_gemms {
        rows.par_iter_mut().enumerate().for_each_init(
            || vec![T::zero(); Q * k],
            |spare, (r, (_, _, pixels))| untransform(r, pixels, spare),
        );
    } else {
        for (r, (_, _, pixels)) in rows.iter_mut().enumerate() {
            untransform(r, pixels, cropped);
        }
    }
}

/// `U = G g Gᵀ` for every channel and filter of the filter `f` (HWIO in strips of `width`
/// filters, as [`conv`] takes it) by the tiling `W`: `P = N * N` matrices of `[c, k]`.
/// Channels split across threads.
fn transform_filter<
    T: Float + Send + Sync,
    W: Tiling<N, M>,
    const N: usize,
    const M: usize,
    const P: usize,
>(
    (f, width): (&[T], usize),
    c: usize,
    k: usize,
    u: &mut [T],
) {
    // Per channel: the `P` rows of `k` it owns, one in each matrix.
    let mut rows: Vec<Vec<&mut [T]>> = (0..c).map(|_| Vec::with_capacity(P)).collect();
    for matrix in u.chunks_mut(c * k) {
        for (channel, row) in matrix.chunks_mut(k).enumerate() {
            rows[channel].push(row);
        }
    }
    rows.par_iter_mut().enumerate().for_each(|(channel, out)| {
        for (strip, first) in (0..k).step_by(width.max(1)).enumerate() {
            // The strip's filters (fewer in a padded last strip).
            let filters = width.min(k - first);
            // Tap `(a, b)` of this channel: a row of this strip's filters.
            let taps: [&[T]; 9] = std::array::from_fn(|t| {
                &f[strip * 9 * c * width + (t * c + channel) * width..][..filters]
            });
            let mut rows = out.iter_mut();
            let out: [&mut [T]; P] = std::array::from_fn(|_| match rows.next() {
                Some(row) => &mut row[first..first + filters],
                None => &mut [],
            });
            transform::<T, FilterTransform<W, N, M>, 9, P>(taps, out);
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

/// A tiling F(M x M, 3x3) by its one-dimensional transforms: a tile of `M x M` output
/// pixels comes from `N x N = (M + 2) x (M + 2)` input pixels in `N * N` products.
trait Tiling<const N: usize, const M: usize>: Sync {
    /// `G g` for a column `g` of three taps.
    fn filter<T: Float>(g: [T; 3]) -> [T; N];
    /// `Bᵀ d` for a column `d` of input pixels.
    fn input<T: Float>(d: [T; N]) -> [T; N];
    /// `Aᵀ m` for a column `m` of products.
    fn output<T: Float>(m: [T; N]) -> [T; M];
}

/// F(2x2, 3x3), the points 0, 1, -1 and infinity: `G = [[1, 0, 0], [½, ½, ½], [½, -½, ½],
/// [0, 0, 1]]`, `Bᵀ = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]`,
/// `Aᵀ = [[1, 1, 1, 0], [0, 1, -1, -1]]`. It adds, subtracts and halves only.
struct F2;
impl Tiling<4, 2> for F2 {
    #[inline(always)]
    fn filter<T: Float>([g0, g1, g2]: [T; 3]) -> [T; 4] {
        let half = T::one() / (T::one() + T::one());
        [g0, (g0 + g1 + g2) * half, (g0 - g1 + g2) * half, g2]
    }
    #[inline(always)]
    fn input<T: Float>([x0, x1, x2, x3]: [T; 4]) -> [T; 4] {
        [x0 - x2, x1 + x2, x2 - x1, x1 - x3]
    }
    #[inline(always)]
    fn output<T: Float>([x0, x1, x2, x3]: [T; 4]) -> [T; 2] {
        [x0 + x1 + x2, x1 - x2 - x3]
    }
}

/// F(4x4, 3x3), the points 0, 1, -1, 2, -2 and infinity (Lavin and Gray's matrices):
/// `G = [[¼, 0, 0], [-⅙, -⅙, -⅙], [-⅙, ⅙, -⅙], [1/24, 1/12, ⅙], [1/24, -1/12, ⅙],
/// [0, 0, 1]]`,
/// `Bᵀ = [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
/// [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]`,
/// `Aᵀ = [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
/// [0, 1, -1, 8, -8, 1]]`.
struct F4;
impl Tiling<6, 4> for F4 {
    #[inline(always)]
    fn filter<T: Float>([g0, g1, g2]: [T; 3]) -> [T; 6] {
        let c = |v: f64| T::from(v).unwrap_or_else(T::nan);
        let (even, odd) = (g0 + g2, g1);
        let (far_even, far_odd) = (c(1.0 / 24.0) * g0 + c(1.0 / 6.0) * g2, c(1.0 / 12.0) * g1);
        [
            c(0.25) * g0,
            c(-1.0 / 6.0) * (even + odd),
            c(-1.0 / 6.0) * (even - odd),
            far_even + far_odd,
            far_even - far_odd,
            g2,
        ]
    }
    #[inline(always)]
    fn input<T: Float>([x0, x1, x2, x3, x4, x5]: [T; 6]) -> [T; 6] {
        let c = |v: f64| T::from(v).unwrap_or_else(T::nan);
        let (four, two, five) = (c(4.0), c(2.0), c(5.0));
        [
            four * x0 - five * x2 + x4,
            (x3 + x4) - four * (x1 + x2),
            (x4 - x3) + four * (x1 - x2),
            (x4 - x2) + two * (x3 - x1),
            (x4 - x2) - two * (x3 - x1),
            four * x1 - five * x3 + x5,
        ]
    }
    #[inline(always)]
    fn output<T: Float>([x0, x1, x2, x3, x4, x5]: [T; 6]) -> [T; 4] {
        let c = |v: f64| T::from(v).unwrap_or_else(T::nan);
        let (near_plus, near_minus) = (x1 + x2, x1 - x2);
        let (far_plus, far_minus) = (x3 + x4, x3 - x4);
        [
            x0 + near_plus + far_plus,
            near_minus + c(2.0) * far_minus,
            near_plus + c(4.0) * far_plus,
            near_minus + c(8.0) * far_minus + x5,
        ]
    }
}

/// `F x Fᵀ` of the `R x R` block `x` (row-major) by the one-dimensional transform `f`
/// (`F`, `R` values to `S`), its `S x S` values row-major in `O = S * S`.
#[inline(always)]
fn sandwich<T: Copy, const R: usize, const S: usize, const O: usize>(
    x: [[T; R]; R],
    f: impl Fn([T; R]) -> [T; S],
) -> [T; O] {
    // `F x`, a column at a time (`columns[c][r]`), then `(F x) Fᵀ`, a row at a time.
    let columns: [[T; S]; R] = std::array::from_fn(|c| f(std::array::from_fn(|r| x[r][c])));
    let rows: [[T; S]; S] = std::array::from_fn(|r| f(std::array::from_fn(|c| columns[c][r])));
    std::array::from_fn(|i| rows[i / S][i % S])
}

/// `U = G g Gᵀ` of a channel's 3x3 taps (row-major) into `P = N * N` values.
struct FilterTransform<W, const N: usize, const M: usize>(PhantomData<W>);
impl<T: Float, W: Tiling<N, M>, const N: usize, const M: usize, const P: usize> Transform<T, 9, P>
    for FilterTransform<W, N, M>
{
    #[inline(always)]
    fn at(g: &[[T; CHUNK]; 9], j: usize) -> [T; P] {
        sandwich::<T, 3, N, P>(
            std::array::from_fn(|a| std::array::from_fn(|b| g[a * 3 + b][j])),
            W::filter,
        )
    }
}

/// `V = Bᵀ d B` of a tile's `P = N * N` input pixels (row-major).
struct InputTransform<W, const N: usize, const M: usize>(PhantomData<W>);
impl<T: Float, W: Tiling<N, M>, const N: usize, const M: usize, const P: usize> Transform<T, P, P>
    for InputTransform<W, N, M>
{
    #[inline(always)]
    fn at(e: &[[T; CHUNK]; P], i: usize) -> [T; P] {
        sandwich::<T, N, N, P>(
            std::array::from_fn(|r| std::array::from_fn(|c| e[r * N + c][i])),
            W::input,
        )
    }
}

/// `Y = Aᵀ M A` of a tile's `P = N * N` products (row-major) into its `Q = M * M` output
/// pixels.
struct OutputTransform<W, const N: usize, const M: usize>(PhantomData<W>);
impl<T: Float, W: Tiling<N, M>, const N: usize, const M: usize, const P: usize, const Q: usize>
    Transform<T, P, Q> for OutputTransform<W, N, M>
{
    #[inline(always)]
    fn at(e: &[[T; CHUNK]; P], i: usize) -> [T; Q] {
        sandwich::<T, N, M, Q>(
            std::array::from_fn(|r| std::array::from_fn(|c| e[r * N + c][i])),
            W::output,
        )
    }
}

/// `outputs[o][l] = X::at(inputs, l)[o]` elementwise over rows of the outputs' length,
/// compiled for the widest vectors this CPU has.
fn transform<T: Float, X: Transform<T, I, O>, const I: usize, const O: usize>(
    inputs: [&[T]; I],
    outputs: [&mut [T]; O],
) {
    crate::vmath::widest(Rows::<T, X, I, O> {
        inputs,
        outputs,
        transform: std::marker::PhantomData,
    });
}

/// [`transform`]'s operands, a kernel for [`crate::vmath::widest`].
struct Rows<'a, T, X, const I: usize, const O: usize> {
    /// The input rows.
    inputs: [&'a [T]; I],
    /// The output rows.
    outputs: [&'a mut [T]; O],
    /// The transform applied.
    transform: std::marker::PhantomData<X>,
}

impl<T: Float, X: Transform<T, I, O>, const I: usize, const O: usize> crate::vmath::Vectorised
    for Rows<'_, T, X, I, O>
{
    type Output = ();

    #[inline(always)]
    fn run(self) {
        transform_rows::<T, X, I, O>(self.inputs, self.outputs);
    }
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
    fn matches_the_definition<T: GemmElem + Float + Pod + Send + Sync>(
        tiles: Tiles,
        tolerance: f64,
    ) {
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
            conv(&of(&x), (&of(&f), filters), &g, tiles, &finish, &mut out);
            let want = direct(&x, &f, &g);
            for (i, (&got, &want)) in out.iter().zip(&want).enumerate() {
                let want = (want + shift[i % filters] + residual[i]).max(0.0);
                let got = got.to_f64().unwrap();
                assert!(
                    (got - want).abs() <= tolerance,
                    "{tiles:?} {g:?} at {i}: got {got}, want {want}"
                );
            }
        }
    }

    /// The transforms compiled for each instruction set this CPU has give the baseline's
    /// bits (no contraction into fused multiply-adds, which would differ per set).
    #[test]
    #[cfg(target_arch = "x86_64")]
    #[cfg_attr(miri, ignore = "Miri runs only the instructions a build enables")]
    fn every_instruction_set_transforms_alike() {
        use crate::vmath::{detected, Isa};
        type Wide = InputTransform<F4, 6, 4>;
        let rows: Vec<Vec<f32>> = (0..36)
            .map(|r| values(37, r).iter().map(|&v| v as f32).collect())
            .collect();
        let run = |isa: Isa| {
            let mut out = vec![vec![0f32; 37]; 36];
            let inputs: [&[f32]; 36] = std::array::from_fn(|i| &rows[i][..]);
            let mut slots = out.iter_mut();
            let outputs: [&mut [f32]; 36] = std::array::from_fn(|_| match slots.next() {
                Some(row) => &mut row[..],
                None => &mut [],
            });
            let rows = Rows::<f32, Wide, 36, 36> {
                inputs,
                outputs,
                transform: std::marker::PhantomData,
            };
            // SAFETY: only called for an instruction set this CPU has (below).
            unsafe { crate::vmath::compiled_for(isa, rows) };
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

    /// The tiling follows the image, the batch and the channels: F(4x4, 3x3) where its
    /// tiles are many and mostly inside the image, F(2x2, 3x3) where only its own are,
    /// neither for other windows or few channels.
    #[test]
    fn the_tiling_follows_the_tiles_and_channels() {
        let window = |size, stride| Window {
            size,
            stride,
            dilation: 1,
        };
        let geometry = |batch, side: usize, channels, filters, w: Window| WindowGeometry {
            batch,
            input: [side, side],
            channels,
            windows: [w, w],
            before: [1, 1],
            output: [side, side],
            filters,
        };
        let plain = window(3, 1);
        let cases = [
            // VGG16's first layers at batch 1, its 8x8 ones at batch 16: 64+ wide tiles.
            (geometry(1, 64, 64, 64, plain), Some(Tiles::Four)),
            (geometry(16, 8, 512, 512, plain), Some(Tiles::Four)),
            // 16 or 32 wide tiles: the implicit GEMM, or F(2x2) where its 128 tiles save enough.
            (geometry(1, 16, 64, 64, plain), None),
            (geometry(2, 16, 256, 256, plain), Some(Tiles::Two)),
            // A 9x9 image fills 81 of the wide tiles' 144 pixels.
            (geometry(16, 9, 96, 96, plain), Some(Tiles::Two)),
            // 32 filters: wide tiles from 128 of them, never the narrow ones.
            (geometry(16, 16, 128, 32, plain), Some(Tiles::Four)),
            (geometry(16, 8, 128, 32, plain), None),
            // Other windows and few channels.
            (geometry(16, 64, 64, 64, window(3, 2)), None),
            (geometry(16, 64, 64, 64, window(5, 1)), None),
            (geometry(16, 64, 32, 64, plain), None),
        ];
        for (g, want) in cases {
            assert_eq!(tiling(&g), want, "{g:?}");
        }
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "thousands of GEMMs; Miri checks the CPU kernels elsewhere"
    )]
    fn winograd_matches_the_definition_at_every_edge() {
        matches_the_definition::<f32>(Tiles::Two, 1e-5);
        matches_the_definition::<f64>(Tiles::Two, 1e-13);
        matches_the_definition::<f32>(Tiles::Four, 1e-5);
        matches_the_definition::<f64>(Tiles::Four, 1e-13);
    }
}
