//! TensorFlow's `SpaceToBatchND` and `BatchToSpaceND`, which it writes around a dilated
//! convolution (Keras's dilated and causal `Conv1D`): blocks of the spatial dims moved into
//! the batch and back, as TensorFlow defines them, by a pad, reshapes and one permutation
//! (a copy where the layout needs one), so they run on every device.

use super::Tensor;
use crate::error::{Error, Result};

/// `block` checked as TensorFlow's kernels check it against an input of `rank` dims (a
/// positive size per spatial dim, batch and spatial dims within the rank).
fn check_block(block: &[usize], rank: usize) -> Result<()> {
    if let Some(at) = block.iter().position(|&b| b == 0) {
        return Err(Error::invalid(format!(
            "All values in block_shape must be positive, got value, 0 at index {at}."
        )));
    }
    if rank < block.len() + 1 {
        return Err(Error::invalid(format!(
            "input rank should be >= {} instead of {rank}",
            block.len() + 1
        )));
    }
    Ok(())
}

impl Tensor {
    /// TensorFlow's `SpaceToBatchND`: spatial dims `1..=block.len()` padded by `paddings`
    /// (zeros), cut into blocks of `block`, each block position becoming a batch of its own:
    /// `[batch, s1, .., sM, rest..]` to `[batch * prod(block), p1 / b1, .., pM / bM, rest..]`.
    pub fn space_to_batch_nd(
        &self,
        block: &[usize],
        paddings: &[(usize, usize)],
    ) -> Result<Tensor> {
        check_block(block, self.rank())?;
        if paddings.len() != block.len() {
            return Err(Error::invalid(format!(
                "paddings should have shape [{}, 2] instead of [{}, 2]",
                block.len(),
                paddings.len()
            )));
        }
        let m = block.len();
        let mut all = vec![(0, 0); self.rank()];
        all[1..=m].copy_from_slice(paddings);
        let padded = self.pad(&all, 0i64)?;
        let dims = padded.dims().to_vec();
        let mut split = vec![dims[0]];
        for (k, &b) in block.iter().enumerate() {
            let d = dims[k + 1];
            if !d.is_multiple_of(b) {
                return Err(Error::invalid(format!(
                    "padded_shape[{k}]={d} is not divisible by block_shape[{k}]={b}"
                )));
            }
            split.extend([d / b, b]);
        }
        split.extend_from_slice(&dims[m + 1..]);
        // [batch, o1, b1, .., oM, bM, rest] to [b1, .., bM, batch, o1, .., oM, rest].
        let mut perm: Vec<usize> = (0..m).map(|k| 2 + 2 * k).collect();
        perm.push(0);
        perm.extend((0..m).map(|k| 1 + 2 * k));
        perm.extend(2 * m + 1..split.len());
        let moved = padded.reshape(split.clone())?.permute(&perm)?;
        let batches = block
            .iter()
            .try_fold(dims[0], |p, &b| p.checked_mul(b))
            .ok_or_else(|| Error::invalid("the batch times the block sizes overflows"))?;
        let mut out = vec![batches];
        out.extend((0..m).map(|k| split[1 + 2 * k]));
        out.extend_from_slice(&dims[m + 1..]);
        moved.reshape(out)
    }

    /// TensorFlow's `BatchToSpaceND`, the inverse of
    /// [`space_to_batch_nd`](Self::space_to_batch_nd): batches of `prod(block)` interleaved back into the
    /// spatial dims, then `crops` cut from each end of them.
    pub fn batch_to_space_nd(&self, block: &[usize], crops: &[(usize, usize)]) -> Result<Tensor> {
        check_block(block, self.rank())?;
        if crops.len() != block.len() {
            return Err(Error::invalid(format!(
                "crops should have shape [{}, 2] instead of [{}, 2]",
                block.len(),
                crops.len()
            )));
        }
        let m = block.len();
        let dims = self.dims().to_vec();
        // A product past usize divides no batch.
        let blocks = block
            .iter()
            .try_fold(1usize, |p, &b| p.checked_mul(b))
            .unwrap_or(usize::MAX);
        if !dims[0].is_multiple_of(blocks) {
            return Err(Error::invalid(format!(
                "Input batch dimension ({}) is not divisible by product of block sizes ({blocks})",
                dims[0]
            )));
        }
        let batch = dims[0] / blocks;
        // [b1, .., bM, batch, s1, .., sM, rest] to [batch, s1, b1, .., sM, bM, rest].
        let mut split = block.to_vec();
        split.extend_from_slice(&[batch]);
        split.extend_from_slice(&dims[1..]);
        let mut perm = vec![m];
        for k in 0..m {
            perm.extend([m + 1 + k, k]);
        }
        perm.extend(2 * m + 1..split.len());
        let mut joined = vec![batch];
        for k in 0..m {
            joined.push(dims[k + 1] * block[k]);
        }
        joined.extend_from_slice(&dims[m + 1..]);
        let mut out = self
            .reshape(split)?
            .permute(&perm)?
            .reshape(joined.clone())?;
        for (k, &(start, end)) in crops.iter().enumerate() {
            let size = joined[k + 1];
            let kept = size
                .checked_sub(start)
                .and_then(|left| left.checked_sub(end))
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "cropped_shape[{k}]={} must be non-negative",
                        size as i128 - start as i128 - end as i128
                    ))
                })?;
            out = out.narrow(k as isize + 1, start, kept)?;
        }
        Ok(out)
    }
}
