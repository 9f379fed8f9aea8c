//! The inference layers of a convolutional network, as TensorFlow's ops define them:
//! `Conv2D`, `DepthwiseConv2dNative`, `MaxPool`, `AvgPool`, `BiasAdd`,
//! `FusedBatchNormV3` (inference), `Softmax` and `LogSoftmax`.
//!
//! Each is composed from the device's own kernels, so it runs on every backend: a window op
//! pads its input ([`Tensor::pad`]), views it as `[batch, out_h, out_w, k_h, k_w, channels]`
//! (overlapping strides, no copy), and then a convolution copies that view into rows
//! (im2col) for one matmul with the filter, a depthwise convolution multiplies it by the
//! filter and sums the taps, and pooling reduces the taps.

use super::shape_ops::lowest;
use super::Tensor;
use crate::device::{Device, Epilogue};
use crate::dtype::DataType;
use crate::element::Scalar;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::ops::UnaryOp;
use crate::plan::window::{
    resolve_windows, DataFormat, Padding, Window, WindowDim, WindowGeometry,
};
use crate::shape::TensorShape;
use crate::{OutView, TensorView};

/// The attributes of a 2-D convolution (TensorFlow's `Conv2D` and
/// `DepthwiseConv2dNative`), for spatial dims only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conv2dOptions {
    /// The step between windows, `[height, width]`.
    pub strides: [usize; 2],
    /// The step between filter taps, `[height, width]`.
    pub dilations: [usize; 2],
    /// How the input is padded.
    pub padding: Padding,
    /// Where the channels are.
    pub format: DataFormat,
}

impl Default for Conv2dOptions {
    fn default() -> Self {
        Self {
            strides: [1, 1],
            dilations: [1, 1],
            padding: Padding::Valid,
            format: DataFormat::Nhwc,
        }
    }
}

/// The attributes of 2-D pooling (TensorFlow's `MaxPool` and `AvgPool`), for spatial dims
/// only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool2dOptions {
    /// The window, `[height, width]`.
    pub window: [usize; 2],
    /// The step between windows, `[height, width]`.
    pub strides: [usize; 2],
    /// How the input is padded.
    pub padding: Padding,
    /// Where the channels are.
    pub format: DataFormat,
}

/// What a fused convolution does to each output channel after it convolves:
/// `activation(value * scale + shift + residual)`, each part optional.
#[derive(Debug, Clone, Default)]
pub struct ConvEpilogue {
    /// One factor per output channel (a folded batch norm's `scale / sqrt(variance +
    /// epsilon)`), of the image's dtype.
    pub scale: Option<Tensor>,
    /// Then one term per output channel (a bias, or a folded batch norm's shift).
    pub shift: Option<Tensor>,
    /// Then a tensor of the output's shape and dtype, added elementwise (a residual
    /// connection: ResNet's `AddV2` of the block's input; grappler's `_FusedConv2D` with
    /// `fused_ops = [BiasAdd, Add, Relu]`). [`Tensor::channel_affine`] adds it by an op.
    pub residual: Option<Tensor>,
    /// Then an elementwise op (`Relu`, `Relu6`, ...).
    pub activation: Option<UnaryOp>,
}

/// A convolution filter laid out once for its device's kernels, as TensorFlow's oneDNN
/// keeps a reordered copy of each constant filter: the filter as given (HWIO), and its
/// output channels in strips of the width the device asks for
/// ([`crate::Device::filter_strip`]), each strip's `[k_h * k_w * in, width]` rows
/// contiguous (the last strip padded with zero filters where the width does not divide
/// them), so that a GEMM of few rows (a late layer of a small image, bound by reading the
/// filter) streams it from memory in order. [`Tensor::conv2d_packed`] takes it.
#[derive(Clone, Debug)]
pub struct PackedFilter {
    filter: Tensor,
    strips: Tensor,
}

impl PackedFilter {
    /// `filter` (HWIO, for a convolution that is not depthwise) packed for its device, or
    /// `None` where the device takes filters as given.
    pub fn new(filter: &Tensor) -> Result<Option<PackedFilter>> {
        let [kh, kw, depth, filters] = filter_dims(filter, "Conv2D")?;
        let width = filter
            .device()
            .filter_strip(filter.dtype, [kh, kw, depth, filters]);
        let Some(width) = width.filter(|&w| w > 0 && filters > 0) else {
            return Ok(None);
        };
        let taps = kh * kw * depth;
        let strips = filters.div_ceil(width);
        let strips = filter
            .reshape([taps, filters])?
            .pad(&[(0, 0), (0, strips * width - filters)], 0.0)?
            .reshape([taps, strips, width])?
            .permute(&[1, 0, 2])?
            .contiguous()?;
        Ok(Some(PackedFilter {
            filter: filter.clone(),
            strips,
        }))
    }

    /// The filter as given (HWIO).
    pub fn filter(&self) -> &Tensor {
        &self.filter
    }
}

