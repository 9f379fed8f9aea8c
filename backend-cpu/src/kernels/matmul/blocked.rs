//! f16 and bf16 matmul on AVX2 CPUs, converted to f32 as the operands are packed.
//!
//! BLIS's blocking around the [`avx2`] register tile: `b` is widened and packed once into
//! `NR`-column strips, one per `KC`-deep block of k; each thread takes a range of rows,
//! widens and packs its `a` block into `MR`-row strips per k block, and runs the tile over
//! every pair of strips (a `b` strip, 16 KiB, stays in L1 while the `a` block, at most
//! `MC x KC` f32, stays in L2). The tile adds each block's sums into an f32 accumulator per
//! row range, and the range is rounded to the 16-bit type once, a whole row at a time, after
//! the last block. Converting costs `(m + n) * k`; the products `m * n * k`: the speed is
//! the f32 tile's.
//!
//! Rows of `b` that are contiguous (a row-major `b`) are widened whole before they are cut
//! into strips, and rows of `a` along k are widened whole before they are interleaved, so
//! the conversions run over long runs (F16C for f16, a shift for bf16) rather than 6 or 16
//! elements at a time.

use rayon::prelude::*;

use super::avx2::{self, MR, NR};
use super::widened::{Strided, Widening};

/// k per block: a packed `b` strip (`KC x NR` f32) is 16 KiB.
const KC: usize = 256;
/// The most rows of a range: a packed `a` block (`MC x KC` f32) is 120 KiB.
const MC: usize = 20 * MR;
/// The most f32 of packed `b` at once (16 MiB); a wider `b` is taken in column chunks.
const PACKED_B: usize = if cfg!(test) { 1 << 13 } else { 1 << 22 };
/// The most columns per chunk, which bounds the f32 sums of a row range (`MC` rows of
/// them, 4 MiB) and the widened rows of a `b` block (`KC` of them, 8 MiB) however small k.
const CHUNK_COLS: usize = 1 << 13;
/// The most f32 a thread keeps between calls in each of its scratch buffers.
const KEPT: usize = 1 << 22;

/// Whether this CPU takes the blocked path: AVX2 and FMA without AVX-512 (where the `gemm`
/// crate's 16-lane f32 kernels, behind [`super::widened`], are the faster ones).
pub(super) fn available() -> bool {
    crate::vmath::detected() == crate::vmath::Isa::Avx2
}

/// Whether a matrix of `m` rows runs on the blocked path with `parallelism`: threads split
/// the rows, so a parallel product needs at least two `MR`-row strips per thread (with
/// fewer, `gemm` also splits the columns).
pub(super) fn suits(m: usize, parallelism: gemm::Parallelism) -> bool {
    match parallelism {
        gemm::Parallelism::None => true,
        _ => m.div_ceil(MR) >= 2 * rayon::current_num_threads(),
    }
}

/// Lines of an operand along k: rows of `a`, columns of `b`. Line `l`, depth `p` is at
/// `base + l * line + p * depth`.
struct Lines<'a, H> {
    data: &'a [H],
    base: isize,
    line: isize,
    depth: isize,
}

impl<'a, H: Widening> Lines<'a, H> {
    /// The lines of `matrix` whose line and depth strides are `(line, depth)`: its own
    /// strides for rows of `a`, swapped for columns of `b`.
    fn of(matrix: &Strided<'a, H>, (line, depth): (isize, isize)) -> Self {
        Lines {
            data: matrix.data,
            base: matrix.base,
            line,
            depth,
        }
    }

    /// `row[l] = self(first + l, p)` widened, for `l < row.len()`; lines must be adjacent
    /// (`line == 1`).
    fn widen_run(&self, first: usize, p: usize, row: &mut [f32]) {
        debug_assert_eq!(self.line, 1);
        let start = (self.base + first as isize + p as isize * self.depth) as usize;
        H::widen_slice(&self.data[start..start + row.len()], row);
    }

    /// `panel[p * W + l] = self(first + l, k0 + p)` widened, for `l < valid` and
    /// `p < panel.len() / W`; zero for `valid <= l < W`. `rows` is scratch.
    fn pack<const W: usize>(
        &self,
        first: usize,
        valid: usize,
        k0: usize,
        panel: &mut [f32],
        rows: &mut Vec<f32>,
    ) {
        let depth = panel.len() / W;
        let start = self.base + first as isize * self.line + k0 as isize * self.depth;
        let at = |l: usize, p: usize| start + l as isize * self.line + p as isize * self.depth;
        if self.line == 1 && valid == W {
            // W lines side by side: each k is one contiguous run.
            for (p, lanes) in panel.chunks_exact_mut(W).enumerate() {
                self.widen_run(first, k0 + p, lanes);
            }
        } else if self.depth == 1 {
            // Each line is a contiguous run along k: widen the runs, then interleave.
            rows.resize(valid * depth, 0.0);
            for (l, row) in rows.chunks_exact_mut(depth).enumerate() {
                let run = at(l, 0) as usize;
                H::widen_slice(&self.data[run..run + depth], row);
            }
            for (p, lanes) in panel.chunks_exact_mut(W).enumerate() {
                let (lanes, padding) = lanes.split_at_mut(valid);
                for (l, lane) in lanes.iter_mut().enumerate() {
                    *lane = rows[l * depth + p];
                }
                padding.fill(0.0);
            }
        } else {
            for (p, lanes) in panel.chunks_exact_mut(W).enumerate() {
                let (lanes, padding) = lanes.split_at_mut(valid);
                for (l, lane) in lanes.iter_mut().enumerate() {
                    *lane = self.data[at(l, p) as usize].widen();
                }
                padding.fill(0.0);
            }
        }
    }
}

