//! The layer ops of inference graphs, checked on every device against naive references:
//! convolutions, pooling, bias, batch normalisation, softmax, and the shape ops that move
//! data (pad, mirror pad, concat, stack, strided slice, tile, split). These are `Tensor`
//! methods built from the kernel surface, so each case runs through the public API, with
//! odd sizes, padding edges, strides larger than the window, dilation, empty batches,
//! NCHW, and transposed and offset inputs.
//!
//! Tolerances: data movement and max pooling are exact; convolutions and average pooling
//! are accumulations ([`Tolerance::Accumulated`](crate::tolerance::Tolerance::Accumulated) over the taps); softmax, log-softmax and
//! batch normalisation are within 8 ulp of the magnitudes they are computed from.
//!
//! The catalogue is this module; [`run_layer`] (`run.rs`) runs a case through the public
//! `Tensor` API and `reference.rs` holds the naive references it compares with.

mod gradient;
mod keras;
mod reference;
mod run;

pub use gradient::Gradient;
pub(crate) use run::exact;
pub use run::run_layer;

use polytensor_core::plan::strided_slice::StridedSliceSpec;
use polytensor_core::plan::window::{DataFormat, Padding};
use polytensor_core::{
    Conv2dOptions, DataType, MirrorMode, Pool2dOptions, ResizeOptions, Scalar, UnaryOp,
};