impl ConvEpilogue {
    /// An `Err` unless `scale` and `shift` hold one value per channel of `x`'s dtype.
    fn check(&self, channels: usize, x: &Tensor) -> Result<()> {
        for (name, part) in [("scale", &self.scale), ("shift", &self.shift)] {
            if let Some(p) = part {
                if p.dims() != [channels] || p.dtype != x.dtype {
                    return Err(Error::invalid(format!(
                        "a fused convolution's {name} must be a {} vector of {channels}, got {} \
                         of shape {}",
                        x.dtype,
                        p.dtype,
                        p.shape()
                    )));
                }
                x.check_same_device(p, "conv2d_fused")?;
            }
        }
        Ok(())
    }

    /// An `Err` unless `residual` has the (NHWC) output's `shape`, and `y`'s dtype and device.
    fn check_residual(&self, residual: &Tensor, shape: &TensorShape, y: &Tensor) -> Result<()> {
        if residual.shape() != shape || residual.dtype != y.dtype {
            return Err(Error::invalid(format!(
                "a fused convolution's residual must be a {} tensor of the output's shape {}, \
                 got {} of shape {}",
                y.dtype,
                shape,
                residual.dtype,
                residual.shape()
            )));
        }
        y.check_same_device(residual, "conv2d_fused")
    }

    /// The epilogue with its residual in NHWC, for an output in `format`.
    fn in_nhwc(&self, format: DataFormat) -> Result<ConvEpilogue> {
        Ok(ConvEpilogue {
            residual: match &self.residual {
                Some(r) if format != DataFormat::Nhwc => Some(r.to_nhwc(format, "Conv2D")?),
                other => other.clone(),
            },
            ..self.clone()
        })
    }

    /// The part a direct kernel takes (scale, shift, the residual where `residual` says the
    /// kernel takes one, and `Relu` or `Relu6`), and the rest, applied after it by ops (an
    /// activation the kernel cannot take, or any after a residual it does not).
    fn split(&self, residual: bool) -> (ConvEpilogue, ConvEpilogue) {
        let mut fused = self.clone();
        let mut rest = ConvEpilogue::default();
        if !residual && self.residual.is_some() {
            rest.residual = fused.residual.take();
            rest.activation = fused.activation.take();
        }
        if !matches!(
            fused.activation,
            None | Some(UnaryOp::Relu | UnaryOp::Relu6)
        ) {
            rest.activation = fused.activation.take();
        }
        (fused, rest)
    }

    /// The epilogue as a kernel takes it: views of its vectors (and residual).
    fn views(&self) -> Epilogue<'_> {
        Epilogue {
            scale: self.scale.as_ref().map(Tensor::view),
            shift: self.shift.as_ref().map(Tensor::view),
            residual: self.residual.as_ref().map(Tensor::view),
            activation: self.activation,
        }
    }

    /// `y` (NHWC) with the epilogue applied by ops.
    fn apply(&self, mut y: Tensor) -> Result<Tensor> {
        if let Some(scale) = &self.scale {
            y = y.mul(scale)?;
        }
        if let Some(shift) = &self.shift {
            y = y.add(shift)?;
        }
        if let Some(residual) = &self.residual {
            self.check_residual(residual, y.shape(), &y)?;
            y = y.add(residual)?;
        }
        match self.activation {
            Some(op) => y.unary(op),
            None => Ok(y),
        }
    }
}

/// An NHWC image tensor viewed as windows, with the geometry that made it.
struct Windows {
    /// `[batch, out_h, out_w, k_h, k_w, channels]`, sharing the padded input's buffer.
    view: Tensor,
    /// The output size and padding of each spatial dim.
    dims: [WindowDim; 2],
}

impl Tensor {
    /// Half and bfloat16 as float32, so that products and sums round once, at the end (as
    /// the f32 accumulator of a matmul); other dtypes as they are.
    pub(super) fn widened(&self) -> Result<Tensor> {
        match self.dtype {
            DataType::Half | DataType::BFloat16 => self.cast(DataType::Float),
            _ => Ok(self.clone()),
        }
    }

    /// This tensor in `dtype`: itself, or a cast (a [`Tensor::widened`] result back in its
    /// operands' dtype).
    pub(super) fn in_dtype(self, dtype: DataType) -> Result<Tensor> {
        if self.dtype == dtype {
            Ok(self)
        } else {
            self.cast(dtype)
        }
    }

    /// This image tensor in NHWC order (a view for NCHW), checked to have rank 4.
    pub(super) fn to_nhwc(&self, format: DataFormat, op: &str) -> Result<Tensor> {
        if self.rank() != 4 {
            return Err(Error::invalid(format!(
                "{op}: input must be 4-dimensional{}",
                self.shape()
            )));
        }
        match format {
            DataFormat::Nhwc => Ok(self.clone()),
            DataFormat::Nchw => self.permute(&[0, 2, 3, 1]),
        }
    }

