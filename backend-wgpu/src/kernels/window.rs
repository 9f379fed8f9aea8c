//! Direct window kernels (`Device::conv2d`, `Device::pool2d`) on contiguous NHWC tensors,
//! the WGSL counterparts of the C kit's (`polytensor_kernels_c::window`), with the same
//! work division: a full convolution is an implicit GEMM in registers, each invocation
//! computing [`PIXELS`] output pixels by [`FILTERS`] output channels over every tap and
//! input channel; a depthwise convolution and pooling take one output element per
//! invocation. The padding is handled in the loops; a fused convolution's epilogue
//! (`activation(v * scale + shift)` per channel, from the kit's bodies) is applied before
//! the store. Outputs are written as words of the value type (f16 and bf16 as f32, which
//! the caller narrows, rounding once).
//!
//! Bindings: the geometry words ([`Geometry::words`]), the input, then for a convolution
//! the filter, the scale and the shift, then the output.

use polytensor_core::plan::window::WindowGeometry;
use polytensor_core::UnaryOp;
use polytensor_kernels_c::{body, render, Elem};

use polytensor_kernels_c::wgsl::float_helpers;
use polytensor_kernels_c::wgsl::Storage;

/// Output pixels of one convolution invocation.
pub(crate) const PIXELS: usize = 4;

/// Output channels of one convolution invocation.
pub(crate) const FILTERS: usize = 4;

/// Invocations per workgroup.
pub(crate) const WORKGROUP: u32 = 64;

/// Which window kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum WindowOp {
    /// A full convolution.
    Conv,
    /// A depthwise convolution.
    Depthwise,
    /// Max pooling.
    MaxPool,
    /// Average pooling (over the taps inside the image).
    AvgPool,
}

impl WindowOp {
    /// Whether it is a convolution (with a filter and an epilogue).
    pub(crate) fn convolves(self) -> bool {
        matches!(self, WindowOp::Conv | WindowOp::Depthwise)
    }
}

/// The geometry words of one dispatch.
pub(crate) struct Geometry {
    /// Invocations' worth of work: pixel blocks times channel blocks for a full
    /// convolution, output elements otherwise.
    pub(crate) items: u32,
    /// The window op's sizes.
    pub(crate) window: WindowGeometry,
    /// Element offsets of the input, filter, scale and shift.
    pub(crate) offsets: [u32; 4],
    /// The epilogue's parts (`polytensor_kernels_c::window::Epilogue::word`).
    pub(crate) fused: u32,
}

impl Geometry {
    /// The words: items, the 15 sizes of `polytensor_kernels_c::window::geometry`, the
    /// four offsets and the epilogue word (callers checked that every size fits an `i32`).
    pub(crate) fn words(&self) -> Vec<u32> {
        let mut words = vec![self.items];
        words.extend(polytensor_kernels_c::window::geometry(&self.window).map(|v| v as u32));
        words.extend(self.offsets);
        words.push(self.fused);
        words
    }
}

/// Where output pixel `p`'s windows start: its image's first input element, and the
/// window's first row and column (before the padding).
const ORIGIN: &str = "    let rest = p % (out_h * out_w);
    let base = x_offset + p / (out_h * out_w) * in_h * in_w * channels;
    let top = rest / out_w * stride_h - before_h;
    let left = rest % out_w * stride_w - before_w;
";

/// A loop over the taps `(i, j)` of one window that lie inside the image (input row `ih`,
/// column `iw`), running `body` for each.
fn each_tap(body: &str) -> String {
    format!(
        r#"    for (var i = 0; i < k_h; i++) {{
        let ih = top + i * dilation_h;
        if (ih < 0 || ih >= in_h) {{
            continue;
        }}
        for (var j = 0; j < k_w; j++) {{
            let iw = left + j * dilation_w;
            if (iw >= 0 && iw < in_w) {{
                {body}
            }}
        }}
    }}
"#
    )
}

