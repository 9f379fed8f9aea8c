//! The update rules of TensorFlow's optimizers, as its `ResourceApply*` kernels compute
//! them (`training_ops.cc`): a variable's new value, and its slots' (Momentum's `accum`,
//! Adam's `m` and `v`, ...), from its gradient and the hyperparameters. Each rule is a few
//! elementwise ops, so it runs on every device; the graph's `ResourceApply*` ops and eager
//! training both use these.

use crate::error::{Error, Result};
use crate::ops::UnaryOp;
use crate::tensor::Tensor;

/// What one input of a `ResourceApply*` op is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    /// The variable being trained (a resource handle).
    Var,
    /// A slot variable of the optimizer (a resource handle), by TensorFlow's input name.
    Slot(&'static str),
    /// A scalar hyperparameter, by TensorFlow's input name.
    Scalar(&'static str),
    /// The gradient.
    Grad,
}

/// One of TensorFlow's update rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// `var -= alpha * delta` (`ResourceApplyGradientDescent`).
    GradientDescent,
    /// `accum = accum * momentum + grad; var -= lr * accum`, or with Nesterov
    /// `var -= grad * lr + accum * momentum * lr` (`ResourceApplyMomentum`).
    Momentum {
        /// `use_nesterov`.
        nesterov: bool,
    },
    /// Keras's form: `accum = accum * momentum - lr * grad; var += accum`, or with Nesterov
    /// `var += accum * momentum - lr * grad` (`ResourceApplyKerasMomentum`).
    KerasMomentum {
        /// `use_nesterov`.
        nesterov: bool,
    },
    /// Adam (`ResourceApplyAdam`), with `beta1_power` and `beta2_power` the betas to the
    /// step's power.
    Adam {
        /// `use_nesterov`.
        nesterov: bool,
    },
    /// `accum += grad²; var -= lr * grad / sqrt(accum)` (`ResourceApplyAdagrad`).
    Adagrad {
        /// `update_slots`: whether `accum` is updated.
        update_slots: bool,
    },
    /// `ResourceApplyAdagradV2`: Adagrad with `epsilon` added to `sqrt(accum)`.
    AdagradV2 {
        /// `update_slots`: whether `accum` is updated.
        update_slots: bool,
    },
    /// `ms += (grad² - ms) * (1 - rho); mom = mom * momentum + lr * grad / sqrt(ms +
    /// epsilon); var -= mom` (`ResourceApplyRMSProp`).
    RmsProp,
}

