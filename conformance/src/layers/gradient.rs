//! The gradient ops training runs, checked on every device against central finite
//! differences, in float64 on the host, of the naive forward references: for a gradient
//! `dy` drawn with the case, the device's gradient of `sum(forward(x) * dy)` with respect
//! to `x` (or the filter, or the bias) against `(L(x + h e_i) - L(x - h e_i)) / 2h` for
//! every element `i`. Linear forwards (convolution in its filter, average pooling, bias)
//! take `h = 1`, where the difference is exact; the others a step small against the
//! inputs' spacing and curvature.
//!
//! Tolerance: [`Tolerance::Accumulated`] over the terms each gradient element sums, with
//! their magnitudes (the same differences of `|x|` and `|dy|`); the differences' own error
//! is far below float32's.

use polytensor_core::plan::window::DataFormat;
use polytensor_core::{Conv2dOptions, DataType, Pool2dOptions, Result, Scalar, Tensor, UnaryOp};

use super::reference::{output_dims, reference_conv, reference_pool, spatial};
use super::run::Inputs;
use crate::data::{self, Domain};
use crate::reference::Expected;
use crate::tolerance::Tolerance;
use crate::Values;

/// A gradient op.
#[derive(Debug, Clone)]
pub enum Gradient {
    /// `Conv2DBackpropFilter` of an image and a filter of these dims, or (`depthwise`)
    /// `DepthwiseConv2dNativeBackpropFilter`, or (`depthwise` and `input`)
    /// `DepthwiseConv2dNativeBackpropInput`.
    ConvFilter {
        /// The image dims, in `options.format`.
        image: Vec<usize>,
        /// `[k_h, k_w, in, out]` (`[k_h, k_w, in, multiplier]` depthwise).
        filter: [usize; 4],
        /// The forward convolution's strides, dilations, padding and format.
        options: Conv2dOptions,
        /// A depthwise convolution.
        depthwise: bool,
        /// The gradient of the image, not the filter.
        input: bool,
    },
    /// `FusedBatchNormGradV3` of NHWC images of these dims: output `of` (0 the image's, 1
    /// the scale's, 2 the offset's gradient), in `training` (through the batch's statistics)
    /// or inference.
    BatchNorm {
        /// `[n, h, w, c]`.
        dims: [usize; 4],
        /// Training (the batch's statistics) or inference (given ones).
        training: bool,
        /// Which gradient: of the image (0), the scale (1) or the offset (2).
        of: usize,
    },
    /// `MaxPoolGrad` (`max`) or `AvgPoolGrad` of an image of these dims.
    Pool {
        /// The image dims, in `options.format`.
        image: Vec<usize>,
        /// The forward pool's window, strides, padding and format.
        options: Pool2dOptions,
        /// Max instead of average.
        max: bool,
    },
    /// `BiasAddGrad` of a gradient of these dims.
    BiasAdd(Vec<usize>, DataFormat),
    /// The gradient op of an activation (`ReluGrad`, `SigmoidGrad`, ...), its inputs
    /// `map(v)` of values `v` drawn in [-2, 2].
    Unary(UnaryOp, Vec<usize>, fn(f64) -> f64),
    /// `SoftmaxCrossEntropyWithLogits` (or the sparse one) of `[batch, classes]` logits:
    /// its `backprop` output, the summed loss's gradient.
    CrossEntropy([usize; 2], bool),
    /// `L2Loss` (a forward op, against `sum(x * x) / 2`).
    L2Loss(Vec<usize>),
}

