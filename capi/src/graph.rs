//! Graphs and sessions, after TensorFlow's `c_api.h`: `PT_Graph` (import a `GraphDef`,
//! find operations, read their outputs' dtypes and shapes, build operations, write the
//! `GraphDef`), and `PT_Session` (`PT_SessionRun` with feeds, fetches and targets).
//!
//! As in TensorFlow, a `PT_Operation*` belongs to its graph and stays valid while the graph
//! lives; a `PT_Output` is an operation and an output index. A session keeps the graph it
//! was made on alive, and takes in operations added to it since before each run
//! (TensorFlow's session extension). Unlike TensorFlow's `TF_NewOperation`, a name that is
//! taken is made unique (`name_1`), as the Rust builder does.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CString};
use std::ptr::null_mut;
use std::sync::{Arc, Mutex, MutexGuard};

use polytensor::graph::{
    AttrValue, Graph, ImportOptions, Operation, Output, Session, SessionOptions,
};
use polytensor::{DataType, Device, Error, Tensor};

use crate::proto::PT_Buffer;
use crate::status::{arg, array, guard, quietly, PT_Status};
use crate::tensor::{text, PT_DataType, PT_Tensor};

/// A graph's state: the graph, and the handles of its operations given out so far.
struct GraphState {
    graph: Graph,
    /// Handles by operation name, boxed so that their addresses stay put.
    handles: HashMap<String, Box<PT_Operation>>,
}

impl GraphState {
    /// The handle of `op` (made on first use; valid while the graph lives).
    fn handle(&mut self, op: Operation) -> Result<*mut PT_Operation, Error> {
        if let Some(handle) = self.handles.get_mut(op.name()) {
            return Ok(handle.as_mut() as *mut PT_Operation);
        }
        let outputs = self.graph.outputs(&op)?.iter().map(Output::dtype).collect();
        let c_string = |s: &str| CString::new(s).unwrap_or_default();
        let handle = Box::new(PT_Operation {
            name: c_string(op.name()),
            op_type: c_string(op.op_type()),
            outputs,
            op,
        });
        let name = handle.op.name().to_string();
        let slot = self.handles.entry(name).or_insert(handle);
        Ok(slot.as_mut() as *mut PT_Operation)
    }
}

/// A graph (TensorFlow's `TF_Graph`).
pub struct PT_Graph {
    state: Arc<Mutex<GraphState>>,
}

/// An operation of a graph (TensorFlow's `TF_Operation`), owned by the graph.
pub struct PT_Operation {
    op: Operation,
    name: CString,
    op_type: CString,
    outputs: Vec<DataType>,
}

/// An output of an operation (TensorFlow's `TF_Output`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PT_Output {
    /// The operation.
    pub oper: *mut PT_Operation,
    /// Which of its outputs.
    pub index: c_int,
}

/// Options of [`PT_GraphImportGraphDef`] (TensorFlow's `TF_ImportGraphDefOptions`).
#[derive(Default)]
pub struct PT_ImportGraphDefOptions {
    prefix: String,
    input_map: Vec<(String, (Operation, usize))>,
}

/// An operation being built (TensorFlow's `TF_OperationDescription`), consumed by
/// [`PT_FinishOperation`].
pub struct PT_OperationDescription {
    state: Arc<Mutex<GraphState>>,
    op_type: String,
    name: String,
    inputs: Vec<(Operation, usize)>,
    control_inputs: Vec<Operation>,
    attrs: Vec<(String, AttrValue)>,
    device: String,
    /// The first error of a setter (inputs and attributes take no status, as in
    /// TensorFlow): [`PT_FinishOperation`] reports it.
    error: Option<String>,
}

/// Options of [`PT_NewSession`]: its devices and placement.
pub struct PT_SessionOptions {
    devices: Vec<Arc<dyn Device>>,
    soft_placement: bool,
}

/// A session (TensorFlow's `TF_Session`).
pub struct PT_Session {
    state: Arc<Mutex<GraphState>>,
    session: Mutex<Option<Session>>,
}

/// The guarded value, whatever a panicking thread left (the graph is whole between calls).
fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The graph output `output` names.
///
/// # Safety
///
/// `output.oper` is NULL or an operation handle of a live graph.
unsafe fn output_of(output: &PT_Output) -> Result<(Operation, usize), Error> {
    // SAFETY: the caller's contract.
    let op = unsafe { arg(output.oper as *const PT_Operation, "PT_Output.oper") }?;
    let index = usize::try_from(output.index)
        .map_err(|_| Error::invalid(format!("output index {} is negative", output.index)))?;
    Ok((op.op.clone(), index))
}

