//! [`GradientTape`]: TensorFlow's `tf.GradientTape` for eager tensors. Each op runs at once
//! on the tape's device, by the same kernels a session runs, and is recorded in a graph
//! with its value; [`GradientTape::gradient`] adds [`Graph::gradients`] to the recording
//! and runs only the gradient ops, fed the recorded values (the forward is not run again).
//! So the tape's gradients are the graph's, op for op, on every device.

use std::collections::HashMap;
use std::sync::Arc;

use polytensor_core::{Device, Error, PartialTensorShape, Result, Tensor};

use crate::attr::AttrValue;
use crate::graph::{Graph, Output};
use crate::ops::Kind;
use crate::session::{Session, SessionOptions};

/// A tensor on a [`GradientTape`]: its value, and where the tape recorded it.
#[derive(Clone, Debug)]
pub struct Taped {
    output: Output,
    value: Tensor,
}

impl Taped {
    /// The tensor's value.
    pub fn value(&self) -> &Tensor {
        &self.value
    }
}

/// One op as the tape runs it: a graph of placeholders for its inputs and the op, and a
/// session of it on the tape's device.
struct EagerOp {
    session: Session,
    inputs: Vec<Output>,
    outputs: Vec<Output>,
}

/// TensorFlow's `tf.GradientTape` (persistent: any number of gradients may be taken) on
/// eager tensors. Watch the tensors to differentiate with respect to, run ops on them with
/// [`GradientTape::op`] (TensorFlow's op types and attributes), then take
/// [`GradientTape::gradient`].
///
/// ```
/// use polytensor_core::Tensor;
/// use polytensor_graph::GradientTape;
/// let cpu = polytensor_cpu::CpuDevice::shared();
/// let mut tape = GradientTape::new(cpu.clone());
/// let x = tape.watch(&Tensor::from_slice(&[3.0f32, -1.0], [2], &cpu).unwrap()).unwrap();
/// let y = tape.op("Mul", &[&x, &x], &[]).unwrap();
/// assert_eq!(y.value().to_vec::<f32>().unwrap(), [9.0, 1.0]);
/// let dx = tape.gradient(&y, &[&x]).unwrap();
/// assert_eq!(dx[0].as_ref().unwrap().to_vec::<f32>().unwrap(), [6.0, -2.0]);
/// ```
pub struct GradientTape {
    device: Arc<dyn Device>,
    graph: Graph,
    /// Every recorded tensor's value, by its name in the graph.
    values: Vec<(Output, Tensor)>,
    /// The sessions of the ops run so far, by op type, attributes and input types.
    ops: HashMap<String, EagerOp>,
}

impl GradientTape {
    /// An empty tape whose ops run on `device`.
    pub fn new(device: Arc<dyn Device>) -> Self {
        GradientTape {
            device,
            graph: Graph::new(),
            values: Vec::new(),
            ops: HashMap::new(),
        }
    }

    /// `tape.watch(value)`: `value` on the tape, as a tensor gradients may be taken with
    /// respect to. Any tensor an op takes is watched this way (a constant too: its
    /// gradient is there for the asking).
    pub fn watch(&mut self, value: &Tensor) -> Result<Taped> {
        let value = if polytensor_core::device::same_device(value.device(), &self.device) {
            value.clone()
        } else {
            value.to_device(&self.device)?
        };
        let shape = PartialTensorShape::from(value.shape());
        let output = self.graph.placeholder(value.dtype(), &shape)?;
        self.values.push((output.clone(), value.clone()));
        Ok(Taped { output, value })
    }

    /// Run op `op_type` (TensorFlow's name: `MatMul`, `Conv2D`, `Relu`, ...) on `inputs`
    /// with `attrs` (the type attributes are derived), now, and record it: its outputs.
    /// Ops on variables, control flow and function calls are refused: the tape records
    /// pure tensor ops.
    pub fn run(
        &mut self,
        op_type: &str,
        inputs: &[&Taped],
        attrs: &[(&str, AttrValue)],
    ) -> Result<Vec<Taped>> {
        match crate::ops::find(op_type) {
            None => {
                return Err(Error::invalid(format!(
                    "Op type not registered '{op_type}'"
                )))
            }
            Some(kind)
                if kind.acts_on_variable()
                    || matches!(kind, Kind::Flow(_) | Kind::Call(_) | Kind::VarHandle) =>
            {
                return Err(Error::invalid(format!(
                    "a GradientTape runs tensor ops, not {op_type} (variables, control flow \
                     and function calls are the graph's)"
                )))
            }
            Some(_) => {}
        }
        let key = signature(op_type, inputs, attrs);
        if !self.ops.contains_key(&key) {
            let eager = self.eager_op(op_type, inputs, attrs)?;
            self.ops.insert(key.clone(), eager);
        }
        let eager = &self.ops[&key];
        let feeds: Vec<(&Output, &Tensor)> = eager
            .inputs
            .iter()
            .zip(inputs)
            .map(|(placeholder, input)| (placeholder, &input.value))
            .collect();
        let fetches: Vec<&Output> = eager.outputs.iter().collect();
        let values = eager.session.run(&feeds, &fetches, &[])?;
        let mut builder = self.graph.op(op_type);
        for input in inputs {
            builder = builder.input(&input.output);
        }
        for (name, value) in attrs {
            builder = builder.attr(name, value.clone());
        }
        let recorded = builder.build()?;
        let outputs = self.graph.outputs(&recorded)?;
        Ok(outputs
            .into_iter()
            .zip(values)
            .map(|(output, value)| {
                self.values.push((output.clone(), value.clone()));
                Taped { output, value }
            })
            .collect())
    }

