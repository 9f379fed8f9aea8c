//! Reduction kernels, written once as IR ([`ReduceKernel::kernel`]) for OpenCL C, CUDA C
//! and WGSL: each output element reduces the elements of its kept index over the reduced
//! dims of a strided input ([`polytensor_core::plan::ReducedAxes`], each side coalesced),
//! with an accumulator per (op, dtype) that follows the suite's semantics: integer sums
//! and products wrap, integer means sum exactly in two words and divide once, floats
//! accumulate in f64 where the device computes in 64 bits ([`ReduceKernel::wide`]; f32
//! otherwise, products then as a significand and a power of two so that partial products
//! neither overflow nor underflow), max/min propagate NaN, and arg-reductions return the
//! first extreme (the first NaN, if any).
//!
//! An accumulator (`Acc`) is one or two typed components with `identity`, `lift`,
//! `combine` and `finish`; every stage is built from them:
//! - `<op>_serial`: one work-item per output (short reductions);
//! - `<op>_tree`: one work-group of [`ReduceKernel::lanes`] work-items per output, each
//!   striding over the reduced elements, then a tree through shared arrays;
//! - `<op>_split` and `<op>_gather`: long reductions into few outputs, each output split
//!   across `parts` work-groups writing partial accumulators (one buffer per component),
//!   then one work-group per output combining its partials as a tree and finishing.
//!
//! Parameters ([`ReduceArgs::of`] lists the arguments): `outputs`, `count` (elements per
//! output), `parts` (split and gather), the kept and reduced dims as arrays of words
//! ([`geometry`]), the input, then the output, or the partials.

use polytensor_core::plan::Coalesced;
use polytensor_core::ReduceOp;

use crate::body::{self, call, num, x, y, Cmp, Expr, Func};
use crate::ir::{
    elem, elem_of, int, item, unravel, when, Buf, Ex, Kernel, KernelName, Local, Stmt, Ty, Words,
};
use crate::launch::Arg;
use crate::{render, Dialect, Elem, Library, Real};

/// Work-items per work-group of the OpenCL and CUDA kernels (a power of two).
pub const WORKGROUP: u32 = 64;

/// Work-items per work-group of the WGSL kernels (a power of two).
pub const WGSL_WORKGROUP: u32 = 256;

/// Reductions shorter than this run one work-item per output.
pub const SERIAL_BELOW: usize = 64;

/// The kernels of one reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// One work-item per output (short reductions).
    Serial,
    /// One work-group per output, a tree in shared memory (long reductions, many outputs).
    Tree,
    /// `parts` work-groups per output, each writing a partial accumulator (long
    /// reductions into few outputs); followed by [`Stage::Gather`].
    Split,
    /// One work-group per output combining its partials as a tree (a lane per partial,
    /// then halving), then finishing: a serial fold of thousands of partials by one
    /// work-item cost an H100 most of a whole-tensor sum.
    Gather,
}

impl Stage {
    /// Every stage: the kernels a reduction's program holds.
    pub const ALL: [Stage; 4] = [Stage::Serial, Stage::Tree, Stage::Split, Stage::Gather];

    fn name(self) -> &'static str {
        match self {
            Stage::Serial => "serial",
            Stage::Tree => "tree",
            Stage::Split => "split",
            Stage::Gather => "gather",
        }
    }
}

/// The stage for `outputs` reductions of `count` elements each on a device that keeps
/// about `groups` work-groups busy ([`split_groups`]), and the parts each output is split
/// into (1 unless the stage is [`Stage::Split`]).
pub fn plan(outputs: usize, count: usize, groups: usize) -> (Stage, usize) {
    if count < SERIAL_BELOW {
        return (Stage::Serial, 1);
    }
    let parts = split_parts(outputs, count, groups);
    if parts > 1 {
        (Stage::Split, parts)
    } else {
        (Stage::Tree, 1)
    }
}

/// How many work-groups each output of a reduction is split across: enough that about
/// `groups` work-groups run when there are few outputs, each folding at least
/// [`SPLIT_MIN`] elements; 1 (no split) when the outputs alone fill the device.
pub fn split_parts(outputs: usize, count: usize, groups: usize) -> usize {
    if outputs >= groups {
        return 1;
    }
    (groups / outputs.max(1)).min(count / SPLIT_MIN).max(1)
}

/// The work-groups a split reduction aims for on a device of `compute_units` (CUDA's
/// multiprocessors, OpenCL's compute units): 16 per unit, so that a GPU's memory system is
/// kept busy (64 groups, one per 64 threads, reached a fifth of an H100's bandwidth), and
/// at least [`SPLIT_GROUPS`] (a CPU device's few units).
pub fn split_groups(compute_units: usize) -> usize {
    compute_units.saturating_mul(16).max(SPLIT_GROUPS)
}

/// The fewest work-groups a split reduction aims for.
pub const SPLIT_GROUPS: usize = 64;

/// The fewest elements one work-group of a split reduction folds.
pub const SPLIT_MIN: usize = 4096;

