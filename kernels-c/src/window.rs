//! Direct window kernels (`Device::conv2d`, `Device::pool2d`) on contiguous NHWC tensors,
//! with the padding handled in the loops (no padded copy, no im2col buffer):
//!
//! - `conv2d`: a full convolution as an implicit GEMM in registers. Rows of the GEMM are
//!   output pixels, columns output channels, the reduction runs over the filter's taps and
//!   input channels; each work-item computes a block of [`PIXELS`] pixels by [`FILTERS`]
//!   output channels, loading each input value once for its [`FILTERS`] products and each
//!   filter value once for its [`PIXELS`] products (neighbouring work-items take
//!   neighbouring channel blocks of the same pixels, so their input reads coincide).
//! - `depthwise2d`: one work-item per output element, its channel's taps.
//! - `max_pool2d`, `avg_pool2d`: one work-item per output element; the maximum propagates
//!   NaN with `+0` above `-0` (`max_nan`), the mean divides by the taps inside the image.
//! - `epilogue`: the per-channel `activation(v * scale + shift)` of a fused convolution,
//!   in place, for outputs another library convolved (cuDNN);
//! - `transpose`: a `[rows, cols]` matrix into `[cols, rows]` (a filter into the order a
//!   library takes).
//!
//! f16 and bf16 compute in f32 and round once, at the store. Every kernel loops over its
//! items (`GLOBAL_ID, GLOBAL_ID + GLOBAL_SIZE, ...`), so any grid covers them.
//!
//! Arguments. Every kernel starts with `i64 items` (work-items' worth of work: pixel
//! blocks times channel blocks for `conv2d`, output elements for the others), then the
//! geometry as [`geometry`] lists it (15 `i64`s), then:
//! - `conv2d`, `depthwise2d`: the input, the filter (`[k_h, k_w, channels, filters]`), the
//!   scale and the shift (per output channel), each a buffer and its `i64` element offset,
//!   then `i64 fused` ([`Epilogue::word`]), then the output and its offset;
//! - the pools: the input and its offset, then the output and its offset;
//! - `epilogue`: `i64 channels`, the scale, the shift, `i64 fused`, then the output and
//!   its offset (read and written);
//! - `transpose`: `i64 items` (`rows * cols`), `i64 rows`, `i64 cols`, the input and its
//!   offset, the output and its offset.

use polytensor_core::plan::window::WindowGeometry;
use polytensor_core::{DataType, Error, Result, TensorView, UnaryOp};

use crate::{body, render, Dialect, Elem, Library};

/// Output pixels of one `conv2d` work-item.
pub const PIXELS: usize = 4;

/// Output channels of one `conv2d` work-item.
pub const FILTERS: usize = 4;

/// The parameter list of the geometry, in the order [`geometry`] gives the values.
const GEOMETRY: &str = "const i64 batch, const i64 in_h, const i64 in_w, const i64 channels, \
const i64 k_h, const i64 k_w, const i64 stride_h, const i64 stride_w, const i64 dilation_h, \
const i64 dilation_w, const i64 before_h, const i64 before_w, const i64 out_h, const i64 out_w, \
const i64 filters";

/// The geometry arguments every window kernel takes after `items`: batch, input height and
/// width, channels, window height and width, strides, dilations, padding before, output
/// height and width, and filters (per channel for a depthwise convolution; 1 for pooling).
pub fn geometry(g: &WindowGeometry) -> [i64; 15] {
    let [h, w] = g.windows;
    [
        g.batch,
        g.input[0],
        g.input[1],
        g.channels,
        h.size,
        w.size,
        h.stride,
        w.stride,
        h.dilation,
        w.dilation,
        g.before[0],
        g.before[1],
        g.output[0],
        g.output[1],
        g.filters,
    ]
    .map(|v| v as i64)
}

/// Which parts of a fused convolution's epilogue are there, as the kernels' `i64 fused`
/// argument: bit 0 a scale, bit 1 a shift, bits 2 and up the activation (1 for
/// `Relu`, 2 for `Relu6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Epilogue {
    /// Multiply by the channel's scale.
    pub scale: bool,
    /// Then add the channel's shift.
    pub shift: bool,
    /// Then `Relu` or `Relu6`.
    pub activation: Option<UnaryOp>,
}

