//! TensorFlow's shape ops: concat, stack and unstack, split, pad, slice, strided slice and
//! tile. Views where the result is one (slices, unstack, split), otherwise one new tensor
//! assembled from blocks of rows with the device's `copy` and `fill`, so every backend runs
//! them with the kernels it already has.

use super::{byte_len, Storage, Tensor};
use crate::device::{OutView, TensorView};
use crate::dtype::DataType;
use crate::element::Scalar;
use crate::error::{Error, Result};
use crate::layout::{contiguous_strides, Layout};
use crate::ops::Op;
use crate::plan::strided_slice::StridedSliceSpec;
use crate::shape::TensorShape;

/// One run of consecutive elements of a tensor being assembled.
pub(super) enum Block<'a> {
    /// The elements of a tensor, in row-major order.
    Copy(&'a Tensor),
}

/// How `MirrorPad` reflects (TensorFlow's `mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MirrorMode {
    /// The border element is not repeated: `[1, 2, 3]` padded by 2 is `[3, 2, 1, 2, 3, 2, 1]`.
    Reflect,
    /// The border element is repeated: `[1, 2, 3]` padded by 2 is `[2, 1, 1, 2, 3, 3, 2]`.
    Symmetric,
}

/// A dim index as TensorFlow's ops give it (negative counts from the end), checked against
/// `rank` with TensorFlow's message.
fn tf_axis(op: &str, axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(Error::invalid(format!(
            "{op} : Expected {} dimension in the range [{}, {r}), but got {axis}",
            if op == "ConcatOp" {
                "concatenating"
            } else {
                "axis"
            },
            -r
        )));
    }
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

/// The permutation that moves `axis` to the front, and its inverse.
fn axis_first(axis: usize, rank: usize) -> (Vec<usize>, Vec<usize>) {
    let mut perm = vec![axis];
    perm.extend((0..rank).filter(|&d| d != axis));
    let mut inverse = vec![0; rank];
    for (i, &p) in perm.iter().enumerate() {
        inverse[p] = i;
    }
    (perm, inverse)
}