    /// An NHWC result back in `format`, contiguous.
    pub(super) fn into_format(self, format: DataFormat) -> Result<Tensor> {
        match format {
            DataFormat::Nhwc => self.contiguous(),
            DataFormat::Nchw => self.permute(&[0, 3, 1, 2])?.contiguous(),
        }
    }

    /// `activation(self * scale + shift)` per channel of the last dim (each part of
    /// `epilogue` optional; `scale` and `shift` vectors of one value per channel, of this
    /// dtype): an inference batch norm and its activation in one pass where the device has
    /// the kernel ([`crate::Device::channel_affine`]), else as `mul`, `add` and the op.
    pub fn channel_affine(&self, epilogue: &ConvEpilogue) -> Result<Tensor> {
        let channels = match self.dims().last() {
            Some(&c) => c,
            None => return epilogue.apply(self.clone()),
        };
        epilogue.check(channels, self)?;
        let (fused, rest) = epilogue.split(false);
        let device = self.device();
        let x = self.contiguous()?;
        let views = fused.views();
        // Devices with direct window kernels take epilogues; others compose the ops.
        let fused = match device.window_kernels(self.dtype) {
            true => Tensor::produce_if(self.shape().clone(), self.dtype, device, |out| {
                device.channel_affine(&x.view(), &views, out)
            })?,
            false => None,
        };
        match fused {
            Some(y) => rest.apply(y),
            None => epilogue.apply(x),
        }
    }

    /// The device's direct kernel for a window op of this NHWC tensor, if it has one for the
    /// dtype: `None` sends the caller to the composition. `filter` is a convolution's
    /// (`depthwise` or full); without one the op is pooling (`max` or average).
    fn direct_window(
        &self,
        filter: Option<(&Tensor, usize, bool, &ConvEpilogue)>,
        windows: [Window; 2],
        padding: &Padding,
        max: bool,
    ) -> Result<Option<Tensor>> {
        let device = self.device();
        if !device.window_kernels(self.dtype) {
            return Ok(None);
        }
        let dims = self.dims();
        let resolved = resolve_windows(&dims[1..3], &windows, padding)?;
        let filters = filter.map_or(1, |(_, filters, ..)| filters);
        let geometry = WindowGeometry {
            batch: dims[0],
            input: [dims[1], dims[2]],
            channels: dims[3],
            windows,
            before: [resolved[0].before, resolved[1].before],
            output: [resolved[0].output, resolved[1].output],
            filters,
        };
        // Pooling reads no filter: its windows shrink to the taps that can reach the image.
        let geometry = if filter.is_none() {
            geometry.pooling_taps()
        } else {
            geometry
        };
        let out_channels = match filter {
            Some((_, _, true, _)) => dims[3] * filters,
            Some((_, _, false, _)) => filters,
            None => dims[3],
        };
        let shape = TensorShape::new(&[
            dims[0],
            geometry.output[0],
            geometry.output[1],
            out_channels,
        ])?;
        let x = self.contiguous()?;
        let out = match filter {
            Some((f, _, depthwise, epilogue)) => {
                let f = f.contiguous()?;
                // The kernel takes the epilogue it can; ops apply the rest after it.
                if let Some(residual) = &epilogue.residual {
                    epilogue.check_residual(residual, &shape, self)?;
                }
                let residual = device.conv_residual(self.dtype);
                let (fused, rest) = epilogue.split(residual);
                let fused = ConvEpilogue {
                    residual: fused.residual.map(|r| r.contiguous()).transpose()?,
                    ..fused
                };
                let views = fused.views();
                let y = Tensor::produce(shape, self.dtype, device, |out| {
                    device.conv2d(&x.view(), &f.view(), &geometry, depthwise, &views, out)
                })?;
                rest.apply(y)?
            }
            None => Tensor::produce(shape, self.dtype, device, |out| {
                device.pool2d(&x.view(), &geometry, max, out)
            })?,
        };
        Ok(Some(out))
    }

    /// The windows of this NHWC tensor: padded with `fill` as `padding` asks, then viewed
    /// with overlapping strides.
    fn windows(&self, windows: [Window; 2], padding: &Padding, fill: Scalar) -> Result<Windows> {
        let dims = self.dims();
        let resolved = resolve_windows(&dims[1..3], &windows, padding)?;
        let [h, w] = [resolved[0], resolved[1]];
        let padded = if [h.before, h.after, w.before, w.after] == [0; 4] {
            self.clone()
        } else {
            self.pad(
                &[(0, 0), (h.before, h.after), (w.before, w.after), (0, 0)],
                fill,
            )?
        };
        let s = padded.layout().strides();
        let [kh, kw] = [windows[0], windows[1]];
        let shape = [dims[0], h.output, w.output, kh.size, kw.size, dims[3]];
        // A dim of one element is never stepped along (a huge stride or dilation there must
        // not overflow); every other step stays within the padded input.
        let step = |stride: isize, by: usize, count: usize| -> Result<isize> {
            if count <= 1 {
                return Ok(0);
            }
            isize::try_from(by)
                .ok()
                .and_then(|by| stride.checked_mul(by))
                .ok_or_else(|| Error::invalid("window step overflows"))
        };
        let strides = [
            s[0],
            step(s[1], kh.stride, h.output)?,
            step(s[2], kw.stride, w.output)?,
            step(s[1], kh.dilation, kh.size)?,
            step(s[2], kw.dilation, kw.size)?,
            s[3],
        ];
        let layout = Layout::new(
            TensorShape::new(&shape)?,
            &strides,
            padded.layout().offset(),
        )?;
        let view = Tensor::from_storage_checking(padded.dtype, layout, padded.storage, false)?;
        Ok(Windows { view, dims: [h, w] })
    }