impl Rule {
    /// The op's inputs, in TensorFlow's order.
    pub fn operands(self) -> &'static [Operand] {
        use Operand::*;
        match self {
            Rule::GradientDescent => &[Var, Scalar("alpha"), Grad],
            Rule::Momentum { .. } | Rule::KerasMomentum { .. } => {
                &[Var, Slot("accum"), Scalar("lr"), Grad, Scalar("momentum")]
            }
            Rule::Adam { .. } => &[
                Var,
                Slot("m"),
                Slot("v"),
                Scalar("beta1_power"),
                Scalar("beta2_power"),
                Scalar("lr"),
                Scalar("beta1"),
                Scalar("beta2"),
                Scalar("epsilon"),
                Grad,
            ],
            Rule::Adagrad { .. } => &[Var, Slot("accum"), Scalar("lr"), Grad],
            Rule::AdagradV2 { .. } => &[Var, Slot("accum"), Scalar("lr"), Scalar("epsilon"), Grad],
            Rule::RmsProp => &[
                Var,
                Slot("ms"),
                Slot("mom"),
                Scalar("lr"),
                Scalar("rho"),
                Scalar("momentum"),
                Scalar("epsilon"),
                Grad,
            ],
        }
    }

    /// The variable's and its slots' new values (slots in [`Rule::operands`] order) from
    /// their values, the scalars (in that order) and the gradient, with TensorFlow's checks:
    /// every slot and the gradient of the variable's shape, the hyperparameters scalars.
    pub fn apply(
        self,
        var: &Tensor,
        slots: &[Tensor],
        scalars: &[Tensor],
        grad: &Tensor,
    ) -> Result<(Tensor, Vec<Tensor>)> {
        let names = self.operands();
        let slot_names = names.iter().filter_map(|o| match o {
            Operand::Slot(name) => Some(*name),
            _ => None,
        });
        let scalar_names = names.iter().filter_map(|o| match o {
            Operand::Scalar(name) => Some(*name),
            _ => None,
        });
        if slots.len() != slot_names.clone().count()
            || scalars.len() != scalar_names.clone().count()
        {
            return Err(Error::invalid(format!(
                "{self:?} takes {} slots and {} scalars, got {} and {}",
                slot_names.count(),
                scalar_names.count(),
                slots.len(),
                scalars.len()
            )));
        }
        for (name, slot) in slot_names.zip(slots) {
            same_shape(var, name, slot)?;
        }
        same_shape(var, "grad", grad)?;
        for (name, scalar) in scalar_names.zip(scalars) {
            if scalar.rank() != 0 {
                return Err(Error::invalid(format!(
                    "{name} is not a scalar: {}",
                    scalar.shape()
                )));
            }
        }
        let one = || Tensor::full([0usize; 0], 1.0, var.dtype(), var.device());
        let (g, s) = (grad, scalars);
        Ok(match self {
            Rule::GradientDescent => (var.sub(&g.mul(&s[0])?)?, vec![]),
            Rule::Momentum { nesterov } => {
                let (lr, momentum) = (&s[0], &s[1]);
                let accum = slots[0].mul(momentum)?.add(g)?;
                let step = if nesterov {
                    g.mul(lr)?.add(&accum.mul(momentum)?.mul(lr)?)?
                } else {
                    accum.mul(lr)?
                };
                (var.sub(&step)?, vec![accum])
            }
            Rule::KerasMomentum { nesterov } => {
                let (lr, momentum) = (&s[0], &s[1]);
                let accum = slots[0].mul(momentum)?.sub(&g.mul(lr)?)?;
                let step = if nesterov {
                    accum.mul(momentum)?.sub(&g.mul(lr)?)?
                } else {
                    accum.clone()
                };
                (var.add(&step)?, vec![accum])
            }
            Rule::Adam { nesterov } => {
                let [beta1_power, beta2_power, lr, beta1, beta2, epsilon] =
                    [0, 1, 2, 3, 4, 5].map(|i| &s[i]);
                let one = one()?;
                let alpha = lr
                    .mul(&one.sub(beta2_power)?.unary(UnaryOp::Sqrt)?)?
                    .div(&one.sub(beta1_power)?)?;
                let (keep1, keep2) = (one.sub(beta1)?, one.sub(beta2)?);
                let m = slots[0].add(&g.sub(&slots[0])?.mul(&keep1)?)?;
                let v = slots[1].add(&g.mul(g)?.sub(&slots[1])?.mul(&keep2)?)?;
                let direction = if nesterov {
                    g.mul(&keep1)?.add(&beta1.mul(&m)?)?
                } else {
                    m.clone()
                };
                let step = direction
                    .mul(&alpha)?
                    .div(&v.unary(UnaryOp::Sqrt)?.add(epsilon)?)?;
                (var.sub(&step)?, vec![m, v])
            }
            Rule::Adagrad { update_slots } | Rule::AdagradV2 { update_slots } => {
                let accum = if update_slots {
                    slots[0].add(&g.mul(g)?)?
                } else {
                    slots[0].clone()
                };
                let step = match self {
                    Rule::AdagradV2 { .. } => g
                        .mul(&s[0])?
                        .div(&accum.unary(UnaryOp::Sqrt)?.add(&s[1])?)?,
                    _ => g.mul(&s[0])?.mul(&accum.unary(UnaryOp::Rsqrt)?)?,
                };
                (var.sub(&step)?, vec![accum])
            }
            Rule::RmsProp => {
                let [lr, rho, momentum, epsilon] = [0, 1, 2, 3].map(|i| &s[i]);
                let ms = slots[0].add(&g.mul(g)?.sub(&slots[0])?.mul(&one()?.sub(rho)?)?)?;
                let mom = slots[1]
                    .mul(momentum)?
                    .add(&g.mul(lr)?.div(&ms.add(epsilon)?.unary(UnaryOp::Sqrt)?)?)?;
                (var.sub(&mom)?, vec![ms, mom])
            }
        })
    }
}

/// TensorFlow's check that a slot or the gradient has the variable's shape.
fn same_shape(var: &Tensor, name: &str, other: &Tensor) -> Result<()> {
    if var.shape() == other.shape() {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "var and {name} do not have the same shape{} {}",
        var.shape(),
        other.shape()
    )))
}
