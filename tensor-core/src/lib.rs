//! polytensor's core: everything about tensors that does not depend on a device.
//!
//! - [`DataType`] (TensorFlow's dtypes and numbers) and [`Element`] (the Rust types of them);
//! - [`TensorShape`], [`PartialTensorShape`], [`TensorSlice`] with TensorFlow's rules and
//!   string forms;
//! - [`Layout`]: shape, strides and offset of strided views;
//! - [`Allocator`], [`AllocatorStats`] and the 64-byte aligned [`HostAllocator`];
//! - [`TensorBuffer`] and [`Device`]: the traits every backend implements;
//! - [`Tensor`]: a dtype, a layout and a refcounted buffer, with views and ops;
//! - [`dlpack`]: DLPack 1.x export and import, zero-copy;
//! - [`ops`]: op descriptors and broadcasting; [`Error`]: the one error type.
//!
//! Backends (`polytensor-cpu`, ...) implement [`Device`]; the `polytensor` facade finds them.

// First, so that rustdoc lists `Tensor`'s constructors before the methods other modules
// add (DLPack, protos).
pub mod tensor;

pub mod alloc;
pub mod buffer;
pub mod checkpoint;
pub mod collective;
#[cfg(feature = "serde")]
pub mod data;
pub mod device;
pub mod dlpack;
pub mod dtype;
pub mod element;
pub mod error;
pub mod float8;
pub mod layout;
#[cfg(feature = "npy")]
pub mod npy;
pub mod ops;
pub mod partial_shape;
pub mod plan;
pub mod proto;
pub mod random;
#[cfg(feature = "safetensors")]
pub mod safetensors;
pub mod shape;
pub mod slice;
pub mod sparse;
pub mod stats;
pub mod train;

pub use alloc::{
    Allocator, AllocatorInfo, AllocatorStats, CachingAllocator, HostAllocator, HostBlock,
    HostMemory, StatsTracker, ALLOCATOR_ALIGNMENT,
};
pub use buffer::{
    BytesBuffer, EmbeddedBuffer, ForeignBuffer, HostBuffer, InlineBuffer, SharedHostAllocator,
    StringBuffer, TensorBuffer, EMBEDDED_BUFFER_BYTES, INLINE_BUFFER_BYTES,
};
pub use device::{Device, DeviceHandle, DeviceKind, Epilogue, OutView, TensorView};
pub use dtype::{DTypeClass, DTypeError, DTypeSet, DataType};
pub use element::{Element, Scalar};
pub use error::{Error, Result};
pub use layout::Layout;
pub use ops::{BinaryOp, Op, ReduceOp, UnaryOp};
pub use partial_shape::PartialTensorShape;
pub use plan::strided_slice::StridedSliceSpec;
pub use plan::window::{DataFormat, Padding};
pub use plan::StridedRows;
pub use shape::{IntoShape, TensorShape};
pub use slice::{Extent, TensorSlice};
pub use sparse::SparseTensor;
pub use tensor::{
    same_device, BatchNormGradients, BatchNormStatistics, Conv2dOptions, ConvEpilogue, HostView,
    MirrorMode, PackedFilter, Pool2dOptions, ResizeOptions, Tensor,
};

#[doc(hidden)]
pub use half;
#[doc(hidden)]
pub use num_complex;
