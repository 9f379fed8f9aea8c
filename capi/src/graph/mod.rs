//! Graphs and sessions, after TensorFlow's `c_api.h`: `PT_Graph` (import a `GraphDef`,
//! find operations, read their outputs' dtypes and shapes, build operations, write the
//! `GraphDef`), and `PT_Session` (`PT_SessionRun` with feeds, fetches and targets).
//!
//! As in TensorFlow, a `PT_Operation*` belongs to its graph and stays valid while the graph
//! lives; a `PT_Output` is an operation and an output index. A session keeps the graph it
//! was made on alive, and takes in operations added to it since before each run
//! (TensorFlow's session extension). As TensorFlow's, a name that is taken is refused, and
//! an operation of one graph is refused as an input of another.
//!
//! This module holds the handles and the graph's own calls; `build.rs` builds operations
//! (`PT_NewOperation` to `PT_FinishOperation`) and `session.rs` runs them.

mod build;
mod gradients;
mod run_options;
mod saved_model;
mod session;

pub use build::*;
pub use gradients::*;
pub use run_options::*;
pub use saved_model::*;
pub use session::*;

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CString};
use std::ptr::null_mut;
use std::sync::{Arc, Mutex, MutexGuard};

use polytensor::graph::{
    AttrValue, Graph, ImportOptions, Operation, Output, Session, SessionOptions,
};
use polytensor::{DataType, Device, Error};

use crate::proto::PT_Buffer;
use crate::status::{arg, array, guard, quietly, PT_Status};
use crate::tensor::{text, PT_DataType};

/// A graph's state: the graph, and the handles of its operations given out so far.
struct GraphState {
    graph: Graph,
    /// Which graph this is (its handles carry it, so that one graph's operation is refused
    /// where another's is needed).
    id: GraphId,
    /// Handles by operation name, boxed so that their addresses stay put.
    handles: HashMap<String, Box<PT_Operation>>,
}

impl GraphState {
    /// The handle of `op` (made on first use; valid while the graph lives).
    fn handle(&mut self, op: Operation) -> Result<*mut PT_Operation, Error> {
        let graph = self.id;
        if let Some(handle) = self.handles.get_mut(op.name()) {
            return Ok(handle.as_mut() as *mut PT_Operation);
        }
        let outputs = self.graph.outputs(&op)?.iter().map(Output::dtype).collect();
        let c_string = |s: &str| CString::new(s).unwrap_or_default();
        let handle = Box::new(PT_Operation {
            graph,
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

/// Which graph a handle belongs to: a number given each graph when it is made.
type GraphId = u64;

/// A new graph's id.
fn next_graph_id() -> GraphId {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// An operation of a graph (TensorFlow's `TF_Operation`), owned by the graph.
pub struct PT_Operation {
    op: Operation,
    graph: GraphId,
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
    input_map: Vec<(String, (Operation, usize, GraphId))>,
}

/// An operation being built (TensorFlow's `TF_OperationDescription`), consumed by
/// [`PT_FinishOperation`].
pub struct PT_OperationDescription {
    state: Arc<Mutex<GraphState>>,
    /// The graph's id (inputs must be its operations).
    graph: GraphId,
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
    operation_timeout: Option<std::time::Duration>,
    bf16_weights: bool,
}

/// A session (TensorFlow's `TF_Session`).
pub struct PT_Session {
    state: Arc<Mutex<GraphState>>,
    session: Mutex<Option<Session>>,
    /// The signatures of a session loaded from a SavedModel (none otherwise).
    signatures: Arc<Vec<saved_model::CSignature>>,
}

/// The session options `options` describe (NULL: every device present, soft placement,
/// no timeout); where it names no device, every device present.
fn session_options(options: Option<&PT_SessionOptions>) -> SessionOptions {
    let devices = match options.map(|o| o.devices.clone()) {
        Some(devices) if !devices.is_empty() => devices,
        _ => polytensor::devices()
            .iter()
            .filter_map(|entry| entry.device().cloned())
            .collect(),
    };
    let mut session_options = SessionOptions::new(devices);
    session_options.allow_soft_placement = options.is_none_or(|o| o.soft_placement);
    session_options.operation_timeout = options.and_then(|o| o.operation_timeout);
    session_options.optimizations.bf16_weights = options.is_some_and(|o| o.bf16_weights);
    session_options
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
unsafe fn output_of(output: &PT_Output, graph: GraphId) -> Result<(Operation, usize), Error> {
    // SAFETY: the caller's contract.
    let (op, index, owner) = unsafe { output_of_any(output) }?;
    same_graph(&op, owner, graph)?;
    Ok((op, index))
}

/// `Err` where operation `op` (of graph `owner`) is used in graph `graph`.
fn same_graph(op: &Operation, owner: GraphId, graph: GraphId) -> Result<(), Error> {
    if owner != graph {
        return Err(Error::invalid(format!(
            "Operation '{}' belongs to another graph: an input must be an operation of the \
             graph it is used in",
            op.name()
        )));
    }
    Ok(())
}

/// The operation, output index and graph `output` names, of whatever graph.
///
/// # Safety
///
/// `output.oper` is NULL or a live operation.
unsafe fn output_of_any(output: &PT_Output) -> Result<(Operation, usize, GraphId), Error> {
    // SAFETY: the caller's contract.
    let op = unsafe { arg(output.oper as *const PT_Operation, "PT_Output.oper") }?;
    let index = usize::try_from(output.index)
        .map_err(|_| Error::invalid(format!("output index {} is negative", output.index)))?;
    Ok((op.op.clone(), index, op.graph))
}

/// A new, empty graph. Free it with [`PT_DeleteGraph`].
#[no_mangle]
pub extern "C" fn PT_NewGraph() -> *mut PT_Graph {
    Box::into_raw(Box::new(PT_Graph {
        state: Arc::new(Mutex::new(GraphState {
            graph: Graph::new(),
            id: next_graph_id(),
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
        let target = unsafe { output_of_any(&dst) }?;
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
                    .map(|(name, (op, index, owner))| {
                        same_graph(op, *owner, state.id)?;
                        Ok((name.clone(), state.graph.output(op, *index)?))
                    })
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
        let state = locked(&graph.state);
        // SAFETY: the caller's contract.
        let (op, index) = unsafe { output_of(&output, state.id) }?;
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
        let state = locked(&graph.state);
        // SAFETY: the caller's contract.
        let (op, index) = unsafe { output_of(&output, state.id) }?;
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
