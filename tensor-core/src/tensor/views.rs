//! Zero-copy views: reshape, slices, transposes, broadcasts, bitcasts, and `contiguous`.

use std::ops::Range;

use super::Tensor;
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::layout::{normalize_axis, reversed_axes, Layout};
use crate::ops::Op;
use crate::shape::{IntoShape, TensorShape};
use crate::slice::{Extent, TensorSlice};

impl Tensor {
    /// The same buffer and dtype viewed through `layout`, which the caller derived from
    /// this tensor's own (so it lies within the buffer, and bool bytes stay valid).
    pub(super) fn with_layout(&self, layout: Layout) -> Tensor {
        Tensor {
            dtype: self.dtype,
            layout,
            storage: self.storage.clone(),
        }
    }

    /// The same elements with another shape (same element count). A view when the strides
    /// allow it, otherwise a contiguous copy.
    pub fn reshape(&self, shape: impl IntoShape) -> Result<Tensor> {
        let shape = shape.into_shape()?;
        match self.layout.reshape(&shape)? {
            Some(layout) => Ok(self.with_layout(layout)),
            None => {
                let dense = self.contiguous()?;
                let layout = dense
                    .layout
                    .reshape(&shape)?
                    .expect("contiguous layouts reshape");
                Ok(dense.with_layout(layout))
            }
        }
    }

    /// A view of this tensor's buffer with its own shape, strides and offset, counted in
    /// elements of the buffer (PyTorch's `as_strided`): an `Err` where an element it
    /// reaches lies outside the buffer, or a stride walks before its start.
    pub fn as_strided(
        &self,
        shape: impl IntoShape,
        strides: &[isize],
        offset: usize,
    ) -> Result<Tensor> {
        let layout = Layout::new(shape.into_shape()?, strides, offset)?;
        Tensor::from_storage(self.dtype, layout, self.storage.clone())
    }

    /// [`Tensor::reshape`] to dims as `tf.reshape` takes them: at most one `-1`, inferred
    /// from the element count (`t.reshape_infer(&[-1, 3])`).
    pub fn reshape_infer(&self, dims: &[i64]) -> Result<Tensor> {
        self.reshape(TensorShape::resolve(dims, self.num_elements())?)
    }

    /// Rows `range` of dim 0, sharing the buffer (TensorFlow's `Slice`).
    pub fn slice(&self, range: Range<usize>) -> Result<Tensor> {
        self.narrow(0, range.start, range.end.saturating_sub(range.start))
            .and_then(|t| {
                if range.end < range.start {
                    Err(Error::invalid(format!("slice range {range:?} is reversed")))
                } else {
                    Ok(t)
                }
            })
    }

    /// Row `index` of dim 0, with that dim removed, sharing the buffer (TensorFlow's `SubSlice`).
    pub fn sub_slice(&self, index: usize) -> Result<Tensor> {
        if self.rank() == 0 {
            return Err(Error::invalid("sub_slice of a scalar"));
        }
        Ok(self.with_layout(self.layout.select(0, index)?))
    }

    /// Elements `start..start + len` of dim `dim` (negative counts from the end), sharing the buffer.
    pub fn narrow(&self, dim: isize, start: usize, len: usize) -> Result<Tensor> {
        let dim = normalize_axis(dim, self.rank())?;
        Ok(self.with_layout(self.layout.narrow(dim, start, len)?))
    }

    /// The part of this tensor that `slice` selects, sharing the buffer.
    pub fn slice_by(&self, slice: &TensorSlice) -> Result<Tensor> {
        slice.slice_tensor_shape(self.shape())?;
        let mut layout = self.layout.clone();
        for (dim, extent) in slice.extents().iter().enumerate() {
            if let Extent::Range { start, length } = *extent {
                layout = layout.narrow(dim, start as usize, length as usize)?;
            }
        }
        Ok(self.with_layout(layout))
    }

    /// Swap two dims (negative counts from the end), sharing the buffer.
    pub fn transpose(&self, a: isize, b: isize) -> Result<Tensor> {
        Ok(self.with_layout(self.layout.transpose(a, b)?))
    }

    /// Swap the last two dims (a matrix transpose), sharing the buffer.
    pub fn t(&self) -> Result<Tensor> {
        if self.rank() < 2 {
            return Err(Error::invalid(format!(
                "t() needs rank >= 2, got shape {}",
                self.shape()
            )));
        }
        self.transpose(-2, -1)
    }

    /// Permute the dims (result dim `i` is dim `perm[i]`), sharing the buffer.
    pub fn permute(&self, perm: &[usize]) -> Result<Tensor> {
        Ok(self.with_layout(self.layout.permute(perm)?))
    }

