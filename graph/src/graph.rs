//! `Graph`, `Operation` and `Output`: TensorFlow's graph, its operations and their symbolic
//! output tensors, with TensorFlow's unique names, name scopes and static inference.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, OnceLock};

use polytensor_core::{DataType, Error, PartialTensorShape, Result, Tensor};

use crate::attr::AttrValue;
use crate::ops::{self, InferCtx};
use crate::proto::VersionDef;

/// The dtype and static shape of one output.
pub(crate) type Typed = (DataType, PartialTensorShape);

/// One operation of a graph, as stored.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Node {
    pub(crate) name: Arc<str>,
    pub(crate) op_type: Arc<str>,
    /// What the op does, resolved from its type once, when the node is added.
    pub(crate) kind: ops::Kind,
    /// Data inputs: `(node, output index)`.
    pub(crate) inputs: Vec<(usize, usize)>,
    pub(crate) control_inputs: Vec<usize>,
    pub(crate) attrs: BTreeMap<String, AttrValue>,
    pub(crate) device: String,
    pub(crate) outputs: Vec<Typed>,
    /// `NodeDef` fields polytensor does not read, kept to be written back.
    pub(crate) kept: KeptFields,
    /// A `Const`'s value decoded on the host, once for the graph and its copies.
    pub(crate) decoded: DecodedConst,
}

/// A `Const`'s value decoded for the CPU, filled by the first session that runs it and
/// shared by every session of the graph (and of its copies) since: a model's weights are
/// decoded once per graph, and CPU sessions share their buffers. (Sessions on other
/// devices keep their own copy on the device, per session, as TensorFlow's `Const` kernel
/// holds its tensor; device memory is not pinned for the graph's life.) A `Const`'s value
/// never changes once it is added, so the cache is never stale; it is not part of the
/// node's meaning (equal nodes compare equal whether or not it is filled).
#[derive(Clone, Default)]
pub(crate) struct DecodedConst(Arc<OnceLock<Tensor>>);

impl DecodedConst {
    /// The decoded value, if a session decoded it.
    pub(crate) fn get(&self) -> Option<&Tensor> {
        self.0.get()
    }

    /// Keep `value` (the first one kept wins; they are equal).
    pub(crate) fn keep(&self, value: &Tensor) {
        let _ = self.0.set(value.clone());
    }
}

impl PartialEq for DecodedConst {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl fmt::Debug for DecodedConst {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.get().is_some() {
            "DecodedConst(decoded)"
        } else {
            "DecodedConst(not yet)"
        })
    }
}

/// The serialized `NodeDef` fields a graph keeps without reading them
/// (`experimental_debug_info`, `experimental_type`), so that a GraphDef round trip loses
/// nothing TensorFlow wrote.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct KeptFields {
    pub(crate) debug_info: Option<Vec<u8>>,
    pub(crate) full_type: Option<Vec<u8>>,
}

/// A dataflow graph, as TensorFlow's `tf.Graph`: operations added in order, each input an
/// output of an operation added before it.
///
/// A graph is copy-on-write: a clone shares its operations, names and function library
/// with the original (a [`crate::Session`] holds such a clone), and the first operation
/// added to either afterwards copies them once.
///
/// ```
/// use polytensor_graph::Graph;
/// let mut g = Graph::new();
/// let a = g.constant(3.0f32)?;
/// let b = g.constant(4.0f32)?;
/// let total = g.add(&a, &b)?;
/// assert_eq!(total.to_string(), r#"Tensor("add:0", shape=(), dtype=float32)"#);
/// # Ok::<(), polytensor_core::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub(crate) nodes: Arc<Vec<Node>>,
    by_name: Arc<HashMap<Arc<str>, usize>>,
    /// TensorFlow's `_names_in_use`: lower-cased names and how often each was asked for.
    names_in_use: Arc<HashMap<String, usize>>,
    /// The current name scope (`outer/inner`), empty at the top.
    name_stack: String,
    /// The device of the current device scope (`Graph::device_scope`), empty for none.
    device_scope: String,
    /// The `VersionDef` of the GraphDef the graph came from (or polytensor's producer).
    pub(crate) versions: VersionDef,
    /// The deprecated `GraphDef.version` of the GraphDef the graph came from.
    pub(crate) version: i32,
    /// The function library of the GraphDef the graph came from, written back as read
    /// (its functions are instantiated when a session calls them).
    pub(crate) library: Option<Arc<crate::library::Library>>,
}

