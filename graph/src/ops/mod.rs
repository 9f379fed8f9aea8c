//! The op registry: every op type polytensor's graphs know, under TensorFlow's name, with its
//! static inference ([`infer`]) and its kernel ([`kernels`]), both dispatched on [`Kind`].

use std::collections::BTreeMap;

use tensor_core::ops::{BinaryOp, ReduceOp, UnaryOp};
use tensor_core::{DataType, Error, Result};

use crate::attr::{AttrValue, Attrs};
use crate::graph::{Node, Typed};

pub(crate) mod infer;
pub(crate) mod kernels;

/// What an op does; one entry per op type in [`OPS`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Kind {
    Const,
    Placeholder,
    /// `Identity`, `StopGradient`: the input, unchanged.
    Identity,
    IdentityN,
    NoOp,
    /// Elementwise, both operands and the result of the same dtype.
    Binary(BinaryOp),
    /// Elementwise, giving bool.
    Compare(BinaryOp),
    /// TensorFlow's integer-division family, with division by zero an error.
    Division(Division),
    Unary(UnaryOp),
    Cast,
    Select,
    MatMul,
    BatchMatMul,
    Reduce(ReduceOp),
    /// `ArgMax` / `ArgMin`: the reduction over one axis, with `output_type`.
    Arg(ReduceOp),
    Reshape,
    Transpose,
    ExpandDims,
    Squeeze,
    Shape,
    Fill,
    Range,
    AddN,
    VarHandle,
    ReadVariable,
    AssignVariable,
    AssignAddVariable,
    VarIsInitialized,
    RefVariable,
    RefAssign,
    RefAssignAdd,
}

/// TensorFlow's division ops, as they differ from the kernel surface.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Division {
    /// `RealDiv`: `/` (integers truncate).
    Real,
    /// `FloorDiv`: rounds toward -inf.
    Floor,
    /// `FloorMod`: the remainder with the divisor's sign.
    FloorMod,
    /// `TruncateDiv`: rounds toward zero.
    Truncate,
    /// `TruncateMod`: the remainder with the dividend's sign.
    TruncateMod,
}