    /// TensorFlow's `Conv2D`: this `[batch, h, w, in]` image (NHWC, or NCHW as `options`
    /// says) convolved with a `[k_h, k_w, in, out]` filter (cross-correlation, as TensorFlow).
    pub fn conv2d(&self, filter: &Tensor, options: &Conv2dOptions) -> Result<Tensor> {
        self.conv2d_fused(filter, options, false, &ConvEpilogue::default())
    }

    /// A grouped convolution (TensorFlow's `Conv2D` whose filter's depth divides the
    /// input's: ConvNeXt's and ResNeXt's layers, Keras's `Conv2D(groups=g)`) of an NHWC
    /// input: each of `groups` slices of the channels convolved with its share of the
    /// filters, the results side by side, then `epilogue`.
    fn grouped_conv2d(
        &self,
        filter: &Tensor,
        options: &Conv2dOptions,
        groups: usize,
        epilogue: &ConvEpilogue,
    ) -> Result<Tensor> {
        let [_, _, in_depth, filters] = filter_dims(filter, "Conv2D")?;
        if filters % groups != 0 {
            return Err(Error::invalid(format!(
                "Conv2D: output depth must be evenly divisible by number of groups: {filters} vs \
                 {groups}"
            )));
        }
        epilogue.check(filters, self)?;
        let per_group = filters / groups;
        let nhwc = Conv2dOptions {
            format: DataFormat::Nhwc,
            ..options.clone()
        };
        let outputs = (0..groups)
            .map(|g| {
                let x = self.narrow(3, g * in_depth, in_depth)?;
                let f = filter.narrow(3, g * per_group, per_group)?;
                x.conv2d(&f, &nhwc)
            })
            .collect::<Result<Vec<_>>>()?;
        let parts: Vec<&Tensor> = outputs.iter().collect();
        epilogue
            .apply(Tensor::concat(&parts, 3)?)?
            .into_format(options.format)
    }

    /// TensorFlow's `DepthwiseConv2dNative`: each input channel convolved with its own
    /// `channel_multiplier` filters of a `[k_h, k_w, in, multiplier]` filter; output channel
    /// `c * multiplier + m`.
    pub fn depthwise_conv2d(&self, filter: &Tensor, options: &Conv2dOptions) -> Result<Tensor> {
        self.conv2d_fused(filter, options, true, &ConvEpilogue::default())
    }

    /// [`Tensor::conv2d`] (or, `depthwise`, [`Tensor::depthwise_conv2d`]) followed by
    /// `epilogue` per output channel, in one pass where the device has a direct kernel
    /// (TensorFlow's `_FusedConv2D`, which its remapper makes of a convolution, a bias or
    /// an inference batch norm, and `Relu`/`Relu6`).
    pub fn conv2d_fused(
        &self,
        filter: &Tensor,
        options: &Conv2dOptions,
        depthwise: bool,
        epilogue: &ConvEpilogue,
    ) -> Result<Tensor> {
        self.convolve(filter, None, options, depthwise, epilogue)
    }

    /// [`Tensor::conv2d_fused`] (not depthwise) by a filter its device laid out once: the
    /// same checks and result, the device's kernel reading the packed layout where it runs
    /// ([`PackedFilter`]).
    pub fn conv2d_packed(
        &self,
        filter: &PackedFilter,
        options: &Conv2dOptions,
        epilogue: &ConvEpilogue,
    ) -> Result<Tensor> {
        self.convolve(
            &filter.filter,
            Some(&filter.strips),
            options,
            false,
            epilogue,
        )
    }