impl Epilogue {
    /// The kernels' `fused` argument; `None` for an activation they do not apply.
    pub fn word(&self) -> Option<i64> {
        let activation = match self.activation {
            None => 0,
            Some(UnaryOp::Relu) => 1,
            Some(UnaryOp::Relu6) => 2,
            Some(_) => return None,
        };
        Some(i64::from(self.scale) | i64::from(self.shift) << 1 | activation << 2)
    }

    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        *self == Epilogue::default()
    }
}

/// An `Err` unless `view` (a window kernel's `what`: input, filter, epilogue part, output)
/// is a contiguous view of `dtype` with `count` elements, as every backend's window kernels
/// take their operands.
pub fn check_operand(
    view: &TensorView<'_>,
    dtype: DataType,
    count: usize,
    what: &str,
) -> Result<()> {
    let layout = view.layout();
    if view.dtype() != dtype || !layout.is_contiguous() || layout.num_elements() != count {
        return Err(Error::invalid(format!(
            "a window kernel's {what} must be a contiguous {dtype} tensor of {count} elements, \
             got {} of shape {}",
            view.dtype(),
            layout.shape()
        )));
    }
    Ok(())
}

/// The work-items of a `conv2d` launch over `pixels` output pixels and `filters` output
/// channels.
pub fn conv_items(pixels: usize, filters: usize) -> usize {
    pixels.div_ceil(PIXELS) * filters.div_ceil(FILTERS)
}

/// Where output pixel `p`'s windows start: its image's first input element, and the
/// window's first row and column (before the padding).
const ORIGIN: &str = "        const i64 image = p / (out_h * out_w);
        const i64 rest = p % (out_h * out_w);
        const i64 base = x_offset + image * in_h * in_w * channels;
        const i64 top = rest / out_w * stride_h - before_h;
        const i64 left = rest % out_w * stride_w - before_w;
";

/// A loop over the taps `(i, j)` of one window that lie inside the image (input row `ih`,
/// column `iw`), running `body` for each.
fn each_tap(body: &str) -> String {
    format!(
        r#"        for (i64 i = 0; i < k_h; i++) {{
            const i64 ih = top + i * dilation_h;
            if (ih < 0 || ih >= in_h) {{
                continue;
            }}
            for (i64 j = 0; j < k_w; j++) {{
                const i64 iw = left + j * dilation_w;
                if (iw >= 0 && iw < in_w) {{
                    {body}
                }}
            }}
        }}
"#
    )
}

/// The window kernels of one element type; the cache key of their program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WindowKernels {
    /// The element type of every operand.
    pub elem: Elem,
}

impl WindowKernels {
    /// The kernel names of the program.
    pub const NAMES: [&'static str; 6] = [
        "conv2d",
        "depthwise2d",
        "max_pool2d",
        "avg_pool2d",
        "epilogue",
        "transpose",
    ];

    /// The kernels for `dtype`, or `None` where there are none (floats only).
    pub fn new(dtype: DataType) -> Option<Self> {
        let elem = Elem::of(dtype)?;
        matches!(elem, Elem::F16 | Elem::BF16 | Elem::F32 | Elem::F64).then_some(Self { elem })
    }

    /// Whether the kernels compute in f64.
    pub fn needs_fp64(&self) -> bool {
        self.elem.needs_fp64()
    }

