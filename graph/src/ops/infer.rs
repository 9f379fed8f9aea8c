//! Static dtype and shape inference, as TensorFlow's shape functions do it at graph-build
//! time: dims that depend on a value are known when that value is a `Const`.

use polytensor_core::ops::{BinaryOp, ReduceOp};
use polytensor_core::partial_shape::Dim;
use polytensor_core::proto::{DecodeOptions, TensorProto};
use polytensor_core::{DataType, PartialTensorShape, Result, Scalar};

use super::{InferCtx, Kind};
use crate::attr::proto_shape;
use crate::graph::Typed;

/// The outputs of a node of `kind`.
pub(crate) fn infer(kind: Kind, cx: &InferCtx<'_>) -> Result<Vec<Typed>> {
    let attrs = cx.attrs();
    let one = |dtype, shape| Ok(vec![(dtype, shape)]);
    match kind {
        Kind::Const => {
            let dtype = attrs.dtype("dtype")?;
            let value = attrs.tensor("value")?;
            if value.dtype != dtype.as_i32() {
                return Err(cx.error(format!(
                    "the value's dtype {} is not the attribute's {dtype}",
                    DataType::from_i32(value.dtype)?
                )));
            }
            one(dtype, proto_shape(value)?)
        }
        Kind::Placeholder => one(attrs.dtype("dtype")?, attrs.shape_or_unknown("shape")?),
        Kind::Identity => {
            let [(dtype, shape)] = cx.exactly(1)? else {
                unreachable!()
            };
            one(*dtype, shape.clone())
        }
        Kind::IdentityN => Ok(cx.inputs.to_vec()),
        Kind::NoOp => Ok(Vec::new()),
        Kind::Binary(op) => {
            let dtype = same_dtype(cx, 2)?;
            if matches!(op, BinaryOp::And | BinaryOp::Or) && dtype != DataType::Bool {
                return Err(cx.error("logical ops take bool"));
            }
            one(dtype, broadcast(cx, &[0, 1])?)
        }
        Kind::Division(_) => one(same_dtype(cx, 2)?, broadcast(cx, &[0, 1])?),
        Kind::Compare(_) => {
            same_dtype(cx, 2)?;
            one(DataType::Bool, broadcast(cx, &[0, 1])?)
        }
        Kind::Unary(op) => {
            let [(dtype, shape)] = cx.exactly(1)? else {
                unreachable!()
            };
            let dtype = match (op, dtype) {
                (polytensor_core::ops::UnaryOp::Abs, DataType::Complex64) => DataType::Float,
                (polytensor_core::ops::UnaryOp::Abs, DataType::Complex128) => DataType::Double,
                _ => *dtype,
            };
            one(dtype, shape.clone())
        }
        Kind::Cast => {
            let [(_, shape)] = cx.exactly(1)? else {
                unreachable!()
            };
            one(attrs.dtype("DstT")?, shape.clone())
        }
        Kind::Select { v1 } => {
            let inputs = cx.exactly(3)?;
            if inputs[0].0 != DataType::Bool {
                return Err(cx.error("the condition must be bool"));
            }
            if inputs[1].0 != inputs[2].0 {
                return Err(cx.error("both branches must have one dtype"));
            }
            if !v1 {
                return one(inputs[1].0, broadcast(cx, &[0, 1, 2])?);
            }
            let branches = inputs[1].1.merge_with(&inputs[2].1)?;
            let condition = &inputs[0].1;
            let fits = match (condition.rank(), branches.rank()) {
                (Some(0), _) | (None, _) | (_, None) => true,
                (Some(1), Some(r)) if r > 1 => {
                    let first = branches.dims().and_then(|d| d[0]);
                    condition
                        .merge_with(&PartialTensorShape::new(&[first])?)
                        .is_ok()
                }
                _ => condition.merge_with(&branches).is_ok(),
            };
            if !fits {
                return Err(cx.error(
                    "'condition' must be a scalar, a vector of the branches' first dimension, \
                     or of the branches' shape",
                ));
            }
            one(inputs[1].0, branches)
        }
        Kind::MatMul | Kind::BatchMatMul => matmul(cx, kind == Kind::BatchMatMul),
        Kind::Nn(op) => super::nn::infer(op, cx),
        Kind::FusedConv(_)
        | Kind::ChannelAffine { .. }
        | Kind::Swish
        | Kind::Gelu
        | Kind::HardSwish { .. }
        | Kind::LayerNorm { .. } => Err(cx.error("a fused step is made by a session, not a graph")),
        Kind::Array(op) => super::array::infer(op, cx),
        Kind::Sparse(op) => super::sparse::infer(op, cx),
        Kind::Collective(op) => super::collective::infer(op, cx),
        Kind::Debug(op) => super::debug::infer(op, cx),
        Kind::Strings(op) => super::strings::infer(op, cx),
        Kind::Saver(op) => super::saver::infer(op, cx),
        Kind::Table(op) => super::table::infer(op, cx),
        Kind::List(op) => super::list::infer(op, cx),
        Kind::Generate(op) => super::generate::infer(op, cx),
        Kind::Grad(op) => super::grad::infer(op, cx),
        Kind::Apply(rule) => super::optimizer::infer(rule, cx),
        Kind::Flow(op) => super::flow::infer(op, cx),
        Kind::Call(op) => super::flow::infer_call(op, cx),
        Kind::Reduce(_) | Kind::Arg(_) => reduction(cx, kind),
        Kind::Einsum => {
            let dtype = same_dtype(cx, cx.inputs.len())?;
            let equation = attrs.string_or("equation", "")?;
            // TensorFlow's op (unlike `tf.einsum` and `Tensor::einsum`) names its output.
            if equation.matches("->").count() != 1 {
                return Err(cx.error(format!(
                    "Expecting exactly one '->' in einsum equation: {equation}"
                )));
            }
            let dims: Vec<Option<Vec<Dim>>> = cx
                .inputs
                .iter()
                .map(|(_, shape)| shape.dims().map(<[Dim]>::to_vec))
                .collect();
            let shape = match polytensor_core::Tensor::einsum_shape(&equation, &dims)
                .map_err(|e| cx.error(e))?
            {
                Some(dims) => known(dims)?,
                None => PartialTensorShape::unknown_rank(),
            };
            one(dtype, shape)
        }
        Kind::Logical { .. } => {
            if cx.exactly(2)?[0].0 != DataType::Bool {
                return Err(cx.type_mismatch(0, DataType::Bool));
            }
            reduction(cx, kind)
        }
        Kind::Reshape => reshape(cx),
        Kind::Transpose => {
            let [(dtype, shape), _] = cx.exactly(2)? else {
                unreachable!()
            };
            let shape = match (shape.dims(), cx.const_ints(1)) {
                (Some(dims), Some(perm)) => {
                    let axes = axes(cx, &perm, dims.len())?;
                    if axes.len() != dims.len() {
                        return Err(cx.error("perm must name every dim once"));
                    }
                    known(axes.iter().map(|&a| dims[a]))?
                }
                (Some(dims), None) => known(dims.iter().map(|_| None))?,
                _ => PartialTensorShape::unknown_rank(),
            };
            one(*dtype, shape)
        }
        Kind::ExpandDims => {
            let [(dtype, shape), _] = cx.exactly(2)? else {
                unreachable!()
            };
            let shape = match (shape.dims(), cx.const_ints(1).as_deref()) {
                (Some(dims), Some(&[dim])) => {
                    let at = axes(cx, &[dim], dims.len() + 1)?[0];
                    let mut dims = dims.to_vec();
                    dims.insert(at, Some(1));
                    known(dims)?
                }
                _ => PartialTensorShape::unknown_rank(),
            };
            one(*dtype, shape)
        }
        Kind::Squeeze => {
            let [(dtype, shape)] = cx.exactly(1)? else {
                unreachable!()
            };
            let squeeze = attrs.ints("squeeze_dims")?;
            let Some(dims) = shape.dims() else {
                return one(*dtype, shape.clone());
            };
            let chosen = axes(cx, &squeeze, dims.len())?;
            let mut kept = Vec::new();
            for (i, &d) in dims.iter().enumerate() {
                let named = chosen.contains(&i);
                match d {
                    Some(1) if named || chosen.is_empty() => {}
                    None if chosen.is_empty() => {
                        return one(*dtype, PartialTensorShape::unknown_rank());
                    }
                    Some(d) if named => {
                        return Err(cx.error(format!(
                            "Can not squeeze dim[{i}], expected a dimension of 1, got {d}"
                        )))
                    }
                    _ if named => {}
                    d => kept.push(d),
                }
            }
            one(*dtype, known(kept)?)
        }
        Kind::Shape => {
            let [(_, shape)] = cx.exactly(1)? else {
                unreachable!()
            };
            one(
                attrs.dtype_or("out_type", DataType::Int32)?,
                known([shape.rank()])?,
            )
        }
        Kind::Fill => {
            let [_, (dtype, _)] = cx.exactly(2)? else {
                unreachable!()
            };
            cx.with_rank(0, 1)?;
            cx.with_rank(1, 0)?;
            one(*dtype, cx.shape_value(0)?)
        }
        Kind::Range => {
            let inputs = cx.exactly(3)?;
            for bound in 0..3 {
                cx.with_rank(bound, 0)?;
            }
            let dtype = attrs.dtype_or("Tidx", inputs[0].0)?;
            let count = if dtype.is_integer() {
                match (cx.const_ints(0), cx.const_ints(1), cx.const_ints(2)) {
                    (Some(s), Some(l), Some(d)) => match (&s[..], &l[..], &d[..]) {
                        ([s], [l], [d]) => {
                            range_direction([*s, *l, *d].map(Scalar::I64))
                                .map_err(|e| cx.error(e))?;
                            // ceil((limit - start) / delta), in i128 so that no i64 overflows.
                            let (span, d) = (i128::from(*l) - i128::from(*s), i128::from(*d));
                            usize::try_from((span + d - d.signum()) / d).ok()
                        }
                        _ => None,
                    },
                    _ => None,
                }
            } else {
                float_range_count(cx, dtype)?
            };
            one(dtype, known([count])?)
        }
        Kind::AddN => {
            let dtype = same_dtype(cx, cx.inputs.len().max(1))?;
            let mut shape = cx.inputs[0].1.clone();
            for (_, other) in &cx.inputs[1..] {
                shape = shape
                    .merge_with(other)
                    .map_err(|_| cx.error("AddN inputs must have one shape"))?;
            }
            one(dtype, shape)
        }
        Kind::VarHandle => one(DataType::Resource, known([])?),
        Kind::ReadVariable => {
            cx.exactly(1)?;
            let shape = match cx.source(0) {
                Some(node) if node.kind == Kind::VarHandle => crate::attr::Attrs {
                    node: &node.name,
                    attrs: &node.attrs,
                }
                .shape_or_unknown("shape")?,
                _ => PartialTensorShape::unknown_rank(),
            };
            one(attrs.dtype("dtype")?, shape)
        }
        Kind::AssignVariable | Kind::AssignByVariable(_) => {
            cx.exactly(2)?;
            Ok(Vec::new())
        }
        Kind::ResourceScatter(_) => {
            cx.exactly(3)?;
            if !matches!(cx.inputs[1].0, DataType::Int32 | DataType::Int64) {
                return Err(cx.type_mismatch(1, DataType::Int32));
            }
            Ok(Vec::new())
        }
        Kind::VariableShape => {
            cx.exactly(1)?;
            let rank = match cx.source(0) {
                Some(node) if node.kind == Kind::VarHandle => crate::attr::Attrs {
                    node: &node.name,
                    attrs: &node.attrs,
                }
                .shape_or_unknown("shape")?
                .rank(),
                _ => None,
            };
            let out = attrs.dtype_or("out_type", DataType::Int32)?;
            one(out, known([rank])?)
        }
        Kind::VarIsInitialized => {
            cx.exactly(1)?;
            one(DataType::Bool, known([])?)
        }
        Kind::DisableCopyOnRead => {
            cx.exactly(1)?;
            Ok(Vec::new())
        }
        Kind::ResourceGather => {
            cx.exactly(2)?;
            if !cx.inputs[1].0.is_integer() {
                return Err(cx.type_mismatch(1, DataType::Int32));
            }
            // The indices' shape, then the variable's rows' (without batch dims).
            let table = match cx.source(0) {
                Some(node) if node.kind == Kind::VarHandle => crate::attr::Attrs {
                    node: &node.name,
                    attrs: &node.attrs,
                }
                .shape_or_unknown("shape")?,
                _ => PartialTensorShape::unknown_rank(),
            };
            let shape = match (cx.inputs[1].1.dims(), table.dims()) {
                (Some(indices), Some(table))
                    if !table.is_empty() && attrs.int_or("batch_dims", 0)? == 0 =>
                {
                    let dims: Vec<_> = indices.iter().chain(&table[1..]).copied().collect();
                    PartialTensorShape::new(&dims)?
                }
                _ => PartialTensorShape::unknown_rank(),
            };
            one(attrs.dtype("dtype")?, shape)
        }
        Kind::RefVariable => one(attrs.dtype("dtype")?, attrs.shape_or_unknown("shape")?),
        Kind::MakeComplex => {
            let dtype = same_dtype(cx, 2)?;
            let complex = super::result_dtype(kind, dtype).ok_or_else(|| {
                cx.error(format!(
                    "Value for attr 'T' of {dtype} is not in the list of allowed values: \
                     float, double"
                ))
            })?;
            one(complex, broadcast(cx, &[0, 1])?)
        }
        Kind::ComplexPart(_) | Kind::Conj => {
            let [(dtype, shape)] = cx.exactly(1)? else {
                unreachable!()
            };
            if !dtype.is_complex() {
                return Err(cx.error(format!(
                    "Value for attr 'T' of {dtype} is not in the list of allowed values: \
                     complex64, complex128"
                )));
            }
            let out = super::result_dtype(kind, *dtype).unwrap_or(*dtype);
            one(out, shape.clone())
        }
        Kind::RefAssign | Kind::RefAssignAdd => {
            let [(dtype, shape), _] = cx.exactly(2)? else {
                unreachable!()
            };
            one(*dtype, shape.clone())
        }
    }
}

