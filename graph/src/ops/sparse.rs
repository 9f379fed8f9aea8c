//! TensorFlow's sparse ops (`SparseToDense`, `SparseTensorDenseMatMul`, `SparseReduceSum`,
//! `SparseReduceSumSparse`, `SparseReduceMax`, `SparseReduceMaxSparse`, `SparseAdd`,
//! `SparseTensorDenseAdd`, `SparseReorder`, `SparseReshape`, `SparseSlice`,
//! `SparseSegmentSum/Mean/SqrtN` with and without `WithNumSegments`,
//! `SparseFillEmptyRows`): a sparse operand is its three component inputs, a sparse result
//! its component outputs, and the kernels are `polytensor_core::sparse`'s.

use polytensor_core::sparse::{segment_reduce, Combiner, SparseReduce};
use polytensor_core::{DataType, Error, PartialTensorShape, Result, Scalar, SparseTensor, Tensor};

use super::kernels::{Outputs, RunCtx};
use super::{InferCtx, Source, Value};
use crate::graph::Typed;

/// A sparse op.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Sparse {
    /// `SparseToDense`: indices, output shape, values, default value.
    ToDense,
    /// `SparseTensorDenseMatMul`: a's indices, values and shape, then b.
    DenseMatMul,
    /// `SparseReduceSum`/`Max` (`sparse`: the `...Sparse` form): a sparse tensor, then the
    /// reduction axes.
    Reduce(SparseReduce, bool),
    /// `SparseAdd`: two sparse tensors, then the threshold.
    Add,
    /// `SparseTensorDenseAdd`: a sparse tensor, then a dense one.
    DenseAdd,
    /// `SparseReorder`: a sparse tensor.
    Reorder,
    /// `SparseReshape`: indices, shape, new shape.
    Reshape,
    /// `SparseSlice`: a sparse tensor, start, size.
    Slice,
    /// `SparseSegmentSum/Mean/SqrtN` (`true`: `...WithNumSegments`): data, indices,
    /// segment ids (and the number of segments).
    Segment(Combiner, bool),
    /// `SparseFillEmptyRows`: a sparse tensor, then the default value.
    FillEmptyRows,
}

impl Sparse {
    /// The type attributes tied to the inputs.
    pub(crate) fn typed(self) -> &'static [(&'static str, Source)] {
        use Source::Input;
        match self {
            Sparse::ToDense => &[
                ("T", Input(2)),
                ("T", Input(3)),
                ("Tindices", Input(0)),
                ("Tindices", Input(1)),
            ],
            Sparse::DenseMatMul => &[("T", Input(1)), ("T", Input(3)), ("Tindices", Input(0))],
            Sparse::Reduce(..) | Sparse::Reorder | Sparse::Slice => &[("T", Input(1))],
            Sparse::Add => &[("T", Input(1)), ("T", Input(4)), ("Treal", Input(6))],
            Sparse::DenseAdd => &[
                ("T", Input(1)),
                ("T", Input(3)),
                ("Tindices", Input(0)),
                ("Tindices", Input(2)),
            ],
            Sparse::Reshape => &[],
            Sparse::Segment(_, false) => &[
                ("T", Input(0)),
                ("Tidx", Input(1)),
                ("Tsegmentids", Input(2)),
            ],
            Sparse::Segment(_, true) => &[
                ("T", Input(0)),
                ("Tidx", Input(1)),
                ("Tsegmentids", Input(2)),
                ("Tnumsegments", Input(3)),
            ],
            Sparse::FillEmptyRows => &[("T", Input(1)), ("T", Input(3))],
        }
    }

    /// The number of inputs.
    fn arity(self) -> usize {
        match self {
            Sparse::ToDense | Sparse::DenseMatMul | Sparse::Reduce(..) | Sparse::DenseAdd => 4,
            Sparse::Add => 7,
            Sparse::Reorder | Sparse::Reshape | Sparse::Segment(_, false) => 3,
            Sparse::Slice => 5,
            Sparse::Segment(_, true) | Sparse::FillEmptyRows => 4,
        }
    }
}

