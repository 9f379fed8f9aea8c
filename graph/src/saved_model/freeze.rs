//! [`SavedModel::freeze`]: one signature as a frozen `GraphDef`, as TensorFlow's
//! `convert_variables_to_constants_v2` makes one: the functions the signature calls are
//! inlined, each read of a variable becomes a `Const` of the variable's value in the
//! session (restored from the checkpoint), the signature's inputs stay `Placeholder`s, and
//! each of its outputs is an `Identity` named by the output's key.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use polytensor_core::{Error, Result};

use super::SavedModel;
use crate::attr::AttrValue;
use crate::library::Library;
use crate::proto::{AttrKind, FunctionDef, FunctionDefLibrary, GraphDef, NodeDef};
use polytensor_core::DataType;
use prost::Message;

/// How deep calls may nest (a function that calls itself never ends).
const MAX_CALL_DEPTH: usize = 64;

/// What a tensor of a graph being inlined stands for in the frozen graph.
#[derive(Clone, Debug)]
enum Value {
    /// A tensor of the frozen graph (`name` or `name:i`).
    Tensor(String),
    /// A variable's handle: the `VarHandleOp` node of the SavedModel's graph it came from.
    Variable(String),
}

/// What a node became.
#[derive(Clone, Debug)]
enum Became {
    /// A node of the frozen graph, by its name there.
    Node(String),
    /// Values in place of its outputs (an argument, a variable's handle, an inlined call).
    Values(Vec<Value>),
}

/// One graph being inlined: the SavedModel's own (`prefix` empty) or a called function's.
struct Scope {
    nodes: HashMap<String, NodeDef>,
    /// Names in the frozen graph start with it (`call/` for the body of node `call`).
    prefix: String,
    /// The function's arguments (its `Placeholder`s), bound to the call's inputs.
    args: HashMap<String, Value>,
    became: HashMap<String, Became>,
    depth: usize,
}

impl Scope {
    fn new(def: GraphDef, prefix: String, args: HashMap<String, Value>, depth: usize) -> Self {
        Scope {
            nodes: def.node.into_iter().map(|n| (n.name.clone(), n)).collect(),
            prefix,
            args,
            became: HashMap::new(),
            depth,
        }
    }
}

struct Freezer<'a> {
    model: &'a SavedModel,
    library: Option<Arc<Library>>,
    out: Vec<NodeDef>,
    /// The names of `out`'s nodes.
    names: HashSet<String>,
    /// Functions made for the frozen graph: a loop body or a branch that took a variable's
    /// handle and takes its value instead.
    made: Vec<FunctionDef>,
}

impl SavedModel {
    /// The signature `key` as a frozen `GraphDef` that TensorFlow and polytensor run without
    /// the SavedModel: its functions inlined, its variables constants of their values in
    /// this session, its inputs the signature's placeholders, and its outputs `Identity`
    /// nodes named by the output keys (`y:0` for output `y`). `Err` for a signature that
    /// passes a variable to anything but a read (an assignment, a loop) or that uses another
    /// resource (a lookup table, which its init op fills): such a model does not freeze.
    pub fn freeze(&self, key: &str) -> Result<GraphDef> {
        let signature = self.signature(key)?.clone();
        let top = self.graph.to_graph_def();
        let mut freezer = Freezer {
            model: self,
            library: self.graph.library.clone(),
            out: Vec::new(),
            names: HashSet::new(),
            made: Vec::new(),
        };
        let versions = top.versions.clone();
        let mut scope = Scope::new(top, String::new(), HashMap::new(), 0);
        let mut outputs = Vec::new();
        for (name, spec) in &signature.outputs {
            match freezer.resolve(&mut scope, &spec.name)? {
                Value::Tensor(tensor) => outputs.push((name, spec.dtype, tensor)),
                Value::Variable(handle) => {
                    return Err(Error::invalid(format!(
                        "signature '{key}' returns the handle of variable '{handle}', which a \
                         frozen graph cannot hold"
                    )))
                }
            }
        }
        for (name, dtype, tensor) in outputs {
            let name = freezer.unique(name);
            freezer.out.push(NodeDef {
                name,
                op: "Identity".into(),
                input: vec![tensor],
                attr: [("T".to_string(), AttrValue::from(dtype))].into(),
                ..Default::default()
            });
        }
        let library = freezer.library();
        Ok(GraphDef {
            library: (!library.function.is_empty()).then(|| library.encode_to_vec()),
            node: freezer.out,
            versions,
            ..Default::default()
        })
    }
}