/// The length of a float `Range` whose start, limit and delta are `Const` scalars, as
/// TensorFlow's shape function computes it in the dtype itself:
/// `ceil(|(limit - start) / delta|)` (0 where delta points away from the limit).
fn float_range_count(cx: &InferCtx<'_>, dtype: DataType) -> Result<Option<usize>> {
    let scalar = |i: usize| match cx.const_floats(i)?[..] {
        [v] => Some(v),
        _ => None,
    };
    let (Some(start), Some(limit), Some(delta)) = (scalar(0), scalar(1), scalar(2)) else {
        return Ok(None);
    };
    let bounds = [start, limit, delta].map(Scalar::F64);
    range_direction(bounds).map_err(|e| cx.error(e))?;
    let steps = match dtype {
        DataType::Float => f64::from((limit as f32 - start as f32) / delta as f32),
        _ => (limit - start) / delta,
    };
    if !steps.is_finite() {
        return Ok(None);
    }
    // Float to integer `as` saturates: a count past usize::MAX stays unknown below.
    let count = steps.max(0.0).ceil();
    Ok((count < usize::MAX as f64).then_some(count as usize))
}

/// TensorFlow's `Range` rule, at import for constant bounds and when it runs: `delta` is
/// not zero and points from `start` towards `limit` (`Err` is TensorFlow's message).
pub(crate) fn range_direction([start, limit, delta]: [Scalar; 3]) -> Result<(), String> {
    let show = |s: Scalar| match s {
        Scalar::I64(v) => v.to_string(),
        Scalar::U64(v) => v.to_string(),
        other => other.to_f64().to_string(),
    };
    // Integers compare exactly, floats as f64 (a delta's sign is exact either way).
    let at_most = |a: Scalar, b: Scalar| match (a, b) {
        (Scalar::I64(a), Scalar::I64(b)) => a <= b,
        _ => a.to_f64() <= b.to_f64(),
    };
    let step = delta.to_f64();
    if step == 0.0 {
        return Err("Requires delta != 0".into());
    }
    let (relation, ok) = if step > 0.0 {
        ("start <= limit when delta > 0", at_most(start, limit))
    } else {
        ("start >= limit when delta < 0", at_most(limit, start))
    };
    if !ok {
        return Err(format!(
            "Requires {relation}: {}/{}",
            show(start),
            show(limit)
        ));
    }
    Ok(())
}

