//! The layer ops of inference graphs, checked on every device against naive references:
//! convolutions, pooling, bias, batch normalisation, softmax, and the shape ops that move
//! data (pad, mirror pad, concat, stack, strided slice, tile, split). These are `Tensor`
//! methods built from the kernel surface, so each case runs through the public API, with
//! odd sizes, padding edges, strides larger than the window, dilation, empty batches,
//! NCHW, and transposed and offset inputs.
//!
//! Tolerances: data movement and max pooling are exact; convolutions and average pooling
//! are accumulations ([`Tolerance::Accumulated`] over the taps); softmax, log-softmax and
//! batch normalisation are within 8 ulp of the magnitudes they are computed from.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use polytensor_core::plan::strided_slice::StridedSliceSpec;
use polytensor_core::plan::window::{resolve_windows, DataFormat, Padding, Window};
use polytensor_core::{
    Conv2dOptions, ConvEpilogue, DataType, Device, Error, MirrorMode, Pool2dOptions, Result,
    Scalar, Tensor, UnaryOp,
};

use crate::data::{self, Domain, Rng};
use crate::reference::{self, Expected};
use crate::tolerance::Tolerance;
use crate::{build, check, Outcome, Values, Variant};

/// What a layer case runs.
#[derive(Debug, Clone)]
pub enum Layer {
    /// `Conv2D` (or `DepthwiseConv2dNative` when `depthwise`) of an image and a filter.
    Conv {
        /// The image dims, in `options.format`.
        image: Vec<usize>,
        /// `[k_h, k_w, in, out]` (depthwise: `[k_h, k_w, in, multiplier]`).
        filter: [usize; 4],
        /// Strides, dilations, padding and format.
        options: Conv2dOptions,
        /// Depthwise instead of a full convolution.
        depthwise: bool,
        /// Fused with a per-channel scale, shift and `Relu6` after it (TensorFlow's
        /// `_FusedConv2D` of a convolution, a folded batch norm and the activation).
        fused: bool,
    },
    /// `MaxPool` (`max`) or `AvgPool`.
    Pool {
        /// The image dims, in `options.format`.
        image: Vec<usize>,
        /// Window, strides, padding and format.
        options: Pool2dOptions,
        /// Max instead of average.
        max: bool,
    },
    /// `BiasAdd` of a per-channel bias.
    BiasAdd(Vec<usize>, DataFormat),
    /// `FusedBatchNormV3` in inference.
    BatchNorm(Vec<usize>, DataFormat),
    /// `Softmax` (or `LogSoftmax` when `true`) over the last dim.
    Softmax(Vec<usize>, bool),
    /// `Pad` with a value.
    Pad(Vec<usize>, Vec<(usize, usize)>, Scalar),
    /// `MirrorPad`.
    MirrorPad(Vec<usize>, Vec<(usize, usize)>, MirrorMode),
    /// `ConcatV2` of tensors of these dims along an axis.
    Concat(Vec<Vec<usize>>, i64),
    /// `Pack` of `n` tensors of one shape along an axis.
    Stack(usize, Vec<usize>, i64),
    /// `StridedSlice`.
    StridedSlice(Vec<usize>, StridedSliceSpec),
    /// `Tile`.
    Tile(Vec<usize>, Vec<usize>),
    /// `SplitV` along an axis, the pieces joined back with `concat`.
    Split(Vec<usize>, Vec<i64>, i64),
    /// `GatherV2` of params of these dims by int32 indices of these dims and values, along an
    /// axis with batch dims.
    Gather {
        /// The params' dims.
        params: Vec<usize>,
        /// The indices' dims.
        dims: Vec<usize>,
        /// The indices, row-major.
        indices: Vec<i32>,
        /// The gathered axis.
        axis: i64,
        /// Leading dims gathered separately.
        batch_dims: i64,
    },
    /// `OneHot` of int64 indices with a depth along an axis.
    OneHot(Vec<i64>, usize, i64),
}

impl Layer {
    /// The op's name: the report's row.
    pub fn name(&self) -> &'static str {
        match self {
            Layer::Conv {
                depthwise: true,
                fused: true,
                ..
            } => "depthwise_conv2d_fused",
            Layer::Conv {
                depthwise: true, ..
            } => "depthwise_conv2d",
            Layer::Conv { fused: true, .. } => "conv2d_fused",
            Layer::Conv { .. } => "conv2d",
            Layer::Pool { max: true, .. } => "max_pool2d",
            Layer::Pool { .. } => "avg_pool2d",
            Layer::BiasAdd(..) => "bias_add",
            Layer::BatchNorm(..) => "batch_norm",
            Layer::Softmax(_, true) => "log_softmax",
            Layer::Softmax(..) => "softmax",
            Layer::Pad(..) => "pad",
            Layer::MirrorPad(..) => "mirror_pad",
            Layer::Concat(..) => "concat",
            Layer::Stack(..) => "stack",
            Layer::StridedSlice(..) => "strided_slice",
            Layer::Tile(..) => "tile",
            Layer::Split(..) => "split",
            Layer::Gather { .. } => "gather",
            Layer::OneHot(..) => "one_hot",
        }
    }
}