impl Freezer<'_> {
    /// What input `input` (`x`, `x:1`) of a node of `scope` stands for.
    fn resolve(&mut self, scope: &mut Scope, input: &str) -> Result<Value> {
        let (node, index) = match input.rsplit_once(':') {
            Some((node, index)) => (
                node,
                index
                    .parse::<usize>()
                    .map_err(|_| Error::invalid(format!("malformed input '{input}'")))?,
            ),
            None => (input, 0),
        };
        match self.visit(scope, node)? {
            Became::Node(name) => Ok(Value::Tensor(match index {
                0 => name,
                i => format!("{name}:{i}"),
            })),
            Became::Values(values) => values.get(index).cloned().ok_or_else(|| {
                Error::invalid(format!("'{input}': node '{node}' has no output {index}"))
            }),
        }
    }

    /// Make node `name` of `scope` (and what it reads) part of the frozen graph, once.
    /// The nodes it needs are found first, without recursion (a model's chains of nodes are
    /// long), and frozen inputs first, so that each finds its inputs done.
    fn visit(&mut self, scope: &mut Scope, name: &str) -> Result<Became> {
        if let Some(became) = scope.became.get(name) {
            return Ok(became.clone());
        }
        for needed in needed_first(scope, name)? {
            let node = scope.nodes[&needed].clone();
            let became = self.freeze_node(scope, node)?;
            scope.became.insert(needed, became);
        }
        Ok(scope.became[name].clone())
    }

    fn freeze_node(&mut self, scope: &mut Scope, node: NodeDef) -> Result<Became> {
        if node.op == "Placeholder" {
            if let Some(value) = scope.args.get(&node.name) {
                return Ok(Became::Values(vec![value.clone()]));
            }
        }
        let (data, control): (Vec<&String>, Vec<&String>) =
            node.input.iter().partition(|i| !i.starts_with('^'));
        let mut inputs = Vec::with_capacity(data.len());
        for input in data {
            inputs.push(self.resolve(scope, input)?);
        }
        let mut controls = Vec::new();
        for input in control {
            if let Became::Node(name) = self.visit(scope, &input[1..])? {
                controls.push(format!("^{name}"));
            }
        }
        match (node.op.as_str(), inputs.as_slice()) {
            ("VarHandleOp", _) if scope.prefix.is_empty() => {
                return Ok(Became::Values(vec![Value::Variable(node.name)]))
            }
            ("Identity", [Value::Variable(handle)]) => {
                return Ok(Became::Values(vec![Value::Variable(handle.clone())]))
            }
            ("ReadVariableOp", [Value::Variable(handle)]) => {
                let value = self.model.session.variable_value(handle)?;
                let name = self.unique(&format!("{}{}", scope.prefix, node.name));
                self.constant(&name, &value, controls)?;
                return Ok(Became::Node(name));
            }
            // An embedding's lookup: `GatherV2` of the value on axis 0, as TensorFlow's
            // converter writes it.
            ("ResourceGather", [Value::Variable(handle), Value::Tensor(indices)]) => {
                let value = self.model.session.variable_value(handle)?;
                let base = format!("{}{}", scope.prefix, node.name);
                let params = self.unique(&format!("{base}/params"));
                self.constant(&params, &value, Vec::new())?;
                let axis = self.unique(&format!("{base}/axis"));
                let zero = polytensor_core::Tensor::scalar(0i32, value.device())?;
                self.constant(&axis, &zero, Vec::new())?;
                let mut attr = node.attr.clone();
                attr.remove("dtype");
                attr.remove("validate_indices");
                attr.insert("Tparams".into(), AttrValue::from(value.dtype()));
                attr.insert("Taxis".into(), AttrValue::from(zero.dtype()));
                let name = self.unique(&base);
                let mut input = vec![params, indices.clone(), axis];
                input.extend(controls);
                self.out.push(NodeDef {
                    name: name.clone(),
                    op: "GatherV2".into(),
                    input,
                    attr,
                    ..Default::default()
                });
                return Ok(Became::Node(name));
            }
            ("StatefulPartitionedCall" | "PartitionedCall", _) => {
                return self.inline_call(scope, &node, inputs).map(Became::Values)
            }
            (op, _)
                if CONTROL_FLOW.contains(&op)
                    && inputs.iter().any(|v| matches!(v, Value::Variable(_))) =>
            {
                return self.control_flow_with_values(scope, node, inputs, controls)
            }
            _ => {}
        }
        let mut input = Vec::with_capacity(inputs.len() + controls.len());
        for value in inputs {
            match value {
                Value::Tensor(tensor) => input.push(tensor),
                Value::Variable(handle) => {
                    return Err(Error::invalid(format!(
                        "node '{}{}' ({}) uses variable '{handle}' other than by reading it, \
                         which does not freeze",
                        scope.prefix, node.name, node.op
                    )))
                }
            }
        }
        input.extend(controls);
        if scope.prefix.is_empty() && self.makes_resource(&node.name) {
            return Err(Error::invalid(format!(
                "node '{}' ({}) makes a resource other than a variable (a lookup table, say), \
                 whose initialisation does not freeze",
                node.name, node.op
            )));
        }
        let name = self.unique(&format!("{}{}", scope.prefix, node.name));
        self.out.push(NodeDef {
            name: name.clone(),
            input,
            device: String::new(),
            ..node
        });
        Ok(Became::Node(name))
    }

    /// The results of a call, its function's body inlined under the call's name.
    fn inline_call(
        &mut self,
        scope: &Scope,
        node: &NodeDef,
        inputs: Vec<Value>,
    ) -> Result<Vec<Value>> {
        let function = match node.attr.get("f").and_then(|a| a.value.as_ref()) {
            Some(AttrKind::Func(f)) => f.name.clone(),
            _ => {
                return Err(Error::invalid(format!(
                    "call '{}' names no function",
                    node.name
                )))
            }
        };
        if scope.depth >= MAX_CALL_DEPTH {
            return Err(Error::invalid(format!(
                "calls nest deeper than {MAX_CALL_DEPTH} at '{}{}' (function '{function}' \
                 calls itself?)",
                scope.prefix, node.name
            )));
        }
        let library = self.library.clone().ok_or_else(|| {
            Error::invalid(format!(
                "'{}' calls '{function}', but there is no library",
                node.name
            ))
        })?;
        let instance = crate::function::instantiate(&library, &function)?;
        if instance.args.len() != inputs.len() {
            return Err(Error::invalid(format!(
                "call '{}' gives function '{function}' {} inputs; it takes {}",
                node.name,
                inputs.len(),
                instance.args.len()
            )));
        }
        let name_of = |(node, _): (usize, usize)| instance.graph.nodes[node].name.to_string();
        let args = instance
            .args
            .iter()
            .map(|&a| name_of(a))
            .zip(inputs)
            .collect();
        let rets: Vec<String> = instance
            .rets
            .iter()
            .map(|&(n, i)| format!("{}:{i}", instance.graph.nodes[n].name))
            .collect();
        let prefix = format!("{}{}/", scope.prefix, node.name);
        let mut body = Scope::new(instance.graph.to_graph_def(), prefix, args, scope.depth + 1);
        rets.iter()
            .map(|ret| self.resolve(&mut body, ret))
            .collect()
    }

    /// A `While` or `If` given variables' handles: given their values instead (constants),
    /// its functions copied to take the values (`frozen_function`), as TensorFlow's
    /// converter rewrites a loop that reads weights (Keras's LSTM).
    fn control_flow_with_values(
        &mut self,
        scope: &Scope,
        mut node: NodeDef,
        inputs: Vec<Value>,
        controls: Vec<String>,
    ) -> Result<Became> {
        let base = format!("{}{}", scope.prefix, node.name);
        let is_loop = node.op.ends_with("While");
        // A branch op's first input is its condition, not an argument.
        let skip = usize::from(!is_loop);
        let mut input = Vec::with_capacity(inputs.len() + controls.len());
        let mut args = HashMap::new();
        for (i, value) in inputs.into_iter().enumerate() {
            match value {
                Value::Tensor(tensor) => input.push(tensor),
                Value::Variable(handle) => {
                    let value = self.model.session.variable_value(&handle)?;
                    let name = self.unique(&format!("{base}/{handle}"));
                    self.constant(&name, &value, Vec::new())?;
                    input.push(name);
                    let arg = i.checked_sub(skip).ok_or_else(|| {
                        Error::invalid(format!("'{base}' takes a variable as its condition"))
                    })?;
                    args.insert(arg, (value.dtype(), value.shape().clone()));
                }
            }
        }
        input.extend(controls);
        let dtypes: HashMap<usize, DataType> = args.iter().map(|(&i, (d, _))| (i, *d)).collect();
        self.hand_values_to(&mut node, &dtypes, scope.depth + 1)?;
        if is_loop {
            // The loop's outputs are its variables: here the values' shapes are known.
            if let Some(AttrKind::List(list)) = node
                .attr
                .get_mut("output_shapes")
                .and_then(|a| a.value.as_mut())
            {
                for (&i, (_, shape)) in &args {
                    if let Some(slot) = list.shape.get_mut(i) {
                        *slot = polytensor_core::PartialTensorShape::from(shape).to_proto();
                    }
                }
            }
        }
        let name = self.unique(&base);
        self.out.push(NodeDef {
            name: name.clone(),
            input,
            device: String::new(),
            ..node
        });
        Ok(Became::Node(name))
    }

    /// Retype the arguments `args` (index, the value's dtype) of a loop, branch or call
    /// `node`, which took handles there, and give it copies of its functions that take the
    /// values.
    fn hand_values_to(
        &mut self,
        node: &mut NodeDef,
        args: &HashMap<usize, DataType>,
        depth: usize,
    ) -> Result<()> {
        let (types, functions): (&str, &[&str]) = if node.op.ends_with("While") {
            ("T", &["cond", "body"])
        } else if CALLS.contains(&node.op.as_str()) {
            ("Tin", &["f"])
        } else {
            ("Tin", &["then_branch", "else_branch"])
        };
        retype(node, types, args)?;
        // (TensorFlow checks a recorded `_output_shapes` against the node: a handle's scalar
        // shape no longer holds. A loop's declared shapes of those variables become unknown.)
        node.attr.remove("_output_shapes");
        if let Some(AttrKind::List(list)) = node
            .attr
            .get_mut("output_shapes")
            .and_then(|a| a.value.as_mut())
        {
            for &i in args.keys() {
                if let Some(slot) = list.shape.get_mut(i) {
                    *slot = polytensor_core::PartialTensorShape::unknown_rank().to_proto();
                }
            }
        }
        for attr in functions {
            let Some(AttrKind::Func(function)) =
                node.attr.get_mut(*attr).and_then(|a| a.value.as_mut())
            else {
                return Err(Error::invalid(format!(
                    "'{}' ({}) has no function '{attr}'",
                    node.name, node.op
                )));
            };
            function.name = self.frozen_function(&function.name.clone(), args, depth)?;
        }
        Ok(())
    }

    /// A copy of function `name` whose arguments `args` (by index) take a variable's value
    /// of the given dtype where the original took its handle: a `ReadVariableOp` of one
    /// becomes an `Identity`, a `ResourceGather` a `GatherV2`, and a loop, branch or call
    /// that passes one on is given a copy of its own functions in turn.
    fn frozen_function(
        &mut self,
        name: &str,
        args: &HashMap<usize, DataType>,
        depth: usize,
    ) -> Result<String> {
        if depth >= MAX_CALL_DEPTH {
            return Err(Error::invalid(format!(
                "functions nest deeper than {MAX_CALL_DEPTH} at '{name}'"
            )));
        }
        let library = self
            .library
            .clone()
            .ok_or_else(|| Error::invalid(format!("no library holds function '{name}'")))?;
        let mut function = library
            .function(name)
            .cloned()
            .ok_or_else(|| Error::invalid(format!("no function '{name}' in the library")))?;
        let frozen = self.unique_function(name);
        let signature = function.signature.get_or_insert_with(Default::default);
        signature.name = frozen.clone();
        // Tensors of the body (in its `x`, `node:out:0` spelling) that are now values.
        let mut values: HashMap<String, DataType> = HashMap::new();
        for (&i, &dtype) in args {
            let arg = signature
                .input_arg
                .get_mut(i)
                .ok_or_else(|| Error::invalid(format!("function '{name}' has no argument {i}")))?;
            arg.r#type = dtype.as_i32();
            values.insert(arg.name.clone(), dtype);
        }
        let mut nodes = Vec::with_capacity(function.node_def.len());
        let mut renames = HashMap::new();
        // Nodes come in any order: passes until nothing changes (aliases of aliases).
        let mut pending = std::mem::take(&mut function.node_def);
        loop {
            let before = pending.len();
            let mut later = Vec::new();
            for mut node in pending {
                let read: Vec<(usize, DataType)> = node
                    .input
                    .iter()
                    .enumerate()
                    .filter_map(|(i, input)| values.get(input.as_str()).map(|&d| (i, d)))
                    .collect();
                if read.is_empty() {
                    // It may read an alias made later in this pass: look again next pass,
                    // unless nothing changes.
                    later.push(node);
                    continue;
                }
                self.freeze_body_node(
                    &mut node,
                    &read,
                    &mut values,
                    &mut nodes,
                    &mut renames,
                    depth,
                )?;
                nodes.push(node);
            }
            if later.len() == before {
                nodes.extend(later);
                break;
            }
            pending = later;
        }
        for arg in &mut signature.output_arg {
            if let Some(&dtype) = function.ret.get(&arg.name).and_then(|r| values.get(r)) {
                arg.r#type = dtype.as_i32();
            }
        }
        for input in nodes.iter_mut().flat_map(|n| &mut n.input) {
            if let Some(renamed) = renames.get(input.as_str()) {
                *input = renamed.clone();
            }
        }
        for value in function.ret.values_mut() {
            if let Some(renamed) = renames.get(value.as_str()) {
                *value = renamed.clone();
            }
        }
        function.node_def = nodes;
        self.made.push(function);
        Ok(frozen)
    }

    /// Rewrite `node` of a function body, whose inputs `read` (index, dtype) are values
    /// where they were variables' handles.
    fn freeze_body_node(
        &mut self,
        node: &mut NodeDef,
        read: &[(usize, DataType)],
        values: &mut HashMap<String, DataType>,
        extra: &mut Vec<NodeDef>,
        renames: &mut HashMap<String, String>,
        depth: usize,
    ) -> Result<()> {
        let dtype = read[0].1;
        // (A handle's recorded shape is a scalar's: see `hand_values_to`.)
        node.attr.remove("_output_shapes");
        match node.op.as_str() {
            "ReadVariableOp" => {
                node.op = "Identity".into();
                node.attr.remove("dtype");
                node.attr.insert("T".into(), AttrValue::from(dtype));
                // (Its readers name its output by the read's argument name, `value`.)
                renames.insert(
                    format!("{}:value:0", node.name),
                    format!("{}:output:0", node.name),
                );
            }
            "Identity" => {
                node.attr.insert("T".into(), AttrValue::from(dtype));
                values.insert(format!("{}:output:0", node.name), dtype);
            }
            "ResourceGather" if read[0].0 == 0 => {
                let axis = format!("{}/axis", node.name);
                let zero = polytensor_core::Tensor::scalar(0i32, &self.host()?)?;
                extra.push(NodeDef {
                    name: axis.clone(),
                    op: "Const".into(),
                    attr: [
                        ("dtype".to_string(), AttrValue::from(DataType::Int32)),
                        ("value".to_string(), AttrValue::from(zero.to_proto()?)),
                    ]
                    .into(),
                    ..Default::default()
                });
                node.op = "GatherV2".into();
                node.attr.remove("dtype");
                node.attr.remove("validate_indices");
                node.attr.insert("Tparams".into(), AttrValue::from(dtype));
                node.attr
                    .insert("Taxis".into(), AttrValue::from(DataType::Int32));
                let at = node.input.iter().position(|i| i.starts_with('^'));
                node.input
                    .insert(at.unwrap_or(node.input.len()), format!("{axis}:output:0"));
            }
            op if CONTROL_FLOW.contains(&op) || CALLS.contains(&op) => {
                let is_loop = op.ends_with("While");
                let skip = usize::from(op.ends_with("If"));
                let args: HashMap<usize, DataType> = read
                    .iter()
                    .map(|&(i, d)| {
                        i.checked_sub(skip).map(|i| (i, d)).ok_or_else(|| {
                            Error::invalid(format!(
                                "'{}' takes a variable as its condition",
                                node.name
                            ))
                        })
                    })
                    .collect::<Result<_>>()?;
                self.hand_values_to(node, &args, depth + 1)?;
                if is_loop {
                    // The loop passes the values through: its outputs there are values too.
                    for &(i, d) in read {
                        values.insert(format!("{}:output:{i}", node.name), d);
                    }
                }
            }
            op => {
                return Err(Error::invalid(format!(
                    "node '{}' ({op}) of a function uses a variable other than by reading it, \
                     which does not freeze",
                    node.name
                )))
            }
        }
        Ok(())
    }

    /// A CPU device, for small constants made here.
    fn host(&self) -> Result<Arc<dyn polytensor_core::Device>> {
        self.model.host_device()
    }

    /// A function name the library and the functions made so far do not have.
    fn unique_function(&self, name: &str) -> String {
        let taken = |n: &str| {
            self.library
                .as_ref()
                .is_some_and(|l| l.function(n).is_some())
                || self
                    .made
                    .iter()
                    .any(|f| f.signature.as_ref().is_some_and(|s| s.name == n))
        };
        (0..)
            .map(|i| format!("{name}_frozen{i}"))
            .find(|n| !taken(n))
            .unwrap_or_default()
    }

    /// The functions the frozen graph's nodes name (loop bodies, branches), and those they
    /// name in turn: the library's and the copies made here, nothing else.
    fn library(&mut self) -> FunctionDefLibrary {
        let made = std::mem::take(&mut self.made);
        let find = |name: &str| {
            made.iter()
                .find(|f| f.signature.as_ref().is_some_and(|s| s.name == name))
                .or_else(|| self.library.as_ref().and_then(|l| l.function(name)))
        };
        let mut wanted: Vec<&str> = self
            .out
            .iter()
            .flat_map(|n| n.attr.values().flat_map(functions_named))
            .collect();
        let mut seen = HashSet::new();
        let mut library = FunctionDefLibrary::default();
        while let Some(name) = wanted.pop() {
            if !seen.insert(name) {
                continue;
            }
            if let Some(function) = find(name) {
                // (A body's node may call a function by its name as the op type.)
                wanted.extend(function.node_def.iter().flat_map(|n| {
                    std::iter::once(n.op.as_str()).chain(n.attr.values().flat_map(functions_named))
                }));
                library.function.push(function.clone());
            }
        }
        library
    }

    /// A `Const` node `name` holding `value`.
    fn constant(
        &mut self,
        name: &str,
        value: &polytensor_core::Tensor,
        controls: Vec<String>,
    ) -> Result<()> {
        self.out.push(NodeDef {
            name: name.to_string(),
            op: "Const".into(),
            input: controls,
            attr: [
                ("dtype".to_string(), AttrValue::from(value.dtype())),
                ("value".to_string(), AttrValue::from(value.to_proto()?)),
            ]
            .into(),
            ..Default::default()
        });
        Ok(())
    }

    /// Whether node `name` of the SavedModel's graph outputs a resource (a table's handle).
    fn makes_resource(&self, name: &str) -> bool {
        let graph = self.model.graph();
        graph.operation(name).is_some_and(|op| {
            graph.outputs(&op).is_ok_and(|outputs| {
                outputs
                    .iter()
                    .any(|o| o.dtype() == polytensor_core::DataType::Resource)
            })
        })
    }

    /// `name`, or `name_1`, ... if the frozen graph has it already; taken from now on.
    fn unique(&mut self, name: &str) -> String {
        let name = if self.names.contains(name) {
            (1..)
                .map(|i| format!("{name}_{i}"))
                .find(|n| !self.names.contains(n))
                .unwrap_or_default()
        } else {
            name.to_string()
        };
        self.names.insert(name.clone());
        name
    }
}

