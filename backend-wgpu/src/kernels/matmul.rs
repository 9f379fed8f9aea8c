//! Tiled, batched matmul: `out[b, m, n] = sum_k a[b, m, k] * b[b, k, n]` over strided
//! operands (transposes, offsets and broadcast batches are strides), one template per
//! element type.
//!
//! A workgroup of 16 x 16 invocations computes one 64 x 64 tile of one batch's output,
//! four rows by four columns per invocation, stepping through `k` sixteen at a time with
//! both operand tiles staged in workgroup memory. Workgroups are `(n tiles, m tiles,
//! batches)`; the geometry buffer holds the sizes, the operand strides, the batch dims and
//! the first batch of the dispatch (a batch count above the per-dimension workgroup limit
//! takes several dispatches).

use polytensor_core::plan::MatmulPlan;

use polytensor_kernels_c::wgsl::Storage;

/// Output rows and columns of one workgroup's tile.
pub(crate) const TILE: usize = 64;

/// Geometry words before the batch dims: m, n, k, batch rank, first batch, a offset,
/// b offset, a's m and k strides, b's k and n strides.
const HEADER: usize = 11;

/// The geometry buffer's words of one dispatch: the header, the (coalesced) batch dims,
/// then `a`'s and `b`'s strides along them (as `i32` bits).
pub(crate) struct Geometry {
    /// The sizes and strides, from the shared plan.
    pub(crate) plan: MatmulPlan,
    /// Element offsets of `a` and `b`.
    pub(crate) offsets: [usize; 2],
}

impl Geometry {
    /// The words of the dispatch that starts at batch `first`.
    pub(crate) fn words(&self, first: usize) -> Vec<u32> {
        let plan = &self.plan;
        let bits = |s: isize| s as i32 as u32;
        let mut words = vec![
            plan.m as u32,
            plan.n as u32,
            plan.k as u32,
            plan.batch.rank() as u32,
            first as u32,
            self.offsets[0] as u32,
            self.offsets[1] as u32,
        ];
        words.extend(
            plan.a_strides
                .iter()
                .chain(&plan.b_strides)
                .map(|&s| bits(s)),
        );
        debug_assert_eq!(words.len(), HEADER);
        words.extend(plan.batch.dims().iter().map(|&d| d as u32));
        for operand in 0..2 {
            words.extend(plan.batch.strides(operand).iter().map(|&s| bits(s)));
        }
        words
    }
}

/// The WGSL source of the matmul of operands stored as `input`, computed and written as
/// words of its value type (f16 and bf16 in f32).
pub(crate) fn source(input: Storage) -> String {
    let t = input.value_type();
    let zero = format!("{t}(0)");
    let array = input.array_type();
    let load_a = input.load("a", "pa + i32(ar) * am + i32(ac) * ak");
    let load_b = input.load("b", "pb + i32(br) * bk + i32(bc) * bn");
    // Complex operands multiply as complex numbers.
    let (product, helpers) = match t.part() {
        Some(part) => (
            "cmul(a, b)",
            polytensor_kernels_c::wgsl::complex_helpers(part),
        ),
        None => ("a * b", String::new()),
    };
    format!(
        r#"{helpers}
fn product(a: {t}, b: {t}) -> {t} {{
    return {product};
}}

@group(0) @binding(0) var<storage, read> geometry: array<u32>;
@group(0) @binding(1) var<storage, read> a: array<{array}>;
@group(0) @binding(2) var<storage, read> b: array<{array}>;
@group(0) @binding(3) var<storage, read_write> out: array<{t}>;

var<workgroup> tile_a: array<{t}, 1024>;
var<workgroup> tile_b: array<{t}, 1024>;

fn stride(word: u32) -> i32 {{
    return bitcast<i32>(geometry[word]);
}}

@compute @workgroup_size(16, 16, 1)
fn main(@builtin(local_invocation_id) local: vec3<u32>, @builtin(workgroup_id) group: vec3<u32>) {{
    let m = geometry[0];
    let n = geometry[1];
    let k = geometry[2];
    let rank = geometry[3];
    let batch = group.z + geometry[4];
    // The batch's matrices: row-major batch index to offsets along the batch dims.
    var pa = i32(geometry[5]);
    var pb = i32(geometry[6]);
    var rest = batch;
    for (var d = i32(rank) - 1; d >= 0; d--) {{
        let dim = geometry[{HEADER}u + u32(d)];
        let index = i32(rest % dim);
        rest = rest / dim;
        pa += index * stride({HEADER}u + rank + u32(d));
        pb += index * stride({HEADER}u + 2u * rank + u32(d));
    }}
    let am = stride(7u);
    let ak = stride(8u);
    let bk = stride(9u);
    let bn = stride(10u);
    let row0 = group.y * 64u;
    let col0 = group.x * 64u;
    let flat = local.y * 16u + local.x;
    var acc: array<{t}, 16>;
    for (var i = 0u; i < 16u; i++) {{
        acc[i] = {zero};
    }}
    for (var k0 = 0u; k0 < k; k0 += 16u) {{
        for (var l = 0u; l < 4u; l++) {{
            let e = flat + l * 256u;
            // a's tile is 64 rows by 16, b's 16 rows by 64; outside the matrices, zeros.
            let ar = row0 + e / 16u;
            let ac = k0 + e % 16u;
            var av = {zero};
            if (ar < m && ac < k) {{
                av = {load_a};
            }}
            tile_a[e] = av;
            let br = k0 + e / 64u;
            let bc = col0 + e % 64u;
            var bv = {zero};
            if (br < k && bc < n) {{
                bv = {load_b};
            }}
            tile_b[e] = bv;
        }}
        workgroupBarrier();
        for (var kk = 0u; kk < 16u; kk++) {{
            var column: array<{t}, 4>;
            for (var i = 0u; i < 4u; i++) {{
                column[i] = tile_a[(local.y + 16u * i) * 16u + kk];
            }}
            for (var j = 0u; j < 4u; j++) {{
                let bv = tile_b[kk * 64u + local.x + 16u * j];
                for (var i = 0u; i < 4u; i++) {{
                    acc[i * 4u + j] += product(column[i], bv);
                }}
            }}
        }}
        workgroupBarrier();
    }}
    let base = batch * m * n;
    for (var i = 0u; i < 4u; i++) {{
        let row = row0 + local.y + 16u * i;
        for (var j = 0u; j < 4u; j++) {{
            let col = col0 + local.x + 16u * j;
            if (row < m && col < n) {{
                out[base + row * n + col] = acc[i * 4u + j];
            }}
        }}
    }}
}}
"#
    )
}
