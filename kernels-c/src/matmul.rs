//! Matmul kernels: `out[b] = a[b] x b[b]` over strided operands, batched over coalesced
//! batch dims ([`tensor_core::plan::MatmulPlan`]), tiled through local memory. Each
//! work-group computes a `TILE x TILE` block of one output matrix; f16 and bf16 multiply and
//! accumulate in f32, complex in its own type, integers wrap.
//!
//! The kernel is named `matmul`; work-group `(THREADS, THREADS, 1)`, groups
//! `(ceil(n / TILE), ceil(m / TILE), batches)`. Arguments: `i64 m, n, k`, `GLOBAL const
//! i64* geometry` (batch rank `r`, the `r` batch dims, then the `r` batch strides of `a`,
//! of `b` and of the output), `i64 first_batch` (the batch of group 0 along dim 2), then
//! `a` with its `i64` offset, row stride and column stride, `b` likewise, and the output
//! with its `i64` offset (written contiguously, `n` per row).

use tensor_core::plan::MatmulPlan;

use crate::{Dialect, Elem, Library};

/// The side of the square output tile of one work-group.
pub const TILE: usize = 64;

/// The side of a work-group: `THREADS x THREADS` work-items, each computing
/// `(TILE / THREADS)^2` outputs.
pub const THREADS: usize = 16;

/// A matmul kernel of one element type; the cache key of its program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatmulKernel {
    /// The operands' and output's element type.
    pub elem: Elem,
}

impl MatmulKernel {
    /// The kernel for `elem`, or `None` where matmul is not defined for it.
    pub fn new(elem: Elem) -> Option<Self> {
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
        .then_some(Self { elem })
    }

    /// Whether the kernel computes in f64.
    pub fn needs_fp64(&self) -> bool {
        self.elem.needs_fp64()
    }

    /// The program's source in `dialect`.
    pub fn source(&self, dialect: Dialect) -> String {
        let e = self.elem;
        let mut text = Library::new(dialect, &[e], false).render();
        // The type tiles hold and products accumulate in.
        let (acc, zero, mac, finish) = match e {
            Elem::C64 => (
                "c64",
                "MAKE_C64(0, 0)",
                "add_c64(sum, mul_c64(x, y))",
                "sum",
            ),
            Elem::C128 => (
                "c128",
                "MAKE_C128(0, 0)",
                "add_c128(sum, mul_c128(x, y))",
                "sum",
            ),
            Elem::I32 => ("u32", "0", "sum + x * y", "(i32)sum"),
            Elem::I64 => ("u64", "0", "sum + x * y", "(i64)sum"),
            _ => (e.value(), "0", "sum + x * y", "sum"),
        };
        let load = |stored: &str| {
            let value = e.load(stored);
            if e.is_integer() {
                format!("({acc}){value}")
            } else {
                value
            }
        };
        let store = e.store(&finish.replace("sum", "sum[i][j]"));
        let a_load = load("a[pa + row * a_rows + ak * a_cols]");
        let b_load = load("b[pb + bk * b_rows + col * b_cols]");
        let s = e.storage();
        let loads = format!(
            "        for (i64 q = 0; q < 4; q++) {{\n            \
             const i64 e = flat + q * 256;\n            \
             const i64 ar = e / KT, ac = e % KT;\n            \
             const i64 row = row0 + ar, ak = t + ac;\n            \
             a_tile[ar][ac] = (row < m && ak < k) ? {a_load} : ({acc}){zero};\n            \
             const i64 br = e / TILE, bc = e % TILE;\n            \
             const i64 bk = t + br, col = col0 + bc;\n            \
             b_tile[br][bc] = (bk < k && col < n) ? {b_load} : ({acc}){zero};\n        }}\n"
        );
        text += &format!(
            r#"
#define TILE {TILE}
#define KT 16

FN {acc} mac({acc} sum, {acc} x, {acc} y) {{
    return {mac};
}}

// 16 x 16 work-items compute a TILE x TILE block of one output matrix, 4 x 4 each (rows
// ly + 16 i, columns lx + 16 j), stepping k by KT with both operand tiles in local memory.
KERNEL void matmul(const i64 m, const i64 n, const i64 k, GLOBAL const i64* geometry,
                   const i64 first_batch,
                   GLOBAL const {s}* a, const i64 a_offset, const i64 a_rows, const i64 a_cols,
                   GLOBAL const {s}* b, const i64 b_offset, const i64 b_rows, const i64 b_cols,
                   GLOBAL {s}* out, const i64 out_offset) {{
    LOCAL {acc} a_tile[TILE][KT];
    LOCAL {acc} b_tile[KT][TILE];
    const i64 lx = LOCAL_ID2(0);
    const i64 ly = LOCAL_ID2(1);
    const i64 flat = ly * 16 + lx;
    const i64 col0 = GROUP_ID(0) * TILE;
    const i64 row0 = GROUP_ID(1) * TILE;
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
    {acc} sum[4][4];
    for (i64 i = 0; i < 4; i++) {{
        for (i64 j = 0; j < 4; j++) {{
            sum[i][j] = {zero};
        }}
    }}
    for (i64 t = 0; t < k; t += KT) {{
{loads}        BARRIER();
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
}}
"#
        );
        text
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
