//! The gradients of the neural-network ops and the losses, as TensorFlow's gradient kernels
//! compute them: the activations' (`ReluGrad`, `Relu6Grad`, `SigmoidGrad`, `TanhGrad`,
//! `SqrtGrad`, `RsqrtGrad`, `ReciprocalGrad`), `BiasAddGrad`, `Conv2DBackpropFilter`,
//! `MaxPoolGrad`, `AvgPoolGrad`, `L2Loss`, and the softmax cross entropies with their
//! gradients. Each is a composition of ops every device has (elementwise ops, reductions,
//! views, padding and the forward convolution), so it runs wherever the forward op runs.

use super::nn::{Conv2dOptions, Pool2dOptions};
use super::Tensor;
use crate::dtype::DataType;
use crate::element::Scalar;
use crate::error::{Error, Result};
use crate::ops::{BinaryOp, ReduceOp, UnaryOp};
use crate::plan::window::{DataFormat, Padding, Window, WindowDim, WindowGeometry};
use crate::shape::TensorShape;

impl Tensor {
    /// The gradient through unary `op` of `dy`, the gradient of its result, given `value`:
    /// the op's input for `Relu` and `Relu6` (TensorFlow's `ReluGrad(gradients, features)`),
    /// its output for `Sigmoid`, `Tanh`, `Sqrt`, `Rsqrt` and `Reciprocal`
    /// (`SigmoidGrad(y, dy)` and the like). `value` and `dy` have one shape and dtype.
    ///
    /// ```
    /// use polytensor_core::{ops::UnaryOp, Tensor};
    /// let cpu = polytensor_cpu::CpuDevice::shared();
    /// let x = Tensor::from_slice(&[-1.0f32, 2.0], [2], &cpu).unwrap();
    /// let dy = Tensor::from_slice(&[5.0f32, 7.0], [2], &cpu).unwrap();
    /// let dx = Tensor::unary_grad(UnaryOp::Relu, &x, &dy).unwrap();
    /// assert_eq!(dx.to_vec::<f32>().unwrap(), [0.0, 7.0]);
    /// ```
    pub fn unary_grad(op: UnaryOp, value: &Tensor, dy: &Tensor) -> Result<Tensor> {
        let name = unary_grad_name(op)?;
        if value.shape() != dy.shape() {
            return Err(Error::invalid(format!(
                "Inputs to operation {name} of type {name} must have the same size and shape.  \
                 Input 0: {} != input 1: {}",
                dy.shape(),
                value.shape()
            )));
        }
        if value.dtype != dy.dtype {
            return Err(Error::DTypeMismatch {
                op: name,
                expected: value.dtype.to_string(),
                found: dy.dtype,
            });
        }
        value.check_same_device(dy, "unary_grad")?;
        let device = dy.device();
        let fused = Tensor::produce_if(dy.shape().clone(), dy.dtype, device, |out| {
            device.unary_grad(op, &value.view(), &dy.view(), out)
        })?;
        if let Some(grad) = fused {
            return Ok(grad);
        }
        let number = |v: f64| Tensor::full(TensorShape::scalar(), v, dy.dtype, dy.device());
        let zero = number(0.0)?;
        match op {
            // dy * (x > 0), a product as TensorFlow's (a NaN gradient stays NaN).
            UnaryOp::Relu => dy.mul(&value.binary(BinaryOp::Gt, &zero)?.cast(dy.dtype)?),
            UnaryOp::Relu6 => dy.mul(
                &value
                    .binary(BinaryOp::Gt, &zero)?
                    .binary(BinaryOp::And, &value.binary(BinaryOp::Lt, &number(6.0)?)?)?
                    .cast(dy.dtype)?,
            ),
            // dy * y * (1 - y), in that order, as TensorFlow's functor.
            UnaryOp::Sigmoid => dy.mul(value)?.mul(&number(1.0)?.sub(value)?),
            // dy * (1 - y * y).
            UnaryOp::Tanh => dy.mul(&number(1.0)?.sub(&value.mul(value)?)?),
            // 0.5 * dy / y.
            UnaryOp::Sqrt => number(0.5)?.mul(dy)?.div(value),
            // -0.5 * (dy * y) * (y * y).
            UnaryOp::Rsqrt => number(-0.5)?.mul(&dy.mul(value)?)?.mul(&value.mul(value)?),
            // -dy * y * y.
            _ => dy.unary(UnaryOp::Neg)?.mul(value)?.mul(value),
        }
    }

