//! The message structs, with TensorFlow's field numbers (`tensor.proto`, `tensor_shape.proto`,
//! `tensor_slice.proto`, `versions.proto`), derived by `prost` without protoc.

use bytes::Bytes;

/// TensorFlow's `TensorProto`: one tensor's dtype, shape and values.
///
/// Exactly one way of carrying values is used by TensorFlow's encoders: `tensor_content`
/// (raw little-endian element bytes) or the typed repeated field of the dtype. Fields this
/// crate does not model (`resource_handle_val` = 14, `variant_val` = 15) are skipped when
/// decoding, as unknown fields are.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorProto {
    /// The `DataType` wire value (`DataType::as_i32`).
    #[prost(int32, tag = "1")]
    pub dtype: i32,
    /// The shape; absent means a scalar.
    #[prost(message, optional, tag = "2")]
    pub tensor_shape: Option<TensorShapeProto>,
    /// A version for the representation of the values (ignored, as TensorFlow does).
    #[prost(int32, tag = "3")]
    pub version_number: i32,
    /// The element bytes, little-endian, row-major. When non-empty it wins over every
    /// typed field. Decoding from a `Bytes` input shares the input's memory.
    #[prost(bytes = "bytes", tag = "4")]
    pub tensor_content: Bytes,
    /// float32 values.
    #[prost(float, repeated, tag = "5")]
    pub float_val: Vec<f32>,
    /// float64 values.
    #[prost(double, repeated, tag = "6")]
    pub double_val: Vec<f64>,
    /// int8, int16, int32, uint8, uint16, int4, uint4 and the quantized dtypes.
    #[prost(int32, repeated, tag = "7")]
    pub int_val: Vec<i32>,
    /// Strings (any bytes).
    #[prost(bytes = "vec", repeated, tag = "8")]
    pub string_val: Vec<Vec<u8>>,
    /// complex64 as interleaved real and imaginary parts.
    #[prost(float, repeated, tag = "9")]
    pub scomplex_val: Vec<f32>,
    /// int64 values.
    #[prost(int64, repeated, tag = "10")]
    pub int64_val: Vec<i64>,
    /// bool values.
    #[prost(bool, repeated, tag = "11")]
    pub bool_val: Vec<bool>,
    /// complex128 as interleaved real and imaginary parts.
    #[prost(double, repeated, tag = "12")]
    pub dcomplex_val: Vec<f64>,
    /// float16 and bfloat16: the raw 16 bits of each value.
    #[prost(int32, repeated, tag = "13")]
    pub half_val: Vec<i32>,
    /// uint32 values.
    #[prost(uint32, repeated, tag = "16")]
    pub uint32_val: Vec<u32>,
    /// uint64 values.
    #[prost(uint64, repeated, tag = "17")]
    pub uint64_val: Vec<u64>,
    /// The float8 dtypes: one byte per value.
    #[prost(bytes = "vec", tag = "18")]
    pub float8_val: Vec<u8>,
}

/// TensorFlow's `TensorShapeProto`: dims (size -1 is unknown) or an unknown rank.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorShapeProto {
    /// The dims, outermost first.
    #[prost(message, repeated, tag = "2")]
    pub dim: Vec<DimProto>,
    /// The rank is unknown (then `dim` must be empty).
    #[prost(bool, tag = "3")]
    pub unknown_rank: bool,
}

/// One dim of a [`TensorShapeProto`] (`TensorShapeProto.Dim`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct DimProto {
    /// The size; -1 means unknown.
    #[prost(int64, tag = "1")]
    pub size: i64,
    /// An optional name (ignored by TensorFlow's shape logic, and by ours).
    #[prost(string, tag = "2")]
    pub name: String,
}

/// TensorFlow's `TensorSliceProto`: one extent per dim.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorSliceProto {
    /// The extents, outermost first.
    #[prost(message, repeated, tag = "1")]
    pub extent: Vec<ExtentProto>,
}

/// One extent of a [`TensorSliceProto`] (`TensorSliceProto.Extent`): `start` and an optional
/// `length` (the `has_length` oneof); no length means the whole dim.
#[derive(Clone, Copy, PartialEq, prost::Message)]
pub struct ExtentProto {
    /// The first index.
    #[prost(int64, tag = "1")]
    pub start: i64,
    /// The number of elements, or `None` for the whole dim.
    #[prost(int64, optional, tag = "2")]
    pub length: Option<i64>,
}

/// TensorFlow's `VersionDef`: who wrote data (a `GraphDef`, a checkpoint) and which readers
/// may read it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct VersionDef {
    /// The version of the code that wrote it.
    #[prost(int32, tag = "1")]
    pub producer: i32,
    /// The oldest consumer version that can read it.
    #[prost(int32, tag = "2")]
    pub min_consumer: i32,
    /// Consumer versions known not to read it.
    #[prost(int32, repeated, tag = "3")]
    pub bad_consumers: Vec<i32>,
}
