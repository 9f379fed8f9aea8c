//! The gradients of the array ops, as TensorFlow's `array_grad.py` writes them: identities
//! and variable reads, reshapes, `Transpose`, `ConcatV2`, `Split`, `SplitV`, `Pad`, `Slice`,
//! `StridedSlice`, `Pack`, `Unpack`, `Tile`, `BroadcastTo`, `ReverseV2`; and the ops with
//! none (constants, placeholders, variables, `StopGradient`). Gathers are [`super::sparse`]'s.

use polytensor_core::{Error, Result};

use super::math::dy;
use super::{Forward, GradFn};
use crate::attr::AttrValue;
use crate::graph::{Graph, Output};

/// The gradient function of an array op type (`Some(None)`: it has none).
pub(super) fn registered(op_type: &str) -> Option<Option<GradFn>> {
    let function: GradFn = match op_type {
        "Identity" | "ReadVariableOp" | "Snapshot" | "PreventGradient" => identity,
        "Reshape" | "ExpandDims" | "Squeeze" => reshape,
        "Transpose" => transpose,
        "ConcatV2" => concat,
        "Pad" | "PadV2" => pad,
        "Slice" => slice,
        "Pack" => pack,
        "Tile" => tile,
        "Split" => split,
        "SplitV" => split,
        "Unpack" => unpack,
        "StridedSlice" => strided_slice,
        "BroadcastTo" => broadcast_to,
        "ReverseV2" => reverse,
        "StopGradient"
        | "Const"
        | "Placeholder"
        | "PlaceholderWithDefault"
        | "VarHandleOp"
        | "Fill"
        | "OneHot"
        | "RandomUniform"
        | "RandomStandardNormal"
        | "TruncatedNormal" => return Some(None),
        _ => return None,
    };
    Some(Some(function))
}

fn identity(_: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    Ok(vec![Some(dy(f, dys, 0)?.clone())])
}

/// `Reshape(dy, Shape(x))`; none to the shape or axis input.
fn reshape(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let shape = g.shape_of(&f.inputs[0])?;
    let back = g.apply("Reshape", &[dy(f, dys, 0)?, &shape], Vec::new())?;
    let mut grads = vec![Some(back)];
    grads.resize(f.inputs.len(), None);
    Ok(grads)
}

/// The forward's constant integer input `i`, or an error naming what needs it.
fn constant(g: &Graph, f: &Forward, i: usize, what: &str) -> Result<Vec<i64>> {
    g.const_ints(&f.inputs[i]).ok_or_else(|| {
        Error::invalid(format!(
            "the gradient of '{}' needs its {what} as a constant",
            f.op.name()
        ))
    })
}

/// The forward's input `i`'s rank, or an error.
fn rank(f: &Forward, i: usize) -> Result<usize> {
    f.inputs[i].shape().rank().ok_or_else(|| {
        Error::invalid(format!(
            "the gradient of '{}' needs the rank of {}",
            f.op.name(),
            f.inputs[i].name()
        ))
    })
}

/// `Transpose(dy, inverse(perm))`.
fn transpose(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let perm = constant(g, f, 1, "permutation")?;
    let mut inverse = vec![0i32; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        let slot = usize::try_from(p)
            .ok()
            .and_then(|p| inverse.get_mut(p))
            .ok_or_else(|| Error::invalid(format!("bad permutation {perm:?}")))?;
        *slot = i as i32;
    }
    let inverse = g.constant_values(&inverse, &[perm.len()])?;
    let back = g.apply("Transpose", &[dy(f, dys, 0)?, &inverse], Vec::new())?;
    Ok(vec![Some(back), None])
}

