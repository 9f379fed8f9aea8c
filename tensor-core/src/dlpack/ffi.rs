//! The C structs of DLPack 1.x (`dlpack.h`), as `#[repr(C)]` Rust types with the same names,
//! fields and layout. Enumerations that foreign code fills in are plain integers with named
//! constants (a Rust `enum` holding a value the producer made up would be undefined
//! behaviour), and every struct's size and field offsets are asserted against `dlpack.h`
//! at compile time.

use std::ffi::c_void;
use std::mem::{offset_of, size_of};

/// The DLPack major version this crate reads and writes: a tensor with another major
/// version has another layout; only its deleter may be touched.
pub const DLPACK_MAJOR_VERSION: u32 = 1;
/// The DLPack minor version of the header these types follow.
pub const DLPACK_MINOR_VERSION: u32 = 1;

/// The tensor is read only: the consumer must not write to it.
pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1 << 0;
/// The tensor is a copy made by the producer, owned by the consumer alone until the deleter
/// runs.
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;
/// A sub-byte type (4, 2 bits, ...) is padded to one element per byte, not packed.
pub const DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED: u64 = 1 << 2;

/// The DLPack version of a [`DLManagedTensorVersioned`].
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DLPackVersion {
    /// The major version: a change of layout.
    pub major: u32,
    /// The minor version: new codes, same layout.
    pub minor: u32,
}

/// cbindgen:ignore
impl DLPackVersion {
    /// The version these types implement.
    pub const CURRENT: DLPackVersion = DLPackVersion {
        major: DLPACK_MAJOR_VERSION,
        minor: DLPACK_MINOR_VERSION,
    };
}

/// The device type code of a [`DLDevice`] (`DLDeviceType` in C, an `int32_t`).
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DLDeviceType(pub i32);

impl DLDeviceType {
    /// Host memory.
    pub const CPU: Self = Self(1);
    /// CUDA device memory.
    pub const CUDA: Self = Self(2);
    /// Pinned host memory from `cudaMallocHost`.
    pub const CUDA_HOST: Self = Self(3);
    /// An OpenCL buffer (`data` is the `cl_mem`).
    pub const OPENCL: Self = Self(4);
    /// A Vulkan buffer.
    pub const VULKAN: Self = Self(7);
    /// A Metal buffer.
    pub const METAL: Self = Self(8);
    /// A Verilog simulator buffer.
    pub const VPI: Self = Self(9);
    /// ROCm device memory.
    pub const ROCM: Self = Self(10);
    /// Pinned host memory from `hipMallocHost`.
    pub const ROCM_HOST: Self = Self(11);
    /// The reserved extension device.
    pub const EXT_DEV: Self = Self(12);
    /// CUDA managed (unified) memory.
    pub const CUDA_MANAGED: Self = Self(13);
    /// oneAPI unified shared memory.
    pub const ONE_API: Self = Self(14);
    /// A WebGPU buffer.
    pub const WEBGPU: Self = Self(15);
    /// Qualcomm Hexagon DSP memory.
    pub const HEXAGON: Self = Self(16);
    /// Microsoft MAIA device memory.
    pub const MAIA: Self = Self(17);
    /// AWS Trainium device memory.
    pub const TRN: Self = Self(18);

    /// The name `dlpack.h` gives the code (`kDLCPU`), or `None` for a code it does not have.
    pub const fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            1 => "kDLCPU",
            2 => "kDLCUDA",
            3 => "kDLCUDAHost",
            4 => "kDLOpenCL",
            7 => "kDLVulkan",
            8 => "kDLMetal",
            9 => "kDLVPI",
            10 => "kDLROCM",
            11 => "kDLROCMHost",
            12 => "kDLExtDev",
            13 => "kDLCUDAManaged",
            14 => "kDLOneAPI",
            15 => "kDLWebGPU",
            16 => "kDLHexagon",
            17 => "kDLMAIA",
            18 => "kDLTrn",
            _ => return None,
        })
    }
}

impl std::fmt::Display for DLDeviceType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "unknown device type {}", self.0),
        }
    }
}

/// A device: its type and its index among the devices of that type.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DLDevice {
    /// The device type.
    pub device_type: DLDeviceType,
    /// The index; 0 for host, pinned and managed memory.
    pub device_id: i32,
}

/// cbindgen:ignore
impl DLDevice {
    /// Host memory (`kDLCPU`, index 0).
    pub const CPU: DLDevice = DLDevice {
        device_type: DLDeviceType::CPU,
        device_id: 0,
    };

    /// Device `device_id` of type `device_type`.
    pub const fn new(device_type: DLDeviceType, device_id: i32) -> Self {
        Self {
            device_type,
            device_id,
        }
    }

    /// Whether the host can read and write the memory directly: host, pinned (CUDA, ROCm)
    /// and managed memory.
    pub const fn is_host_accessible(self) -> bool {
        matches!(self.device_type.0, 1 | 3 | 11 | 13)
    }
}

impl std::fmt::Display for DLDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.device_type, self.device_id)
    }
}

