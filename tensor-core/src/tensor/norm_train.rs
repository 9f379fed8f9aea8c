//! Batch normalization as training runs it: TensorFlow's `FusedBatchNormV3` with
//! `is_training = true` (the batch's own statistics, and the running averages it updates)
//! and `FusedBatchNormGradV3`, in training and in inference. Each is a composition of
//! reductions and elementwise ops, so it runs on every device.

use super::Tensor;
use crate::dtype::DataType;
use crate::element::Scalar;
use crate::error::{Error, Result};
use crate::ops::{ReduceOp, UnaryOp};
use crate::plan::window::DataFormat;

/// What a training batch norm gives besides its output: TensorFlow's outputs 1 to 4.
#[derive(Clone, Debug)]
pub struct BatchNormStatistics {
    /// `batch_mean`: the batch's mean per channel, or the running mean moved toward it by
    /// the exponential average factor.
    pub mean: Tensor,
    /// `batch_variance`: the batch's variance with Bessel's correction (`n / (n - 1)`), or
    /// the running variance moved toward it.
    pub variance: Tensor,
    /// `reserve_space_1`: the batch's mean, which the gradient reads.
    pub saved_mean: Tensor,
    /// `reserve_space_2`: the batch's variance without the correction, which the normal
    /// form used and the gradient reads.
    pub saved_variance: Tensor,
}

/// The gradients `FusedBatchNormGradV3` gives: of the image, of the scale and of the
/// offset.
#[derive(Clone, Debug)]
pub struct BatchNormGradients {
    /// `x_backprop`, in the image's dtype.
    pub x: Tensor,
    /// `scale_backprop`, in the parameters' dtype.
    pub scale: Tensor,
    /// `offset_backprop`, in the parameters' dtype.
    pub offset: Tensor,
}

/// How an image's channels lie: the axes a batch norm reduces over, the dims that make a
/// channel vector broadcast against the image, and the number of values per channel.
struct ChannelLayout {
    axes: Vec<isize>,
    vector: Vec<usize>,
    per_channel: usize,
}

impl ChannelLayout {
    /// The layout of `x` (4-D or 5-D) in `format`, with `params` (name, tensor) checked to
    /// be one value per channel.
    fn of(x: &Tensor, format: DataFormat, params: &[(&str, &Tensor)]) -> Result<Self> {
        if !matches!(x.rank(), 4 | 5) {
            return Err(Error::invalid(format!(
                "input must be 4 or 5-dimensional{}",
                x.shape()
            )));
        }
        let axis = format.channel_axis(x.rank());
        let depth = x.dims()[axis];
        for &(name, p) in params {
            if p.rank() != 1 || p.dims()[0] != depth {
                return Err(Error::invalid(format!(
                    "{name} must have the same number of elements as the channels of x, got {} \
                     and {depth}",
                    p.num_elements()
                )));
            }
        }
        let mut vector = vec![1; x.rank() - axis];
        vector[0] = depth;
        Ok(ChannelLayout {
            axes: (0..x.rank())
                .filter(|&d| d != axis)
                .map(|d| d as isize)
                .collect(),
            vector,
            per_channel: x.num_elements() / depth.max(1),
        })
    }

    /// Channel vector `v` shaped to broadcast against the image.
    fn spread(&self, v: &Tensor) -> Result<Tensor> {
        v.reshape(self.vector.clone())
    }

    /// The sum over every axis but the channels'.
    fn sum(&self, t: &Tensor) -> Result<Tensor> {
        t.reduce(ReduceOp::Sum, &self.axes, false)
    }
}

/// The dtype a batch norm computes in: its parameters' (float32 for half and bfloat16
/// images, as TensorFlow), float64 for a float64 image.
fn compute_dtype(x: &Tensor, params: &Tensor) -> DataType {
    if x.dtype() == DataType::Double {
        DataType::Double
    } else {
        params.dtype()
    }
}

