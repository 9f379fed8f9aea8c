//! The buffers of host memory (owned, inline, embedded in the tensor, strings, shared read-only
//! bytes) and of GPU memory in cached blocks ([`BlockBuffer`]): implementations of
//! [`TensorBuffer`], the memory of one allocation on a device.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::alloc::{Allocator, HostBlock, HostMemory};
use crate::device::Device;
pub use crate::device::TensorBuffer;

mod block;
mod embedded;
mod foreign;
mod inline;

pub use block::{BlockBuffer, BlockCache};
pub use embedded::{EmbeddedBuffer, EMBEDDED_BUFFER_BYTES};
pub use foreign::{adopt, ForeignBuffer, Release};
pub use inline::{InlineBuffer, INLINE_BUFFER_BYTES};

/// A host allocator, as the buffers it made keep it.
pub type SharedHostAllocator<M = HostBlock> = Arc<dyn Allocator<Block = M>>;

/// Host memory from a host allocator (plain or caching), returned to it on drop.
pub struct HostBuffer<M: HostMemory = HostBlock> {
    block: Option<M>,
    allocator: SharedHostAllocator<M>,
    device: Arc<dyn Device>,
}

impl<M: HostMemory> HostBuffer<M> {
    /// Wrap a block that `allocator` made for `device`.
    pub fn new(block: M, allocator: SharedHostAllocator<M>, device: Arc<dyn Device>) -> Self {
        Self {
            block: Some(block),
            allocator,
            device,
        }
    }

    fn block(&self) -> &M {
        self.block
            .as_ref()
            .expect("a HostBuffer holds its block until drop")
    }
}

impl<M: HostMemory> fmt::Debug for HostBuffer<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostBuffer")
            .field("len_bytes", &self.block().host_len())
            .field("device", &self.device.name())
            .finish()
    }
}

// SAFETY: the block is `host_len()` bytes owned by this buffer until drop; its pointer
// never moves (`HostMemory` blocks own fixed allocations).
unsafe impl<M: HostMemory> TensorBuffer for HostBuffer<M> {
    fn len_bytes(&self) -> usize {
        self.block().host_len()
    }
    fn device(&self) -> &Arc<dyn Device> {
        &self.device
    }
    fn host_ptr(&self) -> Option<*mut u8> {
        Some(self.block().host_ptr().as_ptr())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl<M: HostMemory> Drop for HostBuffer<M> {
    fn drop(&mut self) {
        if let Some(block) = self.block.take() {
            self.allocator.deallocate(block);
        }
    }
}

/// The elements of a string tensor: byte strings (any bytes, not only UTF-8) on a host device.
pub struct StringBuffer {
    strings: Vec<Vec<u8>>,
    payload_bytes: usize,
    device: Arc<dyn Device>,
}

impl StringBuffer {
    /// A buffer holding `strings` on host device `device`.
    pub fn new(strings: Vec<Vec<u8>>, device: Arc<dyn Device>) -> Self {
        let payload_bytes = strings.iter().map(Vec::len).sum();
        Self {
            strings,
            payload_bytes,
            device,
        }
    }

    /// The strings, in buffer order.
    pub fn strings(&self) -> &[Vec<u8>] {
        &self.strings
    }
}

impl fmt::Debug for StringBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StringBuffer")
            .field("len", &self.strings.len())
            .field("payload_bytes", &self.payload_bytes)
            .field("device", &self.device.name())
            .finish()
    }
}

// SAFETY: a string buffer exposes no host pointer; `len_bytes` is its payload size.
unsafe impl TensorBuffer for StringBuffer {
    /// The total bytes of the strings (TensorFlow counts string payloads in `TotalBytes`).
    fn len_bytes(&self) -> usize {
        self.payload_bytes
    }
    fn device(&self) -> &Arc<dyn Device> {
        &self.device
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Host memory borrowed from a [`bytes::Bytes`] (say, the `tensor_content` of a decoded
/// proto), shared without a copy and never written: writers copy it first.
pub struct BytesBuffer {
    bytes: bytes::Bytes,
    device: Arc<dyn Device>,
}

impl BytesBuffer {
    /// Share `bytes` as the memory of a tensor on host device `device`. The caller checks
    /// the alignment its dtype needs.
    pub fn new(bytes: bytes::Bytes, device: Arc<dyn Device>) -> Self {
        Self { bytes, device }
    }
}

impl fmt::Debug for BytesBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BytesBuffer")
            .field("len_bytes", &self.bytes.len())
            .field("device", &self.device.name())
            .finish()
    }
}

// SAFETY: `Bytes` keeps its memory alive and unmoved while any handle lives, and this
// buffer holds one. It reports itself read-only, so nothing writes through `host_ptr`
// (`Tensor::try_out_view` copies a read-only buffer before handing out a writable view).
unsafe impl TensorBuffer for BytesBuffer {
    fn len_bytes(&self) -> usize {
        self.bytes.len()
    }
    fn device(&self) -> &Arc<dyn Device> {
        &self.device
    }
    fn host_ptr(&self) -> Option<*mut u8> {
        Some(self.bytes.as_ptr().cast_mut())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn is_read_only(&self) -> bool {
        true
    }
}