/// A new, empty graph. Free it with [`PT_DeleteGraph`].
#[no_mangle]
pub extern "C" fn PT_NewGraph() -> *mut PT_Graph {
    Box::into_raw(Box::new(PT_Graph {
        state: Arc::new(Mutex::new(GraphState {
            graph: Graph::new(),
            handles: HashMap::new(),
        })),
    }))
}

/// Free a graph (NULL is ignored); its operation handles go with it. Sessions made on it
/// keep what they need.
///
/// # Safety
///
/// `graph` is NULL or from [`PT_NewGraph`], not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn PT_DeleteGraph(graph: *mut PT_Graph) {
    if !graph.is_null() {
        // SAFETY: the caller's contract.
        quietly((), || drop(unsafe { Box::from_raw(graph) }));
    }
}

/// New import options: no prefix, no input mapping. Free with
/// [`PT_DeleteImportGraphDefOptions`].
#[no_mangle]
pub extern "C" fn PT_NewImportGraphDefOptions() -> *mut PT_ImportGraphDefOptions {
    Box::into_raw(Box::default())
}

/// Free import options (NULL is ignored).
///
/// # Safety
///
/// `options` is NULL or from [`PT_NewImportGraphDefOptions`], not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn PT_DeleteImportGraphDefOptions(options: *mut PT_ImportGraphDefOptions) {
    if !options.is_null() {
        // SAFETY: the caller's contract.
        drop(unsafe { Box::from_raw(options) });
    }
}

/// Import under `prefix` (made unique, as a name scope; `""` for none).
///
/// # Safety
///
/// `options` is a live handle and `prefix` a NUL-terminated string; `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_ImportGraphDefOptionsSetPrefix(
    options: *mut PT_ImportGraphDefOptions,
    prefix: *const c_char,
    status: *mut PT_Status,
) {
    guard(status, (), || {
        // SAFETY: the caller's contract.
        let options =
            unsafe { options.as_mut() }.ok_or_else(|| Error::invalid("options is NULL"))?;
        // SAFETY: the caller's contract.
        options.prefix = unsafe { text(prefix, "prefix") }?.to_string();
        Ok(())
    })
}

/// Replace output `src_index` of the GraphDef's node `src_name` by `dst`, an output of the
/// graph imported into.
///
/// # Safety
///
/// `options` is a live handle, `src_name` NUL-terminated, `dst.oper` an operation of a live
/// graph; `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_ImportGraphDefOptionsAddInputMapping(
    options: *mut PT_ImportGraphDefOptions,
    src_name: *const c_char,
    src_index: c_int,
    dst: PT_Output,
    status: *mut PT_Status,
) {
    guard(status, (), || {
        // SAFETY: the caller's contract.
        let options =
            unsafe { options.as_mut() }.ok_or_else(|| Error::invalid("options is NULL"))?;
        // SAFETY: the caller's contract.
        let name = unsafe { text(src_name, "src_name") }?;
        // SAFETY: the caller's contract.
        let target = unsafe { output_of(&dst) }?;
        options
            .input_map
            .push((format!("{name}:{src_index}"), target));
        Ok(())
    })
}

/// Import the serialized `GraphDef` of `len` bytes at `proto` into `graph`
/// (`tf.graph_util.import_graph_def`); `options` may be NULL. On error nothing is added.
///
/// # Safety
///
/// `graph` is a live graph, `proto` points to `len` readable bytes, `options` is NULL or
/// live; `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_GraphImportGraphDef(
    graph: *mut PT_Graph,
    proto: *const c_void,
    len: usize,
    options: *const PT_ImportGraphDefOptions,
    status: *mut PT_Status,
) {
    guard(status, (), || {
        // SAFETY: the caller's contract.
        let graph = unsafe { arg(graph as *const PT_Graph, "graph") }?;
        let len = i32::try_from(len).map_err(|_| Error::invalid("GraphDef over 2 GiB"))?;
        // SAFETY: the caller's contract: `len` readable bytes.
        let bytes = unsafe { array(proto as *const u8, len, "proto") }?;
        let def = polytensor::graph::proto::GraphDef::decode_bytes(bytes)?;
        // SAFETY: the caller's contract.
        let options = unsafe { options.as_ref() };
        let mut state = locked(&graph.state);
        let input_map = options
            .map(|o| {
                o.input_map
                    .iter()
                    .map(|(name, (op, index))| Ok((name.clone(), state.graph.output(op, *index)?)))
                    .collect::<Result<Vec<_>, Error>>()
            })
            .transpose()?
            .unwrap_or_default();
        let import = ImportOptions {
            prefix: options.map(|o| o.prefix.clone()).unwrap_or_default(),
            input_map,
            return_elements: Vec::new(),
        };
        state.graph.import_graph_def(&def, &import)?;
        Ok(())
    })
}

