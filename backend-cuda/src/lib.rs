//! polytensor's CUDA device, on `cudarc` with every CUDA library loaded at run time: it
//! builds on any machine, and on one without CUDA [`open_all`] says why instead of
//! panicking.
//!
//! - [`loader`]: finding libcuda, NVRTC, cuBLAS and cuDNN (checked before any call: cudarc panics
//!   on a missing library), and a toolkit named by `POLYTENSOR_CUDA_TOOLKIT`.
//! - [`compile`]: NVRTC, with an on-disk PTX cache.
//! - [`programs`]: the kernels this backend launches (the shared table of `gpu-kit` in
//!   the CUDA dialect) and the PTX check CI runs without a GPU.
//! - [`memory`]: `cuMemAlloc` blocks behind tensor-core's caching allocator, and
//!   [`CudaBuffer`]; `staging`: pinned staging of large host copies.
//! - `blas`: cuBLAS matmul; `dnn`: cuDNN convolutions (the kit's window kernels where
//!   cuDNN is missing or does not take one); `device`: [`CudaDevice`], the
//!   [`polytensor_core::Device`].

mod blas;
pub mod compile;
mod device;
mod dnn;
pub mod loader;
pub mod memory;
pub mod programs;
mod staging;

/// The kind of this backend's devices (`cuda:0`, ...).
pub const KIND: polytensor_core::DeviceKind = polytensor_core::DeviceKind::new("cuda");
pub use device::{first, open, CudaDevice, CudaQueue, Module, DEFAULT_CACHE_BYTES};
pub use memory::{AdoptedBuffer, CudaBuffer};

use std::sync::Arc;

/// Every CUDA GPU opened as `cuda:0`, `cuda:1`, ..., or why there is none: no driver
/// (`libcuda.so`), the driver's own error (`CUDA_ERROR_NO_DEVICE` with a driver and no
/// GPU), no NVRTC, or every GPU refused to open.
pub fn open_all() -> std::result::Result<Vec<Arc<dyn polytensor_core::Device>>, String> {
    loader::preload_toolkit()?;
    let count = loader::device_count()?;
    let (mut opened, mut refused) = (Vec::new(), Vec::new());
    for ordinal in 0..count {
        match open(ordinal) {
            Ok(device) => opened.push(device as Arc<dyn polytensor_core::Device>),
            Err(e) => refused.push(e.to_string()),
        }
    }
    if opened.is_empty() {
        return Err(refused.join("; "));
    }
    Ok(opened)
}
