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
//! The kernel is named `matmul`; [`Schedule::global`] and [`Schedule::local`] give its
//! launch. Arguments: `i64 m, n, k`, `GLOBAL const i64* geometry` (batch rank `r`, the `r`
//! batch dims, then the `r` batch strides of `a`, of `b` and of the output), `i64
//! first_batch` (the batch of group 0 along dim 2), then `a` with its `i64` offset, row
//! stride and column stride, `b` likewise, and the output with its `i64` offset (written
//! contiguously, `n` per row).

use polytensor_core::plan::MatmulPlan;

use crate::{Dialect, Elem, Library};

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

/// The element-type-specific pieces of the kernel text.
struct Parts {
    /// The type products accumulate in.
    acc: &'static str,
    /// Zero of `acc`.
    zero: &'static str,
    /// The stored value of the accumulator `sum` (an expression in `sum`).
    finish: &'static str,
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

    fn parts(&self) -> Parts {
        let (acc, zero, finish) = match self.elem {
            Elem::C64 => ("c64", "MAKE_C64(0, 0)", "sum"),
            Elem::C128 => ("c128", "MAKE_C128(0, 0)", "sum"),
            Elem::I32 => ("u32", "0", "(i32)sum"),
            Elem::I64 => ("u64", "0", "(i64)sum"),
            e => (e.value(), "0", "sum"),
        };
        Parts { acc, zero, finish }
    }

    /// The value of a stored operand element, as the accumulator type.
    fn load(&self, stored: &str) -> String {
        let value = self.elem.load(stored);
        if self.elem.is_integer() {
            format!("({}){value}", self.parts().acc)
        } else {
            value
        }
    }

    /// The program's source in `dialect`.
    pub fn source(&self, dialect: Dialect) -> String {
        let e = self.elem;
        let acc = self.parts().acc;
        let mac = match e {
            Elem::C64 => "add_c64(sum, mul_c64(x, y))",
            Elem::C128 => "add_c128(sum, mul_c128(x, y))",
            _ => "sum + x * y",
        };
        let s = e.storage();
        let mut text = Library::new(dialect, &[e], false).render();
        text += &format!(
            r#"
FN {acc} mac({acc} sum, {acc} x, {acc} y) {{
    return {mac};
}}

KERNEL void matmul(const i64 m, const i64 n, const i64 k, GLOBAL const i64* geometry,
                   const i64 first_batch,
                   GLOBAL const {s}* a, const i64 a_offset, const i64 a_rows, const i64 a_cols,
                   GLOBAL const {s}* b, const i64 b_offset, const i64 b_rows, const i64 b_cols,
                   GLOBAL {s}* out, const i64 out_offset) {{
    // This group's matrices: the batch index unravelled over the batch dims.
    const i64 rank = geometry[0];
    i64 rest = first_batch + GROUP_ID(2);
    i64 pa = a_offset, pb = b_offset, po = out_offset;
    for (i64 d = rank - 1; d >= 0; d--) {{
        const i64 index = rest % geometry[1 + d];
        rest /= geometry[1 + d];
        pa += index * geometry[1 + rank + d];
        pb += index * geometry[1 + 2 * rank + d];
        po += index * geometry[1 + 3 * rank + d];
    }}
{body}}}
"#,
            body = match self.schedule {
                Schedule::Tiled => self.tiled(),
                Schedule::Blocked => self.blocked(),
            }
        );
        text
    }

