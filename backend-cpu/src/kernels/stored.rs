//! GEMMs that read their weights as stored (`[k, n]`, row-major: a convolution's HWIO
//! filter, a dense layer's matrix), for the mixed precision of `mixed.rs`. Nothing is
//! packed per call: a register tile of [`MR`] rows by [`NR`] columns loads each row of the
//! weights' strip where it lies, and each work item lays out only its own rows of the left
//! operand ([`Weights::lay_rows`]). A layer of few rows (batch 1) therefore reads its
//! weights once, as a GEMM that packs them cannot.
//!
//! [`Weights`] is the element kind and its register tile (bf16 k-pairs in `mixed.rs`); the
//! work is split here ([`gemm`]): blocks of rows to the threads, and where there are too
//! few, the columns too. (An f32 tile of the same shape, AVX-512 FMAs on the filter as
//! stored, ran ResNet50 at 64x64 in 1.2-1.3x the time of the `gemm` crate's packed kernels
//! on a Zen 4: the f32 path keeps `gemm`.)

use std::ops::Range;

use polytensor_core::plan::window::WindowGeometry;
use rayon::prelude::*;

use super::window::{pack_taps, Finish};

/// Rows of the register tile.
pub(super) const MR: usize = 12;
/// Columns of the register tile (two 16-lane registers).
pub(super) const NR: usize = 32;
/// The most output rows per work item: a multiple of the tile's rows.
const BLOCK_ROWS: usize = 10 * MR;

/// Below this many multiply-adds a GEMM runs on the calling thread (about 4 us of one
/// core's bf16 work: less than handing items to the pool and collecting them costs).
const SERIAL_WORK: usize = 1 << 20;

/// A GEMM's right operand as stored, with the register tile that multiplies by it.
pub(super) trait Weights: Sync {
    /// The left operand's element as the tile reads it (f32, or two bf16 as a k-pair).
    type Lane: Copy + Default + Send;
    /// The reduction's length.
    fn k(&self) -> usize;
    /// Columns.
    fn n(&self) -> usize;
    /// Rows of `k` f32 (`src`) as the tile's rows of lanes, into `lanes`.
    fn lay_rows(&self, src: &[f32], lanes: &mut Vec<Self::Lane>);
    /// `c += a x self[.., columns]`: `a` rows of lanes ([`Weights::lay_rows`]), `c` the
    /// rows' `columns` (row-major); `columns.start` a multiple of [`NR`].
    fn multiply(&self, a: &[Self::Lane], columns: Range<usize>, c: &mut [f32]);
}

/// `out = conv(x, w)` then `finish`, as an implicit GEMM: `x` NHWC f32, `w` the HWIO filter
/// as `[kh * kw * channels, filters]`, `out` NHWC f32, all contiguous. Requires `w`'s tile
/// to run here.
pub(super) fn conv<W: Weights>(
    x: &[f32],
    w: &W,
    g: &WindowGeometry,
    finish: &Finish<'_, f32>,
    out: &mut [f32],
) {
    let [kh, kw] = [g.windows[0].size, g.windows[1].size];
    let (k, o) = (kh * kw * g.channels, g.filters);
    debug_assert!(w.k() == k && w.n() == o);
    if o == 0 || out.is_empty() {
        return;
    }
    if k == 0 {
        out.fill(0.0);
        return finish.apply(out, 0, o);
    }
    let pointwise = kh == 1
        && kw == 1
        && g.windows.iter().all(|w| w.stride == 1)
        && g.before == [0, 0]
        && g.output == g.input;
    // Rows `rows` of the GEMM's left operand: the input's own rows for a pointwise
    // convolution, else their im2col taps.
    let lay_out = |rows: Range<usize>, taps: &mut Vec<f32>, lanes: &mut Vec<W::Lane>| {
        let src = if pointwise {
            &x[rows.start * k..rows.end * k]
        } else {
            taps.resize(rows.len() * k, 0.0);
            pack_taps(x, g, rows.start, taps);
            &taps[..]
        };
        w.lay_rows(src, lanes);
    };
    gemm(w, lay_out, |c, first| finish.apply(c, first, o), out);
}

/// `out = x w` for an f32 `x` of `[rows, k]` (row-major), `out` `[rows, n]`. Requires
/// `w`'s tile to run here.
pub(super) fn matmul<W: Weights>(x: &[f32], w: &W, out: &mut [f32]) {
    let (k, n) = (w.k(), w.n());
    if n == 0 || out.is_empty() {
        return;
    }
    if k == 0 {
        return out.fill(0.0);
    }
    let lay_out = |rows: Range<usize>, _: &mut Vec<f32>, lanes: &mut Vec<W::Lane>| {
        w.lay_rows(&x[rows.start * k..rows.end * k], lanes);
    };
    gemm(w, lay_out, |_, _| {}, out);
}