    /// [`GradientTape::run`] of an op with one output.
    pub fn op(
        &mut self,
        op_type: &str,
        inputs: &[&Taped],
        attrs: &[(&str, AttrValue)],
    ) -> Result<Taped> {
        let mut outputs = self.run(op_type, inputs, attrs)?;
        match outputs.len() {
            1 => Ok(outputs.remove(0)),
            n => Err(Error::invalid(format!(
                "{op_type} has {n} outputs: run it with GradientTape::run"
            ))),
        }
    }

    /// `tape.gradient(target, sources)`: the gradients of `target` (summed over its
    /// elements) with respect to each of `sources`; `None` for a source it does not depend
    /// on. The values are [`Graph::gradients`]' of the recorded ops.
    pub fn gradient(&self, target: &Taped, sources: &[&Taped]) -> Result<Vec<Option<Tensor>>> {
        self.weighted_gradient(target, sources, None)
    }

    /// [`GradientTape::gradient`] with `output_gradients`, the gradient of the target
    /// (TensorFlow's `output_gradients`; of its dtype and shape) in place of ones.
    pub fn weighted_gradient(
        &self,
        target: &Taped,
        sources: &[&Taped],
        output_gradients: Option<&Tensor>,
    ) -> Result<Vec<Option<Tensor>>> {
        let mut graph = self.graph.clone();
        let mut feeds: Vec<(Output, Tensor)> = self.values.clone();
        let grad_ys = match output_gradients {
            Some(weights) => {
                let shape = PartialTensorShape::from(weights.shape());
                let placeholder = graph.placeholder(weights.dtype(), &shape)?;
                feeds.push((placeholder.clone(), weights.clone()));
                Some(vec![placeholder])
            }
            None => None,
        };
        let xs: Vec<Output> = sources.iter().map(|s| s.output.clone()).collect();
        let grads = graph.gradients(
            std::slice::from_ref(&target.output),
            &xs,
            grad_ys.as_deref(),
        )?;
        let fetches: Vec<&Output> = grads.iter().flatten().collect();
        if fetches.is_empty() {
            return Ok(vec![None; sources.len()]);
        }
        let session =
            Session::with_options(&graph, SessionOptions::new(vec![self.device.clone()]))?;
        // Every recorded value fed: the gradient ops read the forward's, never run again.
        let feeds: Vec<(&Output, &Tensor)> = feeds.iter().map(|(o, v)| (o, v)).collect();
        let mut values = session.run(&feeds, &fetches, &[])?.into_iter();
        Ok(grads
            .iter()
            .map(|grad| grad.as_ref().and_then(|_| values.next()))
            .collect())
    }

    /// The session of one op: placeholders of the inputs' dtypes and shapes, and the op.
    fn eager_op(
        &self,
        op_type: &str,
        inputs: &[&Taped],
        attrs: &[(&str, AttrValue)],
    ) -> Result<EagerOp> {
        let mut graph = Graph::new();
        let placeholders = inputs
            .iter()
            .map(|input| {
                let shape = PartialTensorShape::from(input.value.shape());
                graph.placeholder(input.value.dtype(), &shape)
            })
            .collect::<Result<Vec<_>>>()?;
        let mut builder = graph.op(op_type).inputs(&placeholders);
        for (name, value) in attrs {
            builder = builder.attr(name, value.clone());
        }
        let op = builder.build()?;
        let outputs = graph.outputs(&op)?;
        let session =
            Session::with_options(&graph, SessionOptions::new(vec![self.device.clone()]))?;
        Ok(EagerOp {
            session,
            inputs: placeholders,
            outputs,
        })
    }
}

/// What makes two eager ops the same: the op type, the attributes and the inputs' dtypes
/// and shapes.
fn signature(op_type: &str, inputs: &[&Taped], attrs: &[(&str, AttrValue)]) -> String {
    let inputs: Vec<String> = inputs
        .iter()
        .map(|i| format!("{}{}", i.value.dtype(), i.value.shape()))
        .collect();
    format!("{op_type} {inputs:?} {attrs:?}")
}
