//! Matmul kernels: `out[b] = a[b] x b[b]` over strided operands, batched over coalesced
//! batch dims ([`polytensor_core::plan::MatmulPlan`]). f16 and bf16 multiply and accumulate in
//! f32, complex in its own type, integers wrap. Two schedules of one kernel, for two kinds
//! of device ([`Schedule`]):
//!
//! - [`Schedule::Tiled`] (GPUs): each work-group computes a `TILE x TILE` block of one output
//!   matrix through local memory; work-group `(THREADS, THREADS, 1)`.
//! - [`Schedule::Blocked`] (CPU devices such as PoCL): each work-item computes a
//!   `BLOCK_ROWS x BLOCK_COLS` block in registers, with no local memory and no barrier, so
//!   that the compiler vectorises the block's columns; work-group `(1, 1, 1)`.
//!
//! The kernel ([`MatmulKernel::kernel`]) is one function of the IR, named `matmul`, for
//! every GPU language; [`Schedule::global`] and [`Schedule::local`] give its launch, and
//! [`matmul_args`] its arguments: `i64 m, n, k`, `GLOBAL const i64* geometry` (batch rank `r`, the `r`
//! batch dims, then the `r` batch strides of `a`, of `b` and of the output), `i64
//! first_batch` (the batch of group 0 along dim 2), then `a` with its `i64` offset, row
//! stride and column stride, `b` likewise, and the output with its `i64` offset (written
//! contiguously, `n` per row).

use polytensor_core::plan::MatmulPlan;

use crate::body::{self, Cmp};
use crate::ir::{self, int, when, Buf, Ex, Kernel, Local, Stmt, Ty};
use crate::launch::Arg;
use crate::{render, Dialect, Elem, Library};

/// The side of the square output tile of one work-group ([`Schedule::Tiled`]).
pub const TILE: usize = 64;

/// The side of a work-group ([`Schedule::Tiled`]): `THREADS x THREADS` work-items, each
/// computing `(TILE / THREADS)^2` outputs.
pub const THREADS: usize = 16;

/// The output rows of one work-item ([`Schedule::Blocked`]).
pub const BLOCK_ROWS: usize = 8;

/// The output columns of one work-item ([`Schedule::Blocked`]).
pub const BLOCK_COLS: usize = 8;

/// How the work of a matmul is divided among work-items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Schedule {
    /// Work-groups share operand tiles through local memory (GPUs).
    Tiled,
    /// Each work-item keeps its block of the output in registers (CPU devices, whose
    /// compilers vectorise a work-item's loops but pay for every barrier).
    Blocked,
}

impl Schedule {
    /// The global launch size over `m x n` outputs in each of `batches` matrices.
    pub fn global(self, m: usize, n: usize, batches: usize) -> [usize; 3] {
        match self {
            Schedule::Tiled => [
                n.div_ceil(TILE) * THREADS,
                m.div_ceil(TILE) * THREADS,
                batches,
            ],
            Schedule::Blocked => [n.div_ceil(BLOCK_COLS), m.div_ceil(BLOCK_ROWS), batches],
        }
    }

    /// The work-group size.
    pub fn local(self) -> [usize; 3] {
        match self {
            Schedule::Tiled => [THREADS, THREADS, 1],
            Schedule::Blocked => [1, 1, 1],
        }
    }
}

/// A matmul kernel of one element type and schedule; the cache key of its program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatmulKernel {
    /// The operands' and output's element type.
    pub elem: Elem,
    /// How work-items share the work.
    pub schedule: Schedule,
}

impl MatmulKernel {
    /// The kernel for `elem` in `schedule`, or `None` where matmul is not defined for it.
    pub fn new(elem: Elem, schedule: Schedule) -> Option<Self> {
        Self::is_defined_for(elem).then_some(Self { elem, schedule })
    }

    /// Whether there is a matmul kernel for `elem` (in every schedule).
    pub fn is_defined_for(elem: Elem) -> bool {
        matches!(
            elem,
            Elem::F16
                | Elem::BF16
                | Elem::F32
                | Elem::F64
                | Elem::C64
                | Elem::C128
                | Elem::I32
                | Elem::I64
        )
    }