/// The graph as a serialized `GraphDef`, in a buffer freed with
/// [`PT_DeleteBuffer`](crate::proto::PT_DeleteBuffer). NULL on error.
///
/// # Safety
///
/// `graph` is a live graph; `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_GraphToGraphDef(
    graph: *mut PT_Graph,
    status: *mut PT_Status,
) -> *mut PT_Buffer {
    guard(status, null_mut(), || {
        // SAFETY: the caller's contract.
        let graph = unsafe { arg(graph as *const PT_Graph, "graph") }?;
        let bytes = locked(&graph.state).graph.to_graph_def_bytes();
        Ok(PT_Buffer::boxed(bytes))
    })
}

/// The operation named `name`, or NULL if the graph has none.
///
/// # Safety
///
/// `graph` is a live graph and `name` NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn PT_GraphOperationByName(
    graph: *mut PT_Graph,
    name: *const c_char,
) -> *mut PT_Operation {
    guard(null_mut(), null_mut(), || {
        // SAFETY: the caller's contract.
        let graph = unsafe { arg(graph as *const PT_Graph, "graph") }?;
        // SAFETY: the caller's contract.
        let name = unsafe { text(name, "name") }?;
        let mut state = locked(&graph.state);
        match state.graph.operation(name) {
            Some(op) => state.handle(op),
            None => Ok(null_mut()),
        }
    })
}

/// The operation's name, valid while its graph lives ("" for NULL).
///
/// # Safety
///
/// `oper` is NULL or an operation of a live graph.
#[no_mangle]
pub unsafe extern "C" fn PT_OperationName(oper: *const PT_Operation) -> *const c_char {
    // SAFETY: the caller's contract.
    unsafe { oper.as_ref() }.map_or(c"".as_ptr(), |op| op.name.as_ptr())
}

/// The operation's type (`AddV2`), valid while its graph lives ("" for NULL).
///
/// # Safety
///
/// `oper` is NULL or an operation of a live graph.
#[no_mangle]
pub unsafe extern "C" fn PT_OperationOpType(oper: *const PT_Operation) -> *const c_char {
    // SAFETY: the caller's contract.
    unsafe { oper.as_ref() }.map_or(c"".as_ptr(), |op| op.op_type.as_ptr())
}

/// How many outputs the operation has (-1 for NULL).
///
/// # Safety
///
/// `oper` is NULL or an operation of a live graph.
#[no_mangle]
pub unsafe extern "C" fn PT_OperationNumOutputs(oper: *const PT_Operation) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { oper.as_ref() }.map_or(-1, |op| op.outputs.len() as c_int)
}

/// The dtype of an output (0 for a NULL operation or an index out of range).
///
/// # Safety
///
/// `output.oper` is NULL or an operation of a live graph.
#[no_mangle]
pub unsafe extern "C" fn PT_OperationOutputType(output: PT_Output) -> PT_DataType {
    // SAFETY: the caller's contract.
    let Some(op) = (unsafe { output.oper.as_ref() }) else {
        return 0;
    };
    usize::try_from(output.index)
        .ok()
        .and_then(|i| op.outputs.get(i))
        .map_or(0, |dtype| dtype.as_i32())
}

/// The static rank of an output, -1 where it is unknown.
///
/// # Safety
///
/// `graph` is a live graph, `output.oper` one of its operations; `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_GraphGetTensorNumDims(
    graph: *mut PT_Graph,
    output: PT_Output,
    status: *mut PT_Status,
) -> c_int {
    guard(status, -1, || {
        // SAFETY: the caller's contract.
        let graph = unsafe { arg(graph as *const PT_Graph, "graph") }?;
        // SAFETY: the caller's contract.
        let (op, index) = unsafe { output_of(&output) }?;
        let state = locked(&graph.state);
        let out = state.graph.output(&op, index)?;
        Ok(out.shape().dims().map_or(-1, |d| d.len() as c_int))
    })
}