/// `out = a x b` (row-major `m x n`, `m, n, k > 0`), on every thread if `parallel`.
/// Requires [`available`].
pub(super) fn multiply<H: Widening>(
    a: &Strided<'_, H>,
    b: &Strided<'_, H>,
    out: &mut [H],
    parallel: bool,
) {
    let ((m, k), n) = (a.dims, b.dims.1);
    let rows_of_a = Lines::of(a, a.strides);
    let columns_of_b = Lines::of(b, (b.strides.1, b.strides.0));
    let chunk = (PACKED_B / k).clamp(NR, CHUNK_COLS) / NR * NR;
    let ranges = row_ranges(m, parallel);
    with_kept(&PACKED, |packed_b| {
        for j0 in (0..n).step_by(chunk) {
            let cols = chunk.min(n - j0);
            let b = Packed::new(&columns_of_b, j0, cols, k, packed_b, parallel);
            let mut items = split_rows(out, n, &ranges);
            let run = |(i0, out): &mut (usize, &mut [H])| {
                range(&rows_of_a, *i0, &b, out, n);
            };
            if parallel {
                items.par_iter_mut().for_each(run);
            } else {
                items.iter_mut().for_each(run);
            }
        }
    });
}

/// `b`'s columns `j0..j0 + cols`, widened and packed: per block of k (from `k0`, `KC` deep
/// or what is left), `NR`-column strips (the last one zero-padded), each `depth x NR`.
struct Packed<'p> {
    data: &'p [f32],
    j0: usize,
    cols: usize,
    k: usize,
}

impl<'p> Packed<'p> {
    fn new<H: Widening>(
        b: &Lines<'_, H>,
        j0: usize,
        cols: usize,
        k: usize,
        buffer: &'p mut Vec<f32>,
        parallel: bool,
    ) -> Self {
        let strips = cols.div_ceil(NR);
        buffer.resize(k * strips * NR, 0.0);
        with_kept(&WIDE, |wide| {
            for (block, k0) in buffer.chunks_mut(KC * strips * NR).zip((0..k).step_by(KC)) {
                let depth = KC.min(k - k0);
                // Rows of `b` that are contiguous runs are widened whole first (one long
                // conversion each), then cut into strips.
                let widened = (b.line == 1).then(|| {
                    wide.resize(depth * cols, 0.0);
                    let widen = |(p, row): (usize, &mut [f32])| b.widen_run(j0, k0 + p, row);
                    if parallel {
                        wide.par_chunks_exact_mut(cols).enumerate().for_each(widen);
                    } else {
                        wide.chunks_exact_mut(cols).enumerate().for_each(widen);
                    }
                    &wide[..]
                });
                let pack = |rows: &mut Vec<f32>, (s, strip): (usize, &mut [f32])| {
                    let (c0, valid) = (s * NR, NR.min(cols - s * NR));
                    match widened {
                        Some(wide) => cut_strip(wide, cols, c0, valid, strip),
                        None => b.pack::<NR>(j0 + c0, valid, k0, strip, rows),
                    }
                };
                if parallel {
                    let strips = block.par_chunks_exact_mut(depth * NR).enumerate();
                    strips.for_each_init(Vec::new, pack);
                } else {
                    let mut rows = Vec::new();
                    let strips = block.chunks_exact_mut(depth * NR).enumerate();
                    strips.for_each(|strip| pack(&mut rows, strip));
                }
            }
        });
        Packed {
            data: buffer,
            j0,
            cols,
            k,
        }
    }

    /// The strips of the k block from `k0`, each `depth * NR` long.
    fn block(&self, k0: usize, depth: usize) -> &[f32] {
        let width = self.cols.div_ceil(NR) * NR;
        &self.data[k0 * width..(k0 + depth) * width]
    }
}

