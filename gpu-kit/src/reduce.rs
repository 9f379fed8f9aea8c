//! Reduction kernels: each output element reduces the elements of its kept index over the
//! reduced dims of a strided input ([`polytensor_core::plan::ReducedAxes`], each side
//! coalesced), with an accumulator per (op, dtype) that follows the suite's semantics:
//! integer sums and products wrap, integer means sum exactly in 128 bits, floats
//! accumulate in f64 where the device has it (f32 otherwise), max/min propagate NaN, and
//! arg-reductions return the first extreme (the first NaN, if any).
//!
//! Each reduction has two kernels with the same arguments (named after the op, so that the
//! reductions of one dtype share a program: see [`program`]):
//! - `<op>_tree`: one work-group of [`WORKGROUP`] work-items per output (outputs
//!   `GROUP_ID, GROUP_ID + NUM_GROUPS, ...`), each work-item striding over the reduced
//!   elements, then a tree in local memory; for long reductions;
//! - `<op>_serial`: one work-item per output (`GLOBAL_ID, GLOBAL_ID + GLOBAL_SIZE,
//!   ...`); for short ones;
//! - `<op>_split` and `<op>_gather`: long reductions into few outputs, each output split
//!   into `parts` work-groups writing partial accumulators (arguments: as above up to the
//!   input offset, then the partials buffer and `i64 parts`), then one work-item per
//!   output combining its partials (arguments: `i64 outputs`, `i64 count`, the partials,
//!   `i64 parts`, the output buffer and its offset).
//!
//! Arguments of the serial and tree kernels: `i64 outputs`, `i64 count` (elements per output), `GLOBAL const i64*
//! geometry` (kept rank `r`, reduced rank `s`, the `r` kept dims, their `r` strides, the
//! `s` reduced dims, their `s` strides), the input buffer and its `i64` offset, the output
//! buffer and its `i64` offset.

use polytensor_core::plan::Coalesced;
use polytensor_core::ReduceOp;

use crate::{Dialect, Elem, Library, Real};

/// Work-items per work-group of the tree kernels (a power of two).
pub const WORKGROUP: usize = 64;

/// The most bytes one partial accumulator of `<op>_split` takes (the largest `acc`: a
/// 128-bit integer sum, a complex128, or an f64 value with its i64 index): the scratch
/// buffer between split and gather holds `outputs * parts` of them.
pub const PARTIAL_BYTES: usize = 16;

/// The kernels of one reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// One work-item per output (short reductions).
    Serial,
    /// One work-group per output, a tree in local memory (long reductions, many outputs).
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
}

/// A reduction kernel. Equal kernels have equal text: the cache key of the program.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReduceKernel {
    /// The reduction.
    pub op: ReduceOp,
    /// The input's element type.
    pub input: Elem,
    /// Whether floats accumulate in f64 (the device has it).
    pub wide_floats: bool,
}

impl ReduceKernel {
    /// The output's element type.
    pub fn output(&self) -> Elem {
        match self.op {
            ReduceOp::ArgMax | ReduceOp::ArgMin => Elem::I64,
            _ => self.input,
        }
    }

    /// The float type floats accumulate in.
    fn accumulator_real(&self) -> Real {
        if self.wide_floats || self.input.needs_fp64() {
            Real::F64
        } else {
            Real::F32
        }
    }

    fn sums(&self) -> bool {
        matches!(self.op, ReduceOp::Sum | ReduceOp::Mean | ReduceOp::Prod)
    }

    /// The element types whose helpers the reduction calls.
    fn library_elems(&self) -> Vec<Elem> {
        let mut elems = vec![self.input];
        if self.input == Elem::C64 && self.accumulator_real() == Real::F64 && self.sums() {
            elems.push(Elem::C128);
        }
        elems
    }

    fn library(&self, dialect: Dialect) -> Library {
        Library::new(
            dialect,
            &self.library_elems(),
            self.sums() && self.accumulator_real() == Real::F64,
        )
    }

    /// Whether the kernel computes in f64.
    pub fn needs_fp64(&self) -> bool {
        self.library(Dialect::OpenCl).needs_fp64()
    }

