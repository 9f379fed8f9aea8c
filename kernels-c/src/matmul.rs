//! Matmul kernels: `out[b] = a[b] x b[b]` over strided operands, batched over coalesced
//! batch dims ([`tensor_core::plan::MatmulPlan`]), tiled through local memory. Each
//! work-group computes a `TILE x TILE` block of one output matrix; f16 and bf16 multiply and
//! accumulate in f32, complex in its own type, integers wrap.
//!
//! The kernel is named `matmul`; work-group `(TILE, TILE, 1)`, groups
//! `(ceil(n / TILE), ceil(m / TILE), batches)`. Arguments: `i64 m, n, k`, `GLOBAL const
//! i64* geometry` (batch rank `r`, the `r` batch dims, then the `r` batch strides of `a`,
//! of `b` and of the output), `i64 first_batch` (the batch of group 0 along dim 2), then
//! `a` with its `i64` offset, row stride and column stride, `b` likewise, and the output
//! with its `i64` offset (written contiguously, `n` per row).

use tensor_core::plan::MatmulPlan;

use crate::{Dialect, Elem, Library};

/// The side of the square tiles (work-group `TILE x TILE`).
pub const TILE: usize = 16;

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
        let store = e.store(finish);
        let a_load = load("a[pa + row * a_rows + ak * a_cols]");
        let b_load = load("b[pb + bk * b_rows + col * b_cols]");
        let s = e.storage();
        text += &format!(
            r#"
#define TILE {TILE}

FN {acc} mac({acc} sum, {acc} x, {acc} y) {{
    return {mac};
}}

KERNEL void matmul(const i64 m, const i64 n, const i64 k, GLOBAL const i64* geometry,
                   const i64 first_batch,
                   GLOBAL const {s}* a, const i64 a_offset, const i64 a_rows, const i64 a_cols,
                   GLOBAL const {s}* b, const i64 b_offset, const i64 b_rows, const i64 b_cols,
                   GLOBAL {s}* out, const i64 out_offset) {{
    LOCAL {acc} a_tile[TILE][TILE];
    LOCAL {acc} b_tile[TILE][TILE];
    const i64 lx = LOCAL_ID2(0);
    const i64 ly = LOCAL_ID2(1);
    const i64 col = GROUP_ID(0) * TILE + lx;
    const i64 row = GROUP_ID(1) * TILE + ly;
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
    {acc} sum = {zero};
    for (i64 t = 0; t < k; t += TILE) {{
        const i64 ak = t + lx;
        const i64 bk = t + ly;
        a_tile[ly][lx] = (row < m && ak < k) ? {a_load} : ({acc}){zero};
        b_tile[ly][lx] = (bk < k && col < n) ? {b_load} : ({acc}){zero};
        BARRIER();
        for (i64 q = 0; q < TILE; q++) {{
            sum = mac(sum, a_tile[ly][q], b_tile[q][lx]);
        }}
        BARRIER();
    }}
    if (row < m && col < n) {{
        out[po + row * n + col] = {store};
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