/// The words of one side (kept or reduced) of a reduction: `[rank, dims..., strides...]`
/// after coalescing (merging keeps the row-major order of outputs and of reduced
/// elements, so arg-reductions' indices are unchanged).
pub fn geometry(dims: &[usize], strides: &[isize]) -> Vec<i64> {
    let plan = Coalesced::new(dims, &[strides]);
    let mut words = vec![plan.rank() as i64];
    words.extend(plan.dims().iter().map(|&d| d as i64));
    words.extend(plan.strides(0).iter().map(|&s| s as i64));
    words
}

/// How a reduction accumulates: its components' types follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Acc {
    /// One value of the element (sums, products, float means, extremes).
    Plain(Elem),
    /// A product as a significand of the element (f32 or complex64, its largest part
    /// kept in `[1, 2)`) and a power of two (an index).
    Scaled(Elem),
    /// A value of the element and its index (arg-reductions; index -1: none yet).
    Arg(Elem),
    /// An integer sum exact in two words of the element (`U32` or `U64`): low, high.
    Wide(Elem),
}

impl Acc {
    /// The components' types.
    fn types(self) -> Vec<Ty> {
        match self {
            Acc::Plain(e) => vec![Ty::Value(e)],
            Acc::Scaled(e) | Acc::Arg(e) => vec![Ty::Value(e), Ty::Index],
            Acc::Wide(w) => vec![Ty::Value(w), Ty::Value(w)],
        }
    }

    /// The element types it computes in.
    fn elems(self) -> Vec<Elem> {
        match self {
            Acc::Plain(e) | Acc::Scaled(e) if e.is_complex() => vec![e, body::part(e)],
            Acc::Plain(e) | Acc::Scaled(e) | Acc::Arg(e) | Acc::Wide(e) => vec![e],
        }
    }
}

/// The locals `names` of the components of `acc`.
fn locals(names: [&'static str; 2], acc: Acc) -> Vec<Local> {
    acc.types()
        .into_iter()
        .zip(names)
        .map(|(ty, name)| Local::new(name, ty))
        .collect()
}

/// The running accumulator.
const ACC: [&str; 2] = ["acc0", "acc1"];
/// The accumulator combined into it.
const NEXT: [&str; 2] = ["next0", "next1"];
/// A shared array's element being combined.
const HERE: [&str; 2] = ["here0", "here1"];
/// The shared arrays of a work-group's tree.
const SHARED: [&str; 2] = ["shared0", "shared1"];
/// The partials buffers of a split.
const PARTIALS: [&str; 2] = ["partial0", "partial1"];

/// A reduction kernel. Equal kernels have equal text: the cache key of the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReduceKernel {
    /// The reduction.
    pub op: ReduceOp,
    /// The input's element type.
    pub input: Elem,
    /// Whether the device computes in 64 bits everywhere: floats then accumulate in f64
    /// and integer means in 64-bit words (OpenCL with fp64, CUDA); otherwise f32 and the
    /// input's own width (WGSL).
    pub wide: bool,
    /// Work-items per work-group of the tree, split and gather stages.
    pub lanes: u32,
}

impl ReduceKernel {
    /// The reduction `op` of `input` as the C devices run it: floats accumulated in f64
    /// and integer means in 64-bit words where the device computes in f64 (`fp64`),
    /// [`WORKGROUP`] lanes a work-group.
    pub fn new(op: ReduceOp, input: Elem, fp64: bool) -> Self {
        Self {
            op,
            input,
            wide: fp64,
            lanes: WORKGROUP,
        }
    }

    /// The output's element type.
    pub fn output(&self) -> Elem {
        match self.op {
            ReduceOp::ArgMax | ReduceOp::ArgMin => Elem::I64,
            _ => self.input,
        }
    }

    /// The float type floats accumulate in.
    fn accumulator_real(&self) -> Real {
        if self.wide || self.input.needs_fp64() {
            Real::F64
        } else {
            Real::F32
        }
    }

    /// The accumulator, or `None` where the op is not defined for the element type.
    fn acc(&self) -> Option<Acc> {
        let e = self.input;
        if e == Elem::Bool {
            return None;
        }
        let float = e.is_float() || e.is_complex();
        let wide = self.accumulator_real() == Real::F64;
        let float_acc = match (e.is_complex(), wide) {
            (true, true) => Elem::C128,
            (true, false) => Elem::C64,
            (false, true) => Elem::F64,
            (false, false) => Elem::F32,
        };
        Some(match self.op {
            ReduceOp::ArgMax | ReduceOp::ArgMin | ReduceOp::Max | ReduceOp::Min
                if e.is_complex() =>
            {
                return None
            }
            ReduceOp::ArgMax | ReduceOp::ArgMin => Acc::Arg(e),
            ReduceOp::Max | ReduceOp::Min => Acc::Plain(e),
            ReduceOp::Prod if float && !wide => Acc::Scaled(float_acc),
            ReduceOp::Sum | ReduceOp::Prod | ReduceOp::Mean if float => Acc::Plain(float_acc),
            ReduceOp::Mean if self.wide || e.bits() == Some(64) => Acc::Wide(Elem::U64),
            ReduceOp::Mean => Acc::Wide(Elem::U32),
            ReduceOp::Sum | ReduceOp::Prod => Acc::Plain(e),
        })
    }

