//! The neural-network ops of inference graphs (`Conv2D`, `DepthwiseConv2dNative`,
//! `Conv2DBackpropInput`, `MaxPool`, `AvgPool`, `BiasAdd`, `FusedBatchNormV3`, `Softmax`,
//! `LogSoftmax`): their
//! attributes read as TensorFlow defines them, static shapes, and kernels on the eager API.

use smallvec::smallvec;

use polytensor_core::ops::UnaryOp;
use polytensor_core::partial_shape::Dim;
use polytensor_core::plan::window::{DataFormat, Padding, Window};
use polytensor_core::{
    Conv2dOptions, ConvEpilogue, Error, PartialTensorShape, Pool2dOptions, Result, Tensor,
};

use super::infer::known;
use super::kernels::{Outputs, RunCtx};
use super::{InferCtx, Value};
use crate::attr::Attrs;
use crate::graph::Typed;

/// A neural-network op.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Nn {
    Conv2D,
    Depthwise,
    /// `Conv2DBackpropInput(input_sizes, filter, out_backprop)`: the transposed
    /// convolution (Keras's `Conv2DTranspose`).
    BackpropInput,
    MaxPool,
    AvgPool,
    BiasAdd,
    /// `FusedBatchNormV3`: in inference (`is_training = false`) with the population's
    /// statistics, in training with the batch's.
    BatchNorm,
    Softmax,
    LogSoftmax,
}

impl Nn {
    /// The type attributes tied to the inputs.
    pub(crate) fn typed(self) -> &'static [(&'static str, super::Source)] {
        use super::Source::Input;
        match self {
            Nn::Conv2D | Nn::Depthwise | Nn::BiasAdd => &[("T", Input(0)), ("T", Input(1))],
            Nn::BackpropInput => &[("T", Input(1)), ("T", Input(2))],
            Nn::BatchNorm => &[
                ("T", Input(0)),
                ("U", Input(1)),
                ("U", Input(2)),
                ("U", Input(3)),
                ("U", Input(4)),
            ],
            Nn::MaxPool | Nn::AvgPool | Nn::Softmax | Nn::LogSoftmax => &[("T", Input(0))],
        }
    }
}

/// A convolution, its bias (`norm` false) or inference batch norm, after a bias (`affine`)
/// a `Mul` and an `AddV2` by per-channel vectors, (`residual`) the `AddV2` of a tensor of
/// the output's shape, and an optional `Relu`/`Relu6`, run as one step: the session's
/// fusion (`crate::fusion`), as TensorFlow's remapper makes `_FusedConv2D`. Inputs: the
/// convolution's two, then (`biased`) the bias or the batch norm's four parameters, then
/// (`affine`) the scale and the shift, then (`residual`) the residual, then (`padded`) the
/// paddings of a zero `Pad` whose input is the first input, folded into a `VALID`
/// convolution's padding.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct FusedConv {
    pub(crate) depthwise: bool,
    pub(crate) norm: bool,
    /// Whether a bias or a batch norm follows the convolution (false: the scale and shift
    /// come straight after it).
    pub(crate) biased: bool,
    pub(crate) affine: bool,
    pub(crate) activation: Option<UnaryOp>,
    pub(crate) padded: bool,
    /// Whether the output's height (1) is squeezed away (Keras's `Conv1D`; the `Squeeze`
    /// node is the chain's last).
    pub(crate) squeezed: bool,
    /// Whether an `AddV2` of a tensor of the output's shape (a residual connection) follows,
    /// before the activation: that tensor is an input, before the paddings.
    pub(crate) residual: bool,
}

/// The attributes of a window op, in NHWC or NCHW 4-vectors as TensorFlow stores them.
pub(super) struct WindowAttrs {
    format: DataFormat,
    padding: Padding,
    /// `[height, width]` of `strides`, `ksize` (pooling) and `dilations`.
    strides: [usize; 2],
    ksize: [usize; 2],
    dilations: [usize; 2],
}

/// What TensorFlow's op definition of a window op allows: its name, the data formats, the
/// paddings, and whether it has a window (`ksize`).
struct WindowOpDef {
    name: &'static str,
    formats: &'static [&'static str],
    paddings: &'static [&'static str],
    pooling: bool,
}

