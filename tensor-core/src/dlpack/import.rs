//! Import: a producer's managed DLPack tensor as a polytensor tensor viewing its memory.

use std::ptr::NonNull;
use std::sync::Arc;

use super::dtype::from_dlpack;
use super::ffi::{
    DLManagedTensor, DLManagedTensorVersioned, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
    DLPACK_FLAG_BITMASK_READ_ONLY,
};
use super::managed::{DlpackTensor, ManagedTensor};
use crate::buffer::{adopt, Release};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::shape::{TensorShape, MAX_RANK};
use crate::tensor::Tensor;

impl Tensor {
    /// The tensor a DLPack producer hands over as a raw `DLManagedTensorVersioned*`, on the
    /// host device `device` (see [`Tensor::import_dlpack`]).
    ///
    /// # Safety
    ///
    /// `managed` must satisfy [`DlpackTensor::from_raw`]: NULL, or a live managed tensor
    /// whose ownership passes to polytensor (nobody else calls its deleter).
    pub unsafe fn from_dlpack_versioned(
        managed: *mut DLManagedTensorVersioned,
        device: &Arc<dyn Device>,
    ) -> Result<Tensor> {
        // SAFETY: the caller's contract.
        let handle = unsafe { DlpackTensor::from_raw(managed) };
        Self::import_dlpack(handle.ok_or_else(null_managed)?, device)
    }

    /// The tensor a legacy DLPack producer hands over as a raw `DLManagedTensor*`, on the
    /// host device `device` (see [`Tensor::import_dlpack`]).
    ///
    /// # Safety
    ///
    /// As [`Tensor::from_dlpack_versioned`].
    pub unsafe fn from_dlpack(
        managed: *mut DLManagedTensor,
        device: &Arc<dyn Device>,
    ) -> Result<Tensor> {
        // SAFETY: the caller's contract.
        let handle = unsafe { DlpackTensor::from_raw(managed) };
        Self::import_dlpack(handle.ok_or_else(null_managed)?, device)
    }