/// One layer case: a name (which seeds its data), the dtype, how the first input is laid
/// out, and the layer.
#[derive(Debug, Clone)]
pub struct LayerCase {
    /// Unique; seeds the inputs.
    pub name: String,
    /// The dtype of every input.
    pub dtype: DataType,
    /// The layout of the first input.
    pub variant: Variant,
    /// What runs.
    pub layer: Layer,
}

const FLOATS: [DataType; 4] = [
    DataType::Float,
    DataType::Half,
    DataType::BFloat16,
    DataType::Double,
];

const MOVED: [DataType; 5] = [
    DataType::Float,
    DataType::Half,
    DataType::Int8,
    DataType::Int32,
    DataType::Bool,
];

fn conv(image: &[usize], filter: [usize; 4], options: Conv2dOptions, depthwise: bool) -> Layer {
    Layer::Conv {
        image: image.to_vec(),
        filter,
        options,
        depthwise,
        fused: false,
    }
}

fn conv_options(
    strides: [usize; 2],
    dilations: [usize; 2],
    padding: Padding,
    format: DataFormat,
) -> Conv2dOptions {
    Conv2dOptions {
        strides,
        dilations,
        padding,
        format,
    }
}

fn pool_options(
    window: [usize; 2],
    strides: [usize; 2],
    padding: Padding,
    format: DataFormat,
) -> Pool2dOptions {
    Pool2dOptions {
        window,
        strides,
        padding,
        format,
    }
}

