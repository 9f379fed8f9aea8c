//! [`CpuDevice`]: the host CPU as a polytensor [`Device`].

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use polytensor_core::alloc::CachedBlock;
use polytensor_core::dlpack::DLDevice;
use polytensor_core::{
    Allocator, AllocatorInfo, BinaryOp, CachingAllocator, DataType, Device, DeviceHandle,
    DeviceKind, EmbeddedBuffer, HostAllocator, HostBlock, HostBuffer, HostMemory, InlineBuffer, Op,
    OutView, ReduceOp, Result, Scalar, StringBuffer, TensorBuffer, TensorView, UnaryOp,
    ALLOCATOR_ALIGNMENT, INLINE_BUFFER_BYTES,
};

use crate::kernels::{binary, cast, copy, fill, matmul, reduce, segment, unary, window};
use polytensor_core::plan::segment::{SegmentOp, Segments};
use polytensor_core::plan::window::WindowGeometry;
use polytensor_core::Epilogue;

/// The process-wide CPU device ([`CpuDevice::shared`]), `cpu:0`.
static SHARED: OnceLock<Arc<dyn Device>> = OnceLock::new();

/// The index of the next CPU device made with its own allocator: `cpu:1`, `cpu:2`, ...
static NEXT_INDEX: AtomicUsize = AtomicUsize::new(1);

/// The bytes of freed host memory a CPU device keeps for reuse by default.
pub const DEFAULT_CACHE_BYTES: usize = 1 << 30;

/// The host CPU: memory from a 64-byte aligned [`HostAllocator`] behind a
/// [`CachingAllocator`] (freed blocks are reused, up to a byte cap, so fresh results do not
/// pay for new pages), buffers of at most [`INLINE_BUFFER_BYTES`] held inline in their
/// `Arc` (an [`InlineBuffer`], one small `malloc`), and kernels for every op and every dtype the op is defined for, on
/// any strided layout.
///
/// ```
/// use polytensor_cpu::CpuDevice;
/// use polytensor_core::{DataType, Tensor};
/// let cpu = CpuDevice::shared();
/// let x = Tensor::arange(0i64, 6i64, 1i64, DataType::Float, &cpu)?.reshape([2, 3])?;
/// let total = x.sum(&[1], false)?;
/// assert_eq!(total.to_vec::<f32>()?, vec![3.0, 12.0]);
/// # Ok::<(), polytensor_core::Error>(())
/// ```
#[derive(Debug)]
pub struct CpuDevice {
    name: String,
    allocator: Arc<CachingAllocator<HostAllocator>>,
    me: Weak<CpuDevice>,
}

impl CpuDevice {
    /// A new CPU device with its own unlimited host allocator. Every device made this way
    /// is a device of its own, with a name of its own: `cpu:1`, `cpu:2`, ... in the order
    /// they are made (`cpu:0` is [`CpuDevice::shared`]), as TensorFlow numbers the logical
    /// devices it makes of one CPU.
    pub fn new() -> Arc<CpuDevice> {
        Self::with_allocator(HostAllocator::new())
    }

    /// A new CPU device (named as by [`CpuDevice::new`]) allocating from `allocator` (for
    /// example one with a byte limit), caching up to [`DEFAULT_CACHE_BYTES`] of freed memory.
    pub fn with_allocator(allocator: HostAllocator) -> Arc<CpuDevice> {
        Self::with_cache(allocator, DEFAULT_CACHE_BYTES)
    }

    /// A new CPU device (named as by [`CpuDevice::new`]) allocating from `allocator` and
    /// caching up to `cache_bytes` of freed memory (0 disables the cache).
    pub fn with_cache(allocator: HostAllocator, cache_bytes: usize) -> Arc<CpuDevice> {
        Self::build(
            NEXT_INDEX.fetch_add(1, Ordering::Relaxed),
            allocator,
            cache_bytes,
        )
    }

    fn build(index: usize, allocator: HostAllocator, cache_bytes: usize) -> Arc<CpuDevice> {
        Arc::new_cyclic(|me| CpuDevice {
            name: format!("cpu:{index}"),
            allocator: Arc::new(CachingAllocator::new(allocator, cache_bytes)),
            me: me.clone(),
        })
    }

    /// Return every cached free block to the system.
    pub fn trim(&self) {
        self.allocator.trim();
    }

    /// Bytes of freed memory held for reuse.
    pub fn cached_bytes(&self) -> usize {
        self.allocator.cached_bytes()
    }

    /// The process-wide CPU device `cpu:0`, made on first use.
    pub fn shared() -> Arc<dyn Device> {
        SHARED
            .get_or_init(|| {
                let device: Arc<dyn Device> =
                    CpuDevice::build(0, HostAllocator::new(), DEFAULT_CACHE_BYTES);
                EmbeddedBuffer::register_host_device(&device);
                device
            })
            .clone()
    }