    /// The tensor a managed DLPack tensor describes, viewing its memory with no copy, on
    /// `device`: host memory onto a host device, device memory onto the device it is on
    /// (through [`Device::adopt_memory`]). Any strides (zero, negative, gaps; NULL for compact), any
    /// `byte_offset`, rank 0 and empty tensors. The producer's deleter runs exactly once:
    /// when the last view of the memory drops, or before this returns if the tensor is
    /// refused or holds no elements (then nothing needs its memory).
    ///
    /// Memory flagged `READ_ONLY` is never written: writers copy it first. Memory not
    /// aligned for its dtype is copied once (into an aligned buffer) and handed back at once.
    ///
    /// An `Err` for a major version other than 1, memory on a device other than `device`
    /// (host memory, `kDLCPU` or pinned or managed, goes to a host device), an
    /// unknown dtype or one with several lanes, packed sub-byte integers, a negative rank
    /// or dim, NULL shape, NULL data with elements, an extent past the address space, and
    /// bool (or sub-byte) elements that are not valid values.
    pub fn import_dlpack<M: ManagedTensor>(
        managed: DlpackTensor<M>,
        device: &Arc<dyn Device>,
    ) -> Result<Tensor> {
        let Some(dl) = managed.dl_tensor() else {
            let version = managed
                .version()
                .map_or("?".into(), |v| format!("{}.{}", v.major, v.minor));
            return Err(Error::invalid(format!(
                "DLPack version {version} is not readable: polytensor reads major version {}",
                super::ffi::DLPACK_MAJOR_VERSION
            )));
        };
        let on_host = dl.device.is_host_accessible();
        let fits = if on_host {
            device.dlpack_device() == Some(super::DLDevice::CPU)
        } else {
            device.dlpack_device() == Some(dl.device)
        };
        if !fits {
            return Err(Error::invalid(format!(
                "DLPack memory on {} cannot be imported onto {}: polytensor imports host \
                 memory (kDLCPU, pinned or managed) onto a host device, and device memory \
                 onto the device it is on",
                dl.device,
                device.name()
            )));
        }
        let flags = managed.flags();
        let dtype = from_dlpack(
            dl.dtype,
            flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED != 0,
        )?;
        if !(0..=MAX_RANK as i32).contains(&dl.ndim) {
            return Err(Error::InvalidShape(format!(
                "a DLPack tensor of rank {}",
                dl.ndim
            )));
        }
        let dims = managed
            .shape()
            .ok_or_else(|| Error::InvalidShape("a DLPack tensor with a NULL shape".into()))?;
        let dims = dims
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|_| Error::InvalidShape(format!("a DLPack tensor of shape {dims:?}")))?;
        let shape = TensorShape::new(&dims)?;
        if shape.num_elements() == 0 {
            drop(managed);
            return Tensor::zeros(shape, dtype, device);
        }
        let strides: Vec<isize> = match managed.strides() {
            Some(strides) => strides.iter().map(|&s| s as isize).collect(),
            None => shape.row_major_strides().to_vec(),
        };
        let data = NonNull::new(dl.data.cast::<u8>())
            .ok_or_else(|| Error::invalid("a DLPack tensor with elements has NULL data"))?;
        let extent =
            Extent::of(&shape, &strides, dl.byte_offset, dtype.size()).ok_or_else(|| {
                Error::invalid(format!(
                    "a DLPack tensor of shape {shape}, strides {strides:?} and byte offset {} \
                     reaches past the address space",
                    dl.byte_offset
                ))
            })?;
        (data.as_ptr() as usize)
            .checked_add(extent.start_from_data)
            .and_then(|a| a.checked_sub(extent.before))
            .filter(|&a| {
                a != 0
                    && a.checked_add(extent.len)
                        .is_some_and(|end| end <= isize::MAX as usize)
            })
            .ok_or_else(|| Error::invalid("a DLPack tensor's memory wraps the address space"))?;
        let layout = Layout::new(shape, &strides, extent.first_element)?;
        let read_only = flags & DLPACK_FLAG_BITMASK_READ_ONLY != 0;
        // The lowest byte the tensor reaches (before `data` with negative strides): within
        // the memory the producer vouches for, and checked above not to wrap.
        let start = data
            .as_ptr()
            .wrapping_add(extent.start_from_data)
            .wrapping_sub(extent.before);
        let start = NonNull::new(start)
            .ok_or_else(|| Error::invalid("a DLPack tensor's memory starts at NULL"))?;
        if !on_host {
            // Device memory: an address on the device, never dereferenced here.
            let release: Release = Box::new(move || drop(managed));
            let buffer =
                device.adopt_memory(start.as_ptr() as usize, extent.len, read_only, release)?;
            return Tensor::from_parts(dtype, layout, buffer);
        }
        // SAFETY: the handle vouches for the memory it describes, which is exactly these
        // `extent.len` bytes, until its deleter runs, which only `release` (dropping the
        // handle) does.
        let buffer = unsafe {
            adopt(
                start,
                extent.len,
                dtype.alignment(),
                read_only,
                Box::new(move || drop(managed)),
                device,
            )?
        };
        Tensor::from_parts(dtype, layout, buffer)
    }
}

fn null_managed() -> Error {
    Error::invalid("a NULL DLPack managed tensor")
}

/// The bytes a strided tensor reaches around its first element.
#[derive(Debug, PartialEq, Eq)]
struct Extent {
    /// Bytes from `data` to the first element (`byte_offset`).
    start_from_data: usize,
    /// Bytes before the first element (reached through negative strides).
    before: usize,
    /// The bytes from the lowest element reached to the end of the highest.
    len: usize,
    /// The first element's position, in elements, from the lowest one.
    first_element: usize,
}

impl Extent {
    /// The extent of a non-empty tensor, or `None` if it overflows.
    fn of(shape: &TensorShape, strides: &[isize], byte_offset: u64, size: usize) -> Option<Self> {
        let (mut low, mut high) = (0i128, 0i128);
        for (d, &s) in shape.iter().zip(strides) {
            let reach = (d as i128 - 1) * s as i128;
            if reach < 0 {
                low += reach;
            } else {
                high += reach;
            }
        }
        let first_element = usize::try_from(-low).ok()?;
        let elements = usize::try_from(high - low + 1).ok()?;
        Some(Self {
            start_from_data: usize::try_from(byte_offset).ok()?,
            before: first_element.checked_mul(size)?,
            len: elements.checked_mul(size)?,
            first_element,
        })
    }
}
