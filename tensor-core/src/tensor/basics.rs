//! Making tensors (from host data, bytes, strings, fills and parts), what a tensor is
//! (dtype, shape, layout, device, buffer), and moving it between devices.

use super::*;

impl Tensor {
    /// A tensor of `shape` holding `data` (row-major); the lengths must agree.
    pub fn from_slice<T: Element>(
        data: &[T],
        shape: impl IntoShape,
        device: &Arc<dyn Device>,
    ) -> Result<Self> {
        let shape = shape.into_shape()?;
        if data.len() != shape.num_elements() {
            return Err(Error::shape(
                "from_slice",
                format!(
                    "{} values given for shape {shape} ({} elements)",
                    data.len(),
                    shape.num_elements()
                ),
            ));
        }
        Self::write_new(crate::element::as_bytes(data), shape, T::DTYPE, device)
    }

    /// A rank-1 tensor holding `data`.
    pub fn from_vec<T: Element>(data: Vec<T>, device: &Arc<dyn Device>) -> Result<Self> {
        Self::from_slice(&data, [data.len()], device)
    }

    /// A rank-0 tensor holding `value`.
    pub fn scalar<T: Element>(value: T, device: &Arc<dyn Device>) -> Result<Self> {
        Self::from_slice(&[value], TensorShape::scalar(), device)
    }

    /// A tensor of zeros (false for bool).
    pub fn zeros(shape: impl IntoShape, dtype: DataType, device: &Arc<dyn Device>) -> Result<Self> {
        let shape = shape.into_shape()?;
        let storage = Storage::allocate(device, byte_len(&shape, dtype)?, true)?;
        Ok(Self {
            dtype,
            layout: Layout::contiguous(shape),
            storage,
        })
    }

    /// A tensor of ones (true for bool).
    pub fn ones(shape: impl IntoShape, dtype: DataType, device: &Arc<dyn Device>) -> Result<Self> {
        Self::full(shape, Scalar::I64(1), dtype, device)
    }

    /// A tensor with every element `value`, converted to `dtype` with cast semantics.
    pub fn full(
        shape: impl IntoShape,
        value: impl Into<Scalar>,
        dtype: DataType,
        device: &Arc<dyn Device>,
    ) -> Result<Self> {
        device.check_supports(Op::Fill, dtype)?;
        let value = value.into();
        Self::produce(shape.into_shape()?, dtype, device, |out| {
            device.fill(value, out)
        })
    }

    /// `[start, start + step, ...]` up to (excluding) `end`, as NumPy's `arange`. The count is
    /// exact for integer arguments; each element is `start + i * step` converted to `dtype`.
    pub fn arange(
        start: impl Into<Scalar>,
        end: impl Into<Scalar>,
        step: impl Into<Scalar>,
        dtype: DataType,
        device: &Arc<dyn Device>,
    ) -> Result<Self> {
        let (start, end, step) = (start.into(), end.into(), step.into());
        let count = arange_count(start, end, step)?;
        device.check_supports(Op::Arange, dtype)?;
        Self::produce(TensorShape::new(&[count])?, dtype, device, |out| {
            device.arange(start, step, out)
        })
    }

    /// A tensor from little-endian element bytes of any fixed-size dtype. Bool bytes must be
    /// 0 or 1, and int4, uint4, int2 and uint2 one element per byte within their range
    /// (sign-extended for the signed ones); anything else is an `Err`, never truncated.
    pub fn from_bytes(
        bytes: &[u8],
        shape: impl IntoShape,
        dtype: DataType,
        device: &Arc<dyn Device>,
    ) -> Result<Self> {
        let shape = shape.into_shape()?;
        let expected = byte_len(&shape, dtype)?;
        if bytes.len() != expected {
            return Err(Error::shape(
                "from_bytes",
                format!(
                    "{} bytes given for {shape} of {dtype} ({expected} bytes)",
                    bytes.len()
                ),
            ));
        }
        check_element_slice(dtype, bytes)?;
        Self::write_new(bytes, shape, dtype, device)
    }

    /// A new contiguous tensor holding `bytes`, which the caller has checked.
    pub(crate) fn write_new(
        bytes: &[u8],
        shape: TensorShape,
        dtype: DataType,
        device: &Arc<dyn Device>,
    ) -> Result<Self> {
        Self::produce(shape, dtype, device, |out| {
            device.copy_from_host(bytes, out)
        })
    }