/// `strip[p * NR + j] = wide[p * cols + c0 + j]` for `j < valid`, zero past it.
fn cut_strip(wide: &[f32], cols: usize, c0: usize, valid: usize, strip: &mut [f32]) {
    for (lanes, row) in strip.chunks_exact_mut(NR).zip(wide.chunks_exact(cols)) {
        let (lanes, padding) = lanes.split_at_mut(valid);
        lanes.copy_from_slice(&row[c0..c0 + valid]);
        padding.fill(0.0);
    }
}

/// Rows `i0..` of `out` (`out.len() / n` of them) for the packed columns of `b`: the sums
/// of each k block are added up in f32, and rounded into `out` a whole row at a time.
fn range<H: Widening>(a: &Lines<'_, H>, i0: usize, b: &Packed<'_>, out: &mut [H], n: usize) {
    let rows = out.len() / n;
    let (cols, j0, k) = (b.cols, b.j0, b.k);
    with_kept(&PANELS, |panels| {
        with_kept(&SUMS, |sums| {
            let mut scratch = Vec::new();
            panels.resize(rows.div_ceil(MR) * MR * KC, 0.0);
            sums.resize(rows * cols, 0.0);
            let mut edge = [0f32; MR * NR];
            for k0 in (0..k).step_by(KC) {
                let depth = KC.min(k - k0);
                let panels = &mut panels[..rows.div_ceil(MR) * MR * depth];
                for (q, panel) in panels.chunks_exact_mut(MR * depth).enumerate() {
                    let valid = MR.min(rows - q * MR);
                    a.pack::<MR>(i0 + q * MR, valid, k0, panel, &mut scratch);
                }
                let strips = b.block(k0, depth).chunks_exact(NR * depth);
                for (s, strip) in strips.enumerate() {
                    let (c0, width) = (s * NR, NR.min(cols - s * NR));
                    for (q, panel) in panels.chunks_exact(MR * depth).enumerate() {
                        let (first_row, accumulate) = (q * MR, k0 > 0);
                        let at = first_row * cols + c0;
                        if first_row + MR <= rows && width == NR {
                            avx2::tile(depth, panel, strip, &mut sums[at..], cols, accumulate);
                            continue;
                        }
                        // An edge tile: whole in `edge`, then the part inside the range.
                        avx2::tile(depth, panel, strip, &mut edge, NR, false);
                        let edge_rows = edge.chunks_exact(NR).take(rows - first_row);
                        for (r, edge_row) in edge_rows.enumerate() {
                            let kept = &mut sums[at + r * cols..][..width];
                            if accumulate {
                                kept.iter_mut().zip(edge_row).for_each(|(s, t)| *s += t);
                            } else {
                                kept.copy_from_slice(&edge_row[..width]);
                            }
                        }
                    }
                }
            }
            for (row, sums) in out.chunks_exact_mut(n).zip(sums.chunks_exact(cols)) {
                H::narrow_slice(sums, &mut row[j0..j0 + cols]);
            }
        })
    });
}

/// Row ranges `(first, count)` covering `m`: each a whole number of `MR` strips (but the
/// last) and at most about `MC` rows, as even as that allows and, when `parallel`, a
/// multiple of the thread count where there are rows enough.
fn row_ranges(m: usize, parallel: bool) -> Vec<(usize, usize)> {
    let strips = m.div_ceil(MR);
    let mut count = m.div_ceil(MC);
    if parallel {
        count = count
            .next_multiple_of(rayon::current_num_threads())
            .min(strips);
    }
    let (each, extra) = (strips / count, strips % count);
    let mut first = 0;
    (0..count)
        .map(|r| {
            let rows = ((each + usize::from(r < extra)) * MR).min(m - first);
            first += rows;
            (first - rows, rows)
        })
        .collect()
}

/// `out` (rows of `n`) split at the ranges, each with its first row.
fn split_rows<'o, H>(
    mut out: &'o mut [H],
    n: usize,
    ranges: &[(usize, usize)],
) -> Vec<(usize, &'o mut [H])> {
    ranges
        .iter()
        .map(|&(first, rows)| {
            let (range, rest) = std::mem::take(&mut out).split_at_mut(rows * n);
            out = rest;
            (first, range)
        })
        .collect()
}

thread_local! {
    /// Packed `b`, kept by the calling thread.
    static PACKED: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
    /// Rows of `b` widened before they are cut into strips, kept by the calling thread.
    static WIDE: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
    /// Packed `a` blocks, kept by each thread that runs a range.
    static PANELS: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
    /// f32 sums between k blocks, kept by each thread that runs a range.
    static SUMS: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

/// [`with_kept`] for this module's buffers, each kept up to [`KEPT`] f32.
fn with_kept<R>(
    slot: &'static std::thread::LocalKey<std::cell::Cell<Vec<f32>>>,
    f: impl FnOnce(&mut Vec<f32>) -> R,
) -> R {
    crate::kernels::kept::with_kept(slot, KEPT, f)
}
