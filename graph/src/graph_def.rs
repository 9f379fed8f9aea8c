//! `Graph` to and from TensorFlow's `GraphDef`.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use polytensor_core::{DataType, Error, Result};
use prost::Message;

use crate::attr::{AttrKind, AttrValue};
use crate::graph::{validate_name, Graph, KeptFields, Operation, Output};
use crate::library::Library;
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
            library: self.library.as_ref().map(|library| library.bytes.clone()),
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
        Graph::from_graph_def(&GraphDef::decode_bytes(bytes)?)
    }

    /// The serialized `GraphDef` in the file at `path`, as
    /// [`Graph::from_graph_def_bytes`] imports it, but with the file's bytes read once and
    /// shared: its constants are views of them ([`GraphDef::decode_shared`]), so importing a
    /// 100 MB frozen model holds about 100 MB, not 200.
    pub fn read_graph_def(path: impl AsRef<std::path::Path>) -> Result<Graph> {
        let path = path.as_ref();
        let bytes =
            std::fs::read(path).map_err(|e| Error::invalid(format!("{}: {e}", path.display())))?;
        Graph::from_graph_def(&GraphDef::decode_shared(bytes.into())?)
    }

    /// A graph from TensorFlow's `GraphDef`, with its node names kept. Nodes may come in any
    /// order; every input must name a node of the graph, and the data edges must not form
    /// a cycle. Attributes left at their defaults may be absent; devices are kept (a
    /// [`Session`](crate::Session) places by them). A node that calls a function of the
    /// library is an `Err`; the library, the versions and the `NodeDef` fields polytensor
    /// does not read are kept and written back as read.
    pub fn from_graph_def(def: &GraphDef) -> Result<Graph> {
        let mut graph = Graph::new();
        graph.versions = def.versions.clone().unwrap_or_default();
        graph.version = def.version;
        graph.import_graph_def(def, &ImportOptions::default())?;
        Ok(graph)
    }

    /// TensorFlow's `tf.graph_util.import_graph_def`: add the nodes of `def` to this graph,
    /// their names under `options.prefix` (made unique, as a name scope is; none when
    /// empty, where a name this graph already has is an `Err`), the inputs
    /// `options.input_map` names replaced by outputs of this graph, and return
    /// `options.return_elements` (`"x:0"` a tensor, `"init"` an operation, named as in
    /// `def`). Colocations (`_class: loc:@name`) follow the prefix. The library is taken
    /// when this graph has none. Nothing is added on an `Err`.
    pub fn import_graph_def(
        &mut self,
        def: &GraphDef,
        options: &ImportOptions,
    ) -> Result<Vec<Imported>> {
        let library = def.library.clone().map(Library::decode).transpose()?;
        let functions = library.as_ref().or(self.library.as_deref());
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (i, node) in def.node.iter().enumerate() {
            validate_name(&node.name)?;
            if functions.is_some_and(|f| f.function(&node.op).is_some()) {
                return Err(Error::invalid(format!(
                    "node '{}' calls function '{}': function libraries are not supported",
                    node.name, node.op
                )));
            }
            check_merge_count(node)?;
            if index.insert(&node.name, i).is_some() {
                return Err(Error::invalid(format!(
                    "Duplicate node name in graph: '{}'",
                    node.name
                )));
            }
        }
        for node in &def.node {
            check_colocations(node, |name| {
                index.contains_key(name) || self.node_index(name).is_some()
            })?;
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
        // The input map's keys, resolved in `def`'s names, with what replaces them.
        let mut mapped: HashMap<(usize, Option<usize>), Replacement> = HashMap::new();
        for (key, replacement) in &options.input_map {
            let (name, port) = match key.strip_prefix('^') {
                Some(name) => (name, None),
                None => match split_port(key) {
                    Some((name, port)) => (name, Some(port)),
                    None => (key.as_str(), Some(0)),
                },
            };
            let node = index.get(name).copied().ok_or_else(|| {
                Error::invalid(format!(
                    "Attempted to map inputs that were not found in graph_def: [{key}]"
                ))
            })?;
            let (id, output) = self.locate(replacement)?;
            let replacement = match port {
                Some(_) => Replacement::Output(id, output),
                None => Replacement::Operation(id),
            };
            mapped.insert((node, port), replacement);
        }
        // What to return: (node of `def`, output index or `None` for the operation).
        let returns = options
            .return_elements
            .iter()
            .map(|name| {
                let (node, port, what) = match split_port(name) {
                    Some((node, port)) => (node, Some(port), "tensor"),
                    None => (name.as_str(), None, "node"),
                };
                let i = index.get(node).copied().ok_or_else(|| {
                    Error::invalid(format!(
                        "Requested return {what} '{name}' not found in graph def"
                    ))
                })?;
                Ok((i, port))
            })
            .collect::<Result<Vec<_>>>()?;
        let order = topological_order(def, &parsed)?;
        // On an `Err`, the graph is put back as it was.
        let saved = self.clone();
        // TensorFlow's importer: the prefix, without a trailing '/', must be a node name.
        let bare = options.prefix.strip_suffix('/').unwrap_or(&options.prefix);
        if !options.prefix.is_empty() && validate_name(bare).is_err() {
            return Err(Error::invalid(format!(
                "Imported node name prefix '{bare}' would lead to invalid node names"
            )));
        }
        let prefix = if options.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", self.unique_name(&options.prefix, true))
        };
        let renamed = |name: &str| format!("{prefix}{name}");
        let added = (|| -> Result<Vec<usize>> {
            let mut ids = vec![usize::MAX; def.node.len()];
            // Loop back edges (`NextIteration` into `Merge`), connected once every node is
            // in: (merge, input position, `def` node, output index).
            let mut back_edges = Vec::new();
            for &i in &order {
                let node = &def.node[i];
                let (mut inputs, mut control) = (Vec::new(), Vec::new());
                for (position, input) in parsed[i].iter().enumerate() {
                    match *input {
                        Input::Data {
                            node: source,
                            index,
                        } if is_back_edge(def, source, i) => {
                            back_edges.push((i, position, source, index));
                        }
                        Input::Data { node, index } => {
                            inputs.push(match mapped.get(&(node, Some(index))) {
                                Some(Replacement::Output(id, port)) => (*id, *port),
                                _ => (ids[node], index),
                            })
                        }
                        Input::Control(node) => control.push(match mapped.get(&(node, None)) {
                            Some(Replacement::Operation(id)) => *id,
                            _ => ids[node],
                        }),
                    }
                }
                let mut attrs = node.attr.clone();
                if !prefix.is_empty() {
                    prefix_colocations(&mut attrs, &prefix);
                }
                let op = self.add_node(
                    renamed(&node.name),
                    &node.op,
                    inputs,
                    control,
                    attrs,
                    node.device.clone(),
                )?;
                Arc::make_mut(&mut self.nodes)[op.id].kept = KeptFields {
                    debug_info: node.experimental_debug_info.clone(),
                    full_type: node.experimental_type.clone(),
                };
                if back_edges.last().is_some_and(|edge| edge.0 == i) {
                    // TensorFlow's shape refiner sees a back edge's shape as unknown.
                    Arc::make_mut(&mut self.nodes)[op.id].outputs[0].1 =
                        polytensor_core::PartialTensorShape::unknown_rank();
                }
                ids[i] = op.id;
            }
            for &(merge, position, source, index) in &back_edges {
                let id = ids[merge];
                self.connect_back_edge(id, position, (ids[source], index))?;
            }
            Ok(ids)
        })();
        let ids = match added {
            Ok(ids) => ids,
            Err(e) => {
                *self = saved;
                return Err(e);
            }
        };
        if self.library.is_none() {
            self.library = library.map(Arc::new);
        }
        let returned = returns
            .iter()
            .map(|&(i, port)| {
                let op = self.handle(ids[i]);
                match port {
                    Some(port) => self.output(&op, port).map(Imported::Output),
                    None => Ok(Imported::Operation(op)),
                }
            })
            .collect::<Result<Vec<_>>>();
        if returned.is_err() {
            *self = saved;
        }
        returned
    }
}

