//! The transposed convolution: TensorFlow's `Conv2DBackpropInput`, the gradient of a
//! convolution with respect to its input, which Keras's `Conv2DTranspose` layers are made
//! of. A device with window kernels runs it directly ([`Device::conv2d_backprop_input`]:
//! each image element gathers the gradient pixels whose windows read it, no zeros inserted);
//! half and bfloat16 compute in float32 where only that has the kernel; anything else is the
//! composition: the gradient with `stride - 1` zeros between its pixels, convolved at stride
//! 1 with the filter turned half a turn and its channel axes swapped.
//!
//! [`Device::conv2d_backprop_input`]: crate::Device::conv2d_backprop_input

use super::nn::{check_dtypes, filter_dims, spatial_windows, Conv2dOptions};
use super::Tensor;
use crate::dtype::DataType;
use crate::element::Scalar;
use crate::error::{Error, Result};
use crate::plan::window::{DataFormat, Padding, WindowGeometry};
use crate::shape::TensorShape;

/// TensorFlow's name for the op in its messages.
const OP: &str = "Conv2DCustomBackpropInput";

impl Tensor {
    /// TensorFlow's `Conv2DBackpropInput`: this output gradient (`[batch, out_h, out_w,
    /// filters]`, or NCHW as `options` says) taken back through the convolution by the
    /// `[k_h, k_w, channels, filters]` `filter` of an input of `input_sizes` (in `options`'
    /// format: 4 dims, or the 2 spatial ones): the transposed convolution. `options` are
    /// the forward convolution's strides, dilations and padding.
    ///
    /// ```
    /// use polytensor_core::{Conv2dOptions, Padding, Tensor};
    /// let cpu = polytensor_cpu::CpuDevice::shared();
    /// // A 1x1 gradient through a 2x2 filter of ones at stride 2 covers a 2x2 image.
    /// let dy = Tensor::from_slice(&[3.0f32], [1, 1, 1, 1], &cpu).unwrap();
    /// let filter = Tensor::ones([2, 2, 1, 1], polytensor_core::DataType::Float, &cpu).unwrap();
    /// let options = Conv2dOptions { strides: [2, 2], padding: Padding::Valid, ..Default::default() };
    /// let image = dy.conv2d_backprop_input(&filter, &[1, 2, 2, 1], &options).unwrap();
    /// assert_eq!(image.to_vec::<f32>().unwrap(), [3.0; 4]);
    /// ```
    pub fn conv2d_backprop_input(
        &self,
        filter: &Tensor,
        input_sizes: &[usize],
        options: &Conv2dOptions,
    ) -> Result<Tensor> {
        self.backprop_input(filter, input_sizes, options, false)
    }

    /// TensorFlow's `DepthwiseConv2dNativeBackpropInput`: this output gradient (`[batch,
    /// out_h, out_w, channels * multiplier]`, or NCHW) taken back through the depthwise
    /// convolution by the `[k_h, k_w, channels, multiplier]` `filter` of an input of
    /// `input_sizes` (4 dims in `options`' format): each channel's transposed convolution
    /// by its own filters, summed over the multiplier.
    ///
    /// ```
    /// use polytensor_core::{Conv2dOptions, DataType, Padding, Tensor};
    /// let cpu = polytensor_cpu::CpuDevice::shared();
    /// // Two channels, each through a 1x1 filter of its own (2 and 3).
    /// let dy = Tensor::from_slice(&[1.0f32, 1.0], [1, 1, 1, 2], &cpu).unwrap();
    /// let filter = Tensor::from_slice(&[2.0f32, 3.0], [1, 1, 2, 1], &cpu).unwrap();
    /// let options = Conv2dOptions { padding: Padding::Valid, ..Default::default() };
    /// let dx = dy.depthwise_conv2d_backprop_input(&filter, &[1, 1, 1, 2], &options).unwrap();
    /// assert_eq!(dx.to_vec::<f32>().unwrap(), [2.0, 3.0]);
    /// ```
    pub fn depthwise_conv2d_backprop_input(
        &self,
        filter: &Tensor,
        input_sizes: &[usize],
        options: &Conv2dOptions,
    ) -> Result<Tensor> {
        self.backprop_input(filter, input_sizes, options, true)
    }

