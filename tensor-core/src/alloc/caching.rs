//! [`CachingAllocator`]: a size-class cache in front of any allocator, as TensorFlow's BFC
//! allocator and PyTorch's caching allocators do, so that freshly allocated results reuse
//! memory instead of paying for new pages (host) or driver calls (devices).

use std::sync::Mutex;

use super::{Allocator, AllocatorInfo, AllocatorStats, StatsTracker, ALLOCATOR_ALIGNMENT};
use crate::error::{Error, Result};

/// A block from a [`CachingAllocator`]: the inner allocator's block, its size class, and the
/// bytes that were asked for.
#[derive(Debug)]
pub struct CachedBlock<B> {
    inner: B,
    class: usize,
    alignment: usize,
    requested: usize,
}

impl<B> CachedBlock<B> {
    /// The inner allocator's block (at least `requested` bytes long).
    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// The bytes that were asked for.
    pub fn requested(&self) -> usize {
        self.requested
    }
}

/// The size class of a request: the next multiple of 64 up to 4 KiB, then the next multiple
/// of 1/8 of the request's power of two (at most 12.5% wasted).
pub fn size_class(bytes: usize) -> usize {
    if bytes <= 4096 {
        return bytes.div_ceil(64).max(1) * 64;
    }
    let step = 1usize << (usize::BITS - 1 - bytes.leading_zeros()).saturating_sub(3);
    bytes.div_ceil(step).saturating_mul(step)
}

/// The index of a size class: 64-byte steps up to 4 KiB, then eight classes per power of two.
fn class_index(class: usize) -> usize {
    if class <= 4096 {
        return class / 64 - 1;
    }
    let exponent = (usize::BITS - 1 - class.leading_zeros()) as usize;
    let step = 1usize << (exponent - 3);
    63 + (exponent - 12) * 8 + (class / step - 8)
}

struct Cache<B> {
    /// Free blocks of the cached alignment, by class index.
    free: Vec<Vec<B>>,
    cached_bytes: usize,
}

/// A caching layer over an allocator: freed blocks are kept, per size class, up to a byte
/// cap, and handed out again to requests of the same class. `trim` returns them all.
/// Requests for any power-of-two alignment up to [`ALLOCATOR_ALIGNMENT`] share the cache
/// (they get `ALLOCATOR_ALIGNMENT`-aligned blocks); larger alignments are not cached.
///
/// Statistics: `bytes_in_use` and `num_allocs` count what callers hold and asked for;
/// `bytes_reserved` is what the inner allocator holds (in use plus cached). When the inner
/// allocator refuses (its byte limit or the system), the cache is trimmed and the request
/// retried once, so cached memory never causes an out-of-memory error by itself.
///
/// ```
/// use polytensor_core::alloc::CachingAllocator;
/// use polytensor_core::{Allocator, AllocatorInfo, HostAllocator};
/// let cache = CachingAllocator::new(HostAllocator::new(), 1 << 30);
/// let a = cache.allocate(1 << 20, 64).unwrap();
/// cache.deallocate(a);
/// assert_eq!(cache.cached_bytes(), 1 << 20);
/// let b = cache.allocate(1 << 20, 64).unwrap(); // reuses the cached block
/// assert_eq!(cache.cached_bytes(), 0);
/// cache.deallocate(b);
/// cache.trim();
/// assert_eq!(cache.stats().bytes_reserved, 0);
/// ```
pub struct CachingAllocator<A: Allocator> {
    inner: A,
    cap: usize,
    cache: Mutex<Cache<A::Block>>,
    tracker: StatsTracker,
}

impl<A: Allocator> std::fmt::Debug for CachingAllocator<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachingAllocator")
            .field("inner", &self.inner.name())
            .field("cap", &self.cap)
            .field("cached_bytes", &self.cached_bytes())
            .finish()
    }
}