impl Gradient {
    /// The report's row.
    pub fn name(&self) -> &'static str {
        match self {
            Gradient::ConvFilter {
                depthwise: false, ..
            } => "conv2d_backprop_filter",
            Gradient::ConvFilter { input: false, .. } => "depthwise_backprop_filter",
            Gradient::ConvFilter { .. } => "depthwise_backprop_input",
            Gradient::BatchNorm { training: true, .. } => "batch_norm_grad_training",
            Gradient::BatchNorm { .. } => "batch_norm_grad_inference",
            Gradient::Pool { max: true, .. } => "max_pool2d_grad",
            Gradient::Pool { .. } => "avg_pool2d_grad",
            Gradient::BiasAdd(..) => "bias_add_grad",
            Gradient::Unary(UnaryOp::Relu, ..) => "relu_grad",
            Gradient::Unary(UnaryOp::Relu6, ..) => "relu6_grad",
            Gradient::Unary(UnaryOp::Sigmoid, ..) => "sigmoid_grad",
            Gradient::Unary(UnaryOp::Tanh, ..) => "tanh_grad",
            Gradient::Unary(UnaryOp::Sqrt, ..) => "sqrt_grad",
            Gradient::Unary(UnaryOp::Rsqrt, ..) => "rsqrt_grad",
            Gradient::Unary(..) => "reciprocal_grad",
            Gradient::CrossEntropy(_, true) => "sparse_softmax_cross_entropy",
            Gradient::CrossEntropy(..) => "softmax_cross_entropy",
            Gradient::L2Loss(..) => "l2_loss",
        }
    }
}

