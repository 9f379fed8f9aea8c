//! polytensor's wgpu device (work in progress): adapters, storage buffers and WGSL compute
//! kernels on any Vulkan, Metal, DX12 or GL GPU.

pub mod adapters;
mod device;
mod kernels;
pub mod memory;

pub use device::{WgpuBuffer, WgpuDevice, DEFAULT_CACHE_BYTES};