/// Options of [`Graph::import_graph_def`]: the arguments of TensorFlow's
/// `tf.graph_util.import_graph_def` (`name`, `input_map`, `return_elements`).
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// The scope the imported names go under (`import` gives `import/x`, or `import_1/x`
    /// if `import` is taken); empty for none.
    pub prefix: String,
    /// Inputs of the imported nodes to replace, by their name in the GraphDef (`"x:0"` or
    /// `"x"` for output 0; `"^x"` for a control input, replaced by an operation).
    pub input_map: Vec<(String, Output)>,
    /// What to return, named as in the GraphDef: `"x:0"` for a tensor, `"x"` for an
    /// operation.
    pub return_elements: Vec<String>,
}

impl ImportOptions {
    /// Options with `prefix` and nothing else.
    pub fn with_prefix(prefix: &str) -> Self {
        ImportOptions {
            prefix: prefix.to_string(),
            ..Default::default()
        }
    }
}

/// One of [`ImportOptions::return_elements`], imported.
#[derive(Debug, Clone, PartialEq)]
pub enum Imported {
    /// A tensor (`"x:0"`).
    Output(Output),
    /// An operation (`"init"`).
    Operation(Operation),
}

/// What an input-map entry puts in place of an input: an output (node, index) of this
/// graph, or an operation for a control input.
enum Replacement {
    Output(usize, usize),
    Operation(usize),
}