/// Every gradient case: (name, op), run in float32.
pub(super) fn cases() -> Vec<(String, Gradient)> {
    use polytensor_core::plan::window::Padding::{Explicit, Same, Valid};
    use DataFormat::{Nchw, Nhwc};
    let conv = |strides, dilations, padding, format| Conv2dOptions {
        strides,
        dilations,
        padding,
        format,
    };
    let pool = |window, strides, padding, format| Pool2dOptions {
        window,
        strides,
        padding,
        format,
    };
    let mut cases = vec![
        (
            "same",
            [2, 5, 6, 3],
            [3, 3, 3, 4],
            conv([1, 1], [1, 1], Same, Nhwc),
        ),
        (
            "valid_stride_2",
            [1, 7, 8, 2],
            [3, 2, 2, 3],
            conv([2, 2], [1, 1], Valid, Nhwc),
        ),
        (
            "dilated",
            [1, 7, 7, 2],
            [2, 3, 2, 2],
            conv([1, 1], [2, 2], Same, Nhwc),
        ),
        (
            "explicit_stride_2x1",
            [2, 5, 4, 2],
            [2, 3, 2, 2],
            conv([2, 1], [1, 1], Explicit(vec![(1, 2), (0, 1)]), Nhwc),
        ),
        (
            "stride_over_kernel",
            [1, 8, 8, 2],
            [2, 2, 2, 3],
            conv([3, 3], [1, 1], Valid, Nhwc),
        ),
        (
            "nchw",
            [2, 3, 5, 4],
            [3, 3, 3, 2],
            conv([1, 2], [1, 1], Same, Nchw),
        ),
        // Enough channels for the CPU's blocked GEMM kernels (filter and input gradients).
        (
            "deep",
            [3, 6, 7, 9],
            [3, 3, 9, 5],
            conv([1, 1], [1, 1], Same, Nhwc),
        ),
        (
            "deep_strided_dilated",
            [2, 9, 8, 10],
            [3, 2, 10, 4],
            conv([2, 1], [1, 2], Same, Nhwc),
        ),
    ]
    .into_iter()
    .map(|(name, image, filter, options)| {
        let op = Gradient::ConvFilter {
            image: image.to_vec(),
            filter,
            options,
            depthwise: false,
            input: false,
        };
        (name.to_string(), op)
    })
    .collect::<Vec<_>>();
    for input in [false, true] {
        for (name, image, filter, options) in [
            (
                "same",
                [2, 5, 6, 3],
                [3, 3, 3, 1],
                conv([1, 1], [1, 1], Same, Nhwc),
            ),
            (
                "multiplier_2_stride_2",
                [1, 7, 8, 2],
                [3, 3, 2, 2],
                conv([2, 2], [1, 1], Same, Nhwc),
            ),
            (
                "dilated_valid",
                [1, 7, 7, 2],
                [2, 3, 2, 2],
                conv([1, 1], [2, 2], Valid, Nhwc),
            ),
            (
                "explicit_stride_2x1",
                [2, 5, 4, 2],
                [2, 3, 2, 1],
                conv([2, 1], [1, 1], Explicit(vec![(1, 2), (0, 1)]), Nhwc),
            ),
            (
                "nchw",
                [2, 3, 5, 4],
                [3, 3, 3, 2],
                conv([1, 2], [1, 1], Same, Nchw),
            ),
        ] {
            let op = Gradient::ConvFilter {
                image: image.to_vec(),
                filter,
                options,
                depthwise: true,
                input,
            };
            cases.push((name.to_string(), op));
        }
    }
    for training in [true, false] {
        for of in 0..3 {
            for dims in [[2, 3, 4, 5], [1, 1, 1, 3]] {
                let name = format!(
                    "{}x{}x{}x{}_{}",
                    dims[0],
                    dims[1],
                    dims[2],
                    dims[3],
                    ["x", "scale", "offset"][of]
                );
                cases.push((name, Gradient::BatchNorm { dims, training, of }));
            }
        }
    }
    for max in [true, false] {
        for (name, image, options) in [
            ("tiles_2x2", [2, 6, 4, 3], pool([2, 2], [2, 2], Valid, Nhwc)),
            ("tiles_same", [1, 5, 7, 2], pool([2, 2], [2, 2], Same, Nhwc)),
            (
                "tiles_leftover",
                [1, 7, 5, 2],
                pool([2, 2], [2, 2], Valid, Nhwc),
            ),
            (
                "overlapping_3x3",
                [2, 6, 5, 2],
                pool([3, 3], [2, 1], Valid, Nhwc),
            ),
            (
                "overlapping_same",
                [1, 5, 6, 3],
                pool([3, 3], [1, 1], Same, Nhwc),
            ),
            ("nchw", [1, 2, 6, 6], pool([2, 2], [2, 2], Valid, Nchw)),
        ] {
            let op = Gradient::Pool {
                image: image.to_vec(),
                options,
                max,
            };
            cases.push((name.to_string(), op));
        }
    }
    cases.push(("nhwc".into(), Gradient::BiasAdd(vec![2, 3, 4, 5], Nhwc)));
    cases.push(("nchw".into(), Gradient::BiasAdd(vec![2, 5, 3, 4], Nchw)));
    cases.push(("matrix".into(), Gradient::BiasAdd(vec![7, 3], Nhwc)));
    // Inputs across ReLU6's 0 and 6, through the curves' bends, and positive for roots and
    // reciprocals.
    let across: fn(f64) -> f64 = |v| v * 4.0;
    let bends: fn(f64) -> f64 = |v| v * 2.0;
    let positive: fn(f64) -> f64 = |v| v.abs() * 2.0 + 0.05;
    for (op, map) in [
        (UnaryOp::Relu, bends),
        (UnaryOp::Relu6, across),
        (UnaryOp::Sigmoid, across),
        (UnaryOp::Tanh, bends),
        (UnaryOp::Sqrt, positive),
        (UnaryOp::Rsqrt, positive),
        (UnaryOp::Recip, positive),
    ] {
        cases.push(("5x7".into(), Gradient::Unary(op, vec![5, 7], map)));
    }
    for sparse in [false, true] {
        cases.push(("4x7".into(), Gradient::CrossEntropy([4, 7], sparse)));
        cases.push(("1x1".into(), Gradient::CrossEntropy([1, 1], sparse)));
    }
    cases.push(("3x5".into(), Gradient::L2Loss(vec![3, 5])));
    cases
}

/// A tensor's values as float64.
fn floats(values: &Values) -> Vec<f64> {
    values.values.iter().map(|v| v.to_f64()).collect()
}

