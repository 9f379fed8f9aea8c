//! Device memory: storage buffers as the blocks of a [`BufferSource`] (behind the kit's
//! block allocator and tensor-core's cache), and host copies through staging buffers.

use polytensor_core::alloc::{BlockAllocator, BlockSource};
use polytensor_core::buffer::BlockBuffer;
use polytensor_core::{Error, Result};

/// wgpu copies and bindings move whole 4-byte words.
pub const WORD: u64 = 4;

/// The granule of block sizes: whole words.
pub const GRANULE: usize = WORD as usize;

/// Storage buffers on one wgpu device (`STORAGE | COPY_SRC | COPY_DST`), sized in whole
/// words, usable as kernel bindings and as copy sources and targets. A request larger than
/// one storage binding (the smallest of the device's `max_buffer_size`, its
/// `max_storage_buffer_binding_size` and the kernels' i32 byte indexing: kernels bind whole
/// buffers, and chunking larger tensors is not implemented) is `Err(ExceedsDeviceLimit)`
/// naming the limit and its value; out-of-memory reports from the driver are
/// `Err(OutOfMemory)`.
pub struct BufferSource {
    device: wgpu::Device,
    largest: Limit,
}

/// The storage buffers of a wgpu device, tracked.
pub type BufferAllocator = BlockAllocator<BufferSource>;

/// A buffer of a wgpu device: a cached storage buffer, returned to its cache on drop.
pub type WgpuBuffer = BlockBuffer<BufferSource>;

/// The largest buffer the source makes, and which limit sets it.
#[derive(Clone, Copy, Debug)]
struct Limit {
    bytes: u64,
    what: &'static str,
}

impl BufferSource {
    /// The storage buffers of `device`.
    pub fn new(device: wgpu::Device) -> Self {
        let limits = device.limits();
        // Kernels index elements with `i32` positions, so no buffer holds more than
        // i32::MAX bytes (the smallest element is a byte).
        let largest = [
            Limit {
                bytes: limits.max_storage_buffer_binding_size,
                what: "the adapter's max storage binding size",
            },
            Limit {
                bytes: limits.max_buffer_size,
                what: "the adapter's max buffer size",
            },
            Limit {
                bytes: i32::MAX as u64,
                what: "the kernels' i32 byte indexing",
            },
        ]
        .into_iter()
        .min_by_key(|limit| limit.bytes)
        .unwrap_or(Limit {
            bytes: 0,
            what: "no limit",
        });
        Self { device, largest }
    }
}

impl BlockSource for BufferSource {
    type Handle = wgpu::Buffer;
    const GRANULE: usize = GRANULE;

    fn largest(&self) -> usize {
        // Whole words: the granule divides it.
        usize::try_from(self.largest.bytes - self.largest.bytes % WORD).unwrap_or(usize::MAX)
    }

    fn largest_limit(&self) -> Option<&'static str> {
        Some(self.largest.what)
    }

    /// A storage buffer from the driver; its out-of-memory report, caught in an error
    /// scope, is `None` (the allocator's `Err(OutOfMemory)`).
    fn create(&self, size: usize) -> Option<wgpu::Buffer> {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("polytensor storage"),
            size: size as u64,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        if pollster::block_on(scope.pop()).is_some() {
            buffer.destroy();
            return None;
        }
        Some(buffer)
    }

    fn free(&self, buffer: wgpu::Buffer, _size: usize) {
        buffer.destroy();
    }

    /// wgpu gives no address to share memory by: DLPack exports copy to the host.
    fn address(_buffer: &wgpu::Buffer) -> Option<usize> {
        None
    }
}

/// Copy `bytes` into `target` at byte `offset` (both whole words; a partial last word is
/// padded with zeros) through the queue's staging memory.
pub fn upload(queue: &wgpu::Queue, target: &wgpu::Buffer, offset: u64, bytes: &[u8]) {
    let whole = bytes.len() - bytes.len() % WORD as usize;
    if whole > 0 {
        queue.write_buffer(target, offset, &bytes[..whole]);
    }
    if whole < bytes.len() {
        let mut last = [0u8; WORD as usize];
        last[..bytes.len() - whole].copy_from_slice(&bytes[whole..]);
        queue.write_buffer(target, offset + whole as u64, &last);
    }
    queue.submit([]);
}

