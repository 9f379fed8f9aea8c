//! The strided loops every CPU kernel shares: map one, two or three strided inputs into a
//! contiguous output, row by row, with a straight-line inner loop when a row is contiguous,
//! split across threads when the work is large enough to pay for it.

use polytensor_core::layout::contiguous_strides;
use polytensor_core::{Element, Error, Layout, OutView, Result, StridedRows, TensorView};
use rayon::prelude::*;

/// Work below this many elements stays on the calling thread (dispatching to the pool costs
/// microseconds).
pub(crate) const PARALLEL_MIN_ELEMENTS: usize = 1 << 16;

/// The whole host buffer of an input, as `T`.
pub(crate) fn input<'a, T: Element>(view: &TensorView<'a>) -> Result<&'a [T]> {
    view.host_slice::<T>().ok_or_else(|| {
        Error::invalid(format!(
            "the CPU device cannot read a {} operand in {:?} (not host memory, wrong dtype, or misaligned)",
            view.dtype(),
            view.buffer()
        ))
    })
}

/// The elements of a contiguous input, as `T`; `None` for a strided one.
pub(crate) fn contiguous_input<'a, T: Element>(view: &TensorView<'a>) -> Result<Option<&'a [T]>> {
    let layout = view.layout();
    if !layout.is_contiguous() {
        return Ok(None);
    }
    let start = layout.offset();
    Ok(input::<T>(view)?.get(start..start + layout.num_elements()))
}

/// The elements of an output, as `T`.
pub(crate) fn output<'o, T: Element>(out: &'o mut OutView<'_>) -> Result<&'o mut [T]> {
    let dtype = out.dtype();
    out.host_slice_mut::<T>().ok_or_else(|| {
        Error::invalid(format!(
            "the CPU device cannot write a {dtype} output (not host memory, wrong dtype, or misaligned)"
        ))
    })
}

/// Check that every input has the output's shape (kernels receive broadcast operands).
#[inline]
pub(crate) fn check_shapes(op: &'static str, inputs: &[&Layout], out: &Layout) -> Result<()> {
    match inputs.iter().find(|l| l.shape() != out.shape()) {
        None => Ok(()),
        Some(l) => Err(shape_mismatch(op, l, out)),
    }
}

#[cold]
fn shape_mismatch(op: &'static str, input: &Layout, out: &Layout) -> Error {
    Error::shape(
        op,
        format!(
            "operand of shape {} for an output of shape {}",
            input.shape(),
            out.shape()
        ),
    )
}

/// Rows of one strided input walked beside a contiguous output of the same shape:
/// `[input position, output position]` per row.
pub(crate) fn rows_beside_output(x: &Layout, out: &Layout) -> StridedRows<2> {
    let out_strides = contiguous_strides(out.shape());
    StridedRows::new(
        &out.shape().dims(),
        [x.strides(), &out_strides],
        [x.offset() as isize, 0],
    )
}

/// The output of a kernel as a raw pointer that worker threads write disjoint parts of.
pub(crate) struct SharedOut<T> {
    ptr: *mut T,
    len: usize,
}

// SAFETY: `SharedOut` is only used by `for_each_row`, whose work items write disjoint
// element ranges of the output; the threads are joined before the borrow it came from ends.
unsafe impl<T: Send> Send for SharedOut<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for SharedOut<T> {}

impl<T> SharedOut<T> {
    pub(crate) fn new(out: &mut [T]) -> Self {
        Self {
            ptr: out.as_mut_ptr(),
            len: out.len(),
        }
    }

    /// The `len` elements from `start`.
    ///
    /// # Safety
    ///
    /// No other live reference may cover any of these elements.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn run(&self, start: usize, len: usize) -> &mut [T] {
        assert!(
            start + len <= self.len,
            "output run {start}+{len} outside {}",
            self.len
        );
        // SAFETY: in bounds (asserted); exclusivity is the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) }
    }

    /// Write `value` at `index`.
    ///
    /// # Safety
    ///
    /// No other thread may access this element during the call.
    pub(crate) unsafe fn write(&self, index: usize, value: T) {
        assert!(
            index < self.len,
            "output index {index} outside {}",
            self.len
        );
        // SAFETY: in bounds (asserted); exclusivity is the caller's promise.
        unsafe { self.ptr.add(index).write(value) }
    }
}

