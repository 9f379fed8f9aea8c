//! Device memory: blocks from `cuMemAlloc` in a [`CudaAllocator`] (put behind tensor-core's
//! `CachingAllocator` by the device), and [`CudaBuffer`], a tensor's buffer: a cached block,
//! or memory adopted from a DLPack producer.

use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex};

use cudarc::driver::{result, sys, CudaContext, CudaStream};
use polytensor_core::alloc::{CachedBlock, StatsTracker};
use polytensor_core::buffer::Release;
use polytensor_core::{
    Allocator, AllocatorInfo, AllocatorStats, CachingAllocator, Device, Result, TensorBuffer,
};

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
#[derive(Debug)]
pub struct Block {
    address: sys::CUdeviceptr,
    size: usize,
}

impl Block {
    /// The device address.
    pub fn address(&self) -> sys::CUdeviceptr {
        self.address
    }
}

/// `cuMemAlloc`/`cuMemFree` in one context. The driver's `CUDA_ERROR_OUT_OF_MEMORY` is
/// `Err(OutOfMemory)` (the caching layer above trims its cache and retries once first).
pub struct CudaAllocator {
    name: String,
    context: Arc<CudaContext>,
    tracker: StatsTracker,
    deferred: Arc<Deferred>,
}

impl CudaAllocator {
    /// An allocator in `context`, named `name`, keeping the errors of frees in `deferred`.
    pub fn new(name: String, context: Arc<CudaContext>, deferred: Arc<Deferred>) -> Self {
        Self {
            name,
            context,
            tracker: StatsTracker::new(None),
            deferred,
        }
    }

    fn create(&self, size: usize, bytes: usize) -> Result<Block> {
        let oom = || self.tracker.out_of_memory(bytes, &self.name);
        self.context.bind_to_thread().map_err(|_| oom())?;
        // SAFETY: the context is current on this thread; `size` is nonzero.
        let address = unsafe { result::malloc_sync(size) }.map_err(|e| {
            if e.0 != sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY {
                self.deferred
                    .keep(format!("cuMemAlloc({size}): {}", describe(e)));
            }
            oom()
        })?;
        Ok(Block { address, size })
    }
}

impl AllocatorInfo for CudaAllocator {
    fn name(&self) -> &str {
        &self.name
    }

    fn stats(&self) -> AllocatorStats {
        self.tracker.snapshot()
    }
}

impl Allocator for CudaAllocator {
    type Block = Block;

    fn allocate(&self, bytes: usize, _alignment: usize) -> Result<Block> {
        let Some(size) = bytes.max(GRANULE).checked_next_multiple_of(GRANULE) else {
            self.tracker.record_failure();
            return Err(self.tracker.out_of_memory(bytes, &self.name));
        };
        self.tracker.obtain(
            size,
            &self.name,
            || self.create(size, bytes),
            |block| self.free(block),
        )
    }

    fn deallocate(&self, block: Block) {
        self.tracker.release(block.size);
        self.free(block);
    }
}

impl CudaAllocator {
    /// `cuMemFree`, after the work queued so far (`cuMemFree` synchronises the device).
    fn free(&self, block: Block) {
        let freed = self.context.bind_to_thread().and_then(|()| {
            // SAFETY: the block came from `cuMemAlloc` in this context and nothing refers
            // to it any more (its buffer is gone, or it sat in the cache).
            unsafe { result::free_sync(block.address) }
        });
        if let Err(e) = freed {
            self.deferred
                .keep(format!("cuMemFree({:#x}): {}", block.address, describe(e)));
        }
    }
}

/// Where a buffer's memory comes from.
enum Memory {
    /// A block of the device's caching allocator, returned to it on drop.
    Cached {
        block: CachedBlock<Block>,
        allocator: Arc<CachingAllocator<CudaAllocator>>,
    },
    /// Memory of the device that a DLPack producer owns, handed back by `release`.
    Adopted {
        address: sys::CUdeviceptr,
        len: usize,
        read_only: bool,
        /// The stream whose work must finish before the memory is handed back.
        stream: Arc<CudaStream>,
        release: Mutex<Option<Release>>,
    },
}

/// A buffer of a CUDA device.
pub struct CudaBuffer {
    memory: Option<Memory>,
    device: Arc<dyn Device>,
}

impl CudaBuffer {
    /// A buffer holding `block` of `allocator`, on `device`.
    pub(crate) fn cached(
        block: CachedBlock<Block>,
        allocator: Arc<CachingAllocator<CudaAllocator>>,
        device: Arc<dyn Device>,
    ) -> Self {
        Self {
            memory: Some(Memory::Cached { block, allocator }),
            device,
        }
    }

    /// A buffer over `len` bytes at `address` of `device`, owned by whoever `release`
    /// hands them back to.
    pub(crate) fn adopted(
        address: sys::CUdeviceptr,
        len: usize,
        read_only: bool,
        release: Release,
        stream: Arc<CudaStream>,
        device: Arc<dyn Device>,
    ) -> Self {
        Self {
            memory: Some(Memory::Adopted {
                address,
                len,
                read_only,
                stream,
                release: Mutex::new(Some(release)),
            }),
            device,
        }
    }

    /// The device address of the buffer's first byte.
    pub fn address(&self) -> sys::CUdeviceptr {
        match &self.memory {
            Some(Memory::Cached { block, .. }) => block.inner().address(),
            Some(Memory::Adopted { address, .. }) => *address,
            None => 0,
        }
    }
}

impl fmt::Debug for CudaBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaBuffer")
            .field("len_bytes", &self.len_bytes())
            .field("device", &self.device.name())
            .finish()
    }
}

// SAFETY: `len_bytes` is the bytes asked for, within the block (or the adopted extent the
// producer vouches for); there is no host pointer.
unsafe impl TensorBuffer for CudaBuffer {
    fn len_bytes(&self) -> usize {
        match &self.memory {
            Some(Memory::Cached { block, .. }) => block.requested(),
            Some(Memory::Adopted { len, .. }) => *len,
            None => 0,
        }
    }
    fn device(&self) -> &Arc<dyn Device> {
        &self.device
    }
    fn device_address(&self) -> Option<usize> {
        Some(self.address() as usize)
    }
    fn is_read_only(&self) -> bool {
        matches!(
            &self.memory,
            Some(Memory::Adopted {
                read_only: true,
                ..
            })
        )
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        match self.memory.take() {
            Some(Memory::Cached { block, allocator }) => allocator.deallocate(block),
            Some(Memory::Adopted {
                release, stream, ..
            }) => {
                // The producer may free the memory at once: finish the kernels using it (a
                // failure is sticky and surfaces at the device's next synchronising call).
                let _ = stream.synchronize();
                let release = release.into_inner().unwrap_or_else(|e| e.into_inner());
                if let Some(release) = release {
                    release();
                }
            }
            None => {}
        }
    }
}
