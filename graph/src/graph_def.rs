//! `Graph` to and from TensorFlow's `GraphDef`.

use std::collections::{BTreeSet, HashMap};

use polytensor_core::{Error, Result};
use prost::Message;

use crate::graph::{validate_name, Graph, KeptFields};
use crate::proto::{GraphDef, NodeDef};

impl Graph {
    /// The graph as TensorFlow's `GraphDef` (nodes in the order they were added; inputs
    /// written `name` for output 0, `name:i` otherwise, control inputs `^name` last).
    pub fn to_graph_def(&self) -> GraphDef {
        let node = self
            .nodes
            .iter()
            .map(|n| {
                let data = n.inputs.iter().map(|&(id, index)| {
                    let name = &self.nodes[id].name;
                    match index {
                        0 => name.to_string(),
                        i => format!("{name}:{i}"),
                    }
                });
                let control = n
                    .control_inputs
                    .iter()
                    .map(|&id| format!("^{}", self.nodes[id].name));
                NodeDef {
                    name: n.name.to_string(),
                    op: n.op_type.to_string(),
                    input: data.chain(control).collect(),
                    device: n.device.clone(),
                    attr: n.attrs.clone(),
                    experimental_debug_info: n.kept.debug_info.clone(),
                    experimental_type: n.kept.full_type.clone(),
                }
            })
            .collect();
        GraphDef {
            node,
            library: self.library.clone(),
            version: self.version,
            versions: Some(self.versions.clone()),
        }
    }

    /// The serialized `GraphDef` (attributes sorted by key, as TensorFlow's deterministic
    /// serialization writes them).
    pub fn to_graph_def_bytes(&self) -> Vec<u8> {
        self.to_graph_def().encode_to_vec()
    }

    /// Read a serialized `GraphDef`.
    pub fn from_graph_def_bytes(bytes: &[u8]) -> Result<Graph> {
        let def =
            GraphDef::decode(bytes).map_err(|e| Error::InvalidProto(format!("GraphDef: {e}")))?;
        Graph::from_graph_def(&def)
    }

    /// A graph from TensorFlow's `GraphDef`, with its node names kept. Nodes may come in any
    /// order; every input must name a node of the graph, and the data edges must not form
    /// a cycle. Attributes left at their defaults may be absent; devices are recorded.
    /// A node that calls a function of the library is an `Err`; the library, the versions
    /// and the `NodeDef` fields polytensor does not read are kept and written back as read.
    pub fn from_graph_def(def: &GraphDef) -> Result<Graph> {
        let names = def.function_names()?;
        let functions: BTreeSet<&str> = names.iter().map(String::as_str).collect();
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (i, node) in def.node.iter().enumerate() {
            validate_name(&node.name)?;
            if functions.contains(node.op.as_str()) {
                return Err(Error::invalid(format!(
                    "node '{}' calls function '{}': function libraries are not supported",
                    node.name, node.op
                )));
            }
            if index.insert(&node.name, i).is_some() {
                return Err(Error::invalid(format!(
                    "Duplicate node name in graph: '{}'",
                    node.name
                )));
            }
        }
        let parsed: Vec<Vec<Input>> = def
            .node
            .iter()
            .map(|node| {
                node.input
                    .iter()
                    .map(|text| Input::parse(text, &node.name, &index))
                    .collect()
            })
            .collect::<Result<_>>()?;
        let order = topological_order(def, &parsed)?;
        let mut graph = Graph::new();
        graph.versions = def.versions.clone().unwrap_or_default();
        graph.version = def.version;
        graph.library = def.library.clone();
        let mut ids = vec![usize::MAX; def.node.len()];
        for i in order {
            let node = &def.node[i];
            let (mut inputs, mut control) = (Vec::new(), Vec::new());
            for input in &parsed[i] {
                match *input {
                    Input::Data { node, index } => inputs.push((ids[node], index)),
                    Input::Control(node) => control.push(ids[node]),
                }
            }
            let op = graph.add_node(
                node.name.clone(),
                &node.op,
                inputs,
                control,
                node.attr.clone(),
                node.device.clone(),
            )?;
            graph.nodes[op.id].kept = KeptFields {
                debug_info: node.experimental_debug_info.clone(),
                full_type: node.experimental_type.clone(),
            };
            ids[i] = op.id;
        }
        Ok(graph)
    }
}

/// One input string of a `NodeDef`.
enum Input {
    Data { node: usize, index: usize },
    Control(usize),
}

impl Input {
    fn parse(text: &str, consumer: &str, index: &HashMap<&str, usize>) -> Result<Input> {
        let find = |name: &str| {
            index.get(name).copied().ok_or_else(|| {
                Error::invalid(format!("Node '{consumer}': Unknown input node '{text}'"))
            })
        };
        if let Some(name) = text.strip_prefix('^') {
            return Ok(Input::Control(find(name)?));
        }
        match text.rsplit_once(':') {
            Some((name, i)) if i.bytes().all(|b| b.is_ascii_digit()) && !i.is_empty() => {
                let index = i.parse().map_err(|_| {
                    Error::invalid(format!("Node '{consumer}': bad input '{text}'"))
                })?;
                Ok(Input::Data {
                    node: find(name)?,
                    index,
                })
            }
            _ => Ok(Input::Data {
                node: find(text)?,
                index: 0,
            }),
        }
    }

    fn node(&self) -> usize {
        match *self {
            Input::Data { node, .. } | Input::Control(node) => node,
        }
    }
}

/// An order of the nodes where every input comes before its consumer (Kahn's algorithm,
/// keeping the GraphDef's order among ready nodes), or an `Err` naming a node on a cycle.
fn topological_order(def: &GraphDef, parsed: &[Vec<Input>]) -> Result<Vec<usize>> {
    let n = def.node.len();
    let mut pending: Vec<usize> = parsed.iter().map(Vec::len).collect();
    let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, inputs) in parsed.iter().enumerate() {
        for input in inputs {
            consumers[input.node()].push(i);
        }
    }
    let mut ready: BTreeSet<usize> = (0..n).filter(|&i| pending[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &c in &consumers[i] {
            pending[c] -= 1;
            if pending[c] == 0 {
                ready.insert(c);
            }
        }
    }
    match (0..n).find(|&i| pending[i] > 0) {
        None => Ok(order),
        Some(i) => Err(Error::invalid(format!(
            "Graph has a cycle: node '{}' depends on itself through its inputs",
            def.node[i].name
        ))),
    }
}
