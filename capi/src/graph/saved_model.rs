//! SavedModels from C (TensorFlow's `TF_LoadSessionFromSavedModel`): a session with the
//! model's variables restored, its graph placed in the caller's `PT_Graph`, and the
//! signatures' tensors by key.

use std::ffi::{c_char, c_int, CString};
use std::ptr::null_mut;
use std::sync::{Arc, Mutex};

use polytensor::saved_model::{SavedModel, Signature};
use polytensor::Error;

use crate::proto::PT_Buffer;
use crate::status::{arg, array, guard, PT_Status};
use crate::tensor::text;

use super::{locked, session_options, PT_Graph, PT_Output, PT_Session, PT_SessionOptions};

/// A signature's keys and tensors, kept with the session for C to read.
pub(crate) struct CSignature {
    key: CString,
    /// Inputs then outputs: (key, tensor name).
    inputs: Vec<(CString, String)>,
    outputs: Vec<(CString, String)>,
}

impl CSignature {
    fn new(key: &str, signature: &Signature) -> Self {
        let c = |s: &str| CString::new(s).unwrap_or_default();
        let side =
            |specs: &std::collections::BTreeMap<String, polytensor::saved_model::TensorSpec>| {
                specs
                    .iter()
                    .map(|(k, spec)| (c(k), spec.name.clone()))
                    .collect()
            };
        CSignature {
            key: c(key),
            inputs: side(&signature.inputs),
            outputs: side(&signature.outputs),
        }
    }

    fn side(&self, outputs: c_int) -> &[(CString, String)] {
        if outputs != 0 {
            &self.outputs
        } else {
            &self.inputs
        }
    }
}

/// Load the SavedModel in `export_dir` tagged `tags` (`tags_len` of them) into a new
/// session, its graph into `graph` (which must be empty), its variables restored and its
/// init op run (TensorFlow's `TF_LoadSessionFromSavedModel`). `options` may be NULL (every
/// device). Where `meta_graph_def` is not NULL it receives a new buffer holding the
/// serialized `MetaGraphDef` (free it with [`PT_DeleteBuffer`](crate::proto::PT_DeleteBuffer)).
/// The signatures' tensors are then found with [`PT_SessionSignatureTensor`]. NULL on
/// error.
///
/// # Safety
///
/// `graph` is a live graph; `export_dir` NUL-terminated; `tags` holds `tags_len`
/// NUL-terminated strings; `options` NULL or live; `meta_graph_def` NULL or writable;
/// `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_LoadSessionFromSavedModel(
    options: *const PT_SessionOptions,
    export_dir: *const c_char,
    tags: *const *const c_char,
    tags_len: c_int,
    graph: *mut PT_Graph,
    meta_graph_def: *mut *mut PT_Buffer,
    status: *mut PT_Status,
) -> *mut PT_Session {
    guard(status, null_mut(), || {
        // SAFETY: the caller's contract.
        let graph = unsafe { arg(graph as *const PT_Graph, "graph") }?;
        // SAFETY: the caller's contract.
        let dir = unsafe { text(export_dir, "export_dir") }?;
        // SAFETY: the caller's contract.
        let tag_ptrs = unsafe { array(tags, tags_len, "tags") }?;
        let tags = tag_ptrs
            .iter()
            // SAFETY: the caller's contract: each tag is NUL-terminated.
            .map(|&t| unsafe { text(t, "tag") })
            .collect::<Result<Vec<_>, Error>>()?;
        // SAFETY: the caller's contract.
        let options = unsafe { options.as_ref() };
        if !locked(&graph.state).graph.is_empty() {
            return Err(Error::invalid("Graph is non-empty."));
        }
        let model = SavedModel::load(dir, &tags, session_options(options))?;
        if !meta_graph_def.is_null() {
            // SAFETY: the caller's contract: writable when not NULL.
            unsafe { *meta_graph_def = PT_Buffer::boxed(model.meta_graph_def_bytes().to_vec()) };
        }
        let (model_graph, session, signatures) = model.into_parts();
        locked(&graph.state).graph = model_graph;
        Ok(Box::into_raw(Box::new(PT_Session {
            state: graph.state.clone(),
            session: Mutex::new(Some(session)),
            signatures: Arc::new(
                signatures
                    .iter()
                    .map(|(key, signature)| CSignature::new(key, signature))
                    .collect(),
            ),
        })))
    })
}

/// The number of signatures of a session loaded from a SavedModel (0 for another
/// session or NULL).
///
/// # Safety
///
/// `session` is NULL or a live session.
#[no_mangle]
pub unsafe extern "C" fn PT_SessionNumSignatures(session: *const PT_Session) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { session.as_ref() }.map_or(0, |s| s.signatures.len() as c_int)
}

