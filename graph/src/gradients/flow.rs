//! Gradients through TensorFlow's functional control flow: `PartitionedCall`, `If` and
//! `While` and their stateful or stateless twins, whose bodies are functions of the graph's
//! library. Each gradient is a call too, of functions this module adds to the library (so
//! TensorFlow runs the graphs it writes):
//!
//! - A function's *gradient function* takes the function's arguments and the gradients of
//!   (some of) its results, runs the body again and [`Graph::gradients`] of it, and returns
//!   the gradients of the arguments asked for, zeros where none flows.
//! - `PartitionedCall`'s gradient calls its function's gradient function.
//! - `If`'s gradient is an `If` on the same condition whose branches are the branches'
//!   gradient functions.
//! - `While`'s gradient runs the loop once more, pushing each iteration's loop variables
//!   onto a TensorList per variable (`TensorListPushBack`), then a second `While` pops them
//!   back to front (`TensorListPopBack`) and calls the body's gradient function on each.
//!   The loop variables the body passes on unchanged (the weights a loop reads) are not
//!   recorded: the gradient loop carries them as they came in, and sums their gradients.
//!
//! TensorFlow's `cond_v2` and `while_v2` instead rewrite the forward op to return the
//! intermediates its gradient needs. A polytensor graph is append-only (an op's inputs come
//! before it), so the forward op stays as it is, and the gradient recomputes: the body once
//! more per iteration, and a `While` once more to record it (ARCHITECTURE.md).

use polytensor_core::{DataType, Error, PartialTensorShape, Result};

use super::{Forward, GradFn};
use crate::attr::{self, Attrs};
use crate::function::{self, Instance};
use crate::graph::{Graph, Output};

/// The gradient functions of the functional ops.
pub(super) fn registered(op_type: &str) -> Option<Option<GradFn>> {
    let function: GradFn = match op_type {
        "PartitionedCall" | "StatefulPartitionedCall" => call,
        "If" | "StatelessIf" => if_,
        "While" | "StatelessWhile" => while_,
        _ => return None,
    };
    Some(Some(function))
}

/// A function argument that gets a gradient, and the gradient's dtype: a resource
/// variable's is the dtype its reads give; a TensorList's is a list (`variant`) of its
/// elements' dtype.
#[derive(Clone, Copy, Debug)]
struct Wanted {
    arg: usize,
    dtype: DataType,
    /// A list's element dtype.
    element: Option<DataType>,
}

/// The name of function attribute `name` of the forward op.
fn function_named<'a>(forward: &'a Forward, name: &str) -> Result<&'a str> {
    Attrs {
        node: forward.op.name(),
        attrs: &forward.attrs,
    }
    .function(name)
}

/// The outputs with a gradient, in order, each with its gradient's dtype.
fn seeded(dys: &[Option<Output>]) -> Vec<(usize, DataType)> {
    dys.iter()
        .enumerate()
        .filter_map(|(i, dy)| Some((i, dy.as_ref()?.dtype())))
        .collect()
}

impl Graph {
    /// Function `name` of the library, instantiated.
    fn instance(&self, name: &str) -> Result<Instance> {
        let library = self.library.clone().ok_or_else(|| {
            Error::invalid(format!(
                "Function '{name}' is called, but the graph has no function library"
            ))
        })?;
        function::instantiate(&library, name)
    }

