//! TensorFlow's `TensorProto`, `TensorShapeProto` and `TensorSliceProto`, byte-compatible
//! with TensorFlow: the same values encode to the bytes `tf.make_tensor_proto` writes, and
//! any proto TensorFlow's C++ decoder reads decodes to the same dtype, shape and elements.
//!
//! - Messages: [`TensorProto`], [`TensorShapeProto`], [`TensorSliceProto`] (prost derives on
//!   hand-written structs with TensorFlow's field numbers; no protoc). The dtype travels as
//!   its enum number, [`DataType::as_i32`](crate::DataType::as_i32).
//! - Encoding: [`make_tensor_proto`], [`Tensor::to_proto`](crate::Tensor::to_proto), [`Tensor::as_proto_field`](crate::Tensor::as_proto_field),
//!   [`Tensor::as_proto_tensor_content`](crate::Tensor::as_proto_tensor_content), [`Tensor::encode_proto`](crate::Tensor::encode_proto).
//! - Decoding: [`Tensor::from_proto`](crate::Tensor::from_proto), [`Tensor::decode_proto`](crate::Tensor::decode_proto) (zero-copy from `Bytes`),
//!   with [`DecodeOptions`] for untrusted input.
//! - Shapes and slices: `to_proto`/`from_proto` on [`TensorShape`](crate::TensorShape),
//!   [`PartialTensorShape`](crate::PartialTensorShape) and [`TensorSlice`](crate::TensorSlice).
//!
//! Elements are little-endian on the wire, as on every platform polytensor builds for.
//!
//! ```
//! # use polytensor_core::Tensor;
//! # let device = polytensor_cpu::CpuDevice::shared();
//! let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0], [3], &device)?;
//! let bytes = t.encode_proto()?;
//! let back = Tensor::decode_proto(bytes, &device)?;
//! assert_eq!(back.to_vec::<f32>()?, [1.0, 2.0, 3.0]);
//! # Ok::<(), polytensor_core::Error>(())
//! ```

mod decode;
mod encode;
mod fields;
mod messages;
mod shape;
mod strings;

pub use decode::{DecodeOptions, ProtoElements, DEFAULT_MAX_DECODED_BYTES};
pub use encode::{make_tensor_proto, make_tensor_proto_from_bytes, uses_tensor_content};
pub use messages::{
    DimProto, ExtentProto, TensorProto, TensorShapeProto, TensorSliceProto, VersionDef,
};
pub use prost::Message;
