//! Segment reductions (`Device::segment_reduce`, `polytensor_core::plan::segment`): one
//! work-item per output element `(s, k)` folds column `k` of its segment's data rows in
//! order, so results are deterministic and do not depend on the grid.
//!
//! - `segment_gather` (program [`SegmentKernels::Gather`], one per element size): the last
//!   row of the segment, moved as raw bits, or the fill value for an empty segment; and in
//!   the same program `segment_fill` and `segment_scatter`, the two passes of
//!   `Device::scatter_rows` (every element the fill value, then each data row at its output
//!   row; a row outside the output is skipped).
//! - `segment_sum`, `segment_mean`, `segment_sqrt_n`, `segment_max` (program
//!   [`SegmentKernels::reduce`], one per dtype): `Σ w·x`, over `Σ w` or `sqrt(Σ w²)`, or the
//!   largest `x` as TensorFlow folds it (`acc > x ? acc : x`); empty segments hold zero
//!   (the maximum: the fill value). Integers wrap; f16 and bf16 compute in f32, rounded
//!   once at the store.
//!
//! The rows and offsets are read from device memory the host did not check, so every
//! offset is clamped to `[0, entries]` and a row outside `[0, data_rows)` is skipped:
//! wrong structure gives wrong values, never a read out of bounds.
//!
//! Each kernel is one [`Kernel`] of the IR, rendered for OpenCL C and CUDA C by
//! [`SegmentKernels::source`] and for WGSL by the wgpu backend; [`fold_args`] and
//! [`scatter_args`] give their arguments in parameter order to every backend.
//!
//! Parameters of every fold and gather: `items` (output elements), `width` (elements of one
//! row), `data_rows`, `entries`, then the data, rows (int32), offsets (int32), weights, fill
//! and output buffers, with `weighted` after the weights (0: every weight is 1; the weights
//! buffer is then never read). `segment_fill`: `items`, the fill and the output.
//! `segment_scatter`: `items` (data elements), `width`, `out_rows`, then the data, the rows
//! and the output.

use polytensor_core::plan::segment::{ScatterGeometry, SegmentGeometry, SegmentOp, Segments};
use polytensor_core::{DataType, Result, TensorView};

use crate::body::{self, Cmp};
use crate::ir::{elem, int, item, when, Buf, Declare, Ex, Kernel, Local, Stmt, Ty};
use crate::launch::Arg;
use crate::{render, Dialect, Elem, Library};

/// A program of segment kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SegmentKernels {
    /// `segment_gather` of elements moved as this raw type (one program per element size).
    Gather(Elem),
    /// The folds defined for a dtype, computed on as its element type.
    Reduce(DataType, Elem),
}

impl SegmentKernels {
    /// The program that runs `op` on `dtype`, or `None` where the kit has none.
    pub fn new(op: SegmentOp, dtype: DataType) -> Option<Self> {
        if !op.is_defined_for(dtype) {
            return None;
        }
        if op == SegmentOp::Gather {
            return Some(SegmentKernels::Gather(crate::table::move_elem(dtype)?));
        }
        Self::reduce(dtype)
    }

    /// The fold program for `dtype`, if it has folds.
    pub fn reduce(dtype: DataType) -> Option<Self> {
        SegmentOp::Sum
            .is_defined_for(dtype)
            .then(|| Some(SegmentKernels::Reduce(dtype, Elem::of(dtype)?)))
            .flatten()
    }

    /// The element its kernels move (a gather) or compute on (the folds).
    pub fn elem(&self) -> Elem {
        match *self {
            SegmentKernels::Gather(e) | SegmentKernels::Reduce(_, e) => e,
        }
    }

    /// The program's kernels.
    pub fn kernels(&self) -> Vec<Kernel> {
        match *self {
            SegmentKernels::Gather(m) => vec![
                segment_kernel(SegmentOp::Gather, m),
                fill_kernel(m),
                scatter_kernel(m),
            ],
            SegmentKernels::Reduce(dtype, e) => SegmentOp::ALL
                .into_iter()
                .filter(|&op| op != SegmentOp::Gather && op.is_defined_for(dtype))
                .map(|op| segment_kernel(op, e))
                .collect(),
        }
    }