    /// A convolution by `filter` (HWIO), which the device's kernel reads as `packed` where
    /// given and the kernel runs.
    fn convolve(
        &self,
        filter: &Tensor,
        packed: Option<&Tensor>,
        options: &Conv2dOptions,
        depthwise: bool,
        epilogue: &ConvEpilogue,
    ) -> Result<Tensor> {
        let op = if depthwise {
            "DepthwiseConv2dNative"
        } else {
            "Conv2D"
        };
        let x = self.to_nhwc(options.format, op)?;
        let epilogue = &epilogue.in_nhwc(options.format)?;
        let [kh, kw, in_depth, filters] = filter_dims(filter, op)?;
        let depth = x.dims()[3];
        let grouped = !depthwise && in_depth > 0 && depth != in_depth && depth % in_depth == 0;
        if grouped {
            return x.grouped_conv2d(filter, options, depth / in_depth, epilogue);
        }
        if depth != in_depth {
            return Err(Error::invalid(if depthwise {
                format!("{op}: input and filter must have the same depth: {depth} vs {in_depth}")
            } else {
                format!(
                    "{op}: input depth must be evenly divisible by filter depth: {depth} vs \
                     {in_depth}"
                )
            }));
        }
        self.check_same_device(filter, "conv2d")?;
        let mixed = self.dtype == DataType::Float
            && filter.dtype == DataType::BFloat16
            && x.device().bf16_weights();
        if !mixed {
            check_dtypes(op, self, filter)?;
        }
        let channels = if depthwise { depth * filters } else { filters };
        epilogue.check(channels, self)?;
        let spans = spatial_windows([kh, kw], options.strides, options.dilations);
        let direct = x.direct_window(
            Some((packed.unwrap_or(filter), filters, depthwise, epilogue)),
            spans,
            &options.padding,
            false,
        )?;
        if let Some(y) = direct {
            return y.into_format(options.format);
        }
        let batch = x.dims()[0];
        let y = if depthwise {
            let (x, filter) = (x.widened()?, filter.widened()?);
            let windows = x.windows(spans, &options.padding, Scalar::I64(0))?;
            let [h, w] = windows.dims;
            // [n, oh, ow, kh, kw, c, 1] * [kh, kw, c, m], summed over the taps.
            windows
                .view
                .unsqueeze(-1)?
                .mul(&filter)?
                .sum(&[3, 4], false)?
                .reshape([batch, h.output, w.output, channels])?
                .in_dtype(self.dtype)?
        } else {
            let windows = x.windows(spans, &options.padding, Scalar::I64(0))?;
            let [h, w] = windows.dims;
            let rows = batch * h.output * w.output;
            // im2col: one row of taps per output pixel (a view when the windows are the
            // input).
            let columns = windows.view.reshape([rows, kh * kw * depth])?;
            let weights = filter.reshape([kh * kw * depth, filters])?;
            columns
                .matmul(&weights)?
                .reshape([batch, h.output, w.output, filters])?
        };
        epilogue.apply(y)?.into_format(options.format)
    }

    /// TensorFlow's `MaxPool`: the largest element of each window (padding never wins).
    pub fn max_pool2d(&self, options: &Pool2dOptions) -> Result<Tensor> {
        check_pool_padding(options)?;
        let x = self.to_nhwc(options.format, "MaxPool")?;
        if let Some(y) = x.direct_window(None, pool_windows(options), &options.padding, true)? {
            return y.into_format(options.format);
        }
        let windows = x.windows(pool_windows(options), &options.padding, lowest(self.dtype))?;
        windows
            .view
            .max(&[3, 4], false)?
            .into_format(options.format)
    }

    /// TensorFlow's `AvgPool`: the mean of each window over the input elements it covers
    /// (padding is not counted, as TensorFlow's `SAME` averaging).
    pub fn avg_pool2d(&self, options: &Pool2dOptions) -> Result<Tensor> {
        if !self.dtype.is_float() {
            return Err(Error::invalid(format!(
                "AvgPool takes half, bfloat16, float and double, not {}",
                self.dtype
            )));
        }
        check_pool_padding(options)?;
        let x = self.to_nhwc(options.format, "AvgPool")?;
        let spans = pool_windows(options);
        if let Some(y) = x.direct_window(None, spans, &options.padding, false)? {
            return y.into_format(options.format);
        }
        let x = x.widened()?;
        let windows = x.windows(spans, &options.padding, Scalar::I64(0))?;
        let [h, w] = windows.dims;
        let sums = windows.view.sum(&[3, 4], false)?;
        // How many input elements each window covers, per output row and column.
        let covered = |dim: WindowDim, window: Window, input: usize| -> Vec<f32> {
            (0..dim.output)
                .map(|o| {
                    let start = (o * window.stride) as isize - dim.before as isize;
                    let end = start + window.size as isize;
                    (end.min(input as isize) - start.max(0)).max(0) as f32
                })
                .collect()
        };
        let (rows, cols) = (
            covered(h, spans[0], x.dims()[1]),
            covered(w, spans[1], x.dims()[2]),
        );
        let counts: Vec<f32> = rows
            .iter()
            .flat_map(|r| cols.iter().map(move |c| r * c))
            .collect();
        let counts = Tensor::from_slice(&counts, [h.output, w.output, 1], self.device())?
            .cast(sums.dtype)?;
        sums.div(&counts)?
            .in_dtype(self.dtype)?
            .into_format(options.format)
    }

