//! polytensor's wgpu device: adapters, storage buffers and WGSL compute
//! kernels on any Vulkan, Metal, DX12 or GL GPU.

pub mod adapters;
mod device;
mod kernels;
pub mod memory;
mod ops;

pub use device::{WgpuBuffer, WgpuDevice, DEFAULT_CACHE_BYTES};

use std::sync::Arc;

/// Every adapter of [`adapters::adapters`] opened as `wgpu:0`, `wgpu:1`, ..., or why there
/// is none (no driver, or every adapter refused to open).
pub fn open_all() -> std::result::Result<Vec<Arc<dyn tensor_core::Device>>, String> {
    let count = adapters::adapters().len();
    if count == 0 {
        return Err(adapters::absence_reason());
    }
    let (mut opened, mut refused) = (Vec::new(), Vec::new());
    for index in 0..count {
        match WgpuDevice::open(index) {
            Ok(device) => opened.push(device as Arc<dyn tensor_core::Device>),
            Err(e) => refused.push(e.to_string()),
        }
    }
    if opened.is_empty() {
        return Err(refused.join("; "));
    }
    Ok(opened)
}