impl WindowOpDef {
    fn of(op: Nn) -> Self {
        const PLAIN: &[&str] = &["NHWC", "NCHW"];
        const ANY_PADDING: &[&str] = &["SAME", "VALID", "EXPLICIT"];
        let (name, formats, paddings, pooling) = match op {
            Nn::Depthwise => ("DepthwiseConv2dNative", PLAIN, ANY_PADDING, false),
            Nn::BackpropInput => ("Conv2DBackpropInput", PLAIN, ANY_PADDING, false),
            Nn::MaxPool => (
                "MaxPool",
                &["NHWC", "NCHW", "NCHW_VECT_C"][..],
                ANY_PADDING,
                true,
            ),
            Nn::AvgPool => ("AvgPool", PLAIN, &["SAME", "VALID"][..], true),
            _ => ("Conv2D", PLAIN, ANY_PADDING, false),
        };
        WindowOpDef {
            name,
            formats,
            paddings,
            pooling,
        }
    }

    /// String attribute `name` (or `default` where absent), which must be one of `allowed`,
    /// with TensorFlow's message.
    fn choice(
        &self,
        attrs: &Attrs<'_>,
        name: &str,
        default: Option<&str>,
        allowed: &[&str],
    ) -> Result<String> {
        let value = match default {
            Some(default) => attrs.string_or(name, default)?,
            None if attrs.has(name) => attrs.string_or(name, "")?,
            None => return Err(self.missing(name)),
        };
        if !allowed.contains(&value.as_str()) {
            let list: Vec<String> = allowed.iter().map(|a| format!("\"{a}\"")).collect();
            return Err(Error::invalid(format!(
                "Value for attr '{name}' of \"{value}\" is not in the list of allowed values: {}",
                list.join(", ")
            )));
        }
        Ok(value)
    }

    /// TensorFlow's message for a required attribute that is absent.
    fn missing(&self, name: &str) -> Error {
        Error::invalid(format!(
            "NodeDef missing attr '{name}' from Op<name={}; ...>",
            self.name
        ))
    }

    /// A 4-vector attribute's spatial pair (`default` in each entry where it is absent and
    /// optional), with TensorFlow's checks on the other entries.
    fn spatial(
        &self,
        attrs: &Attrs<'_>,
        name: &str,
        format: DataFormat,
        default: Option<i64>,
    ) -> Result<[usize; 2]> {
        let values = match default {
            Some(default) if !attrs.has(name) => vec![default; 4],
            None if !attrs.has(name) => return Err(self.missing(name)),
            _ => attrs.ints(name)?,
        };
        if values.len() != 4 {
            return Err(Error::invalid(format!(
                "{name} field must specify 4 dimensions"
            )));
        }
        let (n, c, h, w) = match format {
            DataFormat::Nhwc => (values[0], values[3], values[1], values[2]),
            DataFormat::Nchw => (values[0], values[1], values[2], values[3]),
        };
        if n != 1 || c != 1 {
            return Err(Error::invalid(format!(
                "Current implementation does not yet support {name} in the batch and depth \
                 dimensions."
            )));
        }
        let positive = |v: i64| {
            usize::try_from(v)
                .ok()
                .filter(|&v| v > 0)
                .ok_or_else(|| Error::invalid(format!("{name} must be positive, got {v}")))
        };
        Ok([positive(h)?, positive(w)?])
    }
}

impl WindowAttrs {
    /// The attributes of window op `op`, refused as TensorFlow's op definition and shape
    /// function refuse them.
    pub(super) fn read(attrs: &Attrs<'_>, op: Nn) -> Result<Self> {
        let def = WindowOpDef::of(op);
        let format = def.choice(attrs, "data_format", Some("NHWC"), def.formats)?;
        let format = DataFormat::from_name(&format)?;
        let padding = def.choice(attrs, "padding", None, def.paddings)?;
        let explicit = attrs.ints("explicit_paddings")?;
        let mut pairs = Vec::new();
        if padding != "EXPLICIT" && !explicit.is_empty() {
            return Err(Error::invalid(
                "explicit_paddings attribute must be empty if the padding attribute is not \
                 EXPLICIT",
            ));
        }
        if padding == "EXPLICIT" {
            if explicit.len() != 8 {
                return Err(Error::invalid(format!(
                    "explicit_paddings attribute must contain 8 values, but got: {}",
                    explicit.len()
                )));
            }
            if let Some(&negative) = explicit.iter().find(|&&p| p < 0) {
                return Err(Error::invalid(format!(
                    "All elements of explicit_paddings must be nonnegative, got {negative}"
                )));
            }
            let pair = |d: usize| -> (usize, usize) {
                // Non-negative, checked above.
                let side = |v: i64| usize::try_from(v).unwrap_or(0);
                (side(explicit[2 * d]), side(explicit[2 * d + 1]))
            };
            let (n, h, w, c) = match format {
                DataFormat::Nhwc => (0, 1, 2, 3),
                DataFormat::Nchw => (0, 2, 3, 1),
            };
            if pair(n) != (0, 0) || pair(c) != (0, 0) {
                return Err(Error::invalid(
                    "Nonzero explicit padding in the batch or depth dimensions is not supported",
                ));
            }
            pairs = vec![pair(h), pair(w)];
        }
        let padding = Padding::from_name(&padding, pairs)?;
        Ok(Self {
            format,
            padding,
            strides: def.spatial(attrs, "strides", format, None)?,
            ksize: if def.pooling {
                def.spatial(attrs, "ksize", format, None)?
            } else {
                [1, 1]
            },
            dilations: if def.pooling {
                [1, 1]
            } else {
                def.spatial(attrs, "dilations", format, Some(1))?
            },
        })
    }