/// Sparse op types by TensorFlow's name.
pub(crate) const OPS: &[(&str, Sparse)] = &[
    ("SparseToDense", Sparse::ToDense),
    ("SparseTensorDenseMatMul", Sparse::DenseMatMul),
    ("SparseReduceSum", Sparse::Reduce(SparseReduce::Sum, false)),
    (
        "SparseReduceSumSparse",
        Sparse::Reduce(SparseReduce::Sum, true),
    ),
    ("SparseReduceMax", Sparse::Reduce(SparseReduce::Max, false)),
    (
        "SparseReduceMaxSparse",
        Sparse::Reduce(SparseReduce::Max, true),
    ),
    ("SparseAdd", Sparse::Add),
    ("SparseTensorDenseAdd", Sparse::DenseAdd),
    ("SparseReorder", Sparse::Reorder),
    ("SparseReshape", Sparse::Reshape),
    ("SparseSlice", Sparse::Slice),
    ("SparseSegmentSum", Sparse::Segment(Combiner::Sum, false)),
    ("SparseSegmentMean", Sparse::Segment(Combiner::Mean, false)),
    (
        "SparseSegmentSqrtN",
        Sparse::Segment(Combiner::SqrtN, false),
    ),
    (
        "SparseSegmentSumWithNumSegments",
        Sparse::Segment(Combiner::Sum, true),
    ),
    (
        "SparseSegmentMeanWithNumSegments",
        Sparse::Segment(Combiner::Mean, true),
    ),
    (
        "SparseSegmentSqrtNWithNumSegments",
        Sparse::Segment(Combiner::SqrtN, true),
    ),
    ("SparseFillEmptyRows", Sparse::FillEmptyRows),
];

/// The static outputs of `op` as TensorFlow's shape functions give them: dtypes, and the
/// dims that follow from the inputs' static shapes and constant values (an index matrix is
/// `(None, rank)` where the rank is known).
pub(crate) fn infer(op: Sparse, cx: &InferCtx<'_>) -> Result<Vec<Typed>> {
    let inputs = cx.exactly(op.arity())?;
    let unknown = PartialTensorShape::unknown_rank;
    let shape = |dims: &[Option<usize>]| PartialTensorShape::new(dims);
    // Dim `d` of input `i`'s static shape, where known.
    let dim = |i: usize, d: usize| -> Option<usize> {
        inputs[i]
            .1
            .dims()
            .and_then(|dims| dims.get(d).copied().flatten())
    };
    // Entry `k` of constant input `i`, where it is a non-negative constant.
    let entry = |i: usize, k: usize| -> Option<usize> {
        cx.const_ints(i)
            .and_then(|v| v.get(k).copied())
            .and_then(|v| usize::try_from(v).ok())
    };
    let int64 = DataType::Int64;
    Ok(match op {
        Sparse::ToDense => {
            let out = match cx.const_ints(1) {
                Some(dims) => shape(
                    &dims
                        .iter()
                        .map(|&d| usize::try_from(d).ok())
                        .collect::<Vec<_>>(),
                )?,
                // A shape vector longer than any rank is the shape's own error.
                None => match dim(1, 0) {
                    Some(r) if r > polytensor_core::shape::MAX_RANK => {
                        return Err(cx.error(format!("a shape of {r} dims is past the rank limit")))
                    }
                    Some(r) => shape(&vec![None; r])?,
                    None => unknown(),
                },
            };
            vec![(inputs[2].0, out)]
        }
        Sparse::DenseMatMul => {
            let attrs = cx.attrs();
            let (adjoint_a, adjoint_b) = (
                attrs.bool_or("adjoint_a", false)?,
                attrs.bool_or("adjoint_b", false)?,
            );
            let rows = entry(2, usize::from(adjoint_a));
            let columns = dim(3, usize::from(!adjoint_b));
            vec![(inputs[1].0, shape(&[rows, columns])?)]
        }
        Sparse::Reduce(_, false) => vec![(inputs[1].0, unknown())],
        Sparse::Reduce(_, true) => vec![
            (int64, unknown()),
            (inputs[1].0, unknown()),
            (int64, unknown()),
        ],
        Sparse::Add | Sparse::Slice => {
            let rank = dim(2, 0);
            vec![
                (int64, shape(&[None, rank])?),
                (inputs[1].0, shape(&[None])?),
                (int64, shape(&[rank])?),
            ]
        }
        Sparse::DenseAdd => vec![(inputs[3].0, inputs[3].1.clone())],
        Sparse::Reorder => vec![
            (int64, shape(&[dim(0, 0).or(dim(1, 0)), dim(0, 1)])?),
            (inputs[1].0, shape(&[dim(1, 0).or(dim(0, 0))])?),
        ],
        Sparse::Reshape => {
            let rank = dim(2, 0);
            vec![
                (int64, shape(&[dim(0, 0), rank])?),
                (int64, shape(&[rank])?),
            ]
        }
        Sparse::Segment(_, counted) => {
            let out = match inputs[0].1.dims() {
                Some(dims) if !dims.is_empty() => {
                    let mut out = dims.to_vec();
                    out[0] = if counted { entry(3, 0) } else { None };
                    shape(&out)?
                }
                _ => unknown(),
            };
            vec![(inputs[0].0, out)]
        }
        Sparse::FillEmptyRows => vec![
            (int64, shape(&[None, dim(0, 1).or(dim(2, 0))])?),
            (inputs[1].0, shape(&[None])?),
            (DataType::Bool, shape(&[entry(2, 0)])?),
            (int64, shape(&[dim(0, 0).or(dim(1, 0))])?),
        ],
    })
}

