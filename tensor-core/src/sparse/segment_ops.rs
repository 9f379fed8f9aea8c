//! `tf.sparse.segment_sum/mean/sqrt_n` (`SparseSegmentSum`, `...Mean`, `...SqrtN`, with or
//! without `num_segments`) and `tf.nn.embedding_lookup_sparse`: rows of a dense tensor
//! gathered by `indices` and folded into the segments `segment_ids` names, on the data's
//! device, with TensorFlow's checks and messages.

use super::segments::SegmentList;
use super::SparseTensor;
use crate::element::Scalar;
use crate::error::{Error, Result};
use crate::plan::segment::SegmentOp;
use crate::tensor::Tensor;

/// How a sparse segment reduction combines a segment's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combiner {
    /// `SparseSegmentSum`, the `sum` combiner.
    Sum,
    /// `SparseSegmentMean`, the `mean` combiner: the sum over the number of rows (with
    /// weights, over the sum of the weights).
    Mean,
    /// `SparseSegmentSqrtN`, the `sqrtn` combiner: the sum over the square root of the
    /// number of rows (with weights, of the sum of their squares).
    SqrtN,
}

impl Combiner {
    fn op(self) -> SegmentOp {
        match self {
            Combiner::Sum => SegmentOp::Sum,
            Combiner::Mean => SegmentOp::Mean,
            Combiner::SqrtN => SegmentOp::SqrtN,
        }
    }

    /// TensorFlow's op name.
    fn name(self) -> &'static str {
        match self {
            Combiner::Sum => "SparseSegmentSum",
            Combiner::Mean => "SparseSegmentMean",
            Combiner::SqrtN => "SparseSegmentSqrtN",
        }
    }
}

/// An int32 or int64 vector read on the host.
fn host_ids(ids: &Tensor, what: &str) -> Result<Vec<i64>> {
    if ids.rank() != 1 {
        return Err(Error::invalid(format!(
            "{what} should be a vector, got shape {}",
            ids.shape()
        )));
    }
    match ids.dtype() {
        crate::DataType::Int32 => Ok(ids.to_vec::<i32>()?.into_iter().map(i64::from).collect()),
        crate::DataType::Int64 => ids.to_vec::<i64>(),
        other => Err(Error::invalid(format!(
            "{what} must be int32 or int64, not {other}"
        ))),
    }
}

/// `combiner` over segments of the rows of `data` (rank 1 or more): entry `i` reads row
/// `indices[i]` into segment `segment_ids[i]` (non-decreasing). The output has
/// `num_segments` rows, or the last segment id plus one; rows of empty segments are zero.
pub fn segment_reduce(
    combiner: Combiner,
    data: &Tensor,
    indices: &Tensor,
    segment_ids: &Tensor,
    num_segments: Option<i64>,
) -> Result<Tensor> {
    let rows = host_ids(indices, "indices")?;
    let ids = host_ids(segment_ids, "segment_ids")?;
    reduce_rows(combiner, data, &rows, &ids, num_segments, None)
}

/// [`segment_reduce`] of the rows `rows` into the segments `ids`, read on the host, each
/// entry times its weight in `weights` where given.
fn reduce_rows(
    combiner: Combiner,
    data: &Tensor,
    rows: &[i64],
    ids: &[i64],
    num_segments: Option<i64>,
    weights: Option<&Tensor>,
) -> Result<Tensor> {
    if data.rank() == 0 {
        return Err(Error::invalid("Shape must be at least rank 1"));
    }
    let op = combiner.op();
    if !op.is_defined_for(data.dtype()) {
        return Err(Error::invalid(format!(
            "{} is not defined for {} data",
            combiner.name(),
            data.dtype()
        )));
    }
    if rows.len() != ids.len() {
        return Err(Error::invalid(
            "segment_ids and indices should have same size.",
        ));
    }
    if ids.iter().any(|&id| id < 0) {
        return Err(Error::invalid("segment ids must be >= 0"));
    }
    if ids.windows(2).any(|w| w[0] > w[1]) {
        return Err(Error::invalid("segment ids are not increasing"));
    }
    let last = ids.last().map_or(0, |&id| id + 1);
    let segments = match num_segments {
        Some(n) if last > n => return Err(Error::invalid("segment ids must be < num_segments")),
        Some(n) if n < 0 => {
            return Err(Error::invalid(format!(
                "num_segments must be non-negative, got {n}"
            )))
        }
        Some(n) => n,
        None => last,
    };
    let data_rows = data.dims()[0];
    let mut reads = Vec::with_capacity(rows.len());
    for (i, &row) in rows.iter().enumerate() {
        if row < 0 || row as usize >= data_rows {
            return Err(Error::invalid(format!(
                "Bad: indices[{i}] == {row} out of range [0, {data_rows})"
            )));
        }
        reads.push(row as usize);
    }
    let keys: Vec<usize> = ids.iter().map(|&id| id as usize).collect();
    let segments = usize::try_from(segments)
        .map_err(|_| Error::invalid(format!("{segments} segments are too many")))?;
    SegmentList::group(&keys, &reads, segments)?.run(op, data, weights, Scalar::I64(0))
}

/// `tf.nn.embedding_lookup_sparse`: for each row `r` of the sparse ids `ids` (a matrix
/// whose values are int32 or int64 row numbers of `params`, in canonical order), the rows
/// of `params` it names combined by `combiner`, each times its weight in `weights` (a
/// sparse tensor of the same indices) where given. The result has one row per index row
/// up to the last one present (`[last + 1, params.dims[1..]]`), rows without ids zero.
pub fn embedding_lookup_sparse(
    params: &Tensor,
    ids: &SparseTensor,
    weights: Option<&SparseTensor>,
    combiner: Combiner,
) -> Result<Tensor> {
    if ids.rank() != 2 {
        return Err(Error::invalid(format!(
            "embedding_lookup_sparse takes ids of rank 2, got rank {}",
            ids.rank()
        )));
    }
    if let Some(w) = weights {
        if w.nnz() != ids.nnz() || w.indices().to_vec::<i64>()? != ids.indices().to_vec::<i64>()? {
            return Err(Error::invalid(
                "embedding_lookup_sparse's weights must have the indices of its ids",
            ));
        }
    }
    let indices = ids.indices().to_vec::<i64>()?;
    let segment_ids: Vec<i64> = indices.iter().step_by(2).copied().collect();
    reduce_rows(
        combiner,
        params,
        &host_ids(ids.values(), "sparse ids")?,
        &segment_ids,
        None,
        weights.map(SparseTensor::values),
    )
}