    /// The convolution's options.
    pub(super) fn conv(&self) -> Conv2dOptions {
        Conv2dOptions {
            strides: self.strides,
            dilations: self.dilations,
            padding: self.padding.clone(),
            format: self.format,
        }
    }

    /// The pool's options.
    pub(super) fn pool(&self) -> Pool2dOptions {
        Pool2dOptions {
            window: self.ksize,
            strides: self.strides,
            padding: self.padding.clone(),
            format: self.format,
        }
    }
}

/// The static outputs of `op`.
pub(crate) fn infer(op: Nn, cx: &InferCtx<'_>) -> Result<Vec<Typed>> {
    let attrs = cx.attrs();
    let input = |i: usize| -> Result<&Typed> {
        cx.inputs
            .get(i)
            .ok_or_else(|| cx.error(format!("input {i} is missing")))
    };
    let (dtype, shape) = input(0)?.clone();
    let arity = match op {
        Nn::Conv2D | Nn::Depthwise | Nn::BiasAdd => 2,
        Nn::BackpropInput => 3,
        Nn::BatchNorm => 5,
        _ => 1,
    };
    cx.exactly(arity)?;
    match op {
        Nn::BackpropInput => {
            let window = WindowAttrs::read(&attrs, op)?;
            if !matches!(dtype, polytensor_core::DataType::Int32) {
                return Err(cx.type_mismatch(0, polytensor_core::DataType::Int32));
            }
            cx.with_rank(0, 1)?;
            let (dtype, dy) = input(2)?.clone();
            if let Some(rank) = dy.rank().filter(|&r| r != 4) {
                return Err(Error::invalid(format!(
                    "input_sizes must be 4-dimensional, got: {rank}"
                )));
            }
            let dim = |d: i64| -> Result<Dim> {
                usize::try_from(d)
                    .map(Some)
                    .map_err(|_| Error::invalid(format!("Dimension {d} must be >= 0")))
            };
            // The image's shape, in the data format: `input_sizes` where it is a constant
            // (2 spatial dims: the batch from the gradient, the depth from the filter).
            let batch = dy.dims().and_then(|d| d[0]);
            let depth = input(1)?.1.dims().and_then(|f| f.get(2).copied().flatten());
            let dims: Vec<Dim> = match cx.const_ints(0).as_deref() {
                Some(&[n, a, b, c]) => vec![dim(n)?, dim(a)?, dim(b)?, dim(c)?],
                Some(&[h, w]) => match window.format {
                    DataFormat::Nhwc => vec![batch, dim(h)?, dim(w)?, depth],
                    DataFormat::Nchw => vec![batch, depth, dim(h)?, dim(w)?],
                },
                _ => vec![None; 4],
            };
            Ok(vec![(dtype, PartialTensorShape::new(&dims)?)])
        }
        Nn::Softmax | Nn::LogSoftmax | Nn::BiasAdd => Ok(vec![(dtype, shape)]),
        Nn::BatchNorm => {
            attrs.bool_or("is_training", true)?;
            let u = input(1)?.0;
            let channels = PartialTensorShape::new(&[None])?;
            let mut outputs = vec![(dtype, shape)];
            outputs.extend((0..4).map(|_| (u, channels.clone())));
            outputs.push((u, PartialTensorShape::unknown_rank()));
            Ok(outputs)
        }
        Nn::Conv2D | Nn::Depthwise | Nn::MaxPool | Nn::AvgPool => {
            let window = WindowAttrs::read(&attrs, op)?;
            let filter = match op {
                Nn::Conv2D | Nn::Depthwise => input(1)?.1.dims().map(<[Dim]>::to_vec),
                _ => None,
            };
            Ok(vec![(dtype, window_shape(op, &window, &shape, filter)?)])
        }
    }
}

