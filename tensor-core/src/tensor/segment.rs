//! [`Tensor::segment_reduce`] and [`Tensor::scatter_rows`]: the segment reduction and the
//! row scatter (`plan::segment`) on a tensor's rows, the device ops under every sparse op's
//! values.

use std::sync::Arc;

use crate::device::Device;
use crate::dtype::DataType;
use crate::element::{Element, Scalar};
use crate::error::{Error, Result};
use crate::ops::Op;
use crate::plan::segment::{SegmentOp, Segments};
use crate::shape::TensorShape;

use super::Tensor;

impl Tensor {
    /// Output row `s` combines, by `op`, the rows `rows[offsets[s]..offsets[s + 1]]` of this
    /// tensor (its first dim indexes rows; a scalar is one row), each times its entry of
    /// `weights` where given; empty segments of a gather or a maximum hold `fill`. `rows`
    /// and `offsets` are int32 vectors on this tensor's device (offsets rising from 0 to the
    /// number of rows read). The result is `[offsets.len() - 1, dims[1..]]`.
    pub fn segment_reduce(
        &self,
        op: SegmentOp,
        rows: &Tensor,
        offsets: &Tensor,
        weights: Option<&Tensor>,
        fill: Scalar,
    ) -> Result<Tensor> {
        let name = op.name();
        for other in [Some(rows), Some(offsets), weights].into_iter().flatten() {
            self.check_same_device(other, name)?;
        }
        let device = self.device();
        let segments = offsets
            .num_elements()
            .checked_sub(1)
            .ok_or_else(|| Error::invalid(format!("{name} needs at least one offset")))?;
        let shape = with_rows(&self.dims(), segments)?;
        let data = self.contiguous()?;
        let (rows, offsets) = (rows.contiguous()?, offsets.contiguous()?);
        let weights = weights.map(Tensor::contiguous).transpose()?;
        let fill = fill_value(fill, self.dtype(), device)?;
        Tensor::produce(shape, self.dtype(), device, |out| {
            let segments = Segments {
                rows: rows.view(),
                offsets: offsets.view(),
                weights: weights.as_ref().map(Tensor::view),
                fill: fill.view(),
            };
            device.segment_reduce(op, &data.view(), &segments, out)
        })
    }

    /// This tensor's rows (its first dim) scattered into a tensor of `out_rows` rows of the
    /// same width: row `j` into row `rows[j]` (an int32 vector on this tensor's device, its
    /// values distinct and below `out_rows`), every other row `fill`. Any fixed-size dtype.
    pub fn scatter_rows(&self, rows: &Tensor, out_rows: usize, fill: Scalar) -> Result<Tensor> {
        self.check_same_device(rows, "scatter_rows")?;
        let device = self.device();
        let shape = with_rows(&self.dims(), out_rows)?;
        let (data, rows) = (self.contiguous()?, rows.contiguous()?);
        let fill = fill_value(fill, self.dtype(), device)?;
        Tensor::produce(shape, self.dtype(), device, |out| {
            device.scatter_rows(&data.view(), &rows.view(), &fill.view(), out)
        })
    }
}

/// The shape of `rows` rows of a tensor of `dims` (its first dim indexes rows; a scalar is
/// one row): `[rows, dims[1..]]`.
pub(crate) fn with_rows(dims: &[usize], rows: usize) -> Result<TensorShape> {
    let mut out = dims.to_vec();
    match out.first_mut() {
        Some(first) => *first = rows,
        None => out.push(rows),
    }
    TensorShape::new(&out)
}

/// `fill` as one element of `dtype` on `device`: `full` where fill is defined for the
/// dtype; for the storage-only dtypes (float8, quantized) zero bytes, or the value cast
/// from f64.
fn fill_value(fill: Scalar, dtype: DataType, device: &Arc<dyn Device>) -> Result<Tensor> {
    if Op::Fill.is_defined_for(dtype) {
        return Tensor::full([1], fill, dtype, device);
    }
    if !bool::from_scalar(fill) {
        return Tensor::zeros([1], dtype, device);
    }
    Tensor::full([1], fill, DataType::Double, device)?.cast(dtype)
}