/// The type codes of [`DLDataType::code`] (`DLDataTypeCode` in C).
pub mod code {
    /// Signed integer.
    pub const INT: u8 = 0;
    /// Unsigned integer.
    pub const UINT: u8 = 1;
    /// IEEE floating point.
    pub const FLOAT: u8 = 2;
    /// An opaque handle (testing only).
    pub const OPAQUE_HANDLE: u8 = 3;
    /// bfloat16.
    pub const BFLOAT: u8 = 4;
    /// Complex: two floats of half the bits each.
    pub const COMPLEX: u8 = 5;
    /// Boolean, one byte (0 or 1) per element.
    pub const BOOL: u8 = 6;
    /// float8 e3m4.
    pub const FLOAT8_E3M4: u8 = 7;
    /// float8 e4m3.
    pub const FLOAT8_E4M3: u8 = 8;
    /// float8 e4m3b11fnuz.
    pub const FLOAT8_E4M3B11FNUZ: u8 = 9;
    /// float8 e4m3fn.
    pub const FLOAT8_E4M3FN: u8 = 10;
    /// float8 e4m3fnuz.
    pub const FLOAT8_E4M3FNUZ: u8 = 11;
    /// float8 e5m2.
    pub const FLOAT8_E5M2: u8 = 12;
    /// float8 e5m2fnuz.
    pub const FLOAT8_E5M2FNUZ: u8 = 13;
    /// float8 e8m0fnu.
    pub const FLOAT8_E8M0FNU: u8 = 14;
    /// float6 e2m3fn.
    pub const FLOAT6_E2M3FN: u8 = 15;
    /// float6 e3m2fn.
    pub const FLOAT6_E3M2FN: u8 = 16;
    /// float4 e2m1fn.
    pub const FLOAT4_E2M1FN: u8 = 17;
}

/// An element type: a [`code`], a bit width and a lane count (1 for scalars).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DLDataType {
    /// One of the [`code`] constants.
    pub code: u8,
    /// Bits per lane.
    pub bits: u8,
    /// Lanes per element (vector types); polytensor uses 1.
    pub lanes: u16,
}

impl DLDataType {
    /// A scalar type (one lane).
    pub const fn scalar(code: u8, bits: u8) -> Self {
        Self {
            code,
            bits,
            lanes: 1,
        }
    }
}

/// A tensor's memory, device, dtype, shape and strides; it owns nothing.
#[repr(C)]
#[derive(Debug)]
pub struct DLTensor {
    /// The memory: a host or device pointer, or a `cl_mem` handle for OpenCL.
    pub data: *mut c_void,
    /// Where the memory is.
    pub device: DLDevice,
    /// The rank.
    pub ndim: i32,
    /// The element type.
    pub dtype: DLDataType,
    /// `ndim` dims.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or NULL for a compact row-major tensor.
    pub strides: *mut i64,
    /// Bytes from `data` to the first element.
    pub byte_offset: u64,
}

/// The legacy (unversioned) managed tensor: a [`DLTensor`] with its owner's context and
/// the deleter that frees both.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    /// The tensor.
    pub dl_tensor: DLTensor,
    /// The producer's context (may be NULL).
    pub manager_ctx: *mut c_void,
    /// Frees the tensor and this struct; called once by the consumer. May be NULL.
    pub deleter: Option<unsafe extern "C" fn(self_: *mut DLManagedTensor)>,
}

/// The versioned managed tensor of DLPack 1.x: version, context, deleter, flags, tensor.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// The version; a major version other than 1 means only `deleter` may be used.
    pub version: DLPackVersion,
    /// The producer's context (may be NULL).
    pub manager_ctx: *mut c_void,
    /// Frees the tensor and this struct; called once by the consumer. May be NULL.
    pub deleter: Option<unsafe extern "C" fn(self_: *mut DLManagedTensorVersioned)>,
    /// `DLPACK_FLAG_BITMASK_*` bits.
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

// The layout of `dlpack.h` on every 64-bit target.
#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(size_of::<DLPackVersion>() == 8);
    assert!(size_of::<DLDevice>() == 8);
    assert!(size_of::<DLDataType>() == 4);
    assert!(size_of::<DLTensor>() == 48);
    assert!(offset_of!(DLTensor, device) == 8);
    assert!(offset_of!(DLTensor, ndim) == 16);
    assert!(offset_of!(DLTensor, dtype) == 20);
    assert!(offset_of!(DLTensor, shape) == 24);
    assert!(offset_of!(DLTensor, strides) == 32);
    assert!(offset_of!(DLTensor, byte_offset) == 40);
    assert!(size_of::<DLManagedTensor>() == 64);
    assert!(offset_of!(DLManagedTensor, manager_ctx) == 48);
    assert!(offset_of!(DLManagedTensor, deleter) == 56);
    assert!(size_of::<DLManagedTensorVersioned>() == 80);
    assert!(offset_of!(DLManagedTensorVersioned, manager_ctx) == 8);
    assert!(offset_of!(DLManagedTensorVersioned, deleter) == 16);
    assert!(offset_of!(DLManagedTensorVersioned, flags) == 24);
    assert!(offset_of!(DLManagedTensorVersioned, dl_tensor) == 32);
};