/// The static shape of an output into `dims` (`num_dims` of them, the rank from
/// [`PT_GraphGetTensorNumDims`]), -1 for an unknown dim.
///
/// # Safety
///
/// `graph` is a live graph, `output.oper` one of its operations, `dims` writable for
/// `num_dims` values; `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_GraphGetTensorShape(
    graph: *mut PT_Graph,
    output: PT_Output,
    dims: *mut i64,
    num_dims: c_int,
    status: *mut PT_Status,
) {
    guard(status, (), || {
        // SAFETY: the caller's contract.
        let graph = unsafe { arg(graph as *const PT_Graph, "graph") }?;
        // SAFETY: the caller's contract.
        let (op, index) = unsafe { output_of(&output) }?;
        let state = locked(&graph.state);
        let out = state.graph.output(&op, index)?;
        let known = out
            .shape()
            .dims()
            .ok_or_else(|| Error::invalid(format!("{} has an unknown rank", out.name())))?;
        if usize::try_from(num_dims).ok() != Some(known.len()) {
            return Err(Error::invalid(format!(
                "{} has rank {}, not {num_dims}",
                out.name(),
                known.len()
            )));
        }
        if known.is_empty() {
            return Ok(());
        }
        if dims.is_null() {
            return Err(Error::invalid("dims is NULL"));
        }
        for (i, d) in known.iter().enumerate() {
            // SAFETY: the caller's contract: `num_dims` writable values.
            unsafe { *dims.add(i) = d.map_or(-1, |d| d as i64) };
        }
        Ok(())
    })
}

/// Start building an operation of type `op_type` named `name` in `graph`, finished (and
/// freed) by [`PT_FinishOperation`]. NULL on error.
///
/// # Safety
///
/// `graph` is a live graph, `op_type` and `name` NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn PT_NewOperation(
    graph: *mut PT_Graph,
    op_type: *const c_char,
    name: *const c_char,
) -> *mut PT_OperationDescription {
    guard(null_mut(), null_mut(), || {
        // SAFETY: the caller's contract.
        let graph = unsafe { arg(graph as *const PT_Graph, "graph") }?;
        Ok(Box::into_raw(Box::new(PT_OperationDescription {
            state: graph.state.clone(),
            // SAFETY: the caller's contract.
            op_type: unsafe { text(op_type, "op_type") }?.to_string(),
            // SAFETY: the caller's contract.
            name: unsafe { text(name, "name") }?.to_string(),
            inputs: Vec::new(),
            control_inputs: Vec::new(),
            attrs: Vec::new(),
            device: String::new(),
            error: None,
        })))
    })
}

/// Apply `change` to a live description (ignoring NULL); a failure is kept in the
/// description for [`PT_FinishOperation`] (and set in `status`, where there is one).
///
/// # Safety
///
/// `desc` is NULL or a live description.
unsafe fn describe(
    desc: *mut PT_OperationDescription,
    status: *mut PT_Status,
    change: impl FnOnce(&mut PT_OperationDescription) -> Result<(), Error>,
) {
    guard(status, (), || {
        // SAFETY: the caller's contract.
        let desc = unsafe { desc.as_mut() }.ok_or_else(|| Error::invalid("desc is NULL"))?;
        change(desc).inspect_err(|e| {
            desc.error.get_or_insert_with(|| e.to_string());
        })
    })
}

/// Append a data input.
///
/// # Safety
///
/// `desc` is a live description and `input.oper` an operation of its graph.
#[no_mangle]
pub unsafe extern "C" fn PT_AddInput(desc: *mut PT_OperationDescription, input: PT_Output) {
    let change = |d: &mut PT_OperationDescription| {
        // SAFETY: the caller's contract: an operation of the description's graph.
        d.inputs.push(unsafe { output_of(&input) }?);
        Ok(())
    };
    // SAFETY: the caller's contract.
    unsafe { describe(desc, null_mut(), change) }
}