    /// The transposed convolution (`depthwise`: of a depthwise convolution, each channel by
    /// its own `multiplier` filters) of this output gradient.
    fn backprop_input(
        &self,
        filter: &Tensor,
        input_sizes: &[usize],
        options: &Conv2dOptions,
        depthwise: bool,
    ) -> Result<Tensor> {
        let op = if depthwise {
            "DepthwiseConv2dNativeBackpropInput"
        } else {
            OP
        };
        if self.rank() != 4 {
            return Err(Error::invalid(format!(
                "input_sizes must be 4-dimensional, got: {}",
                self.rank()
            )));
        }
        let dy = self.to_nhwc(options.format, op)?;
        let [kh, kw, in_depth, per_channel] = filter_dims(filter, op)?;
        let filters = if depthwise {
            in_depth.checked_mul(per_channel).ok_or_else(|| {
                Error::invalid(format!(
                    "{op}: the filter's {in_depth} x {per_channel} overflows"
                ))
            })?
        } else {
            per_channel
        };
        let [batch, out_h, out_w, out_depth] = [0, 1, 2, 3].map(|d| dy.dims()[d]);
        let [n, h, w, c] = image_dims(input_sizes, options.format, batch, in_depth)?;
        check_dtypes(op, self, filter)?;
        self.check_same_device(filter, "conv2d_backprop_input")?;
        if depthwise && c != in_depth {
            return Err(Error::invalid(format!(
                "{op}: input_sizes and filter must have the same depth: {c} vs {in_depth}"
            )));
        }
        if c != in_depth {
            return Err(Error::invalid(if in_depth > 0 && c % in_depth == 0 {
                format!(
                    "Gradients for grouped convolutions are not supported. Computed input \
                     depth {c} doesn't match filter input depth {in_depth}"
                )
            } else {
                format!("{op}: input depth must be evenly divisible by filter depth")
            }));
        }
        if filters != out_depth {
            return Err(Error::invalid(format!(
                "{op}: filter and out_backprop must have the same out_depth"
            )));
        }
        if n != batch {
            return Err(Error::invalid(format!(
                "{op}: input and out_backprop must have the same batch size. Input batch: \
                 {n}, outbackprop batch: {batch}, batch_dim: 0"
            )));
        }
        let windows = spatial_windows([kh, kw], options.strides, options.dilations);
        let input = [h, w];
        let mut before = [0; 2];
        for (d, (window, &actual)) in windows.iter().zip(&[out_h, out_w]).enumerate() {
            let resolved = window.resolve(input[d], &options.padding, d)?;
            if resolved.output != actual {
                return Err(Error::invalid(format!(
                    "{op}: Size of out_backprop doesn't match computed: actual = {actual}, \
                     computed = {} spatial_dim: {} input: {} filter: {} output: {actual} \
                     stride: {} dilation: {}",
                    resolved.output,
                    d + 1,
                    input[d],
                    window.size,
                    window.stride,
                    window.dilation
                )));
            }
            before[d] = resolved.before;
        }
        let geometry = WindowGeometry {
            batch: n,
            input,
            channels: c,
            windows,
            before,
            output: [out_h, out_w],
            filters,
        };
        if depthwise {
            return dy
                .composed_backprop_input(filter, &geometry, true)?
                .into_format(options.format);
        }
        let image = TensorShape::new(&[n, h, w, c])?;
        let device = self.device();
        let direct = |dtype: DataType| -> Result<Option<Tensor>> {
            if !device.window_kernels(dtype) {
                return Ok(None);
            }
            let dy = dy.clone().in_dtype(dtype)?.contiguous()?;
            let f = filter.clone().in_dtype(dtype)?.contiguous()?;
            let out = Tensor::produce(image.clone(), dtype, device, |out| {
                device.conv2d_backprop_input(&dy.view(), &f.view(), &geometry, out)
            })?;
            Some(out.in_dtype(self.dtype)).transpose()
        };
        let widened = match self.dtype {
            DataType::Half | DataType::BFloat16 => DataType::Float,
            dtype => dtype,
        };
        let out = match direct(self.dtype)? {
            Some(out) => out,
            None if widened != self.dtype => match direct(widened)? {
                Some(out) => out,
                None => dy.composed_backprop_input(filter, &geometry, false)?,
            },
            None => dy.composed_backprop_input(filter, &geometry, false)?,
        };
        out.into_format(options.format)
    }