/// Call `body(positions, len)` for every row of `rows`, where `positions` are each operand's
/// first position and `len` the number of elements (long rows are cut into pieces). Work
/// items cover disjoint element ranges of every operand whose row stride is non-zero, so an
/// output walked as one of the operands is written exactly once. Runs on the thread pool
/// when there are at least [`PARALLEL_MIN_ELEMENTS`] elements.
pub(crate) fn for_each_row<const N: usize>(
    rows: &StridedRows<N>,
    body: impl Fn([isize; N], usize) + Sync,
) {
    let (row_len, inner) = (rows.row_len(), rows.inner_strides());
    let num_rows = rows.num_rows();
    let total = num_rows * row_len;
    let threads = rayon::current_num_threads();
    let parallel = total >= PARALLEL_MIN_ELEMENTS && threads > 1;
    if !parallel {
        rows.clone().for_each(|start| body(start, row_len));
        return;
    }
    // Pieces of at least 4096 elements, about eight per thread.
    let piece = (total / (threads * 8)).max(4096);
    if row_len < piece {
        // Short rows (a broadcast of a few channels): whole rows per item, walked in order
        // from the item's first, so that no item is a row of a few elements.
        let rows_per_item = piece / row_len.max(1);
        run_items(num_rows.div_ceil(rows_per_item), true, &|item| {
            let first = item * rows_per_item;
            let count = rows_per_item.min(num_rows - first);
            for start in rows.starting_at(first).take(count) {
                body(start, row_len);
            }
        });
        return;
    }
    let pieces_per_row = row_len.div_ceil(piece);
    run_items(num_rows * pieces_per_row, true, &|item| {
        let (row, part) = (item / pieces_per_row, item % pieces_per_row);
        let first = part * piece;
        let mut start = rows.row_start(row);
        for (p, s) in start.iter_mut().zip(inner) {
            *p += first as isize * s;
        }
        body(start, piece.min(row_len - first));
    });
}

/// Run `work(i)` for every `i` in `0..items`, on the thread pool when `parallel`. The one
/// place the elementwise drivers reach rayon: `work` is a `&dyn Fn`, so the pool's
/// machinery is compiled once, not once per kernel (op x dtype), which had made it half
/// of the crate's generated code.
pub(crate) fn run_items(items: usize, parallel: bool, work: &(dyn Fn(usize) + Sync)) {
    if parallel {
        (0..items).into_par_iter().for_each(work);
    } else {
        (0..items).for_each(work);
    }
}

/// Rows and columns of a tile for inputs walked across memory (a transposed operand): 64
/// rows read 256 contiguous bytes of an f32 operand per visit to a memory row, enough for
/// the prefetchers, while a tile of every dtype stays within L1 or L2.
pub(crate) const TILE: usize = 64;

/// Whether rows should be visited in tiles: some input steps through memory with a stride
/// other than 0 or 1 along the rows, and the rows are long enough to tile.
pub(crate) fn wants_tiles<const N: usize>(rows: &StridedRows<N>) -> bool {
    rows.num_rows() > 1
        && rows.row_len() > TILE
        && rows.inner_strides().iter().any(|&s| s != 0 && s != 1)
}

