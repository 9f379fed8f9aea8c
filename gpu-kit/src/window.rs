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
//! - `conv2d_backprop_input`: the transposed convolution (TensorFlow's
//!   `Conv2DBackpropInput`), one work-item per element of the image it makes (the forward
//!   convolution's input): the taps whose windows cover that pixel, each output gradient
//!   pixel there times the filter, summed over the filters. Gathered, so no two work-items
//!   write one element and no zeros are inserted between the gradient's pixels.
//! - `max_pool2d`, `avg_pool2d`: one work-item per output element; the maximum propagates
//!   NaN with `+0` above `-0` (`max_nan`), the mean divides by the taps inside the image.
//! - `epilogue`: the per-channel `activation(v * scale + shift)` of a fused convolution,
//!   in place, for outputs another library convolved (cuDNN);
//! - `transpose`: a `[rows, cols]` matrix into `[cols, rows]` (a filter into the order a
//!   library takes).
//!
//! f16 and bf16 compute in f32 and round once, at the store. Each kernel is one [`Kernel`]
//! of the IR ([`WindowKernel::kernel`]), rendered for OpenCL C and CUDA C
//! ([`WindowKernels::source`]) and for WGSL by the wgpu backend.
//!
//! Parameters. Every kernel starts with `items` (work-items' worth of work: pixel blocks
//! times channel blocks for `conv2d`, output elements for the others), then the geometry
//! as [`geometry`] lists it (15 indices), then:
//! - `conv2d`, `depthwise2d`, `conv2d_backprop_input`: the input (for the last, the output
//!   gradient, `[batch, out_h, out_w, filters]`), the filter (`[k_h, k_w, channels,
//!   filters]`), the scale and the shift (per output channel), then `fused`
//!   ([`Epilogue::word`]), then the output ([`conv_args`]; for the last, the image,
//!   `[batch, in_h, in_w, channels]`);
//! - the pools: the input, then the output ([`pool_args`]);
//! - `epilogue`: `channels`, the scale, the shift, `fused`, then the output (read and
//!   written);
//! - `transpose`: `items` (`rows * cols`), `rows`, `cols`, the input, the output.

use polytensor_core::plan::window::WindowGeometry;
use polytensor_core::{DataType, Error, Result, TensorView, UnaryOp};

use crate::body::{self, Cmp, Expr, Func};
use crate::ir::{elem, elem_of, int, item, when, Buf, Declare, Ex, Kernel, Local, Stmt, Ty};
use crate::launch::Arg;
use crate::{render, Dialect, Elem, Library};

/// Output pixels of one `conv2d` work-item.
pub const PIXELS: usize = 4;

/// Output channels of one `conv2d` work-item.
pub const FILTERS: usize = 4;

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

/// The window kernels of one element type; the cache key of their program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WindowKernels {
    /// The element type of every operand.
    pub elem: Elem,
}

impl WindowKernels {
    /// The kernel names of the program.
    pub const NAMES: [&'static str; 7] = [
        "conv2d",
        "depthwise2d",
        "conv2d_backprop_input",
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

    /// The program's kernels.
    pub fn kernels(&self) -> Vec<Kernel> {
        WindowKernel::ALL.map(|k| k.kernel(self.elem)).into()
    }

    /// The program's source in `dialect`.
    pub fn source(&self, dialect: Dialect) -> Option<String> {
        let mut text = Library::new(dialect, &[self.elem], false).render();
        for kernel in self.kernels() {
            text += &render::c_kernel(&kernel)?;
        }
        Some(text)
    }
}

/// One kernel of the window program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WindowKernel {
    /// `conv2d`: a full convolution, blocks of [`PIXELS`] x [`FILTERS`] per work-item.
    Conv,
    /// `depthwise2d`: one output element per work-item.
    Depthwise,
    /// `conv2d_backprop_input`: the transposed convolution, one image element per
    /// work-item.
    BackpropInput,
    /// `max_pool2d`.
    MaxPool,
    /// `avg_pool2d` (over the taps inside the image).
    AvgPool,
    /// `epilogue`: a fused convolution's epilogue, in place.
    Epilogue,
    /// `transpose`: a `[rows, cols]` matrix into `[cols, rows]`.
    Transpose,
}