    /// The transposed convolution `geometry` describes, of this NHWC gradient, from the ops
    /// every device has: its pixels spread `stride` apart (zeros between), then a stride-1
    /// convolution with the filter turned half a turn (`[k_h, k_w, filters, channels]`),
    /// padded (or cropped) so that tap `i` of image row `y` meets gradient row
    /// `(y + before - i * dilation) / stride`. `depthwise`: the filter is a depthwise
    /// convolution's `[k_h, k_w, channels, multiplier]`, turned and convolved channel by
    /// channel (each of the `channels * multiplier` gradient channels by its own tap), and
    /// each channel's `multiplier` results summed.
    fn composed_backprop_input(
        &self,
        filter: &Tensor,
        g: &WindowGeometry,
        depthwise: bool,
    ) -> Result<Tensor> {
        let [sh, sw] = [g.windows[0].stride, g.windows[1].stride];
        let [oh, ow] = g.output;
        if g.input_elements()? == 0 || self.num_elements() == 0 {
            return Tensor::zeros(
                [g.batch, g.input[0], g.input[1], g.channels],
                self.dtype,
                self.device(),
            );
        }
        // [n, oh, 1, ow, 1, f] padded to [n, oh, sh, ow, sw, f]: each pixel then stride - 1
        // zeros, with the last pixel's trailing zeros cut.
        let spread = self
            .reshape([g.batch, oh, 1, ow, 1, g.filters])?
            .pad(
                &[(0, 0), (0, 0), (0, sh - 1), (0, 0), (0, sw - 1), (0, 0)],
                Scalar::I64(0),
            )?
            .reshape([g.batch, oh * sh, ow * sw, g.filters])?
            .narrow(1, 0, (oh - 1) * sh + 1)?
            .narrow(2, 0, (ow - 1) * sw + 1)?;
        let [kh, kw] = [0, 1].map(|d| filter.dims()[d]);
        let turned = if depthwise {
            filter
                .reverse(&[0, 1])?
                .contiguous()?
                .reshape([kh, kw, g.filters, 1])?
        } else {
            filter
                .reverse(&[0, 1])?
                .permute(&[0, 1, 3, 2])?
                .contiguous()?
        };
        // Per spatial dim: the spread gradient's padding before and after (a negative one
        // crops it) for a stride-1 convolution whose output has the image's size.
        let mut spread = spread;
        let mut pads = Vec::with_capacity(2);
        for d in 0..2 {
            let window = g.windows[d];
            let span = window.span()? as i64;
            let length = spread.dims()[d + 1] as i64;
            let before = span - 1 - g.before[d] as i64;
            let after = g.input[d] as i64 - 1 + span - length - before;
            let crop_front = (-before).max(0) as usize;
            let crop_back = (-after).max(0) as usize;
            let kept = (length as usize).saturating_sub(crop_front + crop_back);
            spread = spread.narrow(d as isize + 1, crop_front, kept)?;
            pads.push((before.max(0) as usize, after.max(0) as usize));
        }
        let options = Conv2dOptions {
            strides: [1, 1],
            dilations: [g.windows[0].dilation, g.windows[1].dilation],
            padding: Padding::Explicit(pads),
            format: DataFormat::Nhwc,
        };
        if !depthwise {
            return spread.conv2d(&turned, &options);
        }
        let [n, h, w, c] = [g.batch, g.input[0], g.input[1], g.channels];
        spread
            .depthwise_conv2d(&turned, &options)?
            .reshape([n, h, w, c, g.filters / c.max(1)])?
            .reduce(crate::ops::ReduceOp::Sum, &[4], false)
    }
}

/// The NHWC dims of the image whose gradient is taken: TensorFlow's `input_sizes` in
/// `format`, 4 dims, or the 2 spatial ones (batch and depth then from the gradient and the
/// filter).
fn image_dims(
    sizes: &[usize],
    format: DataFormat,
    batch: usize,
    depth: usize,
) -> Result<[usize; 4]> {
    match (sizes, format) {
        (&[h, w], _) => Ok([batch, h, w, depth]),
        (&[n, h, w, c], DataFormat::Nhwc) => Ok([n, h, w, c]),
        (&[n, c, h, w], DataFormat::Nchw) => Ok([n, h, w, c]),
        _ => Err(Error::invalid(format!(
            "Conv2DBackpropInput: input_sizes input must be 1-dim with 4 or 2 elements, not \
             {}",
            sizes.len()
        ))),
    }
}
