//! TensorFlow's array ops of inference graphs (`ConcatV2`, `Pack`, `Unpack`, `Split`,
//! `SplitV`, `Pad`, `PadV2`, `MirrorPad`, `Slice`, `StridedSlice`, `Tile`,
//! `PlaceholderWithDefault`, `GatherV2`, `OneHot`, `ReverseV2`, `BroadcastTo`,
//! `SpaceToBatchND`, `BatchToSpaceND`, `ResizeBilinear`, `ResizeNearestNeighbor`): static shapes where the shape-giving inputs are `Const`, and
//! kernels on the eager API.

use smallvec::SmallVec;

use polytensor_core::partial_shape::Dim;
use polytensor_core::{
    Error, MirrorMode, PartialTensorShape, Result, Scalar, StridedSliceSpec, Tensor,
};

use super::infer::known;
use super::kernels::{Outputs, RunCtx};
use super::{InferCtx, Source, Value};
use crate::attr::Attrs;
use crate::graph::Typed;

/// An array op.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Array {
    /// `ConcatV2`: `N` values, then the axis.
    Concat,
    Pack,
    Unpack,
    /// `Split`: the axis, then the value.
    Split,
    /// `SplitV`: the value, the sizes, the axis.
    SplitV,
    Pad,
    PadV2,
    MirrorPad,
    Slice,
    StridedSlice,
    Tile,
    PlaceholderWithDefault,
    /// `GatherV2`: params, indices, axis.
    Gather,
    /// `OneHot`: indices, depth, on value, off value.
    OneHot,
    /// `ReverseV2`: the tensor, then the axes to reverse.
    Reverse,
    /// `BroadcastTo`: the tensor, then the shape.
    BroadcastTo,
    /// `SpaceToBatchND` (`to_batch`) and `BatchToSpaceND`: the tensor, the block shape,
    /// then the paddings or the crops.
    SpaceBatch {
        to_batch: bool,
    },
    /// `ResizeBilinear` (`bilinear`) and `ResizeNearestNeighbor`: NHWC images, then the
    /// output `[height, width]`.
    Resize {
        bilinear: bool,
    },
}

impl Array {
    /// The type attributes tied to the inputs (`ConcatV2`'s and `Pack`'s per-value `T` and
    /// `N` are added by [`super::derived_attrs`]).
    pub(crate) fn typed(self) -> &'static [(&'static str, Source)] {
        use Source::Input;
        match self {
            Array::Concat | Array::Pack => &[],
            Array::Unpack => &[("T", Input(0))],
            Array::Split => &[("T", Input(1))],
            Array::SplitV => &[("T", Input(0)), ("Tlen", Input(1))],
            Array::Pad | Array::MirrorPad => &[("T", Input(0)), ("Tpaddings", Input(1))],
            Array::PadV2 => &[("T", Input(0)), ("Tpaddings", Input(1)), ("T", Input(2))],
            Array::Slice => &[("T", Input(0)), ("Index", Input(1)), ("Index", Input(2))],
            Array::StridedSlice => &[
                ("T", Input(0)),
                ("Index", Input(1)),
                ("Index", Input(2)),
                ("Index", Input(3)),
            ],
            Array::Tile => &[("T", Input(0)), ("Tmultiples", Input(1))],
            Array::PlaceholderWithDefault => &[("dtype", Input(0))],
            Array::Gather => &[
                ("Tparams", Input(0)),
                ("Tindices", Input(1)),
                ("Taxis", Input(2)),
            ],
            Array::OneHot => &[("TI", Input(0)), ("T", Input(2)), ("T", Input(3))],
            Array::Reverse => &[("T", Input(0)), ("Tidx", Input(1))],
            Array::BroadcastTo => &[("T", Input(0)), ("Tidx", Input(1))],
            Array::Resize { .. } => &[("T", Input(0))],
            Array::SpaceBatch { to_batch: true } => &[
                ("T", Input(0)),
                ("Tblock_shape", Input(1)),
                ("Tpaddings", Input(2)),
            ],
            Array::SpaceBatch { to_batch: false } => &[
                ("T", Input(0)),
                ("Tblock_shape", Input(1)),
                ("Tcrops", Input(2)),
            ],
        }
    }
}