    /// Whether the kernel computes in f64.
    pub fn needs_fp64(&self) -> bool {
        self.elem.needs_fp64()
    }

    /// The program's source in `dialect`: the helpers and [`MatmulKernel::kernel`].
    pub fn source(&self, dialect: Dialect) -> String {
        let mut text = Library::new(dialect, &[self.elem], false).render();
        // Every matmul element renders in C.
        text += &render::c_kernel(&self.kernel()).unwrap_or_default();
        text
    }

    /// The kernel, `matmul`, in its schedule, a kernel of the IR for every GPU language.
    pub fn kernel(&self) -> Kernel {
        let e = self.elem;
        let mut k = Kernel::new("matmul");
        let m = k.index("m");
        let n = k.index("n");
        let depth = k.index("k");
        let geometry = k.words("geometry");
        let first = k.index("first_batch");
        let a = Operand {
            buf: k.input("a", e),
            rows: k.index("a_rows"),
            cols: k.index("a_cols"),
            base: BATCH_OFFSETS[0],
        };
        let b = Operand {
            buf: k.input("b", e),
            rows: k.index("b_rows"),
            cols: k.index("b_cols"),
            base: BATCH_OFFSETS[1],
        };
        let out = k.output("out", e);
        let shape = Shape { m, n, k: depth };
        // The group's matrices: its batch (`first` plus its group along axis 2) unravelled
        // over the batch dims.
        let mut stmts = ir::unravel(geometry, first + Ex::Group(2), &BATCH_OFFSETS);
        match self.schedule {
            Schedule::Tiled => {
                stmts.extend(self.tiled(&shape, &a, &b, out));
                let t = THREADS as u32;
                k.groups([t, t, 1], stmts)
            }
            Schedule::Blocked => {
                stmts.extend(self.blocked(&shape, &a, &b, out));
                k.groups([1, 1, 1], stmts)
            }
        }
    }

    /// Zero, as the value products accumulate in (the element's value type: f16 and bf16
    /// in f32, integers wrapping).
    fn zero(&self) -> Ex {
        ir::elem(self.elem, body::num(0))
    }

    /// `sum + x * y` in the element's arithmetic.
    fn mac(&self, sum: Ex, x: Ex, y: Ex) -> Ex {
        let (s, x_, y_) = (body::x(), body::y(), body::Expr::Arg(2));
        ir::elem_of(self.elem, s + x_ * y_, [sum, x, y])
    }

