//! Device memory: storage buffers from a [`BufferAllocator`] (put behind tensor-core's
//! `CachingAllocator` by the device), and host copies through staging buffers.

use polytensor_core::alloc::StatsTracker;
use polytensor_core::{Allocator, AllocatorInfo, AllocatorStats, Error, Result};

/// wgpu copies and bindings move whole 4-byte words.
pub const WORD: u64 = 4;

/// Storage buffers on one wgpu device, sized in whole words, usable as kernel bindings and
/// as copy sources and targets. A request larger than one storage binding (the smallest of
/// the device's `max_buffer_size`, its `max_storage_buffer_binding_size` and the kernels'
/// i32 byte indexing: kernels bind whole buffers, and chunking larger tensors is not
/// implemented) is `Err(ExceedsDeviceLimit)` naming the limit and its value; out-of-memory
/// reports from the driver are `Err(OutOfMemory)`.
pub struct BufferAllocator {
    name: String,
    device: wgpu::Device,
    largest: Limit,
    tracker: StatsTracker,
}

/// The largest buffer the allocator makes, and which limit sets it.
#[derive(Clone, Copy, Debug)]
struct Limit {
    bytes: u64,
    what: &'static str,
}

impl BufferAllocator {
    /// An allocator for `device`, named `name` in errors and stats.
    pub fn new(name: String, device: wgpu::Device) -> Self {
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
        Self {
            name,
            device,
            largest,
            tracker: StatsTracker::new(None),
        }
    }
}

impl BufferAllocator {
    /// A storage buffer of `size` bytes from the driver (for a request of `bytes`), not yet
    /// accounted for; the driver's out-of-memory report, caught in an error scope, is
    /// `Err(OutOfMemory)`.
    fn create(&self, size: u64, bytes: usize) -> Result<wgpu::Buffer> {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("polytensor storage"),
            size,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        if pollster::block_on(scope.pop()).is_some() {
            buffer.destroy();
            return Err(self.tracker.out_of_memory(bytes, &self.name));
        }
        Ok(buffer)
    }
}

impl AllocatorInfo for BufferAllocator {
    fn name(&self) -> &str {
        &self.name
    }

    fn stats(&self) -> AllocatorStats {
        self.tracker.snapshot()
    }
}

impl Allocator for BufferAllocator {
    type Block = wgpu::Buffer;

    fn allocate(&self, bytes: usize, _alignment: usize) -> Result<wgpu::Buffer> {
        let size = (bytes as u64).max(WORD).next_multiple_of(WORD);
        if size > self.largest.bytes {
            self.tracker.record_failure();
            return Err(Error::ExceedsDeviceLimit {
                requested: bytes,
                device: self.name.clone(),
                limit: self.largest.what.into(),
                value: self.largest.bytes,
            });
        }
        self.tracker.obtain(
            size as usize,
            &self.name,
            || self.create(size, bytes),
            |b| b.destroy(),
        )
    }

    fn deallocate(&self, buffer: wgpu::Buffer) {
        self.tracker.release(buffer.size() as usize);
        buffer.destroy();
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
        let allocator = BufferAllocator::new("wgpu:test".into(), device.clone());
        for len in [1usize, 3, 4, 1000, 1 << 20] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let buffer = allocator.allocate(len, 4).unwrap();
            upload(&queue, &buffer, 0, &bytes);
            let mut back = vec![0u8; len];
            download(&device, &queue, &buffer, 0, &mut back).unwrap();
            assert_eq!(back, bytes, "{len} bytes");
            if len > 3 {
                let mut middle = vec![0u8; len - 3];
                download(&device, &queue, &buffer, 1, &mut middle).unwrap();
                assert_eq!(middle, bytes[1..len - 2], "{len} bytes from byte 1");
            }
            allocator.deallocate(buffer);
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