    /// TensorFlow's `BiasAddGrad`: this gradient of a `BiasAdd` summed over every dim but
    /// the channels (the last in NHWC, dim 1 in NCHW): the bias's gradient.
    pub fn bias_add_grad(&self, format: DataFormat) -> Result<Tensor> {
        if self.rank() < 2 {
            return Err(Error::invalid(format!(
                "Input tensor must be at least 2D: {}",
                self.shape()
            )));
        }
        let channel = match format {
            DataFormat::Nhwc => self.rank() - 1,
            DataFormat::Nchw => 1,
        };
        let axes: Vec<isize> = (0..self.rank())
            .filter(|&d| d != channel)
            .map(|d| d as isize)
            .collect();
        self.reduce(ReduceOp::Sum, &axes, false)
    }

    /// TensorFlow's `Conv2DBackpropFilter`: the gradient of a convolution's filter (of dims
    /// `filter_sizes`, `[k_h, k_w, channels, filters]`) from this, its input, and `dy`, the
    /// gradient of its output; `options` are the forward convolution's.
    ///
    /// It is itself a convolution: the input with its batch and channel axes swapped,
    /// convolved with `dy` (its batch as the input channels) at the forward's dilation as
    /// stride and its stride as dilation.
    pub fn conv2d_backprop_filter(
        &self,
        filter_sizes: [usize; 4],
        dy: &Tensor,
        options: &Conv2dOptions,
    ) -> Result<Tensor> {
        const OP: &str = "Conv2DBackpropFilter";
        let (x, dy) = self.filter_grad_operands(dy, options, OP)?;
        let [kh, kw, in_depth, filters] = filter_sizes;
        let batch = x.dims()[0];
        if in_depth != x.dims()[3] {
            return Err(Error::invalid(format!(
                "{OP}: input depth {} must equal the filter's input depth {in_depth} \
                 (grouped convolutions have no gradient here)",
                x.dims()[3]
            )));
        }
        if dy.dims()[3] != filters {
            return Err(Error::invalid(format!(
                "{OP}: out_backprop {} does not match the filter's {filters} filters",
                dy.shape()
            )));
        }
        let (cropped, swapped) = filter_grad_window(&x, &dy, [kh, kw], options, OP)?;
        if batch == 0 || dy.dims()[1] == 0 || dy.dims()[2] == 0 {
            return Tensor::zeros(filter_sizes, self.dtype, self.device());
        }
        if let Some(direct) = x.direct_backprop_filter(&dy, filter_sizes, options)? {
            return Ok(direct);
        }
        let x = cropped;
        // [channels, h, w, batch] images, convolved with [out_h, out_w, batch, filters].
        let images = x.permute(&[3, 1, 2, 0])?.contiguous()?;
        let taps = dy.permute(&[1, 2, 0, 3])?.contiguous()?;
        images
            .conv2d(&taps, &swapped)?
            .permute(&[1, 2, 0, 3])?
            .contiguous()
    }

    /// [`Tensor::conv2d_backprop_filter`] by the device's direct kernel
    /// ([`Device::conv2d_backprop_filter`]), for this NHWC input and NHWC `dy` already
    /// checked against each other; `None` where the device has none for the dtype.
    fn direct_backprop_filter(
        &self,
        dy: &Tensor,
        [kh, kw, channels, filters]: [usize; 4],
        options: &Conv2dOptions,
    ) -> Result<Option<Tensor>> {
        let device = self.device();
        if !device.window_kernels(self.dtype) {
            return Ok(None);
        }
        let windows = super::nn::spatial_windows([kh, kw], options.strides, options.dilations);
        let input = [self.dims()[1], self.dims()[2]];
        let mut before = [0; 2];
        for (d, window) in windows.iter().enumerate() {
            before[d] = window.resolve(input[d], &options.padding, d)?.before;
        }
        let geometry = WindowGeometry {
            batch: self.dims()[0],
            input,
            channels,
            windows,
            before,
            output: [dy.dims()[1], dy.dims()[2]],
            filters,
        };
        let (x, dy) = (self.contiguous()?, dy.contiguous()?);
        Tensor::produce_if(
            TensorShape::new(&[kh, kw, channels, filters])?,
            self.dtype,
            device,
            |out| device.conv2d_backprop_filter(&x.view(), &dy.view(), &geometry, out),
        )
    }