    /// The tiled schedule: 16 x 16 lanes compute a TILE x TILE block of one output matrix,
    /// 4 x 4 each (rows ly + 16 i, columns lx + 16 j), stepping k by 16 with both operand
    /// tiles in shared arrays.
    fn tiled(&self, shape: &Shape, a: &Operand, b: &Operand, out: Buf) -> Vec<Stmt> {
        const KT: i32 = 16;
        let (tile, threads) = (TILE as i32, THREADS as i32);
        let per = tile / threads;
        let value = Ty::Value(self.elem);
        let [a_tile, b_tile, sum, x, av, bv] =
            ["a_tile", "b_tile", "sum", "x", "av", "bv"].map(|n| Local::new(n, value));
        let [lx, ly, flat, col0, row0, t, q, i, j, e, row, col, kk] = [
            "lx", "ly", "flat", "col0", "row0", "t", "q", "i", "j", "e", "row", "col", "kk",
        ]
        .map(|n| Local::new(n, Ty::Index));
        // Element `e` of a tile: the operand's element where `inside` the matrix, else
        // zero (a branch, not a select, so that nothing outside is read).
        // Element `e` of a tile: the operand's element at row `r`, column `c` where both
        // are inside the matrix, else zero (a branch, not a select, so that nothing outside
        // is read). a's tile is TILE rows by KT, b's KT rows by TILE.
        let stage = |tile_: Local,
                     op: &Operand,
                     (r, r_at, rows): (Local, Ex, &Ex),
                     (c, c_at, cols): (Local, Ex, &Ex),
                     v: Local| {
            vec![
                Stmt::Let(r, r_at),
                Stmt::Let(c, c_at),
                Stmt::Var(v, self.zero()),
                when(
                    r.get().lt(rows.clone()).and(c.get().lt(cols.clone())),
                    vec![Stmt::Assign(v, op.at(r.get(), c.get()))],
                ),
                Stmt::Set(tile_, e.get(), v.get()),
            ]
        };
        let (bk, bc) = (Local::new("bk", Ty::Index), Local::new("bc", Ty::Index));
        let mut load_tiles = vec![Stmt::Let(e, flat.get() + q.get() * int(threads * threads))];
        load_tiles.extend(stage(
            a_tile,
            a,
            (row, row0.get() + quotient(e.get(), KT), &shape.m),
            (kk, t.get() + remainder(e.get(), KT), &shape.k),
            av,
        ));
        load_tiles.extend(stage(
            b_tile,
            b,
            (bk, t.get() + quotient(e.get(), tile), &shape.k),
            (bc, col0.get() + remainder(e.get(), tile), &shape.n),
            bv,
        ));
        // A column of a's tile in registers, then each element of b's row once, folded
        // into its column of the block.
        let b_q = Local::new("b_q", value);
        let multiply = vec![
            Stmt::For(
                i,
                int(0),
                int(per),
                vec![Stmt::Set(
                    x,
                    i.get(),
                    Ex::Element(
                        a_tile,
                        Box::new((ly.get() + int(threads) * i.get()) * int(KT) + q.get()),
                    ),
                )],
            ),
            Stmt::For(
                j,
                int(0),
                int(per),
                vec![
                    Stmt::Let(
                        b_q,
                        Ex::Element(
                            b_tile,
                            Box::new(q.get() * int(tile) + lx.get() + int(threads) * j.get()),
                        ),
                    ),
                    Stmt::For(
                        i,
                        int(0),
                        int(per),
                        vec![Stmt::Set(
                            sum,
                            i.get() * int(per) + j.get(),
                            self.mac(
                                Ex::Element(sum, Box::new(i.get() * int(per) + j.get())),
                                Ex::Element(x, Box::new(i.get())),
                                b_q.get(),
                            ),
                        )],
                    ),
                ],
            ),
        ];
        vec![
            Stmt::Shared(a_tile, (tile * KT) as usize),
            Stmt::Shared(b_tile, (KT * tile) as usize),
            Stmt::Let(lx, Ex::Lane(0)),
            Stmt::Let(ly, Ex::Lane(1)),
            Stmt::Let(flat, ly.get() * int(threads) + lx.get()),
            Stmt::Let(col0, Ex::Group(0) * int(tile)),
            Stmt::Let(row0, Ex::Group(1) * int(tile)),
            Stmt::Array(sum, (per * per) as usize),
            // Declared once, outside the loops (WGSL zeroes a `var` where it is declared).
            Stmt::Array(x, per as usize),
            Stmt::For(
                i,
                int(0),
                int(per * per),
                vec![Stmt::Set(sum, i.get(), self.zero())],
            ),
            Stmt::Stride(
                t,
                int(0),
                shape.k.clone(),
                int(KT),
                vec![
                    Stmt::For(q, int(0), int(tile * KT / (threads * threads)), load_tiles),
                    Stmt::Barrier,
                    Stmt::For(q, int(0), int(KT), multiply),
                    Stmt::Barrier,
                ],
            ),
            Stmt::For(
                i,
                int(0),
                int(per),
                vec![Stmt::For(
                    j,
                    int(0),
                    int(per),
                    vec![
                        Stmt::Let(row, row0.get() + ly.get() + int(threads) * i.get()),
                        Stmt::Let(col, col0.get() + lx.get() + int(threads) * j.get()),
                        when(
                            row.get()
                                .lt(shape.m.clone())
                                .and(col.get().lt(shape.n.clone())),
                            vec![out.store(
                                out_at(shape, row.get(), col.get()),
                                Ex::Element(sum, Box::new(i.get() * int(per) + j.get())),
                            )],
                        ),
                    ],
                )],
            ),
        ]
    }

