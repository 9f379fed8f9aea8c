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
    /// The gradient (of the rows `Indices` names, in a sparse update).
    Grad,
    /// The rows of the variable a sparse update's gradient is of (`ResourceSparseApply*`).
    Indices,
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

    /// The inputs of the rule's sparse op (`ResourceSparseApply*`: [`Rule::operands`] with
    /// the indices after the gradient), where TensorFlow has one: not for gradient descent
    /// (`ResourceScatterAdd` does it) or Adam.
    pub fn sparse_operands(self) -> Option<Vec<Operand>> {
        if matches!(self, Rule::GradientDescent | Rule::Adam { .. }) {
            return None;
        }
        let mut operands = self.operands().to_vec();
        let after_grad = operands.iter().position(|o| *o == Operand::Grad)? + 1;
        operands.insert(after_grad, Operand::Indices);
        Some(operands)
    }

    /// The sparse update (`ResourceSparseApply*`), in place: row `indices[i]` of the
    /// variable and its slots updated by the rule with row `i` of `grad`, the others
    /// unchanged; a row named twice is updated twice, in order, as TensorFlow's kernels
    /// loop. `grad` is `[indices.len()] + var.dims[1..]`; every index within the
    /// variable's rows. The rows are written into the tensors' own buffers where nothing
    /// else holds them ([`Tensor::assign_rows`]): pass tensors the caller owns alone for
    /// an update whose cost is the rows'. On error the tensors are whole (the rows of the
    /// rounds done updated).
    pub fn apply_rows(
        self,
        var: &mut Tensor,
        slots: &mut [Tensor],
        scalars: &[Tensor],
        grad: &Tensor,
        indices: &Tensor,
    ) -> Result<()> {
        if var.rank() == 0 {
            return Err(Error::invalid("var must be at least 1 dimensional"));
        }
        if indices.rank() != 1 {
            return Err(Error::invalid(format!(
                "indices must be one-dimensional: {}",
                indices.shape()
            )));
        }
        for slot in slots.iter() {
            same_shape(var, "accum", slot)?;
        }
        let ids = indices.index_values()?;
        if grad.rank() == 0 || grad.dims()[0] != ids.len() || grad.dims()[1..] != var.dims()[1..] {
            return Err(Error::invalid(format!(
                "grad must be the size of indices ({}) in its first dimension and match var \
                 {} in the others: {}",
                ids.len(),
                var.shape(),
                grad.shape()
            )));
        }
        let rows = var.dims()[0];
        if rows > i32::MAX as usize || ids.len() > i32::MAX as usize {
            return Err(Error::invalid(
                "a sparse update of more than 2^31 - 1 rows or indices is beyond the int32 \
                 row numbers",
            ));
        }
        if let Some((at, &id)) = ids
            .iter()
            .enumerate()
            .find(|&(_, &id)| id < 0 || id as usize >= rows)
        {
            return Err(Error::invalid(format!(
                "Index {id} at offset {at} in indices is out of range [0, {rows})"
            )));
        }
        // Round r updates the r-th mention of each row: rows distinct within a round.
        let mut mentions = std::collections::HashMap::new();
        let mut rounds: Vec<(Vec<i32>, Vec<i32>)> = Vec::new();
        for (position, &id) in ids.iter().enumerate() {
            let round: &mut usize = mentions.entry(id).or_default();
            if rounds.len() == *round {
                rounds.push((Vec::new(), Vec::new()));
            }
            rounds[*round].0.push(position as i32);
            rounds[*round].1.push(id as i32);
            *round += 1;
        }
        let device = var.device().clone();
        let device = &device;
        let once = rounds.len() == 1;
        for (positions, ids) in rounds {
            // One round takes every row of the gradient, in order.
            let grad = if once {
                grad.clone()
            } else {
                grad.gather(&Tensor::from_vec(positions, device)?, 0, 0)?
            };
            let ids = Tensor::from_vec(ids, device)?;
            let taken: Vec<Tensor> = slots
                .iter()
                .map(|s| s.gather(&ids, 0, 0))
                .collect::<Result<_>>()?;
            let (value, updated) = self.apply(&var.gather(&ids, 0, 0)?, &taken, scalars, &grad)?;
            var.assign_rows(&ids, &value)?;
            for (slot, value) in slots.iter_mut().zip(&updated) {
                slot.assign_rows(&ids, value)?;
            }
        }
        Ok(())
    }

    /// The variable's and its slots' new values (slots in [`Rule::operands`] order) from
    /// their values, the scalars (in that order) and the gradient, with TensorFlow's checks:
    /// every slot and the gradient of the variable's shape, the hyperparameters scalars.
    /// In one pass where the device has the kernel ([`crate::Device::apply_update`]), else
    /// as elementwise ops; both round as [`Rule::update`] on tensors.
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
        if let Some(fused) = self.fused(var, slots, scalars, grad)? {
            return Ok(fused);
        }
        let pick = |i: usize, all: &[Tensor]| all.get(i).unwrap_or(var).clone();
        let slots2 = [pick(0, slots), pick(1, slots)];
        let scalars6 = [0, 1, 2, 3, 4, 5].map(|i| pick(i, scalars));
        let (value, updated) = self.update(var, &slots2, &scalars6, grad)?;
        Ok((value, updated.into_iter().take(slots.len()).collect()))
    }

    /// The update in one pass on the device, where it has the kernel and every tensor is
    /// contiguous, of one dtype and on the variable's device.
    fn fused(
        self,
        var: &Tensor,
        slots: &[Tensor],
        scalars: &[Tensor],
        grad: &Tensor,
    ) -> Result<Option<(Tensor, Vec<Tensor>)>> {
        let device = var.device();
        let fits = |t: &Tensor| {
            t.dtype() == var.dtype()
                && t.is_contiguous()
                && crate::device::same_device(t.device(), device)
        };
        if !slots.iter().chain(scalars).chain([grad, var]).all(fits) {
            return Ok(None);
        }
        let views: Vec<_> = slots.iter().map(Tensor::view).collect();
        let numbers: Vec<_> = scalars.iter().map(Tensor::view).collect();
        let made =
            Tensor::produce_many(slots.len() + 1, var.shape(), var.dtype(), device, |outs| {
                device.apply_update(self, &var.view(), &views, &numbers, &grad.view(), outs)
            })?;
        Ok(made.map(|mut outs| {
            let value = outs.remove(0);
            (value, outs)
        }))
    }

    /// The rule itself, written once over [`Arithmetic`]: whole tensors (the elementwise
    /// ops a device runs) or single numbers (a device's fused kernel, element by element).
    /// `slots` and `scalars` hold the rule's in [`Rule::operands`] order, padded with any
    /// value; the new slots come back in that order, padded likewise.
    pub fn update<A: Arithmetic>(
        self,
        var: &A,
        slots: &[A; 2],
        scalars: &[A; 6],
        g: &A,
    ) -> Result<(A, [A; 2])> {
        self.step(&self.prepare(var, scalars)?, var, slots, g)
    }

    /// What [`Rule::update`] computes from the hyperparameters alone (Adam's step size
    /// `lr * sqrt(1 - beta2^t) / (1 - beta1^t)`, the decays' complements), once per update:
    /// what [`Rule::step`] takes. `like` gives the numbers' type (its value is not read).
    pub fn prepare<A: Arithmetic>(self, like: &A, scalars: &[A; 6]) -> Result<[A; 6]> {
        let s = scalars;
        let one = || like.number(1.0);
        Ok(match self {
            Rule::Adam { .. } => {
                let [beta1_power, beta2_power, lr, beta1, beta2, epsilon] = s;
                let one = one()?;
                let alpha = lr
                    .mul(&one.sub(beta2_power)?.sqrt()?)?
                    .div(&one.sub(beta1_power)?)?;
                let (keep1, keep2) = (one.sub(beta1)?, one.sub(beta2)?);
                [
                    alpha,
                    keep1,
                    keep2,
                    beta1.clone(),
                    epsilon.clone(),
                    epsilon.clone(),
                ]
            }
            Rule::RmsProp => {
                let [lr, rho, momentum, epsilon, _, _] = s;
                let keep = one()?.sub(rho)?;
                [
                    lr.clone(),
                    keep,
                    momentum.clone(),
                    epsilon.clone(),
                    lr.clone(),
                    lr.clone(),
                ]
            }
            _ => s.clone(),
        })
    }

    /// One update from [`Rule::prepare`]'s numbers `p`: the variable's and slots' new
    /// values (as [`Rule::update`]).
    #[inline(always)]
    pub fn step<A: Arithmetic>(
        self,
        p: &[A; 6],
        var: &A,
        slots: &[A; 2],
        g: &A,
    ) -> Result<(A, [A; 2])> {
        let unused = || slots[1].clone();
        Ok(match self {
            Rule::GradientDescent => (var.sub(&g.mul(&p[0])?)?, [unused(), unused()]),
            Rule::Momentum { nesterov } => {
                let (lr, momentum) = (&p[0], &p[1]);
                let accum = slots[0].mul(momentum)?.add(g)?;
                let step = if nesterov {
                    g.mul(lr)?.add(&accum.mul(momentum)?.mul(lr)?)?
                } else {
                    accum.mul(lr)?
                };
                (var.sub(&step)?, [accum, unused()])
            }
            Rule::KerasMomentum { nesterov } => {
                let (lr, momentum) = (&p[0], &p[1]);
                let accum = slots[0].mul(momentum)?.sub(&g.mul(lr)?)?;
                let step = if nesterov {
                    accum.mul(momentum)?.sub(&g.mul(lr)?)?
                } else {
                    accum.clone()
                };
                (var.add(&step)?, [accum, unused()])
            }
            Rule::Adam { nesterov } => {
                let [alpha, keep1, keep2, beta1, epsilon, _] = p;
                let m = slots[0].add(&g.sub(&slots[0])?.mul(keep1)?)?;
                let v = slots[1].add(&g.mul(g)?.sub(&slots[1])?.mul(keep2)?)?;
                let direction = if nesterov {
                    g.mul(keep1)?.add(&beta1.mul(&m)?)?
                } else {
                    m.clone()
                };
                let step = direction.mul(alpha)?.div(&v.sqrt()?.add(epsilon)?)?;
                (var.sub(&step)?, [m, v])
            }
            Rule::Adagrad { update_slots } | Rule::AdagradV2 { update_slots } => {
                let accum = if update_slots {
                    slots[0].add(&g.mul(g)?)?
                } else {
                    slots[0].clone()
                };
                let step = match self {
                    Rule::AdagradV2 { .. } => g.mul(&p[0])?.div(&accum.sqrt()?.add(&p[1])?)?,
                    _ => g.mul(&p[0])?.mul(&accum.rsqrt()?)?,
                };
                (var.sub(&step)?, [accum, unused()])
            }
            Rule::RmsProp => {
                let [lr, keep, momentum, epsilon, _, _] = p;
                let ms = slots[0].add(&g.mul(g)?.sub(&slots[0])?.mul(keep)?)?;
                let mom = slots[1]
                    .mul(momentum)?
                    .add(&g.mul(lr)?.div(&ms.add(epsilon)?.sqrt()?)?)?;
                (var.sub(&mom)?, [ms, mom])
            }
        })
    }
}

