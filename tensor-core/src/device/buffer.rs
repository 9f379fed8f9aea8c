//! [`TensorBuffer`]: the memory of one allocation on a device, shared by tensors through
//! `Arc`. It lives beside [`Device`], which makes buffers and which each buffer names: the
//! two traits refer to each other, so they sit in one module.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use super::Device;

/// The memory behind a tensor: one allocation on one device.
///
/// Buffers live behind `Arc`: tensors that are views of one another (slices, transposes,
/// reshapes, broadcasts) clone the `Arc`, never the data, and keep the whole allocation
/// alive. Dropping the last reference returns the memory to the allocator that made it.
/// (The one exception is an [`EmbeddedBuffer`](crate::buffer::EmbeddedBuffer): a few bytes inside the tensor value.)
///
/// # Safety
///
/// Implementors guarantee that `len_bytes` is the size of the memory, and that
/// `host_ptr`, when `Some`, points to `len_bytes` bytes that stay valid and do not move for
/// as long as the buffer lives (behind an `Arc`) or is borrowed (an `EmbeddedBuffer`). Writes through it happen only from the owner of a unique
/// reference (`Arc::strong_count == 1`) or from kernels writing a fresh output.
pub unsafe trait TensorBuffer: Send + Sync + fmt::Debug + 'static {
    /// The size in bytes.
    fn len_bytes(&self) -> usize;

    /// The device the memory lives on.
    fn device(&self) -> &Arc<dyn Device>;

    /// A pointer to the memory if the host can read and write it directly.
    fn host_ptr(&self) -> Option<*mut u8> {
        None
    }

    /// The memory as its device's own API names it: the host pointer of host memory, a
    /// `cl_mem` handle, a CUDA device pointer; `None` where the device has no handle to
    /// give out (wgpu). With a view's byte offset, this is what DLPack's `DLTensor::data`
    /// and `byte_offset` carry for the buffer's device type.
    fn device_address(&self) -> Option<usize> {
        self.host_ptr().map(|p| p as usize)
    }

    /// The buffer as `Any`, to downcast to the backend's own type.
    fn as_any(&self) -> &dyn Any;

    /// Whether the memory is shared with something outside polytensor and must never be
    /// written (a [`BytesBuffer`](crate::buffer::BytesBuffer)). Writers copy such a buffer first (copy on write).
    fn is_read_only(&self) -> bool {
        false
    }
}

impl dyn TensorBuffer {
    /// The backend's own buffer type, if this is one.
    pub fn downcast_ref<T: TensorBuffer>(&self) -> Option<&T> {
        self.as_any().downcast_ref::<T>()
    }

    /// The memory as host bytes, if host-visible.
    #[inline]
    pub fn host_bytes(&self) -> Option<&[u8]> {
        let ptr = self.host_ptr()?;
        // SAFETY: the trait guarantees `len_bytes` valid bytes at `ptr` for the buffer's life;
        // the slice borrows `self`, so it cannot outlive the buffer.
        Some(unsafe { std::slice::from_raw_parts(ptr, self.len_bytes()) })
    }
}