/// Call `body(row_starts, first_column, columns)` for every tile of up to [`TILE`] rows by
/// [`TILE`] columns (in parallel over blocks of rows when the work is large). Tiles cover
/// disjoint elements of every operand.
pub(crate) fn for_each_tile<const N: usize>(
    rows: &StridedRows<N>,
    body: impl Fn(&[[isize; N]], usize, usize) + Sync,
) {
    let (num_rows, row_len) = (rows.num_rows(), rows.row_len());
    let block = |first: usize| {
        let starts: Vec<[isize; N]> = (first..(first + TILE).min(num_rows))
            .map(|r| rows.row_start(r))
            .collect();
        for c0 in (0..row_len).step_by(TILE) {
            body(&starts, c0, TILE.min(row_len - c0));
        }
    };
    let blocks = num_rows.div_ceil(TILE);
    let parallel = num_rows * row_len >= PARALLEL_MIN_ELEMENTS && rayon::current_num_threads() > 1;
    run_items(blocks, parallel, &|b| block(b * TILE));
}

/// One input's values over a tile, `[column][row]`: gathered row-fastest when the input is
/// walked across memory (each cache line is then read once, avoiding the set conflicts of
/// power-of-two strides), or read in place otherwise.
struct TileInput<T> {
    values: [[T; TILE]; TILE],
}

impl<T: Element> TileInput<T> {
    /// Operand `k`'s values over the tile; gathered only when it is walked across memory.
    fn new<const N: usize>(
        data: &[T],
        starts: &[[isize; N]],
        k: usize,
        stride: isize,
        c0: usize,
        columns: usize,
    ) -> Option<Self> {
        if stride == 0 || stride == 1 {
            return None;
        }
        let mut values = [[T::default(); TILE]; TILE];
        let first = starts[0][k];
        let rows_adjacent = starts
            .iter()
            .enumerate()
            .all(|(r, start)| start[k] == first + r as isize);
        for (c, column) in values.iter_mut().enumerate().take(columns) {
            if rows_adjacent {
                // The tile's column `c` is one contiguous run of the operand: copy it whole.
                let from = at(first, c0 + c, stride);
                column[..starts.len()].copy_from_slice(&data[from..from + starts.len()]);
            } else {
                for (slot, start) in column.iter_mut().zip(starts) {
                    *slot = data[at(start[k], c0 + c, stride)];
                }
            }
        }
        Some(Self { values })
    }
}

/// Operand `k`'s values along tile row `r` from column `c0`, written to `row` (one slot per
/// column): from the gathered tile, or read in place (one copy when contiguous). Whole rows
/// keep the branch out of the element loop, which then vectorises.
#[inline]
fn tile_row<T: Element, const N: usize>(
    tile: &Option<TileInput<T>>,
    data: &[T],
    starts: &[[isize; N]],
    (k, stride): (usize, isize),
    (r, c0): (usize, usize),
    row: &mut [T],
) {
    match tile {
        Some(t) => {
            for (slot, column) in row.iter_mut().zip(&t.values) {
                *slot = column[r];
            }
        }
        None if stride == 1 => {
            let from = at(starts[r][k], c0, 1);
            row.copy_from_slice(&data[from..from + row.len()]);
        }
        None => {
            for (c, slot) in row.iter_mut().enumerate() {
                *slot = data[at(starts[r][k], c0 + c, stride)];
            }
        }
    }
}

/// The element range of a contiguous layout in its buffer.
fn contiguous_range(layout: &Layout) -> Option<std::ops::Range<usize>> {
    layout
        .is_contiguous()
        .then(|| layout.offset()..layout.offset() + layout.num_elements())
}

#[inline]
fn at(base: isize, i: usize, stride: isize) -> usize {
    (base + i as isize * stride) as usize
}

/// A unary kernel's loop over a run: `out[i] = f(x[i])`.
pub(crate) type Run1<'k, A, O> = dyn Fn(&[A], &mut [O]) + Sync + 'k;

/// `out[i] = f(x[i])`: the contiguous loop of `f` is all that is compiled per (op, dtype);
/// the driver is compiled once per dtype pair.
pub(crate) fn map1<A: Element, O: Element>(
    x: &TensorView<'_>,
    out: &mut OutView<'_>,
    f: impl Fn(A) -> O + Sync,
) -> Result<()> {
    let f = &f;
    let run = |xs: &[A], os: &mut [O]| os.iter_mut().zip(xs).for_each(|(o, &x)| *o = f(x));
    drive1(x, out, &run)
}

