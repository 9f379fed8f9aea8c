//! Runs that stop and runs that are traced: TensorFlow's `RunOptions.timeout_in_ms`, its
//! `TFE_CancellationManager`, and its `trace_level` with the `RunMetadata` a traced run
//! fills, for [`PT_SessionRunWithOptions`](super::PT_SessionRunWithOptions).

use std::ffi::c_int;

use polytensor::graph::{timeout_from_millis, CancellationManager, RunOptions, StepStats, Trace};

use crate::proto::PT_Buffer;

/// Options of one run (TensorFlow's `RunOptions`): a timeout, a cancellation handle and a
/// trace.
pub struct PT_RunOptions {
    pub(super) options: RunOptions,
}

/// A handle that cancels the runs given it, from any thread (TensorFlow's
/// `TFE_CancellationManager`).
pub struct PT_CancellationManager {
    manager: CancellationManager,
}

/// New run options: no timeout of their own (the session's applies) and no cancellation.
#[no_mangle]
pub extern "C" fn PT_NewRunOptions() -> *mut PT_RunOptions {
    Box::into_raw(Box::new(PT_RunOptions {
        options: RunOptions::default(),
    }))
}

/// Free run options (NULL is ignored).
///
/// # Safety
///
/// `options` is NULL or from [`PT_NewRunOptions`], not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn PT_DeleteRunOptions(options: *mut PT_RunOptions) {
    if !options.is_null() {
        // SAFETY: the caller's contract.
        drop(unsafe { Box::from_raw(options) });
    }
}

/// Give runs with `options` a deadline `timeout_in_ms` after they start (0 or less: none of
/// their own); past it a run fails with `PT_DEADLINE_EXCEEDED`.
///
/// # Safety
///
/// `options` is NULL (ignored) or a live handle.
#[no_mangle]
pub unsafe extern "C" fn PT_RunOptionsSetTimeout(options: *mut PT_RunOptions, timeout_in_ms: i64) {
    // SAFETY: the caller's contract.
    if let Some(options) = unsafe { options.as_mut() } {
        options.options.timeout = timeout_from_millis(timeout_in_ms);
    }
}

/// Let `manager` cancel runs with `options` (NULL: none may); a cancelled run fails with
/// `PT_CANCELLED`. The options keep their own reference: `manager` may be freed first.
///
/// # Safety
///
/// `options` is NULL (ignored) or a live handle; `manager` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_RunOptionsSetCancellationManager(
    options: *mut PT_RunOptions,
    manager: *const PT_CancellationManager,
) {
    // SAFETY: the caller's contract.
    if let Some(options) = unsafe { options.as_mut() } {
        // SAFETY: the caller's contract.
        options.options.cancellation = unsafe { manager.as_ref() }.map(|m| m.manager.clone());
    }
}

/// A new cancellation handle, not cancelled.
#[no_mangle]
pub extern "C" fn PT_NewCancellationManager() -> *mut PT_CancellationManager {
    Box::into_raw(Box::new(PT_CancellationManager {
        manager: CancellationManager::new(),
    }))
}

/// Cancel every run given `manager`, from any thread: those running stop before their next
/// step and those started later at their first.
///
/// # Safety
///
/// `manager` is NULL (ignored) or a live handle.
#[no_mangle]
pub unsafe extern "C" fn PT_CancellationManagerStartCancel(manager: *const PT_CancellationManager) {
    // SAFETY: the caller's contract.
    if let Some(manager) = unsafe { manager.as_ref() } {
        manager.manager.start_cancel();
    }
}

/// Whether `manager` was cancelled (1) or not (0; also for NULL).
///
/// # Safety
///
/// `manager` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn PT_CancellationManagerIsCancelled(
    manager: *const PT_CancellationManager,
) -> c_int {
    // SAFETY: the caller's contract.
    c_int::from(unsafe { manager.as_ref() }.is_some_and(|m| m.manager.is_cancelled()))
}

/// Free a cancellation handle (NULL is ignored); run options given it keep theirs.
///
/// # Safety
///
/// `manager` is NULL or from [`PT_NewCancellationManager`], not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn PT_DeleteCancellationManager(manager: *mut PT_CancellationManager) {
    if !manager.is_null() {
        // SAFETY: the caller's contract.
        drop(unsafe { Box::from_raw(manager) });
    }
}