    /// The tensor over `content`, element bytes its caller has checked: shared (no copy) when
    /// the device is a CPU and the bytes are aligned for `dtype`, one copy otherwise.
    pub(crate) fn from_shared_bytes(
        content: bytes::Bytes,
        shape: TensorShape,
        dtype: DataType,
        device: &Arc<dyn Device>,
    ) -> Result<Self> {
        let aligned = (content.as_ptr() as usize).is_multiple_of(dtype.alignment());
        if device.kind() == crate::device::DeviceKind::CPU && aligned {
            let buffer = Arc::new(crate::buffer::BytesBuffer::new(content, device.clone()));
            return Tensor::from_valid_parts(dtype, Layout::contiguous(shape), buffer);
        }
        Tensor::write_new(&content, shape, dtype, device)
    }

    /// A new contiguous tensor whose element bytes `fill` writes (all of them): in place on
    /// a host device, into a host buffer and then one copy elsewhere. The bytes are checked
    /// as [`Tensor::from_bytes`] checks them. `fill` is not called for an empty tensor.
    pub(crate) fn from_filled_bytes(
        shape: TensorShape,
        dtype: DataType,
        device: &Arc<dyn Device>,
        fill: impl FnOnce(&mut [u8]) -> Result<()>,
    ) -> Result<Self> {
        let len = byte_len(&shape, dtype)?;
        Self::produce(shape, dtype, device, |out| match out.host_bytes_mut() {
            Some(bytes) => {
                fill(bytes)?;
                check_element_slice(dtype, bytes)
            }
            None => {
                let mut host = crate::alloc::host_vec(len, 0u8, "a tensor's staging bytes")?;
                fill(&mut host)?;
                check_element_slice(dtype, &host)?;
                device.copy_from_host(&host, out)
            }
        })
    }

    /// A string tensor of `shape` (byte strings, any bytes) on a host device.
    pub fn from_strings<S: Into<Vec<u8>>>(
        values: impl IntoIterator<Item = S>,
        shape: impl IntoShape,
        device: &Arc<dyn Device>,
    ) -> Result<Self> {
        let shape = shape.into_shape()?;
        let values: Vec<Vec<u8>> = values.into_iter().map(Into::into).collect();
        if values.len() != shape.num_elements() {
            return Err(Error::shape(
                "from_strings",
                format!("{} strings given for shape {shape}", values.len()),
            ));
        }
        Ok(Self {
            dtype: DataType::String,
            layout: Layout::contiguous(shape),
            storage: Storage::Shared(device.strings(values)?),
        })
    }

    /// A tensor of `shape` and `dtype` on `device` from parts, checking that the layout lies
    /// within the buffer and, for bool and the sub-byte integers, that every element of the
    /// view is a valid value (bytes outside the view are not looked at). For backends and
    /// importers (DLPack, protos).
    pub fn from_parts(
        dtype: DataType,
        layout: Layout,
        buffer: Arc<dyn TensorBuffer>,
    ) -> Result<Self> {
        Self::from_storage(dtype, layout, Storage::Shared(buffer))
    }

    /// [`Tensor::from_parts`] for elements the caller has just checked or made canonical
    /// (a proto's content): the layout is checked, the element bytes are not read again.
    pub(crate) fn from_valid_parts(
        dtype: DataType,
        layout: Layout,
        buffer: Arc<dyn TensorBuffer>,
    ) -> Result<Self> {
        Self::from_storage_checking(dtype, layout, Storage::Shared(buffer), false)
    }

    /// [`Tensor::from_parts`] over any storage.
    pub(super) fn from_storage(dtype: DataType, layout: Layout, storage: Storage) -> Result<Self> {
        Self::from_storage_checking(dtype, layout, storage, true)
    }

    /// [`Tensor::from_storage`], reading the elements only if `check_elements`.
    pub(super) fn from_storage_checking(
        dtype: DataType,
        layout: Layout,
        storage: Storage,
        check_elements: bool,
    ) -> Result<Self> {
        let buffer = storage.buffer();
        let capacity = if dtype == DataType::String {
            buffer
                .downcast_ref::<StringBuffer>()
                .ok_or_else(|| Error::invalid("a string tensor needs a StringBuffer"))?
                .strings()
                .len()
        } else if dtype.is_pod() {
            buffer.len_bytes() / dtype.size()
        } else {
            return Err(Error::invalid(format!("dtype {dtype} cannot hold values")));
        };
        layout.check_fits(capacity)?;
        let tensor = Self {
            dtype,
            layout,
            storage,
        };
        if check_elements && dtype.byte_range().is_some() {
            tensor.check_elements()?;
        }
        Ok(tensor)
    }

