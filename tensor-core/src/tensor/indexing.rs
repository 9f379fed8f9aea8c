//! Indexing by tensors of indices: `gather` (TensorFlow's `GatherV2`) and `one_hot`
//! (`OneHot`).
//!
//! Indices are read on the host and checked on every device: an index out of range is an
//! error naming it, as on TensorFlow's CPU (TensorFlow's GPU kernels write zeros instead;
//! polytensor reports the same error on every device, so a model fails the same way
//! wherever it runs).

use super::shape_ops::Block;
use super::Tensor;
use crate::dtype::DataType;
use crate::element::Scalar;
use crate::error::{Error, Result};
use crate::ops::BinaryOp;
use crate::shape::TensorShape;

impl Tensor {
    /// The indices of an integer tensor, on the host.
    pub(crate) fn index_values(&self) -> Result<Vec<i64>> {
        if !self.dtype.is_integer() {
            return Err(Error::invalid(format!(
                "indices must be integers, not {}",
                self.dtype
            )));
        }
        self.to_scalars()?
            .into_iter()
            .map(|s| match s {
                Scalar::I64(v) => Ok(v),
                Scalar::U64(v) => i64::try_from(v).map_err(|_| Error::invalid("index overflow")),
                _ => Err(Error::invalid("indices must be integers")),
            })
            .collect()
    }

    /// TensorFlow's `GatherV2`: the slices of this tensor along `axis` that `indices` pick,
    /// for each of the first `batch_dims` dims separately. The result's shape is
    /// `self[..axis] + indices[batch_dims..] + self[axis + 1..]`.
    pub fn gather(&self, indices: &Tensor, axis: i64, batch_dims: i64) -> Result<Tensor> {
        let rank = self.rank() as i64;
        let index_rank = indices.rank() as i64;
        let batch_dims = if batch_dims < 0 {
            batch_dims + index_rank
        } else {
            batch_dims
        };
        let axis = if axis < 0 { axis + rank } else { axis };
        if batch_dims < 0 || batch_dims > index_rank {
            return Err(Error::invalid(format!(
                "Expected batch_dims in the range [{}, {index_rank}], but got {batch_dims}",
                -index_rank
            )));
        }
        if axis < 0 || axis >= rank {
            return Err(Error::invalid(format!(
                "Expected axis in the range [{}, {rank}), but got {axis}",
                -rank
            )));
        }
        if batch_dims > axis {
            return Err(Error::invalid(format!(
                "batch_dims ({batch_dims}) must be less than or equal to axis ({axis})"
            )));
        }
        let (axis, batch) = (axis as usize, batch_dims as usize);
        for d in 0..batch {
            if self.dims()[d] != indices.dims()[d] {
                return Err(Error::invalid(format!(
                    "params.shape[{d}]: {} should be equal to indices.shape[{d}]: {}",
                    self.dims()[d],
                    indices.dims()[d]
                )));
            }
        }
        let values = indices.index_values()?;
        let limit = self.dims()[axis];
        if let Some((i, &bad)) = values
            .iter()
            .enumerate()
            .find(|(_, &v)| v < 0 || v as usize >= limit)
        {
            return Err(Error::invalid(format!(
                "indices[{i}] = {bad} is not in [0, {limit})"
            )));
        }
        if batch == 0 {
            if let Some(gathered) = self.gather_on_device(axis, indices, &values)? {
                return Ok(gathered);
            }
        }
        // Each batch entry's params with `axis` first: [axis, middle.., inner..].
        let batch_count: usize = self.dims()[..batch].iter().product();
        let per_batch = values.len() / batch_count.max(1);
        let flat = self.reshape_batches(batch)?;
        // The gathered axis within one batch entry.
        let within = axis - batch;
        let mut picked = Vec::with_capacity(values.len());
        for b in 0..batch_count {
            let params = flat.sub_slice(b)?;
            let mut perm = vec![within];
            perm.extend((0..params.rank()).filter(|&d| d != within));
            let params = params.permute(&perm)?;
            for &v in &values[b * per_batch..(b + 1) * per_batch] {
                picked.push(params.sub_slice(v as usize)?);
            }
        }
        // [batch, picked.., middle.., inner..] with the picked dims flattened.
        let dims = self.dims();
        let middle = &dims[batch..axis];
        let inner = &dims[axis + 1..];
        let mut gathered = vec![batch_count, per_batch];
        gathered.extend_from_slice(middle);
        gathered.extend_from_slice(inner);
        let blocks: Vec<Block<'_>> = picked.iter().map(Block::Copy).collect();
        let joined = Tensor::from_blocks(
            TensorShape::new(&gathered)?,
            self.dtype,
            self.device(),
            &blocks,
        )?;
        // Move the picked dim after `middle`, then unflatten the batch and indices dims.
        let mut perm = vec![0];
        perm.extend(2..2 + middle.len());
        perm.push(1);
        perm.extend(2 + middle.len()..gathered.len());
        let mut out = dims[..batch].to_vec();
        out.extend_from_slice(middle);
        out.extend_from_slice(&indices.dims()[batch..]);
        out.extend_from_slice(inner);
        joined.permute(&perm)?.reshape(out)
    }