/// A shape of known rank from its dims.
pub(crate) fn known(dims: impl IntoIterator<Item = Dim>) -> Result<PartialTensorShape> {
    PartialTensorShape::new(&dims.into_iter().collect::<Vec<_>>())
}

/// The one dtype of the first `n` inputs (which must be exactly `n`).
fn same_dtype(cx: &InferCtx<'_>, n: usize) -> Result<DataType> {
    let inputs = cx.exactly(n)?;
    let dtype = inputs[0].0;
    if inputs.iter().any(|(d, _)| *d != dtype) {
        return Err(cx.error("the inputs must have one dtype"));
    }
    Ok(dtype)
}

/// Axes (negative counting from the end) checked against `rank`.
fn axes(cx: &InferCtx<'_>, values: &[i64], rank: usize) -> Result<Vec<usize>> {
    values
        .iter()
        .map(|&a| {
            let r = rank as i64;
            if (-r..r).contains(&a) {
                Ok(a.rem_euclid(r.max(1)) as usize)
            } else {
                Err(cx.error(format!(
                    "axis {a} is out of range for a tensor of rank {rank}"
                )))
            }
        })
        .collect()
}

/// NumPy broadcasting of the static shapes of inputs `which`.
fn broadcast(cx: &InferCtx<'_>, which: &[usize]) -> Result<PartialTensorShape> {
    broadcast_dims(cx, which.iter().map(|&i| cx.inputs[i].1.dims()))
}