impl Tensor {
    /// A new contiguous tensor of `shape` whose elements are `blocks` one after another
    /// (each copied or filled in place by the device), all on `device` and of `dtype`.
    pub(super) fn from_blocks(
        shape: TensorShape,
        dtype: DataType,
        device: &std::sync::Arc<dyn crate::Device>,
        blocks: &[Block<'_>],
    ) -> Result<Tensor> {
        let storage = Storage::allocate(device, byte_len(&shape, dtype)?, false)?;
        let mut start = 0usize;
        for block in blocks {
            let Block::Copy(t) = block;
            let (block_shape, count) = (t.shape().clone(), t.num_elements());
            if count == 0 {
                continue;
            }
            let strides = contiguous_strides(&block_shape);
            let layout = Layout::new(block_shape, &strides, start)?;
            let mut out = OutView::new(TensorView::new(dtype, &layout, storage.buffer()));
            device.copy(&t.view(), &mut out)?;
            start += count;
        }
        if start != shape.num_elements() {
            return Err(Error::invalid(format!(
                "blocks of {start} elements for a tensor of shape {shape}"
            )));
        }
        Ok(Tensor {
            dtype,
            layout: Layout::contiguous(shape),
            storage,
        })
    }

    /// `pieces` one after another along `axis` into a new tensor: `axis` is moved to the
    /// front so that each piece is one run of rows, and moved back as a view.
    fn join_along(axis: usize, like: &Tensor, pieces: &[Block<'_>]) -> Result<Tensor> {
        let rank = like.rank();
        let (perm, inverse) = axis_first(axis, rank);
        // Each piece with `axis` in front (a view), and the rows it adds.
        let moved = pieces
            .iter()
            .map(|Block::Copy(t)| t.permute(&perm))
            .collect::<Result<Vec<_>>>()?;
        let total = pieces.iter().try_fold(0usize, |sum, Block::Copy(t)| {
            sum.checked_add(t.dims()[axis])
                .ok_or_else(|| Error::invalid("joined shape overflows"))
        })?;
        let mut dims: Vec<usize> = perm.iter().map(|&d| like.dims()[d]).collect();
        dims[0] = total;
        let blocks: Vec<Block<'_>> = moved.iter().map(Block::Copy).collect();
        let joined =
            Tensor::from_blocks(TensorShape::new(&dims)?, like.dtype, like.device(), &blocks)?;
        joined.permute(&inverse)
    }

    /// Join `tensors` along `axis` (TensorFlow's `ConcatV2`): equal ranks, dtypes and
    /// devices, equal dims except along `axis`. Errors carry TensorFlow's messages.
    pub fn concat(tensors: &[&Tensor], axis: i64) -> Result<Tensor> {
        let first = *tensors
            .first()
            .ok_or_else(|| Error::invalid("ConcatOp : Expected at least one input"))?;
        let rank = first.rank();
        if rank == 0 {
            return Err(Error::invalid(
                "ConcatOp : Can't concatenate scalars (use tf.stack instead)",
            ));
        }
        let axis = tf_axis("ConcatOp", axis, rank)?;
        for (i, t) in tensors.iter().enumerate().skip(1) {
            first.check_same_device(t, "concat")?;
            if t.dtype != first.dtype {
                return Err(Error::DTypeMismatch {
                    op: "concat",
                    expected: first.dtype.to_string(),
                    found: t.dtype,
                });
            }
            if t.rank() != rank {
                return Err(Error::invalid(format!(
                    "ConcatOp : Ranks of all input tensors should match: shape[0] = {} vs. \
                     shape[{i}] = {}",
                    first.shape(),
                    t.shape()
                )));
            }
            if let Some(d) = (0..rank).find(|&d| d != axis && t.dims()[d] != first.dims()[d]) {
                return Err(Error::invalid(format!(
                    "ConcatOp : Dimension {d} in both shapes must be equal: shape[0] = {} vs. \
                     shape[{i}] = {}",
                    first.shape(),
                    t.shape()
                )));
            }
        }
        if first.dtype == DataType::String {
            return Tensor::concat_strings(tensors, axis);
        }
        first.check_pod("concat")?;
        Tensor::concat_checked(tensors, axis)
    }

    /// `concat` of checked tensors: the device joins them where it can ([`Device::concat`],
    /// each outer row copied to its place); otherwise each is copied into its rows of the
    /// output with `axis` in front, and the result moved back.
    ///
    /// [`Device::concat`]: crate::Device::concat
    fn concat_checked(tensors: &[&Tensor], axis: usize) -> Result<Tensor> {
        let first = tensors[0];
        let mut dims = first.dims().to_vec();
        dims[axis] = tensors
            .iter()
            .try_fold(0usize, |sum, t| sum.checked_add(t.dims()[axis]))
            .ok_or_else(|| Error::invalid("ConcatOp : the joined shape overflows"))?;
        let shape = TensorShape::new(&dims)?;
        let device = first.device();
        let pieces = tensors
            .iter()
            .map(|t| t.contiguous())
            .collect::<Result<Vec<_>>>()?;
        let views: Vec<TensorView<'_>> = pieces.iter().map(Tensor::view).collect();
        let joined = Tensor::produce_if(shape, first.dtype, device, |out| {
            device.concat(&views, axis, out)
        })?;
        if let Some(joined) = joined {
            return Ok(joined);
        }
        let blocks: Vec<Block<'_>> = tensors.iter().map(|t| Block::Copy(t)).collect();
        Tensor::join_along(axis, first, &blocks)?.contiguous()
    }

    /// `concat` of string tensors (checked), on the host: each tensor's run of strings
    /// for every index before `axis`, in turn.
    fn concat_strings(tensors: &[&Tensor], axis: usize) -> Result<Tensor> {
        let first = tensors[0];
        let outer: usize = first.dims()[..axis].iter().product();
        let strings = tensors
            .iter()
            .map(|t| t.to_strings())
            .collect::<Result<Vec<_>>>()?;
        let mut dims = first.dims().to_vec();
        dims[axis] = tensors.iter().map(|t| t.dims()[axis]).sum();
        let mut out = Vec::with_capacity(strings.iter().map(Vec::len).sum());
        for o in 0..outer {
            for s in &strings {
                let run = s.len() / outer.max(1);
                out.extend_from_slice(&s[o * run..(o + 1) * run]);
            }
        }
        Tensor::from_strings(out, dims, first.device())
    }

    /// Stack `tensors` of one shape along a new dim `axis` (TensorFlow's `Pack`).
    pub fn stack(tensors: &[&Tensor], axis: i64) -> Result<Tensor> {
        let first = *tensors
            .first()
            .ok_or_else(|| Error::invalid("Pack : Expected at least one input"))?;
        let axis = tf_axis("Pack", axis, first.rank() + 1)?;
        for (i, t) in tensors.iter().enumerate().skip(1) {
            if t.shape() != first.shape() {
                return Err(Error::invalid(format!(
                    "Shapes of all inputs must match: values[0].shape = {} != values[{i}].shape \
                     = {}",
                    first.shape(),
                    t.shape()
                )));
            }
        }
        let expanded = tensors
            .iter()
            .map(|t| t.unsqueeze(axis as isize))
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&Tensor> = expanded.iter().collect();
        Tensor::concat(&refs, axis as i64)
    }

    /// The slices along `axis`, each with that dim removed, sharing the buffer
    /// (TensorFlow's `Unpack`).
    pub fn unstack(&self, axis: i64) -> Result<Vec<Tensor>> {
        let axis = tf_axis("Unpack", axis, self.rank())?;
        (0..self.dims()[axis])
            .map(|i| Ok(self.with_layout(self.layout.select(axis, i)?)))
            .collect()
    }

    /// `sizes[i]` elements along `axis` for each `i`, views sharing the buffer (TensorFlow's
    /// `SplitV`; one size may be `-1`, the rest).
    pub fn split_sizes(&self, sizes: &[i64], axis: i64) -> Result<Vec<Tensor>> {
        let axis = tf_axis("Split", axis, self.rank())?;
        let dim = self.dims()[axis];
        let known = sizes
            .iter()
            .filter(|&&s| s >= 0)
            .try_fold(0i64, |sum, &s| sum.checked_add(s))
            .ok_or_else(|| Error::invalid("split sizes overflow"))?;
        let unknown = sizes.iter().filter(|&&s| s == -1).count();
        let bad = sizes.iter().any(|&s| s < -1);
        let fits = if unknown == 0 {
            known == dim as i64
        } else {
            known <= dim as i64
        };
        if bad || unknown > 1 || !fits {
            return Err(Error::invalid(format!(
                "Determined shape must either match input shape along split_dim exactly if \
                 fully specified, or be less than the size of the input along split_dim if not \
                 fully specified.  Got: {known}"
            )));
        }
        let mut start = 0usize;
        sizes
            .iter()
            .map(|&s| {
                let len = if s == -1 {
                    dim - known as usize
                } else {
                    s as usize
                };
                let piece = self.narrow(axis as isize, start, len)?;
                start += len;
                Ok(piece)
            })
            .collect()
    }

    /// `parts` equal views along `axis` (TensorFlow's `Split`).
    pub fn split(&self, parts: usize, axis: i64) -> Result<Vec<Tensor>> {
        let axis_index = tf_axis("Split", axis, self.rank())?;
        let dim = self.dims()[axis_index];
        if parts == 0 || !dim.is_multiple_of(parts) {
            return Err(Error::invalid(format!(
                "Number of ways to split should evenly divide the split dimension, but got \
                 split_dim {axis_index} (size = {dim}) and num_split {parts}"
            )));
        }
        let sizes = crate::alloc::host_vec(parts, (dim / parts) as i64, "Split's sizes")?;
        self.split_sizes(&sizes, axis)
    }

    /// `size[i]` elements from `begin[i]` along each dim, a view (TensorFlow's `Slice`; a
    /// size of `-1` takes the rest of the dim).
    pub fn slice_at(&self, begin: &[i64], size: &[i64]) -> Result<Tensor> {
        if begin.len() != self.rank() || size.len() != self.rank() {
            return Err(Error::invalid(format!(
                "Expected begin and size arguments to be 1-D tensors of size {}, but got shapes \
                 [{}] and [{}] instead.",
                self.rank(),
                begin.len(),
                size.len()
            )));
        }
        let mut layout = self.layout.clone();
        for (d, (&b, &s)) in begin.iter().zip(size).enumerate() {
            let dim = self.dims()[d] as i64;
            let len = if s == -1 { dim - b } else { s };
            if b < 0 || b > dim {
                return Err(Error::invalid(format!(
                    "Expected begin[{d}] in [0, {dim}], but got {b}"
                )));
            }
            if len < 0 || len > dim - b {
                return Err(Error::invalid(format!(
                    "Expected size[{d}] in [0, {}], but got {s}",
                    dim - b
                )));
            }
            layout = layout.narrow(d, b as usize, len as usize)?;
        }
        Ok(self.with_layout(layout))
    }

    /// TensorFlow's `StridedSlice` (`x[1:-1:2, ..., tf.newaxis, 3]`), a view sharing the
    /// buffer; steps may be negative.
    pub fn strided_slice(&self, spec: &StridedSliceSpec) -> Result<Tensor> {
        let plan = spec.resolve(&self.dims())?;
        let mut offset = self.layout.offset() as isize;
        let mut strides = Vec::new();
        for (d, sliced) in plan.dims.iter().enumerate() {
            let stride = self.layout.strides()[d];
            if sliced.len > 0 {
                offset += sliced.start as isize * stride;
            }
            // A dim of one element is never stepped along: any step would do, and a huge
            // one must not overflow.
            strides.push(if sliced.len <= 1 {
                0
            } else {
                stride
                    .checked_mul(sliced.step)
                    .ok_or_else(|| Error::invalid("strided slice step overflows"))?
            });
        }
        let dims = plan.output_dims();
        let out_strides: Vec<isize> = plan
            .output
            .iter()
            .map(|d| d.map_or(0, |d| strides[d]))
            .collect();
        let empty = dims.contains(&0);
        let layout = Layout::new(
            TensorShape::new(&dims)?,
            &out_strides,
            if empty {
                self.layout.offset()
            } else {
                offset as usize
            },
        )?;
        Tensor::from_storage_checking(self.dtype, layout, self.storage.clone(), false)
    }

    /// TensorFlow's `StridedSliceGrad`: this gradient of a strided slice's output placed
    /// where `spec` took its elements from a tensor of `shape`, zeros elsewhere. Each
    /// sliced dim's gradient is walked forward (reversed where the step is negative), spread
    /// `step` apart, and padded to the dim.
    pub fn strided_slice_grad(&self, shape: &[usize], spec: &StridedSliceSpec) -> Result<Tensor> {
        let plan = spec.resolve(shape)?;
        let output = plan.output_dims();
        if self.dims() != output {
            return Err(Error::invalid(format!(
                "StridedSliceGrad: the gradient's shape {} is not the slice's {output:?}",
                self.shape()
            )));
        }
        if plan.dims.iter().any(|d| d.len == 0) {
            return Tensor::zeros(shape, self.dtype, self.device());
        }
        // One dim per input dim (shrunk ones kept as 1, new axes dropped).
        let lens: Vec<usize> = plan.dims.iter().map(|d| d.len).collect();
        let backward: Vec<i64> = (0..lens.len())
            .filter(|&d| plan.dims[d].step < 0 && lens[d] > 1)
            .map(|d| d as i64)
            .collect();
        let mut grad = self.reshape(lens.clone())?;
        if !backward.is_empty() {
            grad = grad.reverse(&backward)?;
        }
        // Each dim `len` then `step - 1` zeros per element, the last element's cut.
        let steps: Vec<usize> = plan.dims.iter().map(|d| d.step.unsigned_abs()).collect();
        let pairs: Vec<usize> = lens.iter().flat_map(|&l| [l, 1]).collect();
        let gaps: Vec<(usize, usize)> = steps.iter().flat_map(|&s| [(0, 0), (0, s - 1)]).collect();
        let spread: Vec<usize> = lens.iter().zip(&steps).map(|(l, s)| l * s).collect();
        let mut grad = grad
            .reshape(pairs)?
            .pad(&gaps, Scalar::I64(0))?
            .reshape(spread)?;
        let mut placed = Vec::with_capacity(lens.len());
        for (d, sliced) in plan.dims.iter().enumerate() {
            let reach = (sliced.len - 1) * steps[d] + 1;
            grad = grad.narrow(d as isize, 0, reach)?;
            // The lowest index taken: the last in walking order for a negative step.
            let first = if sliced.step < 0 {
                sliced.start - (sliced.len - 1) * steps[d]
            } else {
                sliced.start
            };
            let after = shape[d].checked_sub(first + reach).ok_or_else(|| {
                Error::invalid("StridedSliceGrad: the slice reaches past its dim")
            })?;
            placed.push((first, after));
        }
        grad.pad(&placed, Scalar::I64(0))
    }

    /// Repeat the tensor `multiples[i]` times along each dim (TensorFlow's `Tile`).
    pub fn tile(&self, multiples: &[usize]) -> Result<Tensor> {
        if multiples.len() != self.rank() {
            return Err(Error::invalid(format!(
                "Expected multiples argument to be a vector of length {} but got length {}",
                self.rank(),
                multiples.len()
            )));
        }
        // [d0, d1] tiled by [m0, m1] is [m0, d0, m1, d1] broadcast, then merged.
        let mut spread = Vec::new();
        let mut full = Vec::new();
        let mut result = Vec::new();
        for (&d, &m) in self.dims().iter().zip(multiples) {
            spread.extend([1, d]);
            full.extend([m, d]);
            result.push(
                d.checked_mul(m)
                    .ok_or_else(|| Error::invalid("tiled shape overflows"))?,
            );
        }
        self.reshape(spread)?.broadcast_to(full)?.reshape(result)
    }

    /// Pad each dim by `paddings[i] = (before, after)` elements of `value` (TensorFlow's
    /// `Pad` and `PadV2`). A value the dtype cannot hold (1.5 for int32) is an `Err`
    /// ([`Scalar::check_representable`]).
    pub fn pad(&self, paddings: &[(usize, usize)], value: impl Into<Scalar>) -> Result<Tensor> {
        self.check_padding("pad", paddings)?;
        self.device().check_supports(Op::Fill, self.dtype)?;
        let value = value.into();
        value.check_representable(self.dtype)?;
        // Along each padded axis, the borders filled and the tensor joined between them
        // (`ConcatV2`'s kernel: each piece's rows copied straight to their place).
        let mut padded = self.clone();
        for (axis, &(before, after)) in paddings.iter().enumerate() {
            if before == 0 && after == 0 {
                continue;
            }
            let border = |rows: usize| {
                let mut dims = padded.dims().to_vec();
                dims[axis] = rows;
                Tensor::full(dims.as_slice(), value, self.dtype, self.device())
            };
            let (first, last) = (border(before)?, border(after)?);
            padded = Tensor::concat(&[&first, &padded, &last], axis as i64)?;
        }
        padded.contiguous()
    }

    /// Pad each dim by reflecting the tensor at its borders (TensorFlow's `MirrorPad`).
    pub fn mirror_pad(&self, paddings: &[(usize, usize)], mode: MirrorMode) -> Result<Tensor> {
        self.check_padding("mirror_pad", paddings)?;
        let skip = usize::from(mode == MirrorMode::Reflect);
        let mut padded = self.clone();
        for (axis, &(before, after)) in paddings.iter().enumerate() {
            let dim = padded.dims()[axis];
            let limit = dim.saturating_sub(skip);
            if before > limit || after > limit {
                return Err(Error::invalid(format!(
                    "paddings must be no greater than the dimension size: {before}, {after} \
                     greater than {limit}"
                )));
            }
            if before == 0 && after == 0 {
                continue;
            }
            // The border runs, reversed: a negative stride along `axis`.
            let reversed = |start: usize, len: usize| -> Result<Tensor> {
                let run = padded.narrow(axis as isize, start, len)?;
                let mut spec = StridedSliceSpec {
                    begin: vec![0; run.rank()],
                    end: vec![0; run.rank()],
                    strides: vec![1; run.rank()],
                    begin_mask: -1,
                    end_mask: -1,
                    ..Default::default()
                };
                spec.strides[axis] = -1;
                run.strided_slice(&spec)
            };
            let left = reversed(skip, before)?;
            let right = reversed(dim - after - skip, after)?;
            padded = Tensor::join_along(
                axis,
                &padded,
                &[
                    Block::Copy(&left),
                    Block::Copy(&padded),
                    Block::Copy(&right),
                ],
            )?;
        }
        padded.contiguous()
    }

    /// An `Err` unless `paddings` has one pair per dim and the elements can be moved.
    fn check_padding(&self, op: &str, paddings: &[(usize, usize)]) -> Result<()> {
        if paddings.len() != self.rank() {
            return Err(Error::invalid(format!(
                "The first dimension of paddings must be the rank of inputs[{}] {}",
                paddings.len(),
                self.shape()
            )));
        }
        self.check_pod(op)
    }

    /// An `Err` for a dtype without fixed-size elements (strings), which `op` cannot move.
    fn check_pod(&self, op: &str) -> Result<()> {
        if self.dtype.is_pod() {
            Ok(())
        } else {
            Err(Error::invalid(format!("{op} of {} tensors", self.dtype)))
        }
    }
}

/// The smallest value of `dtype` (`-inf` for floats): what max pooling pads with.
pub(crate) fn lowest(dtype: DataType) -> Scalar {
    if dtype.is_signed_integer() {
        let bits = (dtype.size() * 8).min(64) as u32;
        Scalar::I64(i64::MIN >> (64 - bits))
    } else if dtype.is_unsigned_integer() {
        Scalar::U64(0)
    } else if dtype == DataType::Bool {
        Scalar::Bool(false)
    } else {
        Scalar::F64(f64::NEG_INFINITY)
    }
}
