//! The gradients of the neural-network ops and losses, as TensorFlow's `nn_grad.py` writes
//! them: activations (`ReluGrad`, `Relu6Grad`), `BiasAdd`, `Conv2D`
//! (`Conv2DBackpropInput`, `Conv2DBackpropFilter`), `DepthwiseConv2dNative` (its two
//! backprops), `FusedBatchNormV3` (`FusedBatchNormGradV3`), `MaxPool`, `AvgPool`, `Softmax`,
//! `LogSoftmax`, the softmax cross entropies and `L2Loss`.

use polytensor_core::{Error, Result};

use super::math::dy;
use super::{Forward, GradFn};
use crate::graph::{Graph, Output};

/// The gradient function of an nn op type.
pub(super) fn registered(op_type: &str) -> Option<Option<GradFn>> {
    let function: GradFn = match op_type {
        "Relu" => relu,
        "Relu6" => relu6,
        "BiasAdd" => bias_add,
        "Conv2D" => conv2d,
        "DepthwiseConv2dNative" => depthwise,
        "FusedBatchNormV3" => batch_norm,
        "MaxPool" => max_pool,
        "AvgPool" => avg_pool,
        "Softmax" => softmax,
        "LogSoftmax" => log_softmax,
        "SoftmaxCrossEntropyWithLogits" | "SparseSoftmaxCrossEntropyWithLogits" => cross_entropy,
        "L2Loss" => l2_loss,
        _ => return None,
    };
    Some(Some(function))
}

/// The attributes a window op's gradient ops take from it.
const WINDOW_ATTRS: &[&str] = &[
    "strides",
    "padding",
    "explicit_paddings",
    "dilations",
    "data_format",
    "use_cudnn_on_gpu",
    "ksize",
];

/// `ReluGrad(dy, y)`.
fn relu(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let grad = g.apply("ReluGrad", &[dy(f, dys, 0)?, &f.outputs[0]], Vec::new())?;
    Ok(vec![Some(grad)])
}

/// `Relu6Grad(dy, x)`.
fn relu6(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let grad = g.apply("Relu6Grad", &[dy(f, dys, 0)?, &f.inputs[0]], Vec::new())?;
    Ok(vec![Some(grad)])
}

/// The gradient to the value, `BiasAddGrad` to the bias.
fn bias_add(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = dy(f, dys, 0)?;
    let bias = g.apply("BiasAddGrad", &[dy], f.attrs_named(&["data_format"]))?;
    Ok(vec![Some(dy.clone()), Some(bias)])
}

/// `Conv2DBackpropInput` to the input, `Conv2DBackpropFilter` to the filter.
fn conv2d(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let (dy, x, filter) = (dy(f, dys, 0)?, &f.inputs[0], &f.inputs[1]);
    let attrs = f.attrs_named(&WINDOW_ATTRS[..6]);
    let (x_shape, filter_shape) = (g.shape_of(x)?, g.shape_of(filter)?);
    let dx = g.apply(
        "Conv2DBackpropInput",
        &[&x_shape, filter, dy],
        attrs.clone(),
    )?;
    let dfilter = g.apply("Conv2DBackpropFilter", &[x, &filter_shape, dy], attrs)?;
    Ok(vec![Some(dx), Some(dfilter)])
}

/// `DepthwiseConv2dNativeBackpropInput` to the input, `...Filter` to the filter.
fn depthwise(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let (dy, x, filter) = (dy(f, dys, 0)?, &f.inputs[0], &f.inputs[1]);
    let attrs = f.attrs_named(&[
        "strides",
        "padding",
        "explicit_paddings",
        "dilations",
        "data_format",
    ]);
    let (x_shape, filter_shape) = (g.shape_of(x)?, g.shape_of(filter)?);
    let dx = g.apply(
        "DepthwiseConv2dNativeBackpropInput",
        &[&x_shape, filter, dy],
        attrs.clone(),
    )?;
    let dfilter = g.apply(
        "DepthwiseConv2dNativeBackpropFilter",
        &[x, &filter_shape, dy],
        attrs,
    )?;
    Ok(vec![Some(dx), Some(dfilter)])
}

