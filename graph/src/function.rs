//! A function of a graph's `FunctionDefLibrary` made into a graph of its own, as
//! TensorFlow instantiates one: each argument a `Placeholder` of its name, the body's
//! nodes with their inputs renamed from the function form (`x`, `node:out_arg:index`,
//! `^node`) to the graph form (`x`, `node:index`, `^node`), and the results and control
//! results located in it. The graph keeps the library, so functions it calls in turn
//! (a `While` in a loop body) are found the same way.

use std::sync::Arc;

use polytensor_core::{DataType, Error, Result};

use crate::attr::AttrValue;
use crate::graph::Graph;
use crate::graph_def::ImportOptions;
use crate::library::Library;
use crate::ops::output_args;
use crate::proto::{ArgDef, FunctionDef, GraphDef, NodeDef};

/// A function made into a graph.
pub(crate) struct Instance {
    /// The function's name.
    pub(crate) name: String,
    pub(crate) graph: Graph,
    /// The arguments' placeholders, in signature order: `(node, 0)`.
    pub(crate) args: Vec<(usize, usize)>,
    /// The results, in signature order: `(node, output)`.
    pub(crate) rets: Vec<(usize, usize)>,
    /// The nodes that run whenever the function runs (`control_ret`).
    pub(crate) control_rets: Vec<usize>,
}

/// Instantiate function `name` of `library` (the instance's graph shares it).
pub(crate) fn instantiate(library: &Arc<Library>, name: &str) -> Result<Instance> {
    let function = library.function(name).ok_or_else(|| {
        Error::invalid(format!(
            "Function '{name}' is not in the graph's function library"
        ))
    })?;
    let signature = function.signature.clone().unwrap_or_default();
    let mut node: Vec<NodeDef> = signature
        .input_arg
        .iter()
        .map(|arg| {
            Ok(NodeDef {
                name: arg.name.clone(),
                op: "Placeholder".into(),
                attr: [("dtype".to_string(), AttrValue::from(arg_dtype(name, arg)?))].into(),
                ..Default::default()
            })
        })
        .collect::<Result<_>>()?;
    for body in &function.node_def {
        let mut body = body.clone();
        body.input = body
            .input
            .iter()
            .map(|input| graph_input(function, input))
            .collect::<Result<_>>()?;
        node.push(body);
    }
    let def = GraphDef {
        node,
        ..Default::default()
    };
    let mut graph = Graph::new();
    graph.library = Some(library.clone());
    graph
        .import_graph_def(&def, &ImportOptions::default())
        .map_err(|e| Error::invalid(format!("in function '{name}': {e}")))?;
    let find = |tensor: &str| -> Result<(usize, usize)> {
        let output = graph.tensor(tensor)?;
        graph.locate(&output)
    };
    let args = signature
        .input_arg
        .iter()
        .map(|arg| find(&arg.name))
        .collect::<Result<_>>()?;
    let rets = signature
        .output_arg
        .iter()
        .map(|arg| {
            let ret = function.ret.get(&arg.name).ok_or_else(|| {
                Error::invalid(format!(
                    "Function '{name}' does not say what its result '{}' is",
                    arg.name
                ))
            })?;
            let at = find(&graph_input(function, ret)?)?;
            let (dtype, want) = (graph.nodes[at.0].outputs[at.1].0, arg_dtype(name, arg)?);
            if dtype != want {
                return Err(Error::invalid(format!(
                    "Function '{name}' returns {dtype} as '{}', declared {want}",
                    arg.name
                )));
            }
            Ok(at)
        })
        .collect::<Result<_>>()?;
    let control_rets = function
        .control_ret
        .values()
        .map(|node| {
            graph.node_index(node).ok_or_else(|| {
                Error::invalid(format!(
                    "Function '{name}' has no node '{node}' for a control result"
                ))
            })
        })
        .collect::<Result<_>>()?;
    Ok(Instance {
        name: name.to_string(),
        graph,
        args,
        rets,
        control_rets,
    })
}

/// The dtype of an argument or result (functions in GraphDefs are instantiated: their
/// dtypes are given, not attributes).
fn arg_dtype(function: &str, arg: &ArgDef) -> Result<DataType> {
    if !arg.number_attr.is_empty() || !arg.type_list_attr.is_empty() || arg.r#type == 0 {
        return Err(Error::invalid(format!(
            "Function '{function}': argument '{}' has its type or length in an attribute; only \
             instantiated functions (one tensor of a given dtype per argument) run",
            arg.name
        )));
    }
    Ok(DataType::from_i32(arg.r#type)?)
}

/// A body input in the graph form: `node:out_arg:index` becomes `node:i`, `i` counted
/// over the node's output arguments; arguments (`x`) and control inputs stay.
fn graph_input(function: &FunctionDef, input: &str) -> Result<String> {
    if input.starts_with('^') {
        return Ok(input.to_string());
    }
    let parts: Vec<&str> = input.split(':').collect();
    let [node, arg, index] = parts.as_slice() else {
        return Ok(input.to_string());
    };
    let bad = || {
        let name = function.signature.as_ref().map_or("", |s| s.name.as_str());
        Error::invalid(format!("Function '{name}': malformed input '{input}'"))
    };
    let index: usize = index.parse().map_err(|_| bad())?;
    let body = function
        .node_def
        .iter()
        .find(|n| n.name == *node)
        .ok_or_else(bad)?;
    // An op type polytensor lacks fails where the body is imported; its index stays.
    let flat = match output_args::output_args(&body.op, &body.name, &body.attr) {
        Some(args) => output_args::flat_index(&args, arg, index).ok_or_else(bad)?,
        None => index,
    };
    Ok(format!("{node}:{flat}"))
}
