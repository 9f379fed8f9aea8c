//! [`AllocatorStats`]: what an allocator has handed out, with TensorFlow's fields. Allocators
//! keep them, and an out-of-memory [`crate::Error`] carries them.

use std::fmt;

/// Allocation statistics, with the fields of TensorFlow's `AllocatorStats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllocatorStats {
    /// Number of allocations made since creation.
    pub num_allocs: u64,
    /// Bytes handed out and not yet returned.
    pub bytes_in_use: u64,
    /// The highest `bytes_in_use` seen.
    pub peak_bytes_in_use: u64,
    /// The largest single allocation.
    pub largest_alloc_size: u64,
    /// The byte limit, if any.
    pub bytes_limit: Option<u64>,
    /// Bytes held from the system or driver (for caching allocators: in use plus cached).
    pub bytes_reserved: u64,
    /// The highest `bytes_reserved` seen.
    pub peak_bytes_reserved: u64,
    /// Allocations refused (over the byte limit, or the system or driver out of memory).
    /// A refused allocation changes no other field. (Not in TensorFlow's `AllocatorStats`.)
    pub num_failed_allocs: u64,
}

impl fmt::Display for AllocatorStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "in use {} B, peak {} B, {} allocs, largest {} B, limit ",
            self.bytes_in_use, self.peak_bytes_in_use, self.num_allocs, self.largest_alloc_size
        )?;
        match self.bytes_limit {
            Some(limit) => write!(f, "{limit} B")?,
            None => f.write_str("none")?,
        }
        if self.num_failed_allocs > 0 {
            write!(f, ", {} refused", self.num_failed_allocs)?;
        }
        Ok(())
    }
}