/// Every layer case.
pub fn layer_cases() -> Vec<LayerCase> {
    use DataFormat::{Nchw, Nhwc};
    use Padding::{Same, Valid};
    let mut layers: Vec<(String, Layer, &[DataType])> = Vec::new();
    let convs = [
        (
            "same",
            [2, 7, 6, 3],
            [3, 3, 3, 4],
            conv_options([1, 1], [1, 1], Same, Nhwc),
        ),
        (
            "valid_stride_2x3",
            [1, 9, 8, 2],
            [3, 2, 2, 3],
            conv_options([2, 3], [1, 1], Valid, Nhwc),
        ),
        (
            "dilated",
            [1, 8, 9, 3],
            [3, 3, 3, 2],
            conv_options([1, 1], [2, 2], Same, Nhwc),
        ),
        (
            "explicit",
            [2, 5, 6, 2],
            [2, 3, 2, 2],
            conv_options(
                [2, 1],
                [1, 1],
                Padding::Explicit(vec![(1, 2), (0, 1)]),
                Nhwc,
            ),
        ),
        (
            "stride_over_kernel",
            [1, 10, 10, 2],
            [2, 2, 2, 2],
            conv_options([3, 3], [1, 1], Valid, Nhwc),
        ),
        (
            "empty_batch",
            [0, 5, 5, 2],
            [3, 3, 2, 3],
            conv_options([1, 1], [1, 1], Same, Nhwc),
        ),
        (
            "pointwise",
            [2, 4, 5, 6],
            [1, 1, 6, 5],
            conv_options([1, 1], [1, 1], Valid, Nhwc),
        ),
        // Enough channels for a CPU's implicit GEMM (fewer run directly).
        (
            "wide_channels",
            [1, 6, 5, 9],
            [3, 3, 9, 4],
            conv_options([1, 2], [1, 1], Same, Nhwc),
        ),
        (
            "wide_pointwise",
            [2, 3, 4, 10],
            [1, 1, 10, 3],
            conv_options([1, 1], [1, 1], Valid, Nhwc),
        ),
        (
            "nchw_same_stride_2",
            [2, 3, 7, 6],
            [3, 3, 3, 4],
            conv_options([2, 2], [1, 1], Same, Nchw),
        ),
    ];
    for (name, image, filter, options) in &convs {
        let full = conv(image, *filter, options.clone(), false);
        layers.push((format!("conv2d_{name}"), full, &FLOATS));
        // Two filters per channel.
        let depthwise = conv(
            image,
            [filter[0], filter[1], filter[2], 2],
            options.clone(),
            true,
        );
        layers.push((format!("depthwise_{name}"), depthwise, &FLOATS));
    }
    // Fused epilogues, through the direct kernels' paths: few channels, the implicit GEMM,
    // a pointwise GEMM, depthwise, and odd SAME padding.
    for name in [
        "same",
        "wide_channels",
        "wide_pointwise",
        "nchw_same_stride_2",
    ] {
        let (_, image, filter, options) = convs
            .iter()
            .find(|c| c.0 == name)
            .expect("the fused cases name convolutions above");
        for depthwise in [false, true] {
            let filter = if depthwise {
                [filter[0], filter[1], filter[2], 2]
            } else {
                *filter
            };
            let layer = Layer::Conv {
                image: image.to_vec(),
                filter,
                options: options.clone(),
                depthwise,
                fused: true,
            };
            let kind = if depthwise { "depthwise" } else { "conv2d" };
            layers.push((format!("{kind}_fused_{name}"), layer, &FLOATS));
        }
    }
    let pools = [
        (
            "3x3_s2_same",
            [2, 7, 6, 3],
            pool_options([3, 3], [2, 2], Same, Nhwc),
        ),
        (
            "2x2_s2_valid",
            [1, 9, 8, 2],
            pool_options([2, 2], [2, 2], Valid, Nhwc),
        ),
        (
            "3x2_s1_same_nchw",
            [2, 3, 5, 4],
            pool_options([3, 2], [1, 1], Same, Nchw),
        ),
        (
            "2x2_s3_valid",
            [1, 8, 8, 1],
            pool_options([2, 2], [3, 3], Valid, Nhwc),
        ),
    ];
    for (name, image, options) in &pools {
        let pool = |max| Layer::Pool {
            image: image.to_vec(),
            options: options.clone(),
            max,
        };
        let max_dtypes: &[DataType] = &[DataType::Float, DataType::Half, DataType::Int32];
        layers.push((format!("max_pool_{name}"), pool(true), max_dtypes));
        layers.push((format!("avg_pool_{name}"), pool(false), &FLOATS));
    }
    layers.push((
        "bias_add_nhwc".into(),
        Layer::BiasAdd(vec![2, 5, 3], Nhwc),
        &FLOATS,
    ));
    layers.push((
        "bias_add_nchw".into(),
        Layer::BiasAdd(vec![2, 3, 4, 5], Nchw),
        &FLOATS,
    ));
    layers.push((
        "batch_norm_nhwc".into(),
        Layer::BatchNorm(vec![2, 4, 5, 3], Nhwc),
        &FLOATS,
    ));
    layers.push((
        "batch_norm_nchw".into(),
        Layer::BatchNorm(vec![2, 3, 4, 5], Nchw),
        &FLOATS,
    ));
    for (dims, name) in [
        (vec![3, 7], "3x7"),
        (vec![2, 1, 5], "2x1x5"),
        (vec![4, 1], "4x1"),
    ] {
        layers.push((
            format!("softmax_{name}"),
            Layer::Softmax(dims.clone(), false),
            &FLOATS,
        ));
        layers.push((
            format!("log_softmax_{name}"),
            Layer::Softmax(dims, true),
            &FLOATS,
        ));
    }
    layers.push((
        "pad_zero".into(),
        Layer::Pad(vec![3, 4], vec![(1, 2), (0, 3)], Scalar::I64(0)),
        &MOVED,
    ));
    layers.push((
        "pad_value_odd".into(),
        Layer::Pad(vec![2, 3, 5], vec![(0, 1), (3, 0), (1, 1)], Scalar::I64(1)),
        &MOVED,
    ));
    layers.push((
        "mirror_pad_reflect".into(),
        Layer::MirrorPad(vec![4, 5], vec![(2, 1), (3, 1)], MirrorMode::Reflect),
        &MOVED,
    ));
    layers.push((
        "mirror_pad_symmetric".into(),
        Layer::MirrorPad(vec![3, 4], vec![(3, 0), (1, 4)], MirrorMode::Symmetric),
        &MOVED,
    ));
    layers.push((
        "concat_axis1".into(),
        Layer::Concat(vec![vec![2, 3], vec![2, 1], vec![2, 4]], 1),
        &MOVED,
    ));
    layers.push((
        "concat_axis0".into(),
        Layer::Concat(vec![vec![1, 3], vec![2, 3]], 0),
        &MOVED,
    ));
    layers.push((
        "concat_last_3d".into(),
        Layer::Concat(vec![vec![2, 3, 1], vec![2, 3, 2], vec![2, 3, 0]], -1),
        &MOVED,
    ));
    layers.push(("stack_axis1".into(), Layer::Stack(3, vec![2, 3], 1), &MOVED));
    layers.push((
        "strided_slice_steps".into(),
        Layer::StridedSlice(
            vec![5, 6, 7],
            StridedSliceSpec {
                begin: vec![1, -1, 0],
                end: vec![4, 0, 7],
                strides: vec![2, -2, 3],
                ..Default::default()
            },
        ),
        &MOVED,
    ));
    layers.push((
        "strided_slice_masks".into(),
        Layer::StridedSlice(
            vec![3, 4, 5],
            StridedSliceSpec {
                begin: vec![0, 0, 2, 1],
                end: vec![0, 0, 0, 9],
                strides: vec![1, 1, 1, -1],
                begin_mask: 0b0001,
                end_mask: 0b1001,
                ellipsis_mask: 0b0010,
                new_axis_mask: 0b0100,
                ..Default::default()
            },
        ),
        &MOVED,
    ));
    layers.push((
        "strided_slice_shrink".into(),
        Layer::StridedSlice(
            vec![4, 5],
            StridedSliceSpec {
                begin: vec![-1, 1],
                end: vec![0, 5],
                strides: vec![1, 2],
                shrink_axis_mask: 0b01,
                ..Default::default()
            },
        ),
        &MOVED,
    ));
    layers.push(("tile".into(), Layer::Tile(vec![2, 3], vec![2, 3]), &MOVED));
    let gather =
        |params: &[usize], dims: &[usize], indices: &[i32], axis, batch_dims| Layer::Gather {
            params: params.to_vec(),
            dims: dims.to_vec(),
            indices: indices.to_vec(),
            axis,
            batch_dims,
        };
    layers.push((
        "gather_rows".into(),
        gather(&[5, 3], &[4], &[4, 0, 4, 2], 0, 0),
        &MOVED,
    ));
    layers.push((
        "gather_middle_2d_indices".into(),
        gather(&[2, 4, 3], &[2, 2], &[3, 1, 0, 3], 1, 0),
        &MOVED,
    ));
    layers.push((
        "gather_batched_last".into(),
        gather(&[2, 3, 4], &[2, 3], &[3, 0, 1, 2, 2, 0], -1, 1),
        &MOVED,
    ));
    layers.push((
        "one_hot_last".into(),
        Layer::OneHot(vec![0, 3, -1, 5, 2], 4, -1),
        &MOVED,
    ));
    layers.push((
        "one_hot_first".into(),
        Layer::OneHot(vec![1, 0, 2], 3, 0),
        &MOVED,
    ));
    layers.push((
        "split_sizes".into(),
        Layer::Split(vec![6, 4], vec![2, -1, 1], 0),
        &MOVED,
    ));
    let mut cases = Vec::new();
    for (name, layer, dtypes) in layers {
        for &dtype in dtypes {
            for variant in [Variant::Contiguous, Variant::Transposed, Variant::Offset] {
                cases.push(LayerCase {
                    name: format!("{name} {dtype} {variant}"),
                    dtype,
                    variant,
                    layer: layer.clone(),
                });
            }
        }
    }
    cases
}