/// Every op type, by TensorFlow's name.
pub(crate) const OPS: &[(&str, Kind)] = &[
    ("Const", Kind::Const),
    ("Placeholder", Kind::Placeholder),
    ("Identity", Kind::Identity),
    ("StopGradient", Kind::Identity),
    ("IdentityN", Kind::IdentityN),
    ("NoOp", Kind::NoOp),
    ("Add", Kind::Binary(BinaryOp::Add)),
    ("AddV2", Kind::Binary(BinaryOp::Add)),
    ("Sub", Kind::Binary(BinaryOp::Sub)),
    ("Mul", Kind::Binary(BinaryOp::Mul)),
    ("Maximum", Kind::Binary(BinaryOp::Max)),
    ("Minimum", Kind::Binary(BinaryOp::Min)),
    ("Pow", Kind::Binary(BinaryOp::Pow)),
    ("LogicalAnd", Kind::Binary(BinaryOp::And)),
    ("LogicalOr", Kind::Binary(BinaryOp::Or)),
    ("Equal", Kind::Compare(BinaryOp::Eq)),
    ("NotEqual", Kind::Compare(BinaryOp::Ne)),
    ("Less", Kind::Compare(BinaryOp::Lt)),
    ("LessEqual", Kind::Compare(BinaryOp::Le)),
    ("Greater", Kind::Compare(BinaryOp::Gt)),
    ("GreaterEqual", Kind::Compare(BinaryOp::Ge)),
    ("RealDiv", Kind::Division(Division::Real)),
    ("FloorDiv", Kind::Division(Division::Floor)),
    ("FloorMod", Kind::Division(Division::FloorMod)),
    ("TruncateDiv", Kind::Division(Division::Truncate)),
    ("TruncateMod", Kind::Division(Division::TruncateMod)),
    ("Neg", Kind::Unary(UnaryOp::Neg)),
    ("Abs", Kind::Unary(UnaryOp::Abs)),
    ("Sign", Kind::Unary(UnaryOp::Sign)),
    ("Exp", Kind::Unary(UnaryOp::Exp)),
    ("Log", Kind::Unary(UnaryOp::Log)),
    ("Sqrt", Kind::Unary(UnaryOp::Sqrt)),
    ("Rsqrt", Kind::Unary(UnaryOp::Rsqrt)),
    ("Sin", Kind::Unary(UnaryOp::Sin)),
    ("Cos", Kind::Unary(UnaryOp::Cos)),
    ("Tanh", Kind::Unary(UnaryOp::Tanh)),
    ("Sigmoid", Kind::Unary(UnaryOp::Sigmoid)),
    ("Relu", Kind::Unary(UnaryOp::Relu)),
    ("Square", Kind::Unary(UnaryOp::Square)),
    ("Reciprocal", Kind::Unary(UnaryOp::Recip)),
    ("Floor", Kind::Unary(UnaryOp::Floor)),
    ("Ceil", Kind::Unary(UnaryOp::Ceil)),
    ("Round", Kind::Unary(UnaryOp::Round)),
    ("LogicalNot", Kind::Unary(UnaryOp::Not)),
    ("Cast", Kind::Cast),
    ("SelectV2", Kind::Select),
    ("MatMul", Kind::MatMul),
    ("BatchMatMulV2", Kind::BatchMatMul),
    ("Sum", Kind::Reduce(ReduceOp::Sum)),
    ("Prod", Kind::Reduce(ReduceOp::Prod)),
    ("Mean", Kind::Reduce(ReduceOp::Mean)),
    ("Max", Kind::Reduce(ReduceOp::Max)),
    ("Min", Kind::Reduce(ReduceOp::Min)),
    ("ArgMax", Kind::Arg(ReduceOp::ArgMax)),
    ("ArgMin", Kind::Arg(ReduceOp::ArgMin)),
    ("Reshape", Kind::Reshape),
    ("Transpose", Kind::Transpose),
    ("ExpandDims", Kind::ExpandDims),
    ("Squeeze", Kind::Squeeze),
    ("Shape", Kind::Shape),
    ("Fill", Kind::Fill),
    ("Range", Kind::Range),
    ("AddN", Kind::AddN),
    ("VarHandleOp", Kind::VarHandle),
    ("ReadVariableOp", Kind::ReadVariable),
    ("AssignVariableOp", Kind::AssignVariable),
    ("AssignAddVariableOp", Kind::AssignAddVariable),
    ("VarIsInitializedOp", Kind::VarIsInitialized),
    ("VariableV2", Kind::RefVariable),
    ("Assign", Kind::RefAssign),
    ("AssignAdd", Kind::RefAssignAdd),
];

/// The kind of op type `op_type`, if polytensor has it.
pub(crate) fn find(op_type: &str) -> Option<Kind> {
    OPS.iter()
        .find(|(name, _)| *name == op_type)
        .map(|&(_, kind)| kind)
}

/// The type attributes TensorFlow's op definitions require that follow from the inputs
/// (`T`, `Tidx`, `N`, ...): the builder adds the ones a caller did not set, so that a graph
/// built here is a complete GraphDef for TensorFlow.
pub(crate) fn derived_attrs(kind: Kind, inputs: &[Typed]) -> Vec<(&'static str, AttrValue)> {
    let dtype = |i: usize| inputs.get(i).map(|(d, _)| AttrValue::from(*d));
    let attrs: Vec<(&'static str, Option<AttrValue>)> = match kind {
        Kind::Identity
        | Kind::Binary(_)
        | Kind::Compare(_)
        | Kind::Division(_)
        | Kind::Unary(_)
        | Kind::MatMul
        | Kind::BatchMatMul
        | Kind::Squeeze
        | Kind::Shape
        | Kind::RefAssign
        | Kind::RefAssignAdd => vec![("T", dtype(0))],
        Kind::Select => vec![("T", dtype(1))],
        Kind::Reduce(_) | Kind::Arg(_) => vec![("T", dtype(0)), ("Tidx", dtype(1))],
        Kind::Reshape => vec![("T", dtype(0)), ("Tshape", dtype(1))],
        Kind::Transpose => vec![("T", dtype(0)), ("Tperm", dtype(1))],
        Kind::ExpandDims => vec![("T", dtype(0)), ("Tdim", dtype(1))],
        Kind::Fill => vec![("T", dtype(1)), ("index_type", dtype(0))],
        Kind::Range => vec![("Tidx", dtype(0))],
        Kind::Cast => vec![("SrcT", dtype(0))],
        Kind::AddN => vec![
            ("T", dtype(0)),
            ("N", Some(AttrValue::from(inputs.len() as i64))),
        ],
        Kind::IdentityN => {
            let dtypes: Vec<DataType> = inputs.iter().map(|(d, _)| *d).collect();
            vec![("T", Some(crate::attr::type_list(&dtypes)))]
        }
        Kind::AssignVariable | Kind::AssignAddVariable => vec![("dtype", dtype(1))],
        _ => Vec::new(),
    };
    attrs
        .into_iter()
        .filter_map(|(name, value)| value.map(|v| (name, v)))
        .collect()
}

