//! The ops TensorFlow's gradients are made of (`tf.gradients` writes them; so does
//! [`crate::Graph::gradients`]) and the losses: the activations' gradients (`ReluGrad`,
//! `SigmoidGrad`, ...), `BiasAddGrad`, `Conv2DBackpropFilter`, the depthwise convolution's
//! two (`DepthwiseConv2dNativeBackpropInput`, `...Filter`), `FusedBatchNormGradV3`,
//! `MaxPoolGrad`, `AvgPoolGrad`, `BroadcastGradientArgs`, `ZerosLike`, `OnesLike`, `ShapeN`,
//! `StridedSliceGrad`, `UnsortedSegmentSum` (a gather's gradient densified), `Unique` (what
//! optimizers sum a sparse gradient's repeated rows by), `L2Loss` and the softmax cross
//! entropies. Kernels are the eager tensor API's, on every device.

use smallvec::smallvec;

use polytensor_core::ops::UnaryOp;
use polytensor_core::partial_shape::Dim;
use polytensor_core::plan::window::DataFormat;
use polytensor_core::{DataType, Error, PartialTensorShape, Result, Tensor};

use super::array::strided_spec;
use super::infer::known;
use super::kernels::{Outputs, RunCtx};
use super::nn::WindowAttrs;
use super::{InferCtx, Nn, Source, Value};
use crate::graph::Typed;

/// A gradient or loss op.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum GradOp {
    /// The gradient through an activation: `ReluGrad(gradients, features)`,
    /// `SigmoidGrad(y, dy)` and the like ([`Tensor::unary_grad`]).
    Unary(UnaryOp),
    BiasAddGrad,
    /// `Conv2DBackpropFilter(input, filter_sizes, out_backprop)` and (`depthwise`)
    /// `DepthwiseConv2dNativeBackpropFilter`.
    ConvFilter {
        depthwise: bool,
    },
    /// `DepthwiseConv2dNativeBackpropInput(input_sizes, filter, out_backprop)`.
    DepthwiseInput,
    /// `FusedBatchNormGradV3(y_backprop, x, scale, reserve_space_1, reserve_space_2,
    /// reserve_space_3)`.
    BatchNormGrad,
    /// `MaxPoolGrad(orig_input, orig_output, grad)`.
    MaxPoolGrad,
    /// `AvgPoolGrad(orig_input_shape, grad)`.
    AvgPoolGrad,
    /// `BroadcastGradientArgs(s0, s1)`: the axes each operand of a broadcasting op sums
    /// its gradient over.
    BroadcastArgs,
    /// `ZerosLike` (`ones` false) and `OnesLike`.
    Like {
        ones: bool,
    },
    /// `ShapeN`: the shape of each of its inputs.
    ShapeN,
    /// `StridedSliceGrad(shape, begin, end, strides, dy)`.
    StridedSliceGrad,
    /// `ConcatOffset(concat_dim, shapes...)`: where each of a concatenation's values starts
    /// in it (TensorFlow's `ConcatV2` gradient slices by these).
    ConcatOffset,
    /// `UnsortedSegmentSum(data, segment_ids, num_segments)`: a gather's gradient,
    /// densified.
    UnsortedSegmentSum,
    /// `Unique(x)`: `(y, idx)`, the distinct values of a vector in order of first
    /// appearance and where each element's is (what optimizers sum a sparse gradient's
    /// repeated rows by).
    Unique,
    L2Loss,
    /// `SoftmaxCrossEntropyWithLogits` and (`sparse`) `SparseSoftmaxCrossEntropyWithLogits`:
    /// `(loss, backprop)`.
    CrossEntropy {
        sparse: bool,
    },
}