/// `SplitV(dy, sizes, axis)`, the sizes each value's extent along the axis.
fn concat(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let values = f.inputs.len() - 1;
    let axis = match constant(g, f, values, "axis")?[..] {
        [axis] => axis,
        _ => return Err(Error::invalid("ConcatV2's axis must be a scalar")),
    };
    // A negative axis counts from the end: only then is the rank needed.
    let axis = if axis < 0 {
        axis + rank(f, 0)? as i64
    } else {
        axis
    };
    let (begin, size) = (
        g.constant_values(&[axis as i32], &[1])?,
        g.constant_values(&[1i32], &[1])?,
    );
    let mut sizes = Vec::with_capacity(values);
    for value in &f.inputs[..values] {
        let shape = g.shape_of(value)?;
        sizes.push(g.apply("Slice", &[&shape, &begin, &size], Vec::new())?);
    }
    let zero = g.constant(0i32)?;
    let sizes = g
        .op("ConcatV2")
        .inputs(&sizes)
        .input(&zero)
        .build_output()?;
    let axis = g.constant(axis as i32)?;
    let split = g
        .op("SplitV")
        .input(dy(f, dys, 0)?)
        .input(&sizes)
        .input(&axis)
        .attr("num_split", values as i64)
        .build()?;
    let mut grads: Vec<Option<Output>> = (0..values)
        .map(|i| g.output(&split, i).map(Some))
        .collect::<Result<_>>()?;
    grads.push(None);
    Ok(grads)
}

/// `Slice(dy, paddings[:, 0], Shape(x))`.
fn pad(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let rank = rank(f, 0)?;
    let (origin, columns) = (
        g.constant_values(&[0i32, 0], &[2])?,
        g.constant_values(&[rank as i32, 1], &[2])?,
    );
    let before = g.apply("Slice", &[&f.inputs[1], &origin, &columns], Vec::new())?;
    let flat = g.constant_values(&[-1i32], &[1])?;
    let before = g.apply("Reshape", &[&before, &flat], Vec::new())?;
    let shape = g.shape_of(&f.inputs[0])?;
    let back = g.apply("Slice", &[dy(f, dys, 0)?, &before, &shape], Vec::new())?;
    let mut grads = vec![Some(back)];
    grads.resize(f.inputs.len(), None);
    Ok(grads)
}

/// `Pad(dy, [begin, Shape(x) - Shape(y) - begin])`.
fn slice(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let rank = rank(f, 0)?;
    let (x_shape, y_shape) = (g.shape_of(&f.inputs[0])?, g.shape_of(&f.outputs[0])?);
    let begin = &f.inputs[1];
    let rest = g.apply("Sub", &[&x_shape, &y_shape], Vec::new())?;
    let after = g.apply("Sub", &[&rest, begin], Vec::new())?;
    let column = g.constant_values(&[rank as i32, 1], &[2])?;
    let before = g.apply("Reshape", &[begin, &column], Vec::new())?;
    let after = g.apply("Reshape", &[&after, &column], Vec::new())?;
    let one = g.constant(1i32)?;
    let paddings = g
        .op("ConcatV2")
        .input(&before)
        .input(&after)
        .input(&one)
        .build_output()?;
    let back = g.apply("Pad", &[dy(f, dys, 0)?, &paddings], Vec::new())?;
    Ok(vec![Some(back), None, None])
}

/// `Unpack(dy)` along the forward's axis.
fn pack(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let axis = f
        .attrs
        .get("axis")
        .cloned()
        .unwrap_or(AttrValue::from(0i64));
    let unpacked = g
        .op("Unpack")
        .input(dy(f, dys, 0)?)
        .attr("num", f.inputs.len() as i64)
        .attr("axis", axis)
        .build()?;
    (0..f.inputs.len())
        .map(|i| g.output(&unpacked, i).map(Some))
        .collect()
}