/// An operation of a [`Graph`]: a handle that names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Operation {
    pub(crate) id: usize,
    name: Arc<str>,
    op_type: Arc<str>,
}

impl Operation {
    /// The unique name (`add`, `scope/Const_1`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The op type (`AddV2`).
    pub fn op_type(&self) -> &str {
        &self.op_type
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "name: \"{}\" op: \"{}\"", self.name, self.op_type)
    }
}

/// A symbolic tensor: output `index` of an operation, with its static dtype and shape. Its
/// `Display` is TensorFlow's: `Tensor("add:0", shape=(), dtype=float32)`, and `device=...`
/// after them where the operation asks for a device.
#[derive(Clone, Debug, PartialEq)]
pub struct Output {
    op: Operation,
    index: usize,
    dtype: DataType,
    shape: PartialTensorShape,
    /// The device the operation asks for (empty for none).
    device: Arc<str>,
}

impl Output {
    /// The operation that produces it.
    pub fn op(&self) -> &Operation {
        &self.op
    }

    /// Which output of the operation it is.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Its tensor name, `op_name:index`.
    pub fn name(&self) -> String {
        format!("{}:{}", self.op.name, self.index)
    }

    /// The static dtype.
    pub fn dtype(&self) -> DataType {
        self.dtype
    }

    /// The static shape (dims or the rank may be unknown).
    pub fn shape(&self) -> &PartialTensorShape {
        &self.shape
    }
}

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // TensorFlow leaves the shape out where even the rank is unknown.
        write!(f, "Tensor(\"{}\", ", self.name())?;
        if self.shape.rank().is_some() {
            write!(f, "shape={}, ", python_shape(&self.shape))?;
        }
        write!(f, "dtype={}", self.dtype.name())?;
        if !self.device.is_empty() {
            write!(f, ", device={}", self.device)?;
        }
        f.write_str(")")
    }
}