/// Float64 values of `dims`.
fn of(dims: &[usize], values: &[f64]) -> Values {
    Values {
        dims: dims.to_vec(),
        values: values.iter().map(|&v| Scalar::F64(v)).collect(),
    }
}

/// `sum(y * dy)`.
fn weighted(y: &[Expected], dy: &[f64]) -> f64 {
    y.iter().zip(dy).map(|(y, d)| y.value.to_f64() * d).sum()
}

/// Central differences of `loss` at `x`, one per element, with step `h(x_i)`.
fn differences(
    x: &[f64],
    h: impl Fn(f64) -> f64,
    loss: impl Fn(&[f64]) -> Result<f64>,
) -> Result<Vec<f64>> {
    let mut at = x.to_vec();
    (0..x.len())
        .map(|i| {
            let step = h(x[i]);
            at[i] = x[i] + step;
            let up = loss(&at)?;
            at[i] = x[i] - step;
            let down = loss(&at)?;
            at[i] = x[i];
            Ok((up - down) / (2.0 * step))
        })
        .collect()
}

/// Expectations of float32 results: the differences, rounded, with the magnitudes and term
/// counts of their sums.
fn expected(values: Vec<f64>, scales: Vec<f64>, terms: usize) -> Vec<Expected> {
    values
        .into_iter()
        .zip(scales)
        .map(|(value, scale)| Expected {
            value: data::round_to(DataType::Float, Scalar::F64(value)),
            scale,
            terms,
        })
        .collect()
}