/// NumPy broadcasting of static dims (`None` for an unknown rank).
fn broadcast_dims<'d>(
    cx: &InferCtx<'_>,
    shapes: impl IntoIterator<Item = Option<&'d [Dim]>>,
) -> Result<PartialTensorShape> {
    let mut out: Vec<Dim> = Vec::new();
    for dims in shapes {
        let Some(dims) = dims else {
            return Ok(PartialTensorShape::unknown_rank());
        };
        if dims.len() > out.len() {
            let mut wider = vec![Some(1); dims.len() - out.len()];
            wider.extend(out);
            out = wider;
        }
        let offset = out.len() - dims.len();
        for (slot, &d) in out[offset..].iter_mut().zip(dims) {
            *slot = match (*slot, d) {
                (Some(1), d) | (d, Some(1)) => d,
                (Some(a), Some(b)) if a == b => Some(a),
                (Some(a), Some(b)) => {
                    return Err(cx.error(format!("Dimensions must be equal, but are {a} and {b}")))
                }
                (Some(a), None) | (None, Some(a)) => Some(a),
                (None, None) => None,
            };
        }
    }
    known(out)
}

fn matmul(cx: &InferCtx<'_>, batched: bool) -> Result<Vec<Typed>> {
    let dtype = same_dtype(cx, 2)?;
    let attrs = cx.attrs();
    let (ta, tb) = if batched {
        (
            attrs.bool_or("adj_x", false)?,
            attrs.bool_or("adj_y", false)?,
        )
    } else {
        (
            attrs.bool_or("transpose_a", false)?,
            attrs.bool_or("transpose_b", false)?,
        )
    };
    let (Some(a), Some(b)) = (cx.inputs[0].1.dims(), cx.inputs[1].1.dims()) else {
        return Ok(vec![(dtype, PartialTensorShape::unknown_rank())]);
    };
    if (!batched && (a.len() != 2 || b.len() != 2)) || a.len() < 2 || b.len() < 2 {
        return Err(cx.error("Shape must be rank 2"));
    }
    let (ra, rb) = (a.len(), b.len());
    let (m, ka) = if ta {
        (a[ra - 1], a[ra - 2])
    } else {
        (a[ra - 2], a[ra - 1])
    };
    let (kb, n) = if tb {
        (b[rb - 1], b[rb - 2])
    } else {
        (b[rb - 2], b[rb - 1])
    };
    if let (Some(x), Some(y)) = (ka, kb) {
        if x != y {
            return Err(cx.error(format!(
                "Matrix size-incompatible: In[0] inner dim {x}, In[1] inner dim {y}"
            )));
        }
    }
    let mut dims: Vec<Dim> = Vec::new();
    if batched {
        let batch = broadcast_dims(cx, [Some(&a[..ra - 2]), Some(&b[..rb - 2])])?;
        dims.extend(batch.dims().unwrap_or(&[]));
    }
    dims.extend([m, n]);
    Ok(vec![(dtype, known(dims)?)])
}

