//! [`EmbeddedBuffer`]: a few bytes of host memory inside a `Tensor` value itself.

use std::any::Any;
use std::cell::UnsafeCell;
use std::fmt;
use std::sync::{Arc, OnceLock};

use super::TensorBuffer;
use crate::device::same_device;
use crate::device::Device;

/// The bytes an [`EmbeddedBuffer`] holds: any real scalar, two `f32` or a `complex64`.
pub const EMBEDDED_BUFFER_BYTES: usize = 8;

/// The one host device whose tiny tensors embed their elements (see
/// [`EmbeddedBuffer::register_host_device`]).
static HOST_DEVICE: OnceLock<Arc<dyn Device>> = OnceLock::new();

/// [`EMBEDDED_BUFFER_BYTES`] of host memory held inside the `Tensor` value, for the scalars
/// and tiny tensors of the process-wide host device: making one costs no allocation, no
/// reference count and no allocator statistics, as TFRT's host scalars and PyTorch's
/// wrapped numbers. Within a `Tensor` it takes no more room than the `Arc` of any other
/// buffer.
///
/// Such a tensor is a value: cloning it (or taking a view of it) copies these bytes, so it
/// never shares memory with another tensor (`shares_buffer_with` is false, and it is always
/// the only reference to its buffer, free to write in place). The bytes are 8-byte aligned,
/// which every element type that fits needs at most, and zeroed on creation; `len_bytes` is
/// the whole capacity.
#[repr(transparent)]
pub struct EmbeddedBuffer(UnsafeCell<u64>);

// SAFETY: the bytes are written only through `host_ptr` under `TensorBuffer`'s contract, by
// the owner of the tensor holding this buffer (through `&mut Tensor`, so nothing else reads
// them meanwhile).
unsafe impl Sync for EmbeddedBuffer {}

impl EmbeddedBuffer {
    /// Make `device`, a host device whose memory is plain host memory, the one whose
    /// tensors of at most [`EMBEDDED_BUFFER_BYTES`] embed their elements (the CPU backend
    /// registers its process-wide device). The first registration stands; returns whether
    /// `device` is the registered one.
    pub fn register_host_device(device: &Arc<dyn Device>) -> bool {
        same_device(HOST_DEVICE.get_or_init(|| device.clone()), device)
    }

    /// `len` zeroed bytes on `device`, or `None` unless `len` fits and `device` is the
    /// registered host device.
    #[inline]
    pub fn zeroed(len: usize, device: &Arc<dyn Device>) -> Option<Self> {
        let host = HOST_DEVICE.get()?;
        (len <= EMBEDDED_BUFFER_BYTES && same_device(host, device))
            .then(|| EmbeddedBuffer(UnsafeCell::new(0)))
    }
}

impl Clone for EmbeddedBuffer {
    #[inline]
    fn clone(&self) -> Self {
        // SAFETY: writers hold the owning tensor mutably, so none runs while `&self` is
        // alive: this read races with nothing.
        EmbeddedBuffer(UnsafeCell::new(unsafe { *self.0.get() }))
    }
}

impl fmt::Debug for EmbeddedBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedBuffer")
            .field("len_bytes", &EMBEDDED_BUFFER_BYTES)
            .field("device", &self.device().name())
            .finish()
    }
}

// SAFETY: `EMBEDDED_BUFFER_BYTES` bytes lie at `host_ptr()`, inside the value. The value
// moves with its tensor, but never while borrowed, and every use of the pointer (a view, a
// host slice) borrows the tensor: the pointer is valid for as long as it can be used.
unsafe impl TensorBuffer for EmbeddedBuffer {
    #[inline]
    fn len_bytes(&self) -> usize {
        EMBEDDED_BUFFER_BYTES
    }
    #[inline]
    fn device(&self) -> &Arc<dyn Device> {
        HOST_DEVICE
            .get()
            .expect("embedded buffers exist only once a host device is registered")
    }
    #[inline]
    fn host_ptr(&self) -> Option<*mut u8> {
        Some(self.0.get().cast())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