impl WindowKernel {
    /// Every kernel, in [`WindowKernels::NAMES`]' order.
    pub const ALL: [WindowKernel; 7] = [
        WindowKernel::Conv,
        WindowKernel::Depthwise,
        WindowKernel::BackpropInput,
        WindowKernel::MaxPool,
        WindowKernel::AvgPool,
        WindowKernel::Epilogue,
        WindowKernel::Transpose,
    ];

    /// Its name in the program.
    pub fn name(self) -> &'static str {
        WindowKernels::NAMES[self as usize]
    }

    /// The kernel on elements `e` (a float).
    pub fn kernel(self, e: Elem) -> Kernel {
        let mut k = Kernel::new(self.name());
        let items = k.index("items");
        match self {
            WindowKernel::Conv | WindowKernel::Depthwise | WindowKernel::BackpropInput => {
                let w = Window::declare(&mut k, e, true);
                match self {
                    WindowKernel::Conv => conv(k, items, &w, e),
                    WindowKernel::Depthwise => depthwise(k, items, &w, e),
                    _ => backprop_input(k, items, &w, e),
                }
            }
            WindowKernel::MaxPool | WindowKernel::AvgPool => {
                let w = Window::declare(&mut k, e, false);
                pool(k, items, &w, e, self == WindowKernel::MaxPool)
            }
            WindowKernel::Epilogue => {
                let channels = k.index("channels");
                let (scale, shift) = (k.input("scale", e), k.input("shift", e));
                let fused = k.index("fused");
                let out = k.output("out", e);
                let parts = Parts {
                    scale,
                    shift,
                    fused,
                };
                let v = Local::new("v", Ty::Value(e));
                let mut stmts = vec![Stmt::Var(v, out.at(item()))];
                stmts.extend(parts.finish(e, v, item() % channels));
                k.map(out, items, stmts, v.get())
            }
            WindowKernel::Transpose => {
                let rows = k.index("rows");
                let cols = k.index("cols");
                let input = k.input("in", e);
                let out = k.output("out", e);
                // Output element `item` is column `item / rows`, row `item % rows` of the input.
                let at = item() % rows.clone() * cols + item() / rows;
                k.map(out, items, vec![], input.at(at))
            }
        }
    }
}

/// The geometry parameters and buffers of a convolution or pool.
struct Window {
    g: [Ex; 15],
    x: Buf,
    conv: Option<(Buf, Parts)>,
    out: Buf,
}

/// A fused convolution's epilogue parameters.
struct Parts {
    scale: Buf,
    shift: Buf,
    fused: Ex,
}

const GEOMETRY: [&str; 15] = [
    "batch",
    "in_h",
    "in_w",
    "channels",
    "k_h",
    "k_w",
    "stride_h",
    "stride_w",
    "dilation_h",
    "dilation_w",
    "before_h",
    "before_w",
    "out_h",
    "out_w",
    "filters",
];

/// The geometry's names, as [`geometry`] orders them.
#[derive(Clone, Copy)]
enum G {
    Batch,
    InH,
    InW,
    Channels,
    KH,
    KW,
    StrideH,
    StrideW,
    DilationH,
    DilationW,
    BeforeH,
    BeforeW,
    OutH,
    OutW,
    Filters,
}

impl Window {
    fn declare(k: &mut Declare, e: Elem, convolves: bool) -> Self {
        let g = GEOMETRY.map(|name| k.index(name));
        let x = k.input("x", e);
        let conv = convolves.then(|| {
            let f = k.input("f", e);
            let (scale, shift) = (k.input("scale", e), k.input("shift", e));
            let fused = k.index("fused");
            (
                f,
                Parts {
                    scale,
                    shift,
                    fused,
                },
            )
        });
        let out = k.output("out", e);
        Window { g, x, conv, out }
    }

    fn g(&self, name: G) -> Ex {
        self.g[name as usize].clone()
    }

    /// Where output pixel `p`'s window starts: its image's first input element, and its
    /// first row and column (before the padding).
    fn origin(&self, p: Ex) -> [Ex; 3] {
        let plane = self.g(G::OutH) * self.g(G::OutW);
        let rest = p.clone() % plane.clone();
        [
            p / plane * self.g(G::InH) * self.g(G::InW) * self.g(G::Channels),
            rest.clone() / self.g(G::OutW) * self.g(G::StrideH) - self.g(G::BeforeH),
            rest % self.g(G::OutW) * self.g(G::StrideW) - self.g(G::BeforeW),
        ]
    }

