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

    /// TensorFlow's `UnsortedSegmentSum`: output row `s` is the sum of the slices
    /// `self[i...]` whose `segment_ids[i...]` is `s` (the ids' shape a prefix of this
    /// tensor's; int32 or int64); a negative id drops its slice, as TensorFlow's kernel; an
    /// id `num_segments` or more is an error. The result is `[num_segments, dims[ids.rank()..]]`
    /// (the gradient of a gather, densified).
    ///
    /// ```
    /// use polytensor_core::Tensor;
    /// let cpu = polytensor_cpu::CpuDevice::shared();
    /// let data = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], [4], &cpu).unwrap();
    /// let ids = Tensor::from_slice(&[2i32, 0, 2, -1], [4], &cpu).unwrap();
    /// let sums = data.unsorted_segment_sum(&ids, 3).unwrap();
    /// assert_eq!(sums.to_vec::<f32>().unwrap(), [2.0, 0.0, 4.0]);
    /// ```
    pub fn unsorted_segment_sum(
        &self,
        segment_ids: &Tensor,
        num_segments: usize,
    ) -> Result<Tensor> {
        self.check_same_device(segment_ids, "unsorted_segment_sum")?;
        let prefix = segment_ids.rank();
        if self.dims().get(..prefix) != Some(&segment_ids.dims()[..]) {
            return Err(Error::invalid(format!(
                "data.shape = {} does not start with segment_ids.shape = {}",
                self.shape(),
                segment_ids.shape()
            )));
        }
        let ids: Vec<i64> = match segment_ids.dtype() {
            DataType::Int32 => segment_ids
                .to_vec::<i32>()?
                .into_iter()
                .map(i64::from)
                .collect(),
            DataType::Int64 => segment_ids.to_vec::<i64>()?,
            other => {
                return Err(Error::DTypeMismatch {
                    op: "UnsortedSegmentSum",
                    expected: "int32 or int64".into(),
                    found: other,
                })
            }
        };
        if let Some((i, &id)) = ids
            .iter()
            .enumerate()
            .find(|&(_, &id)| id >= num_segments as i64)
        {
            return Err(Error::invalid(format!(
                "segment_ids[{i}] = {id} is out of range [0, {num_segments})"
            )));
        }
        let mut dims = vec![ids.len()];
        dims.extend_from_slice(&self.dims()[prefix..]);
        let mut out = vec![num_segments];
        out.extend_from_slice(&self.dims()[prefix..]);
        // Each slice its own segment, in order (a sum of rows already distinct): the data.
        if ids.len() == num_segments && ids.iter().enumerate().all(|(i, &id)| id == i as i64) {
            return self.reshape(out);
        }
        let too_many = || Error::invalid("UnsortedSegmentSum: more rows than int32 indexes");
        if ids.len() > i32::MAX as usize || num_segments >= i32::MAX as usize {
            return Err(too_many());
        }
        // The slices by segment, each segment's in order: the rows each output row sums.
        let mut order: Vec<usize> = (0..ids.len()).filter(|&i| ids[i] >= 0).collect();
        order.sort_by_key(|&i| ids[i]);
        let mut offsets = vec![0i32; num_segments + 1];
        for &i in &order {
            offsets[ids[i] as usize + 1] += 1;
        }
        for s in 0..num_segments {
            offsets[s + 1] += offsets[s];
        }
        let rows: Vec<i32> = order
            .into_iter()
            .map(|i| i32::try_from(i).map_err(|_| too_many()))
            .collect::<Result<_>>()?;
        let device = self.device();
        self.reshape(dims)?
            .segment_reduce(
                SegmentOp::Sum,
                &Tensor::from_vec(rows, device)?,
                &Tensor::from_vec(offsets, device)?,
                None,
                Scalar::I64(0),
            )?
            .reshape(out)
    }

    /// TensorFlow's `ResourceScatterAdd` / `ResourceScatterSub` (`op` `Add`, `Sub`: rows
    /// `indices[i...]` combined with the slices `updates[i...]`, a row named twice taking
    /// both) and `ResourceScatterUpdate` (`None`: the rows replaced, the last mention of a
    /// row winning), on this tensor as the variable's value. `updates` is `indices.shape +
    /// dims[1..]`, or a scalar for every slice.
    pub fn scatter(
        &self,
        op: Option<crate::ops::BinaryOp>,
        indices: &Tensor,
        updates: &Tensor,
    ) -> Result<Tensor> {
        let rows = *self
            .dims()
            .first()
            .ok_or_else(|| Error::invalid("the variable of a scatter must be at least 1-D"))?;
        let mut dims = indices.dims().to_vec();
        dims.extend_from_slice(&self.dims()[1..]);
        let updates = if updates.rank() == 0 {
            updates.broadcast_to(dims.clone())?
        } else if updates.dims() == dims {
            updates.clone()
        } else {
            return Err(Error::invalid(format!(
                "updates.shape {} must be indices.shape {} + params.shape[1:] {}, or a scalar",
                updates.shape(),
                indices.shape(),
                self.shape()
            )));
        };
        let ids = indices.index_values()?;
        if let Some((i, &id)) = ids
            .iter()
            .enumerate()
            .find(|&(_, &id)| id < 0 || id as usize >= rows)
        {
            return Err(Error::invalid(format!(
                "indices[{i}] = {id} is not in [0, {rows})"
            )));
        }
        let Some(op) = op else {
            if rows > i32::MAX as usize || ids.len() > i32::MAX as usize {
                return Err(Error::invalid(
                    "a scatter of more than 2^31 - 1 rows or indices is beyond the int32 row \
                     numbers",
                ));
            }
            // The last mention of each row.
            let mut last = std::collections::BTreeMap::new();
            for (i, &id) in ids.iter().enumerate() {
                last.insert(id, i as i32);
            }
            let device = self.device();
            let (targets, sources): (Vec<i32>, Vec<i32>) =
                last.into_iter().map(|(id, i)| (id as i32, i)).unzip();
            let mut flat = vec![ids.len()];
            flat.extend_from_slice(&self.dims()[1..]);
            let chosen =
                updates
                    .reshape(flat)?
                    .gather(&Tensor::from_vec(sources, device)?, 0, 0)?;
            let mut updated = self.clone();
            updated.assign_rows(&Tensor::from_vec(targets, device)?, &chosen)?;
            return Ok(updated);
        };
        self.binary(op, &updates.unsorted_segment_sum(indices, rows)?)
    }

    /// Replace this tensor's rows `rows` (distinct, an int32 vector on its device) by
    /// those of `values` (`[rows.len()] + dims[1..]`, of its dtype). In place where the
    /// device has the kernel ([`Device::assign_rows`]) and this is the only reference to
    /// the buffer; into a copy where it is shared; else a select over the whole tensor.
    pub fn assign_rows(&mut self, rows: &Tensor, values: &Tensor) -> Result<()> {
        self.check_same_device(rows, "assign_rows")?;
        self.check_same_device(values, "assign_rows")?;
        let count = *self
            .dims()
            .first()
            .ok_or_else(|| Error::invalid("assign_rows needs at least 1 dim"))?;
        let mut want = vec![rows.num_elements()];
        want.extend_from_slice(&self.dims()[1..]);
        if rows.dtype() != DataType::Int32 || rows.rank() != 1 || values.dims() != want {
            return Err(Error::invalid(format!(
                "assign_rows of {} rows {} into {} needs values of shape {want:?}",
                rows.dtype(),
                values.shape(),
                self.shape()
            )));
        }
        if values.dtype() != self.dtype {
            return Err(Error::DTypeMismatch {
                op: "assign_rows",
                expected: self.dtype.to_string(),
                found: values.dtype(),
            });
        }
        let device = self.device().clone();
        if self.is_contiguous() && self.dtype.is_pod() {
            let (values, rows) = (values.contiguous()?, rows.contiguous()?);
            // This tensor's buffer, written in place where no one else holds it, else a
            // copy of it (the original kept to restore: the kernel checks before it writes).
            let mut target = std::mem::replace(self, values.clone());
            let mut original = None;
            if !target.ref_count_is_one() {
                match target.copied() {
                    Ok(copy) => original = Some(std::mem::replace(&mut target, copy)),
                    Err(error) => {
                        *self = target;
                        return Err(error);
                    }
                }
            }
            let ran = match target.try_out_view() {
                Ok(mut out) => device.assign_rows(&values.view(), &rows.view(), &mut out),
                Err(_) => Ok(false),
            };
            match ran {
                Ok(true) => {
                    *self = target;
                    return Ok(());
                }
                Ok(false) => *self = original.unwrap_or(target),
                Err(error) => {
                    *self = original.unwrap_or(target);
                    return Err(error);
                }
            }
        }
        let placed = values.scatter_rows(rows, count, Scalar::I64(0))?;
        let mut dims = vec![1; self.rank()];
        dims[0] = count;
        let chosen = Tensor::ones([rows.num_elements()], DataType::Bool, &device)?
            .scatter_rows(rows, count, Scalar::Bool(false))?
            .reshape(dims)?;
        *self = chosen.where_(&placed, self)?;
        Ok(())
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
