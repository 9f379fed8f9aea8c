//! The tensor bundle's messages, with TensorFlow's field numbers (`tensor_bundle.proto`,
//! `versions.proto`).

use crate::proto::{TensorShapeProto, TensorSliceProto, VersionDef};

/// `BundleHeaderProto`: the value under the index's empty key.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BundleHeaderProto {
    /// How many data files the bundle has.
    #[prost(int32, tag = "1")]
    pub num_shards: i32,
    /// The byte order of the data files: 0 little-endian, 1 big-endian.
    #[prost(int32, tag = "2")]
    pub endianness: i32,
    /// The format's version.
    #[prost(message, optional, tag = "3")]
    pub version: Option<VersionDef>,
}

/// `BundleEntryProto`: where one tensor (or one slice of a partitioned one) lies.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BundleEntryProto {
    /// The `DataType` wire value.
    #[prost(int32, tag = "1")]
    pub dtype: i32,
    /// The shape (of the whole tensor, for a partitioned one).
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShapeProto>,
    /// The data file holding the bytes.
    #[prost(int32, tag = "3")]
    pub shard_id: i32,
    /// The bytes' offset in that file.
    #[prost(int64, tag = "4")]
    pub offset: i64,
    /// How many bytes.
    #[prost(int64, tag = "5")]
    pub size: i64,
    /// The masked CRC-32C of the bytes.
    #[prost(fixed32, tag = "6")]
    pub crc32c: u32,
    /// For a partitioned tensor: the slices saved, each under its own key, with no data
    /// here.
    #[prost(message, repeated, tag = "7")]
    pub slices: Vec<TensorSliceProto>,
}

/// The bundle format version polytensor writes and reads (`kTensorBundleVersion`).
pub const BUNDLE_VERSION: i32 = 1;
