//! [`InlineBuffer`]: tiny host buffers stored inside their own reference-counted header.

use std::any::Any;
use std::cell::UnsafeCell;
use std::fmt;
use std::mem::MaybeUninit;
use std::sync::Arc;

use super::TensorBuffer;
use crate::alloc::ALLOCATOR_ALIGNMENT;
use crate::device::{Device, DeviceHandle};
use crate::error::{Error, Result};

/// The most bytes an [`InlineBuffer`] holds: one cache line (16 `f32`, 8 `f64`).
pub const INLINE_BUFFER_BYTES: usize = 64;

/// The storage's own alignment: what the system allocator gives cheaply (a 64-byte aligned
/// allocation takes glibc's slow `memalign` path, several times the cost of a `malloc`).
const STORAGE_ALIGNMENT: usize = 16;

/// Room for [`INLINE_BUFFER_BYTES`] starting at the first 64-byte boundary inside.
const STORAGE_BYTES: usize = INLINE_BUFFER_BYTES + ALLOCATOR_ALIGNMENT - STORAGE_ALIGNMENT;

/// Only the bytes in use are ever initialised (zeroed at creation).
#[repr(C, align(16))]
struct Storage(MaybeUninit<[u8; STORAGE_BYTES]>);

const _: () = assert!(std::mem::align_of::<Storage>() == STORAGE_ALIGNMENT);

/// A host buffer of at most [`INLINE_BUFFER_BYTES`] held inside the buffer value itself, so
/// that the `Arc` around it is the only allocation: scalars and tiny tensors pay for one
/// small `malloc` instead of an allocator round trip (as TFRT's host scalar tensors do).
///
/// The bytes start at a 64-byte boundary, as every host buffer's do. They are charged to the
/// device's allocator ([`AllocatorInfo::charge`](crate::AllocatorInfo::charge)), so they count
/// in its statistics (and the conformance suite's leak check) and are held to its byte limit
/// like any block: past the limit, making one is an `Err(OutOfMemory)`.
pub struct InlineBuffer {
    storage: UnsafeCell<Storage>,
    len: usize,
    device: DeviceHandle,
}

// SAFETY: the bytes are written only through `host_ptr` under `TensorBuffer`'s contract
// (a unique owner or a kernel writing a fresh output); everything else is immutable or
// `Sync` itself, exactly as for a `HostBuffer`'s raw block.
unsafe impl Sync for InlineBuffer {}
// SAFETY: as for `Sync`: nothing in the buffer is tied to the thread that made it.
unsafe impl Send for InlineBuffer {}

impl InlineBuffer {
    /// A shared, zeroed buffer of `len <= INLINE_BUFFER_BYTES` bytes on `device`, built in
    /// place in its `Arc` and charged to the device's allocator until dropped; an `Err` if
    /// `len` is too large or the allocator's byte limit refuses.
    pub fn new_shared(len: usize, device: impl Into<DeviceHandle>) -> Result<Arc<Self>> {
        Self::build(len, device.into(), true)
    }

    /// As [`InlineBuffer::new_shared`], with the bytes left uninitialised, as
    /// [`Device::allocate`] promises: for outputs that a kernel overwrites.
    pub fn new_uninit(len: usize, device: impl Into<DeviceHandle>) -> Result<Arc<Self>> {
        Self::build(len, device.into(), false)
    }

    fn build(len: usize, device: DeviceHandle, zeroed: bool) -> Result<Arc<Self>> {
        if len > INLINE_BUFFER_BYTES {
            return Err(Error::invalid(format!(
                "an inline buffer holds at most {INLINE_BUFFER_BYTES} bytes, not {len}"
            )));
        }
        device.get().allocator().charge(len, device.get().name())?;
        let mut shared = Arc::<Self>::new_uninit();
        let slot = Arc::get_mut(&mut shared)
            .expect("a new Arc is unique")
            .as_mut_ptr();
        // SAFETY: `slot` is the new Arc's uninitialised value, written field by field before
        // `assume_init`: `len` and `device` in full; `storage` may stay
        // uninitialised (`MaybeUninit`), and its `len` bytes in use, at their 64-byte aligned
        // start inside the storage as `bytes_start` shows, are zeroed when asked.
        unsafe {
            std::ptr::addr_of_mut!((*slot).len).write(len);
            std::ptr::addr_of_mut!((*slot).device).write(device);
            if zeroed {
                let storage = std::ptr::addr_of_mut!((*slot).storage).cast::<u8>();
                storage.add(bytes_start(storage)).write_bytes(0, len);
            }
            Ok(shared.assume_init())
        }
    }

    fn bytes_ptr(&self) -> *mut u8 {
        let base = self.storage.get().cast::<u8>();
        // SAFETY: `bytes_start` is inside the storage.
        unsafe { base.add(bytes_start(base)) }
    }
}

/// Where the bytes start in a storage at `base`: the first 64-byte boundary. The storage is
/// 16-byte aligned, so that is at most 48 bytes in, leaving [`INLINE_BUFFER_BYTES`] inside.
fn bytes_start(base: *const u8) -> usize {
    base.align_offset(ALLOCATOR_ALIGNMENT)
}

impl fmt::Debug for InlineBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InlineBuffer")
            .field("len_bytes", &self.len)
            .field("device", &self.device.get().name())
            .finish()
    }
}

// SAFETY: `len` bytes at `bytes_ptr()` lie inside `storage`, which lives as long as the
// buffer and, behind the `Arc` that holds every buffer, never moves.
unsafe impl TensorBuffer for InlineBuffer {
    fn len_bytes(&self) -> usize {
        self.len
    }
    fn device(&self) -> &Arc<dyn Device> {
        self.device.get()
    }
    fn host_ptr(&self) -> Option<*mut u8> {
        Some(self.bytes_ptr())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for InlineBuffer {
    fn drop(&mut self) {
        self.device.get().allocator().refund(self.len);
    }
}