/// Run a unary kernel given by its contiguous loop: inputs walked across memory (a
/// transposed operand) in tiles, everything else as [`map1_runs`] does.
pub(crate) fn drive1<A: Element, O: Element>(
    x: &TensorView<'_>,
    out: &mut OutView<'_>,
    run: &Run1<'_, A, O>,
) -> Result<()> {
    check_shapes("map", &[x.layout()], out.layout())?;
    if contiguous_range(x.layout()).is_none() {
        let rows = rows_beside_output(x.layout(), out.layout());
        let [sx, so] = rows.inner_strides();
        if so == 1 && wants_tiles(&rows) {
            let src = input::<A>(x)?;
            let dst = SharedOut::new(output::<O>(out)?);
            for_each_tile(&rows, |starts, c0, columns| {
                let tile = TileInput::new(src, starts, 0, sx, c0, columns);
                let mut xs = [A::default(); TILE];
                for (r, start) in starts.iter().enumerate() {
                    tile_row(&tile, src, starts, (0, sx), (r, c0), &mut xs[..columns]);
                    // SAFETY: tiles cover disjoint output elements (see `for_each_tile`).
                    run(&xs[..columns], unsafe {
                        dst.run(start[1] as usize + c0, columns)
                    });
                }
            });
            return Ok(());
        }
    }
    map1_runs(x, out, run)
}

/// Elements gathered at a time from a strided row by [`map1_runs`].
const GATHER: usize = 256;

/// `out = run(x)`, where `run` maps a contiguous run of inputs onto as many outputs: the
/// driver of kernels that exist many times over (casts: one per pair of dtypes), kept
/// small so that each instance compiles quickly. Contiguous inputs are cut into pieces for
/// the thread pool; strided rows are gathered, [`GATHER`] elements at a time, into a buffer
/// first. ([`drive1`] adds tiles for inputs walked across memory.)
pub(crate) fn map1_runs<A: Element, O: Element>(
    x: &TensorView<'_>,
    out: &mut OutView<'_>,
    run: &Run1<'_, A, O>,
) -> Result<()> {
    check_shapes("map", &[x.layout()], out.layout())?;
    let src = input::<A>(x)?;
    if let Some(range) = contiguous_range(x.layout()) {
        const PIECE: usize = 1 << 14;
        let dst = output::<O>(out)?;
        let len = dst.len();
        if len < PARALLEL_MIN_ELEMENTS {
            run(&src[range], dst);
            return Ok(());
        }
        let (base, shared) = (range.start, SharedOut::new(dst));
        run_items(len.div_ceil(PIECE), true, &|p| {
            let (first, n) = (p * PIECE, PIECE.min(len - p * PIECE));
            // SAFETY: each item writes its own piece of the output.
            let o = unsafe { shared.run(first, n) };
            run(&src[base + first..base + first + n], o);
        });
        return Ok(());
    }
    let rows = rows_beside_output(x.layout(), out.layout());
    if rows.inner_strides()[1] != 1 {
        // A contiguous output's rows are contiguous (its inner stride is 1).
        return Err(Error::invalid("an elementwise output must be contiguous"));
    }
    let dst = SharedOut::new(output::<O>(out)?);
    input_runs(src, &rows, &|xs, po| {
        // SAFETY: the runs cover disjoint output elements (see `input_runs`).
        run(xs, unsafe { dst.run(po, xs.len()) })
    });
    Ok(())
}

