//! The memory MPI reads and writes for a tensor: the tensor's own elements where they are
//! in host memory and contiguous (no copy), else an 8-byte-aligned host copy (staging), as
//! the MPI builds polytensor runs on are not device-aware. That memory is owned by the
//! transfer in flight, so it lives, unmoved, until MPI is done with it.

use std::ffi::c_void;
use std::sync::Arc;

use polytensor_core::{DataType, Device, Result, Tensor, TensorShape};

/// Where the bytes of a tensor being sent are, and what holds them.
pub(crate) struct Outgoing {
    /// The tensor whose host-visible elements MPI reads directly, boxed: small tensors
    /// keep their elements inline, so the tensor itself must not move while MPI reads
    /// them. Held, not read.
    _tensor: Option<Box<Tensor>>,
    /// Or a host copy, in 8-byte words (aligned for every element type). Held, not read.
    _words: Vec<u64>,
    pub(crate) ptr: *const c_void,
}

// SAFETY: the pointer points into the tensor or words the `Outgoing` owns and moves with it
// (heap memory, so moving does not move the bytes).
unsafe impl Send for Outgoing {}

/// The bytes of `tensor` for MPI to read: its own elements if they are host-visible and
/// contiguous, else a staged copy.
pub(crate) fn outgoing(tensor: &Tensor) -> Result<Outgoing> {
    if tensor.is_contiguous() && tensor.buffer().host_ptr().is_some() {
        let held = Box::new(tensor.clone());
        let view = held.view();
        if let Some(bytes) = view.host_bytes() {
            let range = view.host_copy_range(held.total_bytes())?;
            let ptr = bytes[range].as_ptr() as *const c_void;
            return Ok(Outgoing {
                _tensor: Some(held),
                _words: Vec::new(),
                ptr,
            });
        }
    }
    let dense = tensor.contiguous()?;
    let mut words = vec![0u64; dense.total_bytes().div_ceil(8)];
    if dense.total_bytes() > 0 {
        let bytes = &mut bytes_mut(&mut words)[..dense.total_bytes()];
        dense.device().copy_to_host(&dense.view(), bytes)?;
    }
    Ok(Outgoing::words(words))
}

impl Outgoing {
    /// `words` to send (a header row's, or a staged copy).
    pub(crate) fn words(words: Vec<u64>) -> Outgoing {
        let ptr = words.as_ptr() as *const c_void;
        Outgoing {
            _tensor: None,
            _words: words,
            ptr,
        }
    }
}

/// Memory MPI writes a tensor into, and that tensor.
pub(crate) struct Incoming {
    target: Target,
    pub(crate) ptr: *mut c_void,
}

/// Where received bytes go.
enum Target {
    /// Into the tensor's own host memory (boxed, as `Outgoing` holds its tensor).
    Direct(Box<Tensor>),
    /// Into `words`, copied into `out` once received.
    Staged { words: Vec<u64>, out: Tensor },
}

// SAFETY: as for `Outgoing`: the pointer points into the heap memory `target` owns.
unsafe impl Send for Incoming {}

impl Incoming {
    /// Room for a new tensor of `shape` and `dtype` (fixed-size elements) on `device`.
    pub(crate) fn new(
        shape: TensorShape,
        dtype: DataType,
        device: &Arc<dyn Device>,
    ) -> Result<Incoming> {
        // SAFETY: the tensor is only read after MPI (or the copy of its staging) has
        // written every element, once the transfer that owns it completed, or never.
        Incoming::into_existing(unsafe { Tensor::uninit(shape, dtype, device)? })
    }

    /// Room in `out` itself where it is host-visible, contiguous and not shared (no copy),
    /// else a staging copy written into `out` once received.
    pub(crate) fn into_existing(mut out: Tensor) -> Result<Incoming> {
        if out.is_contiguous() && out.buffer().host_ptr().is_some() {
            let mut held = Box::new(out);
            let direct = held
                .try_out_view()?
                .host_bytes_mut()
                .map(|bytes| bytes.as_mut_ptr() as *mut c_void);
            if let Some(ptr) = direct {
                return Ok(Incoming {
                    target: Target::Direct(held),
                    ptr,
                });
            }
            out = *held;
        }
        // Refuse a shared output before anything moves.
        out.try_out_view()?;
        let mut words = vec![0u64; out.total_bytes().div_ceil(8)];
        let ptr = words.as_mut_ptr() as *mut c_void;
        Ok(Incoming {
            target: Target::Staged { words, out },
            ptr,
        })
    }

    /// The tensor, once MPI has written every element.
    pub(crate) fn into_tensor(self) -> Result<Tensor> {
        match self.target {
            Target::Direct(tensor) => Ok(*tensor),
            Target::Staged { mut words, mut out } => {
                let len = out.total_bytes();
                if len > 0 {
                    let device = out.device().clone();
                    device
                        .copy_from_host(&bytes_mut(&mut words)[..len], &mut out.try_out_view()?)?;
                }
                Ok(out)
            }
        }
    }
}

/// Words as bytes.
fn bytes_mut(words: &mut [u64]) -> &mut [u8] {
    // SAFETY: u64 has no padding and every byte pattern is a valid u8; the slice covers
    // exactly the words' memory, borrowed mutably for as long as `words`.
    unsafe {
        std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, std::mem::size_of_val(words))
    }
}