fn reduction(cx: &InferCtx<'_>, kind: Kind) -> Result<Vec<Typed>> {
    let [(dtype, shape), _] = cx.exactly(2)? else {
        unreachable!()
    };
    let attrs = cx.attrs();
    let (out_dtype, keep) = match kind {
        Kind::Arg(_) => (attrs.dtype_or("output_type", DataType::Int64)?, false),
        _ => (*dtype, attrs.bool_or("keep_dims", false)?),
    };
    if matches!(
        kind,
        Kind::Reduce(ReduceOp::Sum | ReduceOp::Prod | ReduceOp::Mean)
    ) && *dtype == DataType::Bool
    {
        return Err(cx.error("bool is not a numeric type"));
    }
    let Some(dims) = shape.dims() else {
        return Ok(vec![(out_dtype, PartialTensorShape::unknown_rank())]);
    };
    let shape = match cx.const_ints(1) {
        Some(values) => {
            if matches!(kind, Kind::Arg(_)) && values.len() != 1 {
                return Err(cx.error("the dimension must be a scalar"));
            }
            let chosen = axes(cx, &values, dims.len())?;
            let kept =
                dims.iter()
                    .enumerate()
                    .filter_map(|(i, &d)| match (chosen.contains(&i), keep) {
                        (false, _) => Some(d),
                        (true, true) => Some(Some(1)),
                        (true, false) => None,
                    });
            known(kept)?
        }
        None if keep => known(dims.iter().map(|_| None))?,
        None => PartialTensorShape::unknown_rank(),
    };
    Ok(vec![(out_dtype, shape)])
}