    /// TensorFlow's `BiasAdd`: `bias` (one value per channel) added along the channel dim.
    pub fn bias_add(&self, bias: &Tensor, format: DataFormat) -> Result<Tensor> {
        if self.rank() < 2 {
            return Err(Error::invalid(format!(
                "Input tensor must be at least 2D: {}",
                self.shape()
            )));
        }
        let axis = format.channel_axis(self.rank());
        if bias.rank() != 1 || bias.dims()[0] != self.dims()[axis] {
            return Err(Error::invalid(format!(
                "Must provide as many biases as the {} dimension of the input tensor: {} vs. {}",
                if format == DataFormat::Nhwc {
                    "last"
                } else {
                    "channel"
                },
                bias.shape(),
                self.shape()
            )));
        }
        let mut dims = vec![1; self.rank() - axis];
        dims[0] = bias.dims()[0];
        self.add(&bias.reshape(dims)?)
    }

    /// TensorFlow's `FusedBatchNormV3` in inference: per channel,
    /// `(x - mean) / sqrt(variance + epsilon) * scale + offset`, computed in the parameters'
    /// dtype (float32 for half and bfloat16 images, as TensorFlow; float64 for float64).
    pub fn batch_norm(
        &self,
        scale: &Tensor,
        offset: &Tensor,
        mean: &Tensor,
        variance: &Tensor,
        epsilon: f64,
        format: DataFormat,
    ) -> Result<Tensor> {
        // TensorFlow's kernel takes 4-D (and NDHWC/NCDHW 5-D) images only.
        if !matches!(self.rank(), 4 | 5) {
            return Err(Error::invalid(format!(
                "input must be 4 or 5-dimensional{}",
                self.shape()
            )));
        }
        let axis = format.channel_axis(self.rank());
        let depth = self.dims()[axis];
        for (name, p) in [
            ("scale", scale),
            ("offset", offset),
            ("mean", mean),
            ("variance", variance),
        ] {
            if p.rank() != 1 || p.dims()[0] != depth {
                return Err(Error::invalid(format!(
                    "{name} must have the same number of elements as the channels of x, got {} \
                     and {depth}",
                    p.num_elements()
                )));
            }
        }
        // In the parameters' dtype (float32), or in float64 for a float64 image.
        let param = if self.dtype == DataType::Double {
            DataType::Double
        } else {
            scale.dtype
        };
        let (factor, shift) =
            Tensor::fold_batch_norm([scale, offset, mean, variance], epsilon, param)?;
        let mut dims = vec![1; self.rank() - axis];
        dims[0] = depth;
        self.clone()
            .in_dtype(param)?
            .mul(&factor.reshape(dims.clone())?)?
            .add(&shift.reshape(dims)?)?
            .in_dtype(self.dtype)
    }

    /// An inference batch norm as one multiply and one add per channel, in `dtype`:
    /// `factor = scale / sqrt(variance + epsilon)` and `shift = offset - mean * factor`
    /// (what TensorFlow folds into a convolution's epilogue).
    pub fn fold_batch_norm(
        [scale, offset, mean, variance]: [&Tensor; 4],
        epsilon: f64,
        dtype: DataType,
    ) -> Result<(Tensor, Tensor)> {
        let [scale, offset, mean, variance] =
            [scale, offset, mean, variance].map(|p| p.clone().in_dtype(dtype));
        let (scale, offset, mean, variance) = (scale?, offset?, mean?, variance?);
        let eps = Tensor::full([0usize; 0], Scalar::F64(epsilon), dtype, scale.device())?;
        let factor = scale.mul(&variance.add(&eps)?.rsqrt()?)?;
        let shift = offset.sub(&mean.mul(&factor)?)?;
        Ok((factor, shift))
    }

    /// Swish, `self * sigmoid(beta * self)` (SiLU at `beta` 1), in one pass where the device
    /// has the kernel ([`crate::Device::swish`]), else as `mul`, `sigmoid` and `mul`.
    pub fn swish(&self, beta: f64) -> Result<Tensor> {
        let (x, fused) = self.one_pass("swish", |device, x, out| device.swish(x, beta, out))?;
        if let Some(y) = fused {
            return Ok(y);
        }
        let scaled = Tensor::full([0usize; 0], Scalar::F64(beta), self.dtype, self.device())?;
        x.mul(&x.mul(&scaled)?.unary(UnaryOp::Sigmoid)?)
    }

    /// The exact GELU as Keras 3 writes it, `(0.5 * self) * erfc(-self * (1/√2))`, in one
    /// pass where the device has the kernel ([`crate::Device::gelu`]), else as those ops.
    pub fn gelu(&self) -> Result<Tensor> {
        let (x, fused) = self.one_pass("gelu", |device, x, out| device.gelu(x, out))?;
        if let Some(y) = fused {
            return Ok(y);
        }
        let scalar = |v: f64| Tensor::full([0usize; 0], Scalar::F64(v), self.dtype, self.device());
        let half = x.mul(&scalar(0.5)?)?;
        let scaled = x
            .unary(UnaryOp::Neg)?
            .mul(&scalar(std::f64::consts::FRAC_1_SQRT_2)?)?;
        half.mul(&scaled.unary(UnaryOp::Erfc)?)
    }