    /// The accumulator's C definitions: `acc`, `identity()`, `lift(v, j)`,
    /// `combine(a, b)` and `finish(a, count)`, or `None` where the op is not defined for
    /// the element type.
    fn accumulator(&self) -> Option<String> {
        let e = self.input;
        let v = e.value();
        let out = self.output().value();
        let plain = |acc: &str, identity: &str, lift: &str, combine: &str, finish: &str| {
            format!(
                "typedef {acc} acc;\n\
                 FN acc identity(void) {{ return {identity}; }}\n\
                 FN acc lift({v} v, i64 j) {{ (void)j; return {lift}; }}\n\
                 FN acc combine(acc a, acc b) {{ return {combine}; }}\n\
                 FN {out} finish(acc a, i64 count) {{ (void)count; return {finish}; }}\n"
            )
        };
        let sums = matches!(self.op, ReduceOp::Sum | ReduceOp::Mean | ReduceOp::Prod);
        if e == Elem::Bool {
            return None;
        }
        if e.is_complex() && sums {
            let wide = self.accumulator_real() == Real::F64;
            let (c, make, part) = if wide {
                ("c128", "MAKE_C128", "f64")
            } else {
                ("c64", "MAKE_C64", "f32")
            };
            let (out_make, out_part) = if e == Elem::C128 {
                ("MAKE_C128", "f64")
            } else {
                ("MAKE_C64", "f32")
            };
            let lift = format!("{make}(({part})v.x, ({part})v.y)");
            let narrow = |x: &str| format!("{out_make}(({out_part})({x}).x, ({out_part})({x}).y)");
            return Some(match self.op {
                ReduceOp::Sum => plain(
                    c,
                    &format!("{make}(0, 0)"),
                    &lift,
                    &format!("add_{c}(a, b)"),
                    &narrow("a"),
                ),
                ReduceOp::Prod => plain(
                    c,
                    &format!("{make}(1, 0)"),
                    &lift,
                    &format!("mul_{c}(a, b)"),
                    &narrow("a"),
                ),
                _ => plain(
                    c,
                    &format!("{make}(0, 0)"),
                    &lift,
                    &format!("add_{c}(a, b)"),
                    &narrow(&format!("{make}(a.x / ({part})count, a.y / ({part})count)")),
                ),
            });
        }
        if e.is_complex() {
            return None;
        }
        if let Some(real) = e.real() {
            let r = self.accumulator_real().name();
            // One rounding from an f64 accumulator to f16/bf16: through round-to-odd f32.
            let narrow = |x: &str| {
                if r == "f64" && matches!(e, Elem::F16 | Elem::BF16) {
                    format!("f64_to_f32_odd({x})")
                } else {
                    format!("({v})({x})")
                }
            };
            let vr = real.name();
            let inf = match real {
                Real::F32 => "F32_FROM_BITS(0x7f800000u)".to_string(),
                Real::F64 => "F64_FROM_BITS((u64)0x7ff00000u << 32)".to_string(),
            };
            return Some(match self.op {
                ReduceOp::Sum => plain(r, "0", &format!("({r})v"), "a + b", &narrow("a")),
                ReduceOp::Prod => plain(r, "1", &format!("({r})v"), "a * b", &narrow("a")),
                ReduceOp::Mean => plain(
                    r,
                    "0",
                    &format!("({r})v"),
                    "a + b",
                    &narrow(&format!("a / ({r})count")),
                ),
                ReduceOp::Max => plain(
                    v,
                    &format!("-{inf}"),
                    "v",
                    &format!("max_nan_{vr}(a, b)"),
                    "a",
                ),
                ReduceOp::Min => plain(v, &inf, "v", &format!("min_nan_{vr}(a, b)"), "a"),
                ReduceOp::ArgMax | ReduceOp::ArgMin => arg(self.op, v, true),
            });
        }
        let w = e.wrapping();
        let (lo, hi) = e.int_bounds()?;
        let (wide_from, mean) = if e.is_signed() {
            ("wide_from_i64((i64)v)", "wide_mean_signed")
        } else {
            ("wide_from_u64((u64)v)", "wide_mean_unsigned")
        };
        Some(match self.op {
            ReduceOp::Sum => plain(w, "0", &format!("({w})v"), "a + b", &format!("({v})a")),
            ReduceOp::Prod => plain(w, "1", &format!("({w})v"), "a * b", &format!("({v})a")),
            ReduceOp::Mean => plain(
                "wide",
                "wide_from_u64(0)",
                wide_from,
                "wide_add(a, b)",
                &format!("({v}){mean}(a, (u64)count)"),
            ),
            ReduceOp::Max => plain(v, &lo, "v", "(a > b ? a : b)", "a"),
            ReduceOp::Min => plain(v, &hi, "v", "(a < b ? a : b)", "a"),
            ReduceOp::ArgMax | ReduceOp::ArgMin => arg(self.op, v, false),
        })
    }

    /// A program of just this reduction in `dialect` (kernels `<op>_serial` and
    /// `<op>_tree`), or `None` where the op is not defined for the element type.
    pub fn source(&self, dialect: Dialect) -> Option<String> {
        program(dialect, std::slice::from_ref(self))
    }

