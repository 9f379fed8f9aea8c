//! Attribute values: conversions into TensorFlow's `AttrValue`, and typed reads with
//! TensorFlow's defaults for attributes a GraphDef leaves out.

use std::collections::BTreeMap;

use polytensor_core::proto::{TensorProto, TensorShapeProto};
use polytensor_core::{DataType, Error, PartialTensorShape, Result};

pub use crate::proto::{AttrKind, AttrValue, ListValue};

fn value(kind: AttrKind) -> AttrValue {
    AttrValue { value: Some(kind) }
}

impl From<DataType> for AttrValue {
    fn from(dtype: DataType) -> Self {
        value(AttrKind::Type(dtype.as_i32()))
    }
}

impl From<bool> for AttrValue {
    fn from(b: bool) -> Self {
        value(AttrKind::B(b))
    }
}

impl From<i64> for AttrValue {
    fn from(i: i64) -> Self {
        value(AttrKind::I(i))
    }
}

impl From<f32> for AttrValue {
    fn from(f: f32) -> Self {
        value(AttrKind::F(f))
    }
}

impl From<&str> for AttrValue {
    fn from(s: &str) -> Self {
        value(AttrKind::S(s.as_bytes().to_vec()))
    }
}

impl From<&PartialTensorShape> for AttrValue {
    fn from(shape: &PartialTensorShape) -> Self {
        value(AttrKind::Shape(shape.to_proto()))
    }
}

impl From<TensorProto> for AttrValue {
    fn from(tensor: TensorProto) -> Self {
        value(AttrKind::Tensor(Box::new(tensor)))
    }
}

impl From<ListValue> for AttrValue {
    fn from(list: ListValue) -> Self {
        value(AttrKind::List(Box::new(list)))
    }
}

/// A list of integers (`squeeze_dims`, ...).
pub fn int_list(values: &[i64]) -> AttrValue {
    ListValue {
        i: values.to_vec(),
        ..Default::default()
    }
    .into()
}

/// A list of dtypes (`IdentityN`'s `T`, ...).
pub fn type_list(dtypes: &[DataType]) -> AttrValue {
    ListValue {
        r#type: dtypes.iter().map(|d| d.as_i32()).collect(),
        ..Default::default()
    }
    .into()
}

/// A `func` attribute: a call of function `name` with no attributes of its own.
pub(crate) fn function(name: &str) -> AttrValue {
    value(AttrKind::Func(crate::proto::NameAttrList {
        name: name.to_string(),
        attr: BTreeMap::new(),
    }))
}

/// Typed reads of a node's attributes, naming the node and attribute in errors.
pub(crate) struct Attrs<'a> {
    pub(crate) node: &'a str,
    pub(crate) attrs: &'a BTreeMap<String, AttrValue>,
}

