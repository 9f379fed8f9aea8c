//! Segment reductions: the one device kernel behind TensorFlow's sparse ops.
//!
//! A segment reduction reads rows of a dense `data` tensor (`[R, W...]`, each row `W`
//! elements) and writes `S` output rows: output row `s` combines the data rows
//! `rows[offsets[s]..offsets[s + 1]]`, in that order, each times its weight where there are
//! weights. One kernel of this shape computes every sparse op's values:
//!
//! - a gather (reorder, slice, retain, fill empty rows, to dense): segments of at most one
//!   row, empty segments taking a fill value ([`SegmentOp::Gather`]);
//! - sparse x dense matmul: the segments are the sparse matrix's rows, the rows gathered
//!   are the dense matrix's rows its columns name, the weights its values
//!   ([`SegmentOp::Sum`]);
//! - `SparseSegmentSum/Mean/SqrtN` and `embedding_lookup_sparse` (with or without weights);
//! - `SparseReduceSum`/`SparseReduceMax`, `SparseAdd`: the segments are output cells, the
//!   rows the stored values that land in them.
//!
//! The structure (which rows, which segments) is the sparse tensor's indices, which are
//! computed on the host, as TensorFlow keeps sparse indices in host memory; the values stay
//! on the device and are reduced there. Each output element is one work-item folding its
//! segment in order, so results are deterministic and equal on every device up to the
//! rounding of fused multiply-adds.

use crate::device::{OutView, TensorView};
use crate::dtype::DataType;
use crate::error::{Error, Result};

/// How the rows of one segment combine into its output row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SegmentOp {
    /// The segment's row (segments hold at most one; of several, the last); an empty
    /// segment takes the fill value. Any fixed-size dtype, moved as bits.
    Gather,
    /// `Σ w·x` over the segment (empty: zero).
    Sum,
    /// `Σ w·x / Σ w` (without weights the mean; empty: zero), as
    /// `tf.sparse.segment_mean` and the `mean` combiner of `embedding_lookup_sparse`.
    Mean,
    /// `Σ w·x / sqrt(Σ w²)` (without weights `Σ x / sqrt(n)`; empty: zero).
    SqrtN,
    /// The largest `x`, NaN where a NaN is not followed by a larger value, as TensorFlow's
    /// `SparseReduceMax` folds (`acc > x ? acc : x`); an empty segment takes the fill value.
    Max,
}

impl SegmentOp {
    /// Every op.
    pub const ALL: [SegmentOp; 5] = [
        SegmentOp::Gather,
        SegmentOp::Sum,
        SegmentOp::Mean,
        SegmentOp::SqrtN,
        SegmentOp::Max,
    ];

    /// The op's name in kernels and messages.
    pub fn name(self) -> &'static str {
        match self {
            SegmentOp::Gather => "segment_gather",
            SegmentOp::Sum => "segment_sum",
            SegmentOp::Mean => "segment_mean",
            SegmentOp::SqrtN => "segment_sqrt_n",
            SegmentOp::Max => "segment_max",
        }
    }

    /// Whether the op is defined for `dtype`: a gather for every fixed-size dtype, sums and
    /// maxima for real numbers (integers and floats), means for floats.
    pub fn is_defined_for(self, dtype: DataType) -> bool {
        let real = (dtype.is_integer() || dtype.is_float()) && dtype.is_computable();
        match self {
            SegmentOp::Gather => dtype.is_pod(),
            SegmentOp::Sum | SegmentOp::Max => real,
            SegmentOp::Mean | SegmentOp::SqrtN => dtype.is_float() && dtype.is_computable(),
        }
    }

    /// Whether the op multiplies by weights (where it is given them).
    pub fn takes_weights(self) -> bool {
        matches!(self, SegmentOp::Sum | SegmentOp::Mean | SegmentOp::SqrtN)
    }
}

