//! [`Graph::gradients`]: TensorFlow's `tf.gradients` (the C API's `TF_AddGradients`). It
//! adds to the graph, under the name scope `gradients`, the ops that compute the gradients
//! of the sum of `ys` with respect to each of `xs`, with TensorFlow's op types (`MatMul`,
//! `ReluGrad`, `Conv2DBackpropFilter`, ...): TensorFlow runs the graphs it writes, and
//! sessions run them on every device.
//!
//! As `tf.gradients`: the ops between `xs` and `ys` are walked from `ys` back, each once
//! every consumer between them has given its gradient; several gradients of one tensor add
//! up (`AddN`); each op's gradient comes from its op type's registered function ([`math`],
//! [`nn`], [`array`]). A resource variable's handle (a `VarHandleOp`'s output) may be one
//! of `xs`: its gradient is the sum of those of its reads. A gather's gradient is the
//! slices of the rows it read ([`sparse`]); [`Graph::indexed_gradients`] keeps them so.
//! Gradients pass through TensorFlow 2's functional control flow (`If`, `While`,
//! `PartitionedCall`) as calls of functions added to the graph's library ([`flow`]).

mod array;
mod flow;
mod list;
mod math;
mod nn;
mod sparse;

pub use sparse::{Gradient, IndexedSlices};

use std::collections::{BTreeMap, HashMap, VecDeque};

use polytensor_core::{DataType, Error, Result};

use crate::attr::AttrValue;
use crate::graph::{Graph, Operation, Output};
use crate::ops::Kind;

/// The forward op whose gradient a function builds: its inputs, outputs and attributes.
pub(crate) struct Forward {
    pub(crate) op: Operation,
    pub(crate) inputs: Vec<Output>,
    pub(crate) outputs: Vec<Output>,
    pub(crate) attrs: BTreeMap<String, AttrValue>,
    /// Which inputs lie between `xs` and `ys` (the others' gradients are dropped).
    pub(crate) wanted: Vec<bool>,
}

impl Forward {
    /// The forward's attributes `names` where it has them, to copy onto a gradient op.
    pub(crate) fn attrs_named(&self, names: &[&str]) -> Vec<(String, AttrValue)> {
        names
            .iter()
            .filter_map(|&n| self.attrs.get(n).map(|v| (n.to_string(), v.clone())))
            .collect()
    }

    /// Boolean attribute `name` (false where absent).
    pub(crate) fn flag(&self, name: &str) -> Result<bool> {
        crate::attr::Attrs {
            node: self.op.name(),
            attrs: &self.attrs,
        }
        .bool_or(name, false)
    }
}

/// A registered gradient: the gradients of the forward's inputs (`None` where none flows)
/// from those of its outputs (`dys`, one per output; `None` where none came back).
pub(crate) type GradFn = fn(&mut Graph, &Forward, &[Option<Output>]) -> Result<Vec<Option<Output>>>;

/// The gradient function of `op_type`: `Some(None)` for an op TensorFlow declares has no
/// gradient (`StopGradient`, shapes, comparisons); `None` for one it has no gradient for.
fn registered(op_type: &str) -> Option<Option<GradFn>> {
    math::registered(op_type)
        .or_else(|| nn::registered(op_type))
        .or_else(|| array::registered(op_type))
        .or_else(|| flow::registered(op_type))
        .or_else(|| list::registered(op_type))
}

impl Graph {
    /// `tf.gradients(ys, xs, grad_ys)`: the symbolic gradients of `sum(ys)` with respect to
    /// each of `xs`, added to this graph under the scope `gradients` with TensorFlow's op
    /// types. `grad_ys` (one per `ys`, of its dtype and shape) weighs each `y`; without them
    /// each `y` starts with ones. An `x` that `ys` do not depend on gets `None`.
    ///
    /// An op between `xs` and `ys` with no gradient is an error naming it, as TensorFlow's
    /// `LookupError`; so is TensorFlow 1.x control flow (`Switch`, `Merge`, `Enter`, ...)
    /// between them. Gradients pass through TensorFlow 2's `If`, `While` and
    /// `PartitionedCall` (and their twins): see the `flow` module.
    ///
    /// ```
    /// use polytensor_core::{DataType, PartialTensorShape, Tensor};
    /// use polytensor_graph::{Graph, Session, SessionOptions};
    /// let mut g = Graph::new();
    /// let x = g.placeholder(DataType::Float, &PartialTensorShape::new(&[Some(2)]).unwrap()).unwrap();
    /// let y = g.mul(&x, &x).unwrap();
    /// let dx = g.gradients(&[y], &[x.clone()], None).unwrap()[0].clone().unwrap();
    /// let cpu = polytensor_cpu::CpuDevice::shared();
    /// let session = Session::with_options(&g, SessionOptions::new(vec![cpu.clone()])).unwrap();
    /// let feed = Tensor::from_slice(&[3.0f32, -1.0], [2], &cpu).unwrap();
    /// let got = session.run(&[(&x, &feed)], &[&dx], &[]).unwrap();
    /// assert_eq!(got[0].to_vec::<f32>().unwrap(), [6.0, -2.0]);
    /// ```
    pub fn gradients(
        &mut self,
        ys: &[Output],
        xs: &[Output],
        grad_ys: Option<&[Output]>,
    ) -> Result<Vec<Option<Output>>> {
        let grads = self.indexed_gradients(ys, xs, grad_ys)?;
        self.name_scope("gradients", |g| {
            grads
                .iter()
                .map(|grad| grad.as_ref().map(|grad| g.densify(grad)).transpose())
                .collect()
        })
    }