    /// The element types whose helpers the reduction calls.
    fn library_elems(&self) -> Vec<Elem> {
        let mut elems = vec![self.input];
        elems.extend(self.acc().map(Acc::elems).unwrap_or_default());
        elems
    }

    fn library(&self, dialect: Dialect) -> Library {
        let elems = self.library_elems();
        let fp64 = elems.iter().any(|e| e.real() == Some(Real::F64));
        Library::new(dialect, &elems, fp64)
    }

    /// Whether the kernel computes in f64.
    pub fn needs_fp64(&self) -> bool {
        self.library(Dialect::OpenCl).needs_fp64()
    }

    /// The element type of each partials buffer of a split (an index component's bits
    /// travel as `U64`), or `None` where the op is not defined for the element type.
    pub fn partials(&self) -> Option<Vec<Elem>> {
        Some(
            self.acc()?
                .types()
                .into_iter()
                .map(|ty| match ty {
                    Ty::Value(e) => e,
                    _ => Elem::U64,
                })
                .collect(),
        )
    }

    /// A program of just this reduction in `dialect` (every stage), or `None` where the
    /// op is not defined for the element type.
    pub fn source(&self, dialect: Dialect) -> Option<String> {
        program(dialect, std::slice::from_ref(self))
    }

    /// The name of one of this reduction's kernels: `<op>_serial`, `<op>_tree`,
    /// `<op>_split` or `<op>_gather`.
    pub fn kernel_name(&self, stage: Stage) -> KernelName {
        KernelName::new(self.op.name()).with(stage.name())
    }

    /// The accumulator's starting value.
    fn identity(&self, acc: Acc) -> Vec<Ex> {
        match acc {
            Acc::Plain(a) => vec![elem(
                a,
                match self.op {
                    ReduceOp::Prod => num(1),
                    ReduceOp::Max => Expr::Lowest,
                    ReduceOp::Min => Expr::Highest,
                    _ => num(0),
                },
            )],
            Acc::Scaled(a) => vec![elem(a, num(1)), int(0)],
            Acc::Arg(v) => vec![elem(v, num(0)), int(-1)],
            Acc::Wide(w) => vec![elem(w, num(0)), elem(w, num(0))],
        }
    }

    /// Statements that declare `next` ([`NEXT`]) as the accumulator of the one input
    /// value `v` (a local) at reduced index `j`.
    fn lift(&self, acc: Acc, v: Local, j: Ex) -> Vec<Stmt> {
        let next = locals(NEXT, acc);
        let e = self.input;
        match acc {
            Acc::Plain(a) => vec![Stmt::Let(next[0], convert(e, a, v.get()))],
            Acc::Arg(_) => vec![Stmt::Let(next[0], v.get()), Stmt::Let(next[1], j)],
            Acc::Scaled(a) => {
                let mut stmts = vec![
                    Stmt::Var(next[0], convert(e, a, v.get())),
                    Stmt::Var(next[1], int(0)),
                ];
                stmts.extend(normalize(
                    a,
                    next[0],
                    next[1],
                    ["lifted_power", "lifted_first"],
                ));
                stmts
            }
            Acc::Wide(w) => {
                let high = if e.is_signed() {
                    elem_of(e, x().cmp(Cmp::Lt, num(0)), [v.get()])
                        .then(elem(w, Expr::AllOnes), elem(w, num(0)))
                } else {
                    elem(w, num(0))
                };
                vec![
                    Stmt::Let(next[0], v.get().cast(e, w)),
                    Stmt::Let(next[1], high),
                ]
            }
        }
    }

