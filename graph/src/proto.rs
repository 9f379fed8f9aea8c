//! TensorFlow's graph messages (`graph.proto`, `node_def.proto`, `attr_value.proto`,
//! `versions.proto`, `function.proto`) with TensorFlow's field numbers, derived by `prost`.
//! Tensors and shapes reuse tensor-core's `TensorProto` and `TensorShapeProto`.
//!
//! `NodeDef.attr` is a `BTreeMap`, so encoding writes attributes sorted by key, as
//! TensorFlow's deterministic serialization does.

use std::collections::BTreeMap;

pub use polytensor_core::proto::VersionDef;
use polytensor_core::proto::{TensorProto, TensorShapeProto};

/// TensorFlow's `GraphDef`: the nodes of a graph, its versions and its function library.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GraphDef {
    /// The nodes, in any order (TensorFlow writes them in creation order).
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeDef>,
    /// The serialized `FunctionDefLibrary` of functions the graph's `While`, `If` and
    /// `PartitionedCall` nodes call, kept byte for byte as read so that a round trip loses
    /// nothing ([`FunctionDefLibrary::decode_bytes`] reads it).
    #[prost(bytes = "vec", optional, tag = "2")]
    pub library: Option<Vec<u8>>,
    /// The deprecated single version number.
    #[prost(int32, tag = "3")]
    pub version: i32,
    /// Producer and consumer versions.
    #[prost(message, optional, tag = "4")]
    pub versions: Option<VersionDef>,
}

/// TensorFlow's `NodeDef`: one operation.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeDef {
    /// The unique name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// The op type (`AddV2`, `Const`, ...).
    #[prost(string, tag = "2")]
    pub op: String,
    /// Inputs: `node`, `node:index`, or `^node` for a control input (control inputs last).
    #[prost(string, repeated, tag = "3")]
    pub input: Vec<String>,
    /// The requested device (`/device:CPU:0`), or empty.
    #[prost(string, tag = "4")]
    pub device: String,
    /// Attributes by name; attributes left at their default may be absent.
    #[prost(btree_map = "string, message", tag = "5")]
    pub attr: BTreeMap<String, AttrValue>,
    /// The serialized `NodeDef.ExperimentalDebugInfo` (the original node names and
    /// functions a node came from), kept as read.
    #[prost(bytes = "vec", optional, tag = "6")]
    pub experimental_debug_info: Option<Vec<u8>>,
    /// The serialized `FullTypeDef` of the node's outputs (`experimental_type`), kept as
    /// read.
    #[prost(bytes = "vec", optional, tag = "7")]
    pub experimental_type: Option<Vec<u8>>,
}

/// TensorFlow's `AttrValue`: one attribute value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AttrValue {
    /// The value, one of its kinds.
    #[prost(oneof = "AttrKind", tags = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10")]
    pub value: Option<AttrKind>,
}

/// The kinds of an [`AttrValue`] (its `value` oneof).
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum AttrKind {
    /// A list of values of one kind (boxed, as the tensor: a map of attributes holds
    /// small values, so that a node's attributes cost what they hold).
    #[prost(message, boxed, tag = "1")]
    List(Box<ListValue>),
    /// Bytes (a string).
    #[prost(bytes = "vec", tag = "2")]
    S(Vec<u8>),
    /// An integer.
    #[prost(int64, tag = "3")]
    I(i64),
    /// A float.
    #[prost(float, tag = "4")]
    F(f32),
    /// A bool.
    #[prost(bool, tag = "5")]
    B(bool),
    /// A `DataType` wire value.
    #[prost(int32, tag = "6")]
    Type(i32),
    /// A shape.
    #[prost(message, tag = "7")]
    Shape(TensorShapeProto),
    /// A tensor.
    #[prost(message, boxed, tag = "8")]
    Tensor(Box<TensorProto>),
    /// A placeholder for a function attribute (only inside function bodies).
    #[prost(string, tag = "9")]
    Placeholder(String),
    /// A function and its attributes.
    #[prost(message, tag = "10")]
    Func(NameAttrList),
}

/// TensorFlow's `AttrValue.ListValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListValue {
    /// Strings.
    #[prost(bytes = "vec", repeated, tag = "2")]
    pub s: Vec<Vec<u8>>,
    /// Integers.
    #[prost(int64, repeated, tag = "3")]
    pub i: Vec<i64>,
    /// Floats.
    #[prost(float, repeated, tag = "4")]
    pub f: Vec<f32>,
    /// Bools.
    #[prost(bool, repeated, tag = "5")]
    pub b: Vec<bool>,
    /// `DataType` wire values.
    #[prost(int32, repeated, tag = "6")]
    pub r#type: Vec<i32>,
    /// Shapes.
    #[prost(message, repeated, tag = "7")]
    pub shape: Vec<TensorShapeProto>,
    /// Tensors.
    #[prost(message, repeated, tag = "8")]
    pub tensor: Vec<TensorProto>,
    /// Functions.
    #[prost(message, repeated, tag = "9")]
    pub func: Vec<NameAttrList>,
}

