//! Training a graph: [`Graph::minimize`] adds an [`Optimizer`]'s step as TensorFlow 1.x's
//! `tf.compat.v1.train` optimizers write it: the gradients ([`Graph::gradients`]), a slot
//! variable per weight where the rule keeps one (named `weight/Momentum`, `weight/Adam`,
//! ...), and one `ResourceApply*` op per weight, grouped under a `NoOp`. A weight read by
//! gathers (an embedding) gets a sparse update of the rows read, as TensorFlow's: its
//! slices summed by row (`Unique`, `UnsortedSegmentSum`) and `ResourceSparseApply*`
//! (`ResourceScatterAdd` for gradient descent; Adam's is its dense update, which TensorFlow
//! 1.x's sparse Adam equals). The step runs on every device, and TensorFlow runs the graph
//! as written.

use polytensor_core::{DataType, Error, PartialTensorShape, Result};

use crate::attr::AttrValue;
use crate::gradients::{Gradient, IndexedSlices};
use crate::graph::{Graph, Operation, Output};

/// An optimizer and its hyperparameters (TensorFlow 1.x's defaults where it has them).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Optimizer {
    /// `GradientDescentOptimizer`: `w -= learning_rate * g`.
    GradientDescent {
        /// The step size.
        learning_rate: f64,
    },
    /// `MomentumOptimizer`: an accumulator `a = momentum * a + g`, `w -= learning_rate * a`
    /// (Nesterov's form where `nesterov`).
    Momentum {
        /// The step size.
        learning_rate: f64,
        /// How much of the accumulator carries over.
        momentum: f64,
        /// Whether to use Nesterov momentum.
        nesterov: bool,
    },
    /// `AdamOptimizer` (TensorFlow's defaults: 0.001, 0.9, 0.999, 1e-8).
    Adam {
        /// The step size.
        learning_rate: f64,
        /// The decay of the first moment.
        beta1: f64,
        /// The decay of the second moment.
        beta2: f64,
        /// Added to the second moment's root.
        epsilon: f64,
    },
    /// `AdagradOptimizer` (accumulators start at `initial_accumulator`, 0.1 by default).
    Adagrad {
        /// The step size.
        learning_rate: f64,
        /// The accumulators' first value.
        initial_accumulator: f64,
    },
    /// `RMSPropOptimizer` (defaults: decay 0.9, momentum 0, epsilon 1e-10).
    RmsProp {
        /// The step size.
        learning_rate: f64,
        /// The decay of the mean square.
        decay: f64,
        /// The momentum of the update.
        momentum: f64,
        /// Added to the mean square.
        epsilon: f64,
    },
}

/// What [`Graph::minimize`] added.
#[derive(Clone, Debug)]
pub struct Training {
    /// Runs one step: every weight updated once (TensorFlow's `train_op`).
    pub step: Operation,
    /// Initialises the optimizer's slot variables (the weights are initialised by their
    /// own initializers).
    pub init: Operation,
    /// Each weight's gradient (`None` where the loss does not depend on it; slices for a
    /// table read by gathers).
    pub gradients: Vec<Option<Gradient>>,
}

impl Optimizer {
    /// TensorFlow's name of the optimizer: its name scope and slot suffix.
    fn name(&self) -> &'static str {
        match self {
            Optimizer::GradientDescent { .. } => "GradientDescent",
            Optimizer::Momentum { .. } => "Momentum",
            Optimizer::Adam { .. } => "Adam",
            Optimizer::Adagrad { .. } => "Adagrad",
            Optimizer::RmsProp { .. } => "RMSProp",
        }
    }

    /// The slot variables per weight: their suffixes and first values.
    fn slots(&self) -> Vec<(&'static str, f64)> {
        match *self {
            Optimizer::GradientDescent { .. } => vec![],
            Optimizer::Momentum { .. } => vec![("Momentum", 0.0)],
            Optimizer::Adam { .. } => vec![("Adam", 0.0), ("Adam_1", 0.0)],
            Optimizer::Adagrad {
                initial_accumulator,
                ..
            } => vec![("Adagrad", initial_accumulator)],
            Optimizer::RmsProp { .. } => vec![("RMSProp", 1.0), ("RMSProp_1", 0.0)],
        }
    }
}