    /// The blocked schedule: one invocation computes rows `row0..row0 + R` and columns
    /// `col0..col0 + C` in registers. Whole blocks take a path without bounds checks,
    /// whose column loop the compiler turns into vector arithmetic (and vector loads where
    /// `b`'s rows are contiguous, a path of its own); blocks on the matrix's edge take the
    /// same loop with every access checked.
    fn blocked(&self, shape: &Shape, a: &Operand, b: &Operand, out: Buf) -> Vec<Stmt> {
        let (r, c) = (BLOCK_ROWS as i32, BLOCK_COLS as i32);
        let [col0, row0] = ["col0", "row0"].map(|n| Local::new(n, Ty::Index));
        let whole = (row0.get() + int(r))
            .cmp(Cmp::Le, shape.m.clone())
            .and((col0.get() + int(c)).cmp(Cmp::Le, shape.n.clone()));
        let unit = b.cols.clone().cmp(Cmp::Eq, int(1));
        let block =
            |edge, unit_b_cols| self.block(shape, a, b, out, (row0, col0), edge, unit_b_cols);
        vec![
            Stmt::Let(col0, Ex::Group(0) * int(c)),
            Stmt::Let(row0, Ex::Group(1) * int(r)),
            Stmt::If(
                whole.clone().and(unit),
                block(false, true),
                vec![Stmt::If(whole, block(false, false), block(true, false))],
            ),
        ]
    }

    /// One block's loop, with bounds checks on every access if `edge`, for a `b` whose
    /// column stride is 1 if `unit_b_cols`. The loops over the block are unrolled, so the
    /// accumulators stay in registers (PoCL keeps them on the stack otherwise: 1.5x slower).
    #[allow(clippy::too_many_arguments)]
    fn block(
        &self,
        shape: &Shape,
        a: &Operand,
        b: &Operand,
        out: Buf,
        (row0, col0): (Local, Local),
        edge: bool,
        unit_b_cols: bool,
    ) -> Vec<Stmt> {
        let (r, c) = (BLOCK_ROWS, BLOCK_COLS);
        let value = Ty::Value(self.elem);
        let [sum, x, y] = ["sum", "x", "y"].map(|n| Local::new(n, value));
        let [i, j, t] = ["i", "j", "t"].map(|n| Local::new(n, Ty::Index));
        let element = |i: Ex, j: Ex| Ex::Element(sum, Box::new(i * int(c as i32) + j));
        // A load, or zero outside the matrix on the edge (a branch, not a select, so that
        // nothing outside is read).
        let guarded = |local: Local, inside: Ex, load: Ex| {
            if edge {
                vec![
                    Stmt::Var(local, self.zero()),
                    when(inside, vec![Stmt::Assign(local, load)]),
                ]
            } else {
                vec![Stmt::Let(local, load)]
            }
        };
        let col = col0.get() + j.get();
        let b_load = if unit_b_cols {
            b.buf
                .at(b.base.get() + t.get() * b.rows.clone() + col.clone())
        } else {
            b.at(t.get(), col.clone())
        };
        let y_j = Local::new("y_j", value);
        let mut load_y = guarded(y_j, col.clone().lt(shape.n.clone()), b_load);
        load_y.push(Stmt::Set(y, j.get(), y_j.get()));
        let row = row0.get() + i.get();
        let mut multiply = guarded(
            x,
            row.clone().lt(shape.m.clone()),
            a.at(row.clone(), t.get()),
        );
        multiply.push(Stmt::Unroll(
            j,
            c,
            vec![Stmt::Set(
                sum,
                i.get() * int(c as i32) + j.get(),
                self.mac(
                    element(i.get(), j.get()),
                    x.get(),
                    Ex::Element(y, Box::new(j.get())),
                ),
            )],
        ));
        let store = out.store(
            out_at(shape, row.clone(), col.clone()),
            element(i.get(), j.get()),
        );
        let store = if edge {
            when(
                row.lt(shape.m.clone()).and(col.lt(shape.n.clone())),
                vec![store],
            )
        } else {
            store
        };
        vec![
            Stmt::Array(sum, r * c),
            Stmt::Unroll(
                i,
                r,
                vec![Stmt::Unroll(
                    j,
                    c,
                    vec![Stmt::Set(
                        sum,
                        i.get() * int(c as i32) + j.get(),
                        self.zero(),
                    )],
                )],
            ),
            Stmt::For(
                t,
                int(0),
                shape.k.clone(),
                vec![
                    Stmt::Array(y, c),
                    Stmt::Unroll(j, c, load_y),
                    Stmt::Unroll(i, r, multiply),
                ],
            ),
            Stmt::Unroll(i, r, vec![Stmt::Unroll(j, c, vec![store])]),
        ]
    }