    /// Add the gradient function of `function`: its arguments are the function's, then one
    /// per result of `seeded` (that result's gradient, of the dtype given: a resource
    /// handle's is its variable's); its results the gradients of the arguments `wanted`,
    /// zeros where none flows. Returns its name.
    fn gradient_function(
        &mut self,
        function: Instance,
        seeded: &[(usize, DataType)],
        wanted: &[Wanted],
    ) -> Result<String> {
        let Instance {
            name,
            mut graph,
            args,
            rets,
            ..
        } = function;
        // The library as it is now: functions added since the instance was made included.
        graph.library = self.library.clone();
        let args = outputs_at(&graph, &args)?;
        let seeded_rets: Vec<(usize, usize)> = seeded.iter().map(|&(r, _)| rets[r]).collect();
        let ys = outputs_at(&graph, &seeded_rets)?;
        let dys: Vec<Output> = ys
            .iter()
            .zip(seeded)
            .enumerate()
            .map(|(k, (y, &(_, dtype)))| {
                let shape = match y.dtype() {
                    DataType::Resource => PartialTensorShape::unknown_rank(),
                    _ => y.shape().clone(),
                };
                graph.placeholder_named(&format!("dy_{k}"), dtype, &shape)
            })
            .collect::<Result<_>>()?;
        let xs: Vec<Output> = wanted.iter().map(|w| args[w.arg].clone()).collect();
        let grads = graph.gradients(&ys, &xs, Some(&dys))?;
        let results: Vec<Output> = grads
            .into_iter()
            .zip(wanted)
            .map(|(grad, w)| match grad {
                Some(grad) => Ok(grad),
                None => graph.zeros_for(&args[w.arg], w),
            })
            .collect::<Result<_>>()?;
        // The body's own gradients may have added functions (a loop in a loop).
        self.library = graph.library.clone();
        let grad_name = self.unique_function_name(&format!("{name}_grad"));
        let def = graph.function_def(&grad_name, &[args, dys].concat(), &results)?;
        self.add_functions(vec![def])?;
        Ok(grad_name)
    }

    /// A zero gradient of what `x` stands for, as `w` says: zeros of `x` itself, of the
    /// variable a resource handle `x` points to, or unset elements of list `x`'s length.
    fn zeros_for(&mut self, x: &Output, w: &Wanted) -> Result<Output> {
        let value = match (x.dtype(), w.element) {
            (DataType::Variant, Some(element)) => return self.zeros_list(x, element),
            (DataType::Resource, _) => self
                .op("ReadVariableOp")
                .input(x)
                .attr("dtype", w.dtype)
                .build_output()?,
            _ => x.clone(),
        };
        self.op("ZerosLike").input(&value).build_output()
    }

    /// A call of function `name` (`op_type` `PartitionedCall` or `StatefulPartitionedCall`)
    /// on `inputs`, returning `outputs` dtypes.
    fn call_function(
        &mut self,
        op_type: &str,
        name: &str,
        inputs: &[Output],
        outputs: &[DataType],
    ) -> Result<Vec<Output>> {
        let input_types: Vec<DataType> = inputs.iter().map(Output::dtype).collect();
        let op = self
            .op(op_type)
            .inputs(inputs)
            .attr("Tin", attr::type_list(&input_types))
            .attr("Tout", attr::type_list(outputs))
            .attr("f", attr::function(name))
            .build()?;
        self.outputs(&op)
    }
}

/// What argument `arg` of `functions` gets as its gradient, if anything: a float, itself;
/// a resource handle one of them reads, its variable's dtype; a TensorList of floats one
/// of them reads or writes, a list of its element dtype.
fn gradient_of(functions: &[&Instance], arg: usize, dtype: DataType) -> Option<Wanted> {
    let wanted = |dtype, element| {
        Some(Wanted {
            arg,
            dtype,
            element,
        })
    };
    if dtype.is_float() {
        return wanted(dtype, None);
    }
    let ops: &[&str] = match dtype {
        DataType::Resource => &["ReadVariableOp", "ResourceGather"],
        DataType::Variant => &[
            "TensorListGetItem",
            "TensorListSetItem",
            "TensorListStack",
            "TensorListPopBack",
            "TensorListPushBack",
        ],
        _ => return None,
    };
    let attr = if dtype == DataType::Resource {
        "dtype"
    } else {
        "element_dtype"
    };
    let found = functions.iter().find_map(|f| {
        let (placeholder, _) = *f.args.get(arg)?;
        consumers(&f.graph, placeholder).into_iter().find_map(|n| {
            let node = &f.graph.nodes[n];
            let attrs = Attrs {
                node: &node.name,
                attrs: &node.attrs,
            };
            ops.contains(&node.op_type.as_ref())
                .then(|| attrs.dtype(attr).ok())
                .flatten()
        })
    })?;
    match dtype {
        DataType::Resource => wanted(found, None),
        _ => found.is_float().then_some(Wanted {
            arg,
            dtype: DataType::Variant,
            element: Some(found),
        }),
    }
}