/// Run one layer case on `device`.
pub fn run_layer(device: &Arc<dyn Device>, case: &LayerCase) -> Outcome {
    match catch_unwind(AssertUnwindSafe(|| execute(device, case))) {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(Error::Unsupported { .. })) => Outcome::Unsupported,
        Ok(Err(e)) => crate::fail(&format!("returned an error: {e}")),
        Err(_) => crate::fail("panicked"),
    }
}

/// The inputs of a case: drawn values, and the device tensor (the first in the case's
/// layout, the others contiguous).
struct Inputs<'a> {
    device: &'a Arc<dyn Device>,
    case: &'a LayerCase,
    count: usize,
}

impl Inputs<'_> {
    fn next(&mut self, dims: &[usize], domain: Domain) -> Result<(Values, Tensor)> {
        let n: usize = dims.iter().product();
        let mut rng = Rng::for_case(&format!("{}#{}", self.case.name, self.count));
        let values = Values {
            dims: dims.to_vec(),
            values: data::values(self.case.dtype, n, domain, &mut rng),
        };
        let variant = if self.count == 0 {
            self.case.variant
        } else {
            Variant::Contiguous
        };
        self.count += 1;
        let tensor = build(self.device, self.case.dtype, &values, variant)?;
        Ok((values, tensor))
    }
}

/// `x` at `index` of its row-major dims.
fn at(x: &Values, index: &[usize]) -> Scalar {
    x.values[index
        .iter()
        .zip(&x.dims)
        .fold(0, |flat, (&i, &d)| flat * d + i)]
}

/// An expected value met exactly (no magnitude to be relative to).
pub(crate) fn exact(value: Scalar) -> Expected {
    Expected {
        value,
        scale: 0.0,
        terms: 1,
    }
}

