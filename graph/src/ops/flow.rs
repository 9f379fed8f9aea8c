//! Control flow, as TensorFlow's GraphDefs write it: the 1.x primitives (`Switch`,
//! `Merge`, `Enter`, `Exit`, `NextIteration`, `LoopCond`), whose frames, iterations and
//! dead tensors the session's frame executor (`crate::frames`) runs, and the functional
//! ops (`While`, `If`, `PartitionedCall` and their stateless twins), which call functions of
//! the graph's library (`crate::function`). Here: what each is and its static outputs.

use polytensor_core::{DataType, PartialTensorShape, Result};

use super::{InferCtx, Source};
use crate::attr::AttrKind;
use crate::graph::Typed;

/// A TensorFlow 1.x control-flow primitive.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Flow {
    /// `Switch(data, pred)`: `data` on output 1 when `pred` is true, on output 0 otherwise;
    /// the other output is dead.
    Switch,
    /// `Merge(inputs...)`: the first live input and its index (`value_index`); dead when
    /// every input is.
    Merge,
    /// `Enter(data)`: `data` entering the child frame `frame_name` (every iteration of it
    /// when `is_constant`, the first otherwise).
    Enter,
    /// `Exit(data)`: `data` leaving its frame for the parent.
    Exit,
    /// `NextIteration(data)`: `data` for the next iteration of its frame.
    NextIteration,
    /// `LoopCond(pred)`: the loop's predicate, unchanged.
    LoopCond,
}

/// A functional op: a call of the graph library's functions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Call {
    /// `While` / `StatelessWhile`: `body` while `cond` holds, over the loop variables.
    While,
    /// `If` / `StatelessIf`: `then_branch` or `else_branch` on the inputs after the
    /// condition.
    If,
    /// `PartitionedCall` / `StatefulPartitionedCall`: function `f` on the inputs.
    Function,
}

impl Flow {
    /// The type attributes tied to the inputs (`Merge`'s `N` is checked where its back
    /// edges are known, `crate::graph_def`).
    pub(crate) fn typed(self) -> &'static [(&'static str, Source)] {
        &[("T", Source::Input(0))]
    }
}

impl Call {
    /// The type attributes tied to the inputs.
    pub(crate) fn typed(self) -> &'static [(&'static str, Source)] {
        match self {
            Call::While => &[("T", Source::InputTypes)],
            Call::If => &[("Tcond", Source::Input(0))],
            Call::Function => &[("Tin", Source::InputTypes)],
        }
    }

    /// The attributes naming the functions it calls.
    pub(crate) fn function_attrs(self) -> &'static [&'static str] {
        match self {
            Call::While => &["cond", "body"],
            Call::If => &["then_branch", "else_branch"],
            Call::Function => &["f"],
        }
    }
}

/// The static outputs of `op`.
pub(crate) fn infer(op: Flow, cx: &InferCtx<'_>) -> Result<Vec<Typed>> {
    match op {
        Flow::Switch => {
            let [data, (pred, pred_shape)] = cx.exactly(2)? else {
                unreachable!()
            };
            if *pred != DataType::Bool {
                return Err(cx.type_mismatch(1, DataType::Bool));
            }
            scalar_predicate(cx, pred_shape)?;
            Ok(vec![data.clone(), data.clone()])
        }
        Flow::Merge => {
            let Some((dtype, first)) = cx.inputs.first() else {
                return Err(cx.error("Merge takes at least one input"));
            };
            let mut shape = first.clone();
            for (i, (other, other_shape)) in cx.inputs.iter().enumerate().skip(1) {
                if other != dtype {
                    return Err(cx.type_mismatch(i, *dtype));
                }
                shape = merged(&shape, other_shape);
            }
            Ok(vec![(*dtype, shape), (DataType::Int32, scalar())])
        }
        Flow::Enter => {
            cx.attrs().string_or("frame_name", "").and_then(|name| {
                if name.is_empty() {
                    Err(cx.error("Enter needs a non-empty frame_name"))
                } else {
                    Ok(())
                }
            })?;
            Ok(cx.exactly(1)?.to_vec())
        }
        Flow::Exit | Flow::NextIteration => Ok(cx.exactly(1)?.to_vec()),
        Flow::LoopCond => {
            let [(pred, shape)] = cx.exactly(1)? else {
                unreachable!()
            };
            if *pred != DataType::Bool {
                return Err(cx.type_mismatch(0, DataType::Bool));
            }
            scalar_predicate(cx, shape)?;
            Ok(vec![(DataType::Bool, scalar())])
        }
    }
}