/// Call `each(run, position)` for the rows of `rows` (an input beside a contiguous output),
/// a piece at a time: `run` holds the input's elements (in place when the row is
/// contiguous, else gathered, [`GATHER`] at a time), `position` is where their outputs go.
/// The pieces cover disjoint output elements. Generic over the input's type only, so the
/// casts (a kernel per pair of dtypes) share one per input dtype.
fn input_runs<A: Element>(src: &[A], rows: &StridedRows<2>, each: &(dyn Fn(&[A], usize) + Sync)) {
    let [sx, _] = rows.inner_strides();
    for_each_row(rows, |[px, po], len| {
        if sx == 1 {
            let px = px as usize;
            each(&src[px..px + len], po as usize);
            return;
        }
        let mut xs = [A::default(); GATHER];
        for first in (0..len).step_by(GATHER) {
            let n = GATHER.min(len - first);
            for (i, slot) in xs[..n].iter_mut().enumerate() {
                *slot = src[at(px, first + i, sx)];
            }
            each(&xs[..n], po as usize + first);
        }
    });
}

/// The contiguous loops of one binary kernel: both operands as runs, or one of them a
/// broadcast scalar. They are all that is compiled per (op, dtype); [`drive2`], the
/// strided, tiled, parallel and streaming driver, is compiled once per dtype triple.
pub(crate) struct Runs2<'k, A, B, O> {
    /// `out[i] = f(a[i], b[i])`.
    pub both: &'k RunBoth<'k, A, B, O>,
    /// `out[i] = f(a[i], b)`.
    pub scalar_b: &'k RunScalarB<'k, A, B, O>,
    /// `out[i] = f(a, b[i])`.
    pub scalar_a: &'k RunScalarA<'k, A, B, O>,
}

/// A binary kernel's loop over two runs.
pub(crate) type RunBoth<'k, A, B, O> = dyn Fn(&[A], &[B], &mut [O]) + Sync + 'k;
/// A binary kernel's loop over a run of `a` and one `b`.
pub(crate) type RunScalarB<'k, A, B, O> = dyn Fn(&[A], B, &mut [O]) + Sync + 'k;
/// A binary kernel's loop over one `a` and a run of `b`.
pub(crate) type RunScalarA<'k, A, B, O> = dyn Fn(A, &[B], &mut [O]) + Sync + 'k;

/// `out[i] = f(a[i], b[i])`.
pub(crate) fn map2<A: Element, B: Element, O: Element>(
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
    f: impl Fn(A, B) -> O + Sync,
) -> Result<()> {
    let f = &f;
    let both = |xs: &[A], ys: &[B], os: &mut [O]| {
        os.iter_mut()
            .zip(xs.iter().zip(ys))
            .for_each(|(o, (&x, &y))| *o = f(x, y))
    };
    let scalar_b =
        |xs: &[A], y: B, os: &mut [O]| os.iter_mut().zip(xs).for_each(|(o, &x)| *o = f(x, y));
    let scalar_a =
        |x: A, ys: &[B], os: &mut [O]| os.iter_mut().zip(ys).for_each(|(o, &y)| *o = f(x, y));
    let runs = Runs2 {
        both: &both,
        scalar_b: &scalar_b,
        scalar_a: &scalar_a,
    };
    drive2(a, b, out, &runs)
}