impl<'a> Attrs<'a> {
    fn kind(&self, name: &str) -> Option<&'a AttrKind> {
        self.attrs.get(name).and_then(|v| v.value.as_ref())
    }

    fn wrong(&self, name: &str, want: &str) -> Error {
        Error::invalid(format!(
            "attribute '{name}' of node '{}' is not {want}",
            self.node
        ))
    }

    fn missing(&self, name: &str) -> Error {
        Error::invalid(format!("NodeDef '{}' is missing attr '{name}'", self.node))
    }

    /// A dtype attribute that must be present.
    pub(crate) fn dtype(&self, name: &str) -> Result<DataType> {
        match self.kind(name) {
            Some(AttrKind::Type(t)) => Ok(DataType::from_i32(*t)?),
            Some(_) => Err(self.wrong(name, "a type")),
            None => Err(self.missing(name)),
        }
    }

    /// An integer attribute that must be present.
    pub(crate) fn int(&self, name: &str) -> Result<i64> {
        match self.kind(name) {
            Some(AttrKind::I(i)) => Ok(*i),
            Some(_) => Err(self.wrong(name, "an int")),
            None => Err(self.missing(name)),
        }
    }

    /// Whether the attribute is set.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.kind(name).is_some()
    }

    /// An integer attribute with a default.
    pub(crate) fn int_or(&self, name: &str, default: i64) -> Result<i64> {
        match self.kind(name) {
            None => Ok(default),
            Some(_) => self.int(name),
        }
    }

    /// A float attribute with a default.
    pub(crate) fn float_or(&self, name: &str, default: f64) -> Result<f64> {
        match self.kind(name) {
            None => Ok(default),
            Some(AttrKind::F(f)) => Ok(f64::from(*f)),
            Some(_) => Err(self.wrong(name, "a float")),
        }
    }

    /// A list of dtypes that must be present.
    pub(crate) fn dtypes(&self, name: &str) -> Result<Vec<DataType>> {
        match self.kind(name) {
            Some(AttrKind::List(list)) => list
                .r#type
                .iter()
                .map(|&t| Ok(DataType::from_i32(t)?))
                .collect(),
            Some(_) => Err(self.wrong(name, "a list of types")),
            None => Err(self.missing(name)),
        }
    }

    /// A dtype attribute with a default.
    pub(crate) fn dtype_or(&self, name: &str, default: DataType) -> Result<DataType> {
        match self.kind(name) {
            None => Ok(default),
            Some(_) => self.dtype(name),
        }
    }

    /// A bool attribute with a default.
    pub(crate) fn bool_or(&self, name: &str, default: bool) -> Result<bool> {
        match self.kind(name) {
            None => Ok(default),
            Some(AttrKind::B(b)) => Ok(*b),
            Some(_) => Err(self.wrong(name, "a bool")),
        }
    }

    /// A string attribute with a default.
    pub(crate) fn string_or(&self, name: &str, default: &str) -> Result<String> {
        match self.kind(name) {
            None => Ok(default.to_string()),
            Some(AttrKind::S(s)) => Ok(String::from_utf8_lossy(s).into_owned()),
            Some(_) => Err(self.wrong(name, "a string")),
        }
    }

    /// A list of strings, empty by default.
    pub(crate) fn strings(&self, name: &str) -> Result<Vec<String>> {
        match self.kind(name) {
            None => Ok(Vec::new()),
            Some(AttrKind::List(list)) => Ok(list
                .s
                .iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()),
            Some(_) => Err(self.wrong(name, "a list of strings")),
        }
    }

    /// A list of integers, empty by default.
    pub(crate) fn ints(&self, name: &str) -> Result<Vec<i64>> {
        match self.kind(name) {
            None => Ok(Vec::new()),
            Some(AttrKind::List(list)) => Ok(list.i.clone()),
            Some(_) => Err(self.wrong(name, "a list of ints")),
        }
    }

    /// A shape attribute; absent means unknown rank.
    pub(crate) fn shape_or_unknown(&self, name: &str) -> Result<PartialTensorShape> {
        match self.kind(name) {
            None => Ok(PartialTensorShape::unknown_rank()),
            Some(AttrKind::Shape(shape)) => PartialTensorShape::from_proto(shape),
            Some(_) => Err(self.wrong(name, "a shape")),
        }
    }

    /// The name of the function a `func` attribute calls, which must be present.
    pub(crate) fn function(&self, name: &str) -> Result<&'a str> {
        match self.kind(name) {
            Some(AttrKind::Func(f)) if !f.name.is_empty() => Ok(&f.name),
            Some(_) => Err(self.wrong(name, "a function")),
            None => Err(self.missing(name)),
        }
    }

    /// A tensor attribute that must be present.
    pub(crate) fn tensor(&self, name: &str) -> Result<&'a TensorProto> {
        match self.kind(name) {
            Some(AttrKind::Tensor(t)) => Ok(t),
            Some(_) => Err(self.wrong(name, "a tensor")),
            None => Err(self.missing(name)),
        }
    }
}

/// The shape a `TensorProto` declares (absent means a scalar).
pub(crate) fn proto_shape(proto: &TensorProto) -> Result<PartialTensorShape> {
    let empty = TensorShapeProto::default();
    PartialTensorShape::from_proto(proto.tensor_shape.as_ref().unwrap_or(&empty))
}