/// The strided slice an op's attributes and index vectors describe.
pub(super) fn strided_spec(
    attrs: &Attrs<'_>,
    begin: Vec<i64>,
    end: Vec<i64>,
    strides: Vec<i64>,
) -> Result<StridedSliceSpec> {
    let mask =
        |name: &str| -> Result<i64> { Ok(if attrs.has(name) { attrs.int(name)? } else { 0 }) };
    Ok(StridedSliceSpec {
        begin,
        end,
        strides,
        begin_mask: mask("begin_mask")?,
        end_mask: mask("end_mask")?,
        ellipsis_mask: mask("ellipsis_mask")?,
        new_axis_mask: mask("new_axis_mask")?,
        shrink_axis_mask: mask("shrink_axis_mask")?,
    })
}

/// `[rank, 2]` paddings as pairs.
fn pairs(values: &[i64]) -> Result<Vec<(usize, usize)>> {
    values
        .chunks(2)
        .map(|pair| match pair {
            &[a, b] if a >= 0 && b >= 0 => Ok((a as usize, b as usize)),
            _ => Err(Error::invalid(format!(
                "Paddings must be non-negative: {pair:?}"
            ))),
        })
        .collect()
}

/// `d` padded by `before` and `after`, or TensorFlow's error where the size overflows
/// (a dimension holds at most `i64::MAX`).
fn padded_dim(d: usize, before: usize, after: usize) -> Result<usize> {
    let overflow = |x: usize, y: usize| {
        Error::invalid(format!("Dimension size overflow from adding {x} and {y}"))
    };
    let first = d
        .checked_add(before)
        .filter(|&s| s <= i64::MAX as usize)
        .ok_or_else(|| overflow(d, before))?;
    first
        .checked_add(after)
        .filter(|&s| s <= i64::MAX as usize)
        .ok_or_else(|| overflow(first, after))
}

/// Most outputs one node may have (`Unpack`'s `num`, `Split`'s `num_split`): each is a
/// static shape made at import, so a count of 2^40 must be refused before any is made.
const MAX_OUTPUTS: usize = 1 << 20;

/// The output count attribute `name` of an op, at least `least` and at most
/// [`MAX_OUTPUTS`].
fn output_count(cx: &InferCtx<'_>, name: &str, least: usize) -> Result<usize> {
    let n = cx.attrs().int(name)?;
    match usize::try_from(n) {
        Ok(n) if n >= least && n <= MAX_OUTPUTS => Ok(n),
        Ok(n) if n >= least => Err(cx.error(format!(
            "{name} = {n}: one node gives at most {MAX_OUTPUTS} outputs"
        ))),
        _ => Err(cx.error(format!(
            "Value for attr '{name}' of {n} must be at least minimum {least}"
        ))),
    }
}

/// A signed axis against `rank`, or `None` when it is out of range (the kernel reports it).
fn axis_in(axis: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    (-r..r).contains(&axis).then(|| axis.rem_euclid(r) as usize)
}