/// The nodes of `scope` not yet frozen that `name` needs (itself included), each after the
/// nodes it reads (a depth-first post-order, on an explicit stack); `Err` for a missing
/// node or a cycle.
fn needed_first(scope: &Scope, name: &str) -> Result<Vec<String>> {
    let missing = |n: &str| Error::invalid(format!("no node '{n}' in '{}'", scope.prefix));
    let inputs_of = |n: &str| -> Result<Vec<String>> {
        let node = scope.nodes.get(n).ok_or_else(|| missing(n))?;
        Ok(node
            .input
            .iter()
            .map(|i| {
                let i = i.strip_prefix('^').unwrap_or(i);
                i.rsplit_once(':').map_or(i, |(n, _)| n).to_string()
            })
            .filter(|i| !scope.became.contains_key(i))
            .collect())
    };
    let mut order = Vec::new();
    let mut done: HashSet<String> = HashSet::new();
    let mut on_path: HashSet<String> = HashSet::new();
    // (node, its inputs still to look at)
    let mut stack = vec![(name.to_string(), inputs_of(name)?)];
    on_path.insert(name.to_string());
    while let Some((node, pending)) = stack.last_mut() {
        match pending.pop() {
            Some(input) if done.contains(&input) => {}
            Some(input) => {
                if !on_path.insert(input.clone()) {
                    return Err(Error::invalid(format!(
                        "nodes '{input}' and '{node}' of '{}' need each other (a cycle)",
                        scope.prefix
                    )));
                }
                let inputs = inputs_of(&input)?;
                stack.push((input, inputs));
            }
            None => {
                let node = node.clone();
                stack.pop();
                on_path.remove(&node);
                done.insert(node.clone());
                order.push(node);
            }
        }
    }
    Ok(order)
}