/// The key of signature `index` (`serving_default`), valid while the session lives; NULL
/// out of range.
///
/// # Safety
///
/// `session` is NULL or a live session.
#[no_mangle]
pub unsafe extern "C" fn PT_SessionSignatureKey(
    session: *const PT_Session,
    index: c_int,
) -> *const c_char {
    // SAFETY: the caller's contract.
    unsafe { session.as_ref() }
        .and_then(|s| s.signatures.get(usize::try_from(index).ok()?))
        .map_or(std::ptr::null(), |sig| sig.key.as_ptr())
}

/// How many inputs (`outputs == 0`) or outputs (`outputs != 0`) signature `signature`
/// has; -1 on error.
///
/// # Safety
///
/// `session` is a live session, `signature` NUL-terminated; `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_SessionSignatureNumTensors(
    session: *const PT_Session,
    signature: *const c_char,
    outputs: c_int,
    status: *mut PT_Status,
) -> c_int {
    guard(status, -1, || {
        // SAFETY: the caller's contract.
        let sig = unsafe { find(session, signature) }?;
        Ok(sig.side(outputs).len() as c_int)
    })
}

/// The key of input or output `index` of `signature` (in key order), valid while the
/// session lives; NULL on error.
///
/// # Safety
///
/// As [`PT_SessionSignatureNumTensors`].
#[no_mangle]
pub unsafe extern "C" fn PT_SessionSignatureTensorKey(
    session: *const PT_Session,
    signature: *const c_char,
    outputs: c_int,
    index: c_int,
    status: *mut PT_Status,
) -> *const c_char {
    guard(status, std::ptr::null(), || {
        // SAFETY: the caller's contract.
        let sig = unsafe { find(session, signature) }?;
        let side = sig.side(outputs);
        usize::try_from(index)
            .ok()
            .and_then(|i| side.get(i))
            .map(|(key, _)| key.as_ptr())
            .ok_or_else(|| {
                Error::invalid(format!(
                    "index {index} is out of range: {} tensors",
                    side.len()
                ))
            })
    })
}

/// The graph tensor behind input or output `key` of `signature`: an output of the session's
/// graph, to feed or fetch with [`PT_SessionRun`](super::PT_SessionRun). `{NULL, -1}` on
/// error.
///
/// # Safety
///
/// As [`PT_SessionSignatureNumTensors`]; `key` NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn PT_SessionSignatureTensor(
    session: *const PT_Session,
    signature: *const c_char,
    outputs: c_int,
    key: *const c_char,
    status: *mut PT_Status,
) -> PT_Output {
    let failed = PT_Output {
        oper: null_mut(),
        index: -1,
    };
    guard(status, failed, || {
        // SAFETY: the caller's contract.
        let session_ref = unsafe { arg(session, "session") }?;
        // SAFETY: the caller's contract.
        let sig = unsafe { find(session, signature) }?;
        // SAFETY: the caller's contract.
        let key = unsafe { text(key, "key") }?;
        let name = sig
            .side(outputs)
            .iter()
            .find(|(k, _)| k.to_bytes() == key.as_bytes())
            .map(|(_, name)| name.as_str())
            .ok_or_else(|| Error::invalid(format!("the signature has no tensor '{key}'")))?;
        let (op_name, index) = match name.rsplit_once(':') {
            Some((op, i)) => (
                op,
                i.parse::<c_int>()
                    .map_err(|_| Error::invalid(format!("bad tensor name {name}")))?,
            ),
            None => (name, 0),
        };
        let mut state = locked(&session_ref.state);
        let op = state
            .graph
            .operation(op_name)
            .ok_or_else(|| Error::invalid(format!("the graph has no operation '{op_name}'")))?;
        Ok(PT_Output {
            oper: state.handle(op)?,
            index,
        })
    })
}

/// The signature named `signature` of a loaded session.
///
/// # Safety
///
/// `session` is NULL or live; `signature` NULL or NUL-terminated.
unsafe fn find<'a>(
    session: *const PT_Session,
    signature: *const c_char,
) -> Result<&'a CSignature, Error> {
    // SAFETY: the caller's contract.
    let session = unsafe { arg(session, "session") }?;
    // SAFETY: the caller's contract.
    let key = unsafe { text(signature, "signature") }?;
    session
        .signatures
        .iter()
        .find(|s| s.key.to_bytes() == key.as_bytes())
        .ok_or_else(|| {
            Error::NotFound(format!(
                "the session has no signature '{key}' (it has {})",
                session.signatures.len()
            ))
        })
}