    /// The tiled schedule's kernel body: 16 x 16 work-items compute a TILE x TILE block of
    /// one output matrix, 4 x 4 each (rows ly + 16 i, columns lx + 16 j), stepping k by KT
    /// with both operand tiles in local memory.
    fn tiled(&self) -> String {
        let Parts { acc, zero, finish } = self.parts();
        let store = self.elem.store(&finish.replace("sum", "sum[i][j]"));
        let a_load = self.load("a[pa + row * a_rows + ak * a_cols]");
        let b_load = self.load("b[pb + bk * b_rows + col * b_cols]");
        format!(
            r#"    const i64 TILE = {TILE}, KT = 16;
    LOCAL {acc} a_tile[{TILE}][16];
    LOCAL {acc} b_tile[16][{TILE}];
    const i64 lx = LOCAL_ID2(0);
    const i64 ly = LOCAL_ID2(1);
    const i64 flat = ly * 16 + lx;
    const i64 col0 = GROUP_ID(0) * TILE;
    const i64 row0 = GROUP_ID(1) * TILE;
    {acc} sum[4][4];
    for (i64 i = 0; i < 4; i++) {{
        for (i64 j = 0; j < 4; j++) {{
            sum[i][j] = {zero};
        }}
    }}
    for (i64 t = 0; t < k; t += KT) {{
        for (i64 q = 0; q < 4; q++) {{
            const i64 e = flat + q * 256;
            const i64 ar = e / KT, ac = e % KT;
            const i64 row = row0 + ar, ak = t + ac;
            a_tile[ar][ac] = (row < m && ak < k) ? {a_load} : ({acc}){zero};
            const i64 br = e / TILE, bc = e % TILE;
            const i64 bk = t + br, col = col0 + bc;
            b_tile[br][bc] = (bk < k && col < n) ? {b_load} : ({acc}){zero};
        }}
        BARRIER();
        for (i64 q = 0; q < KT; q++) {{
            {acc} x[4], y[4];
            for (i64 i = 0; i < 4; i++) {{
                x[i] = a_tile[ly + 16 * i][q];
                y[i] = b_tile[q][lx + 16 * i];
            }}
            for (i64 i = 0; i < 4; i++) {{
                for (i64 j = 0; j < 4; j++) {{
                    sum[i][j] = mac(sum[i][j], x[i], y[j]);
                }}
            }}
        }}
        BARRIER();
    }}
    for (i64 i = 0; i < 4; i++) {{
        for (i64 j = 0; j < 4; j++) {{
            const i64 row = row0 + ly + 16 * i, col = col0 + lx + 16 * j;
            if (row < m && col < n) {{
                out[po + row * n + col] = {store};
            }}
        }}
    }}
"#
        )
    }

    /// The blocked schedule's kernel body: one work-item computes rows `row0..row0 + R` and
    /// columns `col0..col0 + C` in registers. Whole blocks take a path without bounds
    /// checks, whose column loop the compiler turns into vector arithmetic (and vector loads
    /// where `b`'s rows are contiguous, a path of its own); blocks on the matrix's edge take
    /// the same loop with every access checked.
    fn blocked(&self) -> String {
        format!(
            r#"    const i64 R = {BLOCK_ROWS}, C = {BLOCK_COLS};
    const i64 col0 = GROUP_ID(0) * C;
    const i64 row0 = GROUP_ID(1) * R;
    if (row0 + R <= m && col0 + C <= n && b_cols == 1) {{
{contiguous}    }} else if (row0 + R <= m && col0 + C <= n) {{
{whole}    }} else {{
{edge}    }}
"#,
            contiguous = self.block(false, true),
            whole = self.block(false, false),
            edge = self.block(true, false),
        )
    }

    /// One block's loop, with bounds checks on every access if `edge`, for a `b` whose
    /// column stride is 1 if `unit_b_cols`. The loops over the block are unrolled, so the
    /// accumulators stay in registers (PoCL keeps them on the stack otherwise: 1.5x slower).
    fn block(&self, edge: bool, unit_b_cols: bool) -> String {
        let Parts { acc, zero, finish } = self.parts();
        let guard = |condition: &str, load: String| {
            if edge {
                format!("({condition}) ? {load} : ({acc}){zero}")
            } else {
                load
            }
        };
        let b_load = guard(
            "col0 + j < n",
            self.load(if unit_b_cols {
                "b[pb + t * b_rows + col0 + j]"
            } else {
                "b[pb + t * b_rows + (col0 + j) * b_cols]"
            }),
        );
        let a_load = guard(
            "row0 + i < m",
            self.load("a[pa + (row0 + i) * a_rows + t * a_cols]"),
        );
        let store = format!(
            "out[po + (row0 + i) * n + col0 + j] = {};",
            self.elem.store(&finish.replace("sum", "sum[i][j]"))
        );
        let store = if edge {
            format!("if (row0 + i < m && col0 + j < n) {{\n                    {store}\n                }}")
        } else {
            store
        };
        format!(
            r#"        {acc} sum[{BLOCK_ROWS}][{BLOCK_COLS}];
        UNROLL for (i64 i = 0; i < R; i++) {{
            UNROLL for (i64 j = 0; j < C; j++) {{
                sum[i][j] = {zero};
            }}
        }}
        for (i64 t = 0; t < k; t++) {{
            {acc} y[{BLOCK_COLS}];
            UNROLL for (i64 j = 0; j < C; j++) {{
                y[j] = {b_load};
            }}
            UNROLL for (i64 i = 0; i < R; i++) {{
                const {acc} x = {a_load};
                UNROLL for (i64 j = 0; j < C; j++) {{
                    sum[i][j] = mac(sum[i][j], x, y[j]);
                }}
            }}
        }}
        UNROLL for (i64 i = 0; i < R; i++) {{
            UNROLL for (i64 j = 0; j < C; j++) {{
                {store}
            }}
        }}
"#
        )
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