/// Run a binary kernel given by its contiguous loops over inputs of the output's shape:
/// contiguous operands whole; long rows in pieces across threads, a broadcast operand as a
/// scalar, other strides gathered into a buffer first; rows walked across memory in tiles;
/// outputs past the caches with streaming stores.
pub(crate) fn drive2<A: Element, B: Element, O: Element>(
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
    k: &Runs2<'_, A, B, O>,
) -> Result<()> {
    check_shapes("map", &[a.layout(), b.layout()], out.layout())?;
    let (sa, sb) = (input::<A>(a)?, input::<B>(b)?);
    if let (Some(ra), Some(rb)) = (contiguous_range(a.layout()), contiguous_range(b.layout())) {
        if ra.len() < PARALLEL_MIN_ELEMENTS {
            (k.both)(&sa[ra], &sb[rb], output::<O>(out)?);
            return Ok(());
        }
    }
    let out_strides = contiguous_strides(out.layout().shape());
    let rows = StridedRows::new(
        &out.layout().shape().dims(),
        [a.layout().strides(), b.layout().strides(), &out_strides],
        [
            a.layout().offset() as isize,
            b.layout().offset() as isize,
            0,
        ],
    );
    let [ia, ib, io] = rows.inner_strides();
    if let Some(joined) = JoinedRows::new(&rows, a.layout(), b.layout()) {
        joined.run(k, sa, sb, output::<O>(out)?);
        return Ok(());
    }
    let dst = SharedOut::new(output::<O>(out)?);
    let streaming = crate::streaming::worth_streaming::<O>(dst.len);
    if io == 1 && wants_tiles(&rows) {
        for_each_tile(&rows, |starts, c0, columns| {
            let (ta, tb) = (
                TileInput::new(sa, starts, 0, ia, c0, columns),
                TileInput::new(sb, starts, 1, ib, c0, columns),
            );
            let (mut xs, mut ys) = ([A::default(); TILE], [B::default(); TILE]);
            for (r, start) in starts.iter().enumerate() {
                tile_row(&ta, sa, starts, (0, ia), (r, c0), &mut xs[..columns]);
                tile_row(&tb, sb, starts, (1, ib), (r, c0), &mut ys[..columns]);
                // SAFETY: tiles cover disjoint output elements (see `for_each_tile`).
                let o = unsafe { dst.run(start[2] as usize + c0, columns) };
                let fill = |o: &mut [O], first: usize| {
                    let n = o.len();
                    (k.both)(&xs[first..first + n], &ys[first..first + n], o)
                };
                crate::streaming::fill_output(o, streaming, fill);
            }
            if streaming {
                crate::streaming::fence();
            }
        });
        return Ok(());
    }
    for_each_row(&rows, |[pa, pb, po], len| {
        if io != 1 {
            let mut os = [O::default(); GATHER];
            for first in (0..len).step_by(GATHER) {
                let n = GATHER.min(len - first);
                gathered2(k, (sa, pa, ia), (sb, pb, ib), first, &mut os[..n]);
                for (i, &o) in os[..n].iter().enumerate() {
                    // SAFETY: each work item owns its output elements (see `for_each_row`).
                    unsafe { dst.write(at(po, first + i, io), o) };
                }
            }
            return;
        }
        // SAFETY: each work item owns its output run (see `for_each_row`).
        let o = unsafe { dst.run(po as usize, len) };
        let fill = |o: &mut [O], first: usize| {
            let (a0, b0, n) = (pa as usize + first, pb as usize + first, o.len());
            match (ia, ib) {
                (1, 1) => (k.both)(&sa[a0..a0 + n], &sb[b0..b0 + n], o),
                (1, 0) => (k.scalar_b)(&sa[a0..a0 + n], sb[pb as usize], o),
                (0, 1) => (k.scalar_a)(sa[pa as usize], &sb[b0..b0 + n], o),
                _ => {
                    for piece in (0..n).step_by(GATHER) {
                        let m = GATHER.min(n - piece);
                        let o = &mut o[piece..piece + m];
                        gathered2(k, (sa, pa, ia), (sb, pb, ib), first + piece, o);
                    }
                }
            }
        };
        crate::streaming::fill_output(o, streaming, fill);
        if streaming {
            crate::streaming::fence();
        }
    });
    Ok(())
}

/// Rows of a few elements where one operand repeats one row (a per-channel constant beside
/// an NHWC image: rows of 3) and the other runs contiguously beside the output. Walked row
/// by row, each row costs more than its elements; instead the repeated row is laid out
/// whole rows long in a buffer of about [`GATHER`] elements, and the output is filled in
/// runs of that length.
struct JoinedRows {
    /// Elements per row.
    row_len: usize,
    /// Whether `a` (else `b`) is the repeated row.
    a_repeats: bool,
    /// The repeated operand's row start, the contiguous one's first element.
    starts: [usize; 2],
}

impl JoinedRows {
    /// Rows shorter than this go through [`JoinedRows`] when they can.
    const SHORT: usize = 64;