/// Run gradient case `op` on its inputs: the device's result, the expectations and the
/// tolerance.
pub(super) fn run(
    op: &Gradient,
    inputs: &mut Inputs<'_>,
) -> Result<(Tensor, Vec<Expected>, Tolerance)> {
    match op {
        Gradient::ConvFilter {
            image,
            filter,
            options,
            depthwise,
            input,
        } => {
            let windows = spatial(
                options.format,
                image,
                [filter[0], filter[1]],
                options.strides,
                options.dilations,
            );
            let channels = if *depthwise {
                filter[2] * filter[3]
            } else {
                filter[3]
            };
            let out = output_dims(options.format, image, &windows, &options.padding, channels)?;
            let (x, tx) = inputs.next(image, Domain::Finite)?;
            let (f, tf) = inputs.next(filter, Domain::Finite)?;
            let (dy, tdy) = inputs.next(&out, Domain::Finite)?;
            let got = match (depthwise, input) {
                (false, _) => tx.conv2d_backprop_filter(*filter, &tdy, options)?,
                (true, false) => tx.depthwise_conv2d_backprop_filter(*filter, &tdy, options)?,
                (true, true) => tdy.depthwise_conv2d_backprop_input(&tf, image, options)?,
            };
            // The loss is linear in the filter and in the image: differences at zero with
            // h = 1 are exact.
            let loss = |x: &[f64], f: &[f64], dy: &[f64]| -> Result<f64> {
                let y = reference_conv(
                    DataType::Double,
                    &of(image, x),
                    &of(filter, f),
                    options.format,
                    &windows,
                    &options.padding,
                    *depthwise,
                    None,
                )?;
                Ok(weighted(&y, dy))
            };
            let (x64, f64s, dy64) = (floats(&x), floats(&f), floats(&dy));
            let abs = |v: &[f64]| v.iter().map(|x| x.abs()).collect::<Vec<_>>();
            let (want, scales, terms) = if *input {
                let zero = vec![0.0; x64.len()];
                let want = differences(&zero, |_| 1.0, |x| loss(x, &f64s, &dy64))?;
                let scales = differences(&zero, |_| 1.0, |x| loss(x, &abs(&f64s), &abs(&dy64)))?;
                (want, scales, filter[0] * filter[1] * filter[3])
            } else {
                let zero = vec![0.0; f64s.len()];
                let want = differences(&zero, |_| 1.0, |f| loss(&x64, f, &dy64))?;
                let scales = differences(&zero, |_| 1.0, |f| loss(&abs(&x64), f, &abs(&dy64)))?;
                (want, scales, out.iter().product::<usize>() / channels)
            };
            Ok((got, expected(want, scales, terms), Tolerance::Accumulated))
        }
        Gradient::BatchNorm { dims, training, of } => batch_norm(inputs, *dims, *training, *of),
        Gradient::Pool {
            image,
            options,
            max,
        } => {
            let windows = spatial(
                options.format,
                image,
                options.window,
                options.strides,
                [1, 1],
            );
            let channels = image[options.format.channel_axis(4)];
            let out = output_dims(options.format, image, &windows, &options.padding, channels)?;
            let (x, tx) = inputs.next(image, Domain::Finite)?;
            let (dy, tdy) = inputs.next(&out, Domain::Finite)?;
            let dims: [usize; 4] = [image[0], image[1], image[2], image[3]];
            let got = if *max {
                tx.max_pool2d_grad(&tx.max_pool2d(options)?, &tdy, options)?
            } else {
                tdy.avg_pool2d_grad(dims, options)?
            };
            let loss = |x: &[f64], dy: &[f64]| -> Result<f64> {
                let y = reference_pool(
                    DataType::Double,
                    &of(image, x),
                    options.format,
                    &windows,
                    &options.padding,
                    *max,
                )?;
                Ok(weighted(&y, dy))
            };
            // Max pooling is linear between ties: a step far below the values' spacing.
            let step = if *max { 1e-7 } else { 1.0 };
            let (x64, dy64) = (floats(&x), floats(&dy));
            let want = differences(&x64, |_| step, |x| loss(x, &dy64))?;
            let abs: Vec<f64> = dy64.iter().map(|d| d.abs()).collect();
            let scales = differences(&x64, |_| step, |x| loss(x, &abs))?;
            let terms = options.window[0] * options.window[1];
            Ok((got, expected(want, scales, terms), Tolerance::Accumulated))
        }
        Gradient::BiasAdd(dims, format) => {
            let axis = format.channel_axis(dims.len());
            let (dy, tdy) = inputs.next(dims, Domain::Finite)?;
            let got = tdy.bias_add_grad(*format)?;
            let dy64 = floats(&dy);
            let channel =
                |flat: usize| (flat / dims[axis + 1..].iter().product::<usize>()) % dims[axis];
            // `sum((x + b) * dy)` is linear in `b`.
            let loss = |b: &[f64], dy: &[f64]| -> f64 {
                dy.iter().enumerate().map(|(i, d)| b[channel(i)] * d).sum()
            };
            let zero = vec![0.0; dims[axis]];
            let want = differences(&zero, |_| 1.0, |b| Ok(loss(b, &dy64)))?;
            let abs: Vec<f64> = dy64.iter().map(|d| d.abs()).collect();
            let scales = differences(&zero, |_| 1.0, |b| Ok(loss(b, &abs)))?;
            let terms = dy64.len() / dims[axis];
            Ok((got, expected(want, scales, terms), Tolerance::Accumulated))
        }
        Gradient::Unary(unary, dims, map) => {
            let (x, tx) = inputs.next_mapped(dims, Domain::Finite, Some(*map))?;
            let (dy, tdy) = inputs.next(dims, Domain::Finite)?;
            let value = match unary {
                UnaryOp::Relu | UnaryOp::Relu6 => tx.clone(),
                _ => tx.unary(*unary)?,
            };
            let got = Tensor::unary_grad(*unary, &value, &tdy)?;
            let f = |v: f64| match unary {
                UnaryOp::Relu => v.max(0.0),
                UnaryOp::Relu6 => v.clamp(0.0, 6.0),
                UnaryOp::Sigmoid => 1.0 / (1.0 + (-v).exp()),
                UnaryOp::Tanh => v.tanh(),
                UnaryOp::Sqrt => v.sqrt(),
                UnaryOp::Rsqrt => 1.0 / v.sqrt(),
                _ => 1.0 / v,
            };
            let (x64, dy64) = (floats(&x), floats(&dy));
            let slopes: Vec<f64> = x64
                .iter()
                .map(|&v| {
                    let h = 1e-6 * v.abs().max(1e-3);
                    (f(v + h) - f(v - h)) / (2.0 * h)
                })
                .collect();
            let want: Vec<f64> = slopes.iter().zip(&dy64).map(|(s, d)| s * d).collect();
            // The device works from its own rounded `y`: a few roundings of the result.
            let scales = slopes
                .iter()
                .zip(&x64)
                .zip(&dy64)
                .map(|((s, &v), d)| d.abs() * (s.abs() + f(v).abs().powi(3) + 1.0))
                .collect();
            Ok((got, expected(want, scales, 8), Tolerance::Accumulated))
        }
        Gradient::CrossEntropy([batch, classes], sparse) => {
            let (x, tx) = inputs.next(&[*batch, *classes], Domain::Finite)?;
            let x64 = floats(&x);
            let mut rng = data::Rng::for_case(&format!("{op:?} labels"));
            let picks: Vec<usize> = (0..*batch)
                .map(|_| rng.int(0, *classes as i128 - 1) as usize)
                .collect();
            // Dense labels: a distribution per row (the op's `backprop` assumes one).
            let labels: Vec<f64> = if *sparse {
                (0..batch * classes)
                    .map(|i| f64::from(u8::from(picks[i / classes] == i % classes)))
                    .collect()
            } else {
                let raw: Vec<f64> = (0..batch * classes)
                    .map(|_| rng.uniform(0.1, 1.0))
                    .collect();
                raw.chunks(*classes)
                    .flat_map(|row| {
                        let total: f64 = row.iter().sum();
                        row.iter().map(move |v| v / total)
                    })
                    .collect()
            };
            let device = tx.device().clone();
            let (_, got) = if *sparse {
                let picks: Vec<i32> = picks.iter().map(|&p| p as i32).collect();
                tx.sparse_softmax_cross_entropy(&Tensor::from_slice(&picks, [*batch], &device)?)?
            } else {
                let t = Tensor::from_slice(&labels, [*batch, *classes], &device)?
                    .cast(DataType::Float)?;
                tx.softmax_cross_entropy(&t)?
            };
            // The summed loss, `sum(-labels * log_softmax(x))`, per row.
            let labels_f32: Vec<f64> = labels.iter().map(|&v| f64::from(v as f32)).collect();
            let loss = |x: &[f64]| -> Result<f64> {
                Ok(x.chunks(*classes)
                    .zip(labels_f32.chunks(*classes))
                    .map(|(row, l)| {
                        let top = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                        let log_sum = row.iter().map(|v| (v - top).exp()).sum::<f64>().ln() + top;
                        row.iter()
                            .zip(l)
                            .map(|(v, l)| l * (log_sum - v))
                            .sum::<f64>()
                    })
                    .sum())
            };
            let want = differences(&x64, |_| 1e-5, loss)?;
            let scales = vec![2.0; want.len()];
            Ok((
                got,
                expected(want, scales, *classes),
                Tolerance::Accumulated,
            ))
        }
        Gradient::L2Loss(dims) => {
            let (x, tx) = inputs.next(dims, Domain::Finite)?;
            let x64 = floats(&x);
            let half_squares: f64 = x64.iter().map(|v| v * v / 2.0).sum();
            let want = expected(vec![half_squares], vec![half_squares], x64.len() + 1);
            Ok((tx.l2_loss()?, want, Tolerance::Accumulated))
        }
    }
}