/// The static outputs of `op`.
pub(crate) fn infer(op: Array, cx: &InferCtx<'_>) -> Result<Vec<Typed>> {
    let attrs = cx.attrs();
    let input = |i: usize| -> Result<&Typed> {
        cx.inputs
            .get(i)
            .ok_or_else(|| cx.error(format!("input {i} is missing")))
    };
    let dims_of =
        |i: usize| -> Result<Option<Vec<Dim>>> { Ok(input(i)?.1.dims().map(<[Dim]>::to_vec)) };
    let unknown = PartialTensorShape::unknown_rank();
    match op {
        Array::Concat => {
            let n = cx.inputs.len().saturating_sub(1);
            if n == 0 {
                return Err(cx.error("ConcatV2 takes at least one value and the axis"));
            }
            let dtype = input(0)?.0;
            if cx.inputs[..n].iter().any(|(d, _)| *d != dtype) {
                return Err(cx.error("the values must have one dtype"));
            }
            let shapes: Vec<Option<Vec<Dim>>> = (0..n).map(dims_of).collect::<Result<_>>()?;
            let axis = cx.const_ints(n).and_then(|a| a.first().copied());
            let shape = match (shapes.iter().flatten().next(), axis) {
                (Some(first), Some(axis)) => match axis_in(axis, first.len()) {
                    Some(axis) => {
                        let mut out = first.clone();
                        for (d, slot) in out.iter_mut().enumerate() {
                            let along = shapes
                                .iter()
                                .map(|s| s.as_ref().map(|s| s.get(d).copied().flatten()));
                            *slot = if d == axis {
                                let mut total = Some(0usize);
                                for v in along.map(Option::flatten) {
                                    total = match (total, v) {
                                        (Some(sum), Some(v)) => Some(padded_dim(sum, v, 0)?),
                                        _ => None,
                                    };
                                }
                                total
                            } else {
                                along.flatten().flatten().next()
                            };
                        }
                        known(out)?
                    }
                    None => unknown,
                },
                (Some(first), None) => known(vec![None; first.len()])?,
                _ => unknown,
            };
            Ok(vec![(dtype, shape)])
        }
        Array::Pack => {
            let (dtype, shape) = input(0)?.clone();
            let axis = attrs.int_or("axis", 0)?;
            let shape = match shape.dims() {
                Some(dims) => match axis_in(axis, dims.len() + 1) {
                    Some(at) => {
                        let mut dims = dims.to_vec();
                        dims.insert(at, Some(cx.inputs.len()));
                        known(dims)?
                    }
                    None => return Err(cx.error(format!("axis {axis} is out of range"))),
                },
                None => unknown,
            };
            Ok(vec![(dtype, shape)])
        }
        Array::Unpack => {
            let (dtype, shape) = input(0)?.clone();
            let num = output_count(cx, "num", 0)?;
            let axis = attrs.int_or("axis", 0)?;
            let shape = match shape.dims() {
                Some(dims) => match axis_in(axis, dims.len()) {
                    Some(at) => {
                        if dims[at].is_some_and(|d| d != num) {
                            return Err(cx.error(format!(
                                "Dimension must be {num} but is {}",
                                dims[at].unwrap_or(0)
                            )));
                        }
                        let mut dims = dims.to_vec();
                        dims.remove(at);
                        known(dims)?
                    }
                    None => return Err(cx.error(format!("axis {axis} is out of range"))),
                },
                None => unknown,
            };
            Ok(vec![(dtype, shape); num])
        }
        Array::Split | Array::SplitV => {
            let (value, axis_input) = if op == Array::Split { (1, 0) } else { (0, 2) };
            let (dtype, shape) = input(value)?.clone();
            let num = output_count(cx, "num_split", 1)?;
            let axis = cx.const_ints(axis_input).and_then(|a| a.first().copied());
            let sizes = if op == Array::SplitV {
                cx.const_ints(1)
            } else {
                None
            };
            let split_dim = shape.dims().zip(axis).and_then(|(dims, axis)| {
                let at = axis_in(axis, dims.len())?;
                Some((at, dims[at]?))
            });
            if let (Array::Split, Some((at, d))) = (op, split_dim) {
                if d % num != 0 {
                    return Err(cx.error(format!(
                        "Number of ways to split should evenly divide the split dimension, \
                         but got split_dim {at} (size = {d}) and num_split {num}"
                    )));
                }
            }
            let outputs = match (shape.dims(), axis) {
                (Some(dims), Some(axis)) => match axis_in(axis, dims.len()) {
                    Some(at) => (0..num)
                        .map(|k| {
                            let mut d = dims.to_vec();
                            d[at] = match &sizes {
                                // A -1 is what the others leave of a known dim.
                                Some(sizes) if sizes.get(k) == Some(&-1) => {
                                    let rest = sizes
                                        .iter()
                                        .filter(|&&s| s >= 0)
                                        .try_fold(0i64, |sum, &s| sum.checked_add(s));
                                    dims[at]
                                        .zip(rest)
                                        .and_then(|(d, rest)| (d as i64).checked_sub(rest))
                                        .and_then(|left| usize::try_from(left).ok())
                                }
                                Some(sizes) => sizes.get(k).and_then(|&s| usize::try_from(s).ok()),
                                None if op == Array::Split => dims[at].map(|d| d / num),
                                None => None,
                            };
                            known(d)
                        })
                        .collect::<Result<Vec<_>>>()?,
                    None => vec![unknown; num],
                },
                (Some(dims), None) => vec![known(vec![None; dims.len()])?; num],
                _ => vec![unknown; num],
            };
            Ok(outputs.into_iter().map(|s| (dtype, s)).collect())
        }
        Array::Pad | Array::PadV2 | Array::MirrorPad => {
            let (dtype, shape) = input(0)?.clone();
            let shape = match (shape.dims(), cx.const_ints(1)) {
                (Some(dims), Some(values)) if values.len() == 2 * dims.len() => {
                    let pairs = pairs(&values).map_err(|e| cx.error(e))?;
                    let padded = dims
                        .iter()
                        .zip(pairs)
                        .map(|(d, (a, b))| d.map(|d| padded_dim(d, a, b)).transpose())
                        .collect::<Result<Vec<_>>>()
                        .map_err(|e| cx.error(e))?;
                    known(padded)?
                }
                (Some(dims), _) => known(vec![None; dims.len()])?,
                _ => unknown,
            };
            Ok(vec![(dtype, shape)])
        }
        Array::Slice => {
            let (dtype, shape) = input(0)?.clone();
            let shape = match (shape.dims(), cx.const_ints(1), cx.const_ints(2)) {
                (Some(dims), Some(begin), Some(size))
                    if size.len() == dims.len() && begin.len() == dims.len() =>
                {
                    known(
                        dims.iter()
                            .zip(begin.iter().zip(&size))
                            .map(|(d, (&b, &s))| {
                                if s == -1 {
                                    d.and_then(|d| (d as i64).checked_sub(b))
                                        .and_then(|left| usize::try_from(left).ok())
                                } else {
                                    usize::try_from(s).ok()
                                }
                            }),
                    )?
                }
                (Some(dims), _, _) => known(vec![None; dims.len()])?,
                _ => unknown,
            };
            Ok(vec![(dtype, shape)])
        }
        Array::StridedSlice => {
            let (dtype, shape) = input(0)?.clone();
            let consts = (cx.const_ints(1), cx.const_ints(2), cx.const_ints(3));
            let shape = match (shape.dims(), consts) {
                (Some(dims), (Some(b), Some(e), Some(s))) => {
                    // Unknown dims resolve against a huge stand-in, then stay unknown.
                    const STAND_IN: usize = 1 << 40;
                    let sizes: Vec<usize> = dims.iter().map(|d| d.unwrap_or(STAND_IN)).collect();
                    let plan = strided_spec(&attrs, b, e, s)?
                        .resolve(&sizes)
                        .map_err(|e| cx.error(e))?;
                    known(plan.output.iter().map(|d| match d {
                        None => Some(1),
                        Some(d) if dims[*d].is_none() => None,
                        Some(d) => Some(plan.dims[*d].len),
                    }))?
                }
                _ => unknown,
            };
            Ok(vec![(dtype, shape)])
        }
        Array::Resize { bilinear } => {
            let (dtype, shape) = input(0)?.clone();
            cx.with_rank(0, 4)?;
            cx.with_rank(1, 1)?;
            let size = cx.const_ints(1).filter(|s| s.len() == 2);
            let out = match shape.dims() {
                Some(dims) => {
                    let side = |k: usize| size.as_ref().and_then(|s| usize::try_from(s[k]).ok());
                    known([dims[0], side(0), side(1), dims[3]])?
                }
                None => known([None; 4])?,
            };
            let dtype = if bilinear {
                polytensor_core::DataType::Float
            } else {
                dtype
            };
            Ok(vec![(dtype, out)])
        }
        Array::SpaceBatch { to_batch } => {
            let (dtype, shape) = input(0)?.clone();
            cx.with_rank(1, 1)?;
            cx.with_rank(2, 2)?;
            let out = match (shape.dims(), cx.const_ints(1), cx.const_ints(2)) {
                (Some(dims), Some(block), Some(edges)) => {
                    space_batch_shape(dims, &block, &edges, to_batch).map_err(|e| cx.error(e))?
                }
                (Some(dims), _, _) => known(vec![None; dims.len()])?,
                _ => unknown,
            };
            Ok(vec![(dtype, out)])
        }
        Array::Reverse => {
            let (dtype, shape) = input(0)?.clone();
            cx.with_rank(1, 1)?;
            if let (Some(rank), Some(axes)) = (shape.rank(), cx.const_ints(1)) {
                polytensor_core::layout::reversed_axes(&axes, rank).map_err(|e| cx.error(e))?;
            }
            Ok(vec![(dtype, shape)])
        }
        Array::BroadcastTo => {
            let (dtype, shape) = input(0)?.clone();
            cx.with_rank(1, 1)?;
            let target = cx.shape_value(1)?;
            if let (Some(from), Some(to)) = (shape.dims(), target.dims()) {
                if from.len() > to.len() {
                    return Err(cx.error(format!(
                        "Shape must be at most rank {} but is rank {}",
                        to.len(),
                        from.len()
                    )));
                }
                let lead = to.len() - from.len();
                for (&f, &t) in from.iter().zip(&to[lead..]) {
                    if let (Some(f), Some(t)) = (f, t) {
                        if f != t && f != 1 {
                            return Err(
                                cx.error(format!("Incompatible shapes: {} vs. {}", shape, target))
                            );
                        }
                    }
                }
            }
            Ok(vec![(dtype, target)])
        }
        Array::Tile => {
            let (dtype, shape) = input(0)?.clone();
            let shape = match (shape.dims(), cx.const_ints(1)) {
                (Some(dims), Some(m)) if m.len() == dims.len() => known(
                    dims.iter()
                        .zip(&m)
                        .map(|(d, &m)| match (d, usize::try_from(m)) {
                            (Some(d), Ok(m)) => d
                                .checked_mul(m)
                                .filter(|&p| p <= i64::MAX as usize)
                                .map(Some)
                                .ok_or_else(|| {
                                    Error::invalid(format!(
                                        "Negative dimension size caused by overflow when \
                                         multiplying {d} and {m}"
                                    ))
                                }),
                            _ => Ok(None),
                        })
                        .collect::<Result<Vec<Dim>>>()?,
                )?,
                (Some(dims), _) => known(vec![None; dims.len()])?,
                _ => unknown,
            };
            Ok(vec![(dtype, shape)])
        }
        Array::Gather => {
            let (dtype, params) = input(0)?.clone();
            let indices = input(1)?.1.clone();
            let batch = attrs.int_or("batch_dims", 0)?;
            let axis = cx.const_ints(2).and_then(|a| a.first().copied());
            let shape = match (params.dims(), indices.dims(), axis) {
                (Some(p), Some(i), Some(axis)) => {
                    let batch = if batch < 0 {
                        batch + i.len() as i64
                    } else {
                        batch
                    };
                    match (axis_in(axis, p.len()), usize::try_from(batch)) {
                        (Some(a), Ok(b)) if b <= a && b <= i.len() => {
                            let mut dims = p[..a].to_vec();
                            dims.extend_from_slice(&i[b..]);
                            dims.extend_from_slice(&p[a + 1..]);
                            known(dims)?
                        }
                        _ => return Err(cx.error("axis or batch_dims out of range")),
                    }
                }
                _ => unknown,
            };
            Ok(vec![(dtype, shape)])
        }
        Array::OneHot => {
            let indices = input(0)?.1.clone();
            let dtype = input(2)?.0;
            let depth = cx
                .const_ints(1)
                .and_then(|d| d.first().and_then(|&d| usize::try_from(d).ok()));
            let axis = attrs.int_or("axis", -1)?;
            let shape = match indices.dims() {
                Some(dims) => {
                    let at = if axis == -1 { dims.len() as i64 } else { axis };
                    match usize::try_from(at) {
                        Ok(at) if at <= dims.len() => {
                            let mut dims = dims.to_vec();
                            dims.insert(at, depth);
                            known(dims)?
                        }
                        _ => return Err(cx.error(format!("axis {axis} is out of range"))),
                    }
                }
                None => unknown,
            };
            Ok(vec![(dtype, shape)])
        }
        Array::PlaceholderWithDefault => {
            let (dtype, given) = input(0)?.clone();
            let shape = attrs.shape_or_unknown("shape")?;
            if attrs.dtype("dtype")? != dtype || !shape.is_compatible_with(&given) {
                return Err(cx.error(format!(
                    "the default value does not match dtype {} and shape {shape}",
                    attrs.dtype("dtype")?
                )));
            }
            Ok(vec![(dtype, shape)])
        }
    }
}