/// The arithmetic [`Rule::update`] is written in: tensors, elementwise on their device, or
/// numbers, one element of a fused kernel (`f32`, `f64`; rounded as the tensors' ops).
pub trait Arithmetic: Clone + Sized {
    /// `self + other`.
    fn add(&self, other: &Self) -> Result<Self>;
    /// `self - other`.
    fn sub(&self, other: &Self) -> Result<Self>;
    /// `self * other`.
    fn mul(&self, other: &Self) -> Result<Self>;
    /// `self / other`.
    fn div(&self, other: &Self) -> Result<Self>;
    /// The square root.
    fn sqrt(&self) -> Result<Self>;
    /// `1 / sqrt(self)`.
    fn rsqrt(&self) -> Result<Self>;
    /// `value` as one of these (a scalar of the tensor's dtype on its device).
    fn number(&self, value: f64) -> Result<Self>;
}

impl Arithmetic for Tensor {
    fn add(&self, other: &Self) -> Result<Self> {
        Tensor::add(self, other)
    }
    fn sub(&self, other: &Self) -> Result<Self> {
        Tensor::sub(self, other)
    }
    fn mul(&self, other: &Self) -> Result<Self> {
        Tensor::mul(self, other)
    }
    fn div(&self, other: &Self) -> Result<Self> {
        Tensor::div(self, other)
    }
    fn sqrt(&self) -> Result<Self> {
        self.unary(UnaryOp::Sqrt)
    }
    fn rsqrt(&self) -> Result<Self> {
        self.unary(UnaryOp::Rsqrt)
    }
    fn number(&self, value: f64) -> Result<Self> {
        Tensor::full([0usize; 0], value, self.dtype(), self.device())
    }
}

macro_rules! float_arithmetic {
    ($($t:ty),*) => {$(
        impl Arithmetic for $t {
            #[inline(always)]
            fn add(&self, other: &Self) -> Result<Self> {
                Ok(self + other)
            }
            #[inline(always)]
            fn sub(&self, other: &Self) -> Result<Self> {
                Ok(self - other)
            }
            #[inline(always)]
            fn mul(&self, other: &Self) -> Result<Self> {
                Ok(self * other)
            }
            #[inline(always)]
            fn div(&self, other: &Self) -> Result<Self> {
                Ok(self / other)
            }
            #[inline(always)]
            fn sqrt(&self) -> Result<Self> {
                Ok(<$t>::sqrt(*self))
            }
            #[inline(always)]
            fn rsqrt(&self) -> Result<Self> {
                Ok(1.0 / <$t>::sqrt(*self))
            }
            #[inline(always)]
            fn number(&self, value: f64) -> Result<Self> {
                Ok(value as $t)
            }
        }
    )*};
}

float_arithmetic!(f32, f64);

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