fn execute(device: &Arc<dyn Device>, case: &LayerCase) -> Result<Outcome> {
    let mut inputs = Inputs {
        device,
        case,
        count: 0,
    };
    let dtype = case.dtype;
    let (got, want, tolerance): (Tensor, Vec<Expected>, Tolerance) = match &case.layer {
        Layer::Conv {
            image,
            filter,
            options,
            depthwise,
            fused,
        } => {
            let (x, tx) = inputs.next(image, Domain::Finite)?;
            let (f, tf) = inputs.next(filter, Domain::Finite)?;
            let out_channels = if *depthwise {
                filter[2] * filter[3]
            } else {
                filter[3]
            };
            let epilogue = if *fused {
                let (scale, ts) = inputs.next(&[out_channels], Domain::Finite)?;
                let (shift, tt) = inputs.next(&[out_channels], Domain::Finite)?;
                Some(((scale, shift), (ts, tt)))
            } else {
                None
            };
            let got = match &epilogue {
                Some((_, (ts, tt))) => {
                    let parts = ConvEpilogue {
                        scale: Some(ts.clone()),
                        shift: Some(tt.clone()),
                        activation: Some(UnaryOp::Relu6),
                    };
                    tx.conv2d_fused(&tf, options, *depthwise, &parts)?
                }
                None if *depthwise => tx.depthwise_conv2d(&tf, options)?,
                None => tx.conv2d(&tf, options)?,
            };
            let windows = spatial(
                options.format,
                image,
                [filter[0], filter[1]],
                options.strides,
                options.dilations,
            );
            let want = reference_conv(
                dtype,
                &x,
                &f,
                options.format,
                &windows,
                &options.padding,
                *depthwise,
                epilogue.as_ref().map(|((scale, shift), _)| (scale, shift)),
            )?;

            let tolerance = if *fused {
                Tolerance::Epilogue
            } else {
                Tolerance::Accumulated
            };
            (got, want, tolerance)
        }
        Layer::Pool {
            image,
            options,
            max,
        } => {
            let (x, tx) = inputs.next(image, Domain::Finite)?;
            let got = if *max {
                tx.max_pool2d(options)?
            } else {
                tx.avg_pool2d(options)?
            };
            let windows = spatial(
                options.format,
                image,
                options.window,
                options.strides,
                [1, 1],
            );
            let want = reference_pool(dtype, &x, options.format, &windows, &options.padding, *max)?;
            let tolerance = if *max {
                Tolerance::Exact
            } else {
                Tolerance::Accumulated
            };
            (got, want, tolerance)
        }
        Layer::BiasAdd(dims, format) => {
            let axis = format.channel_axis(dims.len());
            let (x, tx) = inputs.next(dims, Domain::Finite)?;
            let (b, tb) = inputs.next(&[dims[axis]], Domain::Finite)?;
            let want = crate::indices(&x.dims)
                .map(|i| {
                    let sum = at(&x, &i).to_f64() + b.values[i[axis]].to_f64();
                    exact(data::round_to(dtype, Scalar::F64(sum)))
                })
                .collect();
            (tx.bias_add(&tb, *format)?, want, Tolerance::Exact)
        }
        Layer::BatchNorm(dims, format) => {
            let axis = format.channel_axis(dims.len());
            let c = dims[axis];
            let (x, tx) = inputs.next(dims, Domain::Finite)?;
            // The parameters are float32, as TensorFlow's `U`.
            let param = |seed: u64, lo: f64, hi: f64| -> Result<(Vec<f64>, Tensor)> {
                let mut rng = Rng::for_case(&format!("{}#param{seed}", case.name));
                let v: Vec<f64> = (0..c).map(|_| rng.uniform(lo, hi) as f32 as f64).collect();
                let values: Vec<f32> = v.iter().map(|&v| v as f32).collect();
                Ok((v, Tensor::from_slice(&values, [c], device)?))
            };
            let (scale, ts) = param(0, -2.0, 2.0)?;
            let (offset, to) = param(1, -1.0, 1.0)?;
            let (mean, tm) = param(2, -1.0, 1.0)?;
            let (var, tv) = param(3, 0.1, 3.0)?;
            let eps = 1e-3;
            let got = tx.batch_norm(&ts, &to, &tm, &tv, eps, *format)?;
            let want = crate::indices(&x.dims)
                .map(|i| {
                    let k = i[axis];
                    let factor = scale[k] / (var[k] + eps).sqrt();
                    let xv = at(&x, &i).to_f64();
                    let y = (xv - mean[k]) * factor + offset[k];
                    Expected {
                        value: data::round_to(dtype, Scalar::F64(y)),
                        scale: (xv * factor).abs() + (mean[k] * factor).abs() + offset[k].abs(),
                        terms: 1,
                    }
                })
                .collect();
            (got, want, Tolerance::Ulps(8.0))
        }
        Layer::Softmax(dims, log) => {
            let (x, tx) = inputs.next(dims, Domain::Finite)?;
            let got = if *log {
                tx.log_softmax()?
            } else {
                tx.softmax()?
            };
            let last = *dims.last().unwrap_or(&1);
            let mut want = Vec::new();
            for row in x.values.chunks(last.max(1)) {
                let row: Vec<f64> = row.iter().map(|v| v.to_f64()).collect();
                let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = row.iter().map(|v| (v - m).exp()).sum();
                for v in &row {
                    let (value, scale) = if *log {
                        (v - m - sum.ln(), (v - m).abs() + sum.ln().abs())
                    } else {
                        ((v - m).exp() / sum, ((v - m).exp() / sum).abs())
                    };
                    want.push(Expected {
                        value: data::round_to(dtype, Scalar::F64(value)),
                        scale,
                        terms: 1,
                    });
                }
            }
            (got, want, Tolerance::Ulps(8.0))
        }
        Layer::Pad(dims, paddings, value) => {
            let (x, tx) = inputs.next(dims, Domain::Finite)?;
            let got = tx.pad(paddings, *value)?;
            let out: Vec<usize> = dims
                .iter()
                .zip(paddings)
                .map(|(d, (a, b))| d + a + b)
                .collect();
            let fill = data::round_to(dtype, crate::reference::cast(*value, dtype).value);
            let want = crate::indices(&out)
                .map(|i| {
                    let source: Option<Vec<usize>> = i
                        .iter()
                        .zip(paddings)
                        .zip(dims)
                        .map(|((&i, &(a, _)), &d)| i.checked_sub(a).filter(|&j| j < d))
                        .collect();
                    exact(source.map_or(fill, |s| at(&x, &s)))
                })
                .collect();
            (got, want, Tolerance::Exact)
        }
        Layer::MirrorPad(dims, paddings, mode) => {
            let (x, tx) = inputs.next(dims, Domain::Finite)?;
            let got = tx.mirror_pad(paddings, *mode)?;
            let out: Vec<usize> = dims
                .iter()
                .zip(paddings)
                .map(|(d, (a, b))| d + a + b)
                .collect();
            let skip = i64::from(*mode == MirrorMode::Reflect);
            let want = crate::indices(&out)
                .map(|i| {
                    let source: Vec<usize> = i
                        .iter()
                        .zip(paddings)
                        .zip(dims)
                        .map(|((&i, &(a, _)), &d)| {
                            let (j, d) = (i as i64 - a as i64, d as i64);
                            (if j < 0 {
                                -j - 1 + skip
                            } else if j >= d {
                                2 * d - j - 1 - skip
                            } else {
                                j
                            }) as usize
                        })
                        .collect();
                    exact(at(&x, &source))
                })
                .collect();
            (got, want, Tolerance::Exact)
        }
        Layer::Concat(shapes, axis) => {
            let mut parts = Vec::new();
            for dims in shapes {
                parts.push(inputs.next(dims, Domain::Finite)?);
            }
            let refs: Vec<&Tensor> = parts.iter().map(|(_, t)| t).collect();
            let got = Tensor::concat(&refs, *axis)?;
            let a = axis.rem_euclid(shapes[0].len() as i64) as usize;
            let want = concat_reference(&parts.iter().map(|(v, _)| v).collect::<Vec<_>>(), a);
            (got, want, Tolerance::Exact)
        }
        Layer::Stack(n, dims, axis) => {
            let mut parts = Vec::new();
            for _ in 0..*n {
                parts.push(inputs.next(dims, Domain::Finite)?);
            }
            let refs: Vec<&Tensor> = parts.iter().map(|(_, t)| t).collect();
            let got = Tensor::stack(&refs, *axis)?;
            let a = *axis as usize;
            let mut out = dims.clone();
            out.insert(a, *n);
            let want = crate::indices(&out)
                .map(|i| {
                    let mut inner = i.clone();
                    let k = inner.remove(a);
                    exact(at(&parts[k].0, &inner))
                })
                .collect();
            (got, want, Tolerance::Exact)
        }
        Layer::StridedSlice(dims, spec) => {
            let (x, tx) = inputs.next(dims, Domain::Finite)?;
            let got = tx.strided_slice(spec)?;
            let plan = spec.resolve(dims)?;
            let out = plan.output_dims();
            let want = crate::indices(&out)
                .map(|i| {
                    let mut source: Vec<usize> = plan.dims.iter().map(|d| d.start).collect();
                    for (o, slot) in i.iter().zip(&plan.output) {
                        if let Some(d) = slot {
                            let dim = plan.dims[*d];
                            source[*d] = (dim.start as isize + *o as isize * dim.step) as usize;
                        }
                    }
                    exact(at(&x, &source))
                })
                .collect();
            (got, want, Tolerance::Exact)
        }
        Layer::Tile(dims, multiples) => {
            let (x, tx) = inputs.next(dims, Domain::Finite)?;
            let got = tx.tile(multiples)?;
            let out: Vec<usize> = dims.iter().zip(multiples).map(|(d, m)| d * m).collect();
            let want = crate::indices(&out)
                .map(|i| {
                    let source: Vec<usize> = i.iter().zip(dims).map(|(i, d)| i % d).collect();
                    exact(at(&x, &source))
                })
                .collect();
            (got, want, Tolerance::Exact)
        }
        Layer::Gather {
            params,
            dims,
            indices,
            axis,
            batch_dims,
        } => {
            let (x, tx) = inputs.next(params, Domain::Finite)?;
            let ti = Tensor::from_slice(indices, dims.as_slice(), device)?;
            let got = tx.gather(&ti, *axis, *batch_dims)?;
            let a = axis.rem_euclid(params.len() as i64) as usize;
            let b = *batch_dims as usize;
            let mut out = params[..a].to_vec();
            out.extend_from_slice(&dims[b..]);
            out.extend_from_slice(&params[a + 1..]);
            let index_rank = dims.len() - b;
            let want = crate::indices(&out)
                .map(|o| {
                    // [batch.., middle.., picked.., inner..]
                    let mut at_index: Vec<usize> = o[..b].to_vec();
                    at_index.extend_from_slice(&o[a..a + index_rank]);
                    let picked = indices[at_index
                        .iter()
                        .zip(dims.iter())
                        .fold(0, |flat, (&i, &d)| flat * d + i)];
                    let mut source = o[..a].to_vec();
                    source.push(picked as usize);
                    source.extend_from_slice(&o[a + index_rank..]);
                    exact(at(&x, &source))
                })
                .collect();
            (got, want, Tolerance::Exact)
        }
        Layer::OneHot(indices, depth, axis) => {
            let ti = Tensor::from_slice(indices, [indices.len()], device)?;
            let (on, off) = (Scalar::I64(1), Scalar::I64(0));
            let got = ti.one_hot(*depth, on, off, *axis, dtype)?;
            let first = *axis == 0;
            let out = if first {
                vec![*depth, indices.len()]
            } else {
                vec![indices.len(), *depth]
            };
            let want = crate::indices(&out)
                .map(|o| {
                    let (i, d) = if first { (o[1], o[0]) } else { (o[0], o[1]) };
                    let value = if indices[i] == d as i64 { on } else { off };
                    exact(crate::reference::cast(value, dtype).value)
                })
                .collect();
            (got, want, Tolerance::Exact)
        }
        Layer::Split(dims, sizes, axis) => {
            let (x, tx) = inputs.next(dims, Domain::Finite)?;
            let pieces = tx.split_sizes(sizes, *axis)?;
            // Joined back in reverse: every piece must hold its own run.
            let reversed: Vec<&Tensor> = pieces.iter().rev().collect();
            let got = Tensor::concat(&reversed, *axis)?;
            let a = axis.rem_euclid(dims.len() as i64) as usize;
            let mut bounds = vec![0usize];
            for p in &pieces {
                bounds.push(bounds.last().unwrap_or(&0) + p.dims()[a]);
            }
            let mut runs: Vec<Values> = Vec::new();
            for k in 0..pieces.len() {
                let mut run_dims = dims.clone();
                run_dims[a] = bounds[k + 1] - bounds[k];
                let values = crate::indices(&run_dims)
                    .map(|mut i| {
                        i[a] += bounds[k];
                        at(&x, &i)
                    })
                    .collect();
                runs.push(Values {
                    dims: run_dims,
                    values,
                });
            }
            let runs: Vec<&Values> = runs.iter().rev().collect();
            (got, concat_reference(&runs, a), Tolerance::Exact)
        }
    };
    let values = got.to_scalars()?;
    if values.len() != want.len() {
        return Ok(crate::fail(&format!(
            "{} elements (shape {}), expected {}",
            values.len(),
            got.shape(),
            want.len()
        )));
    }
    let mut max_error = 0.0f64;
    for (i, (g, w)) in values.iter().zip(&want).enumerate() {
        let (ok, error) = check(got.dtype(), tolerance, *g, w);
        max_error = max_error.max(error);
        if !ok {
            return Ok(crate::fail(&format!(
                "element {i}: got {g:?}, expected {:?} (tolerance {tolerance:?})",
                w.value
            )));
        }
    }
    Ok(Outcome::Pass { max_error })
}

