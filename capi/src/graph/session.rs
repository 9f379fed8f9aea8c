//! Sessions (TensorFlow's `TF_SessionOptions`, `TF_NewSession`, `TF_SessionRun` with its
//! run options, `TF_CloseSession`, `TF_DeleteSession`).

use std::ffi::{c_char, c_int};
use std::ptr::{null, null_mut};
use std::sync::Mutex;

use polytensor::graph::{timeout_from_millis, Operation, Output, RunOptions, Session};
use polytensor::{Error, Tensor};

use crate::status::{arg, array, guard, PT_Status};
use crate::tensor::{text, PT_Tensor};

use super::run_options::PT_RunOptions;
use super::{
    locked, output_of, same_graph, PT_Graph, PT_Operation, PT_Output, PT_Session, PT_SessionOptions,
};

/// New session options: every device present (the CPU first) with soft placement.
#[no_mangle]
pub extern "C" fn PT_NewSessionOptions() -> *mut PT_SessionOptions {
    Box::into_raw(Box::new(PT_SessionOptions {
        devices: Vec::new(),
        soft_placement: true,
        operation_timeout: None,
        bf16_weights: false,
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

/// Give runs whose options name no timeout a deadline `timeout_in_ms` after they start
/// (TensorFlow's `operation_timeout_in_ms`; 0 or less: none, the default).
///
/// # Safety
///
/// `options` is NULL (ignored) or a live handle.
#[no_mangle]
pub unsafe extern "C" fn PT_SessionOptionsSetOperationTimeout(
    options: *mut PT_SessionOptions,
    timeout_in_ms: i64,
) {
    // SAFETY: the caller's contract.
    if let Some(options) = unsafe { options.as_mut() } {
        options.operation_timeout = timeout_from_millis(timeout_in_ms);
    }
}

/// Mixed precision in bf16 (`GraphOptimizations::bf16_weights`, grappler's
/// `auto_mixed_precision_onednn_bfloat16`): nonzero rounds the constant weights of
/// convolutions and dense layers to bf16 once, and multiplies them in bf16 with f32 sums,
/// on CPUs with AVX512-BF16 (elsewhere nothing changes); 0, the default, keeps f32.
///
/// # Safety
///
/// `options` is NULL (ignored) or a live handle.
#[no_mangle]
pub unsafe extern "C" fn PT_SessionOptionsSetBf16Weights(
    options: *mut PT_SessionOptions,
    enabled: c_int,
) {
    // SAFETY: the caller's contract.
    if let Some(options) = unsafe { options.as_mut() } {
        options.bf16_weights = enabled != 0;
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
        let session =
            Session::with_options(&locked(&graph.state).graph, super::session_options(options))?;
        Ok(Box::into_raw(Box::new(PT_Session {
            state: graph.state.clone(),
            session: Mutex::new(Some(session)),
            signatures: Default::default(),
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
    // SAFETY: the caller's contract, with no run options.
    unsafe {
        PT_SessionRunWithOptions(
            session,
            null(),
            inputs,
            input_values,
            ninputs,
            outputs,
            output_values,
            noutputs,
            targets,
            ntargets,
            status,
        )
    }
}

/// [`PT_SessionRun`] with `run_options` (NULL: the defaults): a run past its timeout fails
/// with `PT_DEADLINE_EXCEEDED`, one whose cancellation manager is cancelled with
/// `PT_CANCELLED`; either frees what it made and leaves the session usable.
///
/// # Safety
///
/// As [`PT_SessionRun`]; `run_options` NULL or live.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn PT_SessionRunWithOptions(
    session: *mut PT_Session,
    run_options: *const PT_RunOptions,
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
            let (op, index) = unsafe { output_of(o, state.id) }?;
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
            .map(|&op| {
                // SAFETY: the caller's contract: a live operation.
                let op = unsafe { arg(op, "a target") }?;
                same_graph(&op.op, op.graph, state.id).map(|()| &op.op)
            })
            .collect::<Result<Vec<&Operation>, _>>()?;
        let feed_pairs: Vec<(&Output, &Tensor)> = feeds.iter().zip(fed).collect();
        let fetch_refs: Vec<&Output> = fetches.iter().collect();
        let defaults = RunOptions::default();
        // SAFETY: the caller's contract.
        let options = unsafe { run_options.as_ref() }.map_or(&defaults, |o| &o.options);
        let results = running.run_with(options, &feed_pairs, &fetch_refs, &target_ops)?;
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
