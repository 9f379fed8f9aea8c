//! DLPack capsules, as the Python protocol has them: `Tensor.__dlpack__` makes one, and
//! `from_dlpack` takes one from any producer.
//!
//! A capsule is named `dltensor_versioned` (DLPack 1.x) or `dltensor` (the legacy struct).
//! The consumer that takes the managed tensor renames the capsule `used_dltensor_versioned`
//! or `used_dltensor` and owns it from then on; a capsule that dies unconsumed calls the
//! managed tensor's deleter itself, so the deleter runs exactly once either way.

use std::ffi::{c_void, CStr};
use std::ptr::NonNull;

use polytensor::dlpack::{
    self, Capsule, DLManagedTensor, DLManagedTensorVersioned, DlpackTensor, ManagedTensor,
};
use polytensor::Tensor;
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::errors::IntoPyResult;

/// The names a capsule of `M` has before and after a consumer takes it.
trait CapsuleNames: ManagedTensor {
    const FRESH: &'static CStr;
    const USED: &'static CStr;
}

impl CapsuleNames for DLManagedTensorVersioned {
    const FRESH: &'static CStr = c"dltensor_versioned";
    const USED: &'static CStr = c"used_dltensor_versioned";
}

impl CapsuleNames for DLManagedTensor {
    const FRESH: &'static CStr = c"dltensor";
    const USED: &'static CStr = c"used_dltensor";
}

/// The destructor of the capsules polytensor makes: if no consumer took the managed tensor
/// (the capsule still has its fresh name), delete it.
unsafe extern "C" fn delete_unconsumed<M: CapsuleNames>(capsule: *mut ffi::PyObject) {
    // SAFETY: Python calls a capsule's destructor with the dying capsule, the GIL held.
    // A capsule with the fresh name still owns the managed tensor it was made with (a
    // consumer renames it when it takes it), and `PyCapsule_IsValid` sets no exception.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, M::FRESH.as_ptr()) == 1 {
            let managed = ffi::PyCapsule_GetPointer(capsule, M::FRESH.as_ptr()).cast::<M>();
            drop(DlpackTensor::from_raw(managed));
        }
    }
}

/// A managed tensor handed to Python in a capsule of its kind's fresh name.
fn wrap<M: CapsuleNames>(
    py: Python<'_>,
    managed: DlpackTensor<M>,
) -> PyResult<Bound<'_, PyCapsule>> {
    let raw = managed.into_raw();
    let pointer = NonNull::new(raw.cast::<c_void>()).expect("a managed tensor is never NULL");
    // SAFETY: the capsule owns the managed tensor from here on: its destructor deletes it
    // unless a consumer took it (and renamed the capsule); the deleter is safe from any
    // thread, as DLPack requires.
    let made = unsafe {
        PyCapsule::new_with_pointer_and_destructor(
            py,
            pointer,
            M::FRESH,
            Some(delete_unconsumed::<M>),
        )
    };
    made.inspect_err(|_| {
        // SAFETY: no capsule was made, so `raw` is still ours alone.
        drop(unsafe { DlpackTensor::from_raw(raw) });
    })
}

/// `tensor.__dlpack__(...)`: the tensor (or a host copy, where the request needs one) in a
/// capsule. Export failures are `BufferError`s, as the array API standard asks.
pub fn export<'py>(
    py: Python<'py>,
    tensor: &Tensor,
    request: dlpack::DlpackRequest,
) -> PyResult<Bound<'py, PyCapsule>> {
    let capsule = py
        .detach(|| dlpack::dlpack(tensor, request))
        .map_err(|e| PyBufferError::new_err(e.to_string()))?;
    match capsule {
        Capsule::Versioned(managed) => wrap(py, managed),
        Capsule::Legacy(managed) => wrap(py, managed),
    }
}

/// Take the managed tensor out of a fresh capsule of `M` (renaming it used): `None` if the
/// capsule is not one.
fn take<M: CapsuleNames>(capsule: &Bound<'_, PyCapsule>) -> PyResult<Option<DlpackTensor<M>>> {
    if !capsule.is_valid_checked(Some(M::FRESH)) {
        return Ok(None);
    }
    let pointer = capsule.pointer_checked(Some(M::FRESH))?;
    // SAFETY: a valid capsule object and a NUL-terminated static name.
    if unsafe { ffi::PyCapsule_SetName(capsule.as_ptr(), M::USED.as_ptr()) } != 0 {
        return Err(PyErr::fetch(capsule.py()));
    }
    // SAFETY: a fresh capsule holds a live managed tensor of `M` (the protocol's
    // contract), and renaming it made this the one owner: the producer's capsule
    // destructor no longer deletes it.
    Ok(unsafe { DlpackTensor::from_raw(pointer.as_ptr().cast::<M>()) })
}

/// The tensor in a producer's capsule, viewing its memory without a copy (on the host
/// device for host memory, else on the device it is on). The capsule is consumed.
pub fn import(capsule: &Bound<'_, PyCapsule>) -> PyResult<Tensor> {
    if let Some(managed) = take::<DLManagedTensorVersioned>(capsule)? {
        return dlpack::import(managed).py();
    }
    if let Some(managed) = take::<DLManagedTensor>(capsule)? {
        return dlpack::import(managed).py();
    }
    let name = capsule
        .name()?
        // SAFETY: the capsule is alive while the name is read, here.
        .map(|name| unsafe { name.as_cstr() }.to_string_lossy().into_owned())
        .unwrap_or_default();
    Err(PyValueError::new_err(if name.starts_with("used_") {
        format!("the DLPack capsule was already consumed (it is named {name:?})")
    } else {
        format!("not a DLPack capsule: named {name:?}, not \"dltensor_versioned\" or \"dltensor\"")
    }))
}

/// How many tensors polytensor has exported that no consumer has deleted yet (a leak check
/// for tests).
#[pyfunction]
pub fn live_exports() -> usize {
    dlpack::live_exports()
}