/// Gradient and loss op types by TensorFlow's name.
pub(crate) const OPS: &[(&str, GradOp)] = &[
    ("ReluGrad", GradOp::Unary(UnaryOp::Relu)),
    ("Relu6Grad", GradOp::Unary(UnaryOp::Relu6)),
    ("SigmoidGrad", GradOp::Unary(UnaryOp::Sigmoid)),
    ("TanhGrad", GradOp::Unary(UnaryOp::Tanh)),
    ("SqrtGrad", GradOp::Unary(UnaryOp::Sqrt)),
    ("RsqrtGrad", GradOp::Unary(UnaryOp::Rsqrt)),
    ("ReciprocalGrad", GradOp::Unary(UnaryOp::Recip)),
    ("BiasAddGrad", GradOp::BiasAddGrad),
    (
        "Conv2DBackpropFilter",
        GradOp::ConvFilter { depthwise: false },
    ),
    (
        "DepthwiseConv2dNativeBackpropFilter",
        GradOp::ConvFilter { depthwise: true },
    ),
    ("DepthwiseConv2dNativeBackpropInput", GradOp::DepthwiseInput),
    ("FusedBatchNormGradV3", GradOp::BatchNormGrad),
    ("MaxPoolGrad", GradOp::MaxPoolGrad),
    ("AvgPoolGrad", GradOp::AvgPoolGrad),
    ("BroadcastGradientArgs", GradOp::BroadcastArgs),
    ("ZerosLike", GradOp::Like { ones: false }),
    ("OnesLike", GradOp::Like { ones: true }),
    ("ShapeN", GradOp::ShapeN),
    ("StridedSliceGrad", GradOp::StridedSliceGrad),
    ("ConcatOffset", GradOp::ConcatOffset),
    ("UnsortedSegmentSum", GradOp::UnsortedSegmentSum),
    ("Unique", GradOp::Unique),
    ("L2Loss", GradOp::L2Loss),
    (
        "SoftmaxCrossEntropyWithLogits",
        GradOp::CrossEntropy { sparse: false },
    ),
    (
        "SparseSoftmaxCrossEntropyWithLogits",
        GradOp::CrossEntropy { sparse: true },
    ),
];

impl GradOp {
    /// The type attributes tied to the inputs.
    pub(crate) fn typed(self) -> &'static [(&'static str, Source)] {
        use Source::{Count, Input};
        match self {
            GradOp::Unary(_) | GradOp::BroadcastArgs | GradOp::CrossEntropy { sparse: false } => {
                &[("T", Input(0)), ("T", Input(1))]
            }
            GradOp::CrossEntropy { sparse: true } => &[("T", Input(0)), ("Tlabels", Input(1))],
            GradOp::BiasAddGrad | GradOp::Like { .. } | GradOp::L2Loss | GradOp::Unique => {
                &[("T", Input(0))]
            }
            GradOp::ConvFilter { .. } => &[("T", Input(0)), ("T", Input(2))],
            GradOp::DepthwiseInput => &[("T", Input(1)), ("T", Input(2))],
            GradOp::BatchNormGrad => &[
                ("T", Input(0)),
                ("T", Input(1)),
                ("U", Input(2)),
                ("U", Input(3)),
                ("U", Input(4)),
                ("U", Input(5)),
            ],
            GradOp::MaxPoolGrad => &[("T", Input(0)), ("T", Input(1)), ("T", Input(2))],
            GradOp::AvgPoolGrad => &[("T", Input(1))],
            GradOp::ShapeN => &[("N", Count), ("T", Input(0))],
            GradOp::ConcatOffset => &[("shape_type", Input(1))],
            GradOp::StridedSliceGrad => &[("Index", Input(0)), ("T", Input(4))],
            GradOp::UnsortedSegmentSum => &[
                ("T", Input(0)),
                ("Tindices", Input(1)),
                ("Tnumsegments", Input(2)),
            ],
        }
    }
}