/// Append `num_inputs` data inputs, for an input that is a list (`AddN`'s, `ConcatV2`'s
/// values): polytensor's graphs keep a list as consecutive inputs, as a GraphDef does.
///
/// # Safety
///
/// `desc` is a live description; `inputs` NULL or `num_inputs` outputs of its graph.
#[no_mangle]
pub unsafe extern "C" fn PT_AddInputList(
    desc: *mut PT_OperationDescription,
    inputs: *const PT_Output,
    num_inputs: c_int,
) {
    let change = |d: &mut PT_OperationDescription| {
        // SAFETY: the caller's contract.
        for input in unsafe { array(inputs, num_inputs, "inputs") }? {
            // SAFETY: the caller's contract: operations of the description's graph.
            d.inputs.push(unsafe { output_of(input) }?);
        }
        Ok(())
    };
    // SAFETY: the caller's contract.
    unsafe { describe(desc, null_mut(), change) }
}

/// Add a control input: the operation runs after `input` (TensorFlow's `^input`).
///
/// # Safety
///
/// `desc` is a live description and `input` an operation of its graph.
#[no_mangle]
pub unsafe extern "C" fn PT_AddControlInput(
    desc: *mut PT_OperationDescription,
    input: *mut PT_Operation,
) {
    let change = |d: &mut PT_OperationDescription| {
        // SAFETY: the caller's contract.
        let op = unsafe { arg(input as *const PT_Operation, "input") }?;
        d.control_inputs.push(op.op.clone());
        Ok(())
    };
    // SAFETY: the caller's contract.
    unsafe { describe(desc, null_mut(), change) }
}

/// Ask for a device (TensorFlow's names, or polytensor's: `wgpu:0`).
///
/// # Safety
///
/// `desc` is a live description and `device` NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn PT_SetDevice(desc: *mut PT_OperationDescription, device: *const c_char) {
    let change = |d: &mut PT_OperationDescription| {
        // SAFETY: the caller's contract.
        d.device = unsafe { text(device, "device") }?.to_string();
        Ok(())
    };
    // SAFETY: the caller's contract.
    unsafe { describe(desc, null_mut(), change) }
}

/// Set attribute `name` to what `value` makes, in a live description.
///
/// # Safety
///
/// `desc` is NULL or a live description, `name` NUL-terminated.
pub(crate) unsafe fn set_attr(
    desc: *mut PT_OperationDescription,
    name: *const c_char,
    status: *mut PT_Status,
    value: impl FnOnce() -> Result<AttrValue, Error>,
) {
    let change = |d: &mut PT_OperationDescription| {
        // SAFETY: the caller's contract.
        let name = unsafe { text(name, "name") }?.to_string();
        d.attrs.push((name, value()?));
        Ok(())
    };
    // SAFETY: the caller's contract.
    unsafe { describe(desc, status, change) }
}

/// Set a dtype attribute.
///
/// # Safety
///
/// `desc` is a live description and `name` NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn PT_SetAttrType(
    desc: *mut PT_OperationDescription,
    name: *const c_char,
    value: PT_DataType,
) {
    // SAFETY: the caller's contract.
    unsafe {
        set_attr(desc, name, null_mut(), || {
            Ok(DataType::from_i32(value)?.into())
        })
    }
}

/// Set an integer attribute.
///
/// # Safety
///
/// `desc` is a live description and `name` NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn PT_SetAttrInt(
    desc: *mut PT_OperationDescription,
    name: *const c_char,
    value: i64,
) {
    // SAFETY: the caller's contract.
    unsafe { set_attr(desc, name, null_mut(), || Ok(value.into())) }
}

/// Set a bool attribute (non-zero is true).
///
/// # Safety
///
/// `desc` is a live description and `name` NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn PT_SetAttrBool(
    desc: *mut PT_OperationDescription,
    name: *const c_char,
    value: c_int,
) {
    // SAFETY: the caller's contract.
    unsafe { set_attr(desc, name, null_mut(), || Ok((value != 0).into())) }
}

/// Set a tensor attribute (a `Const`'s `value`) from a tensor's values.
///
/// # Safety
///
/// `desc` is a live description, `name` NUL-terminated, `value` a live tensor; `status`
/// NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_SetAttrTensor(
    desc: *mut PT_OperationDescription,
    name: *const c_char,
    value: *const PT_Tensor,
    status: *mut PT_Status,
) {
    let proto = || {
        // SAFETY: the caller's contract.
        let tensor = &unsafe { arg(value, "value") }?.tensor;
        Ok(tensor.to_proto()?.into())
    };
    // SAFETY: the caller's contract.
    unsafe { set_attr(desc, name, status, proto) }
}