    /// TensorFlow's `DepthwiseConv2dNativeBackpropFilter`: the gradient of a depthwise
    /// convolution's filter (of dims `filter_sizes`, `[k_h, k_w, channels, multiplier]`)
    /// from this, its input, and `dy`, the gradient of its output; `options` are the
    /// forward convolution's.
    ///
    /// It is itself a depthwise convolution, of one image whose channels are the input's
    /// `(batch, channel, multiplier)` triples (each channel repeated `multiplier` times),
    /// each by its own filter, that channel's gradient, at the forward's dilation as stride
    /// and its stride as dilation; the results summed over the batch.
    pub fn depthwise_conv2d_backprop_filter(
        &self,
        filter_sizes: [usize; 4],
        dy: &Tensor,
        options: &Conv2dOptions,
    ) -> Result<Tensor> {
        const OP: &str = "DepthwiseConv2dNativeBackpropFilter";
        let (x, dy) = self.filter_grad_operands(dy, options, OP)?;
        let [kh, kw, channels, multiplier] = filter_sizes;
        let [batch, h, w, depth] = [0, 1, 2, 3].map(|d| x.dims()[d]);
        if depth != channels {
            return Err(Error::invalid(format!(
                "{OP}: input and filter must have the same depth: {depth} vs {channels}"
            )));
        }
        let lanes = channels.checked_mul(multiplier);
        if lanes != Some(dy.dims()[3]) {
            return Err(Error::invalid(format!(
                "{OP}: out_backprop {} does not match the filter's {channels} x {multiplier} \
                 output channels",
                dy.shape()
            )));
        }
        let (x, swapped) = filter_grad_window(&x, &dy, [kh, kw], options, OP)?;
        let [out_h, out_w] = [dy.dims()[1], dy.dims()[2]];
        if batch == 0 || out_h == 0 || out_w == 0 || h == 0 || w == 0 {
            return Tensor::zeros(filter_sizes, self.dtype, self.device());
        }
        let [h, w] = [x.dims()[1], x.dims()[2]];
        let lanes = TensorShape::new(&[batch, channels, multiplier])?.num_elements();
        // [1, h, w, (n, c, m)]: channel c of image n, once per multiplier.
        let image = x
            .permute(&[1, 2, 0, 3])?
            .reshape([h, w, batch, channels, 1])?
            .broadcast_to([h, w, batch, channels, multiplier])?
            .contiguous()?
            .reshape([1, h, w, lanes])?;
        // [out_h, out_w, (n, c, m), 1]: each lane's filter is its gradient.
        let taps = dy
            .permute(&[1, 2, 0, 3])?
            .contiguous()?
            .reshape([out_h, out_w, lanes, 1])?;
        image
            .depthwise_conv2d(&taps, &swapped)?
            .reshape([kh, kw, batch, channels, multiplier])?
            .reduce(ReduceOp::Sum, &[2], false)
    }

    /// This input and `dy` of a convolution whose filter's gradient `op` takes, in NHWC,
    /// checked: one device and dtype, the same batch.
    fn filter_grad_operands(
        &self,
        dy: &Tensor,
        options: &Conv2dOptions,
        op: &'static str,
    ) -> Result<(Tensor, Tensor)> {
        self.check_same_device(dy, "conv2d_backprop_filter")?;
        if self.dtype != dy.dtype {
            return Err(Error::DTypeMismatch {
                op,
                expected: self.dtype.to_string(),
                found: dy.dtype,
            });
        }
        let x = self.to_nhwc(options.format, op)?;
        let dy = dy.to_nhwc(options.format, op)?;
        if dy.dims()[0] != x.dims()[0] {
            return Err(Error::invalid(format!(
                "{op}: input and out_backprop must have the same batch size: {} vs {}",
                x.dims()[0],
                dy.dims()[0]
            )));
        }
        Ok((x, dy))
    }