/// The static outputs of `op`.
pub(crate) fn infer(op: GradOp, cx: &InferCtx<'_>) -> Result<Vec<Typed>> {
    let input = |i: usize| -> Result<Typed> {
        cx.inputs
            .get(i)
            .cloned()
            .ok_or_else(|| cx.error(format!("input {i} is missing")))
    };
    let float = |dtype: DataType| -> Result<DataType> {
        if dtype.is_float() {
            Ok(dtype)
        } else {
            Err(cx.error(format!(
                "{} takes half, bfloat16, float and double, not {dtype}",
                cx.op_type
            )))
        }
    };
    match op {
        GradOp::Unary(_) => {
            cx.exactly(2)?;
            let ((a, sa), (b, sb)) = (input(0)?, input(1)?);
            if a != b {
                return Err(cx.type_mismatch(1, a));
            }
            let shape = sa
                .merge_with(&sb)
                .map_err(|_| cx.error("the gradient and the value must have one shape"))?;
            Ok(vec![(float(a)?, shape)])
        }
        GradOp::BiasAddGrad => {
            cx.exactly(1)?;
            let (dtype, shape) = input(0)?;
            let format = DataFormat::from_name(&cx.attrs().string_or("data_format", "NHWC")?)?;
            let channels = match (shape.dims(), format) {
                (Some(dims), _) if dims.len() < 2 => {
                    return Err(cx.error(format!("Input tensor must be at least 2D: {shape}")))
                }
                (Some(dims), DataFormat::Nhwc) => dims[dims.len() - 1],
                (Some(dims), DataFormat::Nchw) => dims[1],
                (None, _) => None,
            };
            Ok(vec![(dtype, known([channels])?)])
        }
        GradOp::ConvFilter { depthwise } => {
            cx.exactly(3)?;
            WindowAttrs::read(&cx.attrs(), conv_kind(depthwise))?;
            let dtype = float(input(0)?.0)?;
            if input(2)?.0 != dtype {
                return Err(cx.type_mismatch(2, dtype));
            }
            cx.with_rank(1, 1)?;
            Ok(vec![(dtype, cx.shape_value(1)?)])
        }
        GradOp::DepthwiseInput => {
            cx.exactly(3)?;
            WindowAttrs::read(&cx.attrs(), Nn::Depthwise)?;
            let dtype = float(input(1)?.0)?;
            if input(2)?.0 != dtype {
                return Err(cx.type_mismatch(2, dtype));
            }
            cx.with_rank(0, 1)?;
            Ok(vec![(dtype, cx.shape_value(0)?)])
        }
        GradOp::BatchNormGrad => {
            cx.exactly(6)?;
            let ((dtype, dy), (x_dtype, x)) = (input(0)?, input(1)?);
            if x_dtype != dtype {
                return Err(cx.type_mismatch(1, dtype));
            }
            let shape = dy
                .merge_with(&x)
                .map_err(|_| cx.error("x and y_backprop must have same shape"))?;
            let u = float(input(2)?.0)?;
            let channels = known([None])?;
            Ok(vec![
                (float(dtype)?, shape),
                (u, channels.clone()),
                (u, channels),
                (u, known([Some(0)])?),
                (u, known([Some(0)])?),
            ])
        }
        GradOp::MaxPoolGrad => {
            cx.exactly(3)?;
            WindowAttrs::read(&cx.attrs(), Nn::MaxPool)?;
            let (dtype, shape) = input(0)?;
            Ok(vec![(dtype, shape)])
        }
        GradOp::AvgPoolGrad => {
            cx.exactly(2)?;
            WindowAttrs::read(&cx.attrs(), Nn::AvgPool)?;
            cx.with_rank(0, 1)?;
            Ok(vec![(float(input(1)?.0)?, cx.shape_value(0)?)])
        }
        GradOp::BroadcastArgs => {
            cx.exactly(2)?;
            let dtype = input(0)?.0;
            if !matches!(dtype, DataType::Int32 | DataType::Int64) {
                return Err(cx.error(format!("the shapes must be int32 or int64, not {dtype}")));
            }
            let vector = known([None])?;
            Ok(vec![(dtype, vector.clone()), (dtype, vector)])
        }
        GradOp::Like { .. } => {
            cx.exactly(1)?;
            Ok(vec![input(0)?])
        }
        GradOp::ShapeN => {
            let out = cx.attrs().dtype_or("out_type", DataType::Int32)?;
            cx.inputs
                .iter()
                .map(|(_, shape)| Ok((out, known([shape.rank()])?)))
                .collect()
        }
        GradOp::ConcatOffset => {
            let shapes = cx.inputs.len().saturating_sub(1);
            if shapes < 2 {
                return Err(cx.error("ConcatOffset takes the axis and at least 2 shapes"));
            }
            cx.with_rank(0, 0)?;
            Ok(cx.inputs[1..].to_vec())
        }
        GradOp::StridedSliceGrad => {
            cx.exactly(5)?;
            cx.with_rank(0, 1)?;
            Ok(vec![(input(4)?.0, cx.shape_value(0)?)])
        }
        GradOp::UnsortedSegmentSum => {
            cx.exactly(3)?;
            let ((dtype, data), (_, ids)) = (input(0)?, input(1)?);
            let segments = cx
                .const_ints(2)
                .and_then(|n| usize::try_from(*n.first()?).ok());
            let shape = match (data.dims(), ids.rank()) {
                (Some(dims), Some(rank)) if rank <= dims.len() => {
                    let mut out = vec![segments];
                    out.extend_from_slice(&dims[rank..]);
                    PartialTensorShape::new(&out)?
                }
                _ => PartialTensorShape::unknown_rank(),
            };
            Ok(vec![(dtype, shape)])
        }
        GradOp::Unique => {
            cx.exactly(1)?;
            let (dtype, shape) = input(0)?;
            if let Some(rank) = shape.rank().filter(|&r| r != 1) {
                return Err(cx.error(format!("unique expects a 1D vector, got rank {rank}")));
            }
            let out = cx.attrs().dtype_or("out_idx", DataType::Int32)?;
            Ok(vec![(dtype, known([None])?), (out, shape)])
        }
        GradOp::L2Loss => {
            cx.exactly(1)?;
            Ok(vec![(float(input(0)?.0)?, PartialTensorShape::new(&[])?)])
        }
        GradOp::CrossEntropy { sparse } => {
            cx.exactly(2)?;
            let (dtype, features) = input(0)?;
            let dtype = float(dtype)?;
            let labels = input(1)?;
            if !sparse && labels.0 != dtype {
                return Err(cx.type_mismatch(1, dtype));
            }
            let dims: Vec<Dim> = match features.dims() {
                Some(&[batch, classes]) => vec![batch, classes],
                Some(_) if sparse => {
                    return Err(cx.error(format!("logits must be 2-D, but got shape {features}")))
                }
                _ => vec![None, None],
            };
            Ok(vec![
                (dtype, known([dims[0]])?),
                (dtype, PartialTensorShape::new(&dims)?),
            ])
        }
    }
}

