//! TensorFlow's collective ops (`CollectiveReduceV2`, `CollectiveGatherV2`,
//! `CollectiveBcastSendV2`, `CollectiveBcastRecvV2`, as MultiWorkerMirroredStrategy's
//! graphs use them), run through the session's [`Collectives`] (an MPI communicator from
//! polytensor-distributed, given with `Session::with_collectives`): the same GraphDef run
//! by every rank of `mpirun -np N` reduces, gathers and broadcasts across the ranks.
//!
//! The group is the session's communicator: `group_size` must be its size (TensorFlow's
//! `group_key` and `instance_key` name groups and instances that MPI's ordering makes
//! implicit: every rank runs the same collectives in the same order). With no
//! communicator, a group of one runs locally, as TensorFlow does.

use polytensor_core::collective::{Collectives, Reduction};
use polytensor_core::{BinaryOp, DataType, Error, PartialTensorShape, Result, Tensor, TensorShape};

use super::kernels::{Outputs, RunCtx};
use super::{InferCtx, Source, Value};
use crate::graph::Typed;

/// A collective op.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Collective {
    /// `CollectiveReduceV2`: input, group_size, group_key, instance_key, ordering tokens.
    Reduce,
    /// `CollectiveGatherV2`: input, group_size, group_key, instance_key, ordering tokens.
    Gather,
    /// `CollectiveBcastSendV2`: input, group_size, group_key, instance_key.
    BcastSend,
    /// `CollectiveBcastRecvV2`: group_size, group_key, instance_key, shape.
    BcastRecv,
}

/// The collective op types, by TensorFlow's name.
pub(crate) const OPS: &[(&str, Collective)] = &[
    ("CollectiveReduceV2", Collective::Reduce),
    ("CollectiveGatherV2", Collective::Gather),
    ("CollectiveBcastSendV2", Collective::BcastSend),
    ("CollectiveBcastRecvV2", Collective::BcastRecv),
];

impl Collective {
    /// The type attributes tied to the inputs.
    pub(crate) fn typed(self) -> &'static [(&'static str, Source)] {
        match self {
            Collective::Reduce | Collective::Gather | Collective::BcastSend => {
                &[("T", Source::Input(0))]
            }
            Collective::BcastRecv => &[("Tshape", Source::Input(3))],
        }
    }

    /// TensorFlow's name of the op.
    fn name(self) -> &'static str {
        OPS.iter()
            .find(|(_, op)| *op == self)
            .map_or("a collective", |(name, _)| name)
    }

    /// The input holding `group_size`.
    fn group_size_input(self) -> usize {
        match self {
            Collective::BcastRecv => 0,
            _ => 1,
        }
    }
}

/// The static output of `op`: its dtype and what is known of its shape.
pub(crate) fn infer(op: Collective, cx: &InferCtx<'_>) -> Result<Vec<Typed>> {
    // Every collective has four fixed inputs; reduce and gather take ordering tokens after.
    let fixed = 4;
    if cx.inputs.len() < fixed {
        return Err(cx.error(format!("{} takes at least {fixed} inputs", op.name())));
    }
    let inputs = cx.inputs;
    Ok(vec![match op {
        Collective::Reduce | Collective::BcastSend => inputs[0].clone(),
        Collective::Gather => {
            let shape = match inputs[0].1.dims() {
                Some([]) => PartialTensorShape::new(&[None])?,
                Some([_, rest @ ..]) => {
                    let mut dims = vec![None];
                    dims.extend_from_slice(rest);
                    PartialTensorShape::new(&dims)?
                }
                None => PartialTensorShape::unknown_rank(),
            };
            (inputs[0].0, shape)
        }
        Collective::BcastRecv => {
            let shape = match cx.const_ints(3) {
                Some(dims) => PartialTensorShape::from_i64(&dims)?,
                None => PartialTensorShape::unknown_rank(),
            };
            (cx.attrs().dtype("T")?, shape)
        }
    }])
}

