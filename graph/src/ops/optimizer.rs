//! TensorFlow's optimizers as its graphs hold them: `ResourceApplyGradientDescent`,
//! `ResourceApplyMomentum`, `ResourceApplyKerasMomentum`, `ResourceApplyAdam`,
//! `ResourceApplyAdagrad`, `ResourceApplyAdagradV2` and `ResourceApplyRMSProp`, and the
//! sparse forms TensorFlow has (`ResourceSparseApplyMomentum`, `...KerasMomentum`,
//! `...Adagrad`, `...AdagradV2`, `...RMSProp`: some rows by their gradients), each updating
//! a resource variable and its slot variables in place by [`polytensor_core::train::Rule`],
//! on the device the op is placed on.

use std::borrow::Cow;

use smallvec::SmallVec;

use polytensor_core::train::{Operand, Rule};
use polytensor_core::{DataType, Result, Tensor};

use super::kernels::{Outputs, RunCtx};
use super::{InferCtx, Source};
use crate::graph::Typed;

/// An optimizer op: its rule, dense (`ResourceApply*`) or sparse (`ResourceSparseApply*`,
/// the gradient of some rows, named by an indices input).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Update {
    pub(crate) rule: Rule,
    pub(crate) sparse: bool,
}

impl Update {
    const fn dense(rule: Rule) -> Self {
        Update {
            rule,
            sparse: false,
        }
    }

    const fn sparse(rule: Rule) -> Self {
        Update { rule, sparse: true }
    }

    /// The op's inputs, in TensorFlow's order.
    fn operands(self) -> Cow<'static, [Operand]> {
        if self.sparse {
            Cow::Owned(self.rule.sparse_operands().unwrap_or_default())
        } else {
            Cow::Borrowed(self.rule.operands())
        }
    }
}

/// Optimizer op types by TensorFlow's name (the attributes pick the variant at run time).
pub(crate) const OPS: &[(&str, Update)] = &[
    (
        "ResourceApplyGradientDescent",
        Update::dense(Rule::GradientDescent),
    ),
    (
        "ResourceApplyMomentum",
        Update::dense(Rule::Momentum { nesterov: false }),
    ),
    (
        "ResourceApplyKerasMomentum",
        Update::dense(Rule::KerasMomentum { nesterov: false }),
    ),
    (
        "ResourceApplyAdam",
        Update::dense(Rule::Adam { nesterov: false }),
    ),
    (
        "ResourceApplyAdagrad",
        Update::dense(Rule::Adagrad { update_slots: true }),
    ),
    (
        "ResourceApplyAdagradV2",
        Update::dense(Rule::AdagradV2 { update_slots: true }),
    ),
    ("ResourceApplyRMSProp", Update::dense(Rule::RmsProp)),
    (
        "ResourceSparseApplyMomentum",
        Update::sparse(Rule::Momentum { nesterov: false }),
    ),
    (
        "ResourceSparseApplyKerasMomentum",
        Update::sparse(Rule::KerasMomentum { nesterov: false }),
    ),
    (
        "ResourceSparseApplyAdagrad",
        Update::sparse(Rule::Adagrad { update_slots: true }),
    ),
    (
        "ResourceSparseApplyAdagradV2",
        Update::sparse(Rule::AdagradV2 { update_slots: true }),
    ),
    ("ResourceSparseApplyRMSProp", Update::sparse(Rule::RmsProp)),
];

/// The type attributes: `T` of each tensor input (the scalars and the gradient; the
/// variable and slots are handles), `Tindices` of a sparse update's indices.
pub(crate) fn typed(update: Update) -> Vec<(&'static str, Source)> {
    update
        .operands()
        .iter()
        .enumerate()
        .filter_map(|(i, operand)| match operand {
            Operand::Scalar(_) | Operand::Grad => Some(("T", Source::Input(i))),
            Operand::Indices => Some(("Tindices", Source::Input(i))),
            Operand::Var | Operand::Slot(_) => None,
        })
        .collect()
}