    /// TensorFlow's `MaxPoolGrad`: the gradient of a max pool's input from this, its input,
    /// `y`, its output, and `dy`, the gradient of its output. Each window's gradient goes to
    /// the first of its elements (in row-major order) that equals its maximum, as
    /// TensorFlow's CPU kernel has it; overlapping windows add up.
    pub fn max_pool2d_grad(
        &self,
        y: &Tensor,
        dy: &Tensor,
        options: &Pool2dOptions,
    ) -> Result<Tensor> {
        const OP: &str = "MaxPoolGrad";
        for other in [y, dy] {
            self.check_same_device(other, "max_pool2d_grad")?;
            if other.dtype != self.dtype {
                return Err(Error::DTypeMismatch {
                    op: OP,
                    expected: self.dtype.to_string(),
                    found: other.dtype,
                });
            }
        }
        let x = self.to_nhwc(options.format, OP)?;
        let (y, dy) = (
            y.to_nhwc(options.format, OP)?,
            dy.to_nhwc(options.format, OP)?,
        );
        let geometry = PoolGeometry::new(OP, &x.dims(), options, &y, &dy)?;
        let (x, y, dy) = (x.contiguous()?, y.contiguous()?, dy.contiguous()?);
        let device = x.device();
        let windows = geometry.windows();
        let direct = Tensor::produce_if(x.shape().clone(), x.dtype, device, |out| {
            device.max_pool_grad(&x.view(), &y.view(), &dy.view(), &windows, out)
        })?;
        if let Some(grad) = direct {
            return grad.into_format(options.format);
        }
        let lowest = Scalar::F64(f64::NEG_INFINITY);
        let [(top, bottom), (left, right)] = geometry.pads();
        let padded = x
            .pad(&[(0, 0), (top, bottom), (left, right), (0, 0)], lowest)?
            .contiguous()?;
        let zero = Tensor::full(TensorShape::scalar(), 0.0, dy.dtype, dy.device())?;
        if let Some(windows) = geometry.tiles(&padded)? {
            return geometry
                .max_tiles_grad(&windows, &y, &dy, &zero)?
                .into_format(options.format);
        }
        let mut taken: Option<Tensor> = None;
        let mut canvas: Option<Tensor> = None;
        for a in 0..options.window[0] {
            for b in 0..options.window[1] {
                let tap = geometry.tap(&padded, [a, b])?;
                let mut hit = tap.binary(BinaryOp::Eq, &y)?;
                if let Some(taken) = &taken {
                    hit = hit.binary(BinaryOp::And, &taken.unary(UnaryOp::Not)?)?;
                }
                let part = geometry.place(&hit.where_(&dy, &zero)?, [a, b])?;
                taken = Some(match taken {
                    Some(t) => t.binary(BinaryOp::Or, &hit)?,
                    None => hit,
                });
                canvas = Some(match canvas {
                    Some(c) => c.add(&part)?,
                    None => part,
                });
            }
        }
        geometry.crop(canvas, &dy)?.into_format(options.format)
    }

    /// TensorFlow's `AvgPoolGrad`: the gradient of an average pool's input, of dims
    /// `input_dims` (in `options`' format), from `self`, the gradient of its output. Each
    /// window's gradient is shared among its elements that are not padding.
    pub fn avg_pool2d_grad(
        &self,
        input_dims: [usize; 4],
        options: &Pool2dOptions,
    ) -> Result<Tensor> {
        const OP: &str = "AvgPoolGrad";
        let dy = self.to_nhwc(options.format, OP)?;
        let nhwc = match options.format {
            DataFormat::Nhwc => input_dims,
            DataFormat::Nchw => [input_dims[0], input_dims[2], input_dims[3], input_dims[1]],
        };
        let geometry = PoolGeometry::new(OP, &nhwc, options, &dy, &dy)?;
        // The number of input elements (not padding) under each window.
        let counts = [0, 1].map(|d| {
            let (window, stride, input) = (options.window[d], options.strides[d], nhwc[1 + d]);
            let before = geometry.dims[d].before;
            (0..geometry.dims[d].output)
                .map(|i| {
                    let start = (i * stride).saturating_sub(before);
                    let end = (i * stride + window).saturating_sub(before).min(input);
                    end.saturating_sub(start).max(1) as f64
                })
                .collect::<Vec<f64>>()
        });
        let per_window: Vec<f64> = counts[0]
            .iter()
            .flat_map(|&r| counts[1].iter().map(move |&c| r * c))
            .collect();
        let [out_h, out_w] = [0, 1].map(|d| geometry.dims[d].output);
        let per_window = Tensor::from_slice(&per_window, [1, out_h, out_w, 1], self.device())?
            .cast(self.dtype)?;
        let share = dy.div(&per_window)?;
        let mut canvas: Option<Tensor> = None;
        for a in 0..options.window[0] {
            for b in 0..options.window[1] {
                let part = geometry.place(&share, [a, b])?;
                canvas = Some(match canvas {
                    Some(c) => c.add(&part)?,
                    None => part,
                });
            }
        }
        geometry.crop(canvas, &dy)?.into_format(options.format)
    }

