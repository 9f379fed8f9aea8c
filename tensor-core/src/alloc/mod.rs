//! Allocators: the [`Allocator`] trait, [`AllocatorStats`] with TensorFlow's fields, and the
//! aligned [`HostAllocator`].

use std::alloc::Layout as MemLayout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

mod blocks;
mod caching;
pub use crate::stats::AllocatorStats;

/// A host vector of `len` copies of `value`, or `OutOfMemory` naming `what` where the host
/// cannot hold it: the size comes from user input (a sparse shape's rows), and `vec!`
/// would abort the process.
pub fn host_vec<T: Clone>(len: usize, value: T, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| Error::OutOfMemory {
        requested: len.saturating_mul(std::mem::size_of::<T>()),
        device: format!("the host ({what})"),
        stats: Default::default(),
    })?;
    v.resize(len, value);
    Ok(v)
}
pub use blocks::{Block, BlockAllocator, BlockSource};
pub use caching::{size_class, CachedBlock, CachingAllocator};

/// TensorFlow's `Allocator::kAllocatorAlignment`: host buffers are aligned to 64 bytes.
pub const ALLOCATOR_ALIGNMENT: usize = 64;

/// Blocks of at least this many bytes are aligned to it and, on Linux, advised to use
/// transparent huge pages: one page fault and one TLB entry per 2 MiB instead of 512, which
/// is what makes first touches of fresh buffers and strided (transposed) walks fast.
pub const HUGE_PAGE_BYTES: usize = 2 << 20;

/// Book-keeping shared by allocators: counts allocations and enforces the byte limit.
/// Lock-free (atomics), since it sits on every allocation's path.
///
/// Only allocations that succeed are counted: one that is refused (by the limit, or by the
/// system or driver in [`StatsTracker::obtain`]) changes nothing but the failure count.
#[derive(Debug, Default)]
pub struct StatsTracker {
    num_allocs: AtomicU64,
    bytes_in_use: AtomicU64,
    peak_bytes_in_use: AtomicU64,
    largest_alloc_size: AtomicU64,
    num_failed_allocs: AtomicU64,
    bytes_limit: Option<u64>,
}

impl StatsTracker {
    /// A tracker with an optional byte limit.
    pub fn new(bytes_limit: Option<u64>) -> Self {
        Self {
            bytes_limit,
            ..Self::default()
        }
    }