    /// The hard swish as Keras's MobileNetV3 writes it, `self * (relu6(self + 3) / 6)`
    /// (`divide` false: `* (1/6)`, 1/6 rounded to the dtype, for `/ 6`), in one pass where
    /// the device has the kernel
    /// ([`crate::Device::hard_swish`]), else as those ops.
    pub fn hard_swish(&self, divide: bool) -> Result<Tensor> {
        let (x, fused) = self.one_pass("hard_swish", |device, x, out| {
            device.hard_swish(x, divide, out)
        })?;
        if let Some(y) = fused {
            return Ok(y);
        }
        let scalar = |v: f64| Tensor::full([0usize; 0], Scalar::F64(v), self.dtype, self.device());
        let clamped = x.add(&scalar(3.0)?)?.unary(UnaryOp::Relu6)?;
        let gate = if divide {
            clamped.div(&scalar(6.0)?)?
        } else {
            clamped.mul(&scalar(1.0 / 6.0)?)?
        };
        x.mul(&gate)
    }

    /// A fused float activation's start: an `Err` naming `op` unless this is a float tensor,
    /// then this tensor contiguous and the device's one-pass `kernel` result where it has
    /// one (`None` sends the caller to the ops).
    fn one_pass(
        &self,
        op: &str,
        kernel: impl FnOnce(&dyn Device, &TensorView<'_>, &mut OutView<'_>) -> Result<bool>,
    ) -> Result<(Tensor, Option<Tensor>)> {
        if !self.dtype.is_float() {
            return Err(Error::invalid(format!(
                "{op} takes half, bfloat16, float and double, not {}",
                self.dtype
            )));
        }
        let x = self.contiguous()?;
        let device = self.device();
        let fused = Tensor::produce_if(self.shape().clone(), self.dtype, device, |out| {
            kernel(device.as_ref(), &x.view(), out)
        })?;
        Ok((x, fused))
    }

    /// Layer normalization over the last dim, as Keras 3's `LayerNormalization` computes
    /// it: with the row's mean and biased variance, `inv = rsqrt(var + epsilon) * gamma`
    /// and `x * inv + (-mean * inv + beta)`. `gamma` and `beta` hold one value per column
    /// (shape `[C]`, or ones before it); either may be absent. One pass per row where the
    /// device has the kernel ([`crate::Device::layer_norm`]), else those ops.
    pub fn layer_norm(
        &self,
        gamma: Option<&Tensor>,
        beta: Option<&Tensor>,
        epsilon: f64,
    ) -> Result<Tensor> {
        let columns = self.check_layer_norm(gamma, beta)?;
        let x = self.contiguous()?;
        let device = self.device();
        let per_column = |t: Option<&Tensor>| -> Result<Option<Tensor>> {
            t.map(|t| t.contiguous()?.reshape([columns])).transpose()
        };
        let (gamma, beta) = (per_column(gamma)?, per_column(beta)?);
        let fused = Tensor::produce_if(self.shape().clone(), self.dtype, device, |out| {
            let (g, b) = (
                gamma.as_ref().map(|g| g.view()),
                beta.as_ref().map(|b| b.view()),
            );
            device.layer_norm(&x.view(), g.as_ref(), b.as_ref(), epsilon, out)
        })?;
        if let Some(y) = fused {
            return Ok(y);
        }
        let mean = x.mean(&[-1], true)?;
        let variance = x.squared_difference(&mean)?.mean(&[-1], true)?;
        let epsilon = Tensor::full([0usize; 0], Scalar::F64(epsilon), self.dtype, device)?;
        let mut inv = variance.add(&epsilon)?.rsqrt()?;
        if let Some(gamma) = &gamma {
            inv = inv.mul(gamma)?;
        }
        let mut shift = mean.neg()?.mul(&inv)?;
        if let Some(beta) = &beta {
            shift = shift.add(beta)?;
        }
        x.mul(&inv)?.add(&shift)
    }

    /// The number of columns of a layer normalization, after its checks: a float tensor
    /// of rank 1 or more, `gamma` and `beta` of its dtype with one value per column.
    fn check_layer_norm(&self, gamma: Option<&Tensor>, beta: Option<&Tensor>) -> Result<usize> {
        if self.rank() == 0 || !self.dtype.is_float() {
            return Err(Error::invalid(format!(
                "layer_norm takes a half, bfloat16, float or double tensor of rank 1 or more, \
                 not {} {}",
                self.dtype,
                self.shape()
            )));
        }
        let columns = self.shape().dims().last().copied().unwrap_or(1);
        for (name, t) in [("gamma", gamma), ("beta", beta)] {
            let Some(t) = t else { continue };
            let dims = t.shape().dims();
            let per_column = dims.last().copied() == Some(columns)
                && dims[..dims.len() - 1].iter().all(|&d| d == 1);
            if t.dtype != self.dtype || !per_column {
                return Err(Error::invalid(format!(
                    "layer_norm's {name} must be {} with one value per column ({columns}), \
                     not {} {}",
                    self.dtype,
                    t.dtype,
                    t.shape()
                )));
            }
        }
        Ok(columns)
    }