/// `out = a x w`, `out` holding the rows' `w.n()` columns; `lay_out(rows, scratch, lanes)`
/// makes rows `rows` of `a` as the tile's lanes, and `finish(rows, first)` runs on finished
/// whole rows of `out` that start at its element `first`. Blocks of rows go to the threads; too few blocks to busy every thread twice
/// over (a late layer of a small image, a dense layer at batch 1) have their columns split
/// too, into whole strips.
fn gemm<W: Weights>(
    w: &W,
    lay_out: impl Fn(Range<usize>, &mut Vec<f32>, &mut Vec<W::Lane>) + Sync,
    finish: impl Fn(&mut [f32], usize) + Sync,
    out: &mut [f32],
) {
    let o = w.n();
    let total = out.len() / o;
    if total.saturating_mul(w.k()).saturating_mul(o) < SERIAL_WORK {
        // Less work than waking the threads costs (a squeeze-excite block's 1x1 layers).
        let (mut scratch, mut lanes) = (Vec::new(), Vec::new());
        lay_out(0..total, &mut scratch, &mut lanes);
        out.fill(0.0);
        w.multiply(&lanes, 0..o, out);
        return finish(out, 0);
    }
    let threads = rayon::current_num_threads().max(1);
    // Whole tiles of rows, at least two blocks a thread where the rows allow.
    let block_rows = total
        .div_ceil(2 * threads)
        .next_multiple_of(MR)
        .clamp(MR, BLOCK_ROWS);
    let blocks = total.div_ceil(block_rows);
    let strips = o.div_ceil(NR);
    if blocks >= 2 * threads || strips == 1 {
        out.par_chunks_mut(block_rows * o)
            .enumerate()
            .for_each_init(
                || (Vec::new(), Vec::new()),
                |(scratch, lanes), (block, c)| {
                    let rows = block * block_rows..block * block_rows + c.len() / o;
                    lay_out(rows, scratch, lanes);
                    c.fill(0.0);
                    w.multiply(lanes, 0..o, c);
                    finish(c, block * block_rows * o);
                },
            );
        return;
    }
    let parts = (2 * threads).div_ceil(blocks).min(strips);
    let width = strips.div_ceil(parts) * NR;
    let parts = o.div_ceil(width);
    let results: Vec<Vec<f32>> = (0..blocks * parts)
        .into_par_iter()
        .map_init(
            || (Vec::new(), Vec::new()),
            |(scratch, lanes), item| {
                let (block, part) = (item / parts, item % parts);
                let rows = block * block_rows..total.min((block + 1) * block_rows);
                let columns = part * width..o.min((part + 1) * width);
                let mut c = vec![0.0; rows.len() * columns.len()];
                lay_out(rows, scratch, lanes);
                w.multiply(lanes, columns, &mut c);
                c
            },
        )
        .collect();
    for (item, c) in results.iter().enumerate() {
        let (block, part) = (item / parts, item % parts);
        let columns = part * width..o.min((part + 1) * width);
        for (i, row) in c.chunks_exact(columns.len()).enumerate() {
            out[(block * block_rows + i) * o..][columns.clone()].copy_from_slice(row);
        }
    }
    finish(out, 0);
}

/// The tiles of one `multiply`: for each block of `block` lanes of k, each strip of [`NR`]
/// of `columns`, each [`MR`] of `rows`, `tile(first row, rows, lanes, first column,
/// columns)`: a block's strip of the weights stays in cache while the rows pass over it.
pub(super) fn tiles(
    rows: usize,
    lanes: usize,
    block: usize,
    columns: Range<usize>,
    mut tile: impl FnMut(usize, usize, Range<usize>, usize, usize),
) {
    for q0 in (0..lanes).step_by(block) {
        let q1 = lanes.min(q0 + block);
        for j0 in columns.clone().step_by(NR) {
            let cols = (columns.end - j0).min(NR);
            for r0 in (0..rows).step_by(MR) {
                tile(r0, (rows - r0).min(MR), q0..q1, j0, cols);
            }
        }
    }
}

/// Run `$body` with `$r` bound, as a constant, to `$rows` (1 to [`MR`]): the tiles'
/// row counts, each its own monomorphised loop.
macro_rules! for_rows {
    ($rows:expr, $r:ident => $body:expr) => {
        match $rows {
            1 => {
                const $r: usize = 1;
                $body
            }
            2 => {
                const $r: usize = 2;
                $body
            }
            3 => {
                const $r: usize = 3;
                $body
            }
            4 => {
                const $r: usize = 4;
                $body
            }
            5 => {
                const $r: usize = 5;
                $body
            }
            6 => {
                const $r: usize = 6;
                $body
            }
            7 => {
                const $r: usize = 7;
                $body
            }
            8 => {
                const $r: usize = 8;
                $body
            }
            9 => {
                const $r: usize = 9;
                $body
            }
            10 => {
                const $r: usize = 10;
                $body
            }
            11 => {
                const $r: usize = 11;
                $body
            }
            12 => {
                const $r: usize = 12;
                $body
            }
            _ => unreachable!("a tile has 1 to {} rows", $crate::kernels::stored::MR),
        }
    };
}
pub(super) use for_rows;