    /// The loop over the taps `(i, j)` of the window from `top`, `left` that lie inside the
    /// image (input row `ih`, column `iw`), running `body` for each.
    fn each_tap(&self, top: Ex, left: Ex, body: Vec<Stmt>) -> Stmt {
        let inside = !IW.get().outside(self.g(G::InW));
        Stmt::For(
            I,
            int(0),
            self.g(G::KH),
            vec![
                Stmt::Let(IH, top + I.get() * self.g(G::DilationH)),
                when(IH.get().outside(self.g(G::InH)), vec![Stmt::Continue]),
                Stmt::For(
                    J,
                    int(0),
                    self.g(G::KW),
                    vec![
                        Stmt::Let(IW, left + J.get() * self.g(G::DilationW)),
                        when(inside, body),
                    ],
                ),
            ],
        )
    }

    /// The input position of tap `(ih, iw)` of channel `c` from `base`.
    fn tap(&self, base: Ex, c: Ex) -> Ex {
        base + (IH.get() * self.g(G::InW) + IW.get()) * self.g(G::Channels) + c
    }
}

const I: Local = Local::new("i", Ty::Index);
const J: Local = Local::new("j", Ty::Index);
const IH: Local = Local::new("ih", Ty::Index);
const IW: Local = Local::new("iw", Ty::Index);
const P: Local = Local::new("p", Ty::Index);
const C: Local = Local::new("c", Ty::Index);
const K: Local = Local::new("k", Ty::Index);
const Q: Local = Local::new("q", Ty::Index);
const R: Local = Local::new("r", Ty::Index);
const O: Local = Local::new("o", Ty::Index);
const BASE: Local = Local::new("base", Ty::Index);
const ROW: Local = Local::new("row", Ty::Index);
const TOP: Local = Local::new("top", Ty::Index);
const LEFT: Local = Local::new("left", Ty::Index);

/// Declare `base`, `top` and `left` of output pixel `p`.
fn origin_locals(w: &Window, p: Ex) -> Vec<Stmt> {
    let [base, top, left] = w.origin(p);
    vec![
        Stmt::Let(BASE, base),
        Stmt::Let(TOP, top),
        Stmt::Let(LEFT, left),
    ]
}

impl Parts {
    /// `v = activation(v * scale + shift)` for output channel `channel`, each part as
    /// `fused` asks.
    fn finish(&self, e: Elem, v: Local, channel: Ex) -> Vec<Stmt> {
        let activation = |op| body::unary(op, e).expect("Relu and Relu6 are defined for floats");
        let apply = |op| Stmt::Assign(v, elem_of(e, activation(op), [v.get()]));
        let part = |bit: i32| (self.fused.clone() & int(bit)).ne(int(0));
        let kind = self.fused.clone() >> int(2);
        vec![
            when(
                part(1),
                vec![Stmt::Assign(
                    v,
                    elem_of(
                        e,
                        body::x() * body::y(),
                        [v.get(), self.scale.at(channel.clone())],
                    ),
                )],
            ),
            when(
                part(2),
                vec![Stmt::Assign(
                    v,
                    elem_of(e, body::x() + body::y(), [v.get(), self.shift.at(channel)]),
                )],
            ),
            Stmt::If(
                kind.clone().cmp(Cmp::Eq, int(1)),
                vec![apply(UnaryOp::Relu)],
                vec![when(kind.cmp(Cmp::Eq, int(2)), vec![apply(UnaryOp::Relu6)])],
            ),
        ]
    }
}

