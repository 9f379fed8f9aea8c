//! Device memory: `cl_mem` blocks from a [`ClAllocator`] (put behind tensor-core's
//! `CachingAllocator` by the device), and [`ClBuffer`], a tensor's buffer.

use std::ptr;
use std::sync::Arc;

use opencl3::context::Context;
use opencl3::memory::{Buffer, ClMem, CL_MEM_READ_WRITE};
use polytensor_core::alloc::{BlockAllocator, BlockSource};
use polytensor_core::buffer::BlockBuffer;

/// The smallest block handed out (OpenCL has no empty buffers), and the granule of sizes:
/// the largest element (complex128) is 16 bytes.
pub const GRANULE: usize = 16;

/// One `cl_mem` and its size in bytes.
pub type Block = polytensor_core::alloc::Block<Buffer<u8>>;

/// `cl_mem` buffers in one context, tracked. Requests above the device's largest
/// allocation (`CL_DEVICE_MAX_MEM_ALLOC_SIZE`) and the driver's allocation failures are
/// `Err(OutOfMemory)`.
pub type ClAllocator = BlockAllocator<ClMemory>;

/// The driver calls of a [`ClAllocator`]: `clCreateBuffer` in one context, up to the
/// device's largest allocation; a block is freed when its `Buffer` drops.
pub struct ClMemory {
    context: Arc<Context>,
    largest: usize,
}

impl ClMemory {
    /// Blocks in `context` of at most `largest` bytes.
    pub fn new(context: Arc<Context>, largest: usize) -> Self {
        Self { context, largest }
    }
}

impl BlockSource for ClMemory {
    type Handle = Buffer<u8>;
    const GRANULE: usize = GRANULE;

    fn largest(&self) -> usize {
        self.largest
    }

    fn create(&self, size: usize) -> Option<Buffer<u8>> {
        // SAFETY: no host pointer is passed, so the driver owns the memory it allocates;
        // `size` is nonzero and within the device's largest allocation.
        unsafe { Buffer::<u8>::create(&self.context, CL_MEM_READ_WRITE, size, ptr::null_mut()) }
            .ok()
    }

    fn free(&self, handle: Buffer<u8>, _size: usize) {
        drop(handle);
    }

    fn address(handle: &Buffer<u8>) -> Option<usize> {
        Some(handle.get() as usize)
    }
}

/// A buffer of an OpenCL device: a cached `cl_mem` block, returned to its cache on drop.
pub type ClBuffer = BlockBuffer<ClMemory>;
