//! Device memory: `cl_mem` blocks from a [`ClAllocator`] (put behind tensor-core's
//! `CachingAllocator` by the device), and [`ClBuffer`], a tensor's buffer.

use std::any::Any;
use std::fmt;
use std::ptr;
use std::sync::Arc;

use opencl3::context::Context;
use opencl3::memory::{Buffer, ClMem, CL_MEM_READ_WRITE};
use polytensor_core::alloc::{CachedBlock, StatsTracker};
use polytensor_core::{
    Allocator, AllocatorInfo, AllocatorStats, CachingAllocator, Device, Result, TensorBuffer,
};

/// The smallest block handed out (OpenCL has no empty buffers), and the granule of sizes:
/// the largest element (complex128) is 16 bytes.
pub const GRANULE: usize = 16;

/// One `cl_mem` and its size in bytes.
pub struct Block {
    mem: Buffer<u8>,
    size: usize,
}

impl Block {
    /// The `cl_mem` handle.
    pub fn mem(&self) -> opencl3::types::cl_mem {
        self.mem.get()
    }
}

/// `cl_mem` buffers in one context. Requests above the device's largest allocation
/// (`CL_DEVICE_MAX_MEM_ALLOC_SIZE`) and the driver's allocation failures are
/// `Err(OutOfMemory)`.
pub struct ClAllocator {
    name: String,
    context: Arc<Context>,
    largest: usize,
    tracker: StatsTracker,
}

impl ClAllocator {
    /// An allocator in `context`, named `name`, refusing blocks above `largest` bytes.
    pub fn new(name: String, context: Arc<Context>, largest: usize) -> Self {
        Self {
            name,
            context,
            largest,
            tracker: StatsTracker::new(None),
        }
    }

    fn create(&self, size: usize, bytes: usize) -> Result<Block> {
        // SAFETY: no host pointer is passed, so the driver owns the memory it allocates;
        // `size` is nonzero and within the device's largest allocation.
        let mem = unsafe {
            Buffer::<u8>::create(&self.context, CL_MEM_READ_WRITE, size, ptr::null_mut())
        }
        .map_err(|_| self.tracker.out_of_memory(bytes, &self.name))?;
        Ok(Block { mem, size })
    }
}

impl AllocatorInfo for ClAllocator {
    fn name(&self) -> &str {
        &self.name
    }

    fn stats(&self) -> AllocatorStats {
        self.tracker.snapshot()
    }
}

impl Allocator for ClAllocator {
    type Block = Block;

    fn allocate(&self, bytes: usize, _alignment: usize) -> Result<Block> {
        let size = bytes.max(GRANULE).next_multiple_of(GRANULE);
        if size > self.largest {
            self.tracker.record_failure();
            return Err(self.tracker.out_of_memory(bytes, &self.name));
        }
        self.tracker
            .obtain(size, &self.name, || self.create(size, bytes), drop)
    }

    fn deallocate(&self, block: Block) {
        self.tracker.release(block.size);
        drop(block);
    }
}

/// A buffer of an OpenCL device, returned to its cache on drop.
pub struct ClBuffer {
    block: Option<CachedBlock<Block>>,
    allocator: Arc<CachingAllocator<ClAllocator>>,
    device: Arc<dyn Device>,
}

impl ClBuffer {
    /// A buffer holding `block` of `allocator`, on `device`.
    pub(crate) fn new(
        block: CachedBlock<Block>,
        allocator: Arc<CachingAllocator<ClAllocator>>,
        device: Arc<dyn Device>,
    ) -> Self {
        Self {
            block: Some(block),
            allocator,
            device,
        }
    }

    /// The `cl_mem` handle.
    pub fn mem(&self) -> opencl3::types::cl_mem {
        self.block
            .as_ref()
            .expect("a ClBuffer holds its block until drop")
            .inner()
            .mem()
    }
}

impl fmt::Debug for ClBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClBuffer")
            .field("len_bytes", &self.len_bytes())
            .field("device", &self.device.name())
            .finish()
    }
}

// SAFETY: `len_bytes` is the bytes asked for, within the `cl_mem`'s size; there is no host
// pointer.
unsafe impl TensorBuffer for ClBuffer {
    fn len_bytes(&self) -> usize {
        self.block.as_ref().map_or(0, |b| b.requested())
    }
    fn device(&self) -> &Arc<dyn Device> {
        &self.device
    }
    fn device_address(&self) -> Option<usize> {
        Some(self.mem() as usize)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for ClBuffer {
    fn drop(&mut self) {
        if let Some(block) = self.block.take() {
            self.allocator.deallocate(block);
        }
    }
}