    /// Account for an allocation of `bytes`, or refuse it with `Error::OutOfMemory` if it
    /// would pass the limit. `device` names the allocator in the error.
    pub fn try_reserve(&self, bytes: usize, device: &str) -> Result<()> {
        let bytes = bytes as u64;
        let in_use = match self.bytes_limit {
            None => self
                .bytes_in_use
                .fetch_add(bytes, Ordering::Relaxed)
                .saturating_add(bytes),
            Some(limit) => {
                let update = self.bytes_in_use.fetch_update(
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                    |current| current.checked_add(bytes).filter(|&total| total <= limit),
                );
                match update {
                    Ok(previous) => previous + bytes,
                    Err(_) => return Err(self.refuse(bytes as usize, device)),
                }
            }
        };
        self.num_allocs.fetch_add(1, Ordering::Relaxed);
        // Maxima change rarely: a plain load spares the locked read-modify-write.
        if self.peak_bytes_in_use.load(Ordering::Relaxed) < in_use {
            self.peak_bytes_in_use.fetch_max(in_use, Ordering::Relaxed);
        }
        if self.largest_alloc_size.load(Ordering::Relaxed) < bytes {
            self.largest_alloc_size.fetch_max(bytes, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Memory from `obtain` (a system or driver allocation of `bytes`), accounted for: a
    /// request the limit cannot admit is refused before `obtain` runs, a failed `obtain`
    /// changes nothing but the failure count (its `Err` is returned as it is), and memory
    /// obtained while concurrent allocations took the room meanwhile goes back through
    /// `give_back` before the refusal. So no failed allocation moves `bytes_in_use`, its
    /// peak, or `largest_alloc_size`.
    pub fn obtain<B>(
        &self,
        bytes: usize,
        device: &str,
        obtain: impl FnOnce() -> Result<B>,
        give_back: impl FnOnce(B),
    ) -> Result<B> {
        if let Some(limit) = self.bytes_limit {
            let in_use = self.bytes_in_use.load(Ordering::Relaxed);
            if in_use.saturating_add(bytes as u64) > limit {
                return Err(self.refuse(bytes, device));
            }
        }
        let block = obtain().inspect_err(|_| {
            self.num_failed_allocs.fetch_add(1, Ordering::Relaxed);
        })?;
        match self.try_reserve(bytes, device) {
            Ok(()) => Ok(block),
            Err(refused) => {
                give_back(block);
                Err(refused)
            }
        }
    }

    /// Count one refused allocation of `bytes` and describe it.
    #[cold]
    fn refuse(&self, bytes: usize, device: &str) -> Error {
        self.num_failed_allocs.fetch_add(1, Ordering::Relaxed);
        self.out_of_memory(bytes, device)
    }

    /// Count one allocation refused elsewhere (a caching layer whose inner allocator refused).
    pub fn record_failure(&self) {
        self.num_failed_allocs.fetch_add(1, Ordering::Relaxed);
    }

    /// Account for `bytes` returned (each `release` matches one successful `try_reserve`).
    pub fn release(&self, bytes: usize) {
        let before = self.bytes_in_use.fetch_sub(bytes as u64, Ordering::Relaxed);
        debug_assert!(before >= bytes as u64, "released more bytes than reserved");
    }

    /// A snapshot of the stats (`bytes_reserved` equals `bytes_in_use`: a plain allocator
    /// holds nothing beyond what it handed out).
    pub fn snapshot(&self) -> AllocatorStats {
        let in_use = self.bytes_in_use.load(Ordering::Relaxed);
        let peak = self.peak_bytes_in_use.load(Ordering::Relaxed);
        AllocatorStats {
            num_allocs: self.num_allocs.load(Ordering::Relaxed),
            bytes_in_use: in_use,
            peak_bytes_in_use: peak,
            largest_alloc_size: self.largest_alloc_size.load(Ordering::Relaxed),
            bytes_limit: self.bytes_limit,
            bytes_reserved: in_use,
            peak_bytes_reserved: peak,
            num_failed_allocs: self.num_failed_allocs.load(Ordering::Relaxed),
        }
    }

    /// `Error::OutOfMemory` for a request of `bytes`, with the current stats.
    pub fn out_of_memory(&self, bytes: usize, device: &str) -> Error {
        Error::OutOfMemory {
            requested: bytes,
            device: device.to_string(),
            stats: self.snapshot(),
        }
    }
}

/// The object-safe face of an allocator that a [`crate::Device`] shows: name and stats.
pub trait AllocatorInfo: Send + Sync {
    /// The allocator's name (`cpu`, `cuda:0`, ...).
    fn name(&self) -> &str;
    /// Current statistics.
    fn stats(&self) -> AllocatorStats;
    /// Account for `bytes` of memory held outside this allocator's blocks but charged to it
    /// (an [`InlineBuffer`](crate::InlineBuffer)'s): counted in its stats and held to its
    /// byte limit, an `Err(OutOfMemory)` past it, as for any block. Each successful charge
    /// is matched by one [`AllocatorInfo::refund`]. Allocators that track nothing accept
    /// every charge.
    fn charge(&self, bytes: usize, device: &str) -> Result<()> {
        let _ = (bytes, device);
        Ok(())
    }

    /// Return a [`AllocatorInfo::charge`] of `bytes`.
    fn refund(&self, bytes: usize) {
        let _ = bytes;
    }
}

/// An allocator of device memory, as TensorFlow's `Allocator` (`AllocateRaw`,
/// `DeallocateRaw`, and `GetStats` through [`AllocatorInfo`]).
///
/// `Block` is whatever the memory is on that device: a host pointer, a CUDA device
/// pointer, an OpenCL `cl_mem`, a `wgpu::Buffer`. Failure is an `Err`
/// ([`Error::OutOfMemory`] when memory ran out), never a panic or abort.
pub trait Allocator: AllocatorInfo + 'static {
    /// One allocation.
    type Block: Send + Sync;

    /// Allocate `bytes` bytes aligned to at least `alignment` (a power of two).
    fn allocate(&self, bytes: usize, alignment: usize) -> Result<Self::Block>;

    /// Return a block made by this allocator.
    fn deallocate(&self, block: Self::Block);
}

/// Memory the host can address: what a host buffer needs from a block.
pub trait HostMemory: Send + Sync + 'static {
    /// The start of the usable memory.
    fn host_ptr(&self) -> NonNull<u8>;
    /// The usable length in bytes.
    fn host_len(&self) -> usize;
}

/// A block of host memory.
#[derive(Debug)]
pub struct HostBlock {
    ptr: NonNull<u8>,
    layout: MemLayout,
}

// SAFETY: a HostBlock owns its memory exclusively; moving it between threads is sound.
unsafe impl Send for HostBlock {}
// SAFETY: a shared HostBlock only exposes the pointer value; access is synchronised by users.
unsafe impl Sync for HostBlock {}

impl HostMemory for HostBlock {
    fn host_ptr(&self) -> NonNull<u8> {
        self.ptr
    }
    fn host_len(&self) -> usize {
        self.layout.size()
    }
}

impl<B: HostMemory> HostMemory for CachedBlock<B> {
    fn host_ptr(&self) -> NonNull<u8> {
        self.inner().host_ptr()
    }
    fn host_len(&self) -> usize {
        self.requested()
    }
}

impl HostBlock {
    /// The start of the block.
    pub fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// The size in bytes.
    pub fn len(&self) -> usize {
        self.layout.size()
    }