/// The windows of both spatial dims of an image of `dims` in `format`: `(input size,
/// window)`.
fn spatial(
    format: DataFormat,
    dims: &[usize],
    size: [usize; 2],
    strides: [usize; 2],
    dilations: [usize; 2],
) -> [(usize, Window); 2] {
    let (h, w) = match format {
        DataFormat::Nhwc => (1, 2),
        DataFormat::Nchw => (2, 3),
    };
    [(dims[h], 0), (dims[w], 1)].map(|(input, k)| {
        (
            input,
            Window {
                size: size[k],
                stride: strides[k],
                dilation: dilations[k],
            },
        )
    })
}

/// An image in NHWC order: index `[n, h, w, c]` of `x` stored in `format`.
fn pixel(x: &Values, format: DataFormat, [n, h, w, c]: [usize; 4]) -> Scalar {
    match format {
        DataFormat::Nhwc => at(x, &[n, h, w, c]),
        DataFormat::Nchw => at(x, &[n, c, h, w]),
    }
}

/// Output dims `[n, oh, ow, c]` in `format`, walked in that format's row-major order, each
/// index given back as NHWC.
fn output_walk(format: DataFormat, [n, oh, ow, c]: [usize; 4]) -> Vec<[usize; 4]> {
    match format {
        DataFormat::Nhwc => crate::indices(&[n, oh, ow, c])
            .map(|i| [i[0], i[1], i[2], i[3]])
            .collect(),
        DataFormat::Nchw => crate::indices(&[n, c, oh, ow])
            .map(|i| [i[0], i[2], i[3], i[1]])
            .collect(),
    }
}

