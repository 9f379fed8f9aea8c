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
//! Arguments of every fold and gather: `i64 items` (output elements), `i64 width`
//! (elements of one row), `i64 data_rows`, `i64 entries`, then each of data, rows (int32),
//! offsets (int32), weights, fill and output as a buffer and its `i64` element offset, with
//! `i64 weighted` after the weights (0: every weight is 1; the weights buffer is then never
//! read). `segment_fill`: `i64 items`, the fill and the output (each a buffer and offset).
//! `segment_scatter`: `i64 items` (data elements), `i64 width`, `i64 out_rows`, then the
//! data, the rows and the output (each a buffer and offset).

use polytensor_core::plan::segment::SegmentOp;
use polytensor_core::DataType;

use crate::{Dialect, Elem, Library};

/// The parameter list every segment kernel takes, for elements stored as `s`.
fn parameters(s: &str) -> String {
    format!(
        "const i64 items, const i64 width, const i64 data_rows, const i64 entries,
        GLOBAL const {s}* data, const i64 data_offset,
        GLOBAL const i32* rows, const i64 rows_offset,
        GLOBAL const i32* offsets, const i64 offsets_offset,
        GLOBAL const {s}* weights, const i64 weights_offset, const i64 weighted,
        GLOBAL const {s}* fill, const i64 fill_offset,
        GLOBAL {s}* out, const i64 out_offset"
    )
}

/// The loop head every kernel shares: output element `item` is column `k` of segment `s`,
/// whose entries are `begin..end` (clamped).
const SEGMENT: &str = "    for (i64 item = GLOBAL_ID; item < items; item += GLOBAL_SIZE) {
        const i64 s = item / width;
        const i64 k = item % width;
        i64 begin = offsets[offsets_offset + s];
        i64 end = offsets[offsets_offset + s + 1];
        begin = begin < 0 ? 0 : (begin > entries ? entries : begin);
        end = end < begin ? begin : (end > entries ? entries : end);
";

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

    /// The kernel names of the program.
    pub fn names(&self) -> Vec<&'static str> {
        match self {
            SegmentKernels::Gather(_) => {
                vec![SegmentOp::Gather.name(), "segment_fill", "segment_scatter"]
            }
            SegmentKernels::Reduce(dtype, _) => SegmentOp::ALL
                .into_iter()
                .filter(|&op| op != SegmentOp::Gather && op.is_defined_for(*dtype))
                .map(SegmentOp::name)
                .collect(),
        }
    }

    /// Whether the program computes in f64.
    pub fn needs_fp64(&self) -> bool {
        matches!(self, SegmentKernels::Reduce(_, e) if e.needs_fp64())
    }

    /// The program's source in `dialect`.
    pub fn source(&self, dialect: Dialect) -> String {
        match *self {
            SegmentKernels::Gather(m) => gather_source(dialect, m),
            SegmentKernels::Reduce(_, e) => reduce_source(dialect, e),
        }
    }
}

fn gather_source(dialect: Dialect, m: Elem) -> String {
    let raw = m.raw();
    let mut text = Library::new(dialect, &[], false).render();
    text += &format!(
        r#"
KERNEL void segment_gather({parameters}) {{
{SEGMENT}        {raw} value = fill[fill_offset];
        if (end > begin) {{
            const i64 r = rows[rows_offset + end - 1];
            if (r >= 0 && r < data_rows) {{
                value = data[data_offset + r * width + k];
            }}
        }}
        out[out_offset + item] = value;
    }}
}}

KERNEL void segment_fill(const i64 items, GLOBAL const {raw}* fill, const i64 fill_offset,
                         GLOBAL {raw}* out, const i64 out_offset) {{
    for (i64 item = GLOBAL_ID; item < items; item += GLOBAL_SIZE) {{
        out[out_offset + item] = fill[fill_offset];
    }}
}}

KERNEL void segment_scatter(const i64 items, const i64 width, const i64 out_rows,
                            GLOBAL const {raw}* data, const i64 data_offset,
                            GLOBAL const i32* rows, const i64 rows_offset,
                            GLOBAL {raw}* out, const i64 out_offset) {{
    for (i64 item = GLOBAL_ID; item < items; item += GLOBAL_SIZE) {{
        const i64 r = rows[rows_offset + item / width];
        if (r >= 0 && r < out_rows) {{
            out[out_offset + r * width + item % width] = data[data_offset + item];
        }}
    }}
}}
"#,
        parameters = parameters(raw),
    );
    text
}

fn reduce_source(dialect: Dialect, e: Elem) -> String {
    let (s, v) = (e.storage(), e.value());
    let load = |stored: &str| e.load(stored);
    let x = load("data[data_offset + r * width + k]");
    let w = load("weights[weights_offset + j]");
    // Integers wrap (C's signed overflow is undefined, so the arithmetic is unsigned).
    let (mul_add, add) = if e.is_integer() {
        let u = e.wrapping();
        (
            format!("({v})(({u})acc + ({u})w * ({u})x)"),
            format!("({v})(({u})total + ({u})w)"),
        )
    } else {
        ("acc + w * x".to_string(), "total + w".to_string())
    };
    // Only the square root's fold reads `squares` (floats: no overflow to wrap).
    let square = if e.is_float() {
        "squares = squares + w * w;"
    } else {
        ""
    };
    let mut text = Library::new(dialect, &[e], false).render();
    let fold = |name: &str, result: &str| {
        format!(
            r#"
KERNEL void {name}({parameters}) {{
{SEGMENT}        {v} acc = 0;
        {v} total = 0;
        {v} squares = 0;
        for (i64 j = begin; j < end; j++) {{
            const i64 r = rows[rows_offset + j];
            if (r < 0 || r >= data_rows) {{
                continue;
            }}
            const {v} x = {x};
            const {v} w = weighted ? {w} : ({v})1;
            acc = {mul_add};
            total = {add};
            {square}
        }}
        out[out_offset + item] = {stored};
    }}
}}
"#,
            parameters = parameters(s),
            stored = e.store(&format!("(end > begin ? {result} : ({v})0)")),
        )
    };
    text += &fold(SegmentOp::Sum.name(), "acc");
    if e.is_float() {
        let sqrt = format!("sqrt_{}", e.real().map_or("f32", |r| r.name()));
        text += &fold(SegmentOp::Mean.name(), "acc / total");
        text += &fold(SegmentOp::SqrtN.name(), &format!("acc / {sqrt}(squares)"));
    }
    text += &format!(
        r#"
KERNEL void segment_max({parameters}) {{
{SEGMENT}        {v} acc = {fill};
        int first = 1;
        for (i64 j = begin; j < end; j++) {{
            const i64 r = rows[rows_offset + j];
            if (r < 0 || r >= data_rows) {{
                continue;
            }}
            const {v} x = {x};
            acc = (!first && acc > x) ? acc : x;
            first = 0;
        }}
        out[out_offset + item] = {stored};
    }}
}}
"#,
        parameters = parameters(s),
        fill = load("fill[fill_offset]"),
        stored = e.store("acc"),
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_hold_the_folds_their_dtype_has() {
        let floats = SegmentKernels::reduce(DataType::Half).unwrap();
        assert_eq!(
            floats.names(),
            [
                "segment_sum",
                "segment_mean",
                "segment_sqrt_n",
                "segment_max"
            ]
        );
        let ints = SegmentKernels::reduce(DataType::Int64).unwrap();
        assert_eq!(ints.names(), ["segment_sum", "segment_max"]);
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
