//! polytensor's CPU backend: the host CPU as a [`polytensor_core::Device`].
//!
//! Every kernel of the device surface (unary, binary with broadcasting, comparisons,
//! logical ops, `where`, casts, batched matmul, reductions, fill, arange, strided copies)
//! for every dtype it is defined for, on any layout: strided, transposed, broadcast
//! (stride 0), offset. Correctness first: loops are generic over the element type, with a
//! contiguous fast path per row.

mod device;
mod kernels;
mod scalar;
mod streaming;
mod strided;
mod vmath;

pub use device::{CpuDevice, DEFAULT_CACHE_BYTES};
