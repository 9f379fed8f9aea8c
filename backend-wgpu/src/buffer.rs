//! Storage buffers as tensor buffers: [`WgpuBuffer`], and the wgpu buffer behind a view.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use polytensor_core::alloc::CachedBlock;
use polytensor_core::{
    Allocator, CachingAllocator, Device, Error, OutView, Result, TensorBuffer, TensorView,
};

use crate::memory::BufferAllocator;

/// The wgpu buffer of a buffer this backend allocated.
pub(crate) fn wgpu_buffer(buffer: &Arc<dyn TensorBuffer>) -> &wgpu::Buffer {
    buffer
        .downcast_ref::<WgpuBuffer>()
        .expect("a WgpuDevice allocates WgpuBuffers")
        .buffer()
}

/// A storage buffer of a [`WgpuDevice`](crate::WgpuDevice), returned to its cache on drop.
pub struct WgpuBuffer {
    pub(crate) block: Option<CachedBlock<wgpu::Buffer>>,
    pub(crate) allocator: Arc<CachingAllocator<BufferAllocator>>,
    pub(crate) device: Arc<dyn Device>,
}

impl WgpuBuffer {
    /// The wgpu buffer.
    pub fn buffer(&self) -> &wgpu::Buffer {
        self.block
            .as_ref()
            .expect("a WgpuBuffer holds its block until drop")
            .inner()
    }
}

impl fmt::Debug for WgpuBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WgpuBuffer")
            .field("len_bytes", &self.len_bytes())
            .field("device", &self.device.name())
            .finish()
    }
}

// SAFETY: `len_bytes` is the bytes asked for, within the wgpu buffer's size; there is no
// host pointer.
unsafe impl TensorBuffer for WgpuBuffer {
    fn len_bytes(&self) -> usize {
        self.block.as_ref().map_or(0, |b| b.requested())
    }
    fn device(&self) -> &Arc<dyn Device> {
        &self.device
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for WgpuBuffer {
    fn drop(&mut self) {
        if let Some(block) = self.block.take() {
            self.allocator.deallocate(block);
        }
    }
}

/// The wgpu buffer behind a view, or an error naming what it is instead.
pub(crate) fn storage<'a>(view: &TensorView<'a>) -> Result<&'a wgpu::Buffer> {
    view.buffer()
        .downcast_ref::<WgpuBuffer>()
        .map(WgpuBuffer::buffer)
        .ok_or_else(|| Error::invalid(format!("{:?} is not a wgpu buffer", view.buffer())))
}

/// The wgpu buffer a kernel writes `out` into; kernels write from the buffer's start.
pub(crate) fn output_buffer<'a>(out: &'a OutView<'_>) -> Result<&'a wgpu::Buffer> {
    if out.layout().offset() != 0 {
        return Err(Error::invalid(
            "a wgpu kernel output must start at its buffer's start",
        ));
    }
    storage(&out.view())
}