    /// Whether the block is zero bytes long.
    pub fn is_empty(&self) -> bool {
        self.layout.size() == 0
    }

    /// The alignment in bytes.
    pub fn alignment(&self) -> usize {
        self.layout.align()
    }
}

/// The host allocator: 64-byte aligned (TensorFlow's `kAllocatorAlignment`), with an
/// optional byte limit. Refusals are `Error::OutOfMemory`, never an abort.
///
/// ```
/// use polytensor_core::{Allocator, AllocatorInfo, HostAllocator};
/// let host = HostAllocator::with_limit(1 << 20);
/// let block = host.allocate(1000, 64).unwrap();
/// assert_eq!(block.ptr().as_ptr() as usize % 64, 0);
/// assert!(host.allocate(2 << 20, 64).is_err()); // over the limit: an Err
/// host.deallocate(block);
/// assert_eq!(host.stats().bytes_in_use, 0);
/// ```
#[derive(Debug)]
pub struct HostAllocator {
    name: String,
    tracker: StatsTracker,
}

impl Default for HostAllocator {
    fn default() -> Self {
        Self::new()
    }
}

impl HostAllocator {
    /// A host allocator with no byte limit.
    pub fn new() -> Self {
        Self::build(None)
    }

    /// A host allocator that refuses to hold more than `bytes_limit` bytes at once.
    pub fn with_limit(bytes_limit: u64) -> Self {
        Self::build(Some(bytes_limit))
    }

    fn build(bytes_limit: Option<u64>) -> Self {
        Self {
            name: "cpu".to_string(),
            tracker: StatsTracker::new(bytes_limit),
        }
    }

    /// Allocate `bytes` zero-filled bytes (fresh pages come zeroed from the system at no cost).
    pub fn allocate_zeroed(&self, bytes: usize, alignment: usize) -> Result<HostBlock> {
        self.allocate_with(bytes, alignment, true)
    }

    fn allocate_with(&self, bytes: usize, alignment: usize, zeroed: bool) -> Result<HostBlock> {
        self.tracker.obtain(
            bytes,
            &self.name,
            || self.system_allocate(bytes, alignment, zeroed),
            |block| self.system_free(block),
        )
    }

    /// A block straight from the system allocator, not yet accounted for.
    fn system_allocate(&self, bytes: usize, alignment: usize, zeroed: bool) -> Result<HostBlock> {
        let huge = bytes >= HUGE_PAGE_BYTES;
        let align = alignment
            .max(ALLOCATOR_ALIGNMENT)
            .max(if huge { HUGE_PAGE_BYTES } else { 1 });
        let layout = MemLayout::from_size_align(bytes, align)
            .map_err(|_| self.tracker.out_of_memory(bytes, &self.name))?;
        if bytes == 0 {
            // A dangling but aligned pointer, as for any zero-sized allocation.
            let ptr = NonNull::new(std::ptr::without_provenance_mut(align))
                .expect("alignment is non-zero");
            return Ok(HostBlock { ptr, layout });
        }
        // SAFETY: `layout` has a non-zero size (checked above) and a valid alignment.
        let raw = unsafe {
            if zeroed && !huge {
                std::alloc::alloc_zeroed(layout)
            } else {
                std::alloc::alloc(layout)
            }
        };
        let ptr = NonNull::new(raw).ok_or_else(|| self.tracker.out_of_memory(bytes, &self.name))?;
        if huge {
            // Advise before the first touch, so the zeroing below (or the first kernel)
            // faults huge pages in.
            advise_huge_pages(ptr, bytes);
            if zeroed {
                // SAFETY: `ptr` is valid for `bytes` writes (just allocated).
                unsafe { ptr.as_ptr().write_bytes(0, bytes) };
            }
        }
        Ok(HostBlock { ptr, layout })
    }