/// Where traced runs record every step they run (TensorFlow's `RunMetadata` with its
/// `step_stats`): the node, its op type, device, start, duration and outputs.
pub struct PT_RunMetadata {
    trace: Trace,
}

/// An empty run metadata; runs whose options name it (with
/// [`PT_RunOptionsSetRunMetadata`]) add their steps to it.
#[no_mangle]
pub extern "C" fn PT_NewRunMetadata() -> *mut PT_RunMetadata {
    Box::into_raw(Box::new(PT_RunMetadata {
        trace: Trace::new(),
    }))
}

/// Free run metadata (NULL is ignored); run options given it keep recording into their own
/// reference, which nothing reads.
///
/// # Safety
///
/// `metadata` is NULL or from [`PT_NewRunMetadata`], not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn PT_DeleteRunMetadata(metadata: *mut PT_RunMetadata) {
    if !metadata.is_null() {
        // SAFETY: the caller's contract.
        drop(unsafe { Box::from_raw(metadata) });
    }
}

/// Trace runs with `options` into `metadata` (TensorFlow's `FULL_TRACE`; NULL: no trace, the
/// default). Each traced step waits for its device before its end is taken.
///
/// # Safety
///
/// `options` is NULL (ignored) or a live handle; `metadata` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_RunOptionsSetRunMetadata(
    options: *mut PT_RunOptions,
    metadata: *const PT_RunMetadata,
) {
    // SAFETY: the caller's contract.
    if let Some(options) = unsafe { options.as_mut() } {
        // SAFETY: the caller's contract.
        options.options.trace = unsafe { metadata.as_ref() }.map(|m| m.trace.clone());
    }
}

/// How many steps the traced runs recorded (0 for NULL).
///
/// # Safety
///
/// `metadata` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn PT_RunMetadataNumSteps(metadata: *const PT_RunMetadata) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { metadata.as_ref() }.map_or(0, |m| {
        c_int::try_from(m.trace.inspect(|s| s.nodes.len())).unwrap_or(c_int::MAX)
    })
}

/// The recorded steps as a serialized `tensorflow.RunMetadata` (its `step_stats`, one
/// `DeviceStepStats` per device), as `TF_SessionRun` writes `run_metadata`; NULL for NULL.
///
/// # Safety
///
/// `metadata` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn PT_RunMetadataToProto(metadata: *const PT_RunMetadata) -> *mut PT_Buffer {
    // SAFETY: the caller's contract.
    match unsafe { metadata.as_ref() } {
        Some(m) => PT_Buffer::boxed(m.trace.inspect(StepStats::run_metadata_proto)),
        None => std::ptr::null_mut(),
    }
}

/// A text table of the op types and the `top` slowest nodes, per run (UTF-8, not
/// NUL-terminated: read `PT_BufferLength` bytes); NULL for NULL.
///
/// # Safety
///
/// `metadata` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn PT_RunMetadataSummary(
    metadata: *const PT_RunMetadata,
    top: c_int,
) -> *mut PT_Buffer {
    // SAFETY: the caller's contract.
    match unsafe { metadata.as_ref() } {
        Some(m) => {
            let top = usize::try_from(top).unwrap_or(0);
            PT_Buffer::boxed(m.trace.inspect(|s| s.summary(top)).into_bytes())
        }
        None => std::ptr::null_mut(),
    }
}

/// The recorded steps in Chrome's trace-event JSON (Perfetto, `chrome://tracing`; not
/// NUL-terminated); NULL for NULL.
///
/// # Safety
///
/// `metadata` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn PT_RunMetadataChromeTrace(
    metadata: *const PT_RunMetadata,
) -> *mut PT_Buffer {
    // SAFETY: the caller's contract.
    match unsafe { metadata.as_ref() } {
        Some(m) => PT_Buffer::boxed(m.trace.inspect(StepStats::chrome_trace).into_bytes()),
        None => std::ptr::null_mut(),
    }
}

/// Forget the recorded steps (NULL is ignored).
///
/// # Safety
///
/// `metadata` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn PT_RunMetadataClear(metadata: *const PT_RunMetadata) {
    // SAFETY: the caller's contract.
    if let Some(m) = unsafe { metadata.as_ref() } {
        m.trace.take();
    }
}