/// The ops that read output 0 of node `source` directly or through `Identity`s (those
/// `Identity`s not included).
fn consumers(graph: &Graph, source: usize) -> Vec<usize> {
    let mut found = Vec::new();
    let mut from = vec![source];
    while let Some(s) = from.pop() {
        for (n, node) in graph.nodes.iter().enumerate().skip(s + 1) {
            if node.inputs.first() != Some(&(s, 0)) && !node.inputs.contains(&(s, 0)) {
                continue;
            }
            if node.op_type.as_ref() == "Identity" {
                from.push(n);
            } else {
                found.push(n);
            }
        }
    }
    found
}

/// The arguments of `functions` (one signature) that get a gradient: the forward's inputs
/// from `first` on that `wanted` marks, where one flows.
fn wanted_args(
    forward: &Forward,
    first: usize,
    wanted: &[bool],
    functions: &[&Instance],
) -> Vec<Wanted> {
    forward.inputs[first..]
        .iter()
        .enumerate()
        .filter(|&(i, _)| wanted[first + i])
        .filter_map(|(arg, input)| gradient_of(functions, arg, input.dtype()))
        .collect()
}

/// The forward's gradients: `grads[k]` for argument `wanted[k].arg`, input `first + arg`.
fn by_input(
    forward: &Forward,
    first: usize,
    wanted: &[Wanted],
    grads: Vec<Output>,
) -> Vec<Option<Output>> {
    let mut out = vec![None; forward.inputs.len()];
    for (w, grad) in wanted.iter().zip(grads) {
        out[first + w.arg] = Some(grad);
    }
    out
}

/// The present gradients `dys` names, in order.
fn present(dys: &[Option<Output>]) -> Vec<Output> {
    dys.iter().flatten().cloned().collect()
}

/// `PartitionedCall(f)`: a call of `f`'s gradient function.
fn call(g: &mut Graph, forward: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let function = g.instance(function_named(forward, "f")?)?;
    let wanted = wanted_args(forward, 0, &forward.wanted, &[&function]);
    if wanted.is_empty() {
        return Ok(vec![None; forward.inputs.len()]);
    }
    let name = g.gradient_function(function, &seeded(dys), &wanted)?;
    let inputs = [forward.inputs.clone(), present(dys)].concat();
    let dtypes: Vec<DataType> = wanted.iter().map(|w| w.dtype).collect();
    let grads = g.call_function(forward.op.op_type(), &name, &inputs, &dtypes)?;
    Ok(by_input(forward, 0, &wanted, grads))
}

/// `If(cond, args)`: an `If` on the same condition of the branches' gradient functions.
fn if_(g: &mut Graph, forward: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let then_branch = g.instance(function_named(forward, "then_branch")?)?;
    let else_branch = g.instance(function_named(forward, "else_branch")?)?;
    let wanted = wanted_args(forward, 1, &forward.wanted, &[&then_branch, &else_branch]);
    if wanted.is_empty() {
        return Ok(vec![None; forward.inputs.len()]);
    }
    let seeded = seeded(dys);
    let then_grad = g.gradient_function(then_branch, &seeded, &wanted)?;
    let else_grad = g.gradient_function(else_branch, &seeded, &wanted)?;
    let args = [forward.inputs[1..].to_vec(), present(dys)].concat();
    let arg_types: Vec<DataType> = args.iter().map(Output::dtype).collect();
    let dtypes: Vec<DataType> = wanted.iter().map(|w| w.dtype).collect();
    let op = g
        .op(forward.op.op_type())
        .input(&forward.inputs[0])
        .inputs(&args)
        .attr("Tcond", forward.inputs[0].dtype())
        .attr("Tin", attr::type_list(&arg_types))
        .attr("Tout", attr::type_list(&dtypes))
        .attr("then_branch", attr::function(&then_grad))
        .attr("else_branch", attr::function(&else_grad))
        .build()?;
    let grads = g.outputs(&op)?;
    Ok(by_input(forward, 1, &wanted, grads))
}