    /// This device's handle for its buffers: the process-wide device's is borrowed from
    /// [`SHARED`], so its buffers keep no reference count on it.
    fn handle(&self) -> DeviceHandle {
        match self.static_handle() {
            Some(shared) => DeviceHandle::Static(shared),
            None => DeviceHandle::Shared(
                self.me
                    .upgrade()
                    .expect("a CpuDevice is only reachable through its Arc"),
            ),
        }
    }

    /// The static handle, if this is the process-wide device.
    #[inline]
    fn static_handle(&self) -> Option<&'static Arc<dyn Device>> {
        SHARED
            .get()
            .filter(|shared| std::ptr::addr_eq(Arc::as_ptr(shared), self))
    }

    fn wrap(&self, block: CachedBlock<HostBlock>) -> Arc<dyn TensorBuffer> {
        Arc::new(HostBuffer::new(
            block,
            self.allocator.clone(),
            self.handle().get().clone(),
        ))
    }
}

impl Device for CpuDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> DeviceKind {
        DeviceKind::CPU
    }

    fn dlpack_device(&self) -> Option<DLDevice> {
        Some(DLDevice::CPU)
    }

    fn description(&self) -> String {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        format!(
            "host CPU ({} {}, {threads} hardware threads)",
            std::env::consts::ARCH,
            std::env::consts::OS
        )
    }

    fn supports(&self, op: Op, dtype: DataType) -> bool {
        op.is_defined_for(dtype)
    }

    fn allocator(&self) -> &dyn AllocatorInfo {
        self.allocator.as_ref()
    }

    fn allocate(&self, bytes: usize) -> Result<Arc<dyn TensorBuffer>> {
        if bytes <= INLINE_BUFFER_BYTES {
            return Ok(InlineBuffer::new_uninit(bytes, self.handle())?);
        }
        Ok(self.wrap(self.allocator.allocate(bytes, ALLOCATOR_ALIGNMENT)?))
    }

    fn allocate_zeroed(&self, bytes: usize) -> Result<Arc<dyn TensorBuffer>> {
        if bytes <= INLINE_BUFFER_BYTES {
            return Ok(InlineBuffer::new_shared(bytes, self.handle())?);
        }
        let block = self.allocator.allocate(bytes, ALLOCATOR_ALIGNMENT)?;
        // SAFETY: the block is `host_len()` writable bytes that nothing else references yet.
        unsafe { std::ptr::write_bytes(block.host_ptr().as_ptr(), 0, block.host_len()) };
        Ok(self.wrap(block))
    }

    fn strings(&self, values: Vec<Vec<u8>>) -> Result<Arc<dyn TensorBuffer>> {
        Ok(Arc::new(StringBuffer::new(
            values,
            self.handle().get().clone(),
        )))
    }

    fn copy_from_host(&self, src: &[u8], out: &mut OutView<'_>) -> Result<()> {
        copy::copy_from_host(src, out)
    }

    fn copy_to_host(&self, src: &TensorView<'_>, dst: &mut [u8]) -> Result<()> {
        copy::copy_to_host(src, dst)
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    fn unary(&self, op: UnaryOp, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
        unary::unary(op, x, out)
    }

    fn binary(
        &self,
        op: BinaryOp,
        a: &TensorView<'_>,
        b: &TensorView<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        binary::binary(op, a, b, out)
    }

    fn embedded_binary(
        &self,
        op: BinaryOp,
        dtype: DataType,
        len: usize,
        a: &EmbeddedBuffer,
        b: &EmbeddedBuffer,
        out: &mut EmbeddedBuffer,
    ) -> bool {
        binary::binary_on(op, dtype, binary::Embedded { len, a, b, out }).is_ok()
    }

    fn select(
        &self,
        cond: &TensorView<'_>,
        a: &TensorView<'_>,
        b: &TensorView<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        binary::select(cond, a, b, out)
    }

    fn cast(&self, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
        cast::cast(x, out)
    }

    fn matmul(&self, a: &TensorView<'_>, b: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
        matmul::matmul(a, b, out)
    }

    fn reduce(
        &self,
        op: ReduceOp,
        x: &TensorView<'_>,
        axes: &[usize],
        out: &mut OutView<'_>,
    ) -> Result<()> {
        reduce::reduce(op, x, axes, out)
    }

    fn fill(&self, value: Scalar, out: &mut OutView<'_>) -> Result<()> {
        fill::fill(value, out)
    }

    fn arange(&self, start: Scalar, step: Scalar, out: &mut OutView<'_>) -> Result<()> {
        fill::arange(start, step, out)
    }

    fn copy(&self, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
        copy::copy(x, out)
    }

    fn concat(
        &self,
        pieces: &[TensorView<'_>],
        axis: usize,
        out: &mut OutView<'_>,
    ) -> Result<bool> {
        copy::concat(pieces, axis, out)
    }

    fn gather_rows(
        &self,
        params: &TensorView<'_>,
        outer: usize,
        rows: &[usize],
        out: &mut OutView<'_>,
    ) -> Result<bool> {
        copy::gather_rows(params, outer, rows, out)
    }

    fn channel_affine(
        &self,
        x: &TensorView<'_>,
        epilogue: &Epilogue<'_>,
        out: &mut OutView<'_>,
    ) -> Result<bool> {
        window::channel_affine(x, epilogue, out)
    }

    fn swish(&self, x: &TensorView<'_>, beta: f64, out: &mut OutView<'_>) -> Result<bool> {
        unary::swish(x, beta, out)
    }

    fn gelu(&self, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<bool> {
        unary::gelu(x, out)
    }

    fn hard_swish(&self, x: &TensorView<'_>, divide: bool, out: &mut OutView<'_>) -> Result<bool> {
        unary::hard_swish(x, divide, out)
    }

    fn softmax(&self, x: &TensorView<'_>, log: bool, out: &mut OutView<'_>) -> Result<bool> {
        unary::softmax(x, log, out)
    }

    fn unary_grad(
        &self,
        op: UnaryOp,
        value: &TensorView<'_>,
        dy: &TensorView<'_>,
        out: &mut OutView<'_>,
    ) -> Result<bool> {
        unary::unary_grad(op, value, dy, out)
    }

    fn apply_update(
        &self,
        rule: polytensor_core::train::Rule,
        var: &TensorView<'_>,
        slots: &[TensorView<'_>],
        scalars: &[TensorView<'_>],
        grad: &TensorView<'_>,
        outs: &mut [OutView<'_>],
    ) -> Result<bool> {
        crate::kernels::optimizer::apply_update(rule, var, slots, scalars, grad, outs)
    }

    fn layer_norm(
        &self,
        x: &TensorView<'_>,
        gamma: Option<&TensorView<'_>>,
        beta: Option<&TensorView<'_>>,
        epsilon: f64,
        out: &mut OutView<'_>,
    ) -> Result<bool> {
        unary::layer_norm(x, gamma, beta, epsilon, out)
    }

    fn window_kernels(&self, dtype: DataType) -> bool {
        window::runs(dtype)
    }

    fn filter_strip(&self, dtype: DataType, dims: [usize; 4]) -> Option<usize> {
        window::filter_strip(dtype, dims)
    }

    fn conv_residual(&self, dtype: DataType) -> bool {
        window::runs(dtype)
    }

    fn bf16_weights(&self) -> bool {
        crate::kernels::matmul::bf16_dot::available()
    }

    fn conv2d(
        &self,
        x: &TensorView<'_>,
        filter: &TensorView<'_>,
        geometry: &WindowGeometry,
        depthwise: bool,
        epilogue: &Epilogue<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        window::conv2d(x, filter, geometry, depthwise, epilogue, out)
    }

    fn conv2d_backprop_input(
        &self,
        dy: &TensorView<'_>,
        filter: &TensorView<'_>,
        geometry: &WindowGeometry,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        window::conv2d_backprop_input(dy, filter, geometry, out)
    }

    fn conv2d_backprop_filter(
        &self,
        x: &TensorView<'_>,
        dy: &TensorView<'_>,
        geometry: &WindowGeometry,
        out: &mut OutView<'_>,
    ) -> Result<bool> {
        window::conv2d_backprop_filter(x, dy, geometry, out)
    }

    fn pool2d(
        &self,
        x: &TensorView<'_>,
        geometry: &WindowGeometry,
        max: bool,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        window::pool2d(x, geometry, max, out)
    }

    fn max_pool_grad(
        &self,
        x: &TensorView<'_>,
        y: &TensorView<'_>,
        dy: &TensorView<'_>,
        geometry: &WindowGeometry,
        out: &mut OutView<'_>,
    ) -> Result<bool> {
        crate::kernels::pool_grad::max_pool_grad(x, y, dy, geometry, out)
    }

    fn segment_reduce(
        &self,
        op: SegmentOp,
        data: &TensorView<'_>,
        segments: &Segments<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        segment::segment_reduce(op, data, segments, out)
    }

    fn assign_rows(
        &self,
        data: &TensorView<'_>,
        rows: &TensorView<'_>,
        out: &mut OutView<'_>,
    ) -> Result<bool> {
        segment::assign_rows(data, rows, out).map(|()| true)
    }

    fn scatter_rows(
        &self,
        data: &TensorView<'_>,
        rows: &TensorView<'_>,
        fill: &TensorView<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        segment::scatter_rows(data, rows, fill, out)
    }
}