/// `conv2d`: an implicit GEMM in registers over a block of [`PIXELS`] output pixels by
/// [`FILTERS`] output channels.
fn conv(k: Declare, items: Ex, w: &Window, e: Elem) -> Kernel {
    let (f, parts) = w.conv.as_ref().expect("a convolution has a filter");
    let (pixels, blocks) = (
        Local::new("pixels", Ty::Index),
        Local::new("blocks", Ty::Index),
    );
    let (p0, o0) = (Local::new("p0", Ty::Index), Local::new("o0", Ty::Index));
    let array = |name| Local::new(name, Ty::Index);
    let (bases, tops, lefts, at) = (array("bases"), array("tops"), array("lefts"), array("at"));
    let (acc, weights) = (
        Local::new("acc", Ty::Value(e)),
        Local::new("w", Ty::Value(e)),
    );
    let (value, result) = (
        Local::new("value", Ty::Value(e)),
        Local::new("v", Ty::Value(e)),
    );
    let filters = w.g(G::Filters);
    let cell = || Q.get() * int(FILTERS as i32) + R.get();
    let zero = || elem(e, body::num(0));
    let [base, top, left] = w.origin(P.get());
    let mut stmts = vec![
        Stmt::Let(pixels, w.g(G::Batch) * w.g(G::OutH) * w.g(G::OutW)),
        Stmt::Let(
            blocks,
            (filters.clone() + int(FILTERS as i32 - 1)) / int(FILTERS as i32),
        ),
        Stmt::Let(p0, item() / blocks.get() * int(PIXELS as i32)),
        Stmt::Let(o0, item() % blocks.get() * int(FILTERS as i32)),
        // Each pixel's image, and its window's first row and column (before padding).
        Stmt::Array(bases, PIXELS),
        Stmt::Array(tops, PIXELS),
        Stmt::Array(lefts, PIXELS),
        Stmt::Unroll(
            Q,
            PIXELS,
            vec![
                Stmt::Let(P, (p0.get() + Q.get()).min(pixels.get() - int(1))),
                Stmt::Set(bases, Q.get(), base),
                Stmt::Set(tops, Q.get(), top),
                Stmt::Set(lefts, Q.get(), left),
            ],
        ),
        Stmt::Array(acc, PIXELS * FILTERS),
        Stmt::Unroll(R, PIXELS * FILTERS, vec![Stmt::Set(acc, R.get(), zero())]),
    ];
    let inside = !IH
        .get()
        .outside(w.g(G::InH))
        .or(IW.get().outside(w.g(G::InW)));
    let row = (I.get() * w.g(G::KW) + J.get()) * w.g(G::Channels) * filters.clone();
    let per_channel = vec![
        Stmt::Array(weights, FILTERS),
        Stmt::Unroll(
            R,
            FILTERS,
            vec![
                Stmt::Let(O, (o0.get() + R.get()).min(filters.clone() - int(1))),
                Stmt::Set(
                    weights,
                    R.get(),
                    f.at(ROW.get() + C.get() * filters.clone() + O.get()),
                ),
            ],
        ),
        Stmt::Unroll(
            Q,
            PIXELS,
            vec![
                Stmt::Var(value, zero()),
                when(
                    Ex::Element(at, Box::new(Q.get())).ge(int(0)),
                    vec![Stmt::Assign(
                        value,
                        w.x.at(Ex::Element(at, Box::new(Q.get())) + C.get()),
                    )],
                ),
                Stmt::Unroll(
                    R,
                    FILTERS,
                    vec![Stmt::Set(
                        acc,
                        cell(),
                        elem_of(
                            e,
                            body::x() + body::y() * Expr::Arg(2),
                            [
                                Ex::Element(acc, Box::new(cell())),
                                value.get(),
                                Ex::Element(weights, Box::new(R.get())),
                            ],
                        ),
                    )],
                ),
            ],
        ),
    ];
    stmts.push(Stmt::For(
        I,
        int(0),
        w.g(G::KH),
        vec![Stmt::For(
            J,
            int(0),
            w.g(G::KW),
            vec![
                // Each pixel's input at this tap, or -1 in the padding.
                Stmt::Array(at, PIXELS),
                Stmt::Unroll(
                    Q,
                    PIXELS,
                    vec![
                        Stmt::Let(
                            IH,
                            Ex::Element(tops, Box::new(Q.get())) + I.get() * w.g(G::DilationH),
                        ),
                        Stmt::Let(
                            IW,
                            Ex::Element(lefts, Box::new(Q.get())) + J.get() * w.g(G::DilationW),
                        ),
                        Stmt::Set(
                            at,
                            Q.get(),
                            inside.then(
                                w.tap(Ex::Element(bases, Box::new(Q.get())), int(0)),
                                int(-1),
                            ),
                        ),
                    ],
                ),
                Stmt::Let(ROW, row),
                Stmt::For(C, int(0), w.g(G::Channels), per_channel),
            ],
        )],
    ));
    let mut store = vec![Stmt::Var(result, Ex::Element(acc, Box::new(cell())))];
    store.extend(parts.finish(e, result, O.get()));
    store.push(w.out.store(
        (p0.get() + Q.get()) * filters.clone() + O.get(),
        result.get(),
    ));
    stmts.push(Stmt::Unroll(
        Q,
        PIXELS,
        vec![Stmt::Unroll(
            R,
            FILTERS,
            vec![
                Stmt::Let(O, o0.get() + R.get()),
                when(
                    (p0.get() + Q.get())
                        .lt(pixels.get())
                        .and(O.get().lt(filters)),
                    store,
                ),
            ],
        )],
    ));
    k.each(items, stmts)
}