/// The sparse tensor of inputs `first..first + 3` (indices, values, shape; int32
/// indices and shapes are widened, as `SparseToDense` allows them).
fn sparse_input(cx: &RunCtx<'_, '_>, first: usize) -> Result<SparseTensor> {
    let int64 = |i: usize| -> Result<Tensor> {
        let t = cx.tensor(i)?.into_owned();
        if t.dtype() == DataType::Int64 {
            Ok(t)
        } else {
            t.cast(DataType::Int64)
        }
    };
    SparseTensor::new(
        int64(first)?,
        cx.tensor(first + 1)?.into_owned(),
        int64(first + 2)?,
    )
}

/// Tensors as a kernel's outputs.
fn outputs(tensors: impl IntoIterator<Item = Tensor>) -> Outputs {
    tensors.into_iter().map(Value::Tensor).collect()
}

/// The three outputs of a sparse result.
fn sparse_outputs(sparse: SparseTensor) -> Outputs {
    outputs([
        sparse.indices().clone(),
        sparse.values().clone(),
        sparse.dense_shape().clone(),
    ])
}

/// A scalar input as a [`Scalar`].
fn scalar(cx: &RunCtx<'_, '_>, i: usize) -> Result<Scalar> {
    let t = cx.tensor(i)?;
    if t.num_elements() != 1 {
        return Err(Error::invalid(format!(
            "input {i} of '{}' must be a scalar, got shape {}",
            cx.node.name,
            t.shape()
        )));
    }
    if t.dtype() == DataType::String {
        // String values default to the empty string, the one default they take.
        return match t.to_strings()?[0].is_empty() {
            true => Ok(Scalar::I64(0)),
            false => Err(Error::invalid(format!(
                "'{}': a string default value other than the empty string is not supported",
                cx.node.name
            ))),
        };
    }
    Ok(t.to_scalars()?[0])
}