fn reshape(cx: &InferCtx<'_>) -> Result<Vec<Typed>> {
    let [(dtype, input), _] = cx.exactly(2)? else {
        unreachable!()
    };
    cx.with_rank(1, 1)?;
    let Some(target) = cx.const_ints(1) else {
        return Ok(vec![(*dtype, PartialTensorShape::unknown_rank())]);
    };
    let mut dims: Vec<Dim> = Vec::new();
    let mut wildcard = None;
    for (i, &d) in target.iter().enumerate() {
        match d {
            -1 if wildcard.is_none() => {
                wildcard = Some(i);
                dims.push(None);
            }
            d if d >= 0 => dims.push(Some(d as usize)),
            -1 => return Err(cx.error("Only one input size may be -1")),
            d => return Err(cx.error(format!("Size {i} must be non-negative, not {d}"))),
        }
    }
    let product = dims
        .iter()
        .flatten()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| cx.error("the target shape has too many elements"))?;
    if let (Some(at), Some(count)) = (wildcard, input.num_elements()) {
        let rest = product;
        if rest > 0 && count.is_multiple_of(rest) {
            dims[at] = Some(count / rest);
        } else if rest > 0 {
            return Err(cx.error(format!(
                "Cannot reshape a tensor with {count} elements to shape {}",
                known(dims.clone())?
            )));
        }
    } else if let (None, Some(count)) = (wildcard, input.num_elements()) {
        let want = product;
        if want != count {
            return Err(cx.error(format!(
                "Cannot reshape a tensor with {count} elements to shape {} ({want} elements)",
                known(dims.clone())?
            )));
        }
    }
    Ok(vec![(*dtype, known(dims)?)])
}

/// The most bytes of a `Const` read at build time: shapes, axes and sizes are a few
/// elements, and a larger constant is left to run time, so no hostile shape (a splat of
/// 2^40 elements) makes inference allocate.
const MAX_BUILD_TIME_BYTES: usize = 1 << 20;

/// The values of a float32 or float64 `TensorProto` as f64 (typed fields or content; one
/// value fills the shape), or `None` for other dtypes, malformed protos and large constants.
pub(crate) fn proto_floats(proto: &TensorProto) -> Option<Vec<f64>> {
    proto_values(proto, |dtype, bytes| match dtype {
        DataType::Float => Some(f64::from(f32::from_le_bytes(bytes.try_into().ok()?))),
        DataType::Double => Some(f64::from_le_bytes(bytes.try_into().ok()?)),
        _ => None,
    })
}

/// The integer values of an int32 or int64 `TensorProto` (typed fields or content; one value
/// fills the shape), or `None` for other dtypes, malformed protos and large constants.
pub(crate) fn proto_ints(proto: &TensorProto) -> Option<Vec<i64>> {
    proto_values(proto, |dtype, bytes| match dtype {
        DataType::Int32 => Some(i64::from(i32::from_le_bytes(bytes.try_into().ok()?))),
        DataType::Int64 => Some(i64::from_le_bytes(bytes.try_into().ok()?)),
        _ => None,
    })
}

/// The elements of a build-time constant, read with a 1 MiB limit, each converted by `read`
/// from its dtype and bytes; `None` where `read` refuses the dtype.
fn proto_values<T>(proto: &TensorProto, read: fn(DataType, &[u8]) -> Option<T>) -> Option<Vec<T>> {
    let options = DecodeOptions {
        max_bytes: MAX_BUILD_TIME_BYTES,
    };
    let elements = proto.decode_elements(&options).ok()?;
    elements
        .bytes
        .chunks_exact(elements.dtype.size().max(1))
        .map(|bytes| read(elements.dtype, bytes))
        .collect()
}