    /// Statements that combine the accumulator `other` (expressions, each read once per
    /// use) into the mutable locals `into`.
    fn combine(&self, acc: Acc, into: &[Local], other: &[Ex]) -> Vec<Stmt> {
        let (a, b) = (into, other);
        let with = |e: Elem, expr: Expr| elem_of(e, expr, [a[0].get(), b[0].clone()]);
        match acc {
            Acc::Plain(e) => {
                let expr = match self.op {
                    ReduceOp::Prod => x() * y(),
                    ReduceOp::Max if e.is_float() => call(Func::MaxNan, [x(), y()]),
                    ReduceOp::Min if e.is_float() => call(Func::MinNan, [x(), y()]),
                    ReduceOp::Max => x().cmp(Cmp::Gt, y()).then(x(), y()),
                    ReduceOp::Min => x().cmp(Cmp::Lt, y()).then(x(), y()),
                    _ => x() + y(),
                };
                vec![Stmt::Assign(a[0], with(e, expr))]
            }
            Acc::Scaled(e) => {
                let mut stmts = vec![
                    Stmt::Assign(a[0], with(e, x() * y())),
                    Stmt::Assign(a[1], a[1].get() + b[1].clone()),
                ];
                stmts.extend(normalize(e, a[0], a[1], ["power", "first"]));
                stmts
            }
            Acc::Arg(v) => {
                let (ai, bi) = (a[1].get(), b[1].clone());
                let better = if self.op == ReduceOp::ArgMax {
                    Cmp::Gt
                } else {
                    Cmp::Lt
                };
                // `b` wins with a better value, or an equal one at a smaller index.
                let wins = with(v, y().cmp(better, x()))
                    .or(with(v, y().cmp(Cmp::Eq, x())).and(bi.clone().lt(ai.clone())));
                let wins = if v.is_float() {
                    // The first NaN wins over everything.
                    let nan = |value: Ex| elem_of(v, x().cmp(Cmp::Ne, x()), [value]);
                    let (an, bn) = (nan(a[0].get()), nan(b[0].clone()));
                    let a_nan_first = an.clone().and((!bn.clone()).or(ai.clone().lt(bi.clone())));
                    an.or(bn).then(!a_nan_first, wins)
                } else {
                    wins
                };
                // An empty side (index -1) loses.
                let take = ai.lt(int(0)).or(bi.clone().ge(int(0)).and(wins));
                vec![when(
                    take,
                    vec![Stmt::Assign(a[0], b[0].clone()), Stmt::Assign(a[1], bi)],
                )]
            }
            Acc::Wide(w) => {
                let low = Local::new("low", Ty::Value(w));
                let carry = elem_of(w, x().cmp(Cmp::Lt, y()), [low.get(), a[0].get()]);
                vec![
                    Stmt::Let(low, with(w, x() + y())),
                    Stmt::Assign(
                        a[1],
                        elem_of(
                            w,
                            x() + y() + Expr::Arg(2),
                            [a[1].get(), b[1].clone(), flag(w, carry)],
                        ),
                    ),
                    Stmt::Assign(a[0], low.get()),
                ]
            }
        }
    }

    /// Statements and the output value (the output buffer's load type) of the finished
    /// accumulator `a` over `count` elements.
    fn finish(&self, acc: Acc, a: &[Local], count: Ex) -> (Vec<Stmt>, Ex) {
        let out = self.input;
        match acc {
            Acc::Plain(e) if self.op == ReduceOp::Mean => {
                let part = body::part(e);
                let divide = |v: Ex, t: Elem| elem_of(t, x() / y(), [v, count.clone().of_index(t)]);
                let mean = if e.is_complex() {
                    Ex::Complex(
                        e,
                        Box::new(divide(a[0].get().part(0), part)),
                        Box::new(divide(a[0].get().part(1), part)),
                    )
                } else {
                    divide(a[0].get(), e)
                };
                (vec![], convert(e, out, mean))
            }
            Acc::Plain(e) => (vec![], convert(e, out, a[0].get())),
            Acc::Arg(_) => {
                let i = a[1].get();
                (vec![], i.clone().lt(int(0)).then(int(0), i).bits())
            }
            Acc::Scaled(e) => {
                // m 2^k in at most three scalings, each within f32's exponents: it rounds
                // once.
                let (m, k, s) = (
                    Local::new("m", Ty::Value(e)),
                    Local::new("k", Ty::Index),
                    Local::new("s", Ty::Index),
                );
                let step = Local::new("step", Ty::Index);
                let stmts = vec![
                    Stmt::Var(m, a[0].get()),
                    Stmt::Var(k, a[1].get().clamp(int(-400), int(400))),
                    Stmt::Unroll(
                        step,
                        3,
                        vec![
                            Stmt::Let(s, k.get().clamp(int(-126), int(127))),
                            Stmt::Assign(m, scale(e, m.get(), s.get())),
                            Stmt::Assign(k, k.get() - s.get()),
                        ],
                    ),
                ];
                (stmts, convert(e, out, m.get()))
            }
            Acc::Wide(w) => wide_mean(w, out, a, count),
        }
    }

    /// The statements of one element of a fold: the input at `position`, the reduced
    /// element `j`, lifted and combined into [`ACC`].
    fn fold_element(&self, acc: Acc, position: Ex, j: Local, input: Buf) -> Vec<Stmt> {
        let v = Local::new("v", Ty::Value(self.input));
        let mut stmts = vec![Stmt::Let(v, input.at(position))];
        stmts.extend(self.lift(acc, v, j.get()));
        let next: Vec<Ex> = locals(NEXT, acc).into_iter().map(Local::get).collect();
        stmts.extend(self.combine(acc, &locals(ACC, acc), &next));
        stmts
    }

