//! A graph written as a function of its own library: TensorFlow's `graph_to_function_def`,
//! the reverse of [`crate::function::instantiate`]. Gradients through control flow add
//! their functions this way, so the graphs they write run in TensorFlow too.

use std::collections::BTreeMap;
use std::sync::Arc;

use polytensor_core::{Error, Result};

use crate::graph::{Graph, Output};
use crate::library::Library;
use crate::ops::output_args;
use crate::proto::{ArgDef, FunctionDef, NodeDef, OpSignature};

impl Graph {
    /// The part of this graph that `rets` need, as function `name`: each of `args` (a
    /// `Placeholder`'s output) an argument named as its node, each of `rets` a result
    /// `output_i`, and the body's inputs in TensorFlow's function form (`node:arg:index`,
    /// `^node`).
    ///
    /// `Err` for an argument that is not a `Placeholder` or whose name TensorFlow refuses
    /// as an argument's (`[a-z][a-z0-9_]*`), or a `Placeholder` the results need that is not
    /// an argument.
    pub(crate) fn function_def(
        &self,
        name: &str,
        args: &[Output],
        rets: &[Output],
    ) -> Result<FunctionDef> {
        let mut is_arg = vec![false; self.nodes.len()];
        let mut input_arg = Vec::with_capacity(args.len());
        for arg in args {
            let (node, _) = self.locate(arg)?;
            let placeholder = &self.nodes[node];
            if placeholder.op_type.as_ref() != "Placeholder" || !valid_arg_name(&placeholder.name) {
                return Err(Error::invalid(format!(
                    "Function '{name}': argument {} must be a Placeholder named [a-z][a-z0-9_]*",
                    arg.name()
                )));
            }
            is_arg[node] = true;
            input_arg.push(ArgDef {
                name: placeholder.name.to_string(),
                r#type: arg.dtype().as_i32(),
                ..Default::default()
            });
        }
        // The nodes the results need, through data and control inputs, up to the arguments.
        let mut needed = vec![false; self.nodes.len()];
        let mut stack: Vec<usize> = rets.iter().map(|r| r.op().id).collect();
        while let Some(n) = stack.pop() {
            if is_arg[n] || std::mem::replace(&mut needed[n], true) {
                continue;
            }
            let node = &self.nodes[n];
            stack.extend(node.inputs.iter().map(|&(input, _)| input));
            stack.extend(&node.control_inputs);
        }
        let reference = |(node, index): (usize, usize)| -> Result<String> {
            let source = &self.nodes[node];
            if is_arg[node] {
                return Ok(source.name.to_string());
            }
            let args = output_args::output_args(&source.op_type, &source.name, &source.attrs);
            let (arg, at) = args
                .as_deref()
                .and_then(|args| output_args::arg_index(args, index))
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "Function '{name}': the output arguments of '{}' ({}) are unknown",
                        source.name, source.op_type
                    ))
                })?;
            Ok(format!("{}:{arg}:{at}", source.name))
        };
        let mut node_def = Vec::new();
        for (n, node) in self.nodes.iter().enumerate() {
            if !needed[n] {
                continue;
            }
            if node.op_type.as_ref() == "Placeholder" {
                return Err(Error::invalid(format!(
                    "Function '{name}': Placeholder '{}' is needed but is not an argument",
                    node.name
                )));
            }
            let data = node.inputs.iter().map(|&input| reference(input));
            let control = node
                .control_inputs
                .iter()
                .filter(|&&c| !is_arg[c])
                .map(|&c| Ok(format!("^{}", self.nodes[c].name)));
            node_def.push(NodeDef {
                name: node.name.to_string(),
                op: node.op_type.to_string(),
                input: data.chain(control).collect::<Result<_>>()?,
                device: node.device.clone(),
                attr: node.attrs.clone(),
                ..Default::default()
            });
        }
        let mut output_arg = Vec::with_capacity(rets.len());
        let mut ret = BTreeMap::new();
        for (i, r) in rets.iter().enumerate() {
            let arg = format!("output_{i}");
            ret.insert(arg.clone(), reference(self.locate(r)?)?);
            output_arg.push(ArgDef {
                name: arg,
                r#type: r.dtype().as_i32(),
                ..Default::default()
            });
        }
        Ok(FunctionDef {
            signature: Some(OpSignature {
                name: name.to_string(),
                input_arg,
                output_arg,
            }),
            node_def,
            ret,
            control_ret: BTreeMap::new(),
        })
    }

    /// Add `functions` to the graph's library (made where it has none). `Err` for a name
    /// the library has.
    pub(crate) fn add_functions(&mut self, functions: Vec<FunctionDef>) -> Result<()> {
        let library = Library::extended(self.library.as_deref(), functions)?;
        self.library = Some(Arc::new(library));
        Ok(())
    }

    /// `base` where the library has no function of that name, else the first free
    /// `base_1`, `base_2`, ...
    pub(crate) fn unique_function_name(&self, base: &str) -> String {
        let taken = |name: &str| {
            self.library
                .as_ref()
                .is_some_and(|l| l.function(name).is_some())
        };
        if !taken(base) {
            return base.to_string();
        }
        (1..)
            .map(|i| format!("{base}_{i}"))
            .find(|name| !taken(name))
            .unwrap_or_default()
    }
}

/// Whether TensorFlow takes `name` as a function argument's: `[a-z][a-z0-9_]*`.
fn valid_arg_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}