    /// `gather` without batch dims by the device's row gather ([`crate::Device::gather_rows`]),
    /// or `None` where the device composes it; `values` are the checked indices.
    fn gather_on_device(
        &self,
        axis: usize,
        indices: &Tensor,
        values: &[i64],
    ) -> Result<Option<Tensor>> {
        let dims = self.dims();
        let mut out = dims[..axis].to_vec();
        out.extend_from_slice(&indices.dims());
        out.extend_from_slice(&dims[axis + 1..]);
        let shape = TensorShape::new(&out)?;
        if values.is_empty() || shape.num_elements() == 0 || self.dtype == DataType::String {
            return Ok(None);
        }
        let rows: Vec<usize> = values.iter().map(|&v| v as usize).collect();
        let outer: usize = dims[..axis].iter().product();
        let params = self.contiguous()?;
        let device = self.device();
        Tensor::produce_if(shape, self.dtype, device, |out| {
            device.gather_rows(&params.view(), outer, &rows, out)
        })
    }

    /// This tensor with its first `batch` dims merged into one (a leading 1 when none).
    fn reshape_batches(&self, batch: usize) -> Result<Tensor> {
        let dims = self.dims();
        let mut merged = vec![dims[..batch].iter().product::<usize>()];
        merged.extend_from_slice(&dims[batch..]);
        self.reshape(merged)
    }

    /// TensorFlow's `OneHot`: a new dim of `depth` at `axis` (`-1`: last) holding `on` where
    /// its position equals the index and `off` elsewhere (an index outside `[0, depth)`
    /// gives all `off`), in `dtype`.
    pub fn one_hot(
        &self,
        depth: usize,
        on: Scalar,
        off: Scalar,
        axis: i64,
        dtype: DataType,
    ) -> Result<Tensor> {
        if !self.dtype.is_integer() {
            return Err(Error::invalid(format!(
                "OneHot indices must be integers, not {}",
                self.dtype
            )));
        }
        let rank = self.rank() as i64;
        if axis < -1 || axis > rank {
            return Err(Error::invalid(format!(
                "Expected axis to be -1 or between [0, {rank}).  But received: {axis}"
            )));
        }
        let axis = if axis == -1 { rank } else { axis } as usize;
        let device = self.device();
        let positions = Tensor::arange(0i64, depth as i64, 1i64, self.dtype, device)?;
        let mut place = vec![1usize; self.rank() + 1];
        place[axis] = depth;
        let positions = positions.reshape(place)?;
        let hit = self
            .unsqueeze(axis as isize)?
            .binary(BinaryOp::Eq, &positions)?;
        let on = Tensor::full([0usize; 0], on, dtype, device)?;
        let off = Tensor::full([0usize; 0], off, dtype, device)?;
        hit.where_(&on, &off)
    }
}
