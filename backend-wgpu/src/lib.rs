//! polytensor's wgpu device (work in progress): adapters, storage buffers and WGSL compute
//! kernels on any Vulkan, Metal, DX12 or GL GPU.

pub mod adapters;
pub mod memory;