    /// [`Graph::gradients`] as `tf.gradients` returns them: the gradient of a table read by
    /// gathers (an embedding) as the slices of the rows read ([`Gradient::Slices`],
    /// `tf.IndexedSlices`), every other one a tensor.
    pub fn indexed_gradients(
        &mut self,
        ys: &[Output],
        xs: &[Output],
        grad_ys: Option<&[Output]>,
    ) -> Result<Vec<Option<Gradient>>> {
        if let Some(grad_ys) = grad_ys {
            if grad_ys.len() != ys.len() {
                return Err(Error::invalid(format!(
                    "Passed {} grad_ys for {} ys",
                    grad_ys.len(),
                    ys.len()
                )));
            }
        }
        for t in ys.iter().chain(xs).chain(grad_ys.into_iter().flatten()) {
            self.node(t.op())?;
        }
        self.name_scope("gradients", |g| g.backward(ys, xs, grad_ys))
    }

    /// [`Graph::gradients`] inside its scope.
    fn backward(
        &mut self,
        ys: &[Output],
        xs: &[Output],
        grad_ys: Option<&[Output]>,
    ) -> Result<Vec<Option<Gradient>>> {
        let between = self.between(ys, xs)?;
        // How many gradients each op between still waits for: one per data edge to a
        // consumer between.
        let mut pending: HashMap<usize, usize> = HashMap::new();
        for &n in between.keys() {
            for &(input, _) in &self.nodes[n].inputs {
                if between.contains_key(&input) {
                    *pending.entry(input).or_default() += 1;
                }
            }
        }
        let mut grads: HashMap<(usize, usize), Vec<Gradient>> = HashMap::new();
        for (i, y) in ys.iter().enumerate() {
            if !between.contains_key(&y.op().id) {
                continue;
            }
            let seed = match grad_ys {
                Some(given) => given[i].clone(),
                None => self.name_scope(&format!("grad_ys_{i}"), |g| g.ones_like(y))?,
            };
            // A resource handle's gradient is its variable's dtype.
            if seed.dtype() != y.dtype() && y.dtype() != DataType::Resource {
                return Err(Error::invalid(format!(
                    "Gradient type {} generated for {} does not match the tensor's {}",
                    seed.dtype(),
                    y.name(),
                    y.dtype()
                )));
            }
            grads
                .entry((y.op().id, y.index()))
                .or_default()
                .push(Gradient::Dense(seed));
        }
        let mut ready: VecDeque<usize> = between
            .keys()
            .copied()
            .filter(|n| !pending.contains_key(n))
            .collect();
        while let Some(n) = ready.pop_front() {
            self.backward_through(n, &between, &mut grads)?;
            for &(input, _) in &self.nodes[n].inputs.clone() {
                if let Some(count) = pending.get_mut(&input) {
                    *count -= 1;
                    if *count == 0 {
                        ready.push_back(input);
                    }
                }
            }
        }
        xs.iter()
            .map(|x| {
                let parts = grads.remove(&(x.op().id, x.index())).unwrap_or_default();
                self.sum_of(parts)
            })
            .collect()
    }