    /// The name of one of this reduction's kernels: `<op>_serial`, `<op>_tree`,
    /// `<op>_split` or `<op>_gather`.
    pub fn kernel_name(&self, stage: Stage) -> String {
        let stage = match stage {
            Stage::Serial => "serial",
            Stage::Tree => "tree",
            Stage::Split => "split",
            Stage::Gather => "gather",
        };
        format!("{}_{stage}", self.op.name())
    }

    /// The reduction's own text (its accumulator renamed after the op by the
    /// preprocessor, so that several reductions share a program), or `None`.
    fn body(&self) -> Option<String> {
        let p = self.op.name();
        let names = ["acc", "identity", "lift", "combine", "finish"];
        let mut text: String = names
            .iter()
            .map(|n| format!("#define {n} {p}_{n}\n"))
            .collect();
        text += &self.accumulator()?;
        let input = self.input;
        let load = input.load("input[p]");
        let store = self.output().store("finish(a, count)");
        let store_tree = self.output().store("finish(partial[0], count)");
        let (serial, tree) = (
            self.kernel_name(Stage::Serial),
            self.kernel_name(Stage::Tree),
        );
        let (split, gather) = (
            self.kernel_name(Stage::Split),
            self.kernel_name(Stage::Gather),
        );
        text += &format!(
            r#"
KERNEL void {serial}(const i64 outputs, const i64 count, GLOBAL const i64* geometry,
                          GLOBAL const {s}* input, const i64 offset,
                          GLOBAL {os}* out, const i64 out_offset) {{
    const i64 kept_rank = geometry[0];
    const i64 reduced_rank = geometry[1];
    GLOBAL const i64* kept = geometry + 2;
    GLOBAL const i64* reduced = kept + 2 * kept_rank;
    for (i64 o = GLOBAL_ID; o < outputs; o += GLOBAL_SIZE) {{
        const i64 base = offset + position(o, kept, kept + kept_rank, kept_rank);
        acc a = identity();
        for (i64 j = 0; j < count; j++) {{
            const i64 p = base + position(j, reduced, reduced + reduced_rank, reduced_rank);
            a = combine(a, lift({load}, j));
        }}
        out[out_offset + o] = {store};
    }}
}}

{tree_kernel}
{split_kernel}
KERNEL void {gather}(const i64 outputs, const i64 count, GLOBAL const acc* partials,
                          const i64 parts, GLOBAL {os}* out, const i64 out_offset) {{
    LOCAL acc partial[WG];
    const i64 lane = LOCAL_ID;
    for (i64 o = GROUP_ID(0); o < outputs; o += NUM_GROUPS(0)) {{
        acc a = identity();
        for (i64 q = lane; q < parts; q += WG) {{
            a = combine(a, partials[o * parts + q]);
        }}
        partial[lane] = a;
        BARRIER();
        for (i64 step = WG / 2; step > 0; step >>= 1) {{
            if (lane < step) {{
                partial[lane] = combine(partial[lane], partial[lane + step]);
            }}
            BARRIER();
        }}
        if (lane == 0) {{
            out[out_offset + o] = {store_tree};
        }}
        BARRIER();
    }}
}}
"#,
            s = input.storage(),
            os = self.output().storage(),
            tree_kernel = group_kernel(
                &tree,
                &format!(
                    "GLOBAL {}* out, const i64 out_offset",
                    self.output().storage()
                ),
                "outputs",
                "        const i64 o = g, start = 0, end = count;\n",
                &format!("out[out_offset + o] = {store_tree};"),
                input.storage(),
                &load,
            ),
            split_kernel = group_kernel(
                &split,
                "GLOBAL acc* partials, const i64 parts",
                "outputs * parts",
                "        const i64 chunk = (count + parts - 1) / parts;\n        \
                 const i64 o = g / parts, start = (g % parts) * chunk;\n        \
                 const i64 end = start + chunk < count ? start + chunk : count;\n",
                "partials[g] = partial[0];",
                input.storage(),
                &load,
            ),
        );
        text.extend(names.iter().map(|n| format!("#undef {n}\n")));
        Some(text)
    }

    /// The geometry words for kept and reduced dims (each coalesced first: merging keeps
    /// the row-major order of outputs and of reduced elements, so arg-reductions' indices
    /// are unchanged).
    pub fn geometry(
        kept: &[usize],
        kept_strides: &[isize],
        reduced: &[usize],
        reduced_strides: &[isize],
    ) -> Vec<i64> {
        let kept = Coalesced::new(kept, &[kept_strides]);
        let reduced = Coalesced::new(reduced, &[reduced_strides]);
        let mut words = vec![kept.rank() as i64, reduced.rank() as i64];
        for plan in [&kept, &reduced] {
            words.extend(plan.dims().iter().map(|&d| d as i64));
            words.extend(plan.strides(0).iter().map(|&s| s as i64));
        }
        words
    }
}

