//! The op registry: every op type polytensor's graphs know, under TensorFlow's name, with its
//! static inference ([`infer`]) and its kernel ([`kernels`]), both dispatched on [`Kind`].

use std::collections::BTreeMap;

use polytensor_core::ops::{BinaryOp, ReduceOp, UnaryOp};
use polytensor_core::{DataType, Error, PartialTensorShape, Result};

use crate::attr::{AttrValue, Attrs};
use crate::graph::{Node, Typed};

mod array;
pub(crate) mod collective;
mod debug;
pub(crate) mod flow;
mod generate;
pub(crate) mod grad;
pub(crate) mod infer;
pub(crate) mod kernels;
pub(crate) mod list;
mod nn;
mod optimizer;
pub(crate) mod output_args;
mod saver;
mod sparse;
mod strings;
pub(crate) mod table;

pub(crate) use array::Array;
use collective::Collective;
use debug::Debug;
pub(crate) use flow::{Call, Flow};
use generate::Generate;
use grad::GradOp;
use list::ListOp;
pub(crate) use nn::{FusedConv, Nn};
use polytensor_core::random::Distribution;
use saver::SaverOp;
use sparse::Sparse;
use strings::StringOp;
use table::TableOp;

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
    /// `SelectV2` (broadcasting) and `Select` (`v1`: the condition a scalar, of the
    /// branches' shape, or a vector picking rows).
    Select {
        v1: bool,
    },
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
    /// `VariableShape`: a variable's shape, without reading its value.
    VariableShape,
    /// `AssignAddVariableOp` and `AssignSubVariableOp`: the variable combined by the op with
    /// the value.
    AssignByVariable(BinaryOp),
    /// `ResourceScatterAdd`, `ResourceScatterSub` (the rows `indices` name combined with
    /// `updates`, a row named twice taking both) and (`None`) `ResourceScatterUpdate`.
    ResourceScatter(Option<BinaryOp>),
    VarIsInitialized,
    /// `DisableCopyOnRead`: nothing to do, as polytensor's variables are never copied on
    /// read (their tensors are shared, and writers replace them).
    DisableCopyOnRead,
    /// `ResourceGather`: rows of a variable's value (`GatherV2` on axis 0 of the read).
    ResourceGather,
    RefVariable,
    RefAssign,
    RefAssignAdd,
    /// `Complex`: a complex tensor from real and imaginary parts.
    MakeComplex,
    /// `Real`, `Imag`, `ComplexAbs`, `Angle`: a real tensor from a complex one.
    ComplexPart(ComplexPart),
    /// `Conj`: the complex conjugate.
    Conj,
    /// Convolution, pooling, normalisation and softmax ([`nn`]).
    Nn(Nn),
    /// Joining, splitting, padding, slicing, tiling and gathering ([`array`]).
    Array(Array),
    /// `LinSpace` and the seeded random ops ([`generate`]).
    Generate(Generate),
    /// A gradient or loss op ([`grad`]).
    Grad(GradOp),
    /// A `ResourceApply*` or `ResourceSparseApply*` optimizer step ([`optimizer`]).
    Apply(optimizer::Update),
    /// TensorFlow 1.x control flow, run by the session's frame executor ([`flow`]).
    Flow(Flow),
    /// A functional op calling functions of the graph's library ([`flow`]).
    Call(Call),
    /// A sparse op, its sparse operands and results as their components ([`sparse`]).
    Sparse(Sparse),
    /// A collective across the ranks of the session's communicator ([`collective`]).
    Collective(Collective),
    /// A check or a print: `Assert`, `CheckNumerics`, `Print`, `StringFormat` ([`debug`]).
    Debug(Debug),
    /// `All` (`any: false`) and `Any`: a reduction of bools over the axes input.
    Logical {
        any: bool,
    },
    /// `Einsum`: `N` operands and an `equation`.
    Einsum,
    /// A TensorList op ([`list`]).
    List(ListOp),
    /// A string op of the savers ([`strings`]).
    Strings(StringOp),
    /// `SaveV2`, `RestoreV2`, `MergeV2Checkpoints` ([`saver`]).
    Saver(SaverOp),
    /// A lookup table op ([`table`]).
    Table(TableOp),
    /// A convolution run with what follows it; made by the session (`crate::fusion`),
    /// never an op type of a graph.
    FusedConv(FusedConv),
    /// A `Mul` and an `AddV2` by per-channel vectors and an optional `Relu`/`Relu6`, run as
    /// one step; made by the session (`crate::fusion`), never an op type of a graph.
    ChannelAffine {
        activation: Option<UnaryOp>,
    },
    /// `x * Sigmoid(x * beta)` (`beta` the second input) or `x * Sigmoid(x)`, run as one
    /// step: Keras's swish; made by the session (`crate::fusion`).
    Swish,
    /// One step: Keras 3's exact GELU (`(x * 0.5) * Erfc(Neg(x) * (1/√2))`); made by the
    /// session (`crate::fusion`).
    Gelu,
    /// One step: Keras's hard swish (`x * (Relu6(x + 3) / 6)`, `divide` false where the
    /// division is a product by 1/6); made by the session (`crate::fusion`).
    HardSwish {
        divide: bool,
    },
    /// Keras 3's layer normalization over the last axis run as one step (inputs: the
    /// tensor, then `gamma` and `beta` where present); made by the session
    /// (`crate::fusion`).
    LayerNorm {
        epsilon: f32,
        gamma: bool,
        beta: bool,
    },
}