/// The operands of a segment reduction beside its data: which rows each segment folds,
/// their weights, and what an empty segment holds.
#[derive(Debug, Clone, Copy)]
pub struct Segments<'a> {
    /// int32 `[N]`: the data row of each entry, grouped by segment.
    pub rows: TensorView<'a>,
    /// int32 `[S + 1]`: segment `s` is entries `offsets[s]..offsets[s + 1]` (non-decreasing,
    /// from 0 to `N`).
    pub offsets: TensorView<'a>,
    /// `[N]` of the data's dtype: each entry's weight (for [`SegmentOp::takes_weights`]).
    pub weights: Option<TensorView<'a>>,
    /// One element of the data's dtype: the value of an empty segment's elements for
    /// [`SegmentOp::Gather`] and [`SegmentOp::Max`].
    pub fill: TensorView<'a>,
}

/// The sizes of a segment reduction, from its checked operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentGeometry {
    /// `R`: rows of the data.
    pub data_rows: usize,
    /// `W`: elements of one row.
    pub width: usize,
    /// `N`: entries (rows read, over all segments).
    pub entries: usize,
    /// `S`: segments (output rows).
    pub segments: usize,
}

impl SegmentGeometry {
    /// The sizes of `op` from `data` into `out` through `segments`, or an `Err` unless
    /// every operand is a contiguous tensor of the dtype and size the kernel reads: the
    /// data `[R, W...]` and the output `[S, W...]` of one dtype for which `op` is defined,
    /// int32 vectors of rows `[N]` and offsets `[S + 1]`, weights `[N]` and the fill
    /// value of the data's dtype, every count below 2^31 (the kernels' int32 positions).
    ///
    /// The values of `rows` and `offsets` live on the device and are not read here; a
    /// backend bounds every row and offset it reads (the CPU returns an `Err`, GPU kernels
    /// skip a row outside the data and clamp offsets to the entries).
    pub fn new(
        op: SegmentOp,
        data: &TensorView<'_>,
        segments: &Segments<'_>,
        out: &OutView<'_>,
    ) -> Result<Self> {
        let dtype = data.dtype();
        if !op.is_defined_for(dtype) {
            return Err(Error::invalid(format!(
                "{} is not defined for {dtype}",
                op.name()
            )));
        }
        let contiguous = |view: &TensorView<'_>, what: &str, want: DataType| {
            let layout = view.layout();
            if view.dtype() != want || !layout.is_contiguous() {
                return Err(Error::invalid(format!(
                    "{}'s {what} must be a contiguous {want} tensor, got {} of shape {}",
                    op.name(),
                    view.dtype(),
                    layout.shape()
                )));
            }
            Ok(layout.num_elements())
        };
        let (out_view, data_dims) = (out.view(), data.layout().shape().dims());
        let total = contiguous(data, "data", dtype)?;
        let produced = contiguous(&out_view, "output", dtype)?;
        let entries = contiguous(&segments.rows, "rows", DataType::Int32)?;
        let bounds = contiguous(&segments.offsets, "offsets", DataType::Int32)?;
        let data_rows = data_dims.first().copied().unwrap_or(1);
        let width: usize = data_dims.iter().skip(1).product();
        let count = bounds
            .checked_sub(1)
            .ok_or_else(|| Error::invalid(format!("{} needs at least one offset", op.name())))?;
        if segments.rows.layout().rank() != 1 || segments.offsets.layout().rank() != 1 {
            return Err(Error::invalid(format!(
                "{}'s rows and offsets must be vectors",
                op.name()
            )));
        }
        let out_dims = out_view.layout().shape().dims();
        let out_width: usize = out_dims.iter().skip(1).product();
        if out_dims.first().copied().unwrap_or(1) != count
            || (count > 0 && out_width != width)
            || produced != count * width
            || total != data_rows * width
        {
            return Err(Error::invalid(format!(
                "{} of data {} into {count} segments cannot write an output of shape {}",
                op.name(),
                data.layout().shape(),
                out_view.layout().shape()
            )));
        }
        if let Some(weights) = &segments.weights {
            if contiguous(weights, "weights", dtype)? != entries {
                return Err(Error::invalid(format!(
                    "{} has {entries} rows but {} weights",
                    op.name(),
                    weights.layout().num_elements()
                )));
            }
        }
        if contiguous(&segments.fill, "fill value", dtype)? != 1 {
            return Err(Error::invalid(format!(
                "{}'s fill value must be one element",
                op.name()
            )));
        }
        for (size, what) in [
            (total, "data elements"),
            (produced, "output elements"),
            (bounds, "offsets"),
            (entries, "rows"),
        ] {
            if size > i32::MAX as usize {
                return Err(Error::invalid(format!(
                    "{} of {size} {what} is beyond the kernels' int32 positions",
                    op.name()
                )));
            }
        }
        Ok(Self {
            data_rows,
            width,
            entries,
            segments: count,
        })
    }
}