/// `depthwise2d`: output element `item` is channel `k` (input channel `c`) of pixel `p`.
fn depthwise(k: Declare, items: Ex, w: &Window, e: Elem) -> Kernel {
    let (f, parts) = w.conv.as_ref().expect("a convolution has a filter");
    let width = w.g(G::Channels) * w.g(G::Filters);
    let acc = Local::new("acc", Ty::Value(e));
    let mut stmts = vec![
        Stmt::Let(P, item() / width.clone()),
        Stmt::Let(K, item() % width.clone()),
        Stmt::Let(C, K.get() / w.g(G::Filters)),
    ];
    stmts.extend(origin_locals(w, P.get()));
    let product = elem_of(
        e,
        body::x() + body::y() * Expr::Arg(2),
        [
            acc.get(),
            w.x.at(w.tap(BASE.get(), C.get())),
            f.at((I.get() * w.g(G::KW) + J.get()) * width + K.get()),
        ],
    );
    stmts.push(Stmt::Var(acc, elem(e, body::num(0))));
    stmts.push(w.each_tap(TOP.get(), LEFT.get(), vec![Stmt::Assign(acc, product)]));
    stmts.extend(parts.finish(e, acc, K.get()));
    k.map(w.out, items, stmts, acc.get())
}

/// `conv2d_backprop_input`: output element `item` is channel `c` of image pixel `p` (row
/// `ih`, column `iw` of image `n`). Tap `(i, j)` of output pixel `(oh, ow)` reads it where
/// `oh * stride + i * dilation - before = ih` (and so for columns): for each tap, the
/// output pixel is found by division, where it divides exactly and lies in the output.
fn backprop_input(k: Declare, items: Ex, w: &Window, e: Elem) -> Kernel {
    let (f, parts) = w.conv.as_ref().expect("a convolution has a filter");
    let local = |name| Local::new(name, Ty::Index);
    let (n, oh, ow, th, tw, filter_row) = (
        local("n"),
        local("oh"),
        local("ow"),
        local("th"),
        local("tw"),
        local("frow"),
    );
    let acc = Local::new("acc", Ty::Value(e));
    let channels = w.g(G::Channels);
    let filters = w.g(G::Filters);
    // `t`, a multiple of `stride` from the output's first pixel, as an output position
    // (`into`), or the next tap where it is not one.
    let output_at = |t: Local, stride: G, into: Local, size: G| {
        vec![
            when(
                t.get().lt(int(0)).or((t.get() % w.g(stride)).ne(int(0))),
                vec![Stmt::Continue],
            ),
            Stmt::Let(into, t.get() / w.g(stride)),
            when(into.get().ge(w.g(size)), vec![Stmt::Continue]),
        ]
    };
    let product = elem_of(
        e,
        body::x() + body::y() * Expr::Arg(2),
        [
            acc.get(),
            w.x.at(ROW.get() + O.get()),
            f.at(filter_row.get() + O.get()),
        ],
    );
    let mut columns = vec![Stmt::Let(
        tw,
        IW.get() + w.g(G::BeforeW) - J.get() * w.g(G::DilationW),
    )];
    columns.extend(output_at(tw, G::StrideW, ow, G::OutW));
    columns.extend([
        Stmt::Let(
            ROW,
            ((n.get() * w.g(G::OutH) + oh.get()) * w.g(G::OutW) + ow.get()) * filters.clone(),
        ),
        Stmt::Let(
            filter_row,
            ((I.get() * w.g(G::KW) + J.get()) * channels.clone() + C.get()) * filters.clone(),
        ),
        Stmt::For(O, int(0), filters, vec![Stmt::Assign(acc, product)]),
    ]);
    let mut rows = vec![Stmt::Let(
        th,
        IH.get() + w.g(G::BeforeH) - I.get() * w.g(G::DilationH),
    )];
    rows.extend(output_at(th, G::StrideH, oh, G::OutH));
    rows.push(Stmt::For(J, int(0), w.g(G::KW), columns));
    let mut stmts = vec![
        Stmt::Let(C, item() % channels.clone()),
        Stmt::Let(P, item() / channels),
        Stmt::Let(IW, P.get() % w.g(G::InW)),
        Stmt::Let(IH, P.get() / w.g(G::InW) % w.g(G::InH)),
        Stmt::Let(n, P.get() / (w.g(G::InW) * w.g(G::InH))),
        Stmt::Var(acc, elem(e, body::num(0))),
        Stmt::For(I, int(0), w.g(G::KH), rows),
    ];
    stmts.extend(parts.finish(e, acc, C.get()));
    k.map(w.out, items, stmts, acc.get())
}