impl Kind {
    /// Whether the op reads or writes a variable through its first input (a resource
    /// handle or a reference).
    pub(crate) fn acts_on_variable(self) -> bool {
        if let Kind::Table(op) = self {
            return op.acts_on_table();
        }
        matches!(
            self,
            Kind::ReadVariable
                | Kind::AssignVariable
                | Kind::AssignByVariable(_)
                | Kind::ResourceScatter(_)
                | Kind::VarIsInitialized
                | Kind::VariableShape
                | Kind::DisableCopyOnRead
                | Kind::ResourceGather
                | Kind::RefAssign
                | Kind::RefAssignAdd
                | Kind::Apply(_)
        )
    }
}

/// What `Kind::ComplexPart` takes of each complex number.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ComplexPart {
    /// `Real`.
    Real,
    /// `Imag`.
    Imag,
    /// `ComplexAbs`: the modulus.
    Abs,
    /// `Angle`: the argument.
    Angle,
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
    (
        "SquaredDifference",
        Kind::Binary(BinaryOp::SquaredDifference),
    ),
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
    ("Erf", Kind::Unary(UnaryOp::Erf)),
    ("Erfc", Kind::Unary(UnaryOp::Erfc)),
    ("Relu", Kind::Unary(UnaryOp::Relu)),
    ("Relu6", Kind::Unary(UnaryOp::Relu6)),
    ("Square", Kind::Unary(UnaryOp::Square)),
    ("Reciprocal", Kind::Unary(UnaryOp::Recip)),
    ("Floor", Kind::Unary(UnaryOp::Floor)),
    ("Ceil", Kind::Unary(UnaryOp::Ceil)),
    ("Round", Kind::Unary(UnaryOp::Round)),
    ("LogicalNot", Kind::Unary(UnaryOp::Not)),
    ("Cast", Kind::Cast),
    ("SelectV2", Kind::Select { v1: false }),
    ("Select", Kind::Select { v1: true }),
    ("MatMul", Kind::MatMul),
    ("BatchMatMulV2", Kind::BatchMatMul),
    ("Einsum", Kind::Einsum),
    ("Sum", Kind::Reduce(ReduceOp::Sum)),
    ("Prod", Kind::Reduce(ReduceOp::Prod)),
    ("Mean", Kind::Reduce(ReduceOp::Mean)),
    ("Max", Kind::Reduce(ReduceOp::Max)),
    ("Min", Kind::Reduce(ReduceOp::Min)),
    ("All", Kind::Logical { any: false }),
    ("Any", Kind::Logical { any: true }),
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
    ("AssignAddVariableOp", Kind::AssignByVariable(BinaryOp::Add)),
    ("AssignSubVariableOp", Kind::AssignByVariable(BinaryOp::Sub)),
    (
        "ResourceScatterAdd",
        Kind::ResourceScatter(Some(BinaryOp::Add)),
    ),
    (
        "ResourceScatterSub",
        Kind::ResourceScatter(Some(BinaryOp::Sub)),
    ),
    ("ResourceScatterUpdate", Kind::ResourceScatter(None)),
    ("VarIsInitializedOp", Kind::VarIsInitialized),
    ("VariableShape", Kind::VariableShape),
    ("DisableCopyOnRead", Kind::DisableCopyOnRead),
    ("ResourceGather", Kind::ResourceGather),
    ("VariableV2", Kind::RefVariable),
    ("Assign", Kind::RefAssign),
    ("AssignAdd", Kind::RefAssignAdd),
    ("Complex", Kind::MakeComplex),
    ("Real", Kind::ComplexPart(ComplexPart::Real)),
    ("Imag", Kind::ComplexPart(ComplexPart::Imag)),
    ("ComplexAbs", Kind::ComplexPart(ComplexPart::Abs)),
    ("Angle", Kind::ComplexPart(ComplexPart::Angle)),
    ("Conj", Kind::Conj),
    ("Conv2D", Kind::Nn(Nn::Conv2D)),
    ("DepthwiseConv2dNative", Kind::Nn(Nn::Depthwise)),
    ("Conv2DBackpropInput", Kind::Nn(Nn::BackpropInput)),
    ("MaxPool", Kind::Nn(Nn::MaxPool)),
    ("AvgPool", Kind::Nn(Nn::AvgPool)),
    ("BiasAdd", Kind::Nn(Nn::BiasAdd)),
    ("FusedBatchNormV3", Kind::Nn(Nn::BatchNorm)),
    ("Softmax", Kind::Nn(Nn::Softmax)),
    ("LogSoftmax", Kind::Nn(Nn::LogSoftmax)),
    ("ConcatV2", Kind::Array(Array::Concat)),
    ("Pack", Kind::Array(Array::Pack)),
    ("Unpack", Kind::Array(Array::Unpack)),
    ("Split", Kind::Array(Array::Split)),
    ("SplitV", Kind::Array(Array::SplitV)),
    ("Pad", Kind::Array(Array::Pad)),
    ("PadV2", Kind::Array(Array::PadV2)),
    ("MirrorPad", Kind::Array(Array::MirrorPad)),
    ("Slice", Kind::Array(Array::Slice)),
    ("StridedSlice", Kind::Array(Array::StridedSlice)),
    ("Tile", Kind::Array(Array::Tile)),
    ("ReverseV2", Kind::Array(Array::Reverse)),
    ("BroadcastTo", Kind::Array(Array::BroadcastTo)),
    (
        "ResizeBilinear",
        Kind::Array(Array::Resize { bilinear: true }),
    ),
    (
        "ResizeNearestNeighbor",
        Kind::Array(Array::Resize { bilinear: false }),
    ),
    (
        "SpaceToBatchND",
        Kind::Array(Array::SpaceBatch { to_batch: true }),
    ),
    (
        "BatchToSpaceND",
        Kind::Array(Array::SpaceBatch { to_batch: false }),
    ),
    (
        "PlaceholderWithDefault",
        Kind::Array(Array::PlaceholderWithDefault),
    ),
    ("GatherV2", Kind::Array(Array::Gather)),
    ("OneHot", Kind::Array(Array::OneHot)),
    ("LinSpace", Kind::Generate(Generate::LinSpace)),
    (
        "RandomUniform",
        Kind::Generate(Generate::Random(Distribution::Uniform)),
    ),
    (
        "RandomStandardNormal",
        Kind::Generate(Generate::Random(Distribution::Normal)),
    ),
    (
        "TruncatedNormal",
        Kind::Generate(Generate::Random(Distribution::TruncatedNormal)),
    ),
    ("Switch", Kind::Flow(Flow::Switch)),
    ("Merge", Kind::Flow(Flow::Merge)),
    ("Enter", Kind::Flow(Flow::Enter)),
    ("Exit", Kind::Flow(Flow::Exit)),
    ("NextIteration", Kind::Flow(Flow::NextIteration)),
    ("LoopCond", Kind::Flow(Flow::LoopCond)),
    ("While", Kind::Call(Call::While)),
    ("StatelessWhile", Kind::Call(Call::While)),
    ("If", Kind::Call(Call::If)),
    ("StatelessIf", Kind::Call(Call::If)),
    ("PartitionedCall", Kind::Call(Call::Function)),
    ("StatefulPartitionedCall", Kind::Call(Call::Function)),
];