    /// TensorFlow's `L2Loss`: half the sum of the squares, `sum(x * x) / 2`, a scalar.
    pub fn l2_loss(&self) -> Result<Tensor> {
        if !self.dtype.is_float() {
            return Err(Error::invalid(format!(
                "L2Loss takes half, bfloat16, float and double, not {}",
                self.dtype
            )));
        }
        let half = Tensor::full(TensorShape::scalar(), 0.5, self.dtype, self.device())?;
        self.mul(self)?.mul(&half)?.reduce_all(ReduceOp::Sum)
    }

    /// TensorFlow's `SoftmaxCrossEntropyWithLogits` on these `[batch, classes]` logits and
    /// `labels` (a distribution per row; both broadcast to one 2-d shape): the loss per row,
    /// `-sum(labels * log_softmax(logits))`, and its gradient with respect to the logits,
    /// `softmax(logits) - labels`.
    pub fn softmax_cross_entropy(&self, labels: &Tensor) -> Result<(Tensor, Tensor)> {
        self.check_same_device(labels, "softmax_cross_entropy")?;
        if self.dtype != labels.dtype {
            return Err(Error::DTypeMismatch {
                op: "SoftmaxCrossEntropyWithLogits",
                expected: self.dtype.to_string(),
                found: labels.dtype,
            });
        }
        let dims = crate::ops::broadcast_shapes(self.shape(), labels.shape()).map_err(|_| {
            Error::invalid(format!(
                "logits and labels must be broadcastable: logits_size={} labels_size={}",
                self.shape(),
                labels.shape()
            ))
        })?;
        if dims.rank() != 2 {
            return Err(Error::invalid(format!(
                "logits and labels must be either 2-dimensional, or broadcasted to be \
                 2-dimensional: logits {} labels {}",
                self.shape(),
                labels.shape()
            )));
        }
        let logits = self.broadcast_to(dims.clone())?;
        let labels = labels.broadcast_to(dims)?;
        cross_entropy_of(&logits, &labels)
    }

    /// TensorFlow's `SparseSoftmaxCrossEntropyWithLogits` on these `[batch, classes]` logits
    /// and integer `labels` (`[batch]`, each in `[0, classes)`): the loss per row and its
    /// gradient with respect to the logits.
    pub fn sparse_softmax_cross_entropy(&self, labels: &Tensor) -> Result<(Tensor, Tensor)> {
        self.check_same_device(labels, "sparse_softmax_cross_entropy")?;
        if self.rank() != 2 {
            return Err(Error::invalid(format!(
                "logits must be 2-D, but got shape {}",
                self.shape()
            )));
        }
        if labels.rank() != 1 {
            return Err(Error::invalid(format!(
                "labels must be 1-D, but got shape {}",
                labels.shape()
            )));
        }
        if !matches!(labels.dtype, DataType::Int32 | DataType::Int64) {
            return Err(Error::invalid(format!(
                "labels must be int32 or int64, not {}",
                labels.dtype
            )));
        }
        let [batch, classes] = [self.dims()[0], self.dims()[1]];
        if labels.dims()[0] != batch {
            return Err(Error::invalid(format!(
                "logits and labels must have the same first dimension, got logits shape {} \
                 and labels shape {}",
                self.shape(),
                labels.shape()
            )));
        }
        if classes == 0 && batch > 0 {
            return Err(Error::invalid(
                "Must have at least one class, but got logits shape [batch, 0]",
            ));
        }
        let values: Vec<i64> = labels.cast(DataType::Int64)?.to_vec()?;
        if values.iter().any(|&l| l < 0 || l as u64 >= classes as u64) {
            let bad = values
                .iter()
                .find(|&&l| l < 0 || l as u64 >= classes as u64)
                .copied()
                .unwrap_or_default();
            let all: Vec<String> = values.iter().map(i64::to_string).collect();
            return Err(Error::invalid(format!(
                "Received a label value of {bad} which is outside the valid range of [0, \
                 {classes}).  Label values: {}",
                all.join(" ")
            )));
        }
        let one_hot =
            labels.one_hot(classes, Scalar::F64(1.0), Scalar::F64(0.0), -1, self.dtype)?;
        cross_entropy_of(self, &one_hot)
    }
}