/// Whether the body returns loop variable `k` as it came in (through `Identity`s).
fn passes_on(body: &Instance, k: usize) -> bool {
    let (mut node, mut index) = body.rets[k];
    loop {
        if (node, index) == body.args[k] {
            return true;
        }
        let n = &body.graph.nodes[node];
        match (n.op_type.as_ref(), n.inputs.first()) {
            ("Identity", Some(&input)) => (node, index) = input,
            _ => return false,
        }
    }
}

/// Whether the body only writes loop variable `k`, a TensorList, element by element
/// (`TensorListSetItem`s, `Identity`s, nothing else reading it) and returns what it wrote:
/// Keras's recurrent layers' outputs. The gradient needs no record of such a list: its
/// final value stands in for each iteration's (the gradients of the writes depend on the
/// positions written, not on the list's elements).
fn written_only(body: &Instance, k: usize) -> bool {
    let graph = &body.graph;
    let mut at = body.args[k];
    loop {
        let readers: Vec<usize> = (at.0 + 1..graph.nodes.len())
            .filter(|&n| graph.nodes[n].inputs.contains(&at))
            .collect();
        if at == body.rets[k] {
            return readers.is_empty();
        }
        let [reader] = readers[..] else {
            return false;
        };
        let node = &graph.nodes[reader];
        let passes = match node.op_type.as_ref() {
            "Identity" => true,
            "TensorListSetItem" => node.inputs.first() == Some(&at),
            _ => false,
        };
        if !passes {
            return false;
        }
        at = (reader, 0);
    }
}

/// `While(vars)`: record each iteration's loop variables, then a loop back over them of the
/// body's gradient function (see the module's documentation).
fn while_(g: &mut Graph, forward: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let cond = g.instance(function_named(forward, "cond")?)?;
    let body = g.instance(function_named(forward, "body")?)?;
    let vars = &forward.inputs;
    let dtypes: Vec<DataType> = vars.iter().map(Output::dtype).collect();
    // Each variable is recorded, or stands for itself in every iteration: as it came in
    // (the body passes it on), or as it ends (a list the body only writes).
    let mut recorded = Vec::new();
    let mut kept: Vec<(usize, Output)> = Vec::new();
    for k in 0..vars.len() {
        if passes_on(&body, k) {
            kept.push((k, vars[k].clone()));
        } else if dtypes[k] == DataType::Variant && written_only(&body, k) {
            kept.push((k, forward.outputs[k].clone()));
        } else if matches!(dtypes[k], DataType::Variant | DataType::Resource) {
            return Err(Error::invalid(format!(
                "gradients through '{}': its loop variable {k} is a {} the body changes and \
                 reads, which the gradient cannot record yet",
                forward.op.name(),
                dtypes[k]
            )));
        } else {
            recorded.push(k);
        }
    }
    // Every variable a gradient flows through: the gradient of one needs the others'.
    let wanted = wanted_args(forward, 0, &vec![true; vars.len()], &[&body]);
    if wanted.is_empty() {
        return Ok(vec![None; vars.len()]);
    }
    // A zero gradient of variable `w` where none came back.
    let zeros = |g: &mut Graph, w: &Wanted| match dtypes[w.arg] {
        DataType::Resource => g.zeros_for(&vars[w.arg], w),
        _ => g.zeros_for(&forward.outputs[w.arg], w),
    };
    if recorded.is_empty() {
        if kept.iter().any(|(k, _)| !passes_on(&body, *k)) {
            return Err(Error::invalid(format!(
                "gradients through '{}': the loop changes only lists it writes, so the \
                 gradient cannot count its iterations",
                forward.op.name()
            )));
        }
        // Nothing changes: the loop ran no iteration (or never ends).
        let grads = wanted
            .iter()
            .map(|w| match &dys[w.arg] {
                Some(dy) => Ok(dy.clone()),
                None => zeros(g, w),
            })
            .collect::<Result<_>>()?;
        return Ok(by_input(forward, 0, &wanted, grads));
    }
    let stateful = forward.op.op_type() == "While";
    let records = g.record_loop(forward, cond, &body, &recorded)?;
    let all_rets: Vec<(usize, DataType)> = wanted.iter().map(|w| (w.arg, w.dtype)).collect();
    let body_name = body.name.clone();
    let body_grad = g.gradient_function(body, &all_rets, &wanted)?;
    let kept_vars: Vec<usize> = kept.iter().map(|(k, _)| *k).collect();
    let (grad_cond, grad_body) = g.gradient_loop(
        &body_name,
        &body_grad,
        &dtypes,
        (&recorded, &kept_vars),
        &wanted,
        stateful,
    )?;
    // The gradient loop's variables: the iterations left, the gradients, the records, and
    // the variables that stand for themselves.
    let count = g.op("TensorListLength").input(&records[0]).build_output()?;
    let mut inputs = vec![count];
    for w in &wanted {
        inputs.push(match &dys[w.arg] {
            Some(dy) => dy.clone(),
            None => zeros(g, w)?,
        });
    }
    inputs.extend(records);
    inputs.extend(kept.into_iter().map(|(_, value)| value));
    let outputs = g.loop_like(forward, &inputs, (&grad_cond, &grad_body))?;
    let grads = outputs[1..=wanted.len()].to_vec();
    Ok(by_input(forward, 0, &wanted, grads))
}

