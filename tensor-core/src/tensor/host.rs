//! Moving elements to the host: `to_vec`, `to_bytes`, typed host views, strings.

use super::Tensor;
use crate::dispatch_dtype;
use crate::element::{Element, Scalar};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::plan::StridedRows;

impl Tensor {
    fn check_dtype<T: Element>(&self, op: &'static str) -> Result<()> {
        if T::DTYPE == self.dtype {
            Ok(())
        } else {
            Err(Error::DTypeMismatch {
                op,
                expected: T::DTYPE.to_string(),
                found: self.dtype,
            })
        }
    }

    /// The elements in row-major order as little-endian bytes (any fixed-size dtype).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        if !self.dtype.is_pod() {
            return Err(Error::invalid(format!(
                "{} tensors have no byte representation; use to_strings",
                self.dtype
            )));
        }
        let dense = self.contiguous()?;
        let mut bytes = crate::alloc::host_vec(dense.total_bytes(), 0u8, "to_bytes")?;
        if !bytes.is_empty() {
            dense.device().copy_to_host(&dense.view(), &mut bytes)?;
        }
        Ok(bytes)
    }

    /// The element bytes of a contiguous, fixed-size tensor in host-visible memory, shared
    /// (no copy); `None` otherwise.
    pub(crate) fn host_element_bytes(&self) -> Option<&[u8]> {
        if !self.dtype.is_pod() || !self.is_contiguous() {
            return None;
        }
        let view = self.view();
        let range = view.host_copy_range(self.total_bytes()).ok()?;
        view.host_bytes()?.get(range)
    }

    /// The elements in row-major order; `T` must be the tensor's element type.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.check_dtype::<T>("to_vec")?;
        let dense = self.contiguous()?;
        let mut values = crate::alloc::host_vec(dense.num_elements(), T::default(), "to_vec")?;
        // SAFETY: `T: Element` has no padding, so the Vec's memory is exactly its byte length;
        // the device writes element bytes of dtype `T::DTYPE`, which are valid `T` values
        // (bool storage is kept at 0/1).
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(
                values.as_mut_ptr() as *mut u8,
                std::mem::size_of_val(values.as_slice()),
            )
        };
        if !bytes.is_empty() {
            dense.device().copy_to_host(&dense.view(), bytes)?;
        }
        Ok(values)
    }

    /// The single element of a one-element tensor (any shape), as `T`.
    pub fn item<T: Element>(&self) -> Result<T> {
        if self.num_elements() != 1 {
            return Err(Error::shape(
                "item",
                format!(
                    "item() needs exactly one element, shape is {}",
                    self.shape()
                ),
            ));
        }
        Ok(self.to_vec::<T>()?[0])
    }

    /// The elements in row-major order as [`Scalar`]s (any computable dtype).
    pub fn to_scalars(&self) -> Result<Vec<Scalar>> {
        dispatch_dtype!(self.dtype, T => Ok(self.to_vec::<T>()?.into_iter().map(Element::to_scalar).collect()),
            _ => Err(Error::invalid(format!("{} elements are not numbers", self.dtype))))
    }

    /// The strings of a string tensor, in row-major order.
    pub fn to_strings(&self) -> Result<Vec<Vec<u8>>> {
        let strings = self.strings_ref().ok_or_else(|| Error::DTypeMismatch {
            op: "to_strings",
            expected: "string".into(),
            found: self.dtype,
        })?;
        Ok(positions(&self.layout)
            .map(|p| strings[p].clone())
            .collect())
    }

    /// The elements as a slice, for a contiguous tensor in host-visible memory.
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        self.check_dtype::<T>("as_slice")?;
        if !self.is_contiguous() {
            return Err(Error::invalid(
                "as_slice needs a contiguous tensor: call contiguous() or use view()",
            ));
        }
        let all = self
            .view()
            .host_slice::<T>()
            .ok_or_else(|| self.not_host("as_slice"))?;
        let start = self.layout.offset();
        Ok(&all[start..start + self.num_elements()])
    }

    /// The elements as a mutable slice: the tensor must be contiguous, in host-visible
    /// memory, and the only reference to its buffer (so no other tensor sees the writes).
    pub fn as_slice_mut<T: Element>(&mut self) -> Result<&mut [T]> {
        self.check_dtype::<T>("as_slice_mut")?;
        let host = self.buffer().host_ptr().is_some();
        if !host {
            return Err(self.not_host("as_slice_mut"));
        }
        let mut out = self.try_out_view()?;
        let slice = out
            .host_slice_mut::<T>()
            .ok_or_else(|| Error::invalid("misaligned host memory"))?;
        let (ptr, len) = (slice.as_mut_ptr(), slice.len());
        // SAFETY: the slice points into this tensor's uniquely owned buffer; tying it to the
        // `&mut self` borrow (rather than the temporary OutView) keeps that exclusivity.
        Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
    }

    /// A typed, strided view of the elements in host-visible memory (no copy), as
    /// TensorFlow's `tensor<T, N>()`.
    pub fn view_as<T: Element>(&self) -> Result<HostView<'_, T>> {
        self.check_dtype::<T>("view_as")?;
        let data = self
            .view()
            .host_slice::<T>()
            .ok_or_else(|| self.not_host("view_as"))?;
        Ok(HostView {
            data,
            layout: &self.layout,
        })
    }

    fn not_host(&self, op: &str) -> Error {
        Error::invalid(format!(
            "{op} needs host-visible memory; this tensor is on {} (use to_vec or to_device)",
            self.device().name()
        ))
    }
}

/// Buffer positions of a layout's elements in row-major order.
pub(crate) fn positions(layout: &Layout) -> impl Iterator<Item = usize> + '_ {
    let dims = layout.shape().dims();
    let rows = StridedRows::new(&dims, [layout.strides()], [layout.offset() as isize]);
    let (len, [step]) = (rows.row_len(), rows.inner_strides());
    rows.flat_map(move |[start]| (0..len as isize).map(move |i| (start + i * step) as usize))
}

/// A typed view of a host tensor's elements with its shape and strides.
#[derive(Debug, Clone, Copy)]
pub struct HostView<'a, T> {
    data: &'a [T],
    layout: &'a Layout,
}

impl<'a, T: Element> HostView<'a, T> {
    /// The element at `index` (one index per dim).
    pub fn get(&self, index: &[usize]) -> Result<T> {
        Ok(self.data[self.layout.position(index)?])
    }

    /// The layout of the view.
    pub fn layout(&self) -> &'a Layout {
        self.layout
    }

    /// The elements in row-major order.
    pub fn iter(&self) -> impl Iterator<Item = T> + 'a {
        let data = self.data;
        positions(self.layout).map(move |p| data[p])
    }
}
