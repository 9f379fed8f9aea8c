//! The SavedModel messages polytensor reads (`saved_model.proto`, `meta_graph.proto`,
//! `saver.proto`), with TensorFlow's field numbers. Fields polytensor does not use
//! (`SavedObjectGraph`, collections, stripped op lists) are skipped when decoding.

use std::collections::BTreeMap;

use polytensor_core::proto::{TensorProto, TensorShapeProto};

use crate::proto::GraphDef;

/// `SavedModel`: the file `saved_model.pb`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SavedModelProto {
    /// The format's version (1).
    #[prost(int64, tag = "1")]
    pub saved_model_schema_version: i64,
    /// One graph per set of tags.
    #[prost(message, repeated, tag = "2")]
    pub meta_graphs: Vec<MetaGraphDef>,
}

/// `SavedModel` with its graphs left encoded: each as TensorFlow wrote it, for a caller that
/// wants the bytes (`PT_LoadSessionFromSavedModel`'s `meta_graph_def`).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct SavedModelBytes {
    #[prost(bytes = "bytes", repeated, tag = "2")]
    pub(crate) meta_graphs: Vec<bytes::Bytes>,
}

/// `MetaGraphDef`: a graph with what it takes to run it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MetaGraphDef {
    /// Tags and versions.
    #[prost(message, optional, tag = "1")]
    pub meta_info_def: Option<MetaInfoDef>,
    /// The graph, with its function library.
    #[prost(message, optional, tag = "2")]
    pub graph_def: Option<GraphDef>,
    /// How to save and restore the graph's variables.
    #[prost(message, optional, tag = "3")]
    pub saver_def: Option<SaverDef>,
    /// The signatures, by key.
    #[prost(btree_map = "string, message", tag = "5")]
    pub signature_def: BTreeMap<String, SignatureDef>,
    /// Files the graph reads (vocabularies), fed to the init op.
    #[prost(message, repeated, tag = "6")]
    pub asset_file_def: Vec<AssetFileDef>,
    /// TensorFlow 2's object graph: the variables and the functions' captures.
    #[prost(message, optional, tag = "7")]
    pub object_graph_def: Option<super::objects::SavedObjectGraph>,
}

/// `MetaGraphDef.MetaInfoDef`: the parts polytensor reads.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MetaInfoDef {
    /// The tags that select this graph (`serve`, `train`, ...).
    #[prost(string, repeated, tag = "4")]
    pub tags: Vec<String>,
    /// The TensorFlow version that wrote it.
    #[prost(string, tag = "5")]
    pub tensorflow_version: String,
}

/// `SaverDef`: the tensors and ops of the graph's saver.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SaverDef {
    /// The string tensor to feed with a checkpoint prefix.
    #[prost(string, tag = "1")]
    pub filename_tensor_name: String,
    /// The tensor that saves when fetched.
    #[prost(string, tag = "2")]
    pub save_tensor_name: String,
    /// The op that restores when run.
    #[prost(string, tag = "3")]
    pub restore_op_name: String,
}

/// `SignatureDef`: a function of the graph, its inputs and outputs by key.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SignatureDef {
    /// The inputs, by key.
    #[prost(btree_map = "string, message", tag = "1")]
    pub inputs: BTreeMap<String, TensorInfo>,
    /// The outputs, by key.
    #[prost(btree_map = "string, message", tag = "2")]
    pub outputs: BTreeMap<String, TensorInfo>,
    /// `tensorflow/serving/predict` and the like.
    #[prost(string, tag = "3")]
    pub method_name: String,
    /// Values for inputs left out of a call.
    #[prost(btree_map = "string, message", tag = "4")]
    pub defaults: BTreeMap<String, TensorProto>,
}

/// `TensorInfo`: a tensor of the graph by name, with its dtype and shape.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorInfo {
    /// The tensor's name (`x:0`); empty for the sparse and composite encodings.
    #[prost(string, tag = "1")]
    pub name: String,
    /// The `DataType` wire value.
    #[prost(int32, tag = "2")]
    pub dtype: i32,
    /// The static shape.
    #[prost(message, optional, tag = "3")]
    pub tensor_shape: Option<TensorShapeProto>,
}

/// `AssetFileDef`: a file of `assets/` and the tensor that receives its path.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AssetFileDef {
    /// The string tensor fed with the file's path.
    #[prost(message, optional, tag = "1")]
    pub tensor_info: Option<TensorInfo>,
    /// The file's name within `assets/`.
    #[prost(string, tag = "2")]
    pub filename: String,
}
