//! polytensor's wgpu device: adapters, storage buffers and WGSL compute
//! kernels on any Vulkan, Metal, DX12 or GL GPU.
//!
//! - [`adapters`]: finding adapters, in a stable order, and why there are none.
//! - [`memory`]: the storage-buffer allocator and host copies.
//! - `buffer`: [`WgpuBuffer`], a tensor's buffer, and the wgpu buffer behind a view.
//! - `device`: [`WgpuDevice`], the [`polytensor_core::Device`], its capabilities and errors.
//! - `launch`: bind groups, dispatches, the elementwise launch, packed outputs.
//! - `table`: which WGSL expression runs each elementwise (op, dtype).
//! - `ops`: the matmul and reduction launches; `kernels`: the WGSL templates.
//! - `quiet`: `NODEVICE_SELECT=1` before `main`, so Mesa's device-select layer stays quiet.

pub mod adapters;
mod buffer;
mod device;
mod kernels;
mod launch;
pub mod memory;
mod ops;
mod quiet;
mod table;

/// The kind of this backend's devices (`wgpu:0`, ...).
pub const KIND: polytensor_core::DeviceKind = polytensor_core::DeviceKind::new("wgpu");
pub use buffer::WgpuBuffer;
pub use device::{WgpuDevice, DEFAULT_CACHE_BYTES};

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
        match WgpuDevice::open(index) {
            Ok(device) => opened.push(device as Arc<dyn polytensor_core::Device>),
            Err(e) => refused.push(e.to_string()),
        }
    }
    if opened.is_empty() {
        return Err(refused.join("; "));
    }
    Ok(opened)
}
