//! [`KitDevice`]: the `Device` of any [`Queue`], written once.

use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, Weak};

use polytensor_core::alloc::BlockAllocator;
use polytensor_core::buffer::{BlockBuffer, Release};
use polytensor_core::device::FloatSemantics;
use polytensor_core::dlpack::DLDevice;
use polytensor_core::plan::segment::{SegmentOp, Segments};
use polytensor_core::plan::window::WindowGeometry;
use polytensor_core::{
    AllocatorInfo, BinaryOp, DataType, Device, DeviceKind, Epilogue, Op, OutView, ReduceOp, Result,
    Scalar, TensorBuffer, TensorView, UnaryOp,
};

use super::{DeviceBase, Identity, Queue};

/// A device whose kernels are the kit's, run by a backend's [`Queue`]: every `Device`
/// method is written here once, over the queue's launches, copies and memory. The queue's
/// own methods are reachable through `Deref`.
pub struct KitDevice<Q: Queue> {
    base: DeviceBase<Q::Memory>,
    queue: Q,
}

impl<Q: Queue> KitDevice<Q> {
    /// The device of `queue`, known by `identity`, its memory `memory` behind a cache of up
    /// to `cache_bytes` of freed blocks.
    pub fn new(
        identity: Identity,
        memory: BlockAllocator<Q::Memory>,
        cache_bytes: usize,
        queue: Q,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me: &Weak<Self>| {
            let me: Weak<dyn Device> = me.clone();
            KitDevice {
                base: DeviceBase::new(identity, memory, cache_bytes, me),
                queue,
            }
        })
    }

    /// What the device says about itself, its memory, and its own `Arc`.
    pub fn base(&self) -> &DeviceBase<Q::Memory> {
        &self.base
    }

    /// Return every cached free block to the driver.
    pub fn trim(&self) {
        self.base.memory.trim();
    }
}

impl<Q: Queue> Deref for KitDevice<Q> {
    type Target = Q;

    fn deref(&self) -> &Q {
        &self.queue
    }
}

impl<Q: Queue> fmt::Debug for KitDevice<Q> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KitDevice({:?})", self.base.identity)
    }
}

impl<Q: Queue> Drop for KitDevice<Q> {
    fn drop(&mut self) {
        // Finish queued work before the cache's blocks go back to the driver.
        let _ = self.queue.synchronize();
        self.base.memory.trim();
    }
}

impl<Q: Queue> Device for KitDevice<Q> {
    fn name(&self) -> &str {
        &self.base.identity.name
    }

    fn kind(&self) -> DeviceKind {
        self.base.identity.kind
    }

    fn description(&self) -> String {
        self.base.identity.description.clone()
    }

    fn is_accelerator(&self) -> bool {
        self.base.identity.accelerator
    }

    fn dlpack_device(&self) -> Option<DLDevice> {
        self.base.identity.dlpack
    }

    fn adopt_memory(
        &self,
        address: usize,
        len: usize,
        read_only: bool,
        release: Release,
    ) -> Result<Arc<dyn TensorBuffer>> {
        Q::adopt_memory(self, address, len, read_only, release)
    }

    fn supports(&self, op: Op, dtype: DataType) -> bool {
        self.queue.capabilities().supports(op, dtype)
    }

    fn float_semantics(&self) -> FloatSemantics {
        self.queue.float_semantics()
    }

    fn allocator(&self) -> &dyn AllocatorInfo {
        self.base.memory.as_ref()
    }

    fn allocate(&self, bytes: usize) -> Result<Arc<dyn TensorBuffer>> {
        Ok(Arc::new(BlockBuffer::allocate(
            bytes,
            &self.base.memory,
            self.base.shared(),
        )?))
    }

    fn allocate_zeroed(&self, bytes: usize) -> Result<Arc<dyn TensorBuffer>> {
        let buffer = self.allocate(bytes)?;
        if bytes > 0 {
            let mem = self.queue.mem(buffer.as_ref())?;
            // SAFETY: the whole of the new buffer, which is alive here.
            unsafe { self.queue.fill_bytes(mem, 0, &[0u8], bytes)? };
        }
        Ok(buffer)
    }

    fn copy_from_host(&self, src: &[u8], out: &mut OutView<'_>) -> Result<()> {
        self.queue.copy_from_host(src, out)
    }

    fn copy_to_host(&self, src: &TensorView<'_>, dst: &mut [u8]) -> Result<()> {
        self.queue.copy_to_host(src, dst)
    }

    fn synchronize(&self) -> Result<()> {
        self.queue.synchronize()
    }

    fn unary(&self, op: UnaryOp, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
        super::unary(self, op, x, out)
    }

    fn binary(
        &self,
        op: BinaryOp,
        a: &TensorView<'_>,
        b: &TensorView<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        super::binary(self, op, a, b, out)
    }

    fn select(
        &self,
        cond: &TensorView<'_>,
        a: &TensorView<'_>,
        b: &TensorView<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        super::select(self, cond, a, b, out)
    }

    fn cast(&self, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
        super::cast(self, x, out)
    }

    fn matmul(&self, a: &TensorView<'_>, b: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
        Q::matmul(self, a, b, out)
    }

    fn reduce(
        &self,
        op: ReduceOp,
        x: &TensorView<'_>,
        axes: &[usize],
        out: &mut OutView<'_>,
    ) -> Result<()> {
        super::reduce(self, op, x, axes, out)
    }

    fn fill(&self, value: Scalar, out: &mut OutView<'_>) -> Result<()> {
        super::fill(self, value, out)
    }

    fn arange(&self, start: Scalar, step: Scalar, out: &mut OutView<'_>) -> Result<()> {
        // Computed on the host, exactly.
        (self as &dyn Device).arange_from_host(start, step, out)
    }

    fn copy(&self, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
        super::copy(self, x, out)
    }

    fn window_kernels(&self, dtype: DataType) -> bool {
        super::window_kernels(self, dtype)
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
        super::conv2d(self, x, filter, geometry, depthwise, epilogue, out)
    }

    fn conv2d_backprop_input(
        &self,
        dy: &TensorView<'_>,
        filter: &TensorView<'_>,
        geometry: &WindowGeometry,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        super::conv2d_backprop_input(self, dy, filter, geometry, out)
    }

    fn pool2d(
        &self,
        x: &TensorView<'_>,
        geometry: &WindowGeometry,
        max: bool,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        super::pool2d(self, x, geometry, max, out)
    }

    fn segment_reduce(
        &self,
        op: SegmentOp,
        data: &TensorView<'_>,
        segments: &Segments<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        super::segment_reduce(self, op, data, segments, out)
    }

    fn scatter_rows(
        &self,
        data: &TensorView<'_>,
        rows: &TensorView<'_>,
        fill: &TensorView<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        super::scatter_rows(self, data, rows, Some(fill), out)
    }

    fn assign_rows(
        &self,
        data: &TensorView<'_>,
        rows: &TensorView<'_>,
        out: &mut OutView<'_>,
    ) -> Result<bool> {
        super::scatter_rows(self, data, rows, None, out).map(|()| true)
    }
}
