//! DLPack: [`polytensor_core::dlpack`] (the C structs, export and import), plus what needs the
//! device registry: importing onto the right device, and the semantics of Python's
//! `__dlpack__` and `__dlpack_device__`, so that a Python binding only has to wrap the
//! result in a capsule.
//!
//! ```
//! use polytensor::prelude::*;
//! use polytensor::dlpack::{self, Capsule, DlpackRequest};
//!
//! let cpu = polytensor::device("cpu")?;
//! let t = Tensor::from_slice(&[1i64, 2, 3, 4], [2, 2], &cpu)?;
//! // What `numpy.from_dlpack(t)` asks for: DLPack 1.x, no copy.
//! let capsule = dlpack::dlpack(&t, DlpackRequest { max_version: Some((1, 1)), ..Default::default() })?;
//! assert_eq!(capsule.name(), "dltensor_versioned");
//! let Capsule::Versioned(handle) = capsule else { unreachable!() };
//! let back = Tensor::import_dlpack(handle, &cpu)?;
//! assert_eq!(back.to_vec::<i64>()?, vec![1, 2, 3, 4]);
//! # Ok::<(), polytensor::Error>(())
//! ```

use std::sync::Arc;

pub use polytensor_core::dlpack::*;
use polytensor_core::{Device, Error, Result, Tensor};

/// The arguments of Python's `__dlpack__(stream=None, max_version=None, dl_device=None,
/// copy=None)`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DlpackRequest {
    /// The consumer's stream. For host memory it must be `None` (or -1). For CUDA memory it
    /// is the protocol's integer (1: the legacy default stream, 2: the per-thread default
    /// stream, -1: no synchronisation, else a `cudaStream_t`; 0 is refused as ambiguous).
    /// polytensor finishes the work queued on the tensor's device before it returns, which
    /// makes the memory ready for any consumer stream.
    pub stream: Option<i64>,
    /// The newest DLPack version the consumer reads: `None` or a major version below 1
    /// asks for the legacy struct.
    pub max_version: Option<(u32, u32)>,
    /// The device the consumer wants the memory on (`None`: where it is).
    pub dl_device: Option<DLDevice>,
    /// `Some(true)`: always copy; `Some(false)`: never copy (an `Err` where one is needed);
    /// `None`: copy only where needed.
    pub copy: Option<bool>,
}

/// What `__dlpack__` returns: the versioned struct, or the legacy one for old consumers.
#[derive(Debug)]
pub enum Capsule {
    /// A `DLManagedTensorVersioned` (capsule name `dltensor_versioned`).
    Versioned(DlpackVersioned),
    /// A legacy `DLManagedTensor` (capsule name `dltensor`).
    Legacy(DlpackLegacy),
}

impl Capsule {
    /// The name of the Python capsule that carries it.
    pub fn name(&self) -> &'static str {
        match self {
            Capsule::Versioned(_) => DLManagedTensorVersioned::CAPSULE_NAME,
            Capsule::Legacy(_) => DLManagedTensor::CAPSULE_NAME,
        }
    }

    /// Whether it is the versioned struct.
    pub fn is_versioned(&self) -> bool {
        matches!(self, Capsule::Versioned(_))
    }

    /// The flags (0 for the legacy struct).
    pub fn flags(&self) -> u64 {
        match self {
            Capsule::Versioned(t) => t.flags(),
            Capsule::Legacy(_) => 0,
        }
    }

    /// Give up ownership: the raw struct pointer a capsule carries (its type is
    /// [`Capsule::is_versioned`]'s).
    pub fn into_raw(self) -> *mut std::ffi::c_void {
        match self {
            Capsule::Versioned(t) => t.into_raw().cast(),
            Capsule::Legacy(t) => t.into_raw().cast(),
        }
    }
}

/// Python's `__dlpack_device__`: where the tensor's memory is, as DLPack names it.
pub fn dlpack_device(tensor: &Tensor) -> Result<DLDevice> {
    tensor.device().dlpack_device().ok_or_else(|| {
        Error::invalid(format!(
            "device {} has no DLPack device type",
            tensor.device().name()
        ))
    })
}