/// The static output shape of a window op: the spatial dims where the input's and the
/// window's are known, the channels from the filter.
fn window_shape(
    op: Nn,
    window: &WindowAttrs,
    shape: &PartialTensorShape,
    filter: Option<Vec<Dim>>,
) -> Result<PartialTensorShape> {
    let Some(dims) = shape.dims() else {
        return PartialTensorShape::new(&[None; 4]);
    };
    if dims.len() != 4 {
        return Err(Error::invalid(format!(
            "input must be 4-dimensional{shape}"
        )));
    }
    let (h, w, c) = match window.format {
        DataFormat::Nhwc => (1, 2, 3),
        DataFormat::Nchw => (2, 3, 1),
    };
    let taps = match (op, &filter) {
        (Nn::Conv2D | Nn::Depthwise, Some(f)) if f.len() == 4 => [f[0], f[1]],
        (Nn::Conv2D | Nn::Depthwise, _) => [None, None],
        _ => [Some(window.ksize[0]), Some(window.ksize[1])],
    };
    let mut out = dims.to_vec();
    for (k, axis) in [h, w].into_iter().enumerate() {
        out[axis] = match (dims[axis], taps[k]) {
            (Some(input), Some(size)) => Some(
                Window {
                    size,
                    stride: window.strides[k],
                    dilation: window.dilations[k],
                }
                .resolve(input, &window.padding, k)?
                .output,
            ),
            _ => None,
        };
    }
    out[c] = match (op, filter.as_deref()) {
        (Nn::Conv2D, Some([_, _, _, o])) => *o,
        (Nn::Depthwise, Some([_, _, Some(i), Some(m)])) => Some(
            i.checked_mul(*m)
                .filter(|&c| c <= i64::MAX as usize)
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "Negative dimension size caused by overflow when multiplying {i} and {m}"
                    ))
                })?,
        ),
        (Nn::Depthwise, _) => None,
        _ => dims[c],
    };
    known(out)
}

/// Run `op`.
pub(crate) fn run(op: Nn, cx: &RunCtx<'_, '_>) -> Result<Outputs> {
    let attrs = cx.attrs();
    let x = cx.tensor(0)?;
    let format = || DataFormat::from_name(&attrs.string_or("data_format", "NHWC")?);
    let y = match op {
        Nn::Softmax => x.softmax()?,
        Nn::LogSoftmax => x.log_softmax()?,
        Nn::BiasAdd => x.bias_add(&*cx.tensor(1)?, format()?)?,
        Nn::Conv2D => x.conv2d(&*cx.tensor(1)?, &WindowAttrs::read(&attrs, op)?.conv())?,
        Nn::BackpropInput => {
            cx.require_rank(0, 1, |s| {
                format!("Conv2DBackpropInput: input_sizes input must be 1-dim, not {s}")
            })?;
            let sizes = cx
                .ints(0)?
                .into_iter()
                .map(|d| {
                    usize::try_from(d)
                        .map_err(|_| Error::invalid(format!("Dimension {d} must be >= 0")))
                })
                .collect::<Result<Vec<usize>>>()?;
            let options = WindowAttrs::read(&attrs, op)?.conv();
            cx.tensor(2)?
                .conv2d_backprop_input(&*cx.tensor(1)?, &sizes, &options)?
        }
        Nn::Depthwise => {
            x.depthwise_conv2d(&*cx.tensor(1)?, &WindowAttrs::read(&attrs, op)?.conv())?
        }
        Nn::MaxPool => x.max_pool2d(&WindowAttrs::read(&attrs, op)?.pool())?,
        Nn::AvgPool => x.avg_pool2d(&WindowAttrs::read(&attrs, op)?.pool())?,
        Nn::BatchNorm => {
            let [scale, offset, mean, variance] =
                [1, 2, 3, 4].map(|i| cx.tensor(i).map(|t| t.into_owned()));
            let (mean, variance) = (mean?, variance?);
            let epsilon = attrs.float_or("epsilon", 1e-4)?;
            if attrs.bool_or("is_training", true)? {
                let factor = attrs.float_or("exponential_avg_factor", 1.0)?;
                let (y, statistics) = x.batch_norm_training(
                    &scale?,
                    &offset?,
                    &mean,
                    &variance,
                    epsilon,
                    factor,
                    format()?,
                )?;
                let empty = polytensor_core::Tensor::zeros([0usize], mean.dtype(), cx.device)?;
                return Ok(smallvec![
                    Value::Tensor(y),
                    Value::Tensor(statistics.mean),
                    Value::Tensor(statistics.variance),
                    Value::Tensor(statistics.saved_mean),
                    Value::Tensor(statistics.saved_variance),
                    Value::Tensor(empty),
                ]);
            }
            let y = x.batch_norm(&scale?, &offset?, &mean, &variance, epsilon, format()?)?;
            // Inference passes the population statistics through, as TensorFlow's kernel.
            let empty = polytensor_core::Tensor::zeros([0usize], mean.dtype(), cx.device)?;
            return Ok(smallvec![
                Value::Tensor(y),
                Value::Tensor(mean.clone()),
                Value::Tensor(variance.clone()),
                Value::Tensor(mean),
                Value::Tensor(variance),
                Value::Tensor(empty),
            ]);
        }
    };
    Ok(smallvec![Value::Tensor(y)])
}

