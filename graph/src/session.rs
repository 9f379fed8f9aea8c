//! `Session`: runs the part of a graph that fetches and targets need, on one device, with
//! the execution plan cached per (feeds, fetches, targets) signature and variables kept in
//! the session.

use std::collections::HashMap;
use std::sync::Arc;

use polytensor_core::{Device, Error, Result, Tensor};

use crate::graph::{python_shape, Graph, Operation, Output};
use smallvec::smallvec;

use crate::ops::kernels::{self, Outputs, RunCtx, Variables};
use crate::ops::{self, Kind, Value};

/// TensorFlow's `Session` over a snapshot of a graph, on one device: every operation runs
/// there (requested devices are recorded, not followed).
///
/// ```
/// use polytensor_graph::{Graph, Session};
/// let mut g = Graph::new();
/// let a = g.constant(3.0f32)?;
/// let b = g.constant(4.0f32)?;
/// let total = g.add(&a, &b)?;
/// let mut session = Session::new(&g, polytensor_cpu::CpuDevice::shared());
/// let values = session.run(&[], &[&total], &[])?;
/// assert_eq!(values[0].item::<f32>()?, 7.0);
/// # Ok::<(), polytensor_core::Error>(())
/// ```
pub struct Session {
    graph: Graph,
    device: Arc<dyn Device>,
    variables: Variables,
    plans: HashMap<Signature, Arc<Plan>>,
    /// `Const` values already on the device, by node: decoded once, as TensorFlow's
    /// `Const` kernel holds its tensor.
    constants: Vec<Option<Tensor>>,
}

/// What a plan depends on: fed tensors, fetched tensors and target operations.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Signature {
    feeds: Vec<(usize, usize)>,
    fetches: Vec<(usize, usize)>,
    targets: Vec<usize>,
}

/// The operations one signature runs, in an order where inputs come first, and for each
/// input of each, where its value comes from.
pub(crate) struct Plan {
    steps: Vec<Step>,
    /// Where each fetch is read from.
    fetches: Vec<Source>,
}

pub(crate) struct Step {
    /// The node whose outputs the step produces (the last of a fused chain).
    pub(crate) node: usize,
    pub(crate) kind: Kind,
    pub(crate) inputs: Vec<Source>,
    /// The other nodes a fused step runs, in order (empty for one node).
    pub(crate) chain: Vec<usize>,
    /// Nodes whose outputs no later step and no fetch reads: released after this step, as
    /// TensorFlow's executor drops a tensor when its last consumer has run.
    pub(crate) release: Vec<usize>,
}

/// Where a value comes from while a plan runs.
#[derive(Clone, Copy)]
pub(crate) enum Source {
    /// Feed number `i`.
    Feed(usize),
    /// Output `index` of the step that runs node `node`.
    Node { node: usize, index: usize },
}

impl Session {
    /// A session over a snapshot of `graph` (operations added to `graph` later are not in
    /// it), running on `device`.
    pub fn new(graph: &Graph, device: Arc<dyn Device>) -> Self {
        Session {
            graph: graph.clone(),
            device,
            variables: Variables::new(),
            plans: HashMap::new(),
            constants: vec![None; graph.len()],
        }
    }

    /// The device every operation runs on.
    pub fn device(&self) -> &Arc<dyn Device> {
        &self.device
    }

    /// How many execution plans the session has cached (one per distinct signature of
    /// feeds, fetches and targets).
    pub fn cached_plans(&self) -> usize {
        self.plans.len()
    }

    /// The graph this session runs.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Run the operations `fetches` and `targets` need, with `feeds` replacing the values of
    /// the tensors they name, and return the fetched values in order (on the session's
    /// device). Variable updates persist across calls. A tensor fed twice in one call is an
    /// `Err` naming it (a fetch may repeat).
    pub fn run(
        &mut self,
        feeds: &[(&Output, &Tensor)],
        fetches: &[&Output],
        targets: &[&Operation],
    ) -> Result<Vec<Tensor>> {
        let signature = self.signature(feeds, fetches, targets)?;
        for (i, fed) in signature.feeds.iter().enumerate() {
            if let Some(first) = signature.feeds[..i].iter().position(|f| f == fed) {
                return Err(Error::invalid(format!(
                    "Duplicate feed: {} is fed more than once in one run (feeds {first} and \
                     {i}); feed each tensor once",
                    feeds[i].0.name()
                )));
            }
        }
        for ((output, value), &(node, index)) in feeds.iter().zip(&signature.feeds) {
            self.check_feed(output, value, node, index)?;
        }
        let plan = match self.plans.get(&signature) {
            Some(plan) => plan.clone(),
            None => {
                let plan = Arc::new(self.plan(&signature)?);
                self.plans.insert(signature, plan.clone());
                plan
            }
        };
        let fed: Vec<Value> = feeds
            .iter()
            .map(|(_, t)| t.to_device(&self.device).map(Value::Tensor))
            .collect::<Result<_>>()?;
        self.execute(&plan, &fed)
    }