    /// The kernel names of the program.
    pub fn names(&self) -> Vec<crate::ir::KernelName> {
        self.kernels().into_iter().map(|k| k.name).collect()
    }

    /// Whether the program computes in f64.
    pub fn needs_fp64(&self) -> bool {
        matches!(self, SegmentKernels::Reduce(_, e) if e.needs_fp64())
    }

    /// The program's source in `dialect`.
    pub fn source(&self, dialect: Dialect) -> String {
        let computed = match *self {
            SegmentKernels::Gather(_) => vec![],
            SegmentKernels::Reduce(_, e) => vec![e],
        };
        let mut text = Library::new(dialect, &computed, false).render();
        for kernel in self.kernels() {
            text += &render::c_kernel(&kernel)
                .expect("every segment kernel renders in C: its element math is + - * / sqrt");
        }
        text
    }
}

/// The parameters every fold and gather takes.
struct Operands {
    width: Ex,
    data_rows: Ex,
    data: Buf,
    rows: Buf,
    weights: Buf,
    weighted: Ex,
    fill: Buf,
}

const S: Local = Local::new("s", Ty::Index);
const K: Local = Local::new("k", Ty::Index);
const BEGIN: Local = Local::new("begin", Ty::Index);
const END: Local = Local::new("end", Ty::Index);
const J: Local = Local::new("j", Ty::Index);
const R: Local = Local::new("r", Ty::Index);

/// The kernel of `op` on elements of `e` (a gather: the raw move element of the dtype's
/// size; a fold: the dtype's element type). Output element `item` is column `k` of segment
/// `s`, whose entries are `begin..end`, clamped to the entries.
pub fn segment_kernel(op: SegmentOp, e: Elem) -> Kernel {
    let moved = op == SegmentOp::Gather;
    let mut k = Kernel::new(op.name());
    let items = k.index("items");
    let width = k.index("width");
    let data_rows = k.index("data_rows");
    let entries = k.index("entries");
    // A gather moves the elements' bits; a fold computes on them.
    let buffer = |k: &mut Declare, name, written| match (moved, written) {
        (true, _) => k.moved(name, e, written),
        (false, false) => k.input(name, e),
        (false, true) => k.output(name, e),
    };
    let data = buffer(&mut k, "data", false);
    let rows = k.input("rows", Elem::I32);
    let offsets = k.input("offsets", Elem::I32);
    let weights = buffer(&mut k, "weights", false);
    let weighted = k.index("weighted");
    let fill = buffer(&mut k, "fill", false);
    let out = buffer(&mut k, "out", true);
    let o = Operands {
        width: width.clone(),
        data_rows,
        data,
        rows,
        weights,
        weighted,
        fill,
    };
    let bound = |at: Ex| offsets.at(at).to_index();
    let mut stmts = vec![
        Stmt::Let(S, item() / width.clone()),
        Stmt::Let(K, item() % width),
        Stmt::Var(BEGIN, bound(S.get())),
        Stmt::Assign(BEGIN, BEGIN.get().clamp(int(0), entries.clone())),
        Stmt::Var(END, bound(S.get() + int(1))),
        Stmt::Assign(END, END.get().clamp(BEGIN.get(), entries)),
    ];
    let value = match op {
        SegmentOp::Gather => gather(&o, e, &mut stmts),
        SegmentOp::Max => max(&o, e, &mut stmts),
        _ => fold(op, &o, e, &mut stmts),
    };
    k.map(out, items, stmts, value)
}

/// The loop over the segment's entries, skipping rows outside the data; `body` sees the
/// row `r` and the element `x` of the data there.
fn over_entries(o: &Operands, x: Local, body: Vec<Stmt>) -> Stmt {
    let mut stmts = vec![
        Stmt::Let(R, o.rows.at(J.get()).to_index()),
        when(R.get().outside(o.data_rows.clone()), vec![Stmt::Continue]),
        Stmt::Let(x, o.data.at(R.get() * o.width.clone() + K.get())),
    ];
    stmts.extend(body);
    Stmt::For(J, BEGIN.get(), END.get(), stmts)
}