    /// Statements that declare the accumulator [`ACC`] of output `o` folded over its
    /// reduced elements `from, from + step, ...` below `to`. One reduced dim (the common
    /// case) gets a loop of its own, without the unravelling: the test is outside the
    /// loop, where it is the same for every lane.
    fn fold(&self, acc: Acc, io: &Io, o: Ex, from: Ex, to: Ex, step: Ex) -> Vec<Stmt> {
        let (base, j, q, end, stride) = (
            Local::new("base", Ty::Index),
            Local::new("j", Ty::Index),
            Local::new("q", Ty::Index),
            Local::new("end", Ty::Index),
            Local::new("stride", Ty::Index),
        );
        let mut stmts = unravel(io.kept, o, &[base]);
        stmts.extend(self.declare_acc(acc));
        stmts.push(Stmt::Let(end, to));
        let element = |position: Ex| self.fold_element(acc, position, j, io.input);
        let one_dim = vec![
            Stmt::Let(stride, io.reduced.at(int(2))),
            Stmt::Stride(
                j,
                from.clone(),
                end.get(),
                step.clone(),
                element(base.get() + j.get() * stride.get()),
            ),
        ];
        let mut unravelled = unravel(io.reduced, j.get(), &[q]);
        unravelled.extend(element(base.get() + q.get()));
        let any_dims = vec![Stmt::Stride(j, from, end.get(), step, unravelled)];
        stmts.push(Stmt::If(
            Ex::Local(REDUCED_RANK).cmp(Cmp::Eq, int(1)),
            one_dim,
            any_dims,
        ));
        stmts
    }

    /// The statements that declare the accumulator [`ACC`] at its identity.
    fn declare_acc(&self, acc: Acc) -> Vec<Stmt> {
        locals(ACC, acc)
            .into_iter()
            .zip(self.identity(acc))
            .map(|(l, init)| Stmt::Var(l, init))
            .collect()
    }

    /// The IR kernel of one stage, or `None` where the op is not defined for the element
    /// type.
    pub fn kernel(&self, stage: Stage) -> Option<Kernel> {
        let acc = self.acc()?;
        let mut k = Kernel::new(self.kernel_name(stage));
        let outputs = k.index("outputs");
        let count = k.index("count");
        let parts = matches!(stage, Stage::Split | Stage::Gather).then(|| k.index("parts"));
        let lanes = self.lanes as i32;
        let output = |k: &mut crate::ir::Declare| match self.op {
            ReduceOp::ArgMax | ReduceOp::ArgMin => k.moved("out", Elem::U64, true),
            _ => k.output("out", self.input),
        };
        // A value component's partials are values; an index component's, its bits.
        let partials = |k: &mut crate::ir::Declare, written: bool| -> Vec<Buf> {
            acc.types()
                .into_iter()
                .zip(PARTIALS)
                .map(|(ty, name)| match (ty, written) {
                    (Ty::Value(e), true) => k.output(name, e),
                    (Ty::Value(e), false) => k.input(name, e),
                    (_, written) => k.moved(name, Elem::U64, written),
                })
                .collect()
        };
        // The input and its geometry, for the stages that fold it (gather reads partials).
        let declare_io = |k: &mut crate::ir::Declare| {
            let (kept, reduced) = (k.words("kept"), k.words("reduced"));
            let input = k.input("input", self.input);
            Io {
                kept,
                reduced,
                input,
            }
        };
        let rank = |io: &Io| Stmt::Let(REDUCED_RANK, io.reduced.at(int(0)));
        match stage {
            Stage::Gather => {
                let parts = parts?;
                let inputs = partials(&mut k, false);
                let out = output(&mut k);
                let q = Local::new("q", Ty::Index);
                let o = Local::new("o", Ty::Index);
                let at = o.get() * parts.clone() + q.get();
                let other: Vec<Ex> = acc
                    .types()
                    .iter()
                    .zip(&inputs)
                    .map(|(ty, b)| match ty {
                        Ty::Index => b.at(at.clone()).from_bits(),
                        _ => b.at(at.clone()),
                    })
                    .collect();
                let mut fill = self.declare_acc(acc);
                fill.push(Stmt::Stride(
                    q,
                    Ex::Lane(0),
                    parts,
                    int(lanes),
                    self.combine(acc, &locals(ACC, acc), &other),
                ));
                let write = self.write_output(acc, out, o.get(), count);
                Some(k.groups(
                    [self.lanes, 1, 1],
                    self.tree_body(acc, (o, outputs), vec![], fill, write),
                ))
            }
            Stage::Serial => {
                let io = declare_io(&mut k);
                let rank = rank(&io);
                let out = output(&mut k);
                let mut stmts = vec![rank];
                stmts.extend(self.fold(acc, &io, item(), int(0), count.clone(), int(1)));
                let (finish, value) = self.finish(acc, &locals(ACC, acc), count);
                stmts.extend(finish);
                Some(k.map(out, outputs, stmts, value))
            }
            Stage::Tree => {
                let io = declare_io(&mut k);
                let rank = rank(&io);
                let out = output(&mut k);
                let o = Local::new("o", Ty::Index);
                let fill = self.fold(acc, &io, o.get(), Ex::Lane(0), count.clone(), int(lanes));
                let write = self.write_output(acc, out, o.get(), count);
                let stmts = self.tree_body(acc, (o, outputs), vec![rank], fill, write);
                Some(k.groups([self.lanes, 1, 1], stmts))
            }
            Stage::Split => {
                let parts = parts?;
                let io = declare_io(&mut k);
                let rank = rank(&io);
                let outs = partials(&mut k, true);
                let (g, o, chunk, start) = (
                    Local::new("slot", Ty::Index),
                    Local::new("o", Ty::Index),
                    Local::new("chunk", Ty::Index),
                    Local::new("start", Ty::Index),
                );
                // Slot g folds chunk g % parts of output g / parts.
                let mut range = vec![
                    Stmt::Let(o, g.get() / parts.clone()),
                    Stmt::Let(start, (g.get() % parts.clone()) * chunk.get()),
                ];
                let end = (start.get() + chunk.get()).min(count.clone());
                range.extend(self.fold(
                    acc,
                    &io,
                    o.get(),
                    start.get() + Ex::Lane(0),
                    end,
                    int(lanes),
                ));
                let here = shared_element(acc, int(0));
                let write = acc
                    .types()
                    .iter()
                    .zip(here)
                    .zip(&outs)
                    .map(|((ty, v), b)| {
                        let v = if *ty == Ty::Index { v.bits() } else { v };
                        b.store(g.get(), v)
                    })
                    .collect();
                let chunk_size = (count.clone() + parts.clone() - int(1)) / parts.clone();
                let head = vec![rank, Stmt::Let(chunk, chunk_size)];
                let stmts = self.tree_body(acc, (g, outputs * parts), head, range, write);
                Some(k.groups([self.lanes, 1, 1], stmts))
            }
        }
    }