/// The loops and branches whose functions take variables' handles as arguments.
const CONTROL_FLOW: &[&str] = &["While", "StatelessWhile", "If", "StatelessIf"];
/// The calls, inside a loop's body or a branch, that pass a handle on.
const CALLS: &[&str] = &["StatefulPartitionedCall", "PartitionedCall"];

/// Set the dtypes of list attribute `attr` at `dtypes`' indices.
fn retype(node: &mut NodeDef, attr: &str, dtypes: &HashMap<usize, DataType>) -> Result<()> {
    let Some(AttrKind::List(list)) = node.attr.get_mut(attr).and_then(|a| a.value.as_mut()) else {
        return Err(Error::invalid(format!(
            "'{}' ({}) has no type list '{attr}'",
            node.name, node.op
        )));
    };
    for (&i, dtype) in dtypes {
        let slot = list
            .r#type
            .get_mut(i)
            .ok_or_else(|| Error::invalid(format!("'{}': '{attr}' has no entry {i}", node.name)))?;
        *slot = dtype.as_i32();
    }
    Ok(())
}

/// The functions an attribute names (a loop's body, a branch).
fn functions_named(attr: &AttrValue) -> Vec<&str> {
    match &attr.value {
        Some(AttrKind::Func(f)) => vec![f.name.as_str()],
        Some(AttrKind::List(list)) => list.func.iter().map(|f| f.name.as_str()).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, inputs: &[&str]) -> NodeDef {
        NodeDef {
            name: name.into(),
            op: "Identity".into(),
            input: inputs.iter().map(|i| i.to_string()).collect(),
            ..Default::default()
        }
    }

    fn scope(nodes: Vec<NodeDef>) -> Scope {
        let def = GraphDef {
            node: nodes,
            ..Default::default()
        };
        Scope::new(def, "f/".into(), HashMap::new(), 0)
    }

    #[test]
    fn a_long_chain_is_ordered_without_recursion() {
        let n = 200_000;
        let mut nodes = vec![node("n0", &[])];
        for i in 1..n {
            nodes.push(node(&format!("n{i}"), &[&format!("n{}:0", i - 1)]));
        }
        let order = needed_first(&scope(nodes), &format!("n{}", n - 1)).unwrap();
        assert_eq!(order.len(), n);
        assert_eq!(
            (order[0].as_str(), order[n - 1].as_str()),
            ("n0", "n199999")
        );
    }

    #[test]
    fn inputs_come_first_and_cycles_and_missing_nodes_are_errors() {
        let diamond = scope(vec![
            node("a", &[]),
            node("b", &["a"]),
            node("c", &["a", "^b"]),
            node("d", &["b:0", "c"]),
        ]);
        let order = needed_first(&diamond, "d").unwrap();
        let at = |n: &str| order.iter().position(|o| o == n).unwrap();
        assert_eq!(order.len(), 4);
        assert!(at("a") < at("b") && at("b") < at("c") && at("c") < at("d"));
        let cycle = scope(vec![node("x", &["^y"]), node("y", &["x"])]);
        let error = needed_first(&cycle, "x").unwrap_err().to_string();
        assert!(error.contains("a cycle"), "{error}");
        let missing = scope(vec![node("x", &["ghost"])]);
        let error = needed_first(&missing, "x").unwrap_err().to_string();
        assert!(error.contains("no node 'ghost' in 'f/'"), "{error}");
    }
}