/// The loss per row and its gradient for logits and labels of one 2-d shape.
fn cross_entropy_of(logits: &Tensor, labels: &Tensor) -> Result<(Tensor, Tensor)> {
    let log_probs = logits.contiguous()?.log_softmax()?;
    let loss = labels
        .mul(&log_probs)?
        .reduce(ReduceOp::Sum, &[-1], false)?
        .unary(UnaryOp::Neg)?;
    let backprop = log_probs.unary(UnaryOp::Exp)?.sub(labels)?;
    Ok((loss, backprop))
}

/// TensorFlow's name of the gradient op of unary `op`, for the ones that have one.
fn unary_grad_name(op: UnaryOp) -> Result<&'static str> {
    Ok(match op {
        UnaryOp::Relu => "ReluGrad",
        UnaryOp::Relu6 => "Relu6Grad",
        UnaryOp::Sigmoid => "SigmoidGrad",
        UnaryOp::Tanh => "TanhGrad",
        UnaryOp::Sqrt => "SqrtGrad",
        UnaryOp::Rsqrt => "RsqrtGrad",
        UnaryOp::Recip => "ReciprocalGrad",
        other => {
            return Err(Error::invalid(format!(
                "{other} has no gradient op of its own (its gradient is made of other ops)"
            )))
        }
    })
}

/// Where a pool's windows lie in its NHWC input, for taking each tap of every window as
/// one strided view and putting a gradient back at those places.
struct PoolGeometry {
    /// `[batch, height, width, channels]` of the input.
    input: [usize; 4],
    dims: [WindowDim; 2],
    window: [usize; 2],
    strides: [usize; 2],
}

impl PoolGeometry {
    /// The geometry of `options` on an input of NHWC `input` dims, checking that the
    /// output `y` and its gradient `dy` have the output's dims.
    fn new(
        op: &str,
        input: &[usize],
        options: &Pool2dOptions,
        y: &Tensor,
        dy: &Tensor,
    ) -> Result<Self> {
        let input: [usize; 4] = input.try_into().map_err(|_| {
            Error::invalid(format!(
                "{op}: the input must be 4-dimensional, got {input:?}"
            ))
        })?;
        let dims = [0, 1].map(|d| {
            Window {
                size: options.window[d],
                stride: options.strides[d],
                dilation: 1,
            }
            .resolve(input[1 + d], &options.padding, d)
        });
        let [dims_h, dims_w] = dims;
        let dims = [dims_h?, dims_w?];
        let want = [input[0], dims[0].output, dims[1].output, input[3]];
        for (name, t) in [("orig_output", y), ("grad", dy)] {
            if t.dims() != want {
                return Err(Error::invalid(format!(
                    "{op}: {name} must have the pool's output shape {want:?} (NHWC), got {}",
                    t.shape()
                )));
            }
        }
        Ok(Self {
            input,
            dims,
            window: options.window,
            strides: options.strides,
        })
    }

    /// The windows as a device's window kernels take them.
    fn windows(&self) -> WindowGeometry {
        WindowGeometry {
            batch: self.input[0],
            input: [self.input[1], self.input[2]],
            channels: self.input[3],
            windows: [0, 1].map(|d| Window {
                size: self.window[d],
                stride: self.strides[d],
                dilation: 1,
            }),
            before: [self.dims[0].before, self.dims[1].before],
            output: [self.dims[0].output, self.dims[1].output],
            filters: 1,
        }
    }