impl Graph {
    /// `optimizer.minimize(loss, var_list=weights)`: the gradients of `loss` with respect to
    /// `weights` (resource variables' handles, `VarHandleOp` outputs) and one step of
    /// `optimizer` on them. Run [`Training::init`] once (after the weights' initializers),
    /// then [`Training::step`] per batch. `Err` where the loss depends on no weight.
    pub fn minimize(
        &mut self,
        loss: &Output,
        weights: &[Output],
        optimizer: &Optimizer,
    ) -> Result<Training> {
        for weight in weights {
            if weight.dtype() != DataType::Resource {
                return Err(Error::invalid(format!(
                    "minimize trains resource variables (VarHandleOp outputs), not {weight}"
                )));
            }
        }
        let gradients = self.indexed_gradients(std::slice::from_ref(loss), weights, None)?;
        if gradients.iter().all(Option::is_none) {
            let names: Vec<String> = weights.iter().map(Output::name).collect();
            return Err(Error::invalid(format!(
                "No gradients provided for any variable: [{}]",
                names.join(", ")
            )));
        }
        self.training(weights, gradients, optimizer, loss.dtype())
    }

    /// `optimizer.apply_gradients(zip(gradients, weights))`: one step of `optimizer` on
    /// `weights` (resource handles) by the given `gradients` (one per weight, of its dtype
    /// and shape): gradients computed elsewhere, such as fed placeholders holding the mean
    /// of every rank's gradients in data-parallel training.
    pub fn apply_gradients(
        &mut self,
        gradients: &[Output],
        weights: &[Output],
        optimizer: &Optimizer,
    ) -> Result<Training> {
        if gradients.len() != weights.len() || gradients.is_empty() {
            return Err(Error::invalid(format!(
                "apply_gradients takes one gradient per weight, got {} for {}",
                gradients.len(),
                weights.len()
            )));
        }
        let dtype = gradients[0].dtype();
        let gradients = gradients
            .iter()
            .map(|g| Some(Gradient::Dense(g.clone())))
            .collect();
        self.training(weights, gradients, optimizer, dtype)
    }

    /// The optimizer's step on `weights` by `gradients`, in its name scope.
    fn training(
        &mut self,
        weights: &[Output],
        gradients: Vec<Option<Gradient>>,
        optimizer: &Optimizer,
        dtype: DataType,
    ) -> Result<Training> {
        let (step, init) = self.name_scope(optimizer.name(), |g| {
            g.optimizer_step(weights, &gradients, optimizer, dtype)
        })?;
        Ok(Training {
            step,
            init,
            gradients,
        })
    }