/// The kind of op type `op_type`, if polytensor has it.
pub(crate) fn find(op_type: &str) -> Option<Kind> {
    registry()
        .find(|(name, _)| *name == op_type)
        .map(|(_, kind)| kind)
}

/// Every op type polytensor has, with its kind: [`OPS`], then each family's own table.
fn registry() -> impl Iterator<Item = (&'static str, Kind)> {
    fn family<T: Copy>(
        ops: &'static [(&'static str, T)],
        kind: fn(T) -> Kind,
    ) -> impl Iterator<Item = (&'static str, Kind)> {
        ops.iter().map(move |&(name, op)| (name, kind(op)))
    }
    OPS.iter()
        .copied()
        .chain(family(sparse::OPS, Kind::Sparse))
        .chain(family(collective::OPS, Kind::Collective))
        .chain(family(debug::OPS, Kind::Debug))
        .chain(family(list::OPS, Kind::List))
        .chain(family(strings::OPS, Kind::Strings))
        .chain(family(saver::OPS, Kind::Saver))
        .chain(family(table::OPS, Kind::Table))
        .chain(family(grad::OPS, Kind::Grad))
        .chain(family(optimizer::OPS, Kind::Apply))
}

/// Where the value of a type attribute comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Source {
    /// The dtype of input `i` (`T` of `AddV2`'s both inputs, `Tidx`, `SrcT`, ...).
    Input(usize),
    /// The number of inputs (`N`).
    Count,
    /// The number of inputs but the last (`ConcatV2`'s `N`: its values, not the axis).
    Values,
    /// The dtypes of all inputs, in order (`IdentityN`'s `list(type)` `T`).
    InputTypes,
    /// The dtype the op computes from its inputs (`Tout` of `Real`, `Complex`, ...).
    Result,
}