/// The input position of tap `k` of output `o` along one dim, if inside the input.
fn tap(o: usize, k: usize, window: &Window, before: usize, input: usize) -> Option<usize> {
    (o * window.stride + k * window.dilation)
        .checked_sub(before)
        .filter(|&p| p < input)
}

/// The naive convolution: a dot product of the taps inside the image per output element;
/// with an `epilogue` of per-channel scales and shifts, `relu6(dot * scale + shift)`
/// computed exactly and rounded once.
#[allow(clippy::too_many_arguments)]
fn reference_conv(
    dtype: DataType,
    x: &Values,
    f: &Values,
    format: DataFormat,
    windows: &[(usize, Window); 2],
    padding: &Padding,
    depthwise: bool,
    epilogue: Option<(&Values, &Values)>,
) -> Result<Vec<Expected>> {
    let resolved = resolve_windows(
        &[windows[0].0, windows[1].0],
        &[windows[0].1, windows[1].1],
        padding,
    )?;
    let [kh, kw, cin, cout] = [f.dims[0], f.dims[1], f.dims[2], f.dims[3]];
    let n = x.dims[0];
    let out_c = if depthwise { cin * cout } else { cout };
    let dims = [n, resolved[0].output, resolved[1].output, out_c];
    Ok(output_walk(format, dims)
        .into_iter()
        .map(|[b, oh, ow, oc]| {
            let (mut xs, mut ws) = (Vec::new(), Vec::new());
            for i in 0..kh {
                for j in 0..kw {
                    let (Some(h), Some(w)) = (
                        tap(oh, i, &windows[0].1, resolved[0].before, windows[0].0),
                        tap(ow, j, &windows[1].1, resolved[1].before, windows[1].0),
                    ) else {
                        continue;
                    };
                    if depthwise {
                        let (c, m) = (oc / cout, oc % cout);
                        xs.push(pixel(x, format, [b, h, w, c]));
                        ws.push(at(f, &[i, j, c, m]));
                    } else {
                        for c in 0..cin {
                            xs.push(pixel(x, format, [b, h, w, c]));
                            ws.push(at(f, &[i, j, c, oc]));
                        }
                    }
                }
            }
            let Some((scale, shift)) = epilogue else {
                let mut expected = reference::dot(dtype, &xs, &ws);
                // A depthwise product is rounded before it is summed.
                expected.terms *= 2;
                return expected;
            };
            let exact = reference::dot(DataType::Double, &xs, &ws);
            let (a, b) = (scale.values[oc].to_f64(), shift.values[oc].to_f64());
            let y = exact.value.to_f64() * a + b;
            Expected {
                value: data::round_to(dtype, Scalar::F64(y.clamp(0.0, 6.0))),
                scale: exact.scale * a.abs() + b.abs(),
                // The products' and sums' roundings, then the scale's and the shift's.
                terms: exact.terms * 2 + 2,
            }
        })
        .collect())
}