/// TensorFlow's `NameAttrList`: a function name with attributes.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NameAttrList {
    /// The function's name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Its attributes.
    #[prost(btree_map = "string, message", tag = "2")]
    pub attr: BTreeMap<String, AttrValue>,
}

impl GraphDef {
    /// A serialized `GraphDef` decoded (an `Err` for malformed bytes).
    pub fn decode_bytes(bytes: &[u8]) -> polytensor_core::Result<GraphDef> {
        <GraphDef as prost::Message>::decode(bytes)
            .map_err(|e| polytensor_core::Error::InvalidProto(format!("GraphDef: {e}")))
    }

    /// A serialized `GraphDef` decoded from shared memory: the constants' `tensor_content`
    /// stay views of `bytes` (no copy), so a model's weights are read once, and a CPU
    /// session's tensors share them where they are aligned.
    pub fn decode_shared(bytes: bytes::Bytes) -> polytensor_core::Result<GraphDef> {
        <GraphDef as prost::Message>::decode(bytes)
            .map_err(|e| polytensor_core::Error::InvalidProto(format!("GraphDef: {e}")))
    }

    /// The names of the functions in [`GraphDef::library`] (none without a library).
    pub fn function_names(&self) -> polytensor_core::Result<Vec<String>> {
        let library = match &self.library {
            Some(bytes) => FunctionDefLibrary::decode_bytes(bytes)?,
            None => return Ok(Vec::new()),
        };
        Ok(library
            .function
            .into_iter()
            .filter_map(|f| f.signature.map(|s| s.name))
            .collect())
    }
}

impl FunctionDefLibrary {
    /// A serialized `FunctionDefLibrary` decoded (an `Err` for malformed bytes).
    pub fn decode_bytes(bytes: &[u8]) -> polytensor_core::Result<FunctionDefLibrary> {
        <FunctionDefLibrary as prost::Message>::decode(bytes)
            .map_err(|e| polytensor_core::Error::InvalidProto(format!("GraphDef.library: {e}")))
    }
}

/// TensorFlow's `FunctionDefLibrary`: the functions a graph's `While`, `If` and
/// `PartitionedCall` nodes call.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FunctionDefLibrary {
    /// The functions.
    #[prost(message, repeated, tag = "1")]
    pub function: Vec<FunctionDef>,
}

/// TensorFlow's `FunctionDef`: a function's signature and body (fields polytensor does not
/// read are skipped when decoding).
#[derive(Clone, PartialEq, prost::Message)]
pub struct FunctionDef {
    /// The signature: the function's name, arguments and results.
    #[prost(message, optional, tag = "1")]
    pub signature: Option<OpSignature>,
    /// The body's nodes; their inputs name an argument (`x`), a node's output by argument
    /// name and index (`add:z:0`), or a control input (`^node`).
    #[prost(message, repeated, tag = "3")]
    pub node_def: Vec<NodeDef>,
    /// Each result (an output argument's name) and the body output it returns.
    #[prost(btree_map = "string, string", tag = "4")]
    pub ret: BTreeMap<String, String>,
    /// Nodes that must run whenever the function runs, by control output name.
    #[prost(btree_map = "string, string", tag = "6")]
    pub control_ret: BTreeMap<String, String>,
}

/// A function's signature (TensorFlow's `OpDef`, the fields a function uses).
#[derive(Clone, PartialEq, prost::Message)]
pub struct OpSignature {
    /// The function's name, which nodes use as their op type to call it.
    #[prost(string, tag = "1")]
    pub name: String,
    /// The arguments, in order.
    #[prost(message, repeated, tag = "2")]
    pub input_arg: Vec<ArgDef>,
    /// The results, in order.
    #[prost(message, repeated, tag = "3")]
    pub output_arg: Vec<ArgDef>,
}

/// One argument or result of a signature (TensorFlow's `OpDef.ArgDef`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ArgDef {
    /// Its name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Its dtype (a `DataType` number), or 0 where `type_attr` names it.
    #[prost(int32, tag = "3")]
    pub r#type: i32,
    /// The attribute holding its dtype, or empty.
    #[prost(string, tag = "4")]
    pub type_attr: String,
    /// The attribute holding its length, for a list of one dtype; empty for one tensor.
    #[prost(string, tag = "5")]
    pub number_attr: String,
    /// The attribute holding its dtypes, for a list of several; empty for one tensor.
    #[prost(string, tag = "6")]
    pub type_list_attr: String,
}