    /// The padding of the input that every window's every tap lies in.
    fn pads(&self) -> [(usize, usize); 2] {
        [0, 1].map(|d| {
            let reach = (self.dims[d].output.max(1) - 1) * self.strides[d] + self.window[d];
            let after = reach.saturating_sub(self.dims[d].before + self.input[1 + d]);
            (self.dims[d].before, after)
        })
    }

    /// Tap `[a, b]` of every window: a `[batch, out_h, out_w, channels]` strided view of
    /// `padded` (contiguous, padded by [`PoolGeometry::pads`]).
    fn tap(&self, padded: &Tensor, [a, b]: [usize; 2]) -> Result<Tensor> {
        let strides = padded.layout.strides();
        let dims = [
            self.input[0],
            self.dims[0].output,
            self.dims[1].output,
            self.input[3],
        ];
        let step = |d: usize, by: usize| strides[d] * by as isize;
        let offset = padded.layout.offset() as isize + step(1, a) + step(2, b);
        padded.as_strided(
            dims,
            &[
                strides[0],
                step(1, self.strides[0]),
                step(2, self.strides[1]),
                strides[3],
            ],
            offset as usize,
        )
    }

    /// Where the windows tile the padded input (the stride is the window), `padded` as
    /// `[batch, out_h, k_h, out_w, k_w, channels]`: each window's elements at once.
    fn tiles(&self, padded: &Tensor) -> Result<Option<Tensor>> {
        if self.strides != self.window {
            return Ok(None);
        }
        let [kh, kw] = self.window;
        let [oh, ow] = [self.dims[0].output, self.dims[1].output];
        let [n, c] = [self.input[0], self.input[3]];
        let cropped = padded.narrow(1, 0, oh * kh)?.narrow(2, 0, ow * kw)?;
        Ok(Some(cropped.contiguous()?.reshape([n, oh, kh, ow, kw, c])?))
    }

    /// `MaxPoolGrad` on tiling windows ([`PoolGeometry::tiles`]): each window's gradient to
    /// its first element (row-major) equal to the maximum. The taps are ranked `k_h * k_w`
    /// down to 1; the first maximum is the one of highest rank among those equal to `y`.
    fn max_tiles_grad(
        &self,
        windows: &Tensor,
        y: &Tensor,
        dy: &Tensor,
        zero: &Tensor,
    ) -> Result<Tensor> {
        let [kh, kw] = self.window;
        let [oh, ow] = [self.dims[0].output, self.dims[1].output];
        let [n, c] = [self.input[0], self.input[3]];
        let per_window = [n, oh, 1, ow, 1, c];
        let hits = windows.binary(BinaryOp::Eq, &y.reshape(per_window)?)?;
        // Ranks in float32 (exact to 2^24 taps), whose reduction over one middle axis at a
        // time has the fast kernels.
        let ranks: Vec<f32> = (0..kh * kw).rev().map(|r| (r + 1) as f32).collect();
        let ranks = Tensor::from_slice(&ranks, [1, 1, kh, 1, kw, 1], windows.device())?;
        let scores = hits.cast(DataType::Float)?.mul(&ranks)?;
        let best = scores
            .reshape([n * oh * kh * ow, kw, c])?
            .reduce(ReduceOp::Max, &[1], false)?
            .reshape([n * oh, kh, ow * c])?
            .reduce(ReduceOp::Max, &[1], false)?
            .reshape(per_window)?;
        let first = scores
            .binary(BinaryOp::Eq, &best)?
            .binary(BinaryOp::And, &hits)?;
        let spread = dy
            .reshape(per_window)?
            .broadcast_to(windows.dims())?
            .contiguous()?;
        let grad = first
            .where_(&spread, zero)?
            .reshape([n, oh * kh, ow * kw, c])?;
        // The input's rows and columns: past the padding before, padded with zeros where
        // the windows stop short of the input's end.
        let [(top, _), (left, _)] = self.pads();
        let [h, w] = [self.input[1], self.input[2]];
        let grad = grad.narrow(1, top, (oh * kh - top).min(h))?;
        let grad = grad.narrow(2, left, (ow * kw - left).min(w))?;
        let rest = [h - grad.dims()[1], w - grad.dims()[2]];
        if rest == [0, 0] {
            return grad.contiguous();
        }
        grad.pad(
            &[(0, 0), (0, rest[0]), (0, rest[1]), (0, 0)],
            Scalar::F64(0.0),
        )
    }