/// Every op type polytensor's graphs know, by TensorFlow's name.
pub fn op_types() -> impl Iterator<Item = &'static str> {
    OPS.iter().map(|(name, _)| *name)
}

/// What static inference sees of one node being added.
pub(crate) struct InferCtx<'a> {
    pub(crate) op_type: &'a str,
    pub(crate) name: &'a str,
    pub(crate) inputs: &'a [Typed],
    /// The node (and output index) behind each input.
    pub(crate) sources: Vec<(&'a Node, usize)>,
    pub(crate) attrs: &'a BTreeMap<String, AttrValue>,
}

impl<'a> InferCtx<'a> {
    pub(crate) fn attrs(&self) -> Attrs<'a> {
        Attrs {
            node: self.name,
            attrs: self.attrs,
        }
    }

    /// The inputs, which must be exactly `n`.
    pub(crate) fn exactly(&self, n: usize) -> Result<&'a [Typed]> {
        if self.inputs.len() == n {
            Ok(self.inputs)
        } else {
            Err(Error::invalid(format!(
                "{} '{}' takes {n} inputs, got {}",
                self.op_type,
                self.name,
                self.inputs.len()
            )))
        }
    }

    /// An error naming this node and its inputs.
    pub(crate) fn error(&self, what: impl std::fmt::Display) -> Error {
        let inputs: Vec<String> = self
            .inputs
            .iter()
            .zip(&self.sources)
            .map(|((dtype, shape), (node, index))| {
                format!("{}:{index} ({dtype}, {shape})", node.name)
            })
            .collect();
        Error::invalid(format!(
            "{what}, in {} '{}' with inputs [{}]",
            self.op_type,
            self.name,
            inputs.join(", ")
        ))
    }

    /// The integer values of input `i` when it is a `Const` known at build time.
    pub(crate) fn const_ints(&self, i: usize) -> Option<Vec<i64>> {
        let (node, index) = self.sources.get(i)?;
        if node.op_type.as_ref() != "Const" || *index != 0 {
            return None;
        }
        let attrs = Attrs {
            node: &node.name,
            attrs: &node.attrs,
        };
        infer::proto_ints(attrs.tensor("value").ok()?)
    }

    /// The node behind input `i`.
    pub(crate) fn source(&self, i: usize) -> Option<&'a Node> {
        self.sources.get(i).map(|(node, _)| *node)
    }
}

/// A value flowing through a running graph.
#[derive(Clone, Debug)]
pub(crate) enum Value {
    Tensor(tensor_core::Tensor),
    /// A resource variable's handle: the variable's name in the session.
    Resource(std::sync::Arc<str>),
    /// A reference variable (`VariableV2`): its name in the session.
    Ref(std::sync::Arc<str>),
}

/// The dtype TensorFlow's C++ messages name (`float`, `double`, `half`, ...).
pub(crate) fn cpp_dtype_name(dtype: DataType) -> &'static str {
    match dtype {
        DataType::Float => "float",
        DataType::Double => "double",
        DataType::Half => "half",
        other => other.name(),
    }
}
