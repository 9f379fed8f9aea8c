//! Segment reductions (`Device::segment_reduce`), the WGSL counterparts of the C kit's
//! (`polytensor_kernels_c::segment`), with the same work division and folds: output element
//! `(s, k)` folds column `k` of segment `s`'s data rows in order (a gather takes the last,
//! a maximum folds as TensorFlow's `acc > x ? acc : x`, sums multiply by the weights),
//! so results are deterministic. Offsets are clamped to the entries and rows outside the
//! data skipped, whatever the device memory holds.
//!
//! The output is written through [`Storage::store_body`], so a packed output (8- and 16-bit
//! elements) is written a whole word per invocation and needs no narrowing pass; a gather
//! moves any fixed-size dtype as raw words ([`Storage::raw`]).
//!
//! Bindings: the geometry words ([`geometry`]), the data, the rows (`i32`), the offsets
//! (`i32`), the weights, the fill value, then the output.

use polytensor_core::plan::segment::{SegmentGeometry, SegmentOp};

use super::elementwise::float_helpers;
use super::storage::{Packing, Storage, CONVERSIONS};
use super::ty::Scalar;

/// Invocations per workgroup.
pub(crate) const WORKGROUP: u32 = 64;

/// The geometry words: output elements, row width, data rows, entries, then the element
/// offsets of the data, rows, offsets, weights, whether there are weights, and the fill
/// value's offset (callers checked that each fits an `i32`).
pub(crate) fn geometry(g: &SegmentGeometry, offsets: [u32; 5], weighted: bool) -> Vec<u32> {
    let [data, rows, bounds, weights, fill] = offsets;
    vec![
        (g.segments * g.width) as u32,
        g.width as u32,
        g.data_rows as u32,
        g.entries as u32,
        data,
        rows,
        bounds,
        weights,
        u32::from(weighted),
        fill,
    ]
}

/// The WGSL of `op` on elements stored as `storage` (for a gather, the dtype's raw
/// storage).
pub(crate) fn source(op: SegmentOp, storage: Storage) -> String {
    let t = storage.value_type();
    let array = storage.array_type();
    let load = |buffer: &str, p: &str| storage.load(buffer, p);
    let x = load("data", "i32(g[4]) + r * width + k");
    let fill = load("fill", "i32(g[9])");
    let fold = match op {
        SegmentOp::Gather => format!(
            r#"    var value = {fill};
    if (end > begin) {{
        let r = rows[g[5] + u32(end - 1)];
        if (r >= 0 && r < data_rows) {{
            value = {x};
        }}
    }}
    return value;
"#
        ),
        SegmentOp::Max => format!(
            r#"    var acc = {fill};
    var first = true;
    for (var j = begin; j < end; j++) {{
        let r = rows[g[5] + u32(j)];
        if (r < 0 || r >= data_rows) {{
            continue;
        }}
        let x = {x};
        if (first || !(acc > x)) {{
            acc = x;
        }}
        first = false;
    }}
    return acc;
"#
        ),
        SegmentOp::Sum | SegmentOp::Mean | SegmentOp::SqrtN => {
            let result = match op {
                SegmentOp::Mean => "acc / total",
                SegmentOp::SqrtN => "acc / sqrt(squares)",
                _ => "acc",
            };
            format!(
                r#"    var acc = {t}(0);
    var total = {t}(0);
    var squares = {t}(0);
    for (var j = begin; j < end; j++) {{
        let r = rows[g[5] + u32(j)];
        if (r < 0 || r >= data_rows) {{
            continue;
        }}
        let x = {x};
        var w = {t}(1);
        if (g[8] != 0u) {{
            w = {w};
        }}
        acc = acc + w * x;
        total = total + w;
        squares = squares + w * w;
    }}
    if (end <= begin) {{
        return {t}(0);
    }}
    return {result};
"#,
                w = load("weights", "i32(g[7]) + j"),
            )
        }
    };
    let mut text = String::new();
    if matches!(storage, Storage::Packed(Packing::F16 | Packing::BF16)) {
        text += &float_helpers(Scalar::F32);
        text += CONVERSIONS;
    }
    text += &format!(
        r#"
@group(0) @binding(0) var<storage, read> g: array<u32>;
@group(0) @binding(1) var<storage, read> data: array<{array}>;
@group(0) @binding(2) var<storage, read> rows: array<i32>;
@group(0) @binding(3) var<storage, read> offsets: array<i32>;
@group(0) @binding(4) var<storage, read> weights: array<{array}>;
@group(0) @binding(5) var<storage, read> fill: array<{array}>;
@group(0) @binding(6) var<storage, read_write> out: array<{array}>;

fn element(item: u32) -> {t} {{
    let width = i32(g[1]);
    let data_rows = i32(g[2]);
    let entries = i32(g[3]);
    let s = i32(item) / width;
    let k = i32(item) % width;
    let begin = clamp(offsets[g[6] + u32(s)], 0, entries);
    let end = clamp(offsets[g[6] + u32(s) + 1u], begin, entries);
{fold}}}

@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {{
    // Every binding is part of the layout, whether or not this op reads it.
    _ = arrayLength(&weights);
    _ = arrayLength(&fill);
    let i = id.x + id.y * groups.x * {WORKGROUP}u;
{store}}}
"#,
        store = storage.store_body("g[0]", "0u"),
    );
    text
}

