//! The functional ops: `While`, `If` and `PartitionedCall` (and their stateless twins)
//! call functions of the graph's library. Each function is instantiated once per device
//! (`crate::function`) as a session of its own over the caller's devices, that device
//! first, sharing the caller's variables, so a resource handle passed in reads and writes
//! the caller's variable.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use polytensor_core::{DataType, Error, Result, Scalar, Tensor};

use super::{locked, Session, Signature, Stop};
use crate::attr::Attrs;
use crate::function::{self, Instance};
use crate::graph::Node;
use crate::ops::kernels::Outputs;
use crate::ops::{Call, Value};

/// How deep calls may nest (a function that calls itself without end is an `Err`, not a
/// stack overflow).
const MAX_DEPTH: usize = 64;

thread_local! {
    /// The calls running on this thread, innermost last.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// A session's functions: those instantiated so far, by name and device.
#[derive(Default)]
pub(super) struct Functions {
    bodies: Mutex<HashMap<(String, usize), Arc<Body>>>,
}

/// A function ready to call: its session and what a call feeds and fetches.
struct Body {
    name: String,
    session: Session,
    signature: Signature,
}

impl Body {
    /// `Err` unless the function takes `args` and returns `rets` (where given), the dtypes
    /// node `node` gives and declares (`T`, `Tin`, `Tout`).
    fn check_types(&self, node: &str, args: &[DataType], rets: Option<&[DataType]>) -> Result<()> {
        let graph = &self.session.graph;
        let dtype = |&(node, index): &(usize, usize)| graph.nodes[node].outputs[index].0;
        let given: Vec<DataType> = self.signature.feeds.iter().map(dtype).collect();
        let returned: Vec<DataType> = self.signature.fetches.iter().map(dtype).collect();
        let mut checks = vec![("takes", &given, args)];
        if let Some(rets) = rets {
            checks.push(("returns", &returned, rets));
        }
        for (what, function, declared) in checks {
            if function[..] != declared[..] {
                return Err(Error::invalid(format!(
                    "Function '{}' {what} {}, but '{node}' declares {}",
                    self.name,
                    type_names(function),
                    type_names(declared)
                )));
            }
        }
        Ok(())
    }

    /// Run the function on `args`, stopping where the caller's `stop` says.
    fn call(&self, args: Vec<Value>, stop: &Stop) -> Result<Vec<Value>> {
        stop.check()?;
        if args.len() != self.signature.feeds.len() {
            return Err(Error::invalid(format!(
                "Function '{}' takes {} arguments, but {} were given",
                self.name,
                self.signature.feeds.len(),
                args.len()
            )));
        }
        let depth = DEPTH.with(|d| d.get());
        if depth >= MAX_DEPTH {
            return Err(Error::invalid(format!(
                "Function '{}': calls nest more than {MAX_DEPTH} deep (a function that calls \
                 itself without end?)",
                self.name
            )));
        }
        DEPTH.with(|d| d.set(depth + 1));
        let result = self
            .session
            .run_signature(self.signature.clone(), &args, stop);
        DEPTH.with(|d| d.set(depth));
        result
    }
}

impl Session {
    /// Run functional op `call` of `node` on device `device` with `inputs`, stopping where
    /// `stop` says (a `While` checks before each iteration).
    pub(super) fn call(
        &self,
        call: Call,
        node: &Node,
        device: usize,
        inputs: &[&Value],
        stop: &Stop,
    ) -> Result<Outputs> {
        let attrs = Attrs {
            node: &node.name,
            attrs: &node.attrs,
        };
        let values: Vec<Value> = inputs.iter().map(|&v| v.clone()).collect();
        let input_types: Vec<DataType> = node
            .inputs
            .iter()
            .map(|&(id, index)| self.graph.nodes[id].outputs[index].0)
            .collect();
        let output_types: Vec<DataType> = node.outputs.iter().map(|(dtype, _)| *dtype).collect();
        let outputs = match call {
            Call::While => {
                let cond = self.function(attrs.function("cond")?, device)?;
                let body = self.function(attrs.function("body")?, device)?;
                // A condition returns one tensor of any dtype (read as TensorFlow's truth).
                cond.check_types(&node.name, &input_types, None)?;
                body.check_types(&node.name, &input_types, Some(&output_types))?;
                let mut vars = values;
                while truth(&cond.call(vars.clone(), stop)?, &cond.name)? {
                    let next = body.call(vars, stop)?;
                    if next.len() != node.outputs.len() {
                        return Err(Error::invalid(format!(
                            "While body '{}' returns {} values for {} loop variables",
                            body.name,
                            next.len(),
                            node.outputs.len()
                        )));
                    }
                    vars = next;
                }
                vars
            }
            Call::If => {
                let Some((Value::Tensor(pred), args)) = values.split_first() else {
                    return Err(Error::invalid("If's condition must be a tensor"));
                };
                let branch = if to_bool(pred)? {
                    "then_branch"
                } else {
                    "else_branch"
                };
                let function = self.function(attrs.function(branch)?, device)?;
                let branch_args = input_types.get(1..).unwrap_or_default();
                function.check_types(&node.name, branch_args, Some(&output_types))?;
                function.call(args.to_vec(), stop)?
            }
            Call::Function => {
                let function = self.function(attrs.function("f")?, device)?;
                function.check_types(&node.name, &input_types, Some(&output_types))?;
                function.call(values, stop)?
            }
        };
        if outputs.len() != node.outputs.len() {
            return Err(Error::invalid(format!(
                "'{}' gives {} values for its {} outputs",
                node.name,
                outputs.len(),
                node.outputs.len()
            )));
        }
        Ok(outputs.into_iter().collect())
    }

    /// Function `name` instantiated for `device` (made on first use).
    fn function(&self, name: &str, device: usize) -> Result<Arc<Body>> {
        let key = (name.to_string(), device);
        if let Some(body) = locked(&self.functions.bodies).get(&key) {
            return Ok(body.clone());
        }
        let library = self.graph.library.as_ref().ok_or_else(|| {
            Error::invalid(format!(
                "Function '{name}' is called, but the graph has no function library"
            ))
        })?;
        let Instance {
            name,
            graph,
            args,
            rets,
            control_rets,
        } = function::instantiate(library, name)?;
        // The call's device first: the function's nodes that ask for none run there.
        let mut devices = self.devices.clone();
        devices.swap(0, device);
        let body = Arc::new(Body {
            name,
            session: Session {
                optimizations: self.optimizations,
                ..Session::sharing(
                    &graph,
                    devices,
                    self.soft_placement,
                    self.variables.clone(),
                    self.collectives.clone(),
                )
            },
            signature: Signature {
                feeds: args,
                fetches: rets,
                targets: control_rets,
            },
        });
        locked(&self.functions.bodies).insert(key, body.clone());
        Ok(body)
    }
}

/// A `While` condition's single result as TensorFlow reads it ([`to_bool`]).
fn truth(values: &[Value], function: &str) -> Result<bool> {
    match values {
        [Value::Tensor(t)] => to_bool(t),
        _ => Err(Error::invalid(format!(
            "While condition '{function}' must return one tensor, returned {} values",
            values.len()
        ))),
    }
}

/// TensorFlow's `ToBool` of a condition: a scalar's value (not zero, or not empty for a
/// string), or whether a tensor of any other shape has elements.
pub(super) fn to_bool(t: &Tensor) -> Result<bool> {
    if !t.dims().is_empty() {
        return Ok(t.num_elements() > 0);
    }
    if t.dtype() == DataType::String {
        return Ok(!t.to_strings()?[0].is_empty());
    }
    Ok(match t.to_scalars()?[0] {
        Scalar::Bool(b) => b,
        Scalar::I64(v) => v != 0,
        Scalar::U64(v) => v != 0,
        Scalar::F64(v) => v != 0.0,
        Scalar::C64(v) => v.re != 0.0 || v.im != 0.0,
    })
}

/// Dtypes as TensorFlow lists them: `[int32, float]`.
fn type_names(types: &[DataType]) -> String {
    let names: Vec<&str> = types
        .iter()
        .map(|&t| crate::ops::cpp_dtype_name(t))
        .collect();
    format!("[{}]", names.join(", "))
}
