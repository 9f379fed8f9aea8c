//! [`BlockAllocator`]: a driver's device memory in whole blocks, with the statistics and
//! out-of-memory errors every polytensor allocator has. A GPU backend writes only the
//! driver calls (a [`BlockSource`]) and puts the allocator behind a
//! [`CachingAllocator`](super::CachingAllocator).

use super::{Allocator, AllocatorInfo, AllocatorStats, StatsTracker};
use crate::error::Result;

/// The driver calls behind a [`BlockAllocator`]: make and free one block of device memory.
pub trait BlockSource: Send + Sync + 'static {
    /// The driver's handle of one block (a device address, a `cl_mem`).
    type Handle: Send + Sync + 'static;

    /// The granule of block sizes, and the smallest block (drivers have no empty blocks).
    const GRANULE: usize;

    /// The largest block the device makes, in bytes.
    fn largest(&self) -> usize {
        usize::MAX
    }

    /// The limit that sets [`BlockSource::largest`], where the device names one (`the
    /// adapter's max storage binding size`): a larger request is then
    /// `Err(ExceedsDeviceLimit)` naming it, not `Err(OutOfMemory)`.
    fn largest_limit(&self) -> Option<&'static str> {
        None
    }

    /// A block of `size` bytes (a nonzero multiple of the granule, at most
    /// [`BlockSource::largest`]), or `None` where the driver refuses: the allocator reports
    /// that as out of memory. A failure that is not a lack of memory is the source's to keep
    /// and report (the allocator has nowhere to put it).
    fn create(&self, size: usize) -> Option<Self::Handle>;

    /// Free a block this source made that nothing uses any more.
    fn free(&self, handle: Self::Handle, size: usize);

    /// The block's device address, as DLPack carries it (`cl_mem` for OpenCL), or `None`
    /// where the device gives no address to share its memory by (wgpu: DLPack exports
    /// copy to the host).
    fn address(handle: &Self::Handle) -> Option<usize>;
}

/// One block of a [`BlockAllocator`]: the driver's handle and the block's size in bytes.
#[derive(Debug)]
pub struct Block<H> {
    handle: H,
    size: usize,
}

impl<H> Block<H> {
    /// The driver's handle.
    pub fn handle(&self) -> &H {
        &self.handle
    }

    /// The size in bytes (the request rounded up to the granule).
    pub fn size(&self) -> usize {
        self.size
    }
}

/// Device memory from a [`BlockSource`], sized in whole granules and tracked: requests above
/// the device's largest block and the driver's refusals are `Err(OutOfMemory)`, and the
/// statistics count every block handed out and returned.
pub struct BlockAllocator<S: BlockSource> {
    name: String,
    source: S,
    tracker: StatsTracker,
}

impl<S: BlockSource> BlockAllocator<S> {
    /// An allocator of `source`'s blocks, named `name` in errors and statistics.
    pub fn new(name: String, source: S) -> Self {
        Self {
            name,
            source,
            tracker: StatsTracker::new(None),
        }
    }

    /// The driver calls.
    pub fn source(&self) -> &S {
        &self.source
    }
}

impl<S: BlockSource> AllocatorInfo for BlockAllocator<S> {
    fn name(&self) -> &str {
        &self.name
    }

    fn stats(&self) -> AllocatorStats {
        self.tracker.snapshot()
    }
}

impl<S: BlockSource> Allocator for BlockAllocator<S> {
    type Block = Block<S::Handle>;

    fn allocate(&self, bytes: usize, _alignment: usize) -> Result<Self::Block> {
        let size = bytes
            .max(S::GRANULE)
            .checked_next_multiple_of(S::GRANULE)
            .filter(|&size| size <= self.source.largest());
        let Some(size) = size else {
            self.tracker.record_failure();
            return Err(match self.source.largest_limit() {
                Some(limit) => crate::error::Error::ExceedsDeviceLimit {
                    requested: bytes,
                    device: self.name.clone(),
                    limit: limit.into(),
                    value: self.source.largest() as u64,
                },
                None => self.tracker.out_of_memory(bytes, &self.name),
            });
        };
        let create = || match self.source.create(size) {
            Some(handle) => Ok(Block { handle, size }),
            None => Err(self.tracker.out_of_memory(bytes, &self.name)),
        };
        self.tracker
            .obtain(size, &self.name, create, |block| self.release(block))
    }

    fn deallocate(&self, block: Self::Block) {
        self.tracker.release(block.size);
        self.release(block);
    }
}

impl<S: BlockSource> BlockAllocator<S> {
    /// Give `block` back to the driver.
    fn release(&self, block: Block<S::Handle>) {
        self.source.free(block.handle, block.size);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::error::Error;

    /// Blocks counted, up to 1 KiB, from a pretend driver with 4 KiB in all.
    #[derive(Default)]
    struct Counted {
        live: AtomicUsize,
    }

    impl BlockSource for Counted {
        type Handle = usize;
        const GRANULE: usize = 64;
        fn largest(&self) -> usize {
            1024
        }
        fn create(&self, size: usize) -> Option<usize> {
            let live = self.live.fetch_add(size, Ordering::Relaxed) + size;
            (live <= 4096).then_some(size).or_else(|| {
                self.live.fetch_sub(size, Ordering::Relaxed);
                None
            })
        }
        fn free(&self, _handle: usize, size: usize) {
            self.live.fetch_sub(size, Ordering::Relaxed);
        }
        fn address(handle: &usize) -> Option<usize> {
            Some(*handle)
        }
    }

    #[test]
    fn blocks_are_whole_granules_within_the_largest_and_counted() {
        let allocator = BlockAllocator::new("pretend:0".into(), Counted::default());
        let empty = allocator.allocate(0, 1).unwrap();
        let odd = allocator.allocate(65, 1).unwrap();
        assert_eq!((empty.size(), odd.size()), (64, 128));
        assert_eq!(allocator.stats().bytes_in_use, 192);
        let too_big = allocator.allocate(1025, 1);
        assert!(matches!(
            too_big,
            Err(Error::OutOfMemory {
                requested: 1025,
                ..
            })
        ));
        let huge = allocator.allocate(usize::MAX, 1);
        assert!(matches!(huge, Err(Error::OutOfMemory { .. })));
        let held: Vec<_> = (0..3)
            .map(|_| allocator.allocate(1024, 1).unwrap())
            .collect();
        let refused = allocator.allocate(1024, 1);
        assert!(
            matches!(refused, Err(Error::OutOfMemory { .. })),
            "the driver is full"
        );
        assert_eq!(allocator.stats().num_failed_allocs, 3);
        for block in held.into_iter().chain([empty, odd]) {
            allocator.deallocate(block);
        }
        assert_eq!(allocator.stats().bytes_in_use, 0);
        assert_eq!(allocator.source().live.load(Ordering::Relaxed), 0);
    }
}