/// Run `op`.
pub(crate) fn run(op: GradOp, cx: &RunCtx<'_, '_>) -> Result<Outputs> {
    let one = |t: Tensor| Ok(smallvec![Value::Tensor(t)]);
    match op {
        GradOp::Unary(unary) => {
            // `ReluGrad(gradients, features)`; the others take `(y, dy)`.
            let (value, dy) = match unary {
                UnaryOp::Relu | UnaryOp::Relu6 => (cx.tensor(1)?, cx.tensor(0)?),
                _ => (cx.tensor(0)?, cx.tensor(1)?),
            };
            one(Tensor::unary_grad(unary, &value, &dy)?)
        }
        GradOp::BiasAddGrad => {
            let format = DataFormat::from_name(&cx.attrs().string_or("data_format", "NHWC")?)?;
            one(cx.tensor(0)?.bias_add_grad(format)?)
        }
        GradOp::ConvFilter { depthwise } => {
            let sizes = four_dims(cx, 1, "filter_sizes")?;
            let options = WindowAttrs::read(&cx.attrs(), conv_kind(depthwise))?.conv();
            let (x, dy) = (cx.tensor(0)?, cx.tensor(2)?);
            one(if depthwise {
                x.depthwise_conv2d_backprop_filter(sizes, &dy, &options)?
            } else {
                x.conv2d_backprop_filter(sizes, &dy, &options)?
            })
        }
        GradOp::DepthwiseInput => {
            let sizes = four_dims(cx, 0, "input_sizes")?;
            let options = WindowAttrs::read(&cx.attrs(), Nn::Depthwise)?.conv();
            one(cx
                .tensor(2)?
                .depthwise_conv2d_backprop_input(&*cx.tensor(1)?, &sizes, &options)?)
        }
        GradOp::BatchNormGrad => {
            let attrs = cx.attrs();
            let format = DataFormat::from_name(&attrs.string_or("data_format", "NHWC")?)?;
            let epsilon = attrs.float_or("epsilon", 1e-4)?;
            let training = attrs.bool_or("is_training", true)?;
            let [dy, x, scale, mean, variance] =
                [0, 1, 2, 3, 4].map(|i| cx.tensor(i).map(|t| t.into_owned()));
            let grads =
                dy?.batch_norm_grad(&x?, &scale?, &mean?, &variance?, epsilon, format, training)?;
            let u = grads.scale.dtype();
            let empty = || Tensor::zeros([0usize], u, cx.device);
            Ok(smallvec![
                Value::Tensor(grads.x),
                Value::Tensor(grads.scale),
                Value::Tensor(grads.offset),
                Value::Tensor(empty()?),
                Value::Tensor(empty()?),
            ])
        }
        GradOp::MaxPoolGrad => {
            let options = WindowAttrs::read(&cx.attrs(), Nn::MaxPool)?.pool();
            one(cx
                .tensor(0)?
                .max_pool2d_grad(&*cx.tensor(1)?, &*cx.tensor(2)?, &options)?)
        }
        GradOp::AvgPoolGrad => {
            let dims = four_dims(cx, 0, "orig_input_shape")?;
            let options = WindowAttrs::read(&cx.attrs(), Nn::AvgPool)?.pool();
            one(cx.tensor(1)?.avg_pool2d_grad(dims, &options)?)
        }
        GradOp::BroadcastArgs => {
            let (s0, s1) = (cx.ints(0)?, cx.ints(1)?);
            let [r0, r1] = broadcast_gradient_args(&s0, &s1)?;
            let dtype = cx.tensor(0)?.dtype();
            let vector = |axes: Vec<i64>| Tensor::from_vec(axes, cx.device)?.cast(dtype);
            Ok(smallvec![
                Value::Tensor(vector(r0)?),
                Value::Tensor(vector(r1)?)
            ])
        }
        GradOp::Like { ones } => {
            let x = cx.tensor(0)?;
            let value = polytensor_core::Scalar::I64(i64::from(ones));
            one(Tensor::full(x.dims(), value, x.dtype(), cx.device)?)
        }
        GradOp::ShapeN => {
            let out = cx.attrs().dtype_or("out_type", DataType::Int32)?;
            (0..cx.inputs.len())
                .map(|i| {
                    let dims: Vec<i64> = cx.tensor(i)?.dims().iter().map(|&d| d as i64).collect();
                    Ok(Value::Tensor(Tensor::from_vec(dims, cx.device)?.cast(out)?))
                })
                .collect()
        }
        GradOp::ConcatOffset => {
            let axis = match cx.ints(0)?[..] {
                [axis] => axis,
                _ => return Err(Error::invalid("Concat dim tensor should be a scalar")),
            };
            let first = cx.ints(1)?;
            let rank = first.len() as i64;
            let at = if axis < 0 { axis + rank } else { axis };
            if at < 0 || at >= rank {
                return Err(Error::invalid(format!(
                    "Concat dim is out of range: {axis} vs. {rank}"
                )));
            }
            let mut start = 0;
            (1..cx.inputs.len())
                .map(|i| {
                    let shape = cx.ints(i)?;
                    if shape.len() != first.len() {
                        return Err(Error::invalid(format!(
                            "input {} should contain {rank} elements, but got {}",
                            i - 1,
                            shape.len()
                        )));
                    }
                    if let Some(d) =
                        (0..shape.len()).find(|&d| d != at as usize && shape[d] != first[d])
                    {
                        return Err(Error::invalid(format!(
                            "All dimensions except {at} must match. Input {} has shape {shape:?} \
                             and doesn't match input 0 with shape {first:?} in dim {d}.",
                            i - 1
                        )));
                    }
                    let mut offset = vec![0i64; shape.len()];
                    offset[at as usize] = start;
                    start += shape[at as usize];
                    let dtype = cx.tensor(i)?.dtype();
                    Ok(Value::Tensor(
                        Tensor::from_vec(offset, cx.device)?.cast(dtype)?,
                    ))
                })
                .collect()
        }
        GradOp::StridedSliceGrad => {
            let shape: Vec<usize> = cx
                .ints(0)?
                .into_iter()
                .map(|d| {
                    usize::try_from(d)
                        .map_err(|_| Error::invalid(format!("Dimension {d} must be >= 0")))
                })
                .collect::<Result<_>>()?;
            let spec = strided_spec(&cx.attrs(), cx.ints(1)?, cx.ints(2)?, cx.ints(3)?)?;
            one(cx.tensor(4)?.strided_slice_grad(&shape, &spec)?)
        }
        GradOp::UnsortedSegmentSum => {
            let segments = match cx.ints(2)?[..] {
                [n] => usize::try_from(n).map_err(|_| {
                    Error::invalid(format!("num_segments must be non-negative, got {n}"))
                })?,
                _ => return Err(Error::invalid("num_segments should be a scalar")),
            };
            one(cx
                .tensor(0)?
                .unsorted_segment_sum(&*cx.tensor(1)?, segments)?)
        }
        GradOp::Unique => {
            let x = cx.tensor(0)?;
            if x.rank() != 1 {
                return Err(Error::invalid(format!(
                    "unique expects a 1D vector. {}",
                    x.shape()
                )));
            }
            let mut first: std::collections::HashMap<[u64; 2], i64> = Default::default();
            let (mut kept, mut idx) = (Vec::new(), Vec::new());
            for (i, value) in x.to_scalars()?.into_iter().enumerate() {
                let key = match value {
                    polytensor_core::Scalar::Bool(b) => [0, u64::from(b)],
                    polytensor_core::Scalar::I64(v) => [1, v as u64],
                    polytensor_core::Scalar::U64(v) => [2, v],
                    polytensor_core::Scalar::F64(v) => [3, v.to_bits()],
                    polytensor_core::Scalar::C64(_) => {
                        return Err(Error::invalid("Unique of complex values is not supported"))
                    }
                };
                let next = kept.len() as i64;
                let at = *first.entry(key).or_insert(next);
                if at == next {
                    kept.push(i as i32);
                }
                idx.push(at);
            }
            let out = cx.attrs().dtype_or("out_idx", DataType::Int32)?;
            let y = x.gather(&Tensor::from_vec(kept, cx.device)?, 0, 0)?;
            let idx = Tensor::from_vec(idx, cx.device)?.cast(out)?;
            Ok(smallvec![Value::Tensor(y), Value::Tensor(idx)])
        }
        GradOp::L2Loss => one(cx.tensor(0)?.l2_loss()?),
        GradOp::CrossEntropy { sparse } => {
            let (features, labels) = (cx.tensor(0)?, cx.tensor(1)?);
            let (loss, backprop) = if sparse {
                features.sparse_softmax_cross_entropy(&labels)?
            } else {
                features.softmax_cross_entropy(&labels)?
            };
            Ok(smallvec![Value::Tensor(loss), Value::Tensor(backprop)])
        }
    }
}