/// Run a fused convolution step (its nodes are `cx.chain`: the convolution, then the bias or
/// batch norm).
pub(crate) fn run_fused(fused: FusedConv, cx: &RunCtx<'_, '_>) -> Result<Outputs> {
    // A fused residual `AddV2`'s other operand: the input before the paddings.
    let residual = if fused.residual {
        let at = cx.inputs.len() - 1 - usize::from(fused.padded);
        Some(cx.tensor(at)?.into_owned())
    } else {
        None
    };
    let y = fused_conv(fused, residual.as_ref(), cx)?;
    one(match y.dims()[..] {
        [n, 1, w, c] if fused.squeezed => y.reshape([n, w, c])?,
        _ => y,
    })
}

/// `activation(y + residual)`, each part optional: a fused step's tail where its ops run one
/// after another.
fn then_residual(
    y: Tensor,
    residual: Option<&Tensor>,
    activation: Option<UnaryOp>,
) -> Result<Tensor> {
    let y = match residual {
        Some(r) => y.add(r)?,
        None => y,
    };
    match activation {
        Some(op) => y.unary(op),
        None => Ok(y),
    }
}

/// The output of a fused convolution step (with `residual`, its fused `AddV2`'s other
/// operand), before any squeeze.
fn fused_conv(fused: FusedConv, residual: Option<&Tensor>, cx: &RunCtx<'_, '_>) -> Result<Tensor> {
    fn attrs(node: &crate::graph::Node) -> Attrs<'_> {
        Attrs {
            node: &node.name,
            attrs: &node.attrs,
        }
    }
    let (&conv, &follow) = match cx.chain.as_slice() {
        [conv, follow, ..] => (conv, follow),
        _ => {
            return Err(Error::invalid(
                "a fused step needs its convolution and what follows it",
            ))
        }
    };
    let op = if fused.depthwise {
        Nn::Depthwise
    } else {
        Nn::Conv2D
    };
    let mut options = WindowAttrs::read(&attrs(conv), op)?.conv();
    let (mut x, filter) = (cx.tensor(0)?, cx.tensor(1)?);
    if fused.padded {
        let last = cx.inputs.len() - 1;
        let values = cx.ints(last)?;
        match values[..] {
            // Spatial padding only: the convolution's own.
            [0, 0, top, bottom, left, right, 0, 0]
                if x.rank() == 4 && values.iter().all(|&v| v >= 0) =>
            {
                options.padding = Padding::Explicit(vec![
                    (top as usize, bottom as usize),
                    (left as usize, right as usize),
                ]);
            }
            _ => {
                let pairs: Vec<(usize, usize)> = values
                    .chunks(2)
                    .map(|p| match p {
                        &[a, b] if a >= 0 && b >= 0 => Ok((a as usize, b as usize)),
                        _ => Err(Error::invalid(format!(
                            "Paddings must be non-negative: {p:?}"
                        ))),
                    })
                    .collect::<Result<_>>()?;
                x = std::borrow::Cow::Owned(x.pad(&pairs, polytensor_core::Scalar::I64(0))?);
            }
        }
    }
    let mut epilogue = ConvEpilogue {
        activation: fused.activation,
        ..Default::default()
    };
    if fused.norm {
        let follow = attrs(follow);
        if follow.bool_or("is_training", true)? {
            return Err(Error::invalid(
                "FusedBatchNormV3 runs in inference only here (is_training = false)",
            ));
        }
        let params = [2, 3, 4, 5].map(|i| cx.tensor(i).map(|t| t.into_owned()));
        let [scale, offset, mean, variance] = params;
        let (scale, offset, mean, variance) = (scale?, offset?, mean?, variance?);
        let epsilon = follow.float_or("epsilon", 1e-4)?;
        if scale.dtype() != x.dtype() {
            // Half images with float32 parameters: the ops one after another, as unfused.
            let y = x
                .conv2d_fused(&filter, &options, fused.depthwise, &ConvEpilogue::default())?
                .batch_norm(&scale, &offset, &mean, &variance, epsilon, options.format)?;
            return then_residual(y, residual, fused.activation);
        }
        let (factor, shift) =
            Tensor::fold_batch_norm([&scale, &offset, &mean, &variance], epsilon, x.dtype())?;
        epilogue.scale = Some(factor);
        epilogue.shift = Some(shift);
    } else if !fused.biased {
        let (scale, shift) = (cx.tensor(2)?, cx.tensor(3)?);
        let channels = scale.num_elements();
        let per_channel = |t: &Tensor| per_channel(t, channels, x.dtype());
        match per_channel(&scale).zip(per_channel(&shift)) {
            Some((scale, shift)) => {
                epilogue.scale = Some(scale);
                epilogue.shift = Some(shift);
            }
            None => {
                // Not the per-channel vectors the plan saw: the ops one after another.
                let y =
                    x.conv2d_fused(&filter, &options, fused.depthwise, &ConvEpilogue::default())?;
                return then_residual(
                    affine_ops(y, &scale, &shift, None)?,
                    residual,
                    fused.activation,
                );
            }
        }
    } else {
        let bias = cx.tensor(2)?;
        if bias.rank() != 1 {
            return Err(Error::invalid(format!(
                "Biases must be 1D: {}",
                bias.shape()
            )));
        }
        if fused.affine {
            let (scale, shift) = (cx.tensor(3)?, cx.tensor(4)?);
            let per_channel = |t: &Tensor| per_channel(t, bias.num_elements(), bias.dtype());
            let vectors = per_channel(&scale).zip(per_channel(&shift));
            let Some((scale_vector, shift_vector)) = vectors else {
                // Not the per-channel vectors the plan saw: the ops one after another.
                let y = x
                    .conv2d_fused(&filter, &options, fused.depthwise, &ConvEpilogue::default())?
                    .bias_add(&bias, options.format)?;
                return then_residual(
                    affine_ops(y, &scale, &shift, None)?,
                    residual,
                    fused.activation,
                );
            };
            // ((conv + bias) * scale) + shift = conv * scale + (bias * scale + shift).
            epilogue.shift = Some(bias.mul(&scale_vector)?.add(&shift_vector)?);
            epilogue.scale = Some(scale_vector);
        } else {
            epilogue.shift = Some(bias.into_owned());
        }
    }
    // The filter as the plan packed it for the device, where it did.
    let packed = cx
        .packed
        .filter(|p| !fused.depthwise && p.filter().dims() == filter.dims());
    let convolve = |epilogue: &ConvEpilogue| match packed {
        Some(packed) => x.conv2d_packed(packed, &options, epilogue),
        None => x.conv2d_fused(&filter, &options, fused.depthwise, epilogue),
    };
    // The residual in the kernel's epilogue where it has the output's batch (the plan saw
    // the rest of its shape); else added, as `AddV2` broadcasts, after it.
    match residual {
        Some(r) if r.dims().first() == x.dims().first() => {
            epilogue.residual = Some(r.clone());
            convolve(&epilogue)
        }
        Some(r) => {
            epilogue.activation = None;
            let y = convolve(&epilogue)?;
            then_residual(y, Some(r), fused.activation)
        }
        None => convolve(&epilogue),
    }
}