/// A shape as TensorFlow's Python prints it: `()`, `(3,)`, `(None, 4)`, `<unknown>`.
pub fn python_shape(shape: &PartialTensorShape) -> String {
    let Some(dims) = shape.dims() else {
        return "<unknown>".into();
    };
    let dims: Vec<String> = dims
        .iter()
        .map(|d| d.map_or("None".into(), |d| d.to_string()))
        .collect();
    match dims.as_slice() {
        [one] => format!("({one},)"),
        _ => format!("({})", dims.join(", ")),
    }
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Self {
        Graph {
            versions: VersionDef {
                producer: crate::PRODUCER,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// The number of operations.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the graph has no operations.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Every operation, in the order they were added.
    pub fn operations(&self) -> impl Iterator<Item = Operation> + '_ {
        (0..self.nodes.len()).map(|id| self.handle(id))
    }

    /// The operation named `name`.
    pub fn operation(&self, name: &str) -> Option<Operation> {
        self.by_name.get(name).map(|&id| self.handle(id))
    }

    /// The symbolic tensor named `op_name:index` (or `op_name`, meaning output 0).
    pub fn tensor(&self, name: &str) -> Result<Output> {
        let (op, index) = match name.rsplit_once(':') {
            Some((op, index)) => {
                let index = index.parse().map_err(|_| {
                    Error::invalid(format!("invalid tensor name '{name}': bad output index"))
                })?;
                (op, index)
            }
            None => (name, 0),
        };
        let op = self.operation(op).ok_or_else(|| {
            Error::invalid(format!(
                "The name '{name}' refers to a Tensor which does not exist. The operation, \
                 '{op}', does not exist in the graph."
            ))
        })?;
        self.output(&op, index)
    }

    /// Output `index` of `op`.
    pub fn output(&self, op: &Operation, index: usize) -> Result<Output> {
        let node = self.node(op)?;
        let (dtype, shape) = node.outputs.get(index).cloned().ok_or_else(|| {
            Error::invalid(format!(
                "The name '{}:{index}' refers to a Tensor which does not exist. The operation, \
                 '{}', exists but only has {} outputs.",
                op.name,
                op.name,
                node.outputs.len()
            ))
        })?;
        Ok(Output {
            op: op.clone(),
            index,
            dtype,
            shape,
            device: node.device.as_str().into(),
        })
    }

    /// Every output of `op`.
    pub fn outputs(&self, op: &Operation) -> Result<Vec<Output>> {
        let count = self.node(op)?.outputs.len();
        (0..count).map(|i| self.output(op, i)).collect()
    }

    /// The data inputs of `op`.
    pub fn inputs(&self, op: &Operation) -> Result<Vec<Output>> {
        let inputs = self.node(op)?.inputs.clone();
        inputs
            .into_iter()
            .map(|(id, index)| self.output(&self.handle(id), index))
            .collect()
    }

    /// The control inputs of `op`.
    pub fn control_inputs(&self, op: &Operation) -> Result<Vec<Operation>> {
        Ok(self
            .node(op)?
            .control_inputs
            .iter()
            .map(|&id| self.handle(id))
            .collect())
    }

    /// The attribute `name` of `op`, if set.
    pub fn attr(&self, op: &Operation, name: &str) -> Result<Option<&AttrValue>> {
        Ok(self.node(op)?.attrs.get(name))
    }

    /// The device `op` asked for (empty for none).
    pub fn device(&self, op: &Operation) -> Result<&str> {
        Ok(&self.node(op)?.device)
    }

    /// Whether `device` runs `op`, as the placer judges it: the device holds every dtype
    /// the op reads and writes, and runs the op's kernel for its dtype.
    pub fn runs_on(&self, op: &Operation, device: &dyn polytensor_core::Device) -> Result<bool> {
        Ok(crate::placer::runs(self, self.node(op)?, device))
    }

    /// Every function of the graph's library, by name, made into a graph of its own as a
    /// call instantiates it (its arguments `Placeholder`s): what a model's functions hold,
    /// for [`runs_on`](Self::runs_on) and the like. `Err` for a function that does not
    /// instantiate (an op polytensor lacks, a malformed body).
    pub fn function_graphs(&self) -> Vec<(String, Result<Graph>)> {
        let Some(library) = &self.library else {
            return Vec::new();
        };
        library
            .names()
            .map(|name| {
                let graph = crate::function::instantiate(library, name).map(|i| i.graph);
                (name.to_string(), graph)
            })
            .collect()
    }

    /// `(node, output index)` of `output`, checked to be an output of this graph.
    pub(crate) fn locate(&self, output: &Output) -> Result<(usize, usize)> {
        let node = self.node(output.op())?;
        if output.index() >= node.outputs.len() {
            return Err(Error::invalid(format!("{} does not exist", output.name())));
        }
        Ok((output.op().id, output.index()))
    }

    /// The index of the node named `name`.
    pub(crate) fn node_index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// Start building an operation of type `op_type` (`AddV2`, `Const`, ...). Its name
    /// defaults to the op type, made unique as TensorFlow does.
    pub fn op(&mut self, op_type: &str) -> OpBuilder<'_> {
        let device = self.device_scope.clone();
        OpBuilder {
            graph: self,
            op_type: op_type.to_string(),
            name: None,
            inputs: Vec::new(),
            control_inputs: Vec::new(),
            attrs: BTreeMap::new(),
            device,
        }
    }

    /// Run `body` inside a device scope, as `with tf.device(device):` does: operations it
    /// adds ask for `device` unless they name one themselves ([`OpBuilder::device`]).
    pub fn device_scope<T>(&mut self, device: &str, body: impl FnOnce(&mut Graph) -> T) -> T {
        let outer = std::mem::replace(&mut self.device_scope, device.to_string());
        let result = body(self);
        self.device_scope = outer;
        result
    }

    /// Run `body` inside the name scope `name` (made unique, as `tf.name_scope` does):
    /// operations it adds are named `name/...`.
    pub fn name_scope<T>(&mut self, name: &str, body: impl FnOnce(&mut Graph) -> T) -> T {
        let scope = self.unique_name(name, true);
        let outer = std::mem::replace(&mut self.name_stack, scope);
        let result = body(self);
        self.name_stack = outer;
        result
    }

    /// TensorFlow's `Graph.unique_name`: `name` inside the current scope, with `_1`, `_2`,
    /// ... appended if it (compared case-insensitively) is taken.
    pub fn unique_name(&mut self, name: &str, mark_as_used: bool) -> String {
        let name = if self.name_stack.is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", self.name_stack)
        };
        let base_key = name.to_lowercase();
        let mut i = self.names_in_use.get(&base_key).copied().unwrap_or(0);
        if mark_as_used {
            Arc::make_mut(&mut self.names_in_use).insert(base_key.clone(), i + 1);
        }
        if i == 0 {
            return name;
        }
        let mut key = base_key.clone();
        while self.names_in_use.contains_key(&key) {
            key = format!("{base_key}_{i}");
            i += 1;
        }
        if mark_as_used {
            Arc::make_mut(&mut self.names_in_use).insert(key, 1);
        }
        format!("{name}_{}", i - 1)
    }

    pub(crate) fn handle(&self, id: usize) -> Operation {
        let node = &self.nodes[id];
        Operation {
            id,
            name: node.name.clone(),
            op_type: node.op_type.clone(),
        }
    }

    pub(crate) fn node(&self, op: &Operation) -> Result<&Node> {
        self.nodes
            .get(op.id)
            .filter(|node| node.name == op.name)
            .ok_or_else(|| Error::invalid(format!("operation '{}' is not in this graph", op.name)))
    }

    /// Add a node whose name is final (already unique), inferring its outputs.
    pub(crate) fn add_node(
        &mut self,
        name: String,
        op_type: &str,
        inputs: Vec<(usize, usize)>,
        control_inputs: Vec<usize>,
        attrs: BTreeMap<String, AttrValue>,
        device: String,
    ) -> Result<Operation> {
        if self.by_name.contains_key(name.as_str()) {
            return Err(Error::invalid(format!(
                "Duplicate node name in graph: '{name}'"
            )));
        }
        let kind = ops::find(op_type).ok_or_else(|| {
            Error::invalid(format!(
                "Op type not registered '{op_type}' in binary (node '{name}')"
            ))
        })?;
        let typed = inputs
            .iter()
            .map(|&(id, index)| {
                let source = &self.nodes[id];
                source.outputs.get(index).cloned().ok_or_else(|| {
                    Error::invalid(format!(
                        "Node '{name}': Connecting to invalid output {index} of source node {} \
                         which has {} outputs.",
                        source.name,
                        source.outputs.len()
                    ))
                })
            })
            .collect::<Result<Vec<Typed>>>()?;
        let ctx = InferCtx {
            op_type,
            name: &name,
            inputs: &typed,
            sources: inputs
                .iter()
                .map(|&(id, index)| (&self.nodes[id], index))
                .collect(),
            nodes: &self.nodes,
            attrs: &attrs,
        };
        ops::check_derived(kind, &ctx)?;
        let outputs = ops::infer::infer(kind, &ctx)?;
        let id = self.nodes.len();
        let name: Arc<str> = name.into();
        Arc::make_mut(&mut self.names_in_use)
            .entry(name.to_lowercase())
            .and_modify(|n| *n = (*n).max(1))
            .or_insert(1);
        Arc::make_mut(&mut self.by_name).insert(name.clone(), id);
        Arc::make_mut(&mut self.nodes).push(Node {
            name,
            op_type: op_type.into(),
            kind,
            inputs,
            control_inputs,
            attrs,
            device,
            outputs,
            kept: KeptFields::default(),
            decoded: DecodedConst::default(),
        });
        Ok(self.handle(id))
    }
}