/// A `FusedBatchNormGradV3` case: output `of` against central differences of
/// `sum(batch_norm(x, scale, offset) * dy)` in float64.
fn batch_norm(
    inputs: &mut Inputs<'_>,
    dims: [usize; 4],
    training: bool,
    of: usize,
) -> Result<(Tensor, Vec<Expected>, Tolerance)> {
    const EPSILON: f64 = 1e-3;
    let c = dims[3];
    let positive: fn(f64) -> f64 = |v| v.abs() + 0.5;
    let (x, tx) = inputs.next(&dims, Domain::Finite)?;
    let (dy, tdy) = inputs.next(&dims, Domain::Finite)?;
    let (scale, tscale) = inputs.next(&[c], Domain::Finite)?;
    let (offset, toffset) = inputs.next(&[c], Domain::Finite)?;
    let (mean, tmean) = inputs.next(&[c], Domain::Finite)?;
    let (variance, tvariance) = inputs.next_mapped(&[c], Domain::Finite, Some(positive))?;
    let format = DataFormat::Nhwc;
    // The statistics the gradient is given: the batch's (as the forward saved them), or
    // the population's.
    let (tmean, tvariance) = if training {
        let (_, stats) =
            tx.batch_norm_training(&tscale, &toffset, &tmean, &tvariance, EPSILON, 1.0, format)?;
        (stats.saved_mean, stats.saved_variance)
    } else {
        (tmean, tvariance)
    };
    let grads = tdy.batch_norm_grad(&tx, &tscale, &tmean, &tvariance, EPSILON, format, training)?;
    let got = [grads.x, grads.scale, grads.offset][of].clone();
    let [x64, dy64, scale64, offset64, mean64, var64] =
        [&x, &dy, &scale, &offset, &mean, &variance].map(floats);
    let per = x64.len() / c;
    // Per channel: the mean and variance the forward normalises with.
    let statistics = |x: &[f64]| -> (Vec<f64>, Vec<f64>) {
        if !training {
            return (mean64.clone(), var64.clone());
        }
        let mut m = vec![0.0; c];
        let mut v = vec![0.0; c];
        for (i, value) in x.iter().enumerate() {
            m[i % c] += value / per as f64;
        }
        for (i, value) in x.iter().enumerate() {
            v[i % c] += (value - m[i % c]).powi(2) / per as f64;
        }
        (m, v)
    };
    let loss = |x: &[f64], scale: &[f64], offset: &[f64]| -> Result<f64> {
        let (m, v) = statistics(x);
        Ok(x.iter()
            .enumerate()
            .map(|(i, value)| {
                let k = i % c;
                let y = (value - m[k]) / (v[k] + EPSILON).sqrt() * scale[k] + offset[k];
                y * dy64[i]
            })
            .sum())
    };
    let h = |v: f64| 1e-5 * v.abs().max(1.0);
    let want = match of {
        0 => differences(&x64, h, |x| loss(x, &scale64, &offset64))?,
        1 => differences(&scale64, h, |s| loss(&x64, s, &offset64))?,
        _ => differences(&offset64, h, |o| loss(&x64, &scale64, o))?,
    };
    // Magnitudes: every term of the gradient's sums taken absolutely.
    let (m, v) = statistics(&x64);
    let norm = |i: usize| ((x64[i] - m[i % c]) / (v[i % c] + EPSILON).sqrt()).abs();
    let mut dy_sum = vec![0.0; c];
    let mut dy_norm = vec![0.0; c];
    for i in 0..x64.len() {
        dy_sum[i % c] += dy64[i].abs();
        dy_norm[i % c] += (dy64[i] * norm(i)).abs();
    }
    let scales: Vec<f64> = match of {
        0 => (0..x64.len())
            .map(|i| {
                let k = i % c;
                let factor = scale64[k].abs() / (v[k] + EPSILON).sqrt();
                let through = if training {
                    (dy_sum[k] + norm(i) * dy_norm[k]) / per as f64
                } else {
                    0.0
                };
                factor * (dy64[i].abs() + through)
            })
            .collect(),
        1 => dy_norm,
        _ => dy_sum,
    };
    let terms = if of == 0 && !training { 4 } else { per + 4 };
    Ok((got, expected(want, scales, terms), Tolerance::Accumulated))
}