    /// [`check_element_bytes`] over this tensor's elements (only its view of the buffer):
    /// read in place from host memory, copied from a device.
    pub(super) fn check_elements(&self) -> Result<()> {
        match self.storage.buffer().host_bytes() {
            Some(bytes) => {
                // Every dtype with invalid bytes is one byte wide: element offsets are bytes.
                let start = self.layout.offset();
                let run = self.layout.is_contiguous().then(|| {
                    start
                        .checked_add(self.num_elements())
                        .and_then(|end| bytes.get(start..end))
                });
                match run.flatten() {
                    Some(run) => check_element_slice(self.dtype, run),
                    None => check_element_bytes(
                        self.dtype,
                        host::positions(&self.layout).map(|p| bytes[p]),
                    ),
                }
            }
            None => check_element_bytes(self.dtype, self.to_bytes()?),
        }
    }

    /// A new contiguous tensor of `shape` and `dtype` on `device`, its elements written by
    /// `kernel` (not called when there are none). Every op's result is made here; the tensor
    /// is assembled once the kernel has run, so no half-made tensor is moved around.
    #[inline]
    /// A new tensor made by one of a device's optional kernels (`kernel` says whether it
    /// ran: a `Device` method whose default is `Ok(false)`), or `None` where it did not,
    /// for the caller to compose the op; also `None` for an empty shape.
    pub(super) fn produce_if(
        shape: TensorShape,
        dtype: DataType,
        device: &Arc<dyn Device>,
        kernel: impl FnOnce(&mut OutView<'_>) -> Result<bool>,
    ) -> Result<Option<Self>> {
        let mut ran = false;
        let made = Tensor::produce(shape, dtype, device, |out| {
            ran = kernel(out)?;
            Ok(())
        })?;
        Ok(ran.then_some(made))
    }

    /// `count` contiguous tensors of `shape` and `dtype` that one kernel writes (its
    /// outputs in order), or `None` where the kernel did not run (returned `false`).
    pub(crate) fn produce_many(
        count: usize,
        shape: &TensorShape,
        dtype: DataType,
        device: &Arc<dyn Device>,
        kernel: impl FnOnce(&mut [OutView<'_>]) -> Result<bool>,
    ) -> Result<Option<Vec<Self>>> {
        let bytes = byte_len(shape, dtype)?;
        let storages = (0..count)
            .map(|_| Storage::allocate(device, bytes, false))
            .collect::<Result<Vec<_>>>()?;
        let layout = Layout::contiguous(shape.clone());
        if layout.num_elements() > 0 {
            let mut outs: Vec<OutView<'_>> = storages
                .iter()
                .map(|storage| OutView::new(TensorView::new(dtype, &layout, storage.buffer())))
                .collect();
            if !kernel(&mut outs)? {
                return Ok(None);
            }
        }
        Ok(Some(
            storages
                .into_iter()
                .map(|storage| Self {
                    dtype,
                    layout: layout.clone(),
                    storage,
                })
                .collect(),
        ))
    }

    pub(super) fn produce(
        shape: TensorShape,
        dtype: DataType,
        device: &Arc<dyn Device>,
        kernel: impl FnOnce(&mut OutView<'_>) -> Result<()>,
    ) -> Result<Self> {
        let storage = Storage::allocate(device, byte_len(&shape, dtype)?, false)?;
        let layout = Layout::contiguous(shape);
        if layout.num_elements() > 0 {
            kernel(&mut OutView::new(TensorView::new(
                dtype,
                &layout,
                storage.buffer(),
            )))?;
        }
        Ok(Self {
            dtype,
            layout,
            storage,
        })
    }

    /// A contiguous tensor whose elements are not initialised (allocation is eager, as in
    /// TensorFlow).
    ///
    /// # Safety
    ///
    /// Every element must be written (for example through [`Tensor::as_slice_mut`] or as a
    /// kernel output) before any is read: reading uninitialised memory is undefined
    /// behaviour on host devices.
    pub unsafe fn uninit(
        shape: impl IntoShape,
        dtype: DataType,
        device: &Arc<dyn Device>,
    ) -> Result<Self> {
        Self::produce(shape.into_shape()?, dtype, device, |_| Ok(()))
    }

    /// The element dtype.
    pub fn dtype(&self) -> DataType {
        self.dtype
    }

    /// The shape.
    pub fn shape(&self) -> &TensorShape {
        self.layout.shape()
    }

    /// The dims.
    pub fn dims(&self) -> Vec<usize> {
        self.shape().iter().collect()
    }

    /// Shape, strides and offset.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The rank.
    pub fn rank(&self) -> usize {
        self.layout.rank()
    }

    /// The number of elements.
    pub fn num_elements(&self) -> usize {
        self.layout.num_elements()
    }

    /// The device holding the buffer.
    #[inline]
    pub fn device(&self) -> &Arc<dyn Device> {
        match &self.storage {
            Storage::Shared(buffer) => buffer.device(),
            Storage::Embedded(embedded) => embedded.device(),
        }
    }

    /// The buffer (downcast it to a backend's own type).
    pub fn buffer(&self) -> &dyn TensorBuffer {
        self.storage.buffer()
    }

    /// Whether the elements are contiguous in row-major order.
    pub fn is_contiguous(&self) -> bool {
        self.layout.is_contiguous()
    }

    /// The bytes of this tensor's elements (TensorFlow's `TotalBytes`; string payloads for
    /// string tensors).
    pub fn total_bytes(&self) -> usize {
        if self.dtype == DataType::String {
            return self
                .strings_ref()
                .map_or(0, |s| s.iter().map(|s| s.len()).sum());
        }
        self.num_elements() * self.dtype.size()
    }

    /// The bytes of the whole buffer this tensor views (TensorFlow's `AllocatedBytes`).
    pub fn allocated_bytes(&self) -> usize {
        self.storage.buffer().len_bytes()
    }

    /// Whether both tensors view the same buffer (TensorFlow's `SharesBufferWith`); never for
    /// embedded buffers, which are copied with their tensors.
    pub fn shares_buffer_with(&self, other: &Tensor) -> bool {
        match (&self.storage, &other.storage) {
            (Storage::Shared(a), Storage::Shared(b)) => {
                std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
            }
            _ => false,
        }
    }

    /// Whether the elements live inside the tensor value (an [`EmbeddedBuffer`]), so that
    /// clones and views copy them.
    pub(crate) fn is_embedded(&self) -> bool {
        matches!(self.storage, Storage::Embedded(_))
    }

    /// Whether this is the only reference to the buffer (TensorFlow's `RefCountIsOne`): the
    /// condition for writing into it in place.
    pub fn ref_count_is_one(&self) -> bool {
        match &self.storage {
            Storage::Shared(buffer) => {
                Arc::strong_count(buffer) == 1 && Arc::weak_count(buffer) == 0
            }
            Storage::Embedded(_) => true,
        }
    }

    /// This tensor as a kernel operand.
    #[inline]
    pub fn view(&self) -> TensorView<'_> {
        TensorView::new(self.dtype, &self.layout, self.storage.buffer())
    }

    #[inline]
    pub(crate) fn out_view(&mut self) -> OutView<'_> {
        OutView::new(self.view())
    }

    /// This tensor as a kernel output, to write an op's result into existing memory: it must
    /// be contiguous and the only reference to its buffer.
    pub fn try_out_view(&mut self) -> Result<OutView<'_>> {
        if self.storage.buffer().is_read_only() && self.ref_count_is_one() && self.dtype.is_pod() {
            // Memory shared with the outside (a decoded proto's bytes): copy on write, one
            // device copy into a buffer of its own.
            *self = self.copied()?;
        }
        if !self.ref_count_is_one() {
            return Err(Error::invalid("an output tensor must not share its buffer"));
        }
        if !self.is_contiguous() || !self.dtype.is_pod() {
            return Err(Error::invalid(
                "an output tensor must be contiguous and of a fixed-size dtype",
            ));
        }
        Ok(self.out_view())
    }

    pub(super) fn strings_ref(&self) -> Option<&[Vec<u8>]> {
        self.storage
            .buffer()
            .downcast_ref::<StringBuffer>()
            .map(StringBuffer::strings)
    }

    #[inline]
    pub(super) fn check_same_device(&self, other: &Tensor, op: &'static str) -> Result<()> {
        if same_device(self.device(), other.device()) {
            Ok(())
        } else {
            Err(self.device_mismatch(other, op))
        }
    }

    #[cold]
    pub(super) fn device_mismatch(&self, other: &Tensor, op: &'static str) -> Error {
        Error::DeviceMismatch {
            op,
            lhs: self.device().name().to_string(),
            rhs: other.device().name().to_string(),
        }
    }

    /// A copy of this tensor on `device` (a clone if it is already there).
    pub fn to_device(&self, device: &Arc<dyn Device>) -> Result<Tensor> {
        if same_device(self.device(), device) {
            return Ok(self.clone());
        }
        if self.dtype == DataType::String {
            return Self::from_strings(self.to_strings()?, self.shape(), device);
        }
        Self::write_new(&self.to_bytes()?, self.shape().clone(), self.dtype, device)
    }
}