/// The sizes of a row scatter (`Device::scatter_rows`): data row `j` is written to output
/// row `rows[j]`, every other output row holds the fill value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScatterGeometry {
    /// `N`: rows of the data (entries scattered).
    pub entries: usize,
    /// `W`: elements of one row.
    pub width: usize,
    /// Rows of the output.
    pub out_rows: usize,
}

impl ScatterGeometry {
    /// The sizes of a scatter of `data` (`[N, W...]`) into `out` (`[R, W...]`, same dtype,
    /// any fixed-size one) by the int32 vector `rows` (`[N]`), with the one-element `fill`
    /// (none: `out`'s other rows kept); or an `Err` unless every operand is contiguous, of
    /// that dtype and size, with counts below 2^31. The rows' values are not read here:
    /// backends skip (GPU) or refuse (CPU) a row outside the output, and callers pass
    /// distinct rows.
    pub fn new(
        data: &TensorView<'_>,
        rows: &TensorView<'_>,
        fill: Option<&TensorView<'_>>,
        out: &OutView<'_>,
    ) -> Result<Self> {
        let dtype = data.dtype();
        let out_view = out.view();
        let fits = |view: &TensorView<'_>, want: DataType| {
            view.dtype() == want && view.layout().is_contiguous()
        };
        if !dtype.is_pod()
            || !fits(data, dtype)
            || !fits(&out_view, dtype)
            || !fill.is_none_or(|f| fits(f, dtype) && f.layout().num_elements() == 1)
            || !fits(rows, DataType::Int32)
            || rows.layout().rank() != 1
        {
            return Err(Error::invalid(format!(
                "scatter_rows needs contiguous data, output and one fill element of one \
                 fixed-size dtype and an int32 vector of rows, got {} data, {} output, {} \
                 rows of shape {}",
                dtype,
                out_view.dtype(),
                rows.dtype(),
                rows.layout().shape()
            )));
        }
        let (data_dims, out_dims) = (
            data.layout().shape().dims(),
            out_view.layout().shape().dims(),
        );
        let entries = data_dims.first().copied().unwrap_or(1);
        let width: usize = data_dims.iter().skip(1).product();
        let out_rows = out_dims.first().copied().unwrap_or(1);
        let out_width: usize = out_dims.iter().skip(1).product();
        if rows.layout().num_elements() != entries || (entries > 0 && out_width != width) {
            return Err(Error::invalid(format!(
                "scatter_rows of data {} by {} rows cannot write an output of shape {}",
                data.layout().shape(),
                rows.layout().num_elements(),
                out_view.layout().shape()
            )));
        }
        let produced = out_view.layout().num_elements();
        if produced > i32::MAX as usize || data.layout().num_elements() > i32::MAX as usize {
            return Err(Error::invalid(
                "scatter_rows of more than 2^31 - 1 elements is beyond the kernels' int32 \
                 positions",
            ));
        }
        Ok(Self {
            entries,
            width: out_width,
            out_rows,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_are_defined_for_the_dtypes_tensorflow_has_them_for() {
        assert!(SegmentOp::Gather.is_defined_for(DataType::Complex128));
        assert!(SegmentOp::Gather.is_defined_for(DataType::Bool));
        assert!(!SegmentOp::Gather.is_defined_for(DataType::String));
        assert!(SegmentOp::Sum.is_defined_for(DataType::Int64));
        assert!(!SegmentOp::Sum.is_defined_for(DataType::Bool));
        assert!(!SegmentOp::Max.is_defined_for(DataType::Complex64));
        assert!(SegmentOp::Mean.is_defined_for(DataType::BFloat16));
        assert!(!SegmentOp::SqrtN.is_defined_for(DataType::Int32));
        assert!(SegmentOp::ALL.iter().all(|op| op.takes_weights()
            == matches!(op, SegmentOp::Sum | SegmentOp::Mean | SegmentOp::SqrtN)));
    }
}
