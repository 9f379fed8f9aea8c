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
use crate::proto::{AttrKind, GraphDef, NodeDef};

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
    /// Whether a node of the frozen graph names a function (a `While` body): then the
    /// library goes with it.
    calls_functions: bool,
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
            calls_functions: false,
        };
        let versions = top.versions.clone();
        let library = top.library.clone();
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
        Ok(GraphDef {
            library: if freezer.calls_functions {
                library
            } else {
                None
            },
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
    fn visit(&mut self, scope: &mut Scope, name: &str) -> Result<Became> {
        if let Some(became) = scope.became.get(name) {
            return Ok(became.clone());
        }
        let node = scope
            .nodes
            .get(name)
            .cloned()
            .ok_or_else(|| Error::invalid(format!("no node '{name}' in '{}'", scope.prefix)))?;
        let became = self.freeze_node(scope, node)?;
        scope.became.insert(name.to_string(), became.clone());
        Ok(became)
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
        self.calls_functions |= node.attr.values().any(names_function);
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

/// Whether an attribute names a function (a loop's body, a branch).
fn names_function(attr: &AttrValue) -> bool {
    match &attr.value {
        Some(AttrKind::Func(_)) => true,
        Some(AttrKind::List(list)) => !list.func.is_empty(),
        _ => false,
    }
}