    /// TensorFlow's `Softmax` over the last dim: `exp(x - max) / sum(exp(x - max))`.
    pub fn softmax(&self) -> Result<Tensor> {
        if let Some(y) = self.softmax_kernel("Softmax", false)? {
            return Ok(y);
        }
        let shifted = self.softmax_shifted("Softmax")?;
        let exp = shifted.exp()?;
        exp.div(&exp.sum(&[-1], true)?)
    }

    /// TensorFlow's `LogSoftmax` over the last dim: `x - max - log(sum(exp(x - max)))`.
    pub fn log_softmax(&self) -> Result<Tensor> {
        if let Some(y) = self.softmax_kernel("LogSoftmax", true)? {
            return Ok(y);
        }
        let shifted = self.softmax_shifted("LogSoftmax")?;
        shifted.sub(&shifted.exp()?.sum(&[-1], true)?.log()?)
    }

    /// The device's one-pass softmax ([`crate::Device::softmax`]) where it has one for this
    /// tensor, after the checks both softmaxes make; `None` sends the caller to the ops.
    fn softmax_kernel(&self, op: &str, log: bool) -> Result<Option<Tensor>> {
        self.check_softmax(op)?;
        let x = self.contiguous()?;
        let device = self.device();
        Tensor::produce_if(self.shape().clone(), self.dtype, device, |out| {
            device.softmax(&x.view(), log, out)
        })
    }

    /// `x - max(x)` along the last dim, the stable start of both softmaxes.
    fn softmax_shifted(&self, op: &str) -> Result<Tensor> {
        self.check_softmax(op)?;
        if self.num_elements() == 0 {
            return Ok(self.clone());
        }
        self.sub(&self.max(&[-1], true)?)
    }

    /// An `Err` with TensorFlow's message unless this is a float tensor of rank 1 or more.
    fn check_softmax(&self, op: &str) -> Result<()> {
        if self.rank() == 0 {
            return Err(Error::invalid(format!(
                "{op}: logits must have >= 1 dimension, got {}",
                self.shape()
            )));
        }
        if !self.dtype.is_float() {
            return Err(Error::invalid(format!(
                "{op} takes half, bfloat16, float and double, not {}",
                self.dtype
            )));
        }
        Ok(())
    }
}

/// An `Err` unless the image and the filter have one dtype.
pub(super) fn check_dtypes(op: &'static str, x: &Tensor, filter: &Tensor) -> Result<()> {
    if x.dtype == filter.dtype {
        Ok(())
    } else {
        Err(Error::DTypeMismatch {
            op,
            expected: x.dtype.to_string(),
            found: filter.dtype,
        })
    }
}

/// The dims of a rank-4 filter.
pub(super) fn filter_dims(filter: &Tensor, op: &str) -> Result<[usize; 4]> {
    match filter.dims()[..] {
        [a, b, c, d] => Ok([a, b, c, d]),
        _ => Err(Error::invalid(format!(
            "{op}: filter must be 4-dimensional: {}",
            filter.shape()
        ))),
    }
}

/// The two spatial windows of a convolution.
pub(super) fn spatial_windows(
    size: [usize; 2],
    strides: [usize; 2],
    dilations: [usize; 2],
) -> [Window; 2] {
    [0, 1].map(|d| Window {
        size: size[d],
        stride: strides[d],
        dilation: dilations[d],
    })
}

/// The two spatial windows of a pooling op.
fn pool_windows(options: &Pool2dOptions) -> [Window; 2] {
    spatial_windows(options.window, options.strides, [1, 1])
}

/// TensorFlow's pooling kernels' rule for explicit padding: each side's padding is smaller
/// than the window, so that no window lies entirely in the padding (whose maximum or mean
/// would be of nothing).
fn check_pool_padding(options: &Pool2dOptions) -> Result<()> {
    let Padding::Explicit(pairs) = &options.padding else {
        return Ok(());
    };
    let sides = [("Top", "Bottom"), ("Left", "Right")];
    for ((&(before, after), (first, second)), &size) in pairs.iter().zip(sides).zip(&options.window)
    {
        for (side, pad) in [(first, before), (second, after)] {
            if pad >= size {
                return Err(Error::invalid(format!(
                    "{side} padding {pad} needs to be smaller than the window size {size}"
                )));
            }
        }
    }
    Ok(())
}