/// How `CollectiveReduceV2` combines, from its `merge_op` and `final_op`: the reduction,
/// and whether the result is then divided by the group size (a `Div` after anything but
/// `Add`, which is the mean).
fn reduction(merge_op: &str, final_op: &str) -> Result<(Reduction, bool)> {
    let merge = match merge_op {
        "Add" => Reduction::Sum,
        "Mul" => Reduction::Prod,
        "Min" => Reduction::Min,
        "Max" => Reduction::Max,
        other => {
            return Err(Error::invalid(format!(
                "Value for attr 'merge_op' of \"{other}\" is not in the list of allowed values: \
                 \"Min\", \"Max\", \"Mul\", \"Add\""
            )))
        }
    };
    match (merge, final_op) {
        (_, "Id") => Ok((merge, false)),
        (Reduction::Sum, "Div") => Ok((Reduction::Mean, false)),
        (_, "Div") => Ok((merge, true)),
        (_, other) => Err(Error::invalid(format!(
            "Value for attr 'final_op' of \"{other}\" is not in the list of allowed values: \
             \"Id\", \"Div\""
        ))),
    }
}

/// Run `op` through `collectives` (or locally for a group of one without them).
pub(crate) fn run(
    op: Collective,
    cx: &RunCtx<'_, '_>,
    collectives: Option<&dyn Collectives>,
) -> Result<Outputs> {
    let group_size = cx.ints(op.group_size_input())?;
    let group_size = match group_size[..] {
        [g] if g >= 1 => g as usize,
        _ => {
            return Err(Error::invalid(format!(
                "{}: group_size must be a positive scalar, got {group_size:?}",
                op.name()
            )))
        }
    };
    let size = collectives.map_or(1, |c| c.size());
    if group_size != size {
        let why = match collectives {
            Some(_) => format!("the session's communicator has {size} ranks"),
            None => "the session has no communicator (Session::with_collectives)".into(),
        };
        return Err(Error::invalid(format!(
            "{} '{}': group_size is {group_size} but {why}",
            op.name(),
            cx.node.name
        )));
    }
    let attrs = cx.attrs();
    let result = match op {
        Collective::Reduce => {
            let input = cx.tensor(0)?;
            let (reduction, divide) = reduction(
                &attrs.string_or("merge_op", "Add")?,
                &attrs.string_or("final_op", "Id")?,
            )?;
            let reduced = match collectives {
                Some(c) => c.all_reduce(&input, reduction)?,
                None => input.into_owned(),
            };
            if divide {
                let size = Tensor::full([], size as f64, reduced.dtype(), reduced.device())?;
                reduced.binary(BinaryOp::Div, &size)?
            } else {
                reduced
            }
        }
        Collective::Gather => {
            let input = cx.tensor(0)?;
            match collectives {
                Some(c) => c.all_gather(&input)?,
                None if input.rank() == 0 => input.reshape([1])?,
                None => input.into_owned(),
            }
        }
        Collective::BcastSend => {
            let input = cx.tensor(0)?;
            match collectives {
                Some(c) => c.broadcast_send(&input)?,
                None => input.into_owned(),
            }
        }
        Collective::BcastRecv => {
            let shape = TensorShape::from_i64(&cx.ints(3)?)?;
            let dtype: DataType = attrs.dtype("T")?;
            match collectives {
                Some(c) => c.broadcast_recv(&shape, dtype, cx.device)?,
                None => {
                    return Err(Error::invalid(
                        "CollectiveBcastRecvV2 in a group of one has no sender",
                    ))
                }
            }
        }
    };
    Ok(smallvec::smallvec![Value::Tensor(result)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_and_final_ops_map_to_reductions() {
        assert_eq!(reduction("Add", "Id").unwrap(), (Reduction::Sum, false));
        assert_eq!(reduction("Add", "Div").unwrap(), (Reduction::Mean, false));
        assert_eq!(reduction("Max", "Div").unwrap(), (Reduction::Max, true));
        assert!(reduction("Sub", "Id").is_err());
        assert!(reduction("Add", "Sqrt").is_err());
    }
}
