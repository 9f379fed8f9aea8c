//! The memory MPI reads and writes for a tensor: the tensor's own elements where they are
//! in host memory and contiguous (no copy), else an 8-byte-aligned host copy (staging), as
//! the MPI builds polytensor runs on are not device-aware. A [`Memory`] is owned by the
//! transfer in flight, so it lives, unmoved, until MPI is done with it.

use std::ffi::c_void;
use std::sync::Arc;

use polytensor_core::{DataType, Device, Result, Tensor, TensorShape};

/// Memory an MPI operation in flight reads or writes, held until it completes.
pub(crate) enum Memory {
    /// A tensor whose host-visible elements MPI uses directly, boxed: small tensors keep
    /// their elements inline, so the tensor itself must not move while MPI uses them.
    Tensor(Box<Tensor>),
    /// A host copy, in 8-byte words (aligned for every element type).
    Staged(Vec<u64>),
}

/// Where the bytes of a tensor being sent are, and what holds them.
pub(crate) struct Outgoing {
    /// Held, not read: it keeps the bytes `ptr` points to.
    _memory: Memory,
    pub(crate) ptr: *const c_void,
}

// SAFETY: the pointer points into `memory`, which the `Outgoing` owns and moves with it
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
                _memory: Memory::Tensor(held),
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
            _memory: Memory::Staged(words),
            ptr,
        }
    }
}

/// Memory MPI writes a tensor of `shape` and `dtype` into, and how it becomes a tensor on
/// `device` once written.
pub(crate) struct Incoming {
    memory: Memory,
    pub(crate) ptr: *mut c_void,
    shape: TensorShape,
    dtype: DataType,
    device: Arc<dyn Device>,
    /// The caller's output tensor a staged copy is written into, if one was given.
    out: Option<Tensor>,
}

// SAFETY: as for `Outgoing`: the pointer points into the heap memory `memory` owns.
unsafe impl Send for Incoming {}

impl Incoming {
    /// Room for a tensor of `shape` and `dtype` (fixed-size elements) on `device`: the new
    /// tensor's own memory where `device` allocates host memory, else a staging copy.
    pub(crate) fn new(
        shape: TensorShape,
        dtype: DataType,
        device: &Arc<dyn Device>,
    ) -> Result<Incoming> {
        // SAFETY: the tensor is only read after MPI has written every element (the
        // transfer that owns it completed), or never.
        let mut tensor = Box::new(unsafe { Tensor::uninit(shape.clone(), dtype, device)? });
        let direct = tensor
            .try_out_view()?
            .host_bytes_mut()
            .map(|bytes| bytes.as_mut_ptr() as *mut c_void);
        let (memory, ptr) = match direct {
            Some(ptr) => (Memory::Tensor(tensor), ptr),
            None => {
                drop(tensor);
                let mut words = vec![0u64; byte_len(&shape, dtype)?.div_ceil(8)];
                let ptr = words.as_mut_ptr() as *mut c_void;
                (Memory::Staged(words), ptr)
            }
        };
        Ok(Incoming {
            memory,
            ptr,
            shape,
            dtype,
            device: device.clone(),
            out: None,
        })
    }

    /// Room in `out` itself where it is host-visible, contiguous and not shared (no copy),
    /// else a staging copy written into `out` once received.
    pub(crate) fn into_existing(mut out: Tensor) -> Result<Incoming> {
        let (shape, dtype, device) = (out.shape().clone(), out.dtype(), out.device().clone());
        if out.is_contiguous() && out.buffer().host_ptr().is_some() {
            let mut held = Box::new(out);
            let direct = held
                .try_out_view()?
                .host_bytes_mut()
                .map(|bytes| bytes.as_mut_ptr() as *mut c_void);
            if let Some(ptr) = direct {
                return Ok(Incoming {
                    memory: Memory::Tensor(held),
                    ptr,
                    shape,
                    dtype,
                    device,
                    out: None,
                });
            }
            out = *held;
        }
        // Refuse a shared output before anything moves.
        out.try_out_view()?;
        let mut words = vec![0u64; byte_len(&shape, dtype)?.div_ceil(8)];
        let ptr = words.as_mut_ptr() as *mut c_void;
        Ok(Incoming {
            memory: Memory::Staged(words),
            ptr,
            shape,
            dtype,
            device,
            out: Some(out),
        })
    }

    /// The tensor, once MPI has written every element.
    pub(crate) fn into_tensor(self) -> Result<Tensor> {
        match self.memory {
            Memory::Staged(mut words) => {
                let len = byte_len(&self.shape, self.dtype)?;
                let bytes = &bytes_mut(&mut words)[..len];
                match self.out {
                    Some(mut out) => {
                        if len > 0 {
                            self.device
                                .copy_from_host(bytes, &mut out.try_out_view()?)?;
                        }
                        Ok(out)
                    }
                    None => Tensor::from_bytes(bytes, self.shape, self.dtype, &self.device),
                }
            }
            Memory::Tensor(tensor) => Ok(*tensor),
        }
    }
}

/// Bytes of a tensor of `shape` and fixed-size `dtype`.
fn byte_len(shape: &TensorShape, dtype: DataType) -> Result<usize> {
    shape
        .num_elements()
        .checked_mul(dtype.size())
        .ok_or_else(|| polytensor_core::Error::invalid(format!("{shape} of {dtype} overflows")))
}

/// Words as bytes.
fn bytes_mut(words: &mut [u64]) -> &mut [u8] {
    // SAFETY: u64 has no padding and every byte pattern is a valid u8; the slice covers
    // exactly the words' memory, borrowed mutably for as long as `words`.
    unsafe {
        std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, std::mem::size_of_val(words))
    }
}
