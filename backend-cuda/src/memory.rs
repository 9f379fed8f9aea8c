//! Device memory: blocks from `cuMemAlloc` in a [`CudaAllocator`] (put behind tensor-core's
//! `CachingAllocator` by the device), and a tensor's buffer: [`CudaBuffer`], a cached block,
//! or [`AdoptedBuffer`], memory adopted from a DLPack producer.

use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex};

use cudarc::driver::{result, sys, CudaContext, CudaStream};
use polytensor_core::alloc::{BlockAllocator, BlockSource};
use polytensor_core::buffer::{BlockBuffer, Release};
use polytensor_core::{Device, TensorBuffer};

use crate::loader::describe;

/// The granule of block sizes, and the smallest block: `cuMemAlloc` aligns to at least 256
/// bytes, and the largest element (complex128) is 16 bytes.
pub const GRANULE: usize = 256;

/// Errors that surfaced where nothing could return them (a failed `cuMemFree` in a drop):
/// kept until the device's next synchronising call returns the first of them.
#[derive(Debug, Default)]
pub struct Deferred(Mutex<Option<String>>);

impl Deferred {
    /// Keep `error` (the first one kept wins).
    pub fn keep(&self, error: String) {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        slot.get_or_insert(error);
    }

    /// The kept error, if any, now cleared.
    pub fn take(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// One device allocation: its address and size in bytes.
pub type Block = polytensor_core::alloc::Block<sys::CUdeviceptr>;

/// `cuMemAlloc`/`cuMemFree` in one context, tracked. The driver's
/// `CUDA_ERROR_OUT_OF_MEMORY` is `Err(OutOfMemory)` (the caching layer above trims its cache
/// and retries once first).
pub type CudaAllocator = BlockAllocator<CudaMemory>;

/// The driver calls of a [`CudaAllocator`]: `cuMemAlloc` and `cuMemFree` in one context,
/// keeping the errors that are not a lack of memory in `deferred`.
pub struct CudaMemory {
    context: Arc<CudaContext>,
    deferred: Arc<Deferred>,
}

impl CudaMemory {
    /// Blocks in `context`, keeping the errors of frees in `deferred`.
    pub fn new(context: Arc<CudaContext>, deferred: Arc<Deferred>) -> Self {
        Self { context, deferred }
    }
}

impl BlockSource for CudaMemory {
    type Handle = sys::CUdeviceptr;
    const GRANULE: usize = GRANULE;

    fn create(&self, size: usize) -> Option<sys::CUdeviceptr> {
        self.context.bind_to_thread().ok()?;
        // SAFETY: the context is current on this thread; `size` is nonzero.
        let address = unsafe { result::malloc_sync(size) };
        if let Err(e) = address {
            if e.0 != sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY {
                self.deferred
                    .keep(format!("cuMemAlloc({size}): {}", describe(e)));
            }
        }
        address.ok()
    }

    /// `cuMemFree`, after the work queued so far (`cuMemFree` synchronises the device).
    fn free(&self, address: sys::CUdeviceptr, _size: usize) {
        let freed = self.context.bind_to_thread().and_then(|()| {
            // SAFETY: the block came from `cuMemAlloc` in this context and nothing refers
            // to it any more (its buffer is gone, or it sat in the cache).
            unsafe { result::free_sync(address) }
        });
        if let Err(e) = freed {
            self.deferred
                .keep(format!("cuMemFree({address:#x}): {}", describe(e)));
        }
    }

    fn address(address: &sys::CUdeviceptr) -> Option<usize> {
        Some(*address as usize)
    }
}

/// A buffer of a CUDA device: a cached block from `cuMemAlloc`, returned to its cache on
/// drop.
pub type CudaBuffer = BlockBuffer<CudaMemory>;

/// Memory of a CUDA device that a DLPack producer owns, handed back by `release` once the
/// last view drops (after the work queued on `stream`).
pub struct AdoptedBuffer {
    address: sys::CUdeviceptr,
    len: usize,
    read_only: bool,
    /// The stream whose work must finish before the memory is handed back.
    stream: Arc<CudaStream>,
    release: Mutex<Option<Release>>,
    device: Arc<dyn Device>,
}

impl AdoptedBuffer {
    /// A buffer over `len` bytes at `address` of `device`, owned by whoever `release`
    /// hands them back to.
    pub(crate) fn new(
        address: sys::CUdeviceptr,
        len: usize,
        read_only: bool,
        release: Release,
        stream: Arc<CudaStream>,
        device: Arc<dyn Device>,
    ) -> Self {
        Self {
            address,
            len,
            read_only,
            stream,
            release: Mutex::new(Some(release)),
            device,
        }
    }

    /// The device address of the buffer's first byte.
    pub fn address(&self) -> sys::CUdeviceptr {
        self.address
    }
}

impl fmt::Debug for AdoptedBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdoptedBuffer")
            .field("len_bytes", &self.len)
            .field("device", &self.device.name())
            .field("read_only", &self.read_only)
            .finish()
    }
}

// SAFETY: `len_bytes` is the adopted extent the producer vouches for; there is no host
// pointer.
unsafe impl TensorBuffer for AdoptedBuffer {
    fn len_bytes(&self) -> usize {
        self.len
    }
    fn device(&self) -> &Arc<dyn Device> {
        &self.device
    }
    fn device_address(&self) -> Option<usize> {
        Some(self.address as usize)
    }
    fn is_read_only(&self) -> bool {
        self.read_only
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for AdoptedBuffer {
    fn drop(&mut self) {
        // The producer may free the memory at once: finish the kernels using it (a failure
        // is sticky and surfaces at the device's next synchronising call).
        let _ = self.stream.synchronize();
        let release = self.release.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(release) = release.take() {
            release();
        }
    }
}