use crate::Variant;

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
    /// `Conv2DBackpropInput`: an output gradient taken back through a filter to an image
    /// of `image`'s dims (the transposed convolution).
    ConvTranspose {
        /// The image dims (`input_sizes`), in `options.format`.
        image: Vec<usize>,
        /// `[k_h, k_w, in, out]`.
        filter: [usize; 4],
        /// The forward convolution's strides, dilations, padding and format.
        options: Conv2dOptions,
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
    /// Swish, `x * sigmoid(beta * x)`, in one pass (the session's fusion of Keras's three
    /// ops).
    Swish(Vec<usize>, f64),
    /// The exact GELU, `(0.5 * x) * erfc(-x * (1/√2))`, in one pass (the session's fusion of
    /// Keras 3's five ops).
    Gelu(Vec<usize>),
    /// The hard swish, `x * (relu6(x + 3) / 6)` (`* (1/6)` where not dividing), in one
    /// pass (the session's fusion of Keras's four ops).
    HardSwish(Vec<usize>, bool),
    /// A batch norm folded to `activation(x * scale + shift)` per channel of the last dim,
    /// in one pass (the session's fusion of a batch norm no convolution precedes).
    ChannelAffine(Vec<usize>, Option<UnaryOp>),
    /// `Softmax` (or `LogSoftmax` when `true`) over the last dim.
    Softmax(Vec<usize>, bool),
    /// Layer normalization over the last dim, with `gamma` and `beta` where `true` (the
    /// session's fusion of Keras 3's ten ops).
    LayerNorm(Vec<usize>, bool, bool),
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
    /// `ReverseV2` of a tensor of these dims along these axes.
    Reverse(Vec<usize>, Vec<i64>),
    /// `BroadcastTo` from these dims to those.
    BroadcastTo(Vec<usize>, Vec<usize>),
    /// `SpaceToBatchND` (`to_batch`) with a block shape and spatial paddings, or
    /// `BatchToSpaceND` with crops, of a tensor of these dims.
    SpaceBatch {
        /// The input's dims.
        dims: Vec<usize>,
        /// The block shape.
        block: Vec<usize>,
        /// Paddings (`SpaceToBatchND`) or crops (`BatchToSpaceND`) per spatial dim.
        edges: Vec<(usize, usize)>,
        /// `SpaceToBatchND` rather than `BatchToSpaceND`.
        to_batch: bool,
    },
    /// `ResizeBilinear` (`bilinear`) or `ResizeNearestNeighbor` of NHWC images to a size.
    Resize {
        /// The images' dims.
        image: Vec<usize>,
        /// The output's height and width.
        size: [usize; 2],
        /// `align_corners` and `half_pixel_centers`.
        options: ResizeOptions,
        /// Bilinear rather than nearest.
        bilinear: bool,
    },
    /// `Einsum` of operands of these dims (labels without `...`).
    Einsum(String, Vec<Vec<usize>>),
    /// A gradient op, against finite differences of its forward ([`Gradient`]).
    Gradient(Gradient),
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
            Layer::ConvTranspose { .. } => "conv2d_backprop_input",
            Layer::Pool { max: true, .. } => "max_pool2d",
            Layer::Pool { .. } => "avg_pool2d",
            Layer::BiasAdd(..) => "bias_add",
            Layer::BatchNorm(..) => "batch_norm",
            Layer::ChannelAffine(..) => "channel_affine",
            Layer::Swish(..) => "swish",
            Layer::Gelu(..) => "gelu",
            Layer::HardSwish(..) => "hard_swish",
            Layer::Softmax(_, true) => "log_softmax",
            Layer::Softmax(..) => "softmax",
            Layer::LayerNorm(..) => "layer_norm",
            Layer::Pad(..) => "pad",
            Layer::MirrorPad(..) => "mirror_pad",
            Layer::Concat(..) => "concat",
            Layer::Stack(..) => "stack",
            Layer::StridedSlice(..) => "strided_slice",
            Layer::Tile(..) => "tile",
            Layer::Split(..) => "split",
            Layer::Gather { .. } => "gather",
            Layer::OneHot(..) => "one_hot",
            Layer::Reverse(..) => "reverse",
            Layer::BroadcastTo(..) => "broadcast_to",
            Layer::SpaceBatch { to_batch: true, .. } => "space_to_batch_nd",
            Layer::SpaceBatch { .. } => "batch_to_space_nd",
            Layer::Resize { bilinear: true, .. } => "resize_bilinear",
            Layer::Resize { .. } => "resize_nearest",
            Layer::Einsum(..) => "einsum",
            Layer::Gradient(op) => op.name(),
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
        // Few output rows and much work (a late layer of a small image): the CPU's threads
        // share the GEMM's columns.
        (
            "few_rows_many_filters",
            [1, 4, 4, 128],
            [3, 3, 128, 96],
            conv_options([1, 1], [1, 1], Same, Nhwc),
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
        let transposed = Layer::ConvTranspose {
            image: image.to_vec(),
            filter: *filter,
            options: options.clone(),
        };
        layers.push((format!("conv2d_backprop_input_{name}"), transposed, &FLOATS));
    }
    // Keras's Conv2DTranspose: stride 2, SAME and VALID, a window that the strides overlap.
    for (name, padding) in [("keras_same", Same), ("keras_valid", Valid)] {
        let layer = Layer::ConvTranspose {
            image: vec![2, 8, 7, 5],
            filter: [3, 3, 5, 6],
            options: conv_options([2, 2], [1, 1], padding, Nhwc),
        };
        layers.push((format!("conv2d_backprop_input_{name}"), layer, &FLOATS));
    }
    // Fused epilogues, through the direct kernels' paths: few channels, the implicit GEMM,
    // a pointwise GEMM, depthwise, and odd SAME padding.
    for name in [
        "same",
        "wide_channels",
        "wide_pointwise",
        "nchw_same_stride_2",
        "few_rows_many_filters",
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
    // Channel counts on and off the vector width, with each activation a kernel takes and
    // one it leaves to the op after it.
    for (dims, activation, name) in [
        (vec![2, 4, 5, 16], Some(UnaryOp::Relu), "2x4x5x16_relu"),
        (vec![3, 3, 7], Some(UnaryOp::Relu6), "3x3x7_relu6"),
        (vec![2, 9, 9, 35], None, "2x9x9x35"),
        (vec![4, 3], Some(UnaryOp::Tanh), "4x3_tanh"),
    ] {
        layers.push((
            format!("channel_affine_{name}"),
            Layer::ChannelAffine(dims, activation),
            &FLOATS,
        ));
    }
    // SiLU and Keras's swish with a beta, past the kernels' piece size.
    for (dims, beta, name) in [
        (vec![2, 3, 5, 7], 1.0, "2x3x5x7_silu"),
        (vec![70_001], 1.5, "70001_beta_1.5"),
    ] {
        layers.push((format!("swish_{name}"), Layer::Swish(dims, beta), &FLOATS));
    }
    // Small and past the kernels' piece size.
    for dims in [vec![3, 5, 7], vec![70_001]] {
        let name = dims
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("x");
        layers.push((format!("gelu_{name}"), Layer::Gelu(dims), &FLOATS));
    }
    // Dividing by 6 and multiplying by 1/6, small and past the kernels' piece size.
    for (dims, divide, name) in [
        (vec![3, 5, 7], true, "3x5x7_divide"),
        (vec![70_001], false, "70001_by_a_sixth"),
    ] {
        layers.push((
            format!("hard_swish_{name}"),
            Layer::HardSwish(dims, divide),
            &FLOATS,
        ));
    }
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
    // Rows on and off the vector width, with and without its parameters, and past the
    // kernel's piece size.
    for (dims, gamma, beta, name) in [
        (vec![3, 5, 7], true, true, "3x5x7"),
        (vec![4, 16], true, false, "4x16_gamma"),
        (vec![2, 1, 9], false, true, "2x1x9_beta"),
        (vec![5, 3], false, false, "5x3_plain"),
        (vec![40, 1700], true, true, "40x1700"),
    ] {
        layers.push((
            format!("layer_norm_{name}"),
            Layer::LayerNorm(dims, gamma, beta),
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
    // Keras's nearest UpSampling2D tiles a rank-6 view.
    layers.push((
        "tile_rank_6".into(),
        Layer::Tile(vec![2, 1, 3, 1, 2, 1], vec![1, 2, 1, 3, 1, 2]),
        &MOVED,
    ));
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
    // Grouped convolutions: the filter's depth divides the image's (two and three groups).
    layers.push((
        "conv2d_grouped_2".into(),
        conv(
            &[2, 6, 5, 4],
            [3, 3, 2, 6],
            conv_options([1, 2], [1, 1], Same, Nhwc),
            false,
        ),
        &FLOATS,
    ));
    layers.push((
        "conv2d_grouped_3_nchw".into(),
        conv(
            &[1, 6, 4, 5],
            [2, 2, 2, 3],
            conv_options([1, 1], [1, 1], Valid, Nchw),
            false,
        ),
        &FLOATS,
    ));
    // Issue 48's ops: odd sizes, empty dims, every axis, and every resize option.
    for (name, dims, axes) in [
        ("reverse_2_of_3", vec![3, 4, 5], vec![0, -1]),
        ("reverse_all", vec![2, 5], vec![0, 1]),
        ("reverse_empty", vec![0, 3], vec![1]),
    ] {
        layers.push((name.into(), Layer::Reverse(dims, axes), &MOVED));
    }
    for (name, from, to) in [
        ("broadcast_to_rows", vec![1, 4], vec![3, 4]),
        ("broadcast_to_new_dims", vec![3, 1], vec![2, 3, 5]),
        ("broadcast_to_empty", vec![1, 3], vec![0, 3]),
    ] {
        layers.push((name.into(), Layer::BroadcastTo(from, to), &MOVED));
    }
    let space_batch =
        |dims: &[usize], block: &[usize], edges: &[(usize, usize)], to_batch| Layer::SpaceBatch {
            dims: dims.to_vec(),
            block: block.to_vec(),
            edges: edges.to_vec(),
            to_batch,
        };
    let space_batches = [
        ("dilated_1d", space_batch(&[2, 7, 3], &[2], &[(2, 1)], true)),
        (
            "2d_uneven",
            space_batch(&[1, 5, 4, 2], &[2, 3], &[(1, 0), (0, 2)], true),
        ),
        ("back_1d", space_batch(&[4, 5, 3], &[2], &[(1, 2)], false)),
        (
            "back_2d",
            space_batch(&[6, 2, 3, 2], &[3, 2], &[(0, 1), (1, 0)], false),
        ),
    ];
    for (name, layer) in space_batches {
        layers.push((format!("{}_{name}", layer.name()), layer, &MOVED));
    }
    let resize_options = [
        ("plain", ResizeOptions::default()),
        (
            "align_corners",
            ResizeOptions {
                align_corners: true,
                ..Default::default()
            },
        ),
        (
            "half_pixel",
            ResizeOptions {
                half_pixel_centers: true,
                ..Default::default()
            },
        ),
    ];
    for (option, options) in resize_options {
        for (sizes, image, size) in [
            ("up", vec![2, 3, 4, 3], [7, 8]),
            ("down", vec![1, 9, 7, 2], [4, 3]),
        ] {
            for bilinear in [false, true] {
                let layer = Layer::Resize {
                    image: image.clone(),
                    size,
                    options,
                    bilinear,
                };
                // Bilinear gives float32 whatever it reads, as TensorFlow's kernel.
                let dtypes: &[DataType] = if bilinear { &FLOATS[..1] } else { &MOVED };
                layers.push((format!("{}_{sizes}_{option}", layer.name()), layer, dtypes));
            }
        }
    }
    for (name, equation, dims) in [
        ("heads", "abc,cde->abde", vec![vec![2, 5, 6], vec![6, 3, 4]]),
        (
            "scores",
            "aecd,abcd->acbe",
            vec![vec![2, 5, 3, 4], vec![2, 4, 3, 4]],
        ),
        (
            "batched",
            "bij,bjk->bik",
            vec![vec![3, 2, 5], vec![3, 5, 4]],
        ),
        ("sum_transpose", "abc->cb", vec![vec![2, 3, 4]]),
        ("outer", "i,j->ij", vec![vec![5], vec![3]]),
        (
            "empty_contraction",
            "ij,jk->ik",
            vec![vec![3, 0], vec![0, 2]],
        ),
    ] {
        layers.push((
            format!("einsum_{name}"),
            Layer::Einsum(equation.into(), dims),
            &FLOATS,
        ));
    }
    for (name, op) in gradient::cases() {
        let label = format!("{}_{name}", op.name());
        layers.push((label, Layer::Gradient(op), &[DataType::Float]));
    }
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