/// One type attribute that follows from the inputs: its name, value and source.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Derived {
    pub(crate) name: &'static str,
    pub(crate) value: AttrValue,
    pub(crate) source: Source,
}

/// The type attributes TensorFlow's op definitions tie to the inputs (`T`, `Tidx`, `N`, ...):
/// the builder adds the ones a caller did not set (the first entry of a name), so that a
/// graph built here is a complete GraphDef for TensorFlow, and [`check_derived`] refuses a
/// node whose attributes contradict its inputs, as TensorFlow's importer does. An attribute
/// shared by several inputs (`T` of both `AddV2` operands) has one entry per input.
pub(crate) fn derived_attrs(kind: Kind, inputs: &[Typed]) -> Vec<Derived> {
    use Source::*;
    let typed: &[(&'static str, Source)] = match kind {
        Kind::Identity | Kind::Unary(_) | Kind::Squeeze | Kind::Shape | Kind::Conj => {
            &[("T", Input(0))]
        }
        Kind::Binary(_)
        | Kind::Compare(_)
        | Kind::Division(_)
        | Kind::MatMul
        | Kind::BatchMatMul
        | Kind::RefAssign
        | Kind::RefAssignAdd => &[("T", Input(0)), ("T", Input(1))],
        Kind::Select { .. } => &[("T", Input(1)), ("T", Input(2))],
        Kind::Reduce(_) | Kind::Arg(_) => &[("T", Input(0)), ("Tidx", Input(1))],
        Kind::Logical { .. } => &[("Tidx", Input(1))],
        Kind::Reshape => &[("T", Input(0)), ("Tshape", Input(1))],
        Kind::Transpose => &[("T", Input(0)), ("Tperm", Input(1))],
        Kind::ExpandDims => &[("T", Input(0)), ("Tdim", Input(1))],
        Kind::Fill => &[("T", Input(1)), ("index_type", Input(0))],
        Kind::Range => &[("Tidx", Input(0)), ("Tidx", Input(1)), ("Tidx", Input(2))],
        Kind::Cast => &[("SrcT", Input(0))],
        Kind::AddN | Kind::Einsum => &[("N", Count)],
        Kind::IdentityN => &[("T", InputTypes)],
        Kind::AssignVariable | Kind::AssignByVariable(_) => &[("dtype", Input(1))],
        Kind::ResourceScatter(_) => &[("Tindices", Input(1)), ("dtype", Input(2))],
        Kind::ResourceGather => &[("Tindices", Input(1))],
        Kind::MakeComplex => &[("T", Input(0)), ("T", Input(1)), ("Tout", Result)],
        Kind::ComplexPart(_) => &[("T", Input(0)), ("Tout", Result)],
        Kind::Nn(op) => op.typed(),
        Kind::Array(op) => op.typed(),
        Kind::Generate(op) => op.typed(),
        Kind::Flow(op) => op.typed(),
        Kind::Call(op) => op.typed(),
        Kind::Sparse(op) => op.typed(),
        Kind::Collective(op) => op.typed(),
        Kind::Debug(op) => op.typed(),
        Kind::List(op) => op.typed(),
        Kind::Strings(op) => op.typed(),
        Kind::Table(op) => op.typed(),
        Kind::Grad(op) => op.typed(),
        _ => &[],
    };
    let mut derived: Vec<(&'static str, Source)> = typed.to_vec();
    match kind {
        Kind::AddN | Kind::Einsum => derived.extend((0..inputs.len()).map(|i| ("T", Input(i)))),
        Kind::Apply(update) => derived.extend(optimizer::typed(update)),
        Kind::Array(op @ (Array::Concat | Array::Pack)) => {
            derived.extend(array::per_value(inputs.len(), op == Array::Concat))
        }
        _ => {}
    }
    derived
        .into_iter()
        .filter_map(|(name, source)| {
            let value = match source {
                Input(i) => AttrValue::from(inputs.get(i)?.0),
                Count => AttrValue::from(inputs.len() as i64),
                Values => AttrValue::from(inputs.len().saturating_sub(1) as i64),
                InputTypes => {
                    let dtypes: Vec<DataType> = inputs.iter().map(|(d, _)| *d).collect();
                    crate::attr::type_list(&dtypes)
                }
                Result => AttrValue::from(result_dtype(kind, inputs.first()?.0)?),
            };
            Some(Derived {
                name,
                value,
                source,
            })
        })
        .collect()
}

/// The dtype a complex op gives for input dtype `dtype` (its `Tout`), if it has one.
pub(crate) fn result_dtype(kind: Kind, dtype: DataType) -> Option<DataType> {
    match (kind, dtype) {
        (Kind::MakeComplex, DataType::Float) => Some(DataType::Complex64),
        (Kind::MakeComplex, DataType::Double) => Some(DataType::Complex128),
        (Kind::ComplexPart(_), DataType::Complex64 | DataType::Complex128) => {
            Some(dtype.real_dtype())
        }
        _ => None,
    }
}

/// An `Err`, with TensorFlow's message where it has one, if a type attribute of the node
/// contradicts its inputs ([`derived_attrs`]): `AddV2` of float inputs with `T = DT_INT32`,
/// `AddN` with an `N` other than its input count, `IdentityN` whose `T` lists other types.
/// Attributes left out are not checked (they take the inputs' values).
pub(crate) fn check_derived(kind: Kind, cx: &InferCtx<'_>) -> Result<()> {
    let attrs = cx.attrs();
    for derived in derived_attrs(kind, cx.inputs) {
        let Some(given) = cx.attrs.get(derived.name) else {
            continue;
        };
        if *given == derived.value {
            continue;
        }
        return Err(match derived.source {
            Source::Input(i) => cx.type_mismatch(i, attrs.dtype(derived.name)?),
            Source::Count | Source::Values => Error::invalid(format!(
                "NodeDef '{}' ({}) has attr 'N' = {}, but {} inputs are specified; N must \
                 match the inputs",
                cx.name,
                cx.op_type,
                attrs.int(derived.name)?,
                cx.inputs.len()
            )),
            Source::InputTypes => {
                let expected = attrs.dtypes(derived.name)?;
                if expected.len() != cx.inputs.len() {
                    return Err(Error::invalid(format!(
                        "NodeDef '{}' ({}) lists {} types in attr '{}', but {} inputs are \
                         specified",
                        cx.name,
                        cx.op_type,
                        expected.len(),
                        derived.name,
                        cx.inputs.len()
                    )));
                }
                let (i, &want) = expected
                    .iter()
                    .enumerate()
                    .find(|&(i, want)| *want != cx.inputs[i].0)
                    .ok_or_else(|| cx.error("attr 'T' does not match the inputs"))?;
                cx.type_mismatch(i, want)
            }
            Source::Result => {
                let input = cx.inputs[0].0;
                let gives = result_dtype(kind, input).map_or("nothing".into(), |d| d.to_string());
                cx.error(format!(
                    "attr '{}' is {}, but {} of {input} gives {gives} (TensorFlow registers no \
                     kernel for that pair)",
                    derived.name,
                    attrs.dtype(derived.name)?,
                    cx.op_type,
                ))
            }
        });
    }
    Ok(())
}

/// Every op type polytensor's graphs know, by TensorFlow's name.
pub fn op_types() -> impl Iterator<Item = &'static str> {
    registry().map(|(name, _)| name)
}

/// What static inference sees of one node being added.
pub(crate) struct InferCtx<'a> {
    pub(crate) op_type: &'a str,
    pub(crate) name: &'a str,
    pub(crate) inputs: &'a [Typed],
    /// The node (and output index) behind each input.
    pub(crate) sources: Vec<(&'a Node, usize)>,
    /// Every node of the graph so far (to look through a source to its own inputs).
    pub(crate) nodes: &'a [Node],
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

    /// `Err` with TensorFlow's message where input `i`'s rank is known and not `rank` (a
    /// shape input must be a vector, a bound a scalar).
    pub(crate) fn with_rank(&self, i: usize, rank: usize) -> Result<()> {
        match self.inputs.get(i).and_then(|(_, shape)| shape.rank()) {
            Some(r) if r != rank => {
                Err(self.error(format!("Shape must be rank {rank} but is rank {r}")))
            }
            _ => Ok(()),
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

    /// TensorFlow's error for input `i` whose dtype is not the `expected` of the op's type
    /// attribute.
    pub(crate) fn type_mismatch(&self, i: usize, expected: DataType) -> Error {
        let passed = self.inputs[i].0;
        let (node, index) = self.sources[i];
        Error::invalid(format!(
            "Input {i} of node {} was passed {} from {}:{index} incompatible with expected {}.",
            self.name,
            cpp_dtype_name(passed),
            node.name,
            cpp_dtype_name(expected)
        ))
    }

    /// The integer values of input `i` when it is a `Const` known at build time.
    pub(crate) fn const_ints(&self, i: usize) -> Option<Vec<i64>> {
        infer::proto_ints(self.const_value(i)?)
    }

    /// The float values of input `i` when it is a float32 or float64 `Const`.
    pub(crate) fn const_floats(&self, i: usize) -> Option<Vec<f64>> {
        infer::proto_floats(self.const_value(i)?)
    }

    /// The value of input `i` when it is output 0 of a `Const`.
    fn const_value(&self, i: usize) -> Option<&'a polytensor_core::proto::TensorProto> {
        let (node, index) = self.sources.get(i)?;
        if node.kind != Kind::Const || *index != 0 {
            return None;
        }
        let attrs = Attrs {
            node: &node.name,
            attrs: &node.attrs,
        };
        attrs.tensor("value").ok()
    }

    /// The shape that input `i`, a vector of dims, stands for as far as it is known at build
    /// time (TensorFlow's `MakeShapeFromShapeTensor`): a `Const`'s values (a negative dim is
    /// unknown); the static shape of the input of a `Shape` op; as many unknown dims as a
    /// vector of known length has; otherwise an unknown rank.
    pub(crate) fn shape_value(&self, i: usize) -> Result<PartialTensorShape> {
        if let Some(dims) = self.const_ints(i) {
            let dims: Vec<Option<usize>> = dims.iter().map(|&d| usize::try_from(d).ok()).collect();
            return PartialTensorShape::new(&dims);
        }
        if let Some((node, 0)) = self.sources.get(i) {
            if node.kind == Kind::Shape {
                if let Some(&(id, index)) = node.inputs.first() {
                    if let Some((_, shape)) = self.nodes.get(id).and_then(|n| n.outputs.get(index))
                    {
                        return Ok(shape.clone());
                    }
                }
            }
        }
        match self.inputs.get(i).and_then(|(_, shape)| shape.dims()) {
            Some(&[Some(rank)]) => PartialTensorShape::new(&vec![None; rank]),
            _ => Ok(PartialTensorShape::unknown_rank()),
        }
    }

    /// The node behind input `i`.
    pub(crate) fn source(&self, i: usize) -> Option<&'a Node> {
        self.sources.get(i).map(|(node, _)| *node)
    }
}

/// A value flowing through a running graph.
#[derive(Clone, Debug)]
pub(crate) enum Value {
    Tensor(polytensor_core::Tensor),
    /// A resource variable's handle: the variable's name in the session.
    Resource(std::sync::Arc<str>),
    /// A reference variable (`VariableV2`): its name in the session.
    Ref(std::sync::Arc<str>),
    /// A TensorList (a `variant` tensor of TensorFlow's), shared: ops that change a list
    /// give a new one.
    List(std::sync::Arc<list::TensorList>),
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