impl<A: Allocator> CachingAllocator<A> {
    /// A cache over `inner` holding at most `cap` bytes of freed blocks.
    pub fn new(inner: A, cap: usize) -> Self {
        Self {
            inner,
            cap,
            cache: Mutex::new(Cache {
                free: Vec::new(),
                cached_bytes: 0,
            }),
            tracker: StatsTracker::new(None),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache<A::Block>> {
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The inner allocator.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    /// The cap on cached (freed, not returned) bytes.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Bytes held in the cache, free for reuse.
    pub fn cached_bytes(&self) -> usize {
        self.lock().cached_bytes
    }

    /// Return every cached block to the inner allocator.
    pub fn trim(&self) {
        let blocks: Vec<A::Block> = {
            let mut cache = self.lock();
            cache.cached_bytes = 0;
            cache.free.iter_mut().flat_map(std::mem::take).collect()
        };
        blocks.into_iter().for_each(|b| self.inner.deallocate(b));
    }

    fn take_cached(&self, class: usize, alignment: usize) -> Option<A::Block> {
        if alignment != ALLOCATOR_ALIGNMENT {
            return None;
        }
        let mut cache = self.lock();
        let block = cache.free.get_mut(class_index(class))?.pop()?;
        cache.cached_bytes -= class;
        Some(block)
    }
}

impl<A: Allocator> AllocatorInfo for CachingAllocator<A> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn stats(&self) -> AllocatorStats {
        let inner = self.inner.stats();
        AllocatorStats {
            bytes_limit: inner.bytes_limit,
            bytes_reserved: inner.bytes_in_use,
            peak_bytes_reserved: inner.peak_bytes_in_use,
            ..self.tracker.snapshot()
        }
    }

    /// Held to the inner allocator's limit next to its blocks (a full cache is trimmed
    /// first, as for a block), and counted in what callers hold.
    fn charge(&self, bytes: usize, device: &str) -> Result<()> {
        self.with_inner_retry(|| self.inner.charge(bytes, device))?;
        self.tracker.try_reserve(bytes, device)
    }

    fn refund(&self, bytes: usize) {
        self.tracker.release(bytes);
        self.inner.refund(bytes);
    }
}

impl<A: Allocator> CachingAllocator<A> {
    /// Run `request` against the inner allocator; if it runs out of memory while blocks sit
    /// in the cache, trim the cache and run it once more. A final refusal is counted.
    fn with_inner_retry<T>(&self, request: impl Fn() -> Result<T>) -> Result<T> {
        let result = match request() {
            Err(Error::OutOfMemory { .. }) if self.cached_bytes() > 0 => {
                self.trim();
                request()
            }
            other => other,
        };
        if result.is_err() {
            self.tracker.record_failure();
        }
        result
    }
}

impl<A: Allocator> Allocator for CachingAllocator<A> {
    type Block = CachedBlock<A::Block>;

    fn allocate(&self, bytes: usize, alignment: usize) -> Result<Self::Block> {
        // A block aligned to ALLOCATOR_ALIGNMENT serves every smaller power-of-two
        // alignment, so such requests share the cached blocks (device allocators ask for
        // their own granule, 4 or 16 bytes).
        let alignment = if alignment.is_power_of_two() && alignment < ALLOCATOR_ALIGNMENT {
            ALLOCATOR_ALIGNMENT
        } else {
            alignment
        };
        let class = size_class(bytes);
        let inner = match self.take_cached(class, alignment) {
            Some(block) => block,
            None => self.with_inner_retry(|| self.inner.allocate(class, alignment))?,
        };
        self.tracker.try_reserve(bytes, self.inner.name())?;
        Ok(CachedBlock {
            inner,
            class,
            alignment,
            requested: bytes,
        })
    }

    fn deallocate(&self, block: Self::Block) {
        self.tracker.release(block.requested);
        let CachedBlock {
            inner,
            class,
            alignment,
            ..
        } = block;
        let mut cache = self.lock();
        if alignment == ALLOCATOR_ALIGNMENT && cache.cached_bytes + class <= self.cap {
            cache.cached_bytes += class;
            let index = class_index(class);
            if cache.free.len() <= index {
                cache.free.resize_with(index + 1, Vec::new);
            }
            cache.free[index].push(inner);
        } else {
            drop(cache);
            self.inner.deallocate(inner);
        }
    }
}

impl<A: Allocator> Drop for CachingAllocator<A> {
    fn drop(&mut self) {
        self.trim();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostAllocator;

    #[test]
    fn class_indices_are_dense_and_distinct() {
        let mut seen = std::collections::BTreeSet::new();
        let mut bytes = 1;
        while bytes < 1 << 40 {
            let class = size_class(bytes);
            assert_eq!(size_class(class), class);
            seen.insert((class_index(class), class));
            bytes = class + 1;
        }
        let indices: Vec<usize> = seen.iter().map(|&(i, _)| i).collect();
        assert!(
            indices.windows(2).all(|w| w[1] == w[0] + 1),
            "indices are consecutive"
        );
    }

    #[test]
    fn size_classes_waste_at_most_an_eighth() {
        assert_eq!(size_class(0), 64);
        assert_eq!(size_class(1), 64);
        assert_eq!(size_class(4096), 4096);
        assert_eq!(size_class(4097), 4096 + 512);
        assert_eq!(size_class(1 << 26), 1 << 26);
        for bytes in [5000, 100_000, 3 << 20, (1 << 26) + 1] {
            let class = size_class(bytes);
            assert!(
                class >= bytes && (class - bytes) * 8 <= bytes,
                "{bytes} -> {class}"
            );
        }
    }

    #[test]
    fn reuse_cap_and_stats() {
        let cache = CachingAllocator::new(HostAllocator::new(), 3100);
        let a = cache.allocate(1000, 64).unwrap();
        let b = cache.allocate(2000, 64).unwrap();
        assert_eq!(cache.stats().bytes_in_use, 3000);
        cache.deallocate(a);
        cache.deallocate(b);
        assert_eq!(cache.cached_bytes(), 1024 + 2048, "both fit under the cap");
        let stats = cache.stats();
        assert_eq!((stats.bytes_in_use, stats.bytes_reserved), (0, 1024 + 2048));
        let c = cache.allocate(1000, 64).unwrap();
        assert_eq!(cache.cached_bytes(), 2048, "reused the 1024-byte class");
        let big = cache.allocate(5000, 64).unwrap();
        cache.deallocate(big);
        assert_eq!(
            cache.cached_bytes(),
            2048,
            "over the cap: returned, not cached"
        );
        cache.deallocate(c);
        cache.trim();
        assert_eq!((cache.cached_bytes(), cache.stats().bytes_reserved), (0, 0));
        assert_eq!(cache.stats().num_allocs, 4);
    }

    #[test]
    fn smaller_alignments_share_the_cache() {
        let cache = CachingAllocator::new(HostAllocator::new(), 1 << 20);
        let a = cache.allocate(1000, 16).unwrap();
        cache.deallocate(a);
        assert_eq!(
            cache.cached_bytes(),
            1024,
            "a 16-byte-aligned block is cached"
        );
        let b = cache.allocate(1000, 4).unwrap();
        assert_eq!(
            cache.cached_bytes(),
            0,
            "and serves a 4-byte-aligned request"
        );
        cache.deallocate(b);
        let wide = cache.allocate(1000, 4096).unwrap();
        cache.deallocate(wide);
        assert_eq!(
            cache.cached_bytes(),
            1024,
            "4096-byte alignment is not cached"
        );
        cache.trim();
        assert_eq!(cache.stats().bytes_reserved, 0);
    }

    #[test]
    fn out_of_memory_trims_and_retries() {
        let cache = CachingAllocator::new(HostAllocator::with_limit(8192), 1 << 20);
        let a = cache.allocate(4096, 64).unwrap();
        cache.deallocate(a);
        assert_eq!(cache.cached_bytes(), 4096);
        // 6 KiB more would pass the inner limit while 4 KiB sit in the cache: trim, retry.
        let b = cache.allocate(6000, 64).unwrap();
        assert_eq!(cache.cached_bytes(), 0);
        assert!(matches!(
            cache.allocate(4096, 64),
            Err(Error::OutOfMemory { .. })
        ));
        cache.deallocate(b);
    }

    #[test]
    fn charges_are_held_to_the_inner_limit_and_trim_the_cache() {
        let cache = CachingAllocator::new(HostAllocator::with_limit(4096), 1 << 20);
        let a = cache.allocate(4096, 64).unwrap();
        assert!(
            cache.charge(64, "cpu:0").is_err(),
            "4096 + 64 is over the limit"
        );
        cache.deallocate(a);
        // 4096 bytes sit in the cache: a charge trims it rather than fail.
        cache.charge(64, "cpu:0").unwrap();
        assert_eq!(cache.cached_bytes(), 0);
        let stats = cache.stats();
        assert_eq!((stats.bytes_in_use, stats.bytes_reserved), (64, 64));
        assert_eq!(stats.num_failed_allocs, 1);
        cache.refund(64);
        assert_eq!(cache.stats().bytes_in_use, 0);
        assert_eq!(cache.inner().stats().bytes_in_use, 0);
    }
}