/// The forward convolution whose attributes a filter gradient reads.
fn conv_kind(depthwise: bool) -> Nn {
    if depthwise {
        Nn::Depthwise
    } else {
        Nn::Conv2D
    }
}

/// Input `i`, a vector of 4 dims (`filter_sizes`, `orig_input_shape`).
fn four_dims(cx: &RunCtx<'_, '_>, i: usize, name: &str) -> Result<[usize; 4]> {
    let dims = cx.ints(i)?;
    let dims: Vec<usize> = dims
        .iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| Error::invalid(format!("Dimension {d} must be >= 0")))
        })
        .collect::<Result<_>>()?;
    dims.try_into().map_err(|d: Vec<usize>| {
        Error::invalid(format!(
            "{} '{}': {name} must be a vector of 4 dims, got {d:?}",
            cx.node.op_type, cx.node.name
        ))
    })
}

/// TensorFlow's `BroadcastGradientArgs`: for shapes `s0` and `s1`, the axes of their
/// broadcast shape each one's gradient is summed over (a dim where it is 1, or that it
/// lacks, and the other is not; a dim where all are 1 is summed by both), ascending.
pub(crate) fn broadcast_gradient_args(s0: &[i64], s1: &[i64]) -> Result<[Vec<i64>; 2]> {
    let rank = s0.len().max(s1.len());
    let padded = |s: &[i64]| -> Vec<i64> {
        let mut dims = vec![1; rank - s.len()];
        dims.extend_from_slice(s);
        dims
    };
    let (a, b) = (padded(s0), padded(s1));
    let mut reduce = [Vec::new(), Vec::new()];
    for d in 0..rank {
        let (x, y) = (a[d], b[d]);
        if x != y && x != 1 && y != 1 {
            let show = |s: &[i64]| {
                let dims: Vec<String> = s.iter().map(i64::to_string).collect();
                format!("[{}]", dims.join(","))
            };
            return Err(Error::invalid(format!(
                "Incompatible shapes: {} vs. {}",
                show(s0),
                show(s1)
            )));
        }
        if x == 1 {
            reduce[0].push(d as i64);
        }
        if y == 1 {
            reduce[1].push(d as i64);
        }
        if x == 1 && y == 1 {
            continue;
        }
        // Only the operand that is 1 where the other is not sums over d.
        if x != 1 {
            reduce[0].retain(|&r| r != d as i64);
        }
        if y != 1 {
            reduce[1].retain(|&r| r != d as i64);
        }
    }
    Ok(reduce)
}