/// Builds one operation: `graph.op("MatMul").input(&a).input(&b).attr(...).build()`.
pub struct OpBuilder<'g> {
    graph: &'g mut Graph,
    op_type: String,
    name: Option<String>,
    inputs: Vec<Output>,
    control_inputs: Vec<Operation>,
    attrs: BTreeMap<String, AttrValue>,
    device: String,
}

impl<'g> OpBuilder<'g> {
    /// The name to ask for (made unique within the current scope).
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }

    /// Append a data input.
    pub fn input(mut self, input: &Output) -> Self {
        self.inputs.push(input.clone());
        self
    }

    /// Append data inputs.
    pub fn inputs(mut self, inputs: &[Output]) -> Self {
        self.inputs.extend(inputs.iter().cloned());
        self
    }

    /// Append a control input: `op` runs before this operation.
    pub fn control_input(mut self, op: &Operation) -> Self {
        self.control_inputs.push(op.clone());
        self
    }

    /// Set an attribute.
    pub fn attr(mut self, name: &str, value: impl Into<AttrValue>) -> Self {
        self.attrs.insert(name.to_string(), value.into());
        self
    }

    /// Ask for a device (TensorFlow's device names, `/device:GPU:0`, or polytensor's,
    /// `wgpu:0`; see [`crate::placer`]), overriding the graph's device scope.
    pub fn device(mut self, device: &str) -> Self {
        self.device = device.to_string();
        self
    }

    /// Check the inputs, add the type attributes TensorFlow requires that follow from them
    /// (`T`, `Tidx`, `N`, ... where not set), infer the outputs and add the operation.
    pub fn build(self) -> Result<Operation> {
        self.finish().map(|(_, op)| op)
    }

    /// [`build`](Self::build), then output 0.
    pub fn build_output(self) -> Result<Output> {
        let (graph, op) = self.finish()?;
        graph.output(&op, 0)
    }

    fn finish(self) -> Result<(&'g mut Graph, Operation)> {
        let graph = self.graph;
        let check = |op: &Operation| graph.node(op).map(|_| op.id);
        let inputs = self
            .inputs
            .iter()
            .map(|o| check(&o.op).map(|id| (id, o.index)))
            .collect::<Result<Vec<_>>>()?;
        let control_inputs = self
            .control_inputs
            .iter()
            .map(check)
            .collect::<Result<Vec<_>>>()?;
        let name = self.name.as_deref().unwrap_or(&self.op_type).to_string();
        validate_name(&name)?;
        let mut attrs = self.attrs;
        if let Some(kind) = ops::find(&self.op_type) {
            let typed: Vec<Typed> = self
                .inputs
                .iter()
                .map(|o| (o.dtype, o.shape.clone()))
                .collect();
            for derived in ops::derived_attrs(kind, &typed) {
                attrs
                    .entry(derived.name.to_string())
                    .or_insert(derived.value);
            }
        }
        let name = graph.unique_name(&name, true);
        let op = graph.add_node(
            name,
            &self.op_type,
            inputs,
            control_inputs,
            attrs,
            self.device,
        )?;
        Ok((graph, op))
    }
}

/// TensorFlow's rule for operation names: `[A-Za-z0-9.][A-Za-z0-9_.\-/>]*`.
pub(crate) fn validate_name(name: &str) -> Result<()> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '.');
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || "_.-/>".contains(c));
    if first_ok && rest_ok {
        Ok(())
    } else {
        Err(Error::invalid(format!("'{name}' is not a valid node name")))
    }
}
