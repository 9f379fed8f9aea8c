//! DLPack 1.x: tensors shared with NumPy, PyTorch, TensorFlow, JAX, CuPy and C without a
//! copy.
//!
//! - [`ffi`]: the C structs of `dlpack.h` (`DLTensor`, `DLManagedTensorVersioned`, ...);
//! - [`DlpackTensor`]: an owning handle on a managed tensor, whose drop calls the deleter;
//! - export: [`Tensor::to_dlpack_versioned`] and the legacy [`Tensor::to_dlpack`];
//! - import: [`Tensor::import_dlpack`] and the raw-pointer
//!   [`Tensor::from_dlpack_versioned`] and [`Tensor::from_dlpack`].
//!
//! Ownership across the boundary: an exported tensor holds a clone of the polytensor tensor
//! (so its buffer) until the consumer calls the deleter, once, from any thread;
//! [`live_exports`] counts those not yet deleted. An imported tensor views the producer's
//! memory through a [`ForeignBuffer`](crate::buffer::ForeignBuffer) whose drop (when the
//! last view goes) calls the producer's deleter, once; when an import is refused, the
//! deleter runs before the `Err` returns.
//!
//! [`Tensor::to_dlpack_versioned`]: crate::Tensor::to_dlpack_versioned
//! [`Tensor::to_dlpack`]: crate::Tensor::to_dlpack
//! [`Tensor::import_dlpack`]: crate::Tensor::import_dlpack
//! [`Tensor::from_dlpack_versioned`]: crate::Tensor::from_dlpack_versioned
//! [`Tensor::from_dlpack`]: crate::Tensor::from_dlpack
//!
//! ```
//! # use polytensor_core::{Device, Tensor};
//! # let cpu: std::sync::Arc<dyn Device> = polytensor_cpu::CpuDevice::shared();
//! # let cpu = &cpu;
//! let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3], cpu)?;
//! let exported = a.transpose(0, 1)?.to_dlpack_versioned()?;
//! assert_eq!(exported.shape(), Some(&[3i64, 2][..]));
//! assert_eq!(exported.strides(), Some(&[1i64, 3][..]));
//! let back = Tensor::import_dlpack(exported, cpu)?; // the same memory
//! assert_eq!(back.to_vec::<f32>()?, vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
//! # Ok::<(), polytensor_core::Error>(())
//! ```

mod dtype;
mod export;
pub mod ffi;
mod import;
mod managed;

pub use export::live_exports;
pub use ffi::{
    DLDataType, DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion,
    DLTensor, DLPACK_FLAG_BITMASK_IS_COPIED, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
    DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION,
};
pub use managed::{DlpackLegacy, DlpackTensor, DlpackVersioned, ManagedTensor};

#[cfg(test)]
mod tests {
    use std::mem::{offset_of, size_of};

    use super::*;

    /// The sizes and offsets of `dlpack.h` (also asserted at compile time in `ffi`).
    #[test]
    fn layout_matches_dlpack_h() {
        assert_eq!(size_of::<DLTensor>(), 48);
        assert_eq!(size_of::<DLManagedTensor>(), 64);
        assert_eq!(offset_of!(DLManagedTensor, deleter), 56);
        assert_eq!(size_of::<DLManagedTensorVersioned>(), 80);
        assert_eq!(offset_of!(DLManagedTensorVersioned, dl_tensor), 32);
        assert_eq!(offset_of!(DLManagedTensorVersioned, flags), 24);
        assert_eq!(size_of::<DLDataType>(), 4);
        assert_eq!(size_of::<DLDevice>(), 8);
        assert_eq!(
            (
                DLDeviceType::CPU.0,
                DLDeviceType::CUDA.0,
                DLDeviceType::CUDA_HOST.0
            ),
            (1, 2, 3)
        );
        assert_eq!(
            (
                DLDeviceType::OPENCL.0,
                DLDeviceType::VULKAN.0,
                DLDeviceType::WEBGPU.0
            ),
            (4, 7, 15)
        );
        assert_eq!(
            (
                DLPACK_FLAG_BITMASK_READ_ONLY,
                DLPACK_FLAG_BITMASK_IS_COPIED,
                DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED
            ),
            (1, 2, 4)
        );
    }
}
