//! polytensor's wgpu device: adapters, storage buffers and the kit's kernels as WGSL
//! compute shaders, on any Vulkan, Metal, DX12 or GL GPU.
//!
//! A [`WgpuDevice`] is the kit's `KitDevice` over a [`WgpuQueue`], as the OpenCL and CUDA
//! devices are over theirs: every op runs the kit's kernels through the kit's launches.
//! What is wgpu's own:
//! - [`adapters`]: finding adapters, in a stable order, and why there are none.
//! - [`memory`]: storage buffers as the kit's blocks, and host copies.
//! - `queue`: [`WgpuQueue`], the kit's `Queue`: bind groups and dispatches, fills, copies,
//!   the driver's asynchronous errors.
//! - `programs`: the kit's programs compiled kernel by kernel into pipelines.
//! - `device`: [`open`], and the rule of what a device runs (its shader features).
//! - `quiet`: `NODEVICE_SELECT=1` before `main`, so Mesa's device-select layer stays quiet.

pub mod adapters;
mod device;
pub mod memory;
mod programs;
mod queue;
mod quiet;
mod semantics;

/// The kind of this backend's devices (`wgpu:0`, ...).
pub const KIND: polytensor_core::DeviceKind = polytensor_core::DeviceKind::new("wgpu");
pub use device::{open, WgpuDevice, DEFAULT_CACHE_BYTES};
pub use memory::WgpuBuffer;
pub use queue::{wgpu_buffer, WgpuMem, WgpuQueue};

use std::sync::Arc;

/// Every adapter of [`adapters::adapters`] opened as `wgpu:0`, `wgpu:1`, ..., or why there
/// is none (no driver, or every adapter refused to open).
pub fn open_all() -> std::result::Result<Vec<Arc<dyn polytensor_core::Device>>, String> {
    let count = adapters::adapters().len();
    if count == 0 {
        return Err(adapters::absence_reason());
    }
    let (mut opened, mut refused) = (Vec::new(), Vec::new());
    for index in 0..count {
        match open(index) {
            Ok(device) => opened.push(device as Arc<dyn polytensor_core::Device>),
            Err(e) => refused.push(e.to_string()),
        }
    }
    if opened.is_empty() {
        return Err(refused.join("; "));
    }
    Ok(opened)
}
