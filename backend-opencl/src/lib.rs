//! polytensor's OpenCL device: `cl_mem` buffers behind tensor-core's caching allocator, and
//! kernels from the shared C-family generator (`gpu-kit`), compiled by the OpenCL runtime
//! once per (op, dtype, variant). Runs on any OpenCL 1.2+ platform; CI runs it on PoCL.
//!
//! - [`platform`]: finding platforms and devices (under one process-wide lock: PoCL breaks
//!   when several threads create contexts at once), and why there are none.
//! - [`memory`]: the `cl_mem` allocator and [`ClBuffer`].
//! - `programs`: the compiled-kernel cache.
//! - `launch`: kernel arguments and enqueues.
//! - `device`: [`OpenClDevice`], the [`polytensor_core::Device`].

mod device;
mod launch;
pub mod memory;
pub mod platform;
mod programs;

/// The kind of this backend's devices (`opencl:0`, ...).
pub const KIND: polytensor_core::DeviceKind = polytensor_core::DeviceKind::new("opencl");
pub use device::{first, open, open_with, OpenClDevice, OpenClQueue, OpenOptions};
pub use memory::ClBuffer;
pub use programs::Compiled;

use std::sync::Arc;

/// Every OpenCL device of every platform opened as `opencl:0`, `opencl:1`, ..., or why
/// there is none (no OpenCL loader, no platform, or every device refused to open).
pub fn open_all() -> std::result::Result<Vec<Arc<dyn polytensor_core::Device>>, String> {
    let found = platform::devices()?;
    if found.is_empty() {
        return Err("no OpenCL device found".into());
    }
    let (mut opened, mut refused) = (Vec::new(), Vec::new());
    for (index, device) in found.into_iter().enumerate() {
        match open(index, device) {
            Ok(device) => opened.push(device as Arc<dyn polytensor_core::Device>),
            Err(e) => refused.push(e.to_string()),
        }
    }
    if opened.is_empty() {
        return Err(refused.join("; "));
    }
    Ok(opened)
}