/// The naive pooling: the largest element, or the mean of the elements inside the image.
fn reference_pool(
    dtype: DataType,
    x: &Values,
    format: DataFormat,
    windows: &[(usize, Window); 2],
    padding: &Padding,
    max: bool,
) -> Result<Vec<Expected>> {
    let resolved = resolve_windows(
        &[windows[0].0, windows[1].0],
        &[windows[0].1, windows[1].1],
        padding,
    )?;
    let c = match format {
        DataFormat::Nhwc => x.dims[3],
        DataFormat::Nchw => x.dims[1],
    };
    let dims = [x.dims[0], resolved[0].output, resolved[1].output, c];
    Ok(output_walk(format, dims)
        .into_iter()
        .map(|[b, oh, ow, ch]| {
            let mut taps = Vec::new();
            for i in 0..windows[0].1.size {
                for j in 0..windows[1].1.size {
                    if let (Some(h), Some(w)) = (
                        tap(oh, i, &windows[0].1, resolved[0].before, windows[0].0),
                        tap(ow, j, &windows[1].1, resolved[1].before, windows[1].0),
                    ) {
                        taps.push(pixel(x, format, [b, h, w, ch]));
                    }
                }
            }
            if max {
                let best = taps.iter().copied().reduce(|a, b| {
                    let (fa, fb) = (a.to_f64(), b.to_f64());
                    // -0 ranks below +0, as the shared semantics order them.
                    if fb > fa || (fb == fa && fa.is_sign_negative() && !fb.is_sign_negative()) {
                        b
                    } else {
                        a
                    }
                });
                exact(best.unwrap_or(Scalar::F64(f64::NEG_INFINITY)))
            } else {
                let sum: f64 = taps.iter().map(|v| v.to_f64()).sum();
                let scale: f64 = taps.iter().map(|v| v.to_f64().abs()).sum::<f64>();
                let count = taps.len().max(1) as f64;
                Expected {
                    value: data::round_to(dtype, Scalar::F64(sum / count)),
                    scale: scale / count,
                    terms: taps.len() + 2,
                }
            }
        })
        .collect())
}

/// `parts` joined along `axis`.
fn concat_reference(parts: &[&Values], axis: usize) -> Vec<Expected> {
    let mut out = parts[0].dims.clone();
    out[axis] = parts.iter().map(|p| p.dims[axis]).sum();
    crate::indices(&out)
        .map(|mut i| {
            let mut k = 0;
            while i[axis] >= parts[k].dims[axis] {
                i[axis] -= parts[k].dims[axis];
                k += 1;
            }
            exact(at(parts[k], &i))
        })
        .collect()
}
