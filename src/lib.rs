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
//! The crate root holds what a program needs: the devices ([`device()`], [`devices`],
//! [`best_device`], [`default_device`]), [`Tensor`], [`DataType`], shapes and slices,
//! [`Error`], the graph layer ([`graph`]), [`dlpack`], [`proto`] and TensorFlow's
//! checkpoints ([`checkpoint`]). What backends and
//! memory-level code need (allocators, buffers, layouts, kernel views, launch plans) lives
//! in the modules re-exported from `polytensor-core` ([`alloc`], [`buffer`],
//! [`device`](mod@device), [`layout`], [`plan`], ...).
//!
//! The crates: `polytensor-core` (everything device-independent, re-exported here),
//! `polytensor-cpu` (feature `cpu`), `polytensor-wgpu`, `polytensor-opencl` and
//! `polytensor-cuda` (features `wgpu`, `opencl`, `cuda`), and `polytensor-graph`.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod dlpack;
mod registry;

/// TensorFlow's graph layer: `Graph`, `Operation`, symbolic `Output`s, `Session`, and
/// `GraphDef` on the wire (the `polytensor-graph` crate).
pub mod graph {
    #[doc(inline)]
    pub use polytensor_graph::*;
}

/// A session over `graph` on every device present ([`devices`]), the default (`cpu:0`,
/// where compiled in) first, with soft placement: TensorFlow's `Session(graph=g)`, which
/// opens over every device it finds. Each operation runs where its `device` field asks
/// (`/device:GPU:0` is the first device that is not a CPU; see `graph::placer`).
///
/// ```
/// let mut g = polytensor::graph::Graph::new();
/// let a = g.constant(3.0f32)?;
/// let total = g.device_scope("/device:GPU:0", |g| g.add(&a, &a))?;
/// let session = polytensor::session(&g)?;
/// assert_eq!(session.run(&[], &[&total], &[])?[0].item::<f32>()?, 6.0);
/// # Ok::<(), polytensor::Error>(())
/// ```
pub fn session(graph: &graph::Graph) -> Result<graph::Session> {
    let present = devices()
        .iter()
        .filter_map(|entry| entry.device().cloned())
        .collect();
    graph::Session::with_options(graph, graph::SessionOptions::new(present))
}

/// TensorFlow's SavedModels (`tf.saved_model.save`, Keras `model.export`): load one onto
/// the devices present and run its signatures by key.
///
/// ```no_run
/// let model = polytensor::saved_model::load("/tmp/exported", &["serve"])?;
/// let cpu = polytensor::device("cpu:0")?;
/// let x = polytensor::Tensor::zeros([1, 16], polytensor::DataType::Float, &cpu)?;
/// let outputs = model.run("serving_default", &[("x", &x)])?;
/// println!("{}", outputs["output_0"]);
/// # Ok::<(), polytensor::Error>(())
/// ```
pub mod saved_model {
    #[doc(inline)]
    pub use polytensor_graph::saved_model::*;

    /// Load the SavedModel in `dir` tagged `tags` into a session over every device present
    /// (the default, `cpu:0` where compiled in, first; see [`crate::session`]).
    pub fn load(dir: impl AsRef<std::path::Path>, tags: &[&str]) -> crate::Result<SavedModel> {
        let present = crate::devices()
            .iter()
            .filter_map(|entry| entry.device().cloned())
            .collect();
        SavedModel::load(dir, tags, crate::graph::SessionOptions::new(present))
    }
}

pub use polytensor_core::{
    same_device, BinaryOp, Conv2dOptions, ConvEpilogue, DataFormat, DataType, Device, DeviceKind,
    Element, Error, HostView, IntoShape, MirrorMode, Op, PackedFilter, Padding, PartialTensorShape,
    Pool2dOptions, ReduceOp, ResizeOptions, Result, Scalar, SparseTensor, StridedSliceSpec, Tensor,
    TensorShape, TensorSlice, UnaryOp,
};
pub use registry::{
    best_device, default_device, device, devices, DeviceByName, DeviceEntry, DeviceStatus,
};

// The modules of `polytensor-core`, for what the root leaves out. (`dlpack` is the facade's
// own module: the core's plus the registry.)
pub use polytensor_core::{
    alloc, buffer, checkpoint, device, dtype, element, error, float8, layout, ops, partial_shape,
    plan, proto, random, shape, slice, sparse, stats, tensor, train,
};

/// The `half` crate, whose `f16` and `bf16` are the element types of `float16` and
/// `bfloat16` tensors.
pub use polytensor_core::half;

/// `serde` for tensors (feature `serde`): `Tensor` serializes as a [`data::TensorData`],
/// which deserializes and is placed on a device with `to_tensor`.
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub use polytensor_core::data;

/// Tensors to and from NumPy's `.npy` and `.npz` files (feature `npy`).
#[cfg(feature = "npy")]
#[cfg_attr(docsrs, doc(cfg(feature = "npy")))]
pub use polytensor_core::npy;

/// Tensors to and from `.safetensors` files (feature `safetensors`).
#[cfg(feature = "safetensors")]
#[cfg_attr(docsrs, doc(cfg(feature = "safetensors")))]
pub use polytensor_core::safetensors;

/// The CPU backend (feature `cpu`).
#[cfg(feature = "cpu")]
#[cfg_attr(docsrs, doc(cfg(feature = "cpu")))]
pub use polytensor_cpu::CpuDevice;

/// The wgpu backend (feature `wgpu`).
#[cfg(feature = "wgpu")]
#[cfg_attr(docsrs, doc(cfg(feature = "wgpu")))]
pub use polytensor_wgpu::WgpuDevice;

/// The CUDA backend (feature `cuda`).
#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub use polytensor_cuda::CudaDevice;

/// The OpenCL backend (feature `opencl`).
#[cfg(feature = "opencl")]
#[cfg_attr(docsrs, doc(cfg(feature = "opencl")))]
pub use polytensor_opencl::OpenClDevice;

/// Collectives across processes and nodes on MPI (feature `mpi`): `Mpi::init`, the
/// world `Communicator`, all-reduce, reduce-scatter, broadcast, all-gather, all-to-all and
/// send/recv on tensors of any device (the `polytensor-distributed` crate).
#[cfg(feature = "mpi")]
#[cfg_attr(docsrs, doc(cfg(feature = "mpi")))]
pub mod distributed {
    #[doc(inline)]
    pub use polytensor_distributed::*;
}

/// The names most programs need: `use polytensor::prelude::*;`.
pub mod prelude {
    pub use crate::registry::{best_device, default_device, device, devices, DeviceByName};
    pub use polytensor_core::{
        BinaryOp, DataType, Device, Element, Error, PartialTensorShape, ReduceOp, Result, Scalar,
        Tensor, TensorShape, TensorSlice, UnaryOp,
    };
}