/// Run `op`.
pub(crate) fn run(op: Array, cx: &RunCtx<'_, '_>) -> Result<Outputs> {
    let attrs = cx.attrs();
    let tensors = |ts: Vec<Tensor>| -> Outputs { ts.into_iter().map(Value::Tensor).collect() };
    let one = |t: Tensor| -> Result<Outputs> { Ok(tensors(vec![t])) };
    let scalar_axis = |i: usize| -> Result<i64> {
        match cx.ints(i)?[..] {
            [axis] => Ok(axis),
            _ => Err(Error::invalid(format!(
                "axis of '{}' must be a scalar",
                cx.node.name
            ))),
        }
    };
    match op {
        Array::Concat => {
            let n = cx.inputs.len() - 1;
            let values = (0..n)
                .map(|i| cx.tensor(i).map(|t| t.into_owned()))
                .collect::<Result<Vec<_>>>()?;
            let refs: Vec<&Tensor> = values.iter().collect();
            one(Tensor::concat(&refs, scalar_axis(n)?)?)
        }
        Array::Pack => {
            let values = (0..cx.inputs.len())
                .map(|i| cx.tensor(i).map(|t| t.into_owned()))
                .collect::<Result<Vec<_>>>()?;
            let refs: Vec<&Tensor> = values.iter().collect();
            one(Tensor::stack(&refs, attrs.int_or("axis", 0)?)?)
        }
        Array::Unpack => {
            let parts = cx.tensor(0)?.unstack(attrs.int_or("axis", 0)?)?;
            if parts.len() as i64 != attrs.int("num")? {
                return Err(Error::invalid(format!(
                    "Input shape axis {} must equal {}, got shape {}",
                    attrs.int_or("axis", 0)?,
                    attrs.int("num")?,
                    cx.tensor(0)?.shape()
                )));
            }
            Ok(tensors(parts))
        }
        Array::Split => {
            let num = usize::try_from(attrs.int("num_split")?)
                .map_err(|_| Error::invalid("num_split must be positive"))?;
            Ok(tensors(cx.tensor(1)?.split(num, scalar_axis(0)?)?))
        }
        Array::SplitV => {
            let parts = cx.tensor(0)?.split_sizes(&cx.ints(1)?, scalar_axis(2)?)?;
            Ok(tensors(parts))
        }
        Array::Pad | Array::PadV2 => {
            let value = if op == Array::PadV2 {
                let c = cx.tensor(2)?;
                *c.to_scalars()?
                    .first()
                    .filter(|_| c.num_elements() == 1)
                    .ok_or_else(|| Error::invalid("constant_values must be a scalar"))?
            } else {
                Scalar::I64(0)
            };
            let x = cx.tensor(0)?;
            let paddings = paddings_of(cx, x.rank())?;
            one(x.pad(&paddings, value)?)
        }
        Array::MirrorPad => {
            let mode = match attrs.string_or("mode", "")?.as_str() {
                "REFLECT" => MirrorMode::Reflect,
                "SYMMETRIC" => MirrorMode::Symmetric,
                other => {
                    return Err(Error::invalid(format!(
                        "mode must be either REFLECT or SYMMETRIC, not {other:?}"
                    )))
                }
            };
            let x = cx.tensor(0)?;
            let paddings = paddings_of(cx, x.rank())?;
            one(x.mirror_pad(&paddings, mode)?)
        }
        Array::Slice => one(cx.tensor(0)?.slice_at(&cx.ints(1)?, &cx.ints(2)?)?),
        Array::StridedSlice => {
            let spec = strided_spec(&attrs, cx.ints(1)?, cx.ints(2)?, cx.ints(3)?)?;
            one(cx.tensor(0)?.strided_slice(&spec)?)
        }
        Array::Resize { bilinear } => {
            let size = match cx.ints(1)?[..] {
                [h, w] => [h, w].map(|d| usize::try_from(d).unwrap_or(0)),
                _ => return Err(Error::invalid("shape_t must be 1-D with 2 elements")),
            };
            let options = polytensor_core::ResizeOptions {
                align_corners: attrs.bool_or("align_corners", false)?,
                half_pixel_centers: attrs.bool_or("half_pixel_centers", false)?,
            };
            let x = cx.tensor(0)?;
            one(if bilinear {
                x.resize_bilinear(size, options)?
            } else {
                x.resize_nearest(size, options)?
            })
        }
        Array::SpaceBatch { to_batch } => {
            cx.require_rank(1, 1, |s| {
                format!("block_shape rank should be 1 instead of {s}")
            })?;
            let block = cx
                .ints(1)?
                .iter()
                .enumerate()
                .map(|(at, &b)| {
                    usize::try_from(b).ok().filter(|&b| b > 0).ok_or_else(|| {
                        Error::invalid(format!(
                            "All values in block_shape must be positive, got value, {b} at \
                             index {at}."
                        ))
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let what = if to_batch { "Paddings" } else { "Crops" };
            let edges = cx.ints(2)?;
            if edges.len() != 2 * block.len() {
                return Err(Error::invalid(format!(
                    "{} should have shape [{}, 2] instead of {}",
                    what.to_lowercase(),
                    block.len(),
                    cx.tensor(2)?.shape()
                )));
            }
            let pairs = edges
                .chunks(2)
                .map(|p| match (usize::try_from(p[0]), usize::try_from(p[1])) {
                    (Ok(a), Ok(b)) => Ok((a, b)),
                    _ => Err(Error::invalid(format!("{what} must be non-negative"))),
                })
                .collect::<Result<Vec<_>>>()?;
            let x = cx.tensor(0)?;
            one(if to_batch {
                x.space_to_batch_nd(&block, &pairs)?
            } else {
                x.batch_to_space_nd(&block, &pairs)?
            })
        }
        Array::Reverse => {
            let x = cx.tensor(0)?;
            cx.require_rank(1, 1, |s| format!("'dims' must be 1-dimension, not {s}"))?;
            one(x.reverse(&cx.ints(1)?)?)
        }
        Array::BroadcastTo => {
            let x = cx.tensor(0)?;
            let dims = cx.ints(1)?;
            let to = dims
                .iter()
                .map(|&d| {
                    usize::try_from(d)
                        .map_err(|_| Error::invalid(format!("Dimension {d} must be >= 0")))
                })
                .collect::<Result<Vec<_>>>()?;
            if x.rank() > to.len() {
                return Err(Error::invalid(format!(
                    "Rank of input ({}) must be no greater than rank of output shape ({}).",
                    x.rank(),
                    to.len()
                )));
            }
            let lead = to.len() - x.rank();
            if x.dims()
                .iter()
                .zip(&to[lead..])
                .any(|(&f, &t)| f != t && f != 1)
            {
                return Err(Error::invalid(format!(
                    "Incompatible shapes: {} vs. {}",
                    x.shape(),
                    polytensor_core::TensorShape::new(&to)?
                )));
            }
            one(x.broadcast_to(to)?)
        }
        Array::Tile => {
            let multiples = cx
                .ints(1)?
                .iter()
                .map(|&m| {
                    usize::try_from(m).map_err(|_| {
                        Error::invalid(format!("Expected multiples[i] >= 0, but got {m}"))
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            one(cx.tensor(0)?.tile(&multiples)?)
        }
        Array::PlaceholderWithDefault => one(cx.tensor(0)?.into_owned()),
        Array::Gather => {
            let batch = attrs.int_or("batch_dims", 0)?;
            one(cx
                .tensor(0)?
                .gather(&*cx.tensor(1)?, scalar_axis(2)?, batch)?)
        }
        Array::OneHot => {
            let depth = match cx.ints(1)?[..] {
                [d] if d >= 0 => d as usize,
                [d] => {
                    return Err(Error::invalid(format!(
                        "depth must be non-negative, got: {d}"
                    )))
                }
                _ => return Err(Error::invalid("depth must be a scalar")),
            };
            let value = |i: usize| -> Result<(Scalar, polytensor_core::DataType)> {
                let t = cx.tensor(i)?;
                match t.to_scalars()?[..] {
                    [v] => Ok((v, t.dtype())),
                    _ => Err(Error::invalid(format!(
                        "on_value and off_value must be scalars, got shape {}",
                        t.shape()
                    ))),
                }
            };
            let ((on, dtype), (off, _)) = (value(2)?, value(3)?);
            let axis = attrs.int_or("axis", -1)?;
            one(cx.tensor(0)?.one_hot(depth, on, off, axis, dtype)?)
        }
    }
}

/// Input 1 as `[rank, 2]` paddings, with TensorFlow's check of its shape.
fn paddings_of(cx: &RunCtx<'_, '_>, rank: usize) -> Result<Vec<(usize, usize)>> {
    let given = cx.tensor(1)?;
    if given.dims() != [rank, 2] {
        return Err(Error::invalid(format!(
            "paddings must be a matrix with 2 columns: {}",
            given.shape()
        )));
    }
    pairs(&cx.ints(1)?)
}

/// The dtypes `Pack` and `ConcatV2` tie to each value.
pub(crate) fn per_value(inputs: usize, concat: bool) -> SmallVec<[(&'static str, Source); 8]> {
    let values = if concat {
        inputs.saturating_sub(1)
    } else {
        inputs
    };
    let mut typed: SmallVec<[(&'static str, Source); 8]> =
        (0..values).map(|i| ("T", Source::Input(i))).collect();
    typed.push((
        "N",
        if concat {
            Source::Values
        } else {
            Source::Count
        },
    ));
    if concat && inputs > 0 {
        typed.push(("Tidx", Source::Input(inputs - 1)));
    }
    typed
}

/// The static shape `SpaceToBatchND` (`to_batch`) or `BatchToSpaceND` gives `dims` with a
/// constant block shape and paddings or crops, with the messages of TensorFlow's shape
/// functions.
fn space_batch_shape(
    dims: &[Dim],
    block: &[i64],
    edges: &[i64],
    to_batch: bool,
) -> std::result::Result<PartialTensorShape, String> {
    let m = block.len();
    if dims.len() < m + 1 || edges.len() != 2 * m {
        return known(vec![None; dims.len()]).map_err(|e| e.to_string());
    }
    if edges.iter().any(|&e| e < 0) {
        let what = if to_batch { "paddings" } else { "crops" };
        return Err(format!("{what} cannot be negative"));
    }
    let block: Vec<usize> = block
        .iter()
        .map(|&b| usize::try_from(b).ok().filter(|&b| b > 0))
        .collect::<Option<_>>()
        .ok_or_else(|| "block_shape must be positive".to_string())?;
    let divisible = |d: usize, b: usize| {
        if d.is_multiple_of(b) {
            Ok(d / b)
        } else {
            Err(format!(
                "Dimension size must be evenly divisible by {b} but is {d}"
            ))
        }
    };
    let overflow = || "Dimension size overflow".to_string();
    let mut out = dims.to_vec();
    for (k, &b) in block.iter().enumerate() {
        let (before, after) = (edges[2 * k] as usize, edges[2 * k + 1] as usize);
        out[k + 1] = match dims[k + 1] {
            Some(d) if to_batch => {
                let padded = d.checked_add(before).and_then(|p| p.checked_add(after));
                Some(divisible(padded.ok_or_else(overflow)?, b)?)
            }
            Some(d) => {
                let joined = d.checked_mul(b).ok_or_else(overflow)?;
                Some(
                    joined
                        .checked_sub(before)
                        .and_then(|j| j.checked_sub(after))
                        .ok_or_else(|| format!("cropped_shape[{k}] must be non-negative"))?,
                )
            }
            None => None,
        };
    }
    out[0] = match dims[0] {
        Some(mut batch) => {
            for &b in &block {
                batch = if to_batch {
                    batch.checked_mul(b).ok_or_else(overflow)?
                } else {
                    divisible(batch, b)?
                };
            }
            Some(batch)
        }
        None => None,
    };
    known(out).map_err(|e| e.to_string())
}