/// `dy` reshaped to `[multiples[0], dims[0], multiples[1], dims[1], ...]` and summed over
/// the multiples' axes.
fn tile(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let rank = rank(f, 0)?;
    let shape = g.shape_of(&f.inputs[0])?;
    let multiples = g.apply(
        "Cast",
        &[&f.inputs[1]],
        vec![("DstT".into(), polytensor_core::DataType::Int32.into())],
    )?;
    let pairs = g
        .op("Pack")
        .input(&multiples)
        .input(&shape)
        .attr("axis", 1i64)
        .build_output()?;
    let flat = g.constant_values(&[-1i32], &[1])?;
    let split_shape = g.apply("Reshape", &[&pairs, &flat], Vec::new())?;
    let split = g.apply("Reshape", &[dy(f, dys, 0)?, &split_shape], Vec::new())?;
    let axes: Vec<i32> = (0..rank as i32).map(|d| 2 * d).collect();
    let axes = g.constant_values(&axes, &[rank])?;
    let summed = g.apply(
        "Sum",
        &[&split, &axes],
        vec![("keep_dims".into(), false.into())],
    )?;
    Ok(vec![Some(summed), None])
}

/// The gradients of a forward's outputs, zeros (`ZerosLike` of the output) where none came.
fn every_dy(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Output>> {
    f.outputs
        .iter()
        .zip(dys)
        .map(|(output, dy)| match dy {
            Some(dy) => Ok(dy.clone()),
            None => g.unary("ZerosLike", output),
        })
        .collect()
}

/// `ConcatV2` of the pieces' gradients along the split axis; none to the axis or sizes.
fn split(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let pieces = every_dy(g, f, dys)?;
    let (value, axis) = match f.op.op_type() {
        "Split" => (1, &f.inputs[0]),
        _ => (0, &f.inputs[2]),
    };
    let joined = g
        .op("ConcatV2")
        .inputs(&pieces)
        .input(axis)
        .build_output()?;
    let mut grads = vec![None; f.inputs.len()];
    grads[value] = Some(joined);
    Ok(grads)
}

/// `Pack` of the pieces' gradients along the forward's axis.
fn unpack(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let pieces = every_dy(g, f, dys)?;
    let mut builder = g.op("Pack").inputs(&pieces);
    if let Some(axis) = f.attrs.get("axis") {
        builder = builder.attr("axis", axis.clone());
    }
    Ok(vec![Some(builder.build_output()?)])
}

/// `StridedSliceGrad(Shape(x), begin, end, strides, dy)` with the forward's masks.
fn strided_slice(
    g: &mut Graph,
    f: &Forward,
    dys: &[Option<Output>],
) -> Result<Vec<Option<Output>>> {
    let shape = g.shape_of(&f.inputs[0])?;
    let index = f.inputs[1].dtype();
    let shape = g.apply("Cast", &[&shape], vec![("DstT".into(), index.into())])?;
    let masks = f.attrs_named(&[
        "begin_mask",
        "end_mask",
        "ellipsis_mask",
        "new_axis_mask",
        "shrink_axis_mask",
    ]);
    let inputs = [
        &shape,
        &f.inputs[1],
        &f.inputs[2],
        &f.inputs[3],
        dy(f, dys, 0)?,
    ];
    let back = g.apply("StridedSliceGrad", &inputs, masks)?;
    Ok(vec![Some(back), None, None, None])
}

/// `dy` summed over the axes `x` was broadcast along, reshaped to `x`.
fn broadcast_to(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let (sx, sy) = (g.shape_of(&f.inputs[0])?, g.shape_of(&f.outputs[0])?);
    let args = g
        .op("BroadcastGradientArgs")
        .input(&sx)
        .input(&sy)
        .build()?;
    let axes = g.output(&args, 0)?;
    let summed = g.apply(
        "Sum",
        &[dy(f, dys, 0)?, &axes],
        vec![("keep_dims".into(), false.into())],
    )?;
    let back = g.apply("Reshape", &[&summed, &sx], Vec::new())?;
    Ok(vec![Some(back), None])
}

/// `ReverseV2(dy, axis)`.
fn reverse(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let back = g.apply("ReverseV2", &[dy(f, dys, 0)?, &f.inputs[1]], Vec::new())?;
    Ok(vec![Some(back), None])
}