/// Add the described operation to its graph and free the description; the new operation,
/// or NULL on error (dtypes and shapes are checked and inferred as the Rust builder does).
///
/// # Safety
///
/// `desc` is a description from [`PT_NewOperation`], not used afterwards; `status` NULL or
/// live.
#[no_mangle]
pub unsafe extern "C" fn PT_FinishOperation(
    desc: *mut PT_OperationDescription,
    status: *mut PT_Status,
) -> *mut PT_Operation {
    guard(status, null_mut(), || {
        if desc.is_null() {
            return Err(Error::invalid("desc is NULL"));
        }
        // SAFETY: the caller's contract: a description from `PT_NewOperation`.
        let desc = unsafe { Box::from_raw(desc) };
        if let Some(error) = &desc.error {
            return Err(Error::invalid(format!(
                "operation '{}' was described with an error: {error}",
                desc.name
            )));
        }
        let mut state = locked(&desc.state);
        let inputs = desc
            .inputs
            .iter()
            .map(|(op, index)| state.graph.output(op, *index))
            .collect::<Result<Vec<_>, Error>>()?;
        let mut builder = state
            .graph
            .op(&desc.op_type)
            .name(&desc.name)
            .inputs(&inputs)
            .device(&desc.device);
        for (name, value) in &desc.attrs {
            builder = builder.attr(name, value.clone());
        }
        for control in &desc.control_inputs {
            builder = builder.control_input(control);
        }
        let op = builder.build()?;
        state.handle(op)
    })
}

/// New session options: every device present (the CPU first) with soft placement.
#[no_mangle]
pub extern "C" fn PT_NewSessionOptions() -> *mut PT_SessionOptions {
    Box::into_raw(Box::new(PT_SessionOptions {
        devices: Vec::new(),
        soft_placement: true,
    }))
}

/// Free session options (NULL is ignored).
///
/// # Safety
///
/// `options` is NULL or from [`PT_NewSessionOptions`], not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn PT_DeleteSessionOptions(options: *mut PT_SessionOptions) {
    if !options.is_null() {
        // SAFETY: the caller's contract.
        drop(unsafe { Box::from_raw(options) });
    }
}

/// Add a device by name (`cpu:0`, `opencl:0`): the session then runs on the devices added,
/// the first the default.
///
/// # Safety
///
/// `options` is a live handle and `device` NUL-terminated; `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_SessionOptionsAddDevice(
    options: *mut PT_SessionOptions,
    device: *const c_char,
    status: *mut PT_Status,
) {
    guard(status, (), || {
        // SAFETY: the caller's contract.
        let options =
            unsafe { options.as_mut() }.ok_or_else(|| Error::invalid("options is NULL"))?;
        // SAFETY: the caller's contract.
        options
            .devices
            .push(polytensor::device(unsafe { text(device, "device") }?)?);
        Ok(())
    })
}

/// Allow (non-zero, the default) or forbid soft placement.
///
/// # Safety
///
/// `options` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn PT_SessionOptionsSetSoftPlacement(
    options: *mut PT_SessionOptions,
    allow: c_int,
) {
    // SAFETY: the caller's contract.
    if let Some(options) = unsafe { options.as_mut() } {
        options.soft_placement = allow != 0;
    }
}

/// A session on `graph` (which it keeps alive); `options` may be NULL (every device).
/// NULL on error.
///
/// # Safety
///
/// `graph` is a live graph, `options` NULL or live; `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_NewSession(
    graph: *mut PT_Graph,
    options: *const PT_SessionOptions,
    status: *mut PT_Status,
) -> *mut PT_Session {
    guard(status, null_mut(), || {
        // SAFETY: the caller's contract.
        let graph = unsafe { arg(graph as *const PT_Graph, "graph") }?;
        // SAFETY: the caller's contract.
        let options = unsafe { options.as_ref() };
        let devices = match options.map(|o| o.devices.clone()) {
            Some(devices) if !devices.is_empty() => devices,
            _ => polytensor::devices()
                .iter()
                .filter_map(|entry| entry.device().cloned())
                .collect(),
        };
        let mut session_options = SessionOptions::new(devices);
        session_options.allow_soft_placement = options.is_none_or(|o| o.soft_placement);
        let session = Session::with_options(&locked(&graph.state).graph, session_options)?;
        Ok(Box::into_raw(Box::new(PT_Session {
            state: graph.state.clone(),
            session: Mutex::new(Some(session)),
        })))
    })
}