impl Graph {
    /// The forward loop run once more, recording at the start of each iteration each of
    /// the `carried` loop variables on a TensorList: those lists.
    fn record_loop(
        &mut self,
        forward: &Forward,
        cond: Instance,
        body: &Instance,
        carried: &[usize],
    ) -> Result<Vec<Output>> {
        let vars = &forward.inputs;
        let scalar = PartialTensorShape::new(&[])?;
        let recorded = |g: &mut Graph, with: &mut Vec<Output>| -> Result<Vec<Output>> {
            (0..carried.len())
                .map(|j| {
                    let list =
                        g.placeholder_named(&format!("record_{j}"), DataType::Variant, &scalar)?;
                    with.push(list.clone());
                    Ok(list)
                })
                .collect()
        };
        // The condition, taking the lists too.
        let mut cond_graph = cond.graph.clone();
        let mut cond_args = outputs_at(&cond_graph, &cond.args)?;
        recorded(&mut cond_graph, &mut cond_args)?;
        let cond_rets = outputs_at(&cond_graph, &cond.rets)?;
        let cond_name = self.unique_function_name(&format!("{}_record", cond.name));
        let cond_def = cond_graph.function_def(&cond_name, &cond_args, &cond_rets)?;
        self.add_functions(vec![cond_def])?;
        // The body, pushing each variable as it came in onto its list.
        let mut body_graph = body.graph.clone();
        let mut body_args = outputs_at(&body_graph, &body.args)?;
        let lists = recorded(&mut body_graph, &mut body_args)?;
        let mut body_rets = outputs_at(&body_graph, &body.rets)?;
        for (list, &k) in lists.iter().zip(carried) {
            let pushed = body_graph
                .op("TensorListPushBack")
                .input(list)
                .input(&body_args[k])
                .build_output()?;
            body_rets.push(pushed);
        }
        let body_name = self.unique_function_name(&format!("{}_record", body.name));
        let body_def = body_graph.function_def(&body_name, &body_args, &body_rets)?;
        self.add_functions(vec![body_def])?;
        let unknown = self.constant(-1i32)?;
        let none = self.constant(0i32)?;
        let mut inputs = vars.clone();
        for &k in carried {
            inputs.push(self.unset_list(&unknown, &none, vars[k].dtype())?);
        }
        let outputs = self.loop_like(forward, &inputs, (&cond_name, &body_name))?;
        Ok(outputs[vars.len()..].to_vec())
    }

    /// A loop of the forward's op type and `parallel_iterations` over `inputs`, calling
    /// functions `cond` and `body`: its outputs.
    fn loop_like(
        &mut self,
        forward: &Forward,
        inputs: &[Output],
        (cond, body): (&str, &str),
    ) -> Result<Vec<Output>> {
        let types: Vec<DataType> = inputs.iter().map(Output::dtype).collect();
        let op = self
            .op(forward.op.op_type())
            .inputs(inputs)
            .attr("T", attr::type_list(&types))
            .attr("cond", attr::function(cond))
            .attr("body", attr::function(body))
            .attr("parallel_iterations", parallel_iterations(forward)?)
            .build()?;
        self.outputs(&op)
    }