/// Run `op`.
pub(crate) fn run(op: Sparse, cx: &RunCtx<'_, '_>) -> Result<Outputs> {
    let attrs = cx.attrs();
    let flag = |name: &str| attrs.bool_or(name, false);
    let one = |t: Tensor| outputs([t]);
    match op {
        Sparse::ToDense => {
            let indices = cx.tensor(0)?.cast(DataType::Int64)?;
            let indices = match indices.rank() {
                0 => indices.reshape([1, 1])?,
                1 => {
                    let n = indices.num_elements();
                    indices.reshape([n, 1])?
                }
                _ => indices,
            };
            let shape = cx.tensor(1)?.cast(DataType::Int64)?;
            let values = cx.tensor(2)?.into_owned();
            let count = indices.dims()[0];
            let values = if values.rank() == 0 {
                values.broadcast_to([count])?.contiguous()?
            } else {
                values
            };
            let sparse = SparseTensor::new(indices, values, shape)?;
            let default = Some(scalar(cx, 3)?).filter(|_| sparse.dtype() != DataType::String);
            Ok(one(if attrs.bool_or("validate_indices", true)? {
                sparse.to_dense(default)?
            } else {
                sparse.to_dense_unordered(default)?
            }))
        }
        Sparse::DenseMatMul => {
            let a = sparse_input(cx, 0)?;
            Ok(one(a.sparse_dense_matmul(
                &*cx.tensor(3)?,
                flag("adjoint_a")?,
                flag("adjoint_b")?,
            )?))
        }
        Sparse::Reduce(reduce, sparse) => {
            let a = sparse_input(cx, 0)?;
            let axes = cx.ints(3)?;
            let keep = flag("keep_dims")?;
            Ok(if sparse {
                sparse_outputs(a.reduce_sparse(reduce, &axes, keep)?)
            } else {
                one(a.reduce(reduce, &axes, keep)?)
            })
        }
        Sparse::Add => {
            let (a, b) = (sparse_input(cx, 0)?, sparse_input(cx, 3)?);
            let thresh = scalar(cx, 6)?.to_f64();
            Ok(sparse_outputs(a.add(&b, thresh)?))
        }
        Sparse::DenseAdd => Ok(one(sparse_input(cx, 0)?.add_dense(&*cx.tensor(3)?)?)),
        Sparse::Reorder => {
            let reordered = sparse_input(cx, 0)?.reorder()?;
            Ok(outputs([
                reordered.indices().clone(),
                reordered.values().clone(),
            ]))
        }
        Sparse::Reshape => {
            let indices = cx.tensor(0)?.into_owned();
            let count = indices.dims().first().copied().unwrap_or(0);
            // The values play no part: stand-ins of the right count.
            let values = Tensor::zeros([count], DataType::Bool, indices.device())?;
            let sparse = SparseTensor::new(indices, values, cx.tensor(1)?.into_owned())?;
            let reshaped = sparse.reshape(&cx.ints(2)?)?;
            Ok(outputs([
                reshaped.indices().clone(),
                reshaped.dense_shape().clone(),
            ]))
        }
        Sparse::Slice => {
            let a = sparse_input(cx, 0)?;
            Ok(sparse_outputs(a.slice(&cx.ints(3)?, &cx.ints(4)?)?))
        }
        Sparse::Segment(combiner, counted) => {
            let num_segments = if counted {
                Some(scalar(cx, 3)?.to_f64() as i64)
            } else {
                None
            };
            Ok(one(segment_reduce(
                combiner,
                &*cx.tensor(0)?,
                &*cx.tensor(1)?,
                &*cx.tensor(2)?,
                num_segments,
            )?))
        }
        Sparse::FillEmptyRows => {
            let a = sparse_input(cx, 0)?;
            let (filled, rows) = a.fill_empty_rows(scalar(cx, 3)?)?;
            let device = filled.values().device().clone();
            let empty = Tensor::from_slice(
                &rows.empty_row_indicator,
                [rows.empty_row_indicator.len()],
                &device,
            )?;
            let reverse = Tensor::from_slice(
                &rows.reverse_index_map,
                [rows.reverse_index_map.len()],
                &device,
            )?;
            Ok(outputs([
                filled.indices().clone(),
                filled.values().clone(),
                empty,
                reverse,
            ]))
        }
    }
}