/// A gather: the last row of the segment, or the fill value for an empty one.
fn gather(o: &Operands, m: Elem, stmts: &mut Vec<Stmt>) -> Ex {
    let value = Local::new("value", Ty::Raw(m));
    let last = END.get() - int(1);
    stmts.extend([
        Stmt::Var(value, o.fill.at(int(0))),
        when(
            END.get().gt(BEGIN.get()),
            vec![
                Stmt::Let(R, o.rows.at(last).to_index()),
                when(
                    !R.get().outside(o.data_rows.clone()),
                    vec![Stmt::Assign(
                        value,
                        o.data.at(R.get() * o.width.clone() + K.get()),
                    )],
                ),
            ],
        ),
    ]);
    value.get()
}

/// `Σ w·x` (integers wrap), over `Σ w` (mean) or `sqrt(Σ w²)` (square-root mean); an
/// empty segment holds zero.
fn fold(op: SegmentOp, o: &Operands, e: Elem, stmts: &mut Vec<Stmt>) -> Ex {
    let v = |name| Local::new(name, Ty::Value(e));
    let (acc, total, squares, x, w) = (v("acc"), v("total"), v("squares"), v("x"), v("w"));
    let zero = || elem(e, body::num(0));
    let mut each = vec![
        Stmt::Var(w, elem(e, body::num(1))),
        when(
            o.weighted.clone().ne(int(0)),
            vec![Stmt::Assign(w, o.weights.at(J.get()))],
        ),
        Stmt::Assign(acc, elem(e, acc.value() + w.value() * x.value())),
    ];
    let result = match op {
        SegmentOp::Mean => {
            each.push(Stmt::Assign(total, elem(e, total.value() + w.value())));
            acc.value() / total.value()
        }
        SegmentOp::SqrtN => {
            each.push(Stmt::Assign(
                squares,
                elem(e, squares.value() + w.value() * w.value()),
            ));
            acc.value() / body::call(body::Func::Sqrt, [squares.value()])
        }
        _ => acc.value(),
    };
    stmts.extend([
        Stmt::Var(acc, zero()),
        Stmt::Var(total, zero()),
        Stmt::Var(squares, zero()),
        over_entries(o, x, each),
    ]);
    END.get().gt(BEGIN.get()).then(elem(e, result), zero())
}

/// The largest `x` as TensorFlow folds it (`acc > x ? acc : x`); an empty segment holds the
/// fill value.
fn max(o: &Operands, e: Elem, stmts: &mut Vec<Stmt>) -> Ex {
    let (acc, x) = (
        Local::new("acc", Ty::Value(e)),
        Local::new("x", Ty::Value(e)),
    );
    let first = Local::new("first", Ty::Bool);
    let keeps = elem(e, acc.value().cmp(Cmp::Gt, x.value()));
    stmts.extend([
        Stmt::Var(acc, o.fill.at(int(0))),
        Stmt::Var(first, Ex::Bool(true)),
        over_entries(
            o,
            x,
            vec![
                when(first.get().or(!keeps), vec![Stmt::Assign(acc, x.get())]),
                Stmt::Assign(first, Ex::Bool(false)),
            ],
        ),
    ]);
    acc.get()
}

/// `segment_fill`: every element of the output the fill value (raw elements `m`).
pub fn fill_kernel(m: Elem) -> Kernel {
    let mut k = Kernel::new("segment_fill");
    let items = k.index("items");
    let fill = k.moved("fill", m, false);
    let out = k.moved("out", m, true);
    k.map(out, items, vec![], fill.at(int(0)))
}

/// `segment_scatter`: data element `item` (row `j`, column `k`) moved to element
/// `rows[j] * width + k` of the output; a row outside the output is skipped.
pub fn scatter_kernel(m: Elem) -> Kernel {
    let mut k = Kernel::new("segment_scatter");
    let items = k.index("items");
    let width = k.index("width");
    let out_rows = k.index("out_rows");
    let data = k.moved("data", m, false);
    let rows = k.input("rows", Elem::I32);
    let out = k.moved("out", m, true);
    let stmts = vec![
        Stmt::Let(R, rows.at(item() / width.clone()).to_index()),
        when(
            !R.get().outside(out_rows),
            vec![out.store(R.get() * width.clone() + item() % width, data.at(item()))],
        ),
    ];
    k.each(items, stmts)
}