    /// The elements in reverse order along each of `axes` (negative counts from the end),
    /// sharing the buffer (TensorFlow's `ReverseV2`, `tf.reverse`): a view with those
    /// strides negated. An axis out of range or given twice is an `Err` with TensorFlow's
    /// message.
    ///
    /// ```
    /// # use polytensor_core::Tensor;
    /// # let cpu = polytensor_cpu::CpuDevice::shared();
    /// let t = Tensor::from_slice(&[0i32, 1, 2, 3, 4, 5], [2, 3], &cpu)?;
    /// assert_eq!(t.reverse(&[-1])?.to_vec::<i32>()?, [2, 1, 0, 5, 4, 3]);
    /// # Ok::<(), polytensor_core::Error>(())
    /// ```
    pub fn reverse(&self, axes: &[i64]) -> Result<Tensor> {
        let reversed = reversed_axes(axes, self.rank())?;
        let mut strides = self.layout.strides().to_vec();
        let mut offset = self.layout.offset() as isize;
        for (d, &flip) in reversed.iter().enumerate() {
            let size = self.dims()[d];
            if flip && size > 1 {
                // The last element along `d` comes first; both lie in the buffer already.
                offset += (size as isize - 1) * strides[d];
                strides[d] = -strides[d];
            }
        }
        let offset = usize::try_from(offset)
            .map_err(|_| Error::invalid("a reversed view starts before its buffer"))?;
        let layout = Layout::new(self.shape().clone(), &strides, offset)?;
        Ok(self.with_layout(layout))
    }

    /// Broadcast to `shape` by NumPy rules (stride 0), sharing the buffer.
    pub fn broadcast_to(&self, shape: impl IntoShape) -> Result<Tensor> {
        Ok(self.with_layout(self.layout.broadcast_to(&shape.into_shape()?)?))
    }

    /// Remove dim `dim`, which must have size 1.
    pub fn squeeze(&self, dim: isize) -> Result<Tensor> {
        let dim = normalize_axis(dim, self.rank())?;
        Ok(self.with_layout(self.layout.squeeze(dim)?))
    }

    /// Insert a dim of size 1 at `dim` (`-1` appends).
    pub fn unsqueeze(&self, dim: isize) -> Result<Tensor> {
        let dim = normalize_axis(dim, self.rank() + 1)?;
        Ok(self.with_layout(self.layout.unsqueeze(dim)?))
    }

    /// A contiguous tensor with the same elements (this tensor itself if already contiguous).
    pub fn contiguous(&self) -> Result<Tensor> {
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        if self.dtype == DataType::String {
            return Tensor::from_strings(self.to_strings()?, self.shape(), self.device());
        }
        self.copied()
    }

    /// Reinterpret the bytes as `dtype` (TensorFlow's `tf.bitcast`): equal sizes keep the
    /// shape; a smaller target adds an innermost dim of `old size / new size`; a larger target
    /// needs an innermost dim of `new size / old size`, which it removes. The result shares
    /// the buffer when the view's offset and strides line up with the new element size, and
    /// is made from one contiguous copy of the view otherwise. Bool and sub-byte targets are
    /// checked to hold valid values (only this view's bytes are looked at).
    pub fn bitcast(&self, dtype: DataType) -> Result<Tensor> {
        if self.dtype.size() == 0 || dtype.size() == 0 {
            return Err(Error::invalid(format!(
                "cannot bitcast {} to {dtype}: both dtypes need a fixed element size",
                self.dtype
            )));
        }
        if let Some(layout) = self.bitcast_layout(dtype)? {
            return Tensor::from_storage(dtype, layout, self.storage.clone());
        }
        // A fresh contiguous copy starts at offset 0 of its own buffer, so its strides and
        // offset are multiples of any element size: it always lines up.
        let dense = self.copied()?;
        match dense.bitcast_layout(dtype)? {
            Some(layout) => Tensor::from_storage(dtype, layout, dense.storage),
            None => Err(Error::invalid(format!(
                "bitcast of {} {} to {dtype}: a contiguous copy does not line up",
                self.shape(),
                self.dtype
            ))),
        }
    }

    /// The layout of `self` bitcast to `dtype` over the same buffer, `Ok(None)` where the
    /// view's offset or strides do not line up with the new element size (a copy does), and
    /// an `Err` where the shape does not allow the bitcast at all.
    fn bitcast_layout(&self, dtype: DataType) -> Result<Option<Layout>> {
        let (old, new) = (self.dtype.size(), dtype.size());
        if old == new {
            return Ok(Some(self.layout.clone()));
        }
        if old > new {
            // Sizes are powers of two, so the ratio is exact.
            let ratio = old / new;
            let mut shape = self.shape().clone();
            shape.add_dim(ratio)?;
            let Some((offset, mut strides)) = self.layout.rescale(ratio, 1) else {
                return Ok(None);
            };
            strides.push(1);
            return Ok(Layout::new(shape, &strides, offset).ok());
        }
        let ratio = new / old;
        let rank = self.rank();
        if rank == 0 || self.shape().dim_size(rank - 1) != ratio {
            return Err(Error::shape(
                "bitcast",
                format!(
                    "{} to {dtype} needs an innermost dim of {ratio}, shape is {}",
                    self.dtype,
                    self.shape()
                ),
            ));
        }
        if self.layout.strides()[rank - 1] != 1 {
            return Ok(None);
        }
        let outer = self.layout.select(rank - 1, 0)?;
        let Some((offset, strides)) = outer.rescale(1, ratio) else {
            return Ok(None);
        };
        Ok(Layout::new(outer.shape().clone(), &strides, offset).ok())
    }

    /// A contiguous copy of this view in a new buffer of its own (never a clone, unlike
    /// [`Tensor::contiguous`]).
    pub(super) fn copied(&self) -> Result<Tensor> {
        let device = self.device();
        device.check_supports(Op::Copy, self.dtype)?;
        Tensor::produce(self.shape().clone(), self.dtype, device, |out| {
            device.copy(&self.view(), out)
        })
    }
}