/// A kernel in which work-group `g` (of `groups`, looping while there are more) folds the
/// reduced elements `start..end` of output `o` (which `range` defines from `g`), one
/// strided share per work-item, combines the shares in a tree through local memory, and
/// has work-item 0 run `write` with the result in `partial[0]`. The tree and split stages
/// are this kernel with different ranges and results. Arguments: outputs, count,
/// geometry, input and its offset, then `params`.
fn group_kernel(
    name: &str,
    params: &str,
    groups: &str,
    range: &str,
    write: &str,
    storage: &str,
    load: &str,
) -> String {
    format!(
        r#"KERNEL void {name}(const i64 outputs, const i64 count, GLOBAL const i64* geometry,
                   GLOBAL const {storage}* input, const i64 offset, {params}) {{
    LOCAL acc partial[WG];
    const i64 kept_rank = geometry[0];
    const i64 reduced_rank = geometry[1];
    GLOBAL const i64* kept = geometry + 2;
    GLOBAL const i64* reduced = kept + 2 * kept_rank;
    const i64 lane = LOCAL_ID;
    for (i64 g = GROUP_ID(0); g < {groups}; g += NUM_GROUPS(0)) {{
{range}        const i64 base = offset + position(o, kept, kept + kept_rank, kept_rank);
        acc a = identity();
        for (i64 j = start + lane; j < end; j += WG) {{
            const i64 p = base + (reduced_rank == 1
                ? j * reduced[1]
                : position(j, reduced, reduced + reduced_rank, reduced_rank));
            a = combine(a, lift({load}, j));
        }}
        partial[lane] = a;
        BARRIER();
        for (i64 step = WG / 2; step > 0; step >>= 1) {{
            if (lane < step) {{
                partial[lane] = combine(partial[lane], partial[lane + step]);
            }}
            BARRIER();
        }}
        if (lane == 0) {{
            {write}
        }}
        BARRIER();
    }}
}}
"#
    )
}

/// How many work-groups (blocks) each output of a reduction is split across: enough that about
/// `groups` work-groups run when there are few outputs, each folding at least
/// [`SPLIT_MIN`] elements; 1 (no split) when the outputs alone fill the device. `groups` is
/// the device's own figure ([`split_groups`]).
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

/// One program holding the reductions `kernels` (see [`ReduceKernel::kernel_name`]),
/// with the helpers they need; `None` if one is not defined for its element type.
pub fn program(dialect: Dialect, kernels: &[ReduceKernel]) -> Option<String> {
    let mut text = String::new();
    let mut fp64 = false;
    let mut elems = vec![];
    for k in kernels {
        let library = k.library(dialect);
        fp64 |= library.needs_fp64();
        elems.extend(k.library_elems());
    }
    text += &Library::new(dialect, &elems, fp64).render();
    text += &format!(
        r#"
#define WG {WORKGROUP}

// The position of the i-th element (row-major) of dims with strides.
FN i64 position(i64 i, GLOBAL const i64* dims, GLOBAL const i64* strides, i64 rank) {{
    i64 p = 0;
    for (i64 d = rank - 1; d >= 0; d--) {{
        p += (i % dims[d]) * strides[d];
        i /= dims[d];
    }}
    return p;
}}
"#
    );
    for k in kernels {
        text += &k.body()?;
    }
    Some(text)
}

/// The accumulator of an arg-reduction over values of type `v`: the first extreme, a NaN
/// counting as the extreme (the first NaN wins); ties go to the smaller index.
fn arg(op: ReduceOp, v: &str, float: bool) -> String {
    let better = if op == ReduceOp::ArgMax { ">" } else { "<" };
    let nan = if float {
        "    const bool an = a.v != a.v, bn = b.v != b.v;\n    \
         if (an || bn) {\n        return (an && (!bn || a.i < b.i)) ? a : b;\n    }\n"
    } else {
        ""
    };
    format!(
        "typedef struct {{ {v} v; i64 i; }} acc;\n\
         FN acc identity(void) {{ acc a; a.v = 0; a.i = -1; return a; }}\n\
         FN acc lift({v} v, i64 j) {{ acc a; a.v = v; a.i = j; return a; }}\n\
         FN acc combine(acc a, acc b) {{\n    if (a.i < 0) {{\n        return b;\n    }}\n    \
         if (b.i < 0) {{\n        return a;\n    }}\n{nan}    \
         if (b.v {better} a.v || (b.v == a.v && b.i < a.i)) {{\n        return b;\n    }}\n    return a;\n}}\n\
         FN i64 finish(acc a, i64 count) {{ (void)count; return a.i < 0 ? 0 : a.i; }}\n"
    )
}
