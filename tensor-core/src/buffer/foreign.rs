//! [`ForeignBuffer`]: host memory that belongs to someone outside polytensor (a DLPack
//! producer, a C caller of `PT_NewTensor`), borrowed without a copy and handed back through
//! the owner's release callback exactly once, when the last tensor viewing it drops.

use std::any::Any;
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use super::TensorBuffer;
use crate::device::Device;

/// What hands foreign memory back to its owner: called once, from whichever thread drops
/// the last tensor viewing the memory.
pub type Release = Box<dyn FnOnce() + Send>;

/// Host memory owned outside polytensor: `len` bytes at `ptr`, valid until `release` runs.
///
/// Tensors view it without a copy; dropping the last view calls `release` exactly once. A
/// read-only buffer is never written (writers copy first, as with a
/// [`BytesBuffer`](super::BytesBuffer)).
pub struct ForeignBuffer {
    ptr: NonNull<u8>,
    len: usize,
    read_only: bool,
    release: Option<Release>,
    device: Arc<dyn Device>,
}

// SAFETY: the buffer only hands out `ptr` under `TensorBuffer`'s contract (reads, and writes
// by a unique owner), and `new`'s caller promises the memory may be used from any thread;
// `release` is `Send` and runs once, on drop.
unsafe impl Send for ForeignBuffer {}
// SAFETY: as for `Send`: shared references read the memory only.
unsafe impl Sync for ForeignBuffer {}

impl ForeignBuffer {
    /// Borrow `len` bytes at `ptr` as the memory of tensors on the host device `device`;
    /// `release` gives them back.
    ///
    /// # Safety
    ///
    /// `ptr` must point to `len` bytes that stay valid, and are not moved or freed, until
    /// `release` is called; they may be read (and, unless `read_only`, written) from any
    /// thread meanwhile, and nothing else writes them while polytensor reads them.
    pub unsafe fn new(
        ptr: NonNull<u8>,
        len: usize,
        read_only: bool,
        release: Release,
        device: Arc<dyn Device>,
    ) -> Self {
        Self {
            ptr,
            len,
            read_only,
            release: Some(release),
            device,
        }
    }
}

/// Foreign memory as a tensor buffer: borrowed as a [`ForeignBuffer`] when `ptr` is aligned
/// to `alignment`, else copied once into a new buffer of `device` and handed back at once
/// (as TensorFlow's `TF_NewTensor` does). On an `Err` (the copy's allocation failed),
/// `release` has run too: the memory is always handed back exactly once.
///
/// # Safety
///
/// As [`ForeignBuffer::new`]; `device` is a host device (its buffers have host pointers).
pub unsafe fn adopt(
    ptr: NonNull<u8>,
    len: usize,
    alignment: usize,
    read_only: bool,
    release: Release,
    device: &Arc<dyn Device>,
) -> crate::Result<Arc<dyn TensorBuffer>> {
    if (ptr.as_ptr() as usize).is_multiple_of(alignment.max(1)) {
        // SAFETY: the caller's contract.
        let buffer = unsafe { ForeignBuffer::new(ptr, len, read_only, release, device.clone()) };
        return Ok(Arc::new(buffer));
    }
    let copy = device.allocate(len);
    let copied = copy.and_then(|copy| {
        let dst = copy.host_ptr().ok_or_else(|| {
            crate::Error::invalid(format!("{} is not a host device", device.name()))
        })?;
        // SAFETY: the caller vouches for `len` bytes at `ptr`; `copy` is a new buffer of
        // `len` bytes that nothing else references yet.
        unsafe { std::ptr::copy_nonoverlapping(ptr.as_ptr(), dst, len) };
        Ok(copy)
    });
    release();
    copied
}

impl fmt::Debug for ForeignBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ForeignBuffer")
            .field("len_bytes", &self.len)
            .field("read_only", &self.read_only)
            .field("device", &self.device.name())
            .finish()
    }
}

// SAFETY: `new`'s contract: `len` bytes at `ptr`, valid and unmoved until `release`, which
// runs only when this buffer drops.
unsafe impl TensorBuffer for ForeignBuffer {
    fn len_bytes(&self) -> usize {
        self.len
    }
    fn device(&self) -> &Arc<dyn Device> {
        &self.device
    }
    fn host_ptr(&self) -> Option<*mut u8> {
        Some(self.ptr.as_ptr())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn is_read_only(&self) -> bool {
        self.read_only
    }
}

impl Drop for ForeignBuffer {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            release();
        }
    }
}