/// The WGSL of `Device::scatter_rows`' first pass: every element of the output the fill
/// value (elements stored as `storage`, the dtype's raw storage), a whole word per
/// invocation. Bindings: the geometry (`[elements, fill offset]`), the fill, the output.
pub(crate) fn fill_source(storage: Storage) -> String {
    let (t, array) = (storage.value_type(), storage.array_type());
    format!(
        r#"
@group(0) @binding(0) var<storage, read> g: array<u32>;
@group(0) @binding(1) var<storage, read> fill: array<{array}>;
@group(0) @binding(2) var<storage, read_write> out: array<{array}>;

fn element(item: u32) -> {t} {{
    return {value};
}}

@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {{
    let i = id.x + id.y * groups.x * {WORKGROUP}u;
{store}}}
"#,
        value = storage.load("fill", "i32(g[1])"),
        store = storage.store_body("g[0]", "0u"),
    )
}

/// The WGSL of `Device::scatter_rows`' second pass: data element `item` (row `j`, column
/// `k`) moved, as raw bits, to element `rows[j] * width + k` of the output; a row outside
/// the output is skipped. Packed elements (8 and 16 bits) are written with an atomic and
/// and or on their word, so distinct elements sharing a word never race. Bindings: the
/// geometry (`[data elements, width, output rows, data offset, rows offset]`), the data,
/// the rows (`i32`), the output.
pub(crate) fn scatter_source(storage: Storage) -> String {
    let array = storage.array_type();
    let (out_type, write) = match storage {
        Storage::Packed(_) => {
            let lanes = storage.lanes() as u32;
            let bits = 32 / lanes;
            let mask = if bits == 32 {
                u32::MAX
            } else {
                (1u32 << bits) - 1
            };
            (
                "atomic<u32>".to_string(),
                format!(
                    r#"    let q = g[3] + item;
    let raw = (data[q / {lanes}u] >> ((q % {lanes}u) * {bits}u)) & {mask}u;
    let shift = (p % {lanes}u) * {bits}u;
    atomicAnd(&out[p / {lanes}u], ~({mask}u << shift));
    atomicOr(&out[p / {lanes}u], raw << shift);
"#
                ),
            )
        }
        Storage::Wide(n) => (
            array.to_string(),
            (0..n)
                .map(|w| format!("    out[{n}u * p + {w}u] = data[{n}u * (g[3] + item) + {w}u];\n"))
                .collect(),
        ),
        Storage::Word(_) => (
            array.to_string(),
            "    out[p] = data[g[3] + item];\n".to_string(),
        ),
    };
    format!(
        r#"
@group(0) @binding(0) var<storage, read> g: array<u32>;
@group(0) @binding(1) var<storage, read> data: array<{array}>;
@group(0) @binding(2) var<storage, read> rows: array<i32>;
@group(0) @binding(3) var<storage, read_write> out: array<{out_type}>;

@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {{
    let item = id.x + id.y * groups.x * {WORKGROUP}u;
    if (item >= g[0]) {{
        return;
    }}
    let width = g[1];
    let r = rows[g[4] + item / width];
    if (r < 0 || u32(r) >= g[2]) {{
        return;
    }}
    let p = u32(r) * width + item % width;
{write}}}
"#
    )
}