    /// The ops on a path from an op of `xs` to an op of `ys` (both included), each with
    /// whether it is one of `xs`' ops; `Err` for 1.x control flow among them.
    fn between(&self, ys: &[Output], xs: &[Output]) -> Result<BTreeMap<usize, bool>> {
        let count = self.nodes.len();
        let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); count];
        for (n, node) in self.nodes.iter().enumerate() {
            for &(input, _) in &node.inputs {
                consumers[input].push(n);
            }
        }
        let mut from_xs = vec![false; count];
        let mut stack: Vec<usize> = xs.iter().map(|x| x.op().id).collect();
        while let Some(n) = stack.pop() {
            if !std::mem::replace(&mut from_xs[n], true) {
                stack.extend(&consumers[n]);
            }
        }
        let mut between = BTreeMap::new();
        let mut stack: Vec<usize> = ys.iter().map(|y| y.op().id).collect();
        while let Some(n) = stack.pop() {
            if from_xs[n] && !between.contains_key(&n) {
                between.insert(n, false);
                stack.extend(self.nodes[n].inputs.iter().map(|&(input, _)| input));
            }
        }
        for x in xs {
            if let Some(is_x) = between.get_mut(&x.op().id) {
                *is_x = true;
            }
        }
        if let Some(&n) = between
            .keys()
            .find(|&&n| matches!(self.nodes[n].kind, Kind::Flow(_)))
        {
            let node = &self.nodes[n];
            return Err(Error::invalid(format!(
                "gradients through TensorFlow 1.x control flow are not supported: '{}' ({}) lies \
                 between ys and xs; TensorFlow 2's While and If have them (freeze with \
                 lower_control_flow=False to keep them)",
                node.name, node.op_type
            )));
        }
        Ok(between)
    }

    /// Take the gradients of op `n`'s outputs back to its inputs between.
    fn backward_through(
        &mut self,
        n: usize,
        between: &BTreeMap<usize, bool>,
        grads: &mut HashMap<(usize, usize), Vec<Gradient>>,
    ) -> Result<()> {
        let node = &self.nodes[n];
        let wanted: Vec<bool> = node
            .inputs
            .iter()
            .map(|(input, _)| between.contains_key(input))
            .collect();
        let outputs = node.outputs.len();
        let mut dys = Vec::with_capacity(outputs);
        for i in 0..outputs {
            let parts = grads.remove(&(n, i)).unwrap_or_default();
            let dy = self.sum_of(parts)?;
            if between[&n] {
                // One of `xs`: its gradient is a result, kept summed.
                grads.insert((n, i), dy.iter().cloned().collect());
            }
            dys.push(dy);
        }
        if !wanted.contains(&true) || dys.iter().all(Option::is_none) {
            return Ok(());
        }
        let op = self.handle(n);
        let forward = Forward {
            inputs: self.inputs(&op)?,
            outputs: self.outputs(&op)?,
            attrs: self.nodes[n].attrs.clone(),
            op: op.clone(),
            wanted: wanted.clone(),
        };
        let input_grads = self.name_scope(&format!("{}_grad", op.name()), |g| {
            if let Some(sparse) = g.sparse_backward(&forward, &dys)? {
                return Ok(sparse);
            }
            let Some(function) = registered(op.op_type()) else {
                return Err(Error::invalid(format!(
                    "No gradient defined for operation '{}' (op type: {})",
                    op.name(),
                    op.op_type()
                )));
            };
            let Some(function) = function else {
                return Ok(Vec::new());
            };
            let dense = dys
                .iter()
                .map(|d| d.as_ref().map(|d| g.densify(d)).transpose())
                .collect::<Result<Vec<_>>>()?;
            Ok(function(g, &forward, &dense)?
                .into_iter()
                .map(|grad| grad.map(Gradient::Dense))
                .collect())
        })?;
        for ((input, grad), wanted) in forward.inputs.iter().zip(input_grads).zip(wanted) {
            let Some(grad) = grad.filter(|_| wanted) else {
                continue;
            };
            let values = match &grad {
                Gradient::Dense(dense) => dense,
                Gradient::Slices(slices) => &slices.values,
            };
            let want = match input.dtype() {
                DataType::Resource => values.dtype(),
                dtype => dtype,
            };
            if values.dtype() != want {
                return Err(Error::invalid(format!(
                    "the gradient of '{}' for its input {} is {}, not the input's {}",
                    op.name(),
                    input.name(),
                    values.dtype(),
                    want
                )));
            }
            grads
                .entry((input.op().id, input.index()))
                .or_default()
                .push(grad);
        }
        Ok(())
    }

    /// `Fill(Shape(x), 1)`: ones of `x`'s dtype and shape.
    pub(crate) fn ones_like(&mut self, x: &Output) -> Result<Output> {
        let shape = self.shape_of(x)?;
        let one = self.constant_of(1.0, x.dtype())?;
        self.op("Fill").input(&shape).input(&one).build_output()
    }

    /// `Shape(x)`, as int32.
    pub(crate) fn shape_of(&mut self, x: &Output) -> Result<Output> {
        self.op("Shape")
            .input(x)
            .attr("out_type", DataType::Int32)
            .build_output()
    }

    /// A scalar `Const` of `dtype` holding `value`.
    pub(crate) fn constant_of(&mut self, value: f64, dtype: DataType) -> Result<Output> {
        match dtype {
            DataType::Float => self.constant(value as f32),
            DataType::Double => self.constant(value),
            _ => {
                let value = self.constant(value)?;
                self.op("Cast")
                    .input(&value)
                    .attr("DstT", dtype)
                    .build_output()
            }
        }
    }

    /// The integer values of `t` where it is a `Const`'s output.
    pub(crate) fn const_ints(&self, t: &Output) -> Option<Vec<i64>> {
        let node = self.nodes.get(t.op().id)?;
        if node.kind != Kind::Const || t.index() != 0 {
            return None;
        }
        let attrs = crate::attr::Attrs {
            node: &node.name,
            attrs: &node.attrs,
        };
        crate::ops::infer::proto_ints(attrs.tensor("value").ok()?)
    }

    /// An op of `op_type` on `inputs` with `attrs`: one output.
    pub(crate) fn apply(
        &mut self,
        op_type: &str,
        inputs: &[&Output],
        attrs: Vec<(String, AttrValue)>,
    ) -> Result<Output> {
        let mut builder = self.op(op_type);
        for input in inputs {
            builder = builder.input(input);
        }
        for (name, value) in attrs {
            builder = builder.attr(&name, value);
        }
        builder.build_output()
    }
}