    /// The step and the slots' initialiser, in the optimizer's name scope.
    fn optimizer_step(
        &mut self,
        weights: &[Output],
        gradients: &[Option<Gradient>],
        optimizer: &Optimizer,
        dtype: DataType,
    ) -> Result<(Operation, Operation)> {
        let mut initializers = Vec::new();
        let mut updates = Vec::new();
        let scalar = |g: &mut Graph, name: &str, value: f64| -> Result<Output> {
            g.name_scope(name, |g| g.constant_of(value, dtype))
        };
        // Adam's betas to the step's power: two scalar variables, advanced after the updates.
        let powers = match *optimizer {
            Optimizer::Adam { beta1, beta2, .. } => {
                let mut read = Vec::new();
                for (name, beta) in [("beta1_power", beta1), ("beta2_power", beta2)] {
                    let scalar_shape = PartialTensorShape::new(&[])?;
                    let handle = self.variable_handle(name, dtype, &scalar_shape)?;
                    let first = scalar(self, "initial_value", beta)?;
                    initializers.push(self.assign(&handle, &first)?);
                    let value = self.read(&handle, dtype)?;
                    read.push((handle, value, beta));
                }
                Some(read)
            }
            _ => None,
        };
        let hyper: Vec<Output> = match *optimizer {
            Optimizer::GradientDescent { learning_rate } => {
                vec![scalar(self, "learning_rate", learning_rate)?]
            }
            Optimizer::Momentum {
                learning_rate,
                momentum,
                ..
            } => vec![
                scalar(self, "learning_rate", learning_rate)?,
                scalar(self, "momentum", momentum)?,
            ],
            Optimizer::Adam {
                learning_rate,
                beta1,
                beta2,
                epsilon,
            } => {
                let powers = powers.as_ref().map(|p| [&p[0].1, &p[1].1]);
                let [p1, p2] = powers.ok_or_else(|| Error::invalid("Adam lacks its powers"))?;
                vec![
                    p1.clone(),
                    p2.clone(),
                    scalar(self, "learning_rate", learning_rate)?,
                    scalar(self, "beta1", beta1)?,
                    scalar(self, "beta2", beta2)?,
                    scalar(self, "epsilon", epsilon)?,
                ]
            }
            Optimizer::Adagrad { learning_rate, .. } => {
                vec![scalar(self, "learning_rate", learning_rate)?]
            }
            Optimizer::RmsProp {
                learning_rate,
                decay,
                momentum,
                epsilon,
            } => vec![
                scalar(self, "learning_rate", learning_rate)?,
                scalar(self, "decay", decay)?,
                scalar(self, "momentum", momentum)?,
                scalar(self, "epsilon", epsilon)?,
            ],
        };
        for (weight, gradient) in weights.iter().zip(gradients) {
            let Some(gradient) = gradient else {
                continue;
            };
            let weight_name = weight.op().name().to_string();
            let grad_dtype = match gradient {
                Gradient::Dense(dense) => dense.dtype(),
                Gradient::Slices(slices) => slices.values.dtype(),
            };
            let mut slots = Vec::new();
            for (suffix, first) in optimizer.slots() {
                // The slot starts as the weight's shape filled with its first value.
                let value = self.read(weight, grad_dtype)?;
                let slot = self.variable_handle(
                    &format!("{weight_name}/{suffix}"),
                    grad_dtype,
                    value.shape(),
                )?;
                let shape = self.shape_of(&value)?;
                let fill = scalar(self, "slot_value", first)?;
                let filled = self.op("Fill").input(&shape).input(&fill).build_output()?;
                initializers.push(self.assign(&slot, &filled)?);
                slots.push(slot);
            }
            let update = self.name_scope(&format!("update_{weight_name}"), |g| {
                g.apply_update(optimizer, weight, &slots, &hyper, gradient)
            })?;
            updates.push(update);
        }
        if let Some(powers) = powers {
            let mut advanced = Vec::new();
            for (handle, value, beta) in powers {
                let beta = scalar(self, "beta", beta)?;
                let next = self.op("Mul").input(&value).input(&beta).build_output()?;
                let mut assign = self
                    .op("AssignVariableOp")
                    .input(&handle)
                    .input(&next)
                    .attr("dtype", dtype);
                for update in &updates {
                    assign = assign.control_input(update);
                }
                advanced.push(assign.build()?);
            }
            updates.extend(advanced);
        }
        let step = self.grouped("update", &updates)?;
        let init = self.grouped("init", &initializers)?;
        Ok((step, init))
    }

    /// The update op of one weight: `ResourceApply*`, or for slices the sparse form.
    fn apply_update(
        &mut self,
        optimizer: &Optimizer,
        weight: &Output,
        slots: &[Output],
        hyper: &[Output],
        gradient: &Gradient,
    ) -> Result<Operation> {
        let gradient = match gradient {
            Gradient::Dense(dense) => dense,
            Gradient::Slices(slices) => match optimizer {
                Optimizer::Adam { .. } => &self.densify(gradient)?,
                _ => return self.apply_sparse_update(optimizer, weight, slots, hyper, slices),
            },
        };
        self.apply_dense_update(optimizer, weight, slots, hyper, gradient)
    }

    /// The `ResourceSparseApply*` op of one weight (`ResourceScatterAdd` of `-lr * values`
    /// for gradient descent), its slices first summed by row but for gradient descent.
    fn apply_sparse_update(
        &mut self,
        optimizer: &Optimizer,
        weight: &Output,
        slots: &[Output],
        hyper: &[Output],
        slices: &IndexedSlices,
    ) -> Result<Operation> {
        if let Optimizer::GradientDescent { .. } = optimizer {
            let negated = self.unary("Neg", &slices.values)?;
            let step = self.apply("Mul", &[&negated, &hyper[0]], Vec::new())?;
            return self
                .op("ResourceScatterAdd")
                .input(weight)
                .input(&slices.indices)
                .input(&step)
                .attr("dtype", step.dtype())
                .build();
        }
        let slices = self.deduplicated(slices)?;
        let (values, indices) = (&slices.values, &slices.indices);
        let (op_type, inputs, attrs): (&str, Vec<&Output>, Vec<(&str, AttrValue)>) =
            match *optimizer {
                Optimizer::Momentum { nesterov, .. } => (
                    "ResourceSparseApplyMomentum",
                    vec![weight, &slots[0], &hyper[0], values, indices, &hyper[1]],
                    vec![("use_nesterov", nesterov.into())],
                ),
                Optimizer::Adagrad { .. } => (
                    "ResourceSparseApplyAdagrad",
                    vec![weight, &slots[0], &hyper[0], values, indices],
                    vec![("update_slots", true.into())],
                ),
                Optimizer::RmsProp { .. } => {
                    let mut inputs = vec![weight, &slots[0], &slots[1]];
                    inputs.extend(hyper);
                    inputs.extend([values, indices]);
                    ("ResourceSparseApplyRMSProp", inputs, vec![])
                }
                Optimizer::GradientDescent { .. } | Optimizer::Adam { .. } => {
                    return Err(Error::invalid(format!(
                        "{} has no sparse update op",
                        optimizer.name()
                    )))
                }
            };
        self.update_op(op_type, &inputs, attrs)
    }