/// `FusedBatchNormGradV3` to the image, the scale and the offset: in training through the
/// batch's statistics (the op's reserve spaces), in inference with the population's (its
/// mean and variance inputs); none to those inputs.
fn batch_norm(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    if dys[1..].iter().any(Option::is_some) {
        return Err(Error::invalid(format!(
            "the gradient of '{}' through its batch statistics is not supported (only through \
             its output y)",
            f.op.name()
        )));
    }
    let training = f.flag("is_training")?;
    let (mean, variance) = if training {
        (&f.outputs[3], &f.outputs[4])
    } else {
        (&f.inputs[3], &f.inputs[4])
    };
    let inputs = [
        dy(f, dys, 0)?,
        &f.inputs[0],
        &f.inputs[1],
        mean,
        variance,
        &f.outputs[5],
    ];
    let mut builder = g
        .op("FusedBatchNormGradV3")
        .inputs(&inputs.map(Output::clone))
        .attr("is_training", training);
    for (name, value) in f.attrs_named(&["epsilon", "data_format"]) {
        builder = builder.attr(&name, value);
    }
    let grads = builder.build()?;
    let outputs = g.outputs(&grads)?;
    Ok(vec![
        Some(outputs[0].clone()),
        Some(outputs[1].clone()),
        Some(outputs[2].clone()),
        None,
        None,
    ])
}

/// `MaxPoolGrad(x, y, dy)`.
fn max_pool(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let attrs = f.attrs_named(WINDOW_ATTRS);
    let inputs = [&f.inputs[0], &f.outputs[0], dy(f, dys, 0)?];
    Ok(vec![Some(g.apply("MaxPoolGrad", &inputs, attrs)?)])
}

/// `AvgPoolGrad(Shape(x), dy)`.
fn avg_pool(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let attrs = f.attrs_named(&["strides", "padding", "data_format", "ksize"]);
    let shape = g.shape_of(&f.inputs[0])?;
    Ok(vec![Some(g.apply(
        "AvgPoolGrad",
        &[&shape, dy(f, dys, 0)?],
        attrs,
    )?)])
}

/// `Sum(t, -1, keep_dims)`.
fn sum_last(g: &mut Graph, t: &Output) -> Result<Output> {
    let last = g.constant_values(&[-1i32], &[1])?;
    g.apply("Sum", &[t, &last], vec![("keep_dims".into(), true.into())])
}

/// `(dy - Sum(dy * y, -1)) * y`.
fn softmax(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let (dy, y) = (dy(f, dys, 0)?, &f.outputs[0]);
    let weighted = g.apply("Mul", &[dy, y], Vec::new())?;
    let total = sum_last(g, &weighted)?;
    let centred = g.apply("Sub", &[dy, &total], Vec::new())?;
    Ok(vec![Some(g.apply("Mul", &[&centred, y], Vec::new())?)])
}

/// `dy - Sum(dy, -1) * Exp(y)`.
fn log_softmax(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let (dy, y) = (dy(f, dys, 0)?, &f.outputs[0]);
    let total = sum_last(g, dy)?;
    let probabilities = g.apply("Exp", &[y], Vec::new())?;
    let share = g.apply("Mul", &[&total, &probabilities], Vec::new())?;
    Ok(vec![Some(g.apply("Sub", &[dy, &share], Vec::new())?)])
}

/// The loss's gradient times the op's own `backprop` to the logits; to dense labels, times
/// `-LogSoftmax(logits)`; none to sparse labels. A gradient of `backprop` itself (a second
/// derivative) is refused.
fn cross_entropy(
    g: &mut Graph,
    f: &Forward,
    dys: &[Option<Output>],
) -> Result<Vec<Option<Output>>> {
    if dys.get(1).is_some_and(Option::is_some) {
        return Err(Error::invalid(format!(
            "the gradient of '{}' through its backprop output (a second derivative) is not \
             supported",
            f.op.name()
        )));
    }
    let dy = dy(f, dys, 0)?;
    let last = g.constant(-1i32)?;
    let column = g.apply("ExpandDims", &[dy, &last], Vec::new())?;
    let logits = g.apply("Mul", &[&column, &f.outputs[1]], Vec::new())?;
    if f.op.op_type() == "SparseSoftmaxCrossEntropyWithLogits" {
        return Ok(vec![Some(logits), None]);
    }
    let log_probabilities = g.apply("LogSoftmax", &[&f.inputs[0]], Vec::new())?;
    let negated = g.apply("Neg", &[&log_probabilities], Vec::new())?;
    let labels = g.apply("Mul", &[&column, &negated], Vec::new())?;
    Ok(vec![Some(logits), Some(labels)])
}

/// `x * dy`.
fn l2_loss(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    Ok(vec![Some(g.apply(
        "Mul",
        &[&f.inputs[0], dy(f, dys, 0)?],
        Vec::new(),
    )?)])
}