/// `t` as a vector of `channels` values of `dtype`: from `[C]`, or `[1, 1, 1, C]` as Keras
/// reshapes a per-channel vector to broadcast it; `None` for anything else.
fn per_channel(t: &Tensor, channels: usize, dtype: polytensor_core::DataType) -> Option<Tensor> {
    let dims = t.dims();
    let ones = dims.len() <= 4
        && dims
            .split_last()
            .is_some_and(|(_, lead)| lead.iter().all(|&d| d == 1));
    let fits = ones && t.num_elements() == channels && t.dtype() == dtype;
    fits.then(|| t.reshape([channels]).ok()).flatten()
}

/// A `Mul` by a per-channel vector, the `AddV2` of one and an optional `Relu`/`Relu6`, run
/// as one step (the session's fusion of a batch norm in inference that no convolution
/// precedes, as Keras writes it). Inputs: the image, the scale, the shift.
pub(crate) fn run_channel_affine(
    activation: Option<UnaryOp>,
    cx: &RunCtx<'_, '_>,
) -> Result<Outputs> {
    let (x, scale, shift) = (cx.tensor(0)?, cx.tensor(1)?, cx.tensor(2)?);
    let channels = x.dims().last().copied().unwrap_or(0);
    let vectors =
        per_channel(&scale, channels, x.dtype()).zip(per_channel(&shift, channels, x.dtype()));
    let y = match vectors {
        Some((scale, shift)) if x.rank() >= 1 => x.channel_affine(&ConvEpilogue {
            scale: Some(scale),
            shift: Some(shift),
            activation,
            ..ConvEpilogue::default()
        })?,
        // Not the per-channel vectors the plan saw: the ops one after another.
        _ => affine_ops(x.into_owned(), &scale, &shift, activation)?,
    };
    one(y)
}