    /// Return a block made by [`HostAllocator::system_allocate`] to the system.
    fn system_free(&self, block: HostBlock) {
        if !block.is_empty() {
            // SAFETY: the block came from `system_allocate` with exactly this layout and is
            // returned once (it is moved in).
            unsafe { std::alloc::dealloc(block.ptr.as_ptr(), block.layout) };
        }
    }
}

/// Ask the kernel to back `[ptr, ptr + bytes)` with transparent huge pages. Only advice: a
/// kernel with THP off (or another OS) keeps small pages, and nothing else changes.
#[cfg(target_os = "linux")]
fn advise_huge_pages(ptr: NonNull<u8>, bytes: usize) {
    // SAFETY: madvise only reads the range's mapping; the range is one live allocation,
    // page aligned (it is aligned to `HUGE_PAGE_BYTES`). The result is advisory.
    unsafe { libc::madvise(ptr.as_ptr().cast(), bytes, libc::MADV_HUGEPAGE) };
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_ptr: NonNull<u8>, _bytes: usize) {}

impl AllocatorInfo for HostAllocator {
    fn name(&self) -> &str {
        &self.name
    }

    fn stats(&self) -> AllocatorStats {
        self.tracker.snapshot()
    }

    fn charge(&self, bytes: usize, device: &str) -> Result<()> {
        self.tracker.try_reserve(bytes, device)
    }

    fn refund(&self, bytes: usize) {
        self.tracker.release(bytes);
    }
}

impl Allocator for HostAllocator {
    type Block = HostBlock;

    fn allocate(&self, bytes: usize, alignment: usize) -> Result<HostBlock> {
        self.allocate_with(bytes, alignment, false)
    }

    fn deallocate(&self, block: HostBlock) {
        self.tracker.release(block.len());
        self.system_free(block);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_and_stats() {
        let host = HostAllocator::new();
        let a = host.allocate(100, 8).unwrap();
        let b = host.allocate_zeroed(300, 256).unwrap();
        assert_eq!(a.ptr().as_ptr() as usize % ALLOCATOR_ALIGNMENT, 0);
        assert_eq!(b.ptr().as_ptr() as usize % 256, 0);
        // SAFETY: b is 300 zeroed bytes owned by this test.
        let zeros = unsafe { std::slice::from_raw_parts(b.ptr().as_ptr(), 300) };
        assert!(zeros.iter().all(|&x| x == 0));
        let stats = host.stats();
        assert_eq!(
            (
                stats.num_allocs,
                stats.bytes_in_use,
                stats.largest_alloc_size
            ),
            (2, 400, 300)
        );
        host.deallocate(a);
        host.deallocate(b);
        let stats = host.stats();
        assert_eq!((stats.bytes_in_use, stats.peak_bytes_in_use), (0, 400));
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "Miri tries to allocate the 4 TiB and more the system refuses"
    )]
    fn failed_allocations_change_only_the_failure_count() {
        let host = HostAllocator::new();
        let small = host.allocate(1000, 64).unwrap();
        let before = host.stats();
        // 4 TiB: a valid layout that the system refuses (no overcommit of that much here),
        // and sizes no layout can describe.
        for bytes in [4 << 40, usize::MAX - 10, isize::MAX as usize] {
            assert!(matches!(
                host.allocate(bytes, 64),
                Err(Error::OutOfMemory { stats, .. }) if stats.peak_bytes_in_use == 1000
            ));
        }
        let after = host.stats();
        assert_eq!(
            after,
            AllocatorStats {
                num_failed_allocs: 3,
                ..before
            }
        );
        let limited = HostAllocator::with_limit(100);
        assert!(limited.allocate(101, 64).is_err());
        assert!(limited.charge(101, "cpu").is_err());
        assert_eq!(
            limited.stats(),
            AllocatorStats {
                bytes_limit: Some(100),
                num_failed_allocs: 2,
                ..AllocatorStats::default()
            }
        );
        host.deallocate(small);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "Miri tries to allocate the 4 TiB and more the system refuses"
    )]
    fn limits_and_absurd_sizes_are_errors() {
        let host = HostAllocator::with_limit(1000);
        let a = host.allocate(600, 64).unwrap();
        match host.allocate(600, 64) {
            Err(Error::OutOfMemory {
                requested, stats, ..
            }) => {
                assert_eq!(requested, 600);
                assert_eq!(stats.bytes_in_use, 600);
                assert_eq!(stats.bytes_limit, Some(1000));
            }
            other => panic!("expected OutOfMemory, got {other:?}"),
        }
        host.deallocate(a);
        assert!(host.allocate(1000, 64).is_ok_and(|b| {
            host.deallocate(b);
            true
        }));
        let unlimited = HostAllocator::new();
        assert!(matches!(
            unlimited.allocate(usize::MAX - 10, 64),
            Err(Error::OutOfMemory { .. })
        ));
        assert!(matches!(
            unlimited.allocate(1 << 62, 64),
            Err(Error::OutOfMemory { .. })
        ));
        assert_eq!(unlimited.stats().bytes_in_use, 0);
        let empty = unlimited.allocate(0, 64).unwrap();
        assert_eq!(unlimited.stats().num_failed_allocs, 2);
        assert!(empty.is_empty());
        unlimited.deallocate(empty);
    }
}