/// The pools: output element `item` is channel `c` of pixel `p`; the maximum propagates
/// NaN with `+0` above `-0`, the mean divides by the taps inside the image.
fn pool(k: Declare, items: Ex, w: &Window, e: Elem, max: bool) -> Kernel {
    let (acc, count, value) = (
        Local::new("acc", Ty::Value(e)),
        Local::new("count", Ty::Value(e)),
        Local::new("value", Ty::Value(e)),
    );
    let mut stmts = vec![
        Stmt::Let(P, item() / w.g(G::Channels)),
        Stmt::Let(C, item() % w.g(G::Channels)),
    ];
    stmts.extend(origin_locals(w, P.get()));
    let (init, combine) = if max {
        (
            body::Expr::Lowest,
            body::call(Func::MaxNan, [acc.value(), value.value()]),
        )
    } else {
        (body::num(0), acc.value() + value.value())
    };
    stmts.extend([
        Stmt::Var(acc, elem(e, init)),
        Stmt::Var(count, elem(e, body::num(0))),
        w.each_tap(
            TOP.get(),
            LEFT.get(),
            vec![
                Stmt::Let(value, w.x.at(w.tap(BASE.get(), C.get()))),
                Stmt::Assign(acc, elem(e, combine)),
                Stmt::Assign(count, elem(e, count.value() + body::num(1))),
            ],
        ),
    ]);
    let result = if max {
        acc.get()
    } else {
        elem(e, acc.value() / count.value())
    };
    k.map(w.out, items, stmts, result)
}

/// The arguments of `conv2d` or `depthwise2d` over `items`, in parameter order: the input,
/// the filter, the epilogue's scale and shift (any memory where absent: never read), its
/// word, and the output, each buffer as its memory and element offset.
pub fn conv_args<M: Copy>(
    items: usize,
    g: &WindowGeometry,
    x: (M, i64),
    f: (M, i64),
    [scale, shift]: [(M, i64); 2],
    fused: i64,
    out: (M, i64),
) -> Vec<Arg<M>> {
    let mut args = vec![Arg::I64(items as i64)];
    args.extend(geometry(g).map(Arg::I64));
    for (m, offset) in [x, f, scale, shift] {
        args.extend([Arg::Mem(m), Arg::I64(offset)]);
    }
    args.extend([Arg::I64(fused), Arg::Mem(out.0), Arg::I64(out.1)]);
    args
}

/// The arguments of `max_pool2d` or `avg_pool2d` over `items`, in parameter order.
pub fn pool_args<M: Copy>(
    items: usize,
    g: &WindowGeometry,
    x: (M, i64),
    out: (M, i64),
) -> Vec<Arg<M>> {
    let mut args = vec![Arg::I64(items as i64)];
    args.extend(geometry(g).map(Arg::I64));
    args.extend([
        Arg::Mem(x.0),
        Arg::I64(x.1),
        Arg::Mem(out.0),
        Arg::I64(out.1),
    ]);
    args
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
