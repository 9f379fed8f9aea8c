//! # polytensor
//!
//! Tensors on whatever device a machine has: TensorFlow's tensor core (dtypes, shapes,
//! slices, refcounted buffers, allocators, `TensorProto`) in Rust, with pluggable device
//! backends behind cargo features: `cpu` (default), `cuda` (NVIDIA GPUs; loads the driver,
//! NVRTC and cuBLAS at run time), `opencl` (any OpenCL 1.2+ platform) and `wgpu` (any
//! Vulkan, Metal or DX12 GPU).
//!
//! ```
//! use polytensor::prelude::*;
//!
//! let cpu = polytensor::device("cpu:0")?;
//! let a = Tensor::scalar(3.0f32, &cpu)?;
//! let b = Tensor::scalar(4.0f32, &cpu)?;
//! let total = (&a + &b)?;
//! assert_eq!(total.item::<f32>()?, 7.0);
//! assert_eq!(total.to_string(), "tf.Tensor(7.0, shape=(), dtype=float32)");
//! # Ok::<(), polytensor::Error>(())
//! ```
//!
//! The crates: `tensor-core` (everything device-independent, re-exported here),
//! `backend-cpu` (feature `cpu`), and one crate per further backend.

pub mod dlpack;
mod registry;

/// TensorFlow's graph layer: `Graph`, `Operation`, symbolic `Output`s, `Session`, and
/// `GraphDef` on the wire (the `graph` crate).
pub use graph;

pub use registry::{
    best_device, default_device, device, devices, DeviceByName, DeviceEntry, DeviceStatus,
};
// The glob leaves out `dlpack`: the facade's own module (the core's plus the registry)
// stands in its place.
pub use tensor_core::*;

/// The CPU backend (feature `cpu`).
#[cfg(feature = "cpu")]
pub use backend_cpu::CpuDevice;

/// The wgpu backend (feature `wgpu`).
#[cfg(feature = "wgpu")]
pub use backend_wgpu::WgpuDevice;

/// The CUDA backend (feature `cuda`).
#[cfg(feature = "cuda")]
pub use backend_cuda::CudaDevice;

/// The OpenCL backend (feature `opencl`).
#[cfg(feature = "opencl")]
pub use backend_opencl::OpenClDevice;

/// The names most programs need: `use polytensor::prelude::*;`.
pub mod prelude {
    pub use crate::registry::{best_device, default_device, device, devices, DeviceByName};
    pub use tensor_core::{
        BinaryOp, DataType, Device, Element, Error, PartialTensorShape, ReduceOp, Result, Scalar,
        Tensor, TensorShape, TensorSlice, UnaryOp,
    };
}
