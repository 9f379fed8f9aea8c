//! [`EmbeddedBuffer`]: a few bytes of host memory inside a `Tensor` value itself.

use std::any::Any;
use std::cell::UnsafeCell;
use std::fmt;
use std::sync::{Arc, OnceLock};

use super::TensorBuffer;
use crate::device::same_device;
use crate::device::Device;
use crate::dtype::DataType;
use crate::element::Element;

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
        (len <= EMBEDDED_BUFFER_BYTES && same_device(host, device)).then(Self::empty)
    }

    /// Zeroed bytes, for a result of tensors that are embedded already (so a host device
    /// is registered).
    #[inline]
    pub(crate) fn empty() -> Self {
        EmbeddedBuffer(UnsafeCell::new(0))
    }

    /// The first `len` elements as `T`, or `None` if they do not fit (or, for `bool`, a
    /// byte is neither 0 nor 1).
    #[inline]
    pub fn elements<T: Element>(&self, len: usize) -> Option<&[T]> {
        let ptr = self.0.get().cast::<T>();
        // SAFETY: `elements_fit` checked size and alignment, and for bool every byte; every
        // other `Element` is valid for any bytes. Writers hold the owning tensor mutably
        // (see `Clone`), so nothing writes while `&self` is borrowed.
        elements_fit::<T>(len, ptr.cast_const().cast())
            .then(|| unsafe { std::slice::from_raw_parts(ptr, len) })
    }

    /// [`EmbeddedBuffer::elements`], to write.
    #[inline]
    pub fn elements_mut<T: Element>(&mut self, len: usize) -> Option<&mut [T]> {
        let ptr = std::ptr::from_mut(self.0.get_mut()).cast::<T>();
        // SAFETY: as in `elements`; `&mut self` makes this the only access.
        elements_fit::<T>(len, ptr.cast_const().cast())
            .then(|| unsafe { std::slice::from_raw_parts_mut(ptr, len) })
    }
}

/// Whether `len` elements of `T` fit in the embedded buffer whose bytes start at `ptr`,
/// aligned, and for `bool` are all 0 or 1.
#[inline]
fn elements_fit<T: Element>(len: usize, ptr: *const u8) -> bool {
    let fits = len
        .checked_mul(std::mem::size_of::<T>())
        .is_some_and(|n| n <= EMBEDDED_BUFFER_BYTES)
        && (ptr as usize).is_multiple_of(std::mem::align_of::<T>());
    if !fits || T::DTYPE != DataType::Bool {
        return fits;
    }
    // SAFETY: `len` bytes (bool is one byte) lie within the buffer's initialised bytes.
    let bytes = unsafe { std::slice::from_raw_parts(ptr, len) };
    bytes.iter().all(|&b| b <= 1)
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