/// A failure the driver reported, as `Error::Backend` (the device relabels it with its
/// name).
fn driver(message: String) -> Error {
    Error::Backend {
        device: "wgpu".into(),
        message,
    }
}

/// Read `dst.len()` bytes of `source` from byte `offset` into `dst`: a copy of the whole
/// words around them into a mappable staging buffer, a wait for the queue (no busy loop:
/// the driver blocks), then a map.
pub fn download(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    source: &wgpu::Buffer,
    offset: u64,
    dst: &mut [u8],
) -> Result<()> {
    if dst.is_empty() {
        return Ok(());
    }
    let skip = offset % WORD;
    let offset = offset - skip;
    let size = (skip + dst.len() as u64).next_multiple_of(WORD);
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("polytensor staging"),
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
    encoder.copy_buffer_to_buffer(source, offset, &staging, 0, size);
    queue.submit([encoder.finish()]);
    let (sender, receiver) = std::sync::mpsc::channel();
    staging.map_async(wgpu::MapMode::Read, .., move |result| {
        let _ = sender.send(result);
    });
    device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| driver(format!("waiting for the wgpu device failed: {e}")))?;
    receiver
        .recv()
        .map_err(|_| driver("the wgpu device dropped a read".into()))?
        .map_err(|e| driver(format!("mapping a wgpu staging buffer failed: {e}")))?;
    {
        let view = staging
            .get_mapped_range(..)
            .map_err(|e| driver(format!("reading a wgpu staging buffer failed: {e}")))?;
        dst.copy_from_slice(&view[skip as usize..skip as usize + dst.len()]);
    }
    staging.unmap();
    staging.destroy();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use polytensor_core::{Allocator, AllocatorInfo};

    fn device() -> Option<(wgpu::Device, wgpu::Queue)> {
        let adapter = crate::adapters::adapters().into_iter().next()?;
        let limits = adapter.limits();
        pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            required_limits: limits,
            ..Default::default()
        }))
        .ok()
    }

    #[test]
    fn bytes_round_trip_and_stats_balance() {
        let Some((device, queue)) = device() else {
            eprintln!("skipped: {}", crate::adapters::absence_reason());
            return;
        };
        let allocator = BufferAllocator::new("wgpu:test".into(), BufferSource::new(device.clone()));
        for len in [1usize, 3, 4, 1000, 1 << 20] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let block = allocator.allocate(len, 4).unwrap();
            let buffer = block.handle();
            upload(&queue, buffer, 0, &bytes);
            let mut back = vec![0u8; len];
            download(&device, &queue, buffer, 0, &mut back).unwrap();
            assert_eq!(back, bytes, "{len} bytes");
            if len > 3 {
                let mut middle = vec![0u8; len - 3];
                download(&device, &queue, buffer, 1, &mut middle).unwrap();
                assert_eq!(middle, bytes[1..len - 2], "{len} bytes from byte 1");
            }
            allocator.deallocate(block);
        }
        assert_eq!(allocator.stats().bytes_in_use, 0);
        let huge = allocator.allocate(usize::MAX / 2, 4).unwrap_err();
        assert!(matches!(huge, Error::ExceedsDeviceLimit { .. }), "{huge}");
        let binding = device.limits().max_storage_buffer_binding_size as usize;
        let unbindable = allocator.allocate(binding + 4, 4).unwrap_err();
        // lavapipe's binding limit (128 MiB) is below its buffer limit: the message names it.
        let message = unbindable.to_string();
        assert!(
            matches!(unbindable, Error::ExceedsDeviceLimit { value, .. } if value as usize <= binding)
                && message.contains(&format!("({} bytes)", binding.min(i32::MAX as usize))),
            "{message}"
        );
        if binding < device.limits().max_buffer_size as usize {
            assert!(message.contains("max storage binding size"), "{message}");
        }
        assert_eq!(allocator.stats().bytes_in_use, 0);
    }
}