/// The static outputs of a call: its output dtypes with `output_shapes` where the node
/// has them (`While` without them keeps its inputs' shapes, as TensorFlow's shape
/// function does; the others' are unknown).
pub(crate) fn infer_call(op: Call, cx: &InferCtx<'_>) -> Result<Vec<Typed>> {
    let attrs = cx.attrs();
    for name in op.function_attrs() {
        attrs.function(name)?;
    }
    let dtypes = match op {
        Call::While => attrs.dtypes("T")?,
        Call::If => {
            if cx.inputs.is_empty() {
                return Err(cx.error("If takes its condition as input 0"));
            }
            check_types(cx, &attrs.dtypes("Tin")?, 1)?;
            attrs.dtypes("Tout")?
        }
        Call::Function => {
            check_types(cx, &attrs.dtypes("Tin")?, 0)?;
            attrs.dtypes("Tout")?
        }
    };
    let shapes = output_shapes(cx)?;
    Ok(dtypes
        .iter()
        .enumerate()
        .map(|(i, &dtype)| {
            let shape = match (shapes.get(i), op) {
                (Some(shape), _) if shapes.len() == dtypes.len() => shape.clone(),
                (_, Call::While) => cx.inputs[i].1.clone(),
                _ => PartialTensorShape::unknown_rank(),
            };
            (dtype, shape)
        })
        .collect())
}

/// The inputs from `skip` on must have `dtypes`.
fn check_types(cx: &InferCtx<'_>, dtypes: &[DataType], skip: usize) -> Result<()> {
    if dtypes.len() + skip != cx.inputs.len() {
        return Err(cx.error(format!(
            "the node lists {} input types but has {} inputs",
            dtypes.len(),
            cx.inputs.len() - skip
        )));
    }
    for (i, &dtype) in dtypes.iter().enumerate() {
        if cx.inputs[skip + i].0 != dtype {
            return Err(cx.type_mismatch(skip + i, dtype));
        }
    }
    Ok(())
}

/// The `output_shapes` attribute, empty where absent.
fn output_shapes(cx: &InferCtx<'_>) -> Result<Vec<PartialTensorShape>> {
    match cx.attrs.get("output_shapes").and_then(|v| v.value.as_ref()) {
        Some(AttrKind::List(list)) => list
            .shape
            .iter()
            .map(PartialTensorShape::from_proto)
            .collect(),
        _ => Ok(Vec::new()),
    }
}

/// A predicate must be a scalar (TensorFlow's `WithRank(pred, 0)`).
fn scalar_predicate(cx: &InferCtx<'_>, shape: &PartialTensorShape) -> Result<()> {
    match shape.rank() {
        Some(rank) if rank != 0 => Err(cx.error(format!(
            "Shape must be rank 0 but is rank {rank} for the predicate"
        ))),
        _ => Ok(()),
    }
}

fn scalar() -> PartialTensorShape {
    PartialTensorShape::from_i64(&[]).unwrap_or_else(|_| PartialTensorShape::unknown_rank())
}

/// TensorFlow's `Merge` shape: dims where every input agrees, unknown elsewhere; an
/// unknown rank where ranks differ or one is unknown.
pub(crate) fn merged(a: &PartialTensorShape, b: &PartialTensorShape) -> PartialTensorShape {
    match (a.dims(), b.dims()) {
        (Some(x), Some(y)) if x.len() == y.len() => {
            let dims: Vec<Option<usize>> = x
                .iter()
                .zip(y)
                .map(|(p, q)| if p == q { *p } else { None })
                .collect();
            PartialTensorShape::new(&dims).unwrap_or_else(|_| PartialTensorShape::unknown_rank())
        }
        _ => PartialTensorShape::unknown_rank(),
    }
}