    /// [`run`](Self::run) with tensors and operations named as TensorFlow names them
    /// (`"x:0"`, `"init"`).
    pub fn run_by_name(
        &mut self,
        feeds: &[(&str, &Tensor)],
        fetches: &[&str],
        targets: &[&str],
    ) -> Result<Vec<Tensor>> {
        let feed_outputs = feeds
            .iter()
            .map(|(name, _)| self.graph.tensor(name))
            .collect::<Result<Vec<_>>>()?;
        let fetch_outputs = fetches
            .iter()
            .map(|name| self.graph.tensor(name))
            .collect::<Result<Vec<_>>>()?;
        let target_ops = targets
            .iter()
            .map(|name| {
                self.graph.operation(name).ok_or_else(|| {
                    Error::invalid(format!(
                        "The name '{name}' refers to an Operation not in the graph."
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let feeds: Vec<(&Output, &Tensor)> = feed_outputs
            .iter()
            .zip(feeds.iter().map(|(_, t)| *t))
            .collect();
        let fetches: Vec<&Output> = fetch_outputs.iter().collect();
        let targets: Vec<&Operation> = target_ops.iter().collect();
        self.run(&feeds, &fetches, &targets)
    }

    fn signature(
        &self,
        feeds: &[(&Output, &Tensor)],
        fetches: &[&Output],
        targets: &[&Operation],
    ) -> Result<Signature> {
        let locate = |o: &Output| -> Result<(usize, usize)> {
            let node = self.graph.node(o.op())?;
            if o.index() >= node.outputs.len() {
                return Err(Error::invalid(format!("{} does not exist", o.name())));
            }
            Ok((o.op().id, o.index()))
        };
        Ok(Signature {
            feeds: feeds
                .iter()
                .map(|(o, _)| locate(o))
                .collect::<Result<_>>()?,
            fetches: fetches.iter().map(|o| locate(o)).collect::<Result<_>>()?,
            targets: targets
                .iter()
                .map(|op| self.graph.node(op).map(|_| op.id))
                .collect::<Result<_>>()?,
        })
    }

    /// A feed must match the static dtype and be compatible with the static shape.
    fn check_feed(&self, output: &Output, value: &Tensor, node: usize, index: usize) -> Result<()> {
        let (dtype, shape) = &self.graph.nodes[node].outputs[index];
        if value.dtype() != *dtype {
            return Err(Error::invalid(format!(
                "Cannot feed value of dtype {} for Tensor {}, which has dtype {}",
                value.dtype(),
                output.name(),
                dtype
            )));
        }
        let fed = polytensor_core::PartialTensorShape::from(value.shape());
        if !shape.is_compatible_with(&fed) {
            return Err(Error::invalid(format!(
                "Cannot feed value of shape {} for Tensor {}, which has shape {}",
                python_shape(&fed),
                output.name(),
                python_shape(shape)
            )));
        }
        Ok(())
    }

    /// The steps a signature needs: every node reachable backwards from the fetches and
    /// targets through data and control inputs, stopping at fed tensors.
    fn plan(&self, signature: &Signature) -> Result<Plan> {
        let nodes = &self.graph.nodes;
        let fed =
            |node: usize, index: usize| signature.feeds.iter().position(|&f| f == (node, index));
        let source = |(node, index): (usize, usize)| match fed(node, index) {
            Some(i) => Source::Feed(i),
            None => Source::Node { node, index },
        };
        // Nodes are stored in an order where inputs come first (the builder and the GraphDef
        // reader both guarantee it), so marking backwards and running forwards is enough.
        let mut needed = vec![false; nodes.len()];
        let mut stack: Vec<usize> = signature
            .fetches
            .iter()
            .filter(|&&(n, i)| fed(n, i).is_none())
            .map(|&(n, _)| n)
            .chain(signature.targets.iter().copied())
            .collect();
        while let Some(node) = stack.pop() {
            if std::mem::replace(&mut needed[node], true) {
                continue;
            }
            let n = &nodes[node];
            stack.extend(
                n.inputs
                    .iter()
                    .filter(|&&(m, i)| fed(m, i).is_none())
                    .map(|&(m, _)| m),
            );
            stack.extend(n.control_inputs.iter().copied());
        }
        let mut steps = (0..nodes.len())
            .filter(|&node| needed[node])
            .map(|node| {
                let n = &nodes[node];
                let kind = ops::find(&n.op_type).ok_or_else(|| {
                    Error::invalid(format!("Op type not registered '{}'", n.op_type))
                })?;
                Ok(Step {
                    node,
                    kind,
                    inputs: n.inputs.iter().map(|&input| source(input)).collect(),
                    chain: Vec::new(),
                    release: Vec::new(),
                })
            })
            .collect::<Result<Vec<Step>>>()?;
        let fetches: Vec<Source> = signature.fetches.iter().map(|&f| source(f)).collect();
        crate::fusion::fuse(&mut steps, &fetches, nodes);
        // The last step reading each node's outputs releases them (fetched nodes never).
        let mut last_reader: HashMap<usize, usize> = HashMap::new();
        for (at, step) in steps.iter().enumerate() {
            for input in &step.inputs {
                if let Source::Node { node, .. } = *input {
                    last_reader.insert(node, at);
                }
            }
        }
        for source in &fetches {
            if let Source::Node { node, .. } = *source {
                last_reader.remove(&node);
            }
        }
        for (node, at) in last_reader {
            steps[at].release.push(node);
        }
        Ok(Plan { steps, fetches })
    }

    fn execute(&mut self, plan: &Plan, fed: &[Value]) -> Result<Vec<Tensor>> {
        let mut values: Vec<Option<Outputs>> = vec![None; self.graph.nodes.len()];
        let graph = &self.graph;
        for step in &plan.steps {
            let node = &graph.nodes[step.node];
            if let Some(constant) = &self.constants[step.node] {
                values[step.node] = Some(smallvec![Value::Tensor(constant.clone())]);
                continue;
            }
            let inputs = step
                .inputs
                .iter()
                .map(|&s| read_value(&values, fed, graph, s))
                .collect::<Result<_>>()?;
            let mut cx = RunCtx {
                node,
                device: &self.device,
                variables: &mut self.variables,
                inputs,
                chain: step.chain.iter().map(|&n| &graph.nodes[n]).collect(),
            };
            let outputs = kernels::run(step.kind, &mut cx).map_err(|e| in_node(e, node))?;
            drop(cx);
            if let (Kind::Const, [Value::Tensor(t)]) = (step.kind, outputs.as_slice()) {
                self.constants[step.node] = Some(t.clone());
            }
            values[step.node] = Some(outputs);
            for &done in &step.release {
                values[done] = None;
            }
        }
        plan.fetches
            .iter()
            .map(
                |&source| match read_value(&values, fed, graph, source)?.clone() {
                    Value::Tensor(t) => Ok(t),
                    Value::Ref(name) => self.variables.get(&name).cloned().ok_or_else(|| {
                        Error::invalid(format!("Attempting to use uninitialized value {name}"))
                    }),
                    Value::Resource(name) => Err(Error::invalid(format!(
                        "cannot fetch the resource handle of variable {name}"
                    ))),
                },
            )
            .collect()
    }
}

/// The value `source` names while a plan runs.
fn read_value<'v>(
    values: &'v [Option<Outputs>],
    fed: &'v [Value],
    graph: &Graph,
    source: Source,
) -> Result<&'v Value> {
    match source {
        Source::Feed(i) => Ok(&fed[i]),
        Source::Node { node, index } => values[node]
            .as_ref()
            .and_then(|outputs| outputs.get(index))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "output {index} of '{}' was not produced",
                    graph.nodes[node].name
                ))
            }),
    }
}

/// Name the node an error came from, as TensorFlow does (`[[{{node x}}]]`).
fn in_node(error: Error, node: &crate::graph::Node) -> Error {
    match error {
        Error::InvalidArgument(message) => {
            Error::InvalidArgument(format!("{message}\n\t [[{{{{node {}}}}}]]", node.name))
        }
        other => other,
    }
}