#[cfg(test)]
mod tests {
    use super::broadcast_gradient_args;

    /// Two shapes and the axes each one's gradient sums over.
    type Case = (
        &'static [i64],
        &'static [i64],
        &'static [i64],
        &'static [i64],
    );

    #[test]
    fn broadcast_gradient_args_are_tensorflows() {
        // (s0, s1, r0, r1), as TensorFlow 2.21's `broadcast_gradient_args` gives them.
        let cases: &[Case] = &[
            (&[2, 3], &[3], &[], &[0]),
            (&[2, 3], &[2, 3], &[], &[]),
            (&[1], &[2, 3], &[0, 1], &[]),
            (&[4, 1, 3], &[5, 1], &[1], &[0, 2]),
            (&[1, 1], &[1], &[0, 1], &[0, 1]),
            (&[], &[2], &[0], &[]),
        ];
        for &(s0, s1, r0, r1) in cases {
            let [got0, got1] = broadcast_gradient_args(s0, s1).unwrap();
            assert_eq!(
                (got0.as_slice(), got1.as_slice()),
                (r0, r1),
                "{s0:?} {s1:?}"
            );
        }
        let error = broadcast_gradient_args(&[2, 3], &[4])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("Incompatible shapes: [2,3] vs. [4]"),
            "{error}"
        );
    }
}