/// The WGSL of `op` on elements stored as `storage` of element `elem` (a float).
pub(crate) fn source(op: WindowOp, storage: Storage, elem: Elem) -> Option<String> {
    let t = storage.value_type();
    let real = t.real()?;
    let array = storage.array_type();
    let activation = |a| render::wgsl(&body::unary(a, elem)?, elem);
    let (relu, relu6) = (activation(UnaryOp::Relu)?, activation(UnaryOp::Relu6)?);
    let load = |buffer: &str, p: &str| storage.load(buffer, p);
    let image_at = |p: &str| load("image", p);
    let mut text = float_helpers(real);
    text += &format!(
        r#"
@group(0) @binding(0) var<storage, read> g: array<u32>;
@group(0) @binding(1) var<storage, read> image: array<{array}>;
"#
    );
    if op.convolves() {
        text += &format!(
            r#"@group(0) @binding(2) var<storage, read> weights: array<{array}>;
@group(0) @binding(3) var<storage, read> scale: array<{array}>;
@group(0) @binding(4) var<storage, read> shift: array<{array}>;
@group(0) @binding(5) var<storage, read_write> out: array<{t}>;

// The epilogue of a fused convolution for output channel `channel`.
fn finish(value: {t}, channel: i32) -> {t} {{
    var x = value;
    let fused = g[20];
    if ((fused & 1u) != 0u) {{
        x = x * {scale};
    }}
    if ((fused & 2u) != 0u) {{
        x = x + {shift};
    }}
    let activation = fused >> 2u;
    if (activation == 1u) {{
        x = {relu};
    }} else if (activation == 2u) {{
        x = {relu6};
    }}
    return x;
}}
"#,
            scale = load("scale", "i32(g[18]) + channel"),
            shift = load("shift", "i32(g[19]) + channel"),
        );
    } else {
        text += &format!("@group(0) @binding(2) var<storage, read_write> out: array<{t}>;\n");
    }
    let body = match op {
        WindowOp::Conv => format!(
            r#"    let pixels = batch * out_h * out_w;
    let blocks = (filters + {FILTERS} - 1) / {FILTERS};
    let p0 = i32(item) / blocks * {PIXELS};
    let o0 = i32(item) % blocks * {FILTERS};
    var base: array<i32, {PIXELS}>;
    var top: array<i32, {PIXELS}>;
    var left: array<i32, {PIXELS}>;
    for (var q = 0; q < {PIXELS}; q++) {{
        let p = min(p0 + q, pixels - 1);
        let rest = p % (out_h * out_w);
        base[q] = x_offset + p / (out_h * out_w) * in_h * in_w * channels;
        top[q] = rest / out_w * stride_h - before_h;
        left[q] = rest % out_w * stride_w - before_w;
    }}
    var acc: array<{t}, {block}>;
    for (var a = 0; a < {block}; a++) {{
        acc[a] = {t}(0);
    }}
    for (var i = 0; i < k_h; i++) {{
        for (var j = 0; j < k_w; j++) {{
            var at: array<i32, {PIXELS}>;
            for (var q = 0; q < {PIXELS}; q++) {{
                let ih = top[q] + i * dilation_h;
                let iw = left[q] + j * dilation_w;
                let inside = ih >= 0 && ih < in_h && iw >= 0 && iw < in_w;
                at[q] = select(-1, base[q] + (ih * in_w + iw) * channels, inside);
            }}
            let row = f_offset + (i * k_w + j) * channels * filters;
            for (var c = 0; c < channels; c++) {{
                var w: array<{t}, {FILTERS}>;
                for (var r = 0; r < {FILTERS}; r++) {{
                    let o = min(o0 + r, filters - 1);
                    w[r] = {filter_load};
                }}
                for (var q = 0; q < {PIXELS}; q++) {{
                    var value = {t}(0);
                    if (at[q] >= 0) {{
                        value = {x_load};
                    }}
                    for (var r = 0; r < {FILTERS}; r++) {{
                        acc[q * {FILTERS} + r] += value * w[r];
                    }}
                }}
            }}
        }}
    }}
    for (var q = 0; q < {PIXELS}; q++) {{
        for (var r = 0; r < {FILTERS}; r++) {{
            let o = o0 + r;
            if (p0 + q < pixels && o < filters) {{
                out[(p0 + q) * filters + o] = finish(acc[q * {FILTERS} + r], o);
            }}
        }}
    }}
"#,
            block = PIXELS * FILTERS,
            filter_load = load("weights", "row + c * filters + o"),
            x_load = image_at("at[q] + c"),
        ),
        WindowOp::Depthwise => format!(
            r#"    let width = channels * filters;
    let k = i32(item) % width;
    let c = k / filters;
    let p = i32(item) / width;
{ORIGIN}    var acc = {t}(0);
{taps}    out[item] = finish(acc, k);
"#,
            taps = each_tap(&format!(
                "acc += {} * {};",
                image_at("base + (ih * in_w + iw) * channels + c"),
                load("weights", "f_offset + (i * k_w + j) * width + k")
            )),
        ),
        WindowOp::MaxPool | WindowOp::AvgPool => {
            let max = op == WindowOp::MaxPool;
            let (init, combine, result) = if max {
                (
                    format!("-{t}(bitcast<f32>(0x7f800000u))"),
                    "float_max(acc, value)",
                    "acc",
                )
            } else {
                (format!("{t}(0)"), "acc + value", "acc / {t}(count)")
            };
            format!(
                r#"    let c = i32(item) % channels;
    let p = i32(item) / channels;
{ORIGIN}    var acc = {init};
    var count = 0;
{taps}    out[item] = {result};
"#,
                taps = each_tap(&format!(
                    "let value = {};\n                acc = {combine};\n                count++;",
                    image_at("base + (ih * in_w + iw) * channels + c")
                )),
                result = result.replace("{t}", &t.to_string()),
            )
        }
    };
    text += &format!(
        r#"
@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {{
    let item = id.x + id.y * groups.x * {WORKGROUP}u;
    if (item >= g[0]) {{
        return;
    }}
    let batch = i32(g[1]);
    let in_h = i32(g[2]);
    let in_w = i32(g[3]);
    let channels = i32(g[4]);
    let k_h = i32(g[5]);
    let k_w = i32(g[6]);
    let stride_h = i32(g[7]);
    let stride_w = i32(g[8]);
    let dilation_h = i32(g[9]);
    let dilation_w = i32(g[10]);
    let before_h = i32(g[11]);
    let before_w = i32(g[12]);
    let out_h = i32(g[13]);
    let out_w = i32(g[14]);
    let filters = i32(g[15]);
    let x_offset = i32(g[16]);
    let f_offset = i32(g[17]);
{body}}}
"#
    );
    Some(text)
}