    /// Store output `o`: the finished accumulator in `shared[0]`.
    fn write_output(&self, acc: Acc, out: Buf, o: Ex, count: Ex) -> Vec<Stmt> {
        let here = locals(HERE, acc);
        let mut stmts: Vec<Stmt> = here
            .iter()
            .zip(shared_element(acc, int(0)))
            .map(|(&l, v)| Stmt::Let(l, v))
            .collect();
        let (finish, value) = self.finish(acc, &here, count);
        stmts.extend(finish);
        stmts.push(out.store(o, value));
        stmts
    }

    /// The body of a work-group stage: before the loop `setup` (at the top level, with the
    /// shared arrays); for each `g` of `(g, end)` from the group's own on, stepping by the
    /// number of groups: `fill` (which declares [`ACC`]: this lane's share), the tree
    /// through the shared arrays, and `write` by lane 0 (the result in `shared[0]`).
    fn tree_body(
        &self,
        acc: Acc,
        (g, end): (Local, Ex),
        setup: Vec<Stmt>,
        fill: Vec<Stmt>,
        write: Vec<Stmt>,
    ) -> Vec<Stmt> {
        let lane = Local::new("own", Ty::Index);
        let shared = locals(SHARED, acc);
        let mut stmts: Vec<Stmt> = shared
            .iter()
            .map(|&s| Stmt::Shared(s, self.lanes as usize))
            .collect();
        stmts.push(Stmt::Let(lane, Ex::Lane(0)));
        stmts.extend(setup);
        let mut body = fill;
        for (s, a) in shared.iter().zip(locals(ACC, acc)) {
            body.push(Stmt::Set(*s, lane.get(), a.get()));
        }
        body.push(Stmt::Barrier);
        // The tree: each level, the lower half of the lanes still in it combines the upper
        // half into its own, halving the width (a loop, so the combine is written once).
        let (width, level) = (
            Local::new("width", Ty::Index),
            Local::new("level", Ty::Index),
        );
        let here = locals(HERE, acc);
        let mut step: Vec<Stmt> = here
            .iter()
            .zip(shared_element(acc, lane.get()))
            .map(|(&l, v)| Stmt::Var(l, v))
            .collect();
        let other = shared_element(acc, lane.get() + width.get());
        step.extend(self.combine(acc, &here, &other));
        for (s, h) in shared.iter().zip(&here) {
            step.push(Stmt::Set(*s, lane.get(), h.get()));
        }
        body.push(Stmt::Var(width, int(self.lanes as i32 / 2)));
        body.push(Stmt::For(
            level,
            int(0),
            int(self.lanes.trailing_zeros() as i32),
            vec![
                when(lane.get().lt(width.get()), step),
                Stmt::Barrier,
                Stmt::Assign(width, width.get() / int(2)),
            ],
        ));
        body.push(when(lane.get().cmp(Cmp::Eq, int(0)), write));
        body.push(Stmt::Barrier);
        stmts.push(Stmt::Stride(g, Ex::Group(0), end, Ex::Groups(0), body));
        stmts
    }
}

/// The local holding the reduced rank.
const REDUCED_RANK: Local = Local::new("reduced_rank", Ty::Index);

/// Where a fold reads: the kept and reduced words and the input.
struct Io {
    kept: Words,
    reduced: Words,
    input: Buf,
}

/// The components of the shared arrays at `at`.
fn shared_element(acc: Acc, at: Ex) -> Vec<Ex> {
    locals(SHARED, acc)
        .into_iter()
        .map(|s| Ex::Element(s, Box::new(at.clone())))
        .collect()
}

/// `v` of element `from` as element `to` (itself where they are one type).
fn convert(from: Elem, to: Elem, v: Ex) -> Ex {
    if from == to {
        v
    } else {
        v.cast(from, to)
    }
}