    /// The gradient loop's condition and body (functions added to the library): over
    /// `(iterations left, the gradients of the wanted variables, the records of the
    /// variables `recorded`, the variables `kept` as they stand)`, each iteration pops one
    /// record of each recorded variable and calls `body_grad` on them and the kept ones.
    fn gradient_loop(
        &mut self,
        body: &str,
        body_grad: &str,
        dtypes: &[DataType],
        (recorded, kept): (&[usize], &[usize]),
        wanted: &[Wanted],
        stateful: bool,
    ) -> Result<(String, String)> {
        let scalar = PartialTensorShape::new(&[])?;
        let unknown = PartialTensorShape::unknown_rank();
        let args = |g: &mut Graph| -> Result<Vec<Output>> {
            let mut args = vec![g.placeholder_named("iterations", DataType::Int32, &scalar)?];
            for (d, w) in wanted.iter().enumerate() {
                args.push(g.placeholder_named(&format!("grad_{d}"), w.dtype, &unknown)?);
            }
            for j in 0..recorded.len() {
                args.push(g.placeholder_named(
                    &format!("record_{j}"),
                    DataType::Variant,
                    &scalar,
                )?);
            }
            for &k in kept {
                args.push(g.placeholder_named(&format!("var_{k}"), dtypes[k], &unknown)?);
            }
            Ok(args)
        };
        let mut cond = Graph::new();
        let cond_args = args(&mut cond)?;
        let zero = cond.constant(0i32)?;
        let more = cond.binary("Greater", "more", &cond_args[0], &zero)?;
        let cond_name = self.unique_function_name(&format!("{body}_grad_cond"));
        let cond_def = cond.function_def(&cond_name, &cond_args, &[more])?;

        let mut g = Graph::new();
        g.library = self.library.clone();
        let loop_args = args(&mut g)?;
        let iterations = &loop_args[0];
        let (grads, rest) = loop_args[1..].split_at(wanted.len());
        let (records, kept_values) = rest.split_at(recorded.len());
        let one = g.constant(1i32)?;
        let left = g.binary("Sub", "left", iterations, &one)?;
        let element_shape = g.constant(-1i32)?;
        let mut state: Vec<Option<Output>> = vec![None; dtypes.len()];
        let mut popped = Vec::with_capacity(recorded.len());
        for (record, &k) in records.iter().zip(recorded) {
            let op = g
                .op("TensorListPopBack")
                .input(record)
                .input(&element_shape)
                .attr("element_dtype", dtypes[k])
                .build()?;
            let outputs = g.outputs(&op)?;
            popped.push(outputs[0].clone());
            state[k] = Some(outputs[1].clone());
        }
        for (value, &k) in kept_values.iter().zip(kept) {
            state[k] = Some(value.clone());
        }
        let mut call_inputs: Vec<Output> = state.into_iter().flatten().collect();
        call_inputs.extend_from_slice(grads);
        let grad_types: Vec<DataType> = wanted.iter().map(|w| w.dtype).collect();
        let op_type = if stateful {
            "StatefulPartitionedCall"
        } else {
            "PartitionedCall"
        };
        let new_grads = g.call_function(op_type, body_grad, &call_inputs, &grad_types)?;
        let rets = [vec![left], new_grads, popped, kept_values.to_vec()].concat();
        let body_name = self.unique_function_name(&format!("{body}_grad_body"));
        let body_def = g.function_def(&body_name, &loop_args, &rets)?;
        self.add_functions(vec![cond_def, body_def])?;
        Ok((cond_name, body_name))
    }
}

/// The forward loop's `parallel_iterations` (TensorFlow's default 10 where absent).
fn parallel_iterations(forward: &Forward) -> Result<i64> {
    Attrs {
        node: forward.op.name(),
        attrs: &forward.attrs,
    }
    .int_or("parallel_iterations", 10)
}

/// The outputs `(node, index)` of `graph`.
fn outputs_at(graph: &Graph, at: &[(usize, usize)]) -> Result<Vec<Output>> {
    at.iter()
        .map(|&(node, index)| graph.output(&graph.handle(node), index))
        .collect()
}
