//! Host copies. Small ones are queued straight from (or into) the caller's memory; large
//! ones go through a pinned (page-locked) staging buffer in chunks, which the GPU's copy
//! engine reads and writes at full speed and which the driver would otherwise stage
//! through its own smaller buffers.

use std::sync::{Arc, Mutex};

use cudarc::driver::{result, CudaContext, CudaStream, DriverError};

/// Copies at least this large go through the staging buffer.
pub const STAGED_FROM: usize = 1 << 20;

/// The staging buffer's size: the chunk of a staged copy.
pub const STAGING_BYTES: usize = 8 << 20;

/// A page-locked host buffer from `cuMemHostAlloc`.
struct Pinned {
    ptr: *mut u8,
    context: Arc<CudaContext>,
}

// SAFETY: the buffer is plain host memory owned by this value; it is only touched under
// the `Staging` mutex.
unsafe impl Send for Pinned {}

impl Drop for Pinned {
    fn drop(&mut self) {
        if self.context.bind_to_thread().is_ok() {
            // SAFETY: `ptr` came from `cuMemHostAlloc` in this context; every copy using it
            // was waited for before the mutex holding it was released.
            let _ = unsafe { result::free_host(self.ptr.cast()) };
        }
    }
}

/// The staging buffer of one device, allocated on first use.
pub struct Staging {
    context: Arc<CudaContext>,
    pinned: Mutex<Option<Pinned>>,
}

impl Staging {
    /// No buffer yet; it is made in `context` when a large copy first needs it.
    pub fn new(context: Arc<CudaContext>) -> Self {
        Self {
            context,
            pinned: Mutex::new(None),
        }
    }

    /// Run `copy` with the staging buffer, allocating it first if needed; `None` if pinned
    /// memory cannot be had (the caller copies directly instead).
    fn with<T>(&self, copy: impl FnOnce(*mut u8) -> T) -> Option<T> {
        let mut slot = self.pinned.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            // SAFETY: the device's context is current on this thread (callers bind it).
            let ptr = unsafe { result::malloc_host(STAGING_BYTES, 0) }.ok()?;
            *slot = Some(Pinned {
                ptr: ptr.cast(),
                context: self.context.clone(),
            });
        }
        slot.as_ref().map(|pinned| copy(pinned.ptr))
    }

    /// Copy `src` to device address `dst` on `stream`. Returns once `src` is no longer
    /// needed (the copy itself may still be queued).
    pub fn write(&self, stream: &CudaStream, dst: u64, src: &[u8]) -> Result<(), DriverError> {
        let raw = stream.cu_stream();
        if src.len() >= STAGED_FROM {
            let staged = self.with(|pinned| {
                for (i, chunk) in src.chunks(STAGING_BYTES).enumerate() {
                    // SAFETY: the staging buffer holds STAGING_BYTES, at least `chunk.len()`;
                    // the previous chunk's copy out of it was waited for below.
                    unsafe {
                        std::ptr::copy_nonoverlapping(chunk.as_ptr(), pinned, chunk.len());
                        let staged = std::slice::from_raw_parts(pinned, chunk.len());
                        result::memcpy_htod_async(dst + (i * STAGING_BYTES) as u64, staged, raw)?;
                    }
                    stream.synchronize()?;
                }
                Ok(())
            });
            if let Some(done) = staged {
                return done;
            }
        }
        // SAFETY: `dst..dst + src.len()` is device memory of the stream's context (checked
        // by the caller); from pageable memory the driver copies `src` before returning.
        unsafe { result::memcpy_htod_async(dst, src, raw) }
    }

    /// Copy device address `src` into `dst` on `stream`, waiting for the copy (and for
    /// the work queued before it).
    pub fn read(&self, stream: &CudaStream, dst: &mut [u8], src: u64) -> Result<(), DriverError> {
        let raw = stream.cu_stream();
        if dst.len() >= STAGED_FROM {
            let staged = self.with(|pinned| {
                for (i, chunk) in dst.chunks_mut(STAGING_BYTES).enumerate() {
                    // SAFETY: the staging buffer holds at least `chunk.len()` bytes; the copy
                    // into it is waited for before it is read.
                    unsafe {
                        let staged = std::slice::from_raw_parts_mut(pinned, chunk.len());
                        result::memcpy_dtoh_async(staged, src + (i * STAGING_BYTES) as u64, raw)?;
                        stream.synchronize()?;
                        std::ptr::copy_nonoverlapping(pinned, chunk.as_mut_ptr(), chunk.len());
                    }
                }
                Ok(())
            });
            if let Some(done) = staged {
                return done;
            }
        }
        // SAFETY: `src..src + dst.len()` is device memory of the stream's context (checked
        // by the caller); the stream is waited for before `dst` is used.
        unsafe { result::memcpy_dtoh_async(dst, src, raw) }?;
        stream.synchronize()
    }
}
