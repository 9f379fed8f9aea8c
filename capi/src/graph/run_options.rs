//! Runs that stop: TensorFlow's `RunOptions.timeout_in_ms` and its
//! `TFE_CancellationManager`, for [`PT_SessionRunWithOptions`](super::PT_SessionRunWithOptions).

use std::ffi::c_int;

use polytensor::graph::{timeout_from_millis, CancellationManager, RunOptions};

/// Options of one run (TensorFlow's `RunOptions`): a timeout and a cancellation handle.
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