/// Python's `__dlpack__`: `tensor` as a DLPack capsule, shared without a copy unless the
/// request asks for one or needs one, and then copied to the host with `IS_COPIED` set.
///
/// Copies are needed for another `dl_device` (only `kDLCPU` is offered) and for read-only
/// memory asked for as a legacy struct (which cannot say read-only); `copy: Some(false)`
/// turns those into an `Err`. Memory with no address to share (wgpu) is an `Err` unless
/// the request asks for a copy (`copy: Some(true)`) or for `kDLCPU`.
pub fn dlpack(tensor: &Tensor, request: DlpackRequest) -> Result<Capsule> {
    let here = dlpack_device(tensor)?;
    let versioned = request.max_version.is_some_and(|(major, _)| major >= 1);
    if here.is_host_accessible() && request.stream.is_some_and(|s| s != -1) {
        return Err(Error::invalid(format!(
            "stream {:?} given for host memory: it must be None",
            request.stream
        )));
    }
    if here.device_type == DLDeviceType::CUDA && request.stream == Some(0) {
        return Err(Error::invalid(
            "stream 0 is ambiguous for CUDA memory (DLPack): pass 1 for the legacy default \
             stream, 2 for the per-thread default stream, or a stream handle",
        ));
    }
    let target = request.dl_device.unwrap_or(here);
    let why_copy = if request.copy == Some(true) {
        Some("copy=True")
    } else if target != here {
        Some("another device was asked for")
    } else if tensor.buffer().device_address().is_none() {
        // Never copied unasked: the consumer would get memory on another device.
        return Err(Error::invalid(format!(
            "the memory of {} has no address to share: ask for copy=True or \
             dl_device=kDLCPU",
            tensor.device().name()
        )));
    } else if !versioned && tensor.buffer().is_read_only() {
        Some("the memory is read-only, which the legacy struct cannot say")
    } else {
        None
    };
    let Some(why) = why_copy else {
        return export(tensor, versioned, false);
    };
    if request.copy == Some(false) {
        return Err(Error::invalid(format!(
            "copy=False, but a copy is needed: {why}"
        )));
    }
    // Copies go to the host, the one place polytensor can give an address in.
    if target != DLDevice::CPU && request.dl_device.is_some() {
        return Err(Error::invalid(format!(
            "DLPack copies go to the host (kDLCPU:0), not to {target}"
        )));
    }
    let copy = copy_to_host(tensor)?;
    export(&copy, versioned, true)
}

/// A private copy of `tensor` in host memory.
fn copy_to_host(tensor: &Tensor) -> Result<Tensor> {
    let host = host_device()?;
    Tensor::from_bytes(
        &tensor.to_bytes()?,
        tensor.shape().clone(),
        tensor.dtype(),
        &host,
    )
}

fn export(tensor: &Tensor, versioned: bool, copied: bool) -> Result<Capsule> {
    Ok(if versioned {
        let mut handle = tensor.to_dlpack_versioned()?;
        if copied {
            handle.mark_copied();
        }
        Capsule::Versioned(handle)
    } else {
        Capsule::Legacy(tensor.to_dlpack()?)
    })
}

/// The device DLPack host memory is imported onto: the first available device that is a
/// host device (`cpu:0` when the `cpu` feature is on).
pub fn host_device() -> Result<Arc<dyn Device>> {
    crate::devices()
        .iter()
        .filter_map(|e| e.device())
        .find(|d| d.dlpack_device() == Some(DLDevice::CPU))
        .cloned()
        .ok_or_else(|| Error::DeviceUnavailable {
            device: "kDLCPU".into(),
            why: "no host device is compiled in (enable the `cpu` feature)".into(),
        })
}

/// Import a managed DLPack tensor onto the device it names ([`Tensor::import_dlpack`] with
/// the device found for it). The deleter runs once, whatever happens.
pub fn import<M: ManagedTensor>(managed: DlpackTensor<M>) -> Result<Tensor> {
    let device = match managed.dl_tensor().map(|t| t.device) {
        Some(place) if !place.is_host_accessible() => device_of(place)?,
        _ => host_device()?,
    };
    Tensor::import_dlpack(managed, &device)
}

/// The available device DLPack calls `place` (`kDLCUDA:0` is `cuda:0`).
fn device_of(place: DLDevice) -> Result<Arc<dyn Device>> {
    crate::devices()
        .iter()
        .filter_map(|e| e.device())
        .find(|d| d.dlpack_device() == Some(place))
        .cloned()
        .ok_or_else(|| Error::DeviceUnavailable {
            device: place.to_string(),
            why: "no available device of this build is that DLPack device".into(),
        })
}

/// [`import`] of a raw `DLManagedTensorVersioned*`.
///
/// # Safety
///
/// As [`DlpackTensor::from_raw`]: NULL, or a live managed tensor whose ownership passes here.
pub unsafe fn from_dlpack_versioned(managed: *mut DLManagedTensorVersioned) -> Result<Tensor> {
    // SAFETY: the caller's contract.
    let handle = unsafe { DlpackTensor::from_raw(managed) };
    import(handle.ok_or_else(|| Error::invalid("a NULL DLPack managed tensor"))?)
}

/// [`import`] of a raw legacy `DLManagedTensor*`.
///
/// # Safety
///
/// As [`from_dlpack_versioned`].
pub unsafe fn from_dlpack(managed: *mut DLManagedTensor) -> Result<Tensor> {
    // SAFETY: the caller's contract.
    let handle = unsafe { DlpackTensor::from_raw(managed) };
    import(handle.ok_or_else(|| Error::invalid("a NULL DLPack managed tensor"))?)
}