    /// The `ResourceApply*` op of one weight.
    fn apply_dense_update(
        &mut self,
        optimizer: &Optimizer,
        weight: &Output,
        slots: &[Output],
        hyper: &[Output],
        gradient: &Output,
    ) -> Result<Operation> {
        let (op_type, inputs, attrs): (&str, Vec<&Output>, Vec<(&str, AttrValue)>) =
            match *optimizer {
                Optimizer::GradientDescent { .. } => (
                    "ResourceApplyGradientDescent",
                    vec![weight, &hyper[0], gradient],
                    vec![],
                ),
                Optimizer::Momentum { nesterov, .. } => (
                    "ResourceApplyMomentum",
                    vec![weight, &slots[0], &hyper[0], gradient, &hyper[1]],
                    vec![("use_nesterov", nesterov.into())],
                ),
                Optimizer::Adam { .. } => {
                    let mut inputs = vec![weight, &slots[0], &slots[1]];
                    inputs.extend(hyper);
                    inputs.push(gradient);
                    (
                        "ResourceApplyAdam",
                        inputs,
                        vec![("use_nesterov", false.into())],
                    )
                }
                Optimizer::Adagrad { .. } => (
                    "ResourceApplyAdagrad",
                    vec![weight, &slots[0], &hyper[0], gradient],
                    vec![("update_slots", true.into())],
                ),
                Optimizer::RmsProp { .. } => {
                    let mut inputs = vec![weight, &slots[0], &slots[1]];
                    inputs.extend(hyper);
                    inputs.push(gradient);
                    ("ResourceApplyRMSProp", inputs, vec![])
                }
            };
        self.update_op(op_type, &inputs, attrs)
    }

    /// An optimizer op of `op_type` on `inputs` with `attrs` (and `use_locking` false).
    fn update_op(
        &mut self,
        op_type: &str,
        inputs: &[&Output],
        attrs: Vec<(&str, AttrValue)>,
    ) -> Result<Operation> {
        let mut builder = self.op(op_type).attr("use_locking", false);
        for input in inputs {
            builder = builder.input(input);
        }
        for (name, value) in attrs {
            builder = builder.attr(name, value);
        }
        builder.build()
    }

    /// A `VarHandleOp` named `name` (its `shared_name` the same).
    fn variable_handle(
        &mut self,
        name: &str,
        dtype: DataType,
        shape: &PartialTensorShape,
    ) -> Result<Output> {
        let unique = self.unique_name(name, false);
        self.op("VarHandleOp")
            .name(name)
            .attr("dtype", dtype)
            .attr("shape", shape)
            .attr("shared_name", unique.as_str())
            .attr("container", "")
            .build_output()
    }

    /// `AssignVariableOp(handle, value)`.
    fn assign(&mut self, handle: &Output, value: &Output) -> Result<Operation> {
        self.op("AssignVariableOp")
            .input(handle)
            .input(value)
            .attr("dtype", value.dtype())
            .build()
    }

    /// `ReadVariableOp(handle)`.
    fn read(&mut self, handle: &Output, dtype: DataType) -> Result<Output> {
        self.op("ReadVariableOp")
            .input(handle)
            .attr("dtype", dtype)
            .build_output()
    }

    /// A `NoOp` named `name` that runs after `ops`.
    fn grouped(&mut self, name: &str, ops: &[Operation]) -> Result<Operation> {
        let mut builder = self.op("NoOp").name(name);
        for op in ops {
            builder = builder.control_input(op);
        }
        builder.build()
    }
}