/// A condition as 1 or 0 of the integer element `w`.
fn flag(w: Elem, cond: Ex) -> Ex {
    cond.then(elem(w, num(1)), elem(w, num(0)))
}

/// `v` (f32 or complex64) times `2^k`.
fn scale(e: Elem, v: Ex, k: Ex) -> Ex {
    if e.is_complex() {
        let part = |which| Ex::Scale(Box::new(v.clone().part(which)), Box::new(k.clone()));
        Ex::Complex(e, Box::new(part(0)), Box::new(part(1)))
    } else {
        Ex::Scale(Box::new(v), Box::new(k))
    }
}

/// Statements that rescale the significand `m` (f32 or complex64) so that its largest
/// part lies in `[1, 2)`, adding the power of two to `k`; zeros, infinities and NaN stay.
/// The locals it declares take `names`.
fn normalize(e: Elem, m: Local, k: Local, [power, first]: [&'static str; 2]) -> Vec<Stmt> {
    let largest = if e.is_complex() {
        let abs = |which| elem_of(Elem::F32, call(Func::Abs, [x()]), [m.get().part(which)]);
        elem_of(
            Elem::F32,
            x().cmp(Cmp::Gt, y()).then(x(), y()),
            [abs(0), abs(1)],
        )
    } else {
        m.get()
    };
    let (power, first) = (Local::new(power, Ty::Index), Local::new(first, Ty::Index));
    // A subnormal's power (down to -149) takes two scalings.
    vec![
        Stmt::Let(power, Ex::Exponent(Box::new(largest))),
        Stmt::Let(first, power.get().clamp(int(-126), int(126))),
        Stmt::Assign(
            m,
            scale(
                e,
                scale(e, m.get(), int(0) - first.get()),
                first.get() - power.get(),
            ),
        ),
        Stmt::Assign(k, k.get() + power.get()),
    ]
}

/// The mean of a two-word sum `a` (low, high words of `w`; the high word carries the sign
/// of signed values) over `count`: divided by the count truncating toward zero by long
/// division, wrapped to the output element `out`; 0 for no elements.
fn wide_mean(w: Elem, out: Elem, a: &[Local], count: Ex) -> (Vec<Stmt>, Ex) {
    let bits = if w == Elem::U64 { 64 } else { 32 };
    let value = |name| Local::new(name, Ty::Value(w));
    let truth = |name| Local::new(name, Ty::Bool);
    let (low, high, q, r, d) = (
        value("low"),
        value("high"),
        value("q"),
        value("r"),
        value("d"),
    );
    let (negative, top, carry) = (truth("negative"), truth("top"), truth("carry"));
    let bit = Local::new("bit", Ty::Index);
    // Whether a word's top bit is set.
    let top_bit = |v: Ex| elem_of(w, x().cmp(Cmp::Gt, Expr::AllOnes / num(2)), [v]);
    let twice = |v: Local, plus: Ex| elem_of(w, x() * num(2) + y(), [v.get(), plus]);
    let signed = out.is_signed();
    let mut stmts = vec![Stmt::Let(
        negative,
        if signed {
            top_bit(a[1].get())
        } else {
            Ex::Bool(false)
        },
    )];
    // The magnitude: a negative sum negated in two words.
    let negated_low = elem_of(w, num(0) - x(), [a[0].get()]);
    let borrow = flag(w, elem_of(w, x().cmp(Cmp::Ne, num(0)), [a[0].get()]));
    let negated_high = elem_of(w, num(0) - x() - y(), [a[1].get(), borrow]);
    stmts.extend([
        Stmt::Var(low, negative.get().then(negated_low, a[0].get())),
        Stmt::Var(high, negative.get().then(negated_high, a[1].get())),
        Stmt::Let(d, count.clone().of_index(w)),
        Stmt::Var(q, elem(w, num(0))),
        Stmt::Var(r, elem(w, num(0))),
        Stmt::For(
            bit,
            int(0),
            int(2 * bits),
            vec![
                // Shift (high, low) left into r, one bit a turn, from the top.
                Stmt::Let(top, top_bit(high.get())),
                Stmt::Assign(high, twice(high, flag(w, top_bit(low.get())))),
                Stmt::Assign(low, twice(low, elem(w, num(0)))),
                Stmt::Let(carry, top_bit(r.get())),
                Stmt::Assign(r, twice(r, flag(w, top.get()))),
                Stmt::Assign(q, twice(q, elem(w, num(0)))),
                when(
                    carry
                        .get()
                        .or(elem_of(w, x().cmp(Cmp::Ge, y()), [r.get(), d.get()])),
                    vec![
                        Stmt::Assign(r, elem_of(w, x() - y(), [r.get(), d.get()])),
                        Stmt::Assign(q, elem_of(w, x() + num(1), [q.get()])),
                    ],
                ),
            ],
        ),
    ]);
    let quotient = negative
        .get()
        .then(elem_of(w, num(0) - x(), [q.get()]), q.get());
    let mean = count
        .cmp(Cmp::Eq, int(0))
        .then(elem(out, num(0)), quotient.cast(w, out));
    (stmts, mean)
}

/// One program holding the reductions `kernels` (every stage of each, see
/// [`ReduceKernel::kernel_name`]), with the helpers they need; `None` if one is not
/// defined for its element type.
pub fn program(dialect: Dialect, kernels: &[ReduceKernel]) -> Option<String> {
    let mut fp64 = false;
    let mut elems = vec![];
    for k in kernels {
        fp64 |= k.library(dialect).needs_fp64();
        elems.extend(k.library_elems());
    }
    let mut text = Library::new(dialect, &elems, fp64).render();
    for k in kernels {
        for stage in Stage::ALL {
            text += &render::c_kernel(&k.kernel(stage)?)?;
        }
    }
    Some(text)
}

/// The arguments of a reduction's launches.
#[derive(Debug, Clone)]
pub struct ReduceArgs<M> {
    /// Output elements.
    pub outputs: usize,
    /// Reduced elements per output.
    pub count: usize,
    /// Parts per output of a split (1 otherwise).
    pub parts: usize,
    /// The kept side's [`geometry`] words.
    pub kept: M,
    /// The reduced side's [`geometry`] words.
    pub reduced: M,
    /// The input and its element offset.
    pub input: (M, usize),
    /// The partials buffers of a split ([`ReduceKernel::partials`]), each from element 0.
    pub partials: Vec<M>,
    /// The output and its element offset.
    pub out: (M, usize),
}

impl<M: Copy> ReduceArgs<M> {
    /// The arguments of `stage`'s kernel, in parameter order.
    pub fn of(&self, stage: Stage) -> Vec<Arg<M>> {
        let index = |v: usize| Arg::I64(v as i64);
        let mut args = vec![index(self.outputs), index(self.count)];
        let partials = self.partials.iter().flat_map(|&m| [Arg::Mem(m), index(0)]);
        let out = [Arg::Mem(self.out.0), index(self.out.1)];
        if matches!(stage, Stage::Split | Stage::Gather) {
            args.push(index(self.parts));
        }
        if stage == Stage::Gather {
            args.extend(partials);
            args.extend(out);
            return args;
        }
        args.extend([
            Arg::Mem(self.kept),
            Arg::Mem(self.reduced),
            Arg::Mem(self.input.0),
            index(self.input.1),
        ]);
        if stage == Stage::Split {
            args.extend(partials);
        } else {
            args.extend(out);
        }
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(op: ReduceOp, input: Elem, wide: bool) -> ReduceKernel {
        ReduceKernel {
            op,
            input,
            wide,
            lanes: WORKGROUP,
        }
    }

    #[test]
    fn every_stage_renders_in_both_languages_where_the_op_is_defined() {
        let elems = [
            Elem::F16,
            Elem::BF16,
            Elem::F32,
            Elem::F64,
            Elem::I8,
            Elem::U16,
            Elem::I32,
            Elem::U32,
            Elem::I64,
            Elem::U64,
            Elem::C64,
            Elem::C128,
        ];
        for &op in ReduceOp::ALL.iter() {
            for e in elems {
                for wide in [false, true] {
                    let k = kernel(op, e, wide);
                    let defined = !(e.is_complex()
                        && matches!(
                            op,
                            ReduceOp::Max | ReduceOp::Min | ReduceOp::ArgMax | ReduceOp::ArgMin
                        ));
                    for stage in Stage::ALL {
                        let ir = k.kernel(stage);
                        assert_eq!(ir.is_some(), defined, "{op:?} {e:?} {stage:?}");
                        let Some(ir) = ir else { continue };
                        assert!(render::c_kernel(&ir).is_some(), "C {op:?} {e:?} {stage:?}");
                        assert!(
                            render::wgsl_kernel(&ir).is_some(),
                            "WGSL {op:?} {e:?} {stage:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_arguments_follow_the_parameters() {
        let k = kernel(ReduceOp::ArgMax, Elem::F32, true);
        let args = ReduceArgs {
            outputs: 3,
            count: 100,
            parts: 4,
            kept: 1u8,
            reduced: 2,
            input: (3, 5),
            partials: vec![6, 7],
            out: (8, 9),
        };
        for stage in Stage::ALL {
            let ir = k.kernel(stage).unwrap();
            let expected: usize = ir
                .params
                .iter()
                .map(|p| match p {
                    crate::ir::Param::Buffer(_) => 2,
                    _ => 1,
                })
                .sum();
            assert_eq!(args.of(stage).len(), expected, "{stage:?}");
        }
    }

    #[test]
    fn the_plan_splits_few_long_outputs() {
        assert_eq!(plan(10, 63, 64), (Stage::Serial, 1));
        assert_eq!(plan(1000, 100_000, 64), (Stage::Tree, 1));
        assert_eq!(plan(1, 1 << 22, 64), (Stage::Split, 64));
        assert_eq!(plan(2, 100_000, 1024), (Stage::Split, 24));
    }
}