/// The rule with the node's attributes (`use_nesterov`, `update_slots`).
fn configured(rule: Rule, cx: &RunCtx<'_, '_>) -> Result<Rule> {
    let attrs = cx.attrs();
    Ok(match rule {
        Rule::Momentum { .. } => Rule::Momentum {
            nesterov: attrs.bool_or("use_nesterov", false)?,
        },
        Rule::KerasMomentum { .. } => Rule::KerasMomentum {
            nesterov: attrs.bool_or("use_nesterov", false)?,
        },
        Rule::Adam { .. } => Rule::Adam {
            nesterov: attrs.bool_or("use_nesterov", false)?,
        },
        Rule::Adagrad { .. } => Rule::Adagrad {
            update_slots: attrs.bool_or("update_slots", true)?,
        },
        Rule::AdagradV2 { .. } => Rule::AdagradV2 {
            update_slots: attrs.bool_or("update_slots", true)?,
        },
        other => other,
    })
}

/// The static outputs (none), checking the inputs: handles where the variables go, and
/// scalars and the gradient of one float dtype.
pub(crate) fn infer(update: Update, cx: &InferCtx<'_>) -> Result<Vec<Typed>> {
    let operands = update.operands();
    let inputs = cx.exactly(operands.len())?;
    let dtype = cx.attrs().dtype_or("T", DataType::Float)?;
    for (i, (operand, (input, shape))) in operands.iter().zip(inputs).enumerate() {
        match operand {
            Operand::Var | Operand::Slot(_) => {
                if *input != DataType::Resource {
                    return Err(cx.type_mismatch(i, DataType::Resource));
                }
            }
            Operand::Scalar(name) => {
                if *input != dtype {
                    return Err(cx.type_mismatch(i, dtype));
                }
                if let Some(rank) = shape.rank().filter(|&r| r != 0) {
                    return Err(cx.error(format!("{name} is not a scalar: rank {rank}")));
                }
            }
            Operand::Grad => {
                if *input != dtype {
                    return Err(cx.type_mismatch(i, dtype));
                }
            }
            Operand::Indices => {
                if !matches!(input, DataType::Int32 | DataType::Int64) {
                    return Err(cx.type_mismatch(i, DataType::Int32));
                }
            }
        }
    }
    if !dtype.is_float() {
        return Err(cx.error(format!(
            "{} takes half, bfloat16, float and double, not {dtype}",
            cx.op_type
        )));
    }
    Ok(Vec::new())
}

/// Run one update: read the variable and its slots, apply the rule, write them back.
pub(crate) fn run(update: Update, cx: &mut RunCtx<'_, '_>) -> Result<Outputs> {
    let rule = configured(update.rule, cx)?;
    let operands = update.operands();
    let (mut var, mut slots, mut scalars, mut grad, mut indices) =
        (None, SmallVec::<[_; 2]>::new(), Vec::new(), None, None);
    for (i, operand) in operands.iter().enumerate() {
        match operand {
            Operand::Var => {
                let name = cx.variable(i)?;
                var = Some((cx.read_variable(&name)?, name));
            }
            Operand::Slot(_) => {
                let name = cx.variable(i)?;
                slots.push((cx.read_variable(&name)?, name));
            }
            Operand::Scalar(_) => scalars.push(cx.tensor(i)?.into_owned()),
            Operand::Grad => grad = Some(cx.tensor(i)?.into_owned()),
            Operand::Indices => indices = Some(cx.tensor(i)?.into_owned()),
        }
    }
    let (Some((value, name)), Some(grad)) = (var, grad) else {
        return Err(polytensor_core::Error::invalid(format!(
            "{} '{}' lacks its variable or gradient",
            cx.node.op_type, cx.node.name
        )));
    };
    let Some(indices) = indices else {
        let values: Vec<Tensor> = slots.iter().map(|(t, _)| t.clone()).collect();
        let (value, values) = rule.apply(&value, &values, &scalars, &grad)?;
        cx.variables.insert(name, value);
        for ((_, name), value) in slots.into_iter().zip(values) {
            cx.variables.insert(name, value);
        }
        return Ok(Outputs::new());
    };
    // A sparse update writes the rows into the variables' own buffers: the session lets
    // go of them for the update (so nothing else holds them) and takes them back after,
    // updated or, on error, as the update left them.
    let mut value = value;
    cx.variables.remove(&name);
    let (mut values, slot_names): (Vec<Tensor>, Vec<_>) = slots.into_iter().unzip();
    for slot_name in &slot_names {
        cx.variables.remove(slot_name);
    }
    let result = rule.apply_rows(&mut value, &mut values, &scalars, &grad, &indices);
    cx.variables.insert(name, value);
    for (slot_name, slot) in slot_names.into_iter().zip(values) {
        cx.variables.insert(slot_name, slot);
    }
    result.map(|()| Outputs::new())
}