/// `activation(y * scale + shift)` as the graph's ops compute it, one after another (what a
/// fused step runs when its operands are not the per-channel vectors its plan saw).
fn affine_ops(
    y: Tensor,
    scale: &Tensor,
    shift: &Tensor,
    activation: Option<UnaryOp>,
) -> Result<Tensor> {
    let y = y.mul(scale)?.add(shift)?;
    match activation {
        Some(op) => y.unary(op),
        None => Ok(y),
    }
}

/// Keras's swish run as one step: `x * Sigmoid(x * beta)`, inputs the image and (where the
/// graph scales it) the scalar `beta`.
pub(crate) fn run_swish(cx: &RunCtx<'_, '_>) -> Result<Outputs> {
    let x = cx.tensor(0)?;
    let beta = match cx.inputs.len() {
        1 => None,
        _ => Some(cx.tensor(1)?),
    };
    let y = match &beta {
        None => x.swish(1.0)?,
        Some(beta) if beta.num_elements() == 1 && beta.dtype() == x.dtype() => x.swish(
            beta.cast(polytensor_core::DataType::Double)?
                .item::<f64>()?,
        )?,
        // Not the scalar the plan saw: the ops one after another.
        Some(beta) => x.mul(&x.mul(beta)?.unary(UnaryOp::Sigmoid)?)?,
    };
    one(y)
}

/// Keras 3's exact GELU run as one step (input: the image).
pub(crate) fn run_gelu(cx: &RunCtx<'_, '_>) -> Result<Outputs> {
    one(cx.tensor(0)?.gelu()?)
}

/// Keras's hard swish run as one step (input: the tensor).
pub(crate) fn run_hard_swish(cx: &RunCtx<'_, '_>, divide: bool) -> Result<Outputs> {
    one(cx.tensor(0)?.hard_swish(divide)?)
}

/// Keras 3's layer normalization run as one step (inputs: the tensor, then `gamma` and
/// `beta` where the pattern had them).
pub(crate) fn run_layer_norm(
    cx: &RunCtx<'_, '_>,
    epsilon: f32,
    gamma: bool,
    beta: bool,
) -> Result<Outputs> {
    let x = cx.tensor(0)?;
    let gamma_t = if gamma { Some(cx.tensor(1)?) } else { None };
    let beta_t = if beta {
        Some(cx.tensor(1 + usize::from(gamma))?)
    } else {
        None
    };
    one(x.layer_norm(gamma_t.as_deref(), beta_t.as_deref(), f64::from(epsilon))?)
}

fn one(t: Tensor) -> Result<Outputs> {
    Ok(smallvec![Value::Tensor(t)])
}