    fn new(rows: &StridedRows<3>, a: &Layout, b: &Layout) -> Option<Self> {
        let row_len = rows.row_len();
        if rows.num_rows() < 2 || row_len >= Self::SHORT || rows.inner_strides() != [1, 1, 1] {
            return None;
        }
        let start = rows.row_start(0);
        let (a_repeats, contiguous) = if rows.repeats_one_row(0) {
            (true, b)
        } else if rows.repeats_one_row(1) {
            (false, a)
        } else {
            return None;
        };
        let run = contiguous_range(contiguous)?;
        let repeated = start[usize::from(!a_repeats)];
        Some(Self {
            row_len,
            a_repeats,
            starts: [usize::try_from(repeated).ok()?, run.start],
        })
    }

    fn run<A: Element, B: Element, O: Element>(
        &self,
        k: &Runs2<'_, A, B, O>,
        sa: &[A],
        sb: &[B],
        out: &mut [O],
    ) {
        let rows_per_run = (GATHER / self.row_len).max(1);
        let run = rows_per_run * self.row_len;
        let [repeated, first] = self.starts;
        let row = repeated..repeated + self.row_len;
        let (rep_a, rep_b): (Vec<A>, Vec<B>) = if self.a_repeats {
            (sa[row].repeat(rows_per_run), Vec::new())
        } else {
            (Vec::new(), sb[row].repeat(rows_per_run))
        };
        let fill = |o: &mut [O], at: usize| {
            let (n, from) = (o.len(), first + at);
            if self.a_repeats {
                (k.both)(&rep_a[..n], &sb[from..from + n], o);
            } else {
                (k.both)(&sa[from..from + n], &rep_b[..n], o);
            }
        };
        let total = out.len();
        // Items of whole runs, at least 4096 elements, about eight per thread.
        let threads = rayon::current_num_threads();
        let per_item = if total >= PARALLEL_MIN_ELEMENTS && threads > 1 {
            (total / (threads * 8)).max(4096).div_ceil(run) * run
        } else {
            total
        };
        let dst = SharedOut::new(out);
        run_items(total.div_ceil(per_item.max(1)), per_item < total, &|item| {
            let begin = item * per_item;
            let end = (begin + per_item).min(total);
            // SAFETY: items cover disjoint output ranges.
            let o = unsafe { dst.run(begin, end - begin) };
            for (i, piece) in o.chunks_mut(run).enumerate() {
                fill(piece, begin + i * run);
            }
        });
    }
}

/// `o.len()` (at most [`GATHER`]) outputs from element `first` of a row whose operands
/// start at `pa` and `pb` with strides `ia` and `ib`: the operands gathered, then `both`.
fn gathered2<A: Element, B: Element, O: Element>(
    k: &Runs2<'_, A, B, O>,
    (sa, pa, ia): (&[A], isize, isize),
    (sb, pb, ib): (&[B], isize, isize),
    first: usize,
    o: &mut [O],
) {
    let n = o.len();
    let (mut xs, mut ys) = ([A::default(); GATHER], [B::default(); GATHER]);
    for i in 0..n {
        xs[i] = sa[at(pa, first + i, ia)];
        ys[i] = sb[at(pb, first + i, ib)];
    }
    (k.both)(&xs[..n], &ys[..n], o);
}

