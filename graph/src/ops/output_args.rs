//! The output arguments of every op type polytensor knows, as TensorFlow 2.21's `OpDef`s
//! declare them: what a function body's inputs (`node:arg:index`) name. Reading a
//! `FunctionDef` turns `node:arg:index` into the graph's `node:i`; writing one
//! ([`crate::Graph`]'s gradient functions) turns it back.
//!
//! The table is generated from TensorFlow's op registry
//! (`tensorflow.python.framework.op_def_registry`) for the op types of
//! [`super::op_types`]; a unit test keeps the two in step.

use std::collections::BTreeMap;

use crate::attr::{AttrValue, Attrs};

/// How many tensors one output argument holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Count {
    /// One tensor.
    One,
    /// A list of one dtype, as long as the integer attribute named.
    Number(&'static str),
    /// A list of several dtypes, as long as the type-list attribute named.
    Types(&'static str),
}

/// Each op type's output arguments, in order; sorted by op type.
const OUTPUT_ARGS: &[(&str, &[(&str, Count)])] = &[
    ("Abs", &[("y", Count::One)]),
    ("Add", &[("z", Count::One)]),
    ("AddN", &[("sum", Count::One)]),
    ("AddV2", &[("z", Count::One)]),
    ("All", &[("output", Count::One)]),
    ("Angle", &[("output", Count::One)]),
    ("Any", &[("output", Count::One)]),
    ("ArgMax", &[("output", Count::One)]),
    ("ArgMin", &[("output", Count::One)]),
    ("Assert", &[]),
    ("Assign", &[("output_ref", Count::One)]),
    ("AssignAdd", &[("output_ref", Count::One)]),
    ("AssignAddVariableOp", &[]),
    ("AssignSubVariableOp", &[]),
    ("AssignVariableOp", &[]),
    ("AvgPool", &[("output", Count::One)]),
    ("AvgPoolGrad", &[("output", Count::One)]),
    ("BatchMatMulV2", &[("output", Count::One)]),
    ("BatchToSpaceND", &[("output", Count::One)]),
    ("BiasAdd", &[("output", Count::One)]),
    ("BiasAddGrad", &[("output", Count::One)]),
    (
        "BroadcastGradientArgs",
        &[("r0", Count::One), ("r1", Count::One)],
    ),
    ("BroadcastTo", &[("output", Count::One)]),
    ("Cast", &[("y", Count::One)]),
    ("Ceil", &[("y", Count::One)]),
    ("CheckNumerics", &[("output", Count::One)]),
    ("CheckNumericsV2", &[("output", Count::One)]),
    ("CollectiveBcastRecvV2", &[("data", Count::One)]),
    ("CollectiveBcastSendV2", &[("data", Count::One)]),
    ("CollectiveGatherV2", &[("data", Count::One)]),
    ("CollectiveReduceV2", &[("data", Count::One)]),
    ("Complex", &[("out", Count::One)]),
    ("ComplexAbs", &[("y", Count::One)]),
    ("ConcatOffset", &[("offset", Count::Number("N"))]),
    ("ConcatV2", &[("output", Count::One)]),
    ("Conj", &[("output", Count::One)]),
    ("Const", &[("output", Count::One)]),
    ("Conv2D", &[("output", Count::One)]),
    ("Conv2DBackpropFilter", &[("output", Count::One)]),
    ("Conv2DBackpropInput", &[("output", Count::One)]),
    ("Cos", &[("y", Count::One)]),
    ("DepthwiseConv2dNative", &[("output", Count::One)]),
    (
        "DepthwiseConv2dNativeBackpropFilter",
        &[("output", Count::One)],
    ),
    (
        "DepthwiseConv2dNativeBackpropInput",
        &[("output", Count::One)],
    ),
    ("DisableCopyOnRead", &[]),
    ("Einsum", &[("output", Count::One)]),
    ("Enter", &[("output", Count::One)]),
    ("Equal", &[("z", Count::One)]),
    ("Erf", &[("y", Count::One)]),
    ("Erfc", &[("y", Count::One)]),
    ("Exit", &[("output", Count::One)]),
    ("Exp", &[("y", Count::One)]),
    ("ExpandDims", &[("output", Count::One)]),
    ("Fill", &[("output", Count::One)]),
    ("Floor", &[("y", Count::One)]),
    ("FloorDiv", &[("z", Count::One)]),
    ("FloorMod", &[("z", Count::One)]),
    (
        "FusedBatchNormGradV3",
        &[
            ("x_backprop", Count::One),
            ("scale_backprop", Count::One),
            ("offset_backprop", Count::One),
            ("reserve_space_4", Count::One),
            ("reserve_space_5", Count::One),
        ],
    ),
    (
        "FusedBatchNormV3",
        &[
            ("y", Count::One),
            ("batch_mean", Count::One),
            ("batch_variance", Count::One),
            ("reserve_space_1", Count::One),
            ("reserve_space_2", Count::One),
            ("reserve_space_3", Count::One),
        ],
    ),
    ("GatherV2", &[("output", Count::One)]),
    ("Greater", &[("z", Count::One)]),
    ("GreaterEqual", &[("z", Count::One)]),
    ("HashTableV2", &[("table_handle", Count::One)]),
    ("Identity", &[("output", Count::One)]),
    ("IdentityN", &[("output", Count::Types("T"))]),
    ("If", &[("output", Count::Types("Tout"))]),
    ("Imag", &[("output", Count::One)]),
    ("InitializeTableFromTextFileV2", &[]),
    ("InitializeTableV2", &[]),
    ("L2Loss", &[("output", Count::One)]),
    ("Less", &[("z", Count::One)]),
    ("LessEqual", &[("z", Count::One)]),
    ("LinSpace", &[("output", Count::One)]),
    ("Log", &[("y", Count::One)]),
    ("LogSoftmax", &[("logsoftmax", Count::One)]),
    ("LogicalAnd", &[("z", Count::One)]),
    ("LogicalNot", &[("y", Count::One)]),
    ("LogicalOr", &[("z", Count::One)]),
    ("LookupTableFindV2", &[("values", Count::One)]),
    ("LookupTableImportV2", &[]),
    ("LookupTableSizeV2", &[("size", Count::One)]),
    ("LoopCond", &[("output", Count::One)]),
    ("MatMul", &[("product", Count::One)]),
    ("Max", &[("output", Count::One)]),
    ("MaxPool", &[("output", Count::One)]),
    ("MaxPoolGrad", &[("output", Count::One)]),
    ("Maximum", &[("z", Count::One)]),
    ("Mean", &[("output", Count::One)]),
    (
        "Merge",
        &[("output", Count::One), ("value_index", Count::One)],
    ),
    ("MergeV2Checkpoints", &[]),
    ("Min", &[("output", Count::One)]),
    ("Minimum", &[("z", Count::One)]),
    ("MirrorPad", &[("output", Count::One)]),
    ("Mul", &[("z", Count::One)]),
    ("Neg", &[("y", Count::One)]),
    ("NextIteration", &[("output", Count::One)]),
    ("NoOp", &[]),
    ("NotEqual", &[("z", Count::One)]),
    ("OneHot", &[("output", Count::One)]),
    ("OnesLike", &[("y", Count::One)]),
    ("Pack", &[("output", Count::One)]),
    ("Pad", &[("output", Count::One)]),
    ("PadV2", &[("output", Count::One)]),
    ("PartitionedCall", &[("output", Count::Types("Tout"))]),
    ("Placeholder", &[("output", Count::One)]),
    ("PlaceholderWithDefault", &[("output", Count::One)]),
    ("Pow", &[("z", Count::One)]),
    ("Print", &[("output", Count::One)]),
    ("PrintV2", &[]),
    ("Prod", &[("output", Count::One)]),
    ("RandomStandardNormal", &[("output", Count::One)]),
    ("RandomUniform", &[("output", Count::One)]),
    ("Range", &[("output", Count::One)]),
    ("ReadVariableOp", &[("value", Count::One)]),
    ("Real", &[("output", Count::One)]),
    ("RealDiv", &[("z", Count::One)]),
    ("Reciprocal", &[("y", Count::One)]),
    ("ReciprocalGrad", &[("z", Count::One)]),
    ("RegexFullMatch", &[("output", Count::One)]),
    ("Relu", &[("activations", Count::One)]),
    ("Relu6", &[("activations", Count::One)]),
    ("Relu6Grad", &[("backprops", Count::One)]),
    ("ReluGrad", &[("backprops", Count::One)]),
    ("Reshape", &[("output", Count::One)]),
    ("ResizeBilinear", &[("resized_images", Count::One)]),
    ("ResizeNearestNeighbor", &[("resized_images", Count::One)]),
    ("ResourceApplyAdagrad", &[]),
    ("ResourceApplyAdagradV2", &[]),
    ("ResourceApplyAdam", &[]),
    ("ResourceApplyGradientDescent", &[]),
    ("ResourceApplyKerasMomentum", &[]),
    ("ResourceApplyMomentum", &[]),
    ("ResourceApplyRMSProp", &[]),
    ("ResourceGather", &[("output", Count::One)]),
    ("ResourceScatterAdd", &[]),
    ("ResourceScatterSub", &[]),
    ("ResourceScatterUpdate", &[]),
    ("ResourceSparseApplyAdagrad", &[]),
    ("ResourceSparseApplyAdagradV2", &[]),
    ("ResourceSparseApplyKerasMomentum", &[]),
    ("ResourceSparseApplyMomentum", &[]),
    ("ResourceSparseApplyRMSProp", &[]),
    ("RestoreV2", &[("tensors", Count::Types("dtypes"))]),
    ("ReverseV2", &[("output", Count::One)]),
    ("Round", &[("y", Count::One)]),
    ("Rsqrt", &[("y", Count::One)]),
    ("RsqrtGrad", &[("z", Count::One)]),
    ("SaveV2", &[]),
    ("Select", &[("output", Count::One)]),
    ("SelectV2", &[("output", Count::One)]),
    ("Shape", &[("output", Count::One)]),
    ("ShapeN", &[("output", Count::Number("N"))]),
    ("ShardedFilename", &[("filename", Count::One)]),
    ("ShardedFilespec", &[("filename", Count::One)]),
    ("Sigmoid", &[("y", Count::One)]),
    ("SigmoidGrad", &[("z", Count::One)]),
    ("Sign", &[("y", Count::One)]),
    ("Sin", &[("y", Count::One)]),
    ("Slice", &[("output", Count::One)]),
    ("Softmax", &[("softmax", Count::One)]),
    (
        "SoftmaxCrossEntropyWithLogits",
        &[("loss", Count::One), ("backprop", Count::One)],
    ),
    ("SpaceToBatchND", &[("output", Count::One)]),
    (
        "SparseAdd",
        &[
            ("sum_indices", Count::One),
            ("sum_values", Count::One),
            ("sum_shape", Count::One),
        ],
    ),
    (
        "SparseFillEmptyRows",
        &[
            ("output_indices", Count::One),
            ("output_values", Count::One),
            ("empty_row_indicator", Count::One),
            ("reverse_index_map", Count::One),
        ],
    ),
    ("SparseReduceMax", &[("output", Count::One)]),
    (
        "SparseReduceMaxSparse",
        &[
            ("output_indices", Count::One),
            ("output_values", Count::One),
            ("output_shape", Count::One),
        ],
    ),
    ("SparseReduceSum", &[("output", Count::One)]),
    (
        "SparseReduceSumSparse",
        &[
            ("output_indices", Count::One),
            ("output_values", Count::One),
            ("output_shape", Count::One),
        ],
    ),
    (
        "SparseReorder",
        &[
            ("output_indices", Count::One),
            ("output_values", Count::One),
        ],
    ),
    (
        "SparseReshape",
        &[("output_indices", Count::One), ("output_shape", Count::One)],
    ),
    ("SparseSegmentMean", &[("output", Count::One)]),
    (
        "SparseSegmentMeanWithNumSegments",
        &[("output", Count::One)],
    ),
    ("SparseSegmentSqrtN", &[("output", Count::One)]),
    (
        "SparseSegmentSqrtNWithNumSegments",
        &[("output", Count::One)],
    ),
    ("SparseSegmentSum", &[("output", Count::One)]),
    ("SparseSegmentSumWithNumSegments", &[("output", Count::One)]),
    (
        "SparseSlice",
        &[
            ("output_indices", Count::One),
            ("output_values", Count::One),
            ("output_shape", Count::One),
        ],
    ),
    (
        "SparseSoftmaxCrossEntropyWithLogits",
        &[("loss", Count::One), ("backprop", Count::One)],
    ),
    ("SparseTensorDenseAdd", &[("output", Count::One)]),
    ("SparseTensorDenseMatMul", &[("product", Count::One)]),
    ("SparseToDense", &[("dense", Count::One)]),
    ("Split", &[("output", Count::Number("num_split"))]),
    ("SplitV", &[("output", Count::Number("num_split"))]),
    ("Sqrt", &[("y", Count::One)]),
    ("SqrtGrad", &[("z", Count::One)]),
    ("Square", &[("y", Count::One)]),
    ("SquaredDifference", &[("z", Count::One)]),
    ("Squeeze", &[("output", Count::One)]),
    (
        "StatefulPartitionedCall",
        &[("output", Count::Types("Tout"))],
    ),
    ("StatelessIf", &[("output", Count::Types("Tout"))]),
    ("StatelessWhile", &[("output", Count::Types("T"))]),
    ("StaticRegexFullMatch", &[("output", Count::One)]),
    ("StopGradient", &[("output", Count::One)]),
    ("StridedSlice", &[("output", Count::One)]),
    ("StridedSliceGrad", &[("output", Count::One)]),
    ("StringFormat", &[("output", Count::One)]),
    ("StringJoin", &[("output", Count::One)]),
    ("Sub", &[("z", Count::One)]),
    ("Sum", &[("output", Count::One)]),
    (
        "Switch",
        &[("output_false", Count::One), ("output_true", Count::One)],
    ),
    ("Tanh", &[("y", Count::One)]),
    ("TanhGrad", &[("z", Count::One)]),
    (
        "TensorListConcatV2",
        &[("tensor", Count::One), ("lengths", Count::One)],
    ),
    ("TensorListElementShape", &[("element_shape", Count::One)]),
    ("TensorListFromTensor", &[("output_handle", Count::One)]),
    ("TensorListGetItem", &[("item", Count::One)]),
    ("TensorListLength", &[("length", Count::One)]),
    (
        "TensorListPopBack",
        &[("output_handle", Count::One), ("tensor", Count::One)],
    ),
    ("TensorListPushBack", &[("output_handle", Count::One)]),
    ("TensorListReserve", &[("handle", Count::One)]),
    ("TensorListSetItem", &[("output_handle", Count::One)]),
    ("TensorListSplit", &[("output_handle", Count::One)]),
    ("TensorListStack", &[("tensor", Count::One)]),
    ("Tile", &[("output", Count::One)]),
    ("Transpose", &[("y", Count::One)]),
    ("TruncateDiv", &[("z", Count::One)]),
    ("TruncateMod", &[("z", Count::One)]),
    ("TruncatedNormal", &[("output", Count::One)]),
    ("Unique", &[("y", Count::One), ("idx", Count::One)]),
    ("Unpack", &[("output", Count::Number("num"))]),
    ("UnsortedSegmentSum", &[("output", Count::One)]),
    ("VarHandleOp", &[("resource", Count::One)]),
    ("VarIsInitializedOp", &[("is_initialized", Count::One)]),
    ("VariableShape", &[("output", Count::One)]),
    ("VariableV2", &[("ref", Count::One)]),
    ("While", &[("output", Count::Types("T"))]),
    ("ZerosLike", &[("y", Count::One)]),
];

/// The output arguments of a node of `op_type` with `attrs`, each with how many tensors it
/// holds; `None` for an op type not in the table or a list whose length attribute is
/// missing.
pub(crate) fn output_args(
    op_type: &str,
    node: &str,
    attrs: &BTreeMap<String, AttrValue>,
) -> Option<Vec<(&'static str, usize)>> {
    let at = OUTPUT_ARGS
        .binary_search_by(|(name, _)| (*name).cmp(op_type))
        .ok()?;
    let attrs = Attrs { node, attrs };
    OUTPUT_ARGS[at]
        .1
        .iter()
        .map(|&(name, count)| {
            let length = match count {
                Count::One => 1,
                Count::Number(attr) => usize::try_from(attrs.int(attr).ok()?).ok()?,
                Count::Types(attr) => attrs.dtypes(attr).ok()?.len(),
            };
            Some((name, length))
        })
        .collect()
}

/// The flat output index of `arg:index` of a node (`None` where it names no output).
pub(crate) fn flat_index(args: &[(&str, usize)], arg: &str, index: usize) -> Option<usize> {
    let mut before = 0;
    for &(name, length) in args {
        if name == arg {
            return (index < length).then_some(before + index);
        }
        before += length;
    }
    None
}

/// The `(arg, index)` of flat output `flat` of a node (`None` past its outputs).
pub(crate) fn arg_index(
    args: &[(&'static str, usize)],
    flat: usize,
) -> Option<(&'static str, usize)> {
    let mut before = 0;
    for &(name, length) in args {
        if flat < before + length {
            return Some((name, flat - before));
        }
        before += length;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_type_has_its_output_arguments_and_the_table_is_sorted() {
        assert!(OUTPUT_ARGS.windows(2).all(|w| w[0].0 < w[1].0));
        let missing: Vec<&str> = super::super::op_types()
            .filter(|op| {
                OUTPUT_ARGS
                    .binary_search_by(|(name, _)| name.cmp(op))
                    .is_err()
            })
            .collect();
        assert!(missing.is_empty(), "no output arguments for {missing:?}");
    }

    #[test]
    fn lists_count_from_their_attributes() {
        let attrs: BTreeMap<String, AttrValue> =
            [("num_split".to_string(), AttrValue::from(3i64))].into();
        let split = output_args("Split", "s", &attrs).unwrap();
        assert_eq!(split, [("output", 3)]);
        assert_eq!(flat_index(&split, "output", 2), Some(2));
        assert_eq!(flat_index(&split, "output", 3), None);
        assert_eq!(arg_index(&split, 1), Some(("output", 1)));
        let none = BTreeMap::new();
        let unique = output_args("Unique", "u", &none).unwrap();
        assert_eq!(flat_index(&unique, "idx", 0), Some(1));
        assert_eq!(arg_index(&unique, 1), Some(("idx", 0)));
        assert_eq!(arg_index(&unique, 2), None);
        assert!(output_args("Split", "s", &none).is_none());
        assert!(output_args("NoSuchOp", "n", &none).is_none());
    }
}