    /// `part` (one value per window) put at tap `[a, b]` of each window, zeros elsewhere:
    /// a `[batch, rows, cols, channels]` canvas of the padded input's frame, `rows` and
    /// `cols` covering every tap.
    fn place(&self, part: &Tensor, [a, b]: [usize; 2]) -> Result<Tensor> {
        let mut t = part.clone();
        for (d, offset) in [(0usize, a), (1usize, b)] {
            let axis = 1 + d;
            let (out, stride) = (self.dims[d].output, self.strides[d]);
            // Each value followed by `stride - 1` zeros, then shifted by the tap.
            let mut spread: Vec<usize> = t.dims().to_vec();
            t = t.unsqueeze(axis as isize + 1)?;
            let mut pairs = vec![(0, 0); t.rank()];
            pairs[axis + 1] = (0, stride - 1);
            t = t.pad(&pairs, Scalar::F64(0.0))?;
            spread[axis] = out * stride;
            t = t.reshape(spread)?;
            let frame = self.frame(d);
            let mut pairs = vec![(0, 0); t.rank()];
            pairs[axis] = (
                offset,
                (frame + stride).saturating_sub(offset + out * stride),
            );
            t = t
                .pad(&pairs, Scalar::F64(0.0))?
                .narrow(axis as isize, 0, frame)?;
        }
        Ok(t)
    }

    /// The rows (`d` 0) or columns of the canvases [`PoolGeometry::place`] makes.
    fn frame(&self, d: usize) -> usize {
        let (before, after) = self.pads()[d];
        before + self.input[1 + d] + after
    }

    /// The input's part of the summed canvases (zeros for an empty pool).
    fn crop(&self, canvas: Option<Tensor>, like: &Tensor) -> Result<Tensor> {
        let Some(canvas) = canvas else {
            return Tensor::zeros(self.input, like.dtype, like.device());
        };
        canvas
            .narrow(1, self.dims[0].before, self.input[1])?
            .narrow(2, self.dims[1].before, self.input[2])?
            .contiguous()
    }
}

/// The NHWC input `x` of a convolution by a `taps` filter, cropped to the rows its windows
/// reach, and the options of the convolution of it by `dy` that gives the filter's
/// gradient: the forward's padding (what remains past the crop), its dilation as the
/// stride and its stride as the dilation. `Err` where `dy`'s size is not the forward's.
fn filter_grad_window(
    x: &Tensor,
    dy: &Tensor,
    taps: [usize; 2],
    options: &Conv2dOptions,
    op: &str,
) -> Result<(Tensor, Conv2dOptions)> {
    let mut pads = [(0usize, 0usize); 2];
    let mut crop = [x.dims()[1], x.dims()[2]];
    for d in 0..2 {
        let (size, input) = (taps[d], x.dims()[1 + d]);
        let window = Window {
            size,
            stride: options.strides[d],
            dilation: options.dilations[d],
        };
        let resolved = window.resolve(input, &options.padding, d)?;
        let out = dy.dims()[1 + d];
        if resolved.output != out {
            return Err(Error::invalid(format!(
                "{op}: Size of out_backprop doesn't match computed: actual = {out}, computed = \
                 {} spatial_dim: {} input: {input} filter: {size} output: {out} stride: {} \
                 dilation: {}",
                resolved.output,
                d + 1,
                window.stride,
                window.dilation
            )));
        }
        // The input rows the windows reach, padding included: the last tap of the last
        // window is the end (rows past it, which VALID strides skip, are cropped).
        let reach = window.span()? + (out.max(1) - 1) * window.stride;
        let end = reach.saturating_sub(resolved.before);
        crop[d] = end.min(input);
        pads[d] = (resolved.before, end.saturating_sub(input));
    }
    let x = x.narrow(1, 0, crop[0])?.narrow(2, 0, crop[1])?;
    let swapped = Conv2dOptions {
        strides: options.dilations,
        dilations: options.strides,
        padding: Padding::Explicit(pads.to_vec()),
        format: DataFormat::Nhwc,
    };
    Ok((x, swapped))
}