/// `out[i] = f(a[i], b[i], c[i])`.
pub(crate) fn map3<A: Element, B: Element, C: Element, O: Element>(
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    c: &TensorView<'_>,
    out: &mut OutView<'_>,
    f: impl Fn(A, B, C) -> O + Sync,
) -> Result<()> {
    check_shapes("map", &[a.layout(), b.layout(), c.layout()], out.layout())?;
    let (sa, sb, sc) = (input::<A>(a)?, input::<B>(b)?, input::<C>(c)?);
    // Every operand contiguous or one broadcast element: runs of the three zipped, in
    // pieces across threads.
    if let (Some(xa), Some(xb), Some(xc)) = (Flat::of(a, sa), Flat::of(b, sb), Flat::of(c, sc)) {
        let total = out.layout().num_elements();
        let threads = rayon::current_num_threads();
        let piece = (total / (threads * 8)).max(4096);
        let dst = SharedOut::new(output::<O>(out)?);
        let parallel = total >= PARALLEL_MIN_ELEMENTS && threads > 1;
        run_items(total.div_ceil(piece), parallel, &|item| {
            let start = item * piece;
            let len = piece.min(total - start);
            // SAFETY: each item owns elements `start..start + len` of the output.
            let os = unsafe { dst.run(start, len) };
            let (ra, rb, rc) = (xa.run(start, len), xb.run(start, len), xc.run(start, len));
            for (i, o) in os.iter_mut().enumerate() {
                *o = f(ra.get(i), rb.get(i), rc.get(i));
            }
        });
        return Ok(());
    }
    let out_strides = contiguous_strides(out.layout().shape());
    let rows = StridedRows::new(
        &out.layout().shape().dims(),
        [
            a.layout().strides(),
            b.layout().strides(),
            c.layout().strides(),
            &out_strides,
        ],
        [
            a.layout().offset() as isize,
            b.layout().offset() as isize,
            c.layout().offset() as isize,
            0,
        ],
    );
    let [ia, ib, ic, io] = rows.inner_strides();
    let dst = SharedOut::new(output::<O>(out)?);
    for_each_row(&rows, |[pa, pb, pc, po], len| {
        for i in 0..len {
            let value = f(sa[at(pa, i, ia)], sb[at(pb, i, ib)], sc[at(pc, i, ic)]);
            // SAFETY: each work item owns its output elements (see `for_each_row`).
            unsafe { dst.write(at(po, i, io), value) };
        }
    });
    Ok(())
}

/// An operand of an elementwise kernel that is contiguous or one element broadcast.
#[derive(Clone, Copy)]
enum Flat<'a, T> {
    Run(&'a [T]),
    Splat(T),
}

impl<'a, T: Element> Flat<'a, T> {
    /// `view` (its elements `data`) as contiguous or broadcast, if it is either.
    fn of(view: &TensorView<'_>, data: &'a [T]) -> Option<Self> {
        let layout = view.layout();
        if let Some(range) = contiguous_range(layout) {
            return Some(Flat::Run(&data[range]));
        }
        let splat = layout.strides().iter().all(|&s| s == 0);
        splat.then(|| data.get(layout.offset()).copied().map(Flat::Splat))?
    }

    /// The part of `len` elements from `start`.
    fn run(self, start: usize, len: usize) -> Self {
        match self {
            Flat::Run(data) => Flat::Run(&data[start..start + len]),
            splat => splat,
        }
    }

    /// Element `i`.
    #[inline(always)]
    fn get(self, i: usize) -> T {
        match self {
            Flat::Run(data) => data[i],
            Flat::Splat(value) => value,
        }
    }
}

/// `out[i] = f(i)` over the output's elements in row-major order.
pub(crate) fn generate<O: Element>(
    out: &mut OutView<'_>,
    f: impl Fn(usize) -> O + Sync,
) -> Result<()> {
    let dst = output::<O>(out)?;
    if dst.len() < PARALLEL_MIN_ELEMENTS {
        dst.iter_mut().enumerate().for_each(|(i, o)| *o = f(i));
        return Ok(());
    }
    const CHUNK: usize = 4096;
    let (len, shared) = (dst.len(), SharedOut::new(dst));
    run_items(len.div_ceil(CHUNK), true, &|c| {
        let first = c * CHUNK;
        // SAFETY: each item writes its own chunk of the output.
        let chunk = unsafe { shared.run(first, CHUNK.min(len - first)) };
        chunk
            .iter_mut()
            .enumerate()
            .for_each(|(i, o)| *o = f(first + i));
    });
    Ok(())
}