/// `name:port` split, where the port is all digits.
fn split_port(text: &str) -> Option<(&str, usize)> {
    let (name, port) = text.rsplit_once(':')?;
    (!port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
        .then(|| port.parse().ok().map(|p| (name, p)))
        .flatten()
}

/// Put `prefix` in front of every `loc:@name` of a node's `_class` attribute.
fn prefix_colocations(attrs: &mut std::collections::BTreeMap<String, AttrValue>, prefix: &str) {
    let Some(AttrValue {
        value: Some(AttrKind::List(list)),
    }) = attrs.get_mut("_class")
    else {
        return;
    };
    for class in &mut list.s {
        if let Some(name) = class.strip_prefix(b"loc:@") {
            let mut renamed = b"loc:@".to_vec();
            renamed.extend_from_slice(prefix.as_bytes());
            renamed.extend_from_slice(name);
            *class = renamed;
        }
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

/// Whether the edge from `def` node `source` into node `consumer` is a loop's back edge
/// ([`crate::frames::is_back_edge`]).
fn is_back_edge(def: &GraphDef, source: usize, consumer: usize) -> bool {
    let kind = |node: usize| crate::ops::find(&def.node[node].op);
    matches!((kind(source), kind(consumer)), (Some(s), Some(c)) if crate::frames::is_back_edge(s, c))
}

impl Graph {
    /// Connect a loop's back edge: `source` becomes data input `position` of `Merge` node
    /// `merge`, whose `N` (when set) must then count every input.
    fn connect_back_edge(
        &mut self,
        merge: usize,
        position: usize,
        source: (usize, usize),
    ) -> Result<()> {
        let (id, index) = source;
        let (dtype, want) = (
            self.nodes[id].outputs.get(index).map(|o| o.0),
            self.nodes[merge].outputs[0].0,
        );
        if dtype != Some(want) {
            return Err(Error::invalid(format!(
                "Node '{}': input {position} from {}:{index} is not of the Merge's type {want}",
                self.nodes[merge].name, self.nodes[id].name
            )));
        }
        let node = &mut Arc::make_mut(&mut self.nodes)[merge];
        let position = position.min(node.inputs.len());
        node.inputs.insert(position, source);
        let n = node.attrs.get("N").and_then(|v| match v.value {
            Some(AttrKind::I(n)) => Some(n),
            _ => None,
        });
        match n {
            Some(n) if usize::try_from(n).ok() != Some(node.inputs.len()) => {
                Err(Error::invalid(format!(
                    "NodeDef '{}' (Merge) has attr 'N' = {n}, but {} inputs are specified; N \
                     must match the inputs",
                    node.name,
                    node.inputs.len()
                )))
            }
            _ => Ok(()),
        }
    }
}

/// An order of the nodes where every input comes before its consumer but for loop back
/// edges ([`is_back_edge`]) (Kahn's algorithm, keeping the GraphDef's order among ready
/// nodes), or an `Err` naming a node on a cycle that is not a loop.
fn topological_order(def: &GraphDef, parsed: &[Vec<Input>]) -> Result<Vec<usize>> {
    let n = def.node.len();
    let mut pending = vec![0usize; n];
    let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, inputs) in parsed.iter().enumerate() {
        for input in inputs {
            if let Input::Data { node, .. } = *input {
                if is_back_edge(def, node, i) {
                    continue;
                }
            }
            pending[i] += 1;
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

/// A `Merge`'s `N` counts its data inputs, back edges included (checked on the `NodeDef`,
/// before its back edges are connected), with TensorFlow's message.
fn check_merge_count(node: &NodeDef) -> Result<()> {
    if node.op != "Merge" && node.op != "RefMerge" {
        return Ok(());
    }
    let Some(AttrKind::I(n)) = node.attr.get("N").and_then(|v| v.value.as_ref()) else {
        return Ok(());
    };
    let given = node.input.iter().filter(|i| !i.starts_with('^')).count();
    if usize::try_from(*n).ok() != Some(given) {
        let dtype = node
            .attr
            .get("T")
            .and_then(|v| match v.value {
                Some(AttrKind::Type(t)) => DataType::from_i32(t).ok(),
                _ => None,
            })
            .map_or_else(
                || "T".to_string(),
                |t| crate::ops::cpp_dtype_name(t).to_string(),
            );
        let expected = vec![dtype; usize::try_from(*n).unwrap_or(0).min(16)];
        return Err(Error::invalid(format!(
            "NodeDef expected inputs '{}' do not match {given} inputs specified; Op<name=Merge; \
             signature=inputs:N*T -> output:T, value_index:int32; attr=T:type; \
             attr=N:int,min=1>; NodeDef: {{{{node {}}}}}",
            expected.join(", "),
            node.name
        )));
    }
    Ok(())
}

/// Every `loc:@name` of a node's `_class` names a node (`known`), as TensorFlow's importer
/// requires, with its message.
fn check_colocations(node: &NodeDef, known: impl Fn(&str) -> bool) -> Result<()> {
    let Some(AttrKind::List(list)) = node.attr.get("_class").and_then(|v| v.value.as_ref()) else {
        return Ok(());
    };
    for class in &list.s {
        if let Some(name) = class.strip_prefix(b"loc:@") {
            let name = String::from_utf8_lossy(name);
            if !known(&name) {
                return Err(Error::invalid(format!(
                    "Node '{}' expects to be colocated with unknown node '{name}'",
                    node.name
                )));
            }
        }
    }
    Ok(())
}
