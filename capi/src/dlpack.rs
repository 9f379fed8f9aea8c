//! DLPack across the C boundary: export (versioned and legacy), import, Python's
//! `__dlpack__` and `__dlpack_device__`, and the count of live exports.

use std::ffi::{c_int, c_void};
use std::ptr::null_mut;

use polytensor::dlpack::{
    self, live_exports, Capsule, DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned,
    DlpackRequest,
};

use crate::status::{arg, guard, PT_Status};
use crate::tensor::PT_Tensor;

/// The tensor as a DLPack 1.x managed tensor, sharing its memory. The caller (the consumer)
/// calls its `deleter` once when done, from any thread. NULL on error (dtypes DLPack cannot
/// name, memory with no address).
///
/// # Safety
///
/// `tensor` is NULL or a live handle; `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_ToDLPackVersioned(
    tensor: *const PT_Tensor,
    status: *mut PT_Status,
) -> *mut DLManagedTensorVersioned {
    guard(status, null_mut(), || {
        // SAFETY: the caller's contract.
        let t = &unsafe { arg(tensor, "tensor") }?.tensor;
        Ok(t.to_dlpack_versioned()?.into_raw())
    })
}

/// The tensor as a legacy DLPack managed tensor (no flags: read-only memory and sub-byte
/// dtypes are errors). As [`PT_ToDLPackVersioned`] otherwise.
///
/// # Safety
///
/// `tensor` is NULL or a live handle; `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_ToDLPack(
    tensor: *const PT_Tensor,
    status: *mut PT_Status,
) -> *mut DLManagedTensor {
    guard(status, null_mut(), || {
        // SAFETY: the caller's contract.
        let t = &unsafe { arg(tensor, "tensor") }?.tensor;
        Ok(t.to_dlpack()?.into_raw())
    })
}

/// A tensor viewing the memory of a producer's DLPack 1.x managed tensor, with no copy.
/// Ownership of `managed` passes to polytensor whatever happens: its deleter is called once,
/// when the last view of the memory is deleted, or before this returns on error.
///
/// # Safety
///
/// `managed` is NULL or a live managed tensor nobody else will delete; `status` NULL or
/// live.
#[no_mangle]
pub unsafe extern "C" fn PT_FromDLPackVersioned(
    managed: *mut DLManagedTensorVersioned,
    status: *mut PT_Status,
) -> *mut PT_Tensor {
    guard(status, null_mut(), || {
        // SAFETY: the caller's contract.
        Ok(PT_Tensor::boxed(unsafe {
            dlpack::from_dlpack_versioned(managed)
        }?))
    })
}

/// [`PT_FromDLPackVersioned`] for a legacy managed tensor.
///
/// # Safety
///
/// As [`PT_FromDLPackVersioned`].
#[no_mangle]
pub unsafe extern "C" fn PT_FromDLPack(
    managed: *mut DLManagedTensor,
    status: *mut PT_Status,
) -> *mut PT_Tensor {
    guard(status, null_mut(), || {
        // SAFETY: the caller's contract.
        Ok(PT_Tensor::boxed(unsafe { dlpack::from_dlpack(managed) }?))
    })
}

/// Python's `__dlpack__(stream, max_version, dl_device, copy)`: the managed tensor a
/// capsule carries, a `DLManagedTensorVersioned*` if `*versioned` is set to 1 on return
/// (capsule name `dltensor_versioned`), a legacy `DLManagedTensor*` if 0 (`dltensor`).
///
/// Python's `None` is passed as: `stream` NULL; `max_major` negative; `device_type` 0;
/// `copy` negative (0 is `False`, positive `True`). Copies only when asked or needed, and
/// then sets `IS_COPIED`. NULL on error (Python's `BufferError`).
///
/// # Safety
///
/// `tensor` is NULL or a live handle; `stream` NULL or one value; `versioned` NULL or
/// writable; `status` NULL or live.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn PT_DLPack(
    tensor: *const PT_Tensor,
    stream: *const i64,
    max_major: c_int,
    max_minor: c_int,
    device_type: i32,
    device_id: i32,
    copy: c_int,
    versioned: *mut c_int,
    status: *mut PT_Status,
) -> *mut c_void {
    guard(status, null_mut(), || {
        // SAFETY: the caller's contract.
        let t = &unsafe { arg(tensor, "tensor") }?.tensor;
        let request = DlpackRequest {
            // SAFETY: the caller's contract.
            stream: unsafe { stream.as_ref() }.copied(),
            max_version: u32::try_from(max_major)
                .ok()
                .map(|major| (major, u32::try_from(max_minor).unwrap_or(0))),
            dl_device: (device_type != 0)
                .then(|| DLDevice::new(DLDeviceType(device_type), device_id)),
            copy: (copy >= 0).then_some(copy > 0),
        };
        let capsule: Capsule = dlpack::dlpack(t, request)?;
        // SAFETY: the caller's contract.
        if let Some(out) = unsafe { versioned.as_mut() } {
            *out = c_int::from(capsule.is_versioned());
        }
        Ok(capsule.into_raw())
    })
}

/// Python's `__dlpack_device__`: the tensor's DLPack device type and id, into
/// `device_type` and `device_id`.
///
/// # Safety
///
/// `tensor` is NULL or a live handle; the outputs NULL or writable; `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_DLPackDevice(
    tensor: *const PT_Tensor,
    device_type: *mut i32,
    device_id: *mut i32,
    status: *mut PT_Status,
) {
    guard(status, (), || {
        // SAFETY: the caller's contract.
        let t = &unsafe { arg(tensor, "tensor") }?.tensor;
        let device = dlpack::dlpack_device(t)?;
        // SAFETY: the caller's contract.
        unsafe {
            if let Some(out) = device_type.as_mut() {
                *out = device.device_type.0;
            }
            if let Some(out) = device_id.as_mut() {
                *out = device.device_id;
            }
        }
        Ok(())
    })
}

/// How many tensors polytensor has exported through DLPack whose deleter has not run yet
/// (in this process): a leak check for consumers.
#[no_mangle]
pub extern "C" fn PT_LiveDLPackExports() -> usize {
    live_exports()
}
