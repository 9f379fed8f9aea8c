//! `PT_Status`: the outcome of a call (a code and a message), and the guard every entry
//! point runs in, so that no error or panic crosses the C boundary unreported.

use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use polytensor::Error;

/// A status code, with TensorFlow's `TF_Code` numbers.
pub type PT_Code = i32;

/// Success.
pub const PT_OK: PT_Code = 0;
/// A run was cancelled ([`crate::graph::PT_CancellationManagerStartCancel`]).
pub const PT_CANCELLED: PT_Code = 1;
/// An unknown error (an error kind newer than this API).
pub const PT_UNKNOWN: PT_Code = 2;
/// A bad argument: shapes, dtypes, NULL pointers, malformed protos or slices.
pub const PT_INVALID_ARGUMENT: PT_Code = 3;
/// A run went past its deadline ([`crate::graph::PT_RunOptionsSetTimeout`]).
pub const PT_DEADLINE_EXCEEDED: PT_Code = 4;
/// A file or a checkpoint key does not exist.
pub const PT_NOT_FOUND: PT_Code = 5;
/// An allocation failed.
pub const PT_RESOURCE_EXHAUSTED: PT_Code = 8;
/// The device does not run this op for this dtype.
pub const PT_UNIMPLEMENTED: PT_Code = 12;
/// A driver or runtime failed, or polytensor itself did (a panic, caught).
pub const PT_INTERNAL: PT_Code = 13;
/// A device is absent or could not be opened.
pub const PT_UNAVAILABLE: PT_Code = 14;
/// Stored data is corrupt (a checksum mismatch, a truncated file).
pub const PT_DATA_LOSS: PT_Code = 15;

/// The outcome of a call: [`PT_OK`], or an error code and its message.
pub struct PT_Status {
    code: PT_Code,
    message: CString,
}

impl PT_Status {
    fn set(&mut self, code: PT_Code, message: &str) {
        self.code = code;
        // Interior NULs cannot cross into C: they become spaces.
        self.message = CString::new(message.replace('\0', " ")).unwrap_or_default();
    }
}

/// The C code of an error.
fn code_of(error: &Error) -> PT_Code {
    match error {
        Error::ShapeMismatch { .. }
        | Error::DTypeMismatch { .. }
        | Error::InvalidShape(_)
        | Error::AxisOutOfRange { .. }
        | Error::InvalidSlice(_)
        | Error::InvalidProto(_)
        | Error::InvalidArgument(_)
        | Error::DeviceMismatch { .. } => PT_INVALID_ARGUMENT,
        Error::Unsupported { .. } => PT_UNIMPLEMENTED,
        Error::OutOfMemory { .. } | Error::ExceedsDeviceLimit { .. } => PT_RESOURCE_EXHAUSTED,
        Error::DeviceUnavailable { .. } => PT_UNAVAILABLE,
        Error::Backend { .. } => PT_INTERNAL,
        Error::Cancelled(_) => PT_CANCELLED,
        Error::DeadlineExceeded(_) => PT_DEADLINE_EXCEEDED,
        Error::NotFound(_) => PT_NOT_FOUND,
        Error::DataLoss(_) => PT_DATA_LOSS,
        _ => PT_UNKNOWN,
    }
}

/// A new status, [`PT_OK`]. Free it with [`PT_DeleteStatus`].
#[no_mangle]
pub extern "C" fn PT_NewStatus() -> *mut PT_Status {
    Box::into_raw(Box::new(PT_Status {
        code: PT_OK,
        message: CString::default(),
    }))
}

/// Free a status (NULL is ignored).
///
/// # Safety
///
/// `status` is NULL or a status from [`PT_NewStatus`], not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn PT_DeleteStatus(status: *mut PT_Status) {
    if !status.is_null() {
        // SAFETY: the caller's contract: a status from `PT_NewStatus`.
        drop(unsafe { Box::from_raw(status) });
    }
}

/// The code of the last call that took `status` ([`PT_INVALID_ARGUMENT`] for NULL).
///
/// # Safety
///
/// `status` is NULL or a live status.
#[no_mangle]
pub unsafe extern "C" fn PT_GetCode(status: *const PT_Status) -> PT_Code {
    // SAFETY: the caller's contract.
    unsafe { status.as_ref() }.map_or(PT_INVALID_ARGUMENT, |s| s.code)
}

/// The message of the last call that took `status` ("" after success), valid until the
/// status is used again or freed.
///
/// # Safety
///
/// `status` is NULL or a live status.
#[no_mangle]
pub unsafe extern "C" fn PT_Message(status: *const PT_Status) -> *const c_char {
    // SAFETY: the caller's contract.
    match unsafe { status.as_ref() } {
        Some(s) => s.message.as_ptr(),
        None => c"NULL status".as_ptr(),
    }
}

/// Run an entry point's body: its `Err`, or a panic, becomes the status (and `failed` the
/// result); success sets [`PT_OK`]. A NULL status is allowed: the outcome is then only in
/// the result.
pub(crate) fn guard<T>(
    status: *mut PT_Status,
    failed: T,
    body: impl FnOnce() -> Result<T, Error>,
) -> T {
    let outcome = catch_unwind(AssertUnwindSafe(body));
    // SAFETY: every entry point documents `status` as NULL or a live status.
    let status = unsafe { status.as_mut() };
    match outcome {
        Ok(Ok(value)) => {
            if let Some(s) = status {
                s.set(PT_OK, "");
            }
            value
        }
        Ok(Err(error)) => {
            if let Some(s) = status {
                s.set(code_of(&error), &error.to_string());
            }
            failed
        }
        Err(panic) => {
            if let Some(s) = status {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".into());
                s.set(
                    PT_INTERNAL,
                    &format!("internal error (caught panic): {what}"),
                );
            }
            failed
        }
    }
}

/// Run an accessor that cannot fail but for a panic (then `failed`).
pub(crate) fn quietly<T>(failed: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(failed)
}

/// The argument `ptr` points to, or an `Err` naming `what` for NULL.
///
/// # Safety
///
/// `ptr` is NULL or points to a live `T` that outlives `'a` and is not written meanwhile.
pub(crate) unsafe fn arg<'a, T>(ptr: *const T, what: &str) -> Result<&'a T, Error> {
    // SAFETY: the caller's contract.
    unsafe { ptr.as_ref() }.ok_or_else(|| Error::invalid(format!("{what} is NULL")))
}

/// `len` values at `ptr` (NULL is allowed for `len == 0`), or an `Err`.
///
/// # Safety
///
/// `ptr` is NULL or points to `len` live values that outlive `'a`.
pub(crate) unsafe fn array<'a, T>(ptr: *const T, len: i32, what: &str) -> Result<&'a [T], Error> {
    let len = usize::try_from(len)
        .map_err(|_| Error::invalid(format!("{what}: negative length {len}")))?;
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Error::invalid(format!("{what} is NULL")));
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}