/// Run the session (TensorFlow's `TF_SessionRun`): feed `ninputs` tensors to `inputs`,
/// run `targets`, and write new tensors of the `noutputs` fetched `outputs` into
/// `output_values` (each freed with [`PT_DeleteTensor`](crate::tensor::PT_DeleteTensor);
/// all NULL on error).
///
/// # Safety
///
/// `session` is a live session; the arrays hold their counts of live values (NULL for a
/// count of 0); `output_values` is writable for `noutputs` pointers; `status` NULL or live.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn PT_SessionRun(
    session: *mut PT_Session,
    inputs: *const PT_Output,
    input_values: *const *const PT_Tensor,
    ninputs: c_int,
    outputs: *const PT_Output,
    output_values: *mut *mut PT_Tensor,
    noutputs: c_int,
    targets: *const *const PT_Operation,
    ntargets: c_int,
    status: *mut PT_Status,
) {
    if let Ok(n) = usize::try_from(noutputs) {
        if !output_values.is_null() {
            for i in 0..n {
                // SAFETY: the caller's contract: `noutputs` writable pointers.
                unsafe { *output_values.add(i) = null_mut() };
            }
        }
    }
    guard(status, (), || {
        // SAFETY: the caller's contract.
        let session = unsafe { arg(session as *const PT_Session, "session") }?;
        // SAFETY: the caller's contract (each array).
        let (inputs, values, outputs, targets) = unsafe {
            (
                array(inputs, ninputs, "inputs")?,
                array(input_values, ninputs, "input_values")?,
                array(outputs, noutputs, "outputs")?,
                array(targets, ntargets, "targets")?,
            )
        };
        if noutputs > 0 && output_values.is_null() {
            return Err(Error::invalid("output_values is NULL"));
        }
        let state = locked(&session.state);
        let mut held = locked(&session.session);
        let running = held
            .as_mut()
            .ok_or_else(|| Error::invalid("Session was closed"))?;
        if running.graph().len() != state.graph.len() {
            running.extend(&state.graph)?;
        }
        let resolve = |o: &PT_Output| -> Result<Output, Error> {
            // SAFETY: the caller's contract.
            let (op, index) = unsafe { output_of(o) }?;
            state.graph.output(&op, index)
        };
        let feeds = inputs.iter().map(resolve).collect::<Result<Vec<_>, _>>()?;
        let fed = values
            .iter()
            // SAFETY: the caller's contract: live tensors.
            .map(|&t| unsafe { arg(t, "an input value") }.map(|t| &t.tensor))
            .collect::<Result<Vec<&Tensor>, _>>()?;
        let fetches = outputs.iter().map(resolve).collect::<Result<Vec<_>, _>>()?;
        let target_ops = targets
            .iter()
            // SAFETY: the caller's contract: operations of the session's graph.
            .map(|&op| unsafe { arg(op, "a target") }.map(|op| &op.op))
            .collect::<Result<Vec<&Operation>, _>>()?;
        let feed_pairs: Vec<(&Output, &Tensor)> = feeds.iter().zip(fed).collect();
        let fetch_refs: Vec<&Output> = fetches.iter().collect();
        let results = running.run(&feed_pairs, &fetch_refs, &target_ops)?;
        for (i, tensor) in results.into_iter().enumerate() {
            // SAFETY: the caller's contract: `noutputs` writable pointers.
            unsafe { *output_values.add(i) = PT_Tensor::boxed(tensor) };
        }
        Ok(())
    })
}

/// Close a session: later runs fail; its resources (variables, plans) are released.
///
/// # Safety
///
/// `session` is NULL or a live session; `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_CloseSession(session: *mut PT_Session, status: *mut PT_Status) {
    guard(status, (), || {
        // SAFETY: the caller's contract.
        if let Some(session) = unsafe { session.as_ref() } {
            locked(&session.session).take();
        }
        Ok(())
    })
}

/// Free a session (NULL is ignored), closing it if it is open.
///
/// # Safety
///
/// `session` is NULL or from [`PT_NewSession`], not used afterwards; `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_DeleteSession(session: *mut PT_Session, status: *mut PT_Status) {
    guard(status, (), || {
        if !session.is_null() {
            // SAFETY: the caller's contract.
            drop(unsafe { Box::from_raw(session) });
        }
        Ok(())
    })
}
