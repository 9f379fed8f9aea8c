//! Export: a tensor as a managed DLPack tensor that keeps its buffer alive, with no copy.

use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::dtype::to_dlpack;
use super::ffi::{
    DLTensor, DLPACK_FLAG_BITMASK_IS_COPIED, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
    DLPACK_FLAG_BITMASK_READ_ONLY,
};
use super::managed::{DlpackLegacy, DlpackTensor, DlpackVersioned, ManagedTensor};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Tensors exported and not yet deleted, in this process.
static LIVE_EXPORTS: AtomicUsize = AtomicUsize::new(0);

/// How many tensors polytensor has exported through DLPack whose deleter has not run yet:
/// back to its earlier value once every consumer is done (a leak check).
pub fn live_exports() -> usize {
    LIVE_EXPORTS.load(Ordering::Acquire)
}

/// What an exported managed tensor points to through `manager_ctx`: the struct itself
/// (first, so a pointer to the struct is a pointer to this), the tensor that keeps the
/// buffer alive, and the shape and strides the struct points into.
#[repr(C)]
struct Export<M> {
    managed: M,
    tensor: Tensor,
    shape_and_strides: Box<[i64]>,
}

/// The deleter of every tensor polytensor exports: frees the [`Export`], dropping its
/// tensor (and so, if it was the last view, the buffer). Safe to call from any thread.
unsafe extern "C" fn delete_export<M: ManagedTensor>(managed: *mut M) {
    if managed.is_null() {
        return;
    }
    // SAFETY: `managed` is the first field of a boxed `Export<M>` made by `export` (the
    // deleter is only ever set there), and DLPack's consumer calls the deleter once.
    drop(unsafe { Box::from_raw(managed.cast::<Export<M>>()) });
    LIVE_EXPORTS.fetch_sub(1, Ordering::AcqRel);
}

impl Tensor {
    /// This tensor as a DLPack 1.x managed tensor, sharing its memory (no copy).
    ///
    /// The handle keeps the buffer alive until the consumer calls the deleter (dropping the
    /// handle does that too); [`DlpackTensor::into_raw`] gives the raw pointer a C or Python
    /// consumer takes. Shape and strides are always filled; a view is exported as it is
    /// (strides in elements, possibly zero or negative; its offset in `byte_offset`). Flags:
    /// `READ_ONLY` for memory polytensor must not let anyone write (a decoded proto's
    /// bytes), `IS_COPIED` for a tiny tensor whose elements live in the tensor value itself
    /// (the handle holds its own copy of those few bytes), `IS_SUBBYTE_TYPE_PADDED` for
    /// int4, uint4, int2 and uint2 (one element per byte).
    ///
    /// An `Err` for dtypes DLPack cannot name (strings, quantized), for devices with no
    /// DLPack device type, and for memory with no address to give (wgpu buffers: copy them
    /// to the host first, or ask the Python protocol for a copy).
    pub fn to_dlpack_versioned(&self) -> Result<DlpackVersioned> {
        export(self)
    }

    /// This tensor as a legacy (unversioned) DLPack managed tensor, for consumers older than
    /// DLPack 1.0. As [`Tensor::to_dlpack_versioned`], but the legacy struct has no flags:
    /// read-only memory and sub-byte dtypes, which need them, are an `Err`.
    pub fn to_dlpack(&self) -> Result<DlpackLegacy> {
        export(self)
    }
}

fn export<M: ManagedTensor>(tensor: &Tensor) -> Result<DlpackTensor<M>> {
    let dtype = to_dlpack(tensor.dtype())?;
    let device = tensor.device();
    let dl_device = device.dlpack_device().ok_or_else(|| {
        Error::invalid(format!(
            "device {} has no DLPack device type: copy the tensor to the host first",
            device.name()
        ))
    })?;
    let buffer = tensor.buffer();
    if buffer.device_address().is_none() {
        return Err(Error::invalid(format!(
            "the memory of {} has no address to share through DLPack: copy the tensor to \
             the host first (the Python protocol's copy=True)",
            device.name()
        )));
    }
    let mut flags = 0;
    if buffer.is_read_only() {
        flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
    }
    if dtype.padded {
        flags |= DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
    }
    if tensor.is_embedded() {
        flags |= DLPACK_FLAG_BITMASK_IS_COPIED;
    }
    if !M::VERSIONED && flags & !DLPACK_FLAG_BITMASK_IS_COPIED != 0 {
        return Err(Error::invalid(format!(
            "a legacy DLPack tensor cannot say that the memory is {}: export with \
             to_dlpack_versioned",
            if buffer.is_read_only() {
                "read-only"
            } else {
                "one sub-byte element per byte"
            }
        )));
    }
    // Work queued on the device finishes before the consumer sees the memory.
    device.synchronize()?;

    let layout = tensor.layout();
    let rank = layout.rank();
    let mut shape_and_strides = Vec::with_capacity(2 * rank);
    shape_and_strides.extend(layout.shape().iter().map(|d| d as i64));
    shape_and_strides.extend(layout.strides().iter().map(|&s| s as i64));
    let empty = layout.num_elements() == 0;
    let byte_offset = if empty {
        0
    } else {
        layout
            .offset()
            .checked_mul(tensor.dtype().size())
            .ok_or_else(|| Error::invalid("the view's byte offset overflows"))? as u64
    };
    let export = Box::into_raw(Box::new(Export {
        managed: M::assemble(
            DLTensor {
                data: null_mut(),
                device: dl_device,
                ndim: rank as i32,
                dtype: dtype.dl,
                shape: null_mut(),
                strides: null_mut(),
                byte_offset,
            },
            flags,
            null_mut(),
            delete_export::<M>,
        ),
        tensor: tensor.clone(),
        shape_and_strides: shape_and_strides.into_boxed_slice(),
    }));
    // SAFETY: `export` is the box just made, owned here alone; the pointers below point
    // into it (the context, and a tiny tensor's elements, which live inside the tensor
    // value) or into the shape array it owns, and it never moves until the deleter frees it.
    let export = unsafe {
        let this = &mut *export;
        let data = if empty {
            null_mut()
        } else {
            this.tensor.buffer().device_address().unwrap_or(0) as *mut c_void
        };
        let dims = this.shape_and_strides.as_mut_ptr();
        let dl_tensor = this.managed.dl_tensor_mut();
        dl_tensor.data = data;
        dl_tensor.shape = dims;
        // `dims` holds `2 * rank` values: the shape, then the strides.
        dl_tensor.strides = dims.add(rank);
        this.managed.set_manager_ctx(export.cast());
        export
    };
    LIVE_EXPORTS.fetch_add(1, Ordering::AcqRel);
    // SAFETY: our own live export, owned by the handle from here on.
    Ok(unsafe { DlpackTensor::from_raw(export.cast::<M>()) }.expect("a Box is never NULL"))
}