/// The arguments of a fold or gather ([`segment_kernel`]), in its parameter order: `at`
/// gives an operand's memory and element offset, `out` the output's.
pub fn fold_args<'v, M: Copy>(
    g: &SegmentGeometry,
    data: &TensorView<'v>,
    segments: &Segments<'v>,
    out: (M, i64),
    at: impl Fn(&TensorView<'v>) -> Result<(M, i64)>,
) -> Result<Vec<Arg<M>>> {
    let buffer =
        |view: &TensorView<'v>| at(view).map(|(m, offset)| [Arg::Mem(m), Arg::I64(offset)]);
    let mut args = vec![
        Arg::I64((g.segments * g.width) as i64),
        Arg::I64(g.width as i64),
        Arg::I64(g.data_rows as i64),
        Arg::I64(g.entries as i64),
    ];
    args.extend(buffer(data)?);
    args.extend(buffer(&segments.rows)?);
    args.extend(buffer(&segments.offsets)?);
    // Without weights the kernel never reads its weights buffer: the data stands in.
    args.extend(buffer(segments.weights.as_ref().unwrap_or(data))?);
    args.push(Arg::I64(i64::from(segments.weights.is_some())));
    args.extend(buffer(&segments.fill)?);
    args.extend([Arg::Mem(out.0), Arg::I64(out.1)]);
    Ok(args)
}

/// The arguments of a row scatter's two launches: `segment_fill`'s (none without a fill)
/// and `segment_scatter`'s.
pub type ScatterArgs<M> = (Option<Vec<Arg<M>>>, Vec<Arg<M>>);

/// The arguments of `segment_fill` ([`fill_kernel`]; none without a `fill`) and of
/// `segment_scatter` ([`scatter_kernel`]) over `out`'s `outputs` elements, in their
/// parameter order.
pub fn scatter_args<'v, M: Copy>(
    g: &ScatterGeometry,
    outputs: usize,
    (data, rows, fill): (&TensorView<'v>, &TensorView<'v>, Option<&TensorView<'v>>),
    out: (M, i64),
    at: impl Fn(&TensorView<'v>) -> Result<(M, i64)>,
) -> Result<ScatterArgs<M>> {
    let buffer =
        |view: &TensorView<'v>| at(view).map(|(m, offset)| [Arg::Mem(m), Arg::I64(offset)]);
    let out = [Arg::Mem(out.0), Arg::I64(out.1)];
    let fill_args = match fill {
        Some(fill) => {
            let mut args = vec![Arg::I64(outputs as i64)];
            args.extend(buffer(fill)?);
            args.extend(out);
            Some(args)
        }
        None => None,
    };
    let mut scatter = vec![
        Arg::I64((g.entries * g.width) as i64),
        Arg::I64(g.width as i64),
        Arg::I64(g.out_rows as i64),
    ];
    scatter.extend(buffer(data)?);
    scatter.extend(buffer(rows)?);
    scatter.extend(out);
    Ok((fill_args, scatter))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_hold_the_folds_their_dtype_has() {
        let floats = SegmentKernels::reduce(DataType::Half).unwrap();
        let names = |k: SegmentKernels| -> Vec<String> {
            k.names().iter().map(ToString::to_string).collect()
        };
        assert_eq!(
            names(floats),
            [
                "segment_sum",
                "segment_mean",
                "segment_sqrt_n",
                "segment_max"
            ]
        );
        let ints = SegmentKernels::reduce(DataType::Int64).unwrap();
        assert_eq!(names(ints), ["segment_sum", "segment_max"]);
        assert!(SegmentKernels::reduce(DataType::Bool).is_none());
        assert!(SegmentKernels::reduce(DataType::Complex64).is_none());
        assert_eq!(
            SegmentKernels::new(SegmentOp::Gather, DataType::Complex128),
            Some(SegmentKernels::Gather(Elem::C128))
        );
        assert_eq!(
            SegmentKernels::new(SegmentOp::Gather, DataType::Float8E4M3FN),
            Some(SegmentKernels::Gather(Elem::U8))
        );
        for kernels in [floats, ints, SegmentKernels::Gather(Elem::U16)] {
            for dialect in [Dialect::OpenCl, Dialect::Cuda] {
                let text = kernels.source(dialect);
                for name in kernels.names() {
                    assert!(text.contains(&format!("KERNEL void {name}(")), "{name}");
                }
            }
        }
    }
}