    /// The program's source in `dialect`.
    pub fn source(&self, dialect: Dialect) -> Option<String> {
        let e = self.elem;
        let (s, v) = (e.storage(), e.value());
        let real = e.real()?.name();
        let load = |stored: &str| e.load(stored);
        let activation = |op| render::c(&body::unary(op, e)?, e);
        let (relu, relu6) = (activation(UnaryOp::Relu)?, activation(UnaryOp::Relu6)?);
        let x_at = load("x[at[q] + c]");
        let f_at = load("f[row + c * filters + o]");
        let dw_x = load("x[base + (ih * in_w + iw) * channels + c]");
        let dw_f = load("f[f_offset + (i * k_w + j) * width + k]");
        let pool_x = load("x[base + (ih * in_w + iw) * channels + c]");
        let scale = load("scale[scale_offset + channel]");
        let shift = load("shift[shift_offset + channel]");
        let store = |value: &str| e.store(value);
        let conv_store =
            store("finish(acc[q][r], o, scale, scale_offset, shift, shift_offset, fused)");
        let dw_store = store("finish(acc, k, scale, scale_offset, shift, shift_offset, fused)");
        let epilogue_store = store(&format!(
            "finish({}, item % channels, scale, scale_offset, shift, shift_offset, fused)",
            load("out[out_offset + item]")
        ));
        let conv_args = format!(
            "const i64 items, {GEOMETRY},
                    GLOBAL const {s}* x, const i64 x_offset, GLOBAL const {s}* f, const i64 f_offset,
                    GLOBAL const {s}* scale, const i64 scale_offset,
                    GLOBAL const {s}* shift, const i64 shift_offset, const i64 fused,
                    GLOBAL {s}* out, const i64 out_offset"
        );
        let pool_args = format!(
            "const i64 items, {GEOMETRY},
                    GLOBAL const {s}* x, const i64 x_offset, GLOBAL {s}* out, const i64 out_offset"
        );
        let lowest = match e.real()? {
            crate::Real::F32 => "F32_FROM_BITS(0xff800000u)",
            crate::Real::F64 => "F64_FROM_BITS((u64)0xfff0000000000000UL)",
        };
        // Pooling: the window of output element `item` folded by `combine` from `init`,
        // then `result` of the fold `acc` and the taps inside the image, `count`.
        let pool = |name: &str, init: &str, combine: &str, result: &str| {
            format!(
                r#"
KERNEL void {name}({pool_args}) {{
    for (i64 item = GLOBAL_ID; item < items; item += GLOBAL_SIZE) {{
        const i64 p = item / channels;
        const i64 c = item % channels;
{ORIGIN}        {v} acc = {init};
        i64 count = 0;
{pool_taps}        out[out_offset + item] = {stored};
    }}
}}
"#,
                stored = store(result),
                pool_taps = each_tap(&format!(
                    "const {v} value = {pool_x};\n                    acc = {combine};\n                    count++;"
                )),
            )
        };
        let pools = pool(
            "max_pool2d",
            lowest,
            &format!("max_nan_{real}(acc, value)"),
            "acc",
        ) + &pool(
            "avg_pool2d",
            &format!("({v})0"),
            "acc + value",
            &format!("acc / ({v})count"),
        );
        let dw_taps = each_tap(&format!("acc = acc + {dw_x} * {dw_f};"));
        let mut text = Library::new(dialect, &[e], false).render();
        text += &format!(
            r#"
// The epilogue of a fused convolution for output channel `channel`.
FN {v} finish({v} x, const i64 channel, GLOBAL const {s}* scale, const i64 scale_offset,
              GLOBAL const {s}* shift, const i64 shift_offset, const i64 fused) {{
    if (fused & 1) {{
        x = x * {scale};
    }}
    if (fused & 2) {{
        x = x + {shift};
    }}
    const i64 activation = fused >> 2;
    if (activation == 1) {{
        x = {relu};
    }} else if (activation == 2) {{
        x = {relu6};
    }}
    return x;
}}

KERNEL void conv2d({conv_args}) {{
    const i64 pixels = batch * out_h * out_w;
    const i64 blocks = (filters + {FILTERS} - 1) / {FILTERS};
    for (i64 item = GLOBAL_ID; item < items; item += GLOBAL_SIZE) {{
        const i64 p0 = item / blocks * {PIXELS};
        const i64 o0 = item % blocks * {FILTERS};
        // Each pixel's image, and its window's first row and column (before padding).
        i64 base[{PIXELS}], top[{PIXELS}], left[{PIXELS}];
        UNROLL
        for (i64 q = 0; q < {PIXELS}; q++) {{
            const i64 p = p0 + q < pixels ? p0 + q : pixels - 1;
            const i64 image = p / (out_h * out_w);
            const i64 rest = p % (out_h * out_w);
            base[q] = x_offset + image * in_h * in_w * channels;
            top[q] = rest / out_w * stride_h - before_h;
            left[q] = rest % out_w * stride_w - before_w;
        }}
        {v} acc[{PIXELS}][{FILTERS}];
        UNROLL
        for (i64 q = 0; q < {PIXELS}; q++) {{
            UNROLL
            for (i64 r = 0; r < {FILTERS}; r++) {{
                acc[q][r] = 0;
            }}
        }}
        for (i64 i = 0; i < k_h; i++) {{
            for (i64 j = 0; j < k_w; j++) {{
                // Each pixel's input at this tap, or -1 in the padding.
                i64 at[{PIXELS}];
                UNROLL
                for (i64 q = 0; q < {PIXELS}; q++) {{
                    const i64 ih = top[q] + i * dilation_h;
                    const i64 iw = left[q] + j * dilation_w;
                    const int inside = ih >= 0 && ih < in_h && iw >= 0 && iw < in_w;
                    at[q] = inside ? base[q] + (ih * in_w + iw) * channels : -1;
                }}
                const i64 row = f_offset + (i * k_w + j) * channels * filters;
                for (i64 c = 0; c < channels; c++) {{
                    {v} w[{FILTERS}];
                    UNROLL
                    for (i64 r = 0; r < {FILTERS}; r++) {{
                        const i64 o = o0 + r < filters ? o0 + r : filters - 1;
                        w[r] = {f_at};
                    }}
                    UNROLL
                    for (i64 q = 0; q < {PIXELS}; q++) {{
                        const {v} value = at[q] >= 0 ? {x_at} : ({v})0;
                        UNROLL
                        for (i64 r = 0; r < {FILTERS}; r++) {{
                            acc[q][r] = acc[q][r] + value * w[r];
                        }}
                    }}
                }}
            }}
        }}
        UNROLL
        for (i64 q = 0; q < {PIXELS}; q++) {{
            UNROLL
            for (i64 r = 0; r < {FILTERS}; r++) {{
                const i64 o = o0 + r;
                if (p0 + q < pixels && o < filters) {{
                    out[out_offset + (p0 + q) * filters + o] = {conv_store};
                }}
            }}
        }}
    }}
}}

KERNEL void depthwise2d({conv_args}) {{
    const i64 width = channels * filters;
    for (i64 item = GLOBAL_ID; item < items; item += GLOBAL_SIZE) {{
        const i64 p = item / width;
        const i64 k = item % width;
        const i64 c = k / filters;
{ORIGIN}        {v} acc = 0;
{dw_taps}        out[out_offset + item] = {dw_store};
    }}
}}

{pools}
KERNEL void epilogue(const i64 items, const i64 channels,
                     GLOBAL const {s}* scale, const i64 scale_offset,
                     GLOBAL const {s}* shift, const i64 shift_offset, const i64 fused,
                     GLOBAL {s}* out, const i64 out_offset) {{
    for (i64 item = GLOBAL_ID; item < items; item += GLOBAL_SIZE) {{
        out[out_offset + item] = {epilogue_store};
    }}
}}

KERNEL void transpose(const i64 items, const i64 rows, const i64 cols,
                      GLOBAL const {s}* in, const i64 in_offset, GLOBAL {s}* out,
                      const i64 out_offset) {{
    for (i64 item = GLOBAL_ID; item < items; item += GLOBAL_SIZE) {{
        out[out_offset + item % cols * rows + item / cols] = in[in_offset + item];
    }}
}}
"#
        );
        Some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epilogue_words_name_their_parts() {
        let none = Epilogue::default();
        assert_eq!(none.word(), Some(0));
        assert!(none.is_empty());
        let all = Epilogue {
            scale: true,
            shift: true,
            activation: Some(UnaryOp::Relu6),
        };
        assert_eq!(all.word(), Some(0b1011));
        let relu_only = Epilogue {
            activation: Some(UnaryOp::Relu),
            ..Epilogue::default()
        };
        assert_eq!(relu_only.word(), Some(0b100));
        let tanh = Epilogue {
            activation: Some(UnaryOp::Tanh),
            ..Epilogue::default()
        };
        assert_eq!(tanh.word(), None);
    }

    #[test]
    fn floats_have_window_kernels_and_integers_do_not() {
        for dtype in [
            DataType::Float,
            DataType::Double,
            DataType::Half,
            DataType::BFloat16,
        ] {
            let kernels = WindowKernels::new(dtype).unwrap();
            for dialect in [Dialect::OpenCl, Dialect::Cuda] {
                let text = kernels.source(dialect).unwrap();
                for name in WindowKernels::NAMES {
                    assert!(text.contains(&format!("KERNEL void {name}(")), "{name}");
                }
            }
        }
        assert!(WindowKernels::new(DataType::Int32).is_none());
        assert!(WindowKernels::new(DataType::Complex64).is_none());
    }

    #[test]
    fn conv_items_cover_every_block() {
        assert_eq!(conv_items(0, 5), 0);
        assert_eq!(conv_items(9, 5), 3 * 2);
        assert_eq!(conv_items(8, 4), 2);
    }
}