    /// The geometry words of a plan's batch dims: rank, dims, then the batch strides of
    /// `a`, `b` and the output.
    pub fn geometry(plan: &MatmulPlan) -> Vec<i64> {
        let batch = &plan.batch;
        let mut words = vec![batch.rank() as i64];
        words.extend(batch.dims().iter().map(|&d| d as i64));
        for k in 0..3 {
            words.extend(batch.strides(k).iter().map(|&s| s as i64));
        }
        words
    }
}

/// The sizes of one product: `m x k` times `k x n`.
struct Shape {
    m: Ex,
    n: Ex,
    k: Ex,
}

/// An operand: its buffer, its row and column strides, and the local of the group's
/// matrix's offset in it.
struct Operand {
    buf: Buf,
    rows: Ex,
    cols: Ex,
    base: Local,
}

/// The locals holding the offsets of the group's matrices in `a`, `b` and the output
/// (from each buffer's offset).
const BATCH_OFFSETS: [Local; 3] = [
    Local::new("pa", Ty::Index),
    Local::new("pb", Ty::Index),
    Local::new("po", Ty::Index),
];

impl Operand {
    /// Its element at `row`, `col` of the group's matrix.
    fn at(&self, row: Ex, col: Ex) -> Ex {
        self.buf
            .at(self.base.get() + row * self.rows.clone() + col * self.cols.clone())
    }
}

/// `at / n` for a non-negative `at` and a power of two `n`, as a shift (a signed division
/// costs more, even by a constant).
fn quotient(at: Ex, n: i32) -> Ex {
    debug_assert!(n > 0 && n & (n - 1) == 0);
    at >> int(n.trailing_zeros() as i32)
}

/// `at % n` for a non-negative `at` and a power of two `n`, as a mask.
fn remainder(at: Ex, n: i32) -> Ex {
    debug_assert!(n > 0 && n & (n - 1) == 0);
    at & int(n - 1)
}

/// The output position of `row`, `col` of the group's matrix (rows of `n`).
fn out_at(shape: &Shape, row: Ex, col: Ex) -> Ex {
    BATCH_OFFSETS[2].get() + row * shape.n.clone() + col
}

/// The arguments of [`MatmulKernel::kernel`] in its parameter order, for the batches from
/// `first` on of `plan`: the sizes, the geometry words' memory ([`MatmulKernel::geometry`]),
/// each operand's memory, element offset and row and column strides, the output's memory
/// and element offset.
pub fn matmul_args<M: Copy>(
    plan: &MatmulPlan,
    first: usize,
    geometry: M,
    a: (M, usize),
    b: (M, usize),
    out: (M, usize),
) -> Vec<Arg<M>> {
    vec![
        Arg::I64(plan.m as i64),
        Arg::I64(plan.n as i64),
        Arg::I64(plan.k as i64),
        Arg::Mem(geometry),
        Arg::I64(first as i64),
        Arg::Mem(a.0),
        Arg::I64(a.1 as i64),
        Arg::I64(plan.a_strides[0] as i64),
        Arg::I64(plan.a_strides[1] as i64),
        Arg::Mem(b.0),
        Arg::I64(b.1 as i64),
        Arg::I64(plan.b_strides[0] as i64),
        Arg::I64(plan.b_strides[1] as i64),
        Arg::Mem(out.0),
        Arg::I64(out.1 as i64),
    ]
}