impl Tensor {
    /// TensorFlow's `FusedBatchNormV3` in training: per channel, the batch's mean `m` and
    /// variance `v` (over every axis but the channels'), and `(x - m) / sqrt(v + epsilon) *
    /// scale + offset`; with the statistics the op gives besides. `exponential_avg_factor`
    /// 1 gives the batch's statistics; below 1, `running_mean` and `running_variance` moved
    /// toward them by that factor (Keras's momentum is `1 - factor`).
    #[allow(clippy::too_many_arguments)]
    pub fn batch_norm_training(
        &self,
        scale: &Tensor,
        offset: &Tensor,
        running_mean: &Tensor,
        running_variance: &Tensor,
        epsilon: f64,
        exponential_avg_factor: f64,
        format: DataFormat,
    ) -> Result<(Tensor, BatchNormStatistics)> {
        let layout = ChannelLayout::of(self, format, &[("scale", scale), ("offset", offset)])?;
        let dtype = compute_dtype(self, scale);
        let number = |v: f64| Tensor::full([0usize; 0], Scalar::F64(v), dtype, self.device());
        let count = number(layout.per_channel as f64)?;
        let x = self.clone().in_dtype(dtype)?;
        let mean = layout.sum(&x)?.div(&count)?;
        let centered = x.sub(&layout.spread(&mean)?)?;
        let variance = layout.sum(&centered.mul(&centered)?)?.div(&count)?;
        let inverse = variance.add(&number(epsilon)?)?.unary(UnaryOp::Rsqrt)?;
        let factor = inverse.mul(&scale.clone().in_dtype(dtype)?)?;
        let y = centered
            .mul(&layout.spread(&factor)?)?
            .add(&layout.spread(&offset.clone().in_dtype(dtype)?)?)?
            .in_dtype(self.dtype)?;
        let corrected = variance.mul(&number(
            layout.per_channel as f64 / layout.per_channel.saturating_sub(1).max(1) as f64,
        )?)?;
        let (new_mean, new_variance) = if exponential_avg_factor == 1.0 {
            (mean.clone(), corrected)
        } else {
            let moved = |running: &Tensor, batch: &Tensor, name: &str| -> Result<Tensor> {
                if running.dims() != mean.dims() {
                    return Err(Error::invalid(format!(
                        "{name} must have the same number of elements as the channels of x, \
                         got {} and {}",
                        running.num_elements(),
                        mean.num_elements()
                    )));
                }
                let keep = number(1.0 - exponential_avg_factor)?;
                let take = number(exponential_avg_factor)?;
                running
                    .clone()
                    .in_dtype(dtype)?
                    .mul(&keep)?
                    .add(&batch.mul(&take)?)
            };
            (
                moved(running_mean, &mean, "mean")?,
                moved(running_variance, &corrected, "variance")?,
            )
        };
        let statistics = BatchNormStatistics {
            mean: new_mean,
            variance: new_variance,
            saved_mean: mean,
            saved_variance: variance,
        };
        Ok((y, statistics))
    }

    /// TensorFlow's `FusedBatchNormGradV3`: the gradients of a batch norm's image, scale and
    /// offset from this, the gradient of its output, its image `x` and `scale`, and the
    /// statistics it normalised with: in `training`, the batch's (its `reserve_space_1` and
    /// `_2`), through which the gradient also flows; in inference, the population's.
    #[allow(clippy::too_many_arguments)]
    pub fn batch_norm_grad(
        &self,
        x: &Tensor,
        scale: &Tensor,
        mean: &Tensor,
        variance: &Tensor,
        epsilon: f64,
        format: DataFormat,
        training: bool,
    ) -> Result<BatchNormGradients> {
        const OP: &str = "FusedBatchNormGradV3";
        if self.shape() != x.shape() {
            return Err(Error::invalid(format!(
                "x and y_backprop must have same shape, but x has shape {} and y_backprop has \
                 shape {}",
                x.shape(),
                self.shape()
            )));
        }
        if self.dtype != x.dtype {
            return Err(Error::DTypeMismatch {
                op: OP,
                expected: x.dtype.to_string(),
                found: self.dtype,
            });
        }
        for other in [x, scale, mean, variance] {
            self.check_same_device(other, "batch_norm_grad")?;
        }
        let layout = ChannelLayout::of(
            x,
            format,
            &[
                ("scale", scale),
                ("reserve_space_1", mean),
                ("reserve_space_2", variance),
            ],
        )?;
        let dtype = compute_dtype(x, scale);
        let number = |v: f64| Tensor::full([0usize; 0], Scalar::F64(v), dtype, self.device());
        let [dy, x, scale, mean, variance] =
            [self, x, scale, mean, variance].map(|t| t.clone().in_dtype(dtype));
        let (dy, x, scale, mean, variance) = (dy?, x?, scale?, mean?, variance?);
        let inverse = variance.add(&number(epsilon)?)?.unary(UnaryOp::Rsqrt)?;
        let centered = x.sub(&layout.spread(&mean)?)?;
        let dy_sum = layout.sum(&dy)?;
        let dy_centered = layout.sum(&dy.mul(&centered)?)?;
        let scale_grad = dy_centered.mul(&inverse)?;
        let factor = layout.spread(&scale.mul(&inverse)?)?;
        let x_grad = if training {
            // scale / sqrt(v + e) * (dy - mean(dy) - (x - m) * mean(dy * (x - m)) / (v + e))
            let count = number(layout.per_channel as f64)?;
            let dy_mean = layout.spread(&dy_sum.div(&count)?)?;
            let along = layout.spread(&dy_centered.div(&count)?.mul(&inverse.mul(&inverse)?)?)?;
            dy.sub(&dy_mean)?
                .sub(&centered.mul(&along)?)?
                .mul(&factor)?
        } else {
            dy.mul(&factor)?
        };
        Ok(BatchNormGradients {
            x: x_grad.in_dtype(self.dtype)?,
            scale: scale_grad,
            offset: dy_sum,
        })
    }
}
