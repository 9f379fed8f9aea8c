//! One launch path for every backend that runs the kit's C kernels (OpenCL, CUDA).
//!
//! A backend implements [`Queue`]: its programs by [`ProgramKey`], a kernel launch over a
//! [`Grid`] with [`Arg`]s, a geometry buffer, the memory handle of a buffer and a byte
//! fill. Everything between an operation and its launches (the launch plans of
//! `polytensor_core::plan`, the kernel variant, the argument list each generated kernel
//! takes, the reduction's stages, matmul's batch chunks) is written once here, and
//! [`queue_device_ops!`](crate::queue_device_ops) writes the `Device` methods that only
//! delegate to it, allocation included (a [`BlockBuffer`] of the device's memory cache). A
//! backend's `device.rs` keeps what is truly its API's: opening the device, the driver's
//! memory calls, copies, compiling and launching.

use std::sync::{Arc, Weak};

use polytensor_core::alloc::{BlockAllocator, BlockSource};
use polytensor_core::buffer::{BlockBuffer, BlockCache};
use polytensor_core::device::{checks, Capabilities, DeviceKind};
use polytensor_core::dlpack::DLDevice;
use polytensor_core::plan::segment::{ScatterGeometry, SegmentGeometry, SegmentOp, Segments};
use polytensor_core::plan::window::WindowGeometry;
use polytensor_core::plan::{Coalesced, MatmulPlan, ReducedAxes};
use polytensor_core::{
    BinaryOp, CachingAllocator, DataType, Device, Epilogue, Error, Op, OutView, ReduceOp, Result,
    Scalar, TensorBuffer, TensorView, UnaryOp,
};

use crate::elementwise::{MapKernel, Variant};
use crate::matmul::{MatmulKernel, Schedule};
use crate::reduce::{self, ReduceKernel, Stage, PARTIAL_BYTES, WORKGROUP};
use crate::table::{self, MapSpec, ProgramKey};
use crate::Elem;
use crate::{segment, window};

/// One kernel argument: every parameter of a generated kernel is a buffer or an `i64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg<M> {
    /// Device memory (a `cl_mem`, a CUDA device address).
    Mem(M),
    /// A 64-bit integer (sizes, offsets, strides).
    I64(i64),
}

/// One kernel launch: which kernel of a program, its arguments and its grid.
#[derive(Debug, Clone, Copy)]
pub struct Launch<'a, M> {
    /// The kernel's name in its program.
    pub kernel: &'a str,
    /// The arguments, in the order of the kernel's parameter list.
    pub args: &'a [Arg<M>],
    /// The grid.
    pub grid: Grid,
}

impl<M> Launch<'_, M> {
    /// The error for a kernel that `device`'s compiled program lacks (a generator bug).
    pub fn missing(&self, device: &str) -> Error {
        Error::Backend {
            device: device.to_string(),
            message: format!("no kernel {} in its program", self.kernel),
        }
    }
}

/// A launch's extent: `groups` work-groups (CUDA's blocks) of `group` work-items
/// (threads) along each of three dims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    /// Work-groups along each dim.
    pub groups: [usize; 3],
    /// Work-items of a work-group along each dim.
    pub group: [usize; 3],
}

impl Grid {
    /// `groups` one-dimensional work-groups of `group` work-items.
    pub fn linear(groups: usize, group: usize) -> Self {
        Self {
            groups: [groups, 1, 1],
            group: [group, 1, 1],
        }
    }

    /// The work-items along each dim (OpenCL's global size).
    pub fn global(&self) -> [usize; 3] {
        [0, 1, 2].map(|d| self.groups[d] * self.group[d])
    }
}

/// What a backend provides to run the kit's kernels: an in-order queue on one device.
/// Every launch is queued behind the previous work, so memory freed after queueing a
/// launch is reused only by later work.
pub trait Queue: Device + Sized {
    /// A handle of device memory, as kernels take it.
    type Mem: Copy;
    /// A compiled program: the kernels of one [`ProgramKey`].
    type Program;
    /// What keeps a geometry buffer alive until its launch is queued.
    type Constants;

    /// The driver calls behind the device's memory.
    type Memory: BlockSource;

    /// Work-items of a work-group of elementwise and serial-reduction launches.
    const MAP_GROUP: usize;
    /// The most work-groups an elementwise launch starts (kernels loop over the rest).
    const MAX_MAP_GROUPS: usize;

    /// What the device says about itself, its memory, and its own `Arc`.
    fn base(&self) -> &DeviceBase<Self::Memory>;

    /// The compiled program of `key` (built on first use).
    fn program(&self, key: ProgramKey) -> Result<Arc<Self::Program>>;

    /// Queue `launch`'s kernel of `program` over its grid with its arguments.
    ///
    /// # Safety
    ///
    /// The arguments match the kernel's parameter list as the generator documents it,
    /// every [`Arg::Mem`] is memory of this device that stays allocated until the launch
    /// is queued (later reuse is ordered after it), and the kernel's reads and writes
    /// through the offsets and geometry given lie within that memory.
    unsafe fn launch(&self, program: &Self::Program, launch: Launch<'_, Self::Mem>) -> Result<()>;

    /// A read-only device buffer holding `words` (a kernel's geometry; at least one word),
    /// and its handle.
    fn constants(&self, words: &[i64]) -> Result<(Self::Constants, Self::Mem)>;

    /// The memory handle of `buffer`, or an `Err` if it is not this backend's.
    fn mem(&self, buffer: &dyn TensorBuffer) -> Result<Self::Mem>;

    /// Fill `len` bytes of `mem` from byte `offset` with copies of `pattern` (1, 2, 4, 8 or
    /// 16 bytes; `offset` and `len` multiples of it).
    ///
    /// # Safety
    ///
    /// `mem` is memory of this device, alive until the fill is queued, and
    /// `offset..offset + len` lies within it.
    unsafe fn fill_bytes(
        &self,
        mem: Self::Mem,
        offset: usize,
        pattern: &[u8],
        len: usize,
    ) -> Result<()>;

    /// What the device runs (computed once when it opens).
    fn capabilities(&self) -> &Capabilities;

    /// Whether kernels may compute in f64.
    fn fp64(&self) -> bool;

    /// The work-groups a reduction over few long outputs is split into
    /// ([`reduce::split_groups`] of the device's compute units).
    fn split_groups(&self) -> usize;

    /// How matmul work is divided on this device.
    fn matmul_schedule(&self) -> Schedule;

    /// Convolve through a vendor library (cuDNN) where the device has one that takes this
    /// convolution, before the kit's own kernel: `Ok(true)` if it wrote `out` (without the
    /// epilogue, which [`conv2d`] then applies), `Ok(false)` to leave it to the kit. The
    /// operands are [`conv2d`]'s, already checked.
    fn library_conv2d(
        &self,
        x: &TensorView<'_>,
        filter: &TensorView<'_>,
        geometry: &WindowGeometry,
        depthwise: bool,
        out: &mut OutView<'_>,
    ) -> Result<bool> {
        let _ = (x, filter, geometry, depthwise, out);
        Ok(false)
    }
}

/// What a [`Queue`] device says about itself: the `Device` accessors
/// [`queue_device_ops!`](crate::queue_device_ops) writes.
#[derive(Debug, Clone)]
pub struct Identity {
    /// `Device::name` (`opencl:0`, `cuda:1`).
    pub name: String,
    /// `Device::kind`.
    pub kind: DeviceKind,
    /// `Device::description` (hardware, driver).
    pub description: String,
    /// `Device::is_accelerator`: hardware of its own beside the host CPU.
    pub accelerator: bool,
    /// `Device::dlpack_device`.
    pub dlpack: Option<DLDevice>,
}

/// The parts every [`Queue`] device keeps: what it says about itself, the cache of its
/// driver's memory that its tensors' buffers come from, and the way back to its own `Arc`
/// (which those buffers keep).
pub struct DeviceBase<S: BlockSource> {
    /// Name, kind, description, accelerator or not, DLPack device.
    pub identity: Identity,
    /// The device's memory: the driver's blocks behind a cache.
    pub memory: Arc<BlockCache<S>>,
    me: Weak<dyn Device>,
}

impl<S: BlockSource> DeviceBase<S> {
    /// The parts of a device whose `Arc` is being made (`me`, from `Arc::new_cyclic`), with
    /// `memory` behind a cache of up to `cache_bytes` of freed blocks.
    pub fn new(
        identity: Identity,
        memory: BlockAllocator<S>,
        cache_bytes: usize,
        me: Weak<dyn Device>,
    ) -> Self {
        Self {
            identity,
            memory: Arc::new(CachingAllocator::new(memory, cache_bytes)),
            me,
        }
    }

    /// The device as the `Arc` its buffers keep.
    pub fn shared(&self) -> Arc<dyn Device> {
        self.me
            .upgrade()
            .expect("a device is only reachable through its Arc")
    }
}

/// The grid of an elementwise launch over `count` items.
fn map_grid<Q: Queue>(count: usize) -> Grid {
    Grid::linear(
        count.div_ceil(Q::MAP_GROUP).clamp(1, Q::MAX_MAP_GROUPS),
        Q::MAP_GROUP,
    )
}

/// The memory a kernel writes `out` into, contiguously from `out`'s offset.
pub fn output_mem<Q: Queue>(q: &Q, out: &OutView<'_>) -> Result<Q::Mem> {
    if !out.layout().is_contiguous() {
        return Err(Error::invalid(format!(
            "a kernel output on {} must be contiguous",
            q.name()
        )));
    }
    q.mem(out.view().buffer())
}

/// `out[i] = spec(inputs[..][i])` for inputs of the output's shape (already broadcast).
pub fn map<Q: Queue>(
    q: &Q,
    spec: (ProgramKey, MapSpec),
    inputs: &[&TensorView<'_>],
    out: &mut OutView<'_>,
) -> Result<()> {
    checks::same_shapes(inputs, &out.view())?;
    let layout = out.layout();
    let target = output_mem(q, out)?;
    map_into(
        q,
        spec,
        inputs,
        &layout.shape().dims(),
        target,
        layout.offset(),
    )
}

/// [`map`] into the contiguous elements of `dims` from element `offset` of `target`.
pub fn map_into<Q: Queue>(
    q: &Q,
    (key, spec): (ProgramKey, MapSpec),
    inputs: &[&TensorView<'_>],
    dims: &[usize],
    target: Q::Mem,
    offset: usize,
) -> Result<()> {
    let count: usize = dims.iter().product();
    if count == 0 {
        return Ok(());
    }
    let strides: Vec<&[isize]> = inputs.iter().map(|x| x.layout().strides()).collect();
    let plan = Coalesced::new(dims, &strides);
    let variant = Variant::of(&plan);
    let (name, _) = spec.kernel(variant);
    let program = q.program(key)?;
    let geometry = match variant {
        Variant::Strided => Some(q.constants(&MapKernel::geometry(&plan, inputs.len()))?),
        Variant::Contiguous | Variant::Flat => None,
    };
    let mut args = vec![Arg::I64(count as i64)];
    if let Some((_, g)) = &geometry {
        args.push(Arg::Mem(*g));
    }
    for (k, x) in inputs.iter().enumerate() {
        args.push(Arg::Mem(q.mem(x.buffer())?));
        args.push(Arg::I64(x.layout().offset() as i64));
        if variant == Variant::Flat {
            args.push(Arg::I64(plan.strides(k)[0] as i64));
        }
    }
    args.extend([Arg::Mem(target), Arg::I64(offset as i64)]);
    let grid = map_grid::<Q>(count);
    let launch = Launch {
        kernel: &name,
        args: &args,
        grid,
    };
    // SAFETY: the arguments are the map kernel's (count, geometry if strided, then each
    // input's memory, offset and flat stride, then the output's), all of live buffers; the
    // views' layouts lie within their buffers (a `TensorView`'s invariant) and the caller's
    // `count` elements of `target` from `offset` are its own.
    unsafe { q.launch(&program, launch) }
}

/// The elementwise kernel of `op` on `dtype` over `inputs`, or `Unsupported`.
fn map_op<Q: Queue>(
    q: &Q,
    op: Op,
    dtype: DataType,
    inputs: &[&TensorView<'_>],
    out: &mut OutView<'_>,
) -> Result<()> {
    if !q.supports(op, dtype) {
        return Err(q.unsupported(op, dtype));
    }
    let spec = table::map_spec(op, dtype).ok_or_else(|| q.unsupported(op, dtype))?;
    map(q, spec, inputs, out)
}

/// `Device::unary`.
pub fn unary<Q: Queue>(
    q: &Q,
    op: UnaryOp,
    x: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    map_op(q, Op::Unary(op), x.dtype(), &[x], out)
}

/// `Device::binary`.
pub fn binary<Q: Queue>(
    q: &Q,
    op: BinaryOp,
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    checks::same_dtype(op.name(), a.dtype(), &[b.dtype()])?;
    map_op(q, Op::Binary(op), a.dtype(), &[a, b], out)
}

/// `Device::select`.
pub fn select<Q: Queue>(
    q: &Q,
    cond: &TensorView<'_>,
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    checks::select_dtypes(cond.dtype(), a.dtype(), b.dtype())?;
    map_op(q, Op::Where, a.dtype(), &[cond, a, b], out)
}

/// `Device::copy`.
pub fn copy<Q: Queue>(q: &Q, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
    checks::copy_dtypes(x.dtype(), out.dtype())?;
    map_op(q, Op::Copy, x.dtype(), &[x], out)
}

/// `Device::cast`.
pub fn cast<Q: Queue>(q: &Q, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
    let (from, to) = (x.dtype(), out.dtype());
    for dtype in [from, to] {
        if !q.supports(Op::Cast, dtype) {
            return Err(q.unsupported("cast", dtype));
        }
    }
    let spec = table::cast_spec(from, to).ok_or_else(|| q.unsupported("cast", from))?;
    map(q, spec, &[x], out)
}

/// `Device::allocate`: a block of the device's memory cache.
pub fn allocate<Q: Queue>(q: &Q, bytes: usize) -> Result<Arc<dyn TensorBuffer>> {
    let base = q.base();
    Ok(Arc::new(BlockBuffer::allocate(
        bytes,
        &base.memory,
        base.shared(),
    )?))
}

/// `Device::allocate_zeroed`: [`allocate`], then zero bytes filled on the queue.
pub fn allocate_zeroed<Q: Queue>(q: &Q, bytes: usize) -> Result<Arc<dyn TensorBuffer>> {
    let buffer = q.allocate(bytes)?;
    if bytes > 0 {
        let mem = q.mem(buffer.as_ref())?;
        // SAFETY: the whole of the new buffer, which is alive here.
        unsafe { q.fill_bytes(mem, 0, &[0u8], bytes)? };
    }
    Ok(buffer)
}

/// `Device::fill`: the value's bytes repeated over the output.
pub fn fill<Q: Queue>(q: &Q, value: Scalar, out: &mut OutView<'_>) -> Result<()> {
    let dtype = out.dtype();
    let unsupported = || q.unsupported("fill", dtype);
    if !q.supports(Op::Fill, dtype) {
        return Err(unsupported());
    }
    let bytes = polytensor_core::element::scalar_bytes(value, dtype).ok_or_else(unsupported)?;
    let target = output_mem(q, out)?;
    let (layout, size) = (out.layout(), dtype.size());
    // SAFETY: the output's contiguous elements lie within its buffer, which `out` borrows.
    unsafe {
        q.fill_bytes(
            target,
            layout.offset() * size,
            &bytes,
            layout.num_elements() * size,
        )
    }
}

/// `Device::reduce`: one work-item per output when the reduced extent is short, a
/// work-group tree per output otherwise, and few long outputs split across work-groups
/// whose partials a second launch gathers.
pub fn reduce<Q: Queue>(
    q: &Q,
    op: ReduceOp,
    x: &TensorView<'_>,
    axes: &[usize],
    out: &mut OutView<'_>,
) -> Result<()> {
    let dtype = x.dtype();
    checks::reduce_output(op, dtype, out.dtype())?;
    if !q.supports(Op::Reduce(op), dtype) {
        return Err(q.unsupported(op.name(), dtype));
    }
    let input = Elem::of(dtype).ok_or_else(|| q.unsupported(op.name(), dtype))?;
    let target = output_mem(q, out)?;
    let layout = x.layout();
    let outputs = out.layout().num_elements();
    let split = ReducedAxes::split(layout, axes, outputs)?;
    let count: usize = split.reduced.iter().product();
    if outputs == 0 {
        return Ok(());
    }
    let kernel = ReduceKernel {
        op,
        input,
        wide_floats: q.fp64(),
    };
    let program = q.program(ProgramKey::Reduce(dtype))?;
    let (_geometry, geometry_mem) = q.constants(&ReduceKernel::geometry(
        &split.kept,
        &split.kept_strides,
        &split.reduced,
        &split.reduced_strides,
    ))?;
    let out_offset = Arg::I64(out.layout().offset() as i64);
    let args = [
        Arg::I64(outputs as i64),
        Arg::I64(count as i64),
        Arg::Mem(geometry_mem),
        Arg::Mem(q.mem(x.buffer())?),
        Arg::I64(layout.offset() as i64),
        Arg::Mem(target),
        out_offset,
    ];
    let parts = reduce::split_parts(outputs, count, q.split_groups());
    let launch = |stage: Stage, args: &[Arg<Q::Mem>], grid: Grid| {
        let name = kernel.kernel_name(stage);
        let stage_launch = Launch {
            kernel: &name,
            args,
            grid,
        };
        // SAFETY: each stage gets the reduction kernel's parameters (`ReduceKernel`
        // documents them) over live buffers: the input view, the geometry and partials
        // held to the end of this function, and the output, whose `outputs` contiguous
        // elements lie within its buffer.
        unsafe { q.launch(&program, stage_launch) }
    };
    if count < WORKGROUP {
        launch(Stage::Serial, &args, map_grid::<Q>(outputs))
    } else if parts > 1 {
        // Few outputs, each long: split each across `parts` work-groups, then gather.
        // Kept alive (and so its memory valid) until both launches are queued.
        let partial_buffer = q.allocate(outputs * parts * PARTIAL_BYTES)?;
        let partials = Arg::Mem(q.mem(partial_buffer.as_ref())?);
        let mut split = args[..5].to_vec();
        split.extend([partials, Arg::I64(parts as i64)]);
        let groups = (outputs * parts).min(1 << 16);
        launch(Stage::Split, &split, Grid::linear(groups, WORKGROUP))?;
        let gather = [
            Arg::I64(outputs as i64),
            Arg::I64(count as i64),
            partials,
            Arg::I64(parts as i64),
            Arg::Mem(target),
            out_offset,
        ];
        let groups = outputs.min(1 << 16);
        launch(Stage::Gather, &gather, Grid::linear(groups, WORKGROUP))
    } else {
        let groups = outputs.min(1 << 16);
        launch(Stage::Tree, &args, Grid::linear(groups, WORKGROUP))
    }
}

/// The checks and trivial cases every matmul shares: dtypes, support, the plan; an empty
/// output needs nothing and `k = 0` is zeros. `Some(plan)` where there is work to do.
pub fn matmul_plan<Q: Queue>(
    q: &Q,
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<Option<MatmulPlan>> {
    let dtype = a.dtype();
    checks::same_dtype("matmul", dtype, &[b.dtype(), out.dtype()])?;
    if !q.supports(Op::Matmul, dtype) {
        return Err(q.unsupported("matmul", dtype));
    }
    output_mem(q, out)?;
    let plan = MatmulPlan::new(a.layout(), b.layout(), out.layout())?;
    if plan.batches() * plan.m * plan.n == 0 {
        return Ok(None);
    }
    if plan.k == 0 {
        fill(q, Scalar::I64(0), out)?;
        return Ok(None);
    }
    Ok(Some(plan))
}

/// `out = a @ b` by the generated kernel of `plan`, in batch chunks that every device's
/// third launch dim holds.
pub fn matmul_kernel<Q: Queue>(
    q: &Q,
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
    plan: &MatmulPlan,
) -> Result<()> {
    const BATCH_CHUNK: usize = 65_535;
    let program = q.program(ProgramKey::Matmul(a.dtype()))?;
    let (_geometry, geometry_mem) = q.constants(&MatmulKernel::geometry(plan))?;
    let (la, lb) = (a.layout(), b.layout());
    let (a_mem, b_mem, out_mem) = (q.mem(a.buffer())?, q.mem(b.buffer())?, output_mem(q, out)?);
    let schedule = q.matmul_schedule();
    let batches = plan.batches();
    for first in (0..batches).step_by(BATCH_CHUNK) {
        let chunk = (batches - first).min(BATCH_CHUNK);
        let args = [
            Arg::I64(plan.m as i64),
            Arg::I64(plan.n as i64),
            Arg::I64(plan.k as i64),
            Arg::Mem(geometry_mem),
            Arg::I64(first as i64),
            Arg::Mem(a_mem),
            Arg::I64(la.offset() as i64),
            Arg::I64(plan.a_strides[0] as i64),
            Arg::I64(plan.a_strides[1] as i64),
            Arg::Mem(b_mem),
            Arg::I64(lb.offset() as i64),
            Arg::I64(plan.b_strides[0] as i64),
            Arg::I64(plan.b_strides[1] as i64),
            Arg::Mem(out_mem),
            Arg::I64(out.layout().offset() as i64),
        ];
        let (global, group) = (schedule.global(plan.m, plan.n, chunk), schedule.local());
        let grid = Grid {
            groups: [0, 1, 2].map(|d| global[d] / group[d]),
            group,
        };
        let launch = Launch {
            kernel: "matmul",
            args: &args,
            grid,
        };
        // SAFETY: the matmul kernel's parameters, in order, over the live operand and output
        // buffers and the geometry held to the end of this function; `MatmulPlan` checked
        // that the strided operands and the output fit their layouts.
        unsafe { q.launch(&program, launch)? };
    }
    Ok(())
}

/// `Device::window_kernels`: the kit has them for floats the device computes in.
pub fn window_kernels<Q: Queue>(q: &Q, dtype: DataType) -> bool {
    table::window_kernels(dtype, q.fp64()).is_some()
}

/// The memory and element offset of a window operand, checked
/// ([`window::check_operand`]).
fn window_operand<Q: Queue>(
    q: &Q,
    view: &TensorView<'_>,
    dtype: DataType,
    count: usize,
    what: &str,
) -> Result<(Q::Mem, i64)> {
    window::check_operand(view, dtype, count, what)?;
    Ok((q.mem(view.buffer())?, view.layout().offset() as i64))
}

/// `Device::conv2d`: the device's library where it takes the convolution (then the
/// kit's `epilogue` kernel), else the kit's `conv2d` or `depthwise2d` kernel with the
/// epilogue fused.
pub fn conv2d<Q: Queue>(
    q: &Q,
    x: &TensorView<'_>,
    filter: &TensorView<'_>,
    g: &WindowGeometry,
    depthwise: bool,
    epilogue: &Epilogue<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    let dtype = x.dtype();
    let unsupported = || q.unsupported("conv2d", dtype);
    if !window_kernels(q, dtype) {
        return Err(unsupported());
    }
    let out_channels = g.conv_channels(depthwise)?;
    let outputs = g.output_elements(out_channels)?;
    let x_at = window_operand(q, x, dtype, g.input_elements()?, "input")?;
    let f_at = window_operand(q, filter, dtype, g.filter_elements()?, "filter")?;
    window::check_operand(&out.view(), dtype, outputs, "output")?;
    let target = output_mem(q, out)?;
    // The epilogue's parts: each present one checked, absent ones pointing at the input
    // (never read).
    let part = |view: &Option<TensorView<'_>>, what| match view {
        Some(v) => window_operand(q, v, dtype, out_channels, what),
        None => Ok(x_at),
    };
    let (scale, shift) = (
        part(&epilogue.scale, "scale")?,
        part(&epilogue.shift, "shift")?,
    );
    let fused = window::Epilogue {
        scale: epilogue.scale.is_some(),
        shift: epilogue.shift.is_some(),
        activation: epilogue.activation,
    };
    let word = fused.word().ok_or_else(|| {
        Error::invalid("a window kernel applies only Relu or Relu6 after a convolution")
    })?;
    if outputs == 0 {
        return Ok(());
    }
    let program = q.program(ProgramKey::Window(dtype))?;
    let out_at = (target, out.layout().offset() as i64);
    if q.library_conv2d(x, filter, g, depthwise, out)? {
        if fused.is_empty() {
            return Ok(());
        }
        let mut args = vec![Arg::I64(outputs as i64), Arg::I64(out_channels as i64)];
        args.extend([
            Arg::Mem(scale.0),
            Arg::I64(scale.1),
            Arg::Mem(shift.0),
            Arg::I64(shift.1),
            Arg::I64(word),
            Arg::Mem(target),
            Arg::I64(out_at.1),
        ]);
        let launch = Launch {
            kernel: "epilogue",
            args: &args,
            grid: map_grid::<Q>(outputs),
        };
        // SAFETY: the epilogue kernel's parameters (`window` documents them): the output's
        // `outputs` contiguous elements and the per-channel parts of `out_channels`
        // elements, all checked against their live buffers above.
        return unsafe { q.launch(&program, launch) };
    }
    let pixels = outputs / out_channels.max(1);
    let (kernel, items) = if depthwise {
        ("depthwise2d", outputs)
    } else {
        ("conv2d", window::conv_items(pixels, g.filters))
    };
    let args = window::conv_args(items, g, x_at, f_at, [scale, shift], word, out_at);
    let launch = Launch {
        kernel,
        args: &args,
        grid: map_grid::<Q>(items),
    };
    // SAFETY: the convolution kernel's parameters (`window` documents them) over the
    // input, filter, epilogue parts and output, each checked above to be a contiguous view
    // of its live buffer with the element count the geometry reads or writes.
    unsafe { q.launch(&program, launch) }
}

/// `Device::pool2d`: the kit's `max_pool2d` or `avg_pool2d` kernel.
pub fn pool2d<Q: Queue>(
    q: &Q,
    x: &TensorView<'_>,
    g: &WindowGeometry,
    max: bool,
    out: &mut OutView<'_>,
) -> Result<()> {
    let dtype = x.dtype();
    if !window_kernels(q, dtype) {
        return Err(q.unsupported("pool2d", dtype));
    }
    let outputs = g.output_elements(g.channels)?;
    let x_at = window_operand(q, x, dtype, g.input_elements()?, "input")?;
    window::check_operand(&out.view(), dtype, outputs, "output")?;
    let target = output_mem(q, out)?;
    if outputs == 0 {
        return Ok(());
    }
    let program = q.program(ProgramKey::Window(dtype))?;
    let out_at = (target, out.layout().offset() as i64);
    let args = window::pool_args(outputs, g, x_at, out_at);
    let launch = Launch {
        kernel: if max { "max_pool2d" } else { "avg_pool2d" },
        args: &args,
        grid: map_grid::<Q>(outputs),
    };
    // SAFETY: the pooling kernel's parameters (`window` documents them) over the input and
    // output, each checked above to be a contiguous view of its live buffer with the
    // element count the geometry reads or writes.
    unsafe { q.launch(&program, launch) }
}

/// A contiguous operand as the kit's kernels take it: its memory and its element offset.
fn operand_at<Q: Queue>(q: &Q, view: &TensorView<'_>) -> Result<(Q::Mem, i64)> {
    Ok((q.mem(view.buffer())?, view.layout().offset() as i64))
}

/// `Device::segment_reduce`: the kit's segment kernel of `op` for the data's dtype.
pub fn segment_reduce<Q: Queue>(
    q: &Q,
    op: SegmentOp,
    data: &TensorView<'_>,
    segments: &Segments<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    let dtype = data.dtype();
    let g = SegmentGeometry::new(op, data, segments, out)?;
    let key = table::segment_program(op, dtype, q.fp64())
        .ok_or_else(|| q.unsupported(op.name(), dtype))?;
    let target = output_mem(q, out)?;
    let items = g.segments * g.width;
    if items == 0 {
        return Ok(());
    }
    let program = q.program(key)?;
    let out_at = (target, out.layout().offset() as i64);
    let args = segment::fold_args(&g, data, segments, out_at, |view| operand_at(q, view))?;
    let launch = Launch {
        kernel: op.name(),
        args: &args,
        grid: map_grid::<Q>(items),
    };
    // SAFETY: the segment kernel's parameters (`segment` documents them), every operand a
    // contiguous view of its live buffer with the counts `SegmentGeometry::new` checked;
    // the kernel clamps the offsets it reads to the entries and skips rows outside the
    // data, so the rows' and offsets' values cannot send a read or write out of bounds.
    unsafe { q.launch(&program, launch) }
}

/// `Device::scatter_rows`: the kit's `segment_fill`, then `segment_scatter`, of the
/// dtype's raw element.
pub fn scatter_rows<Q: Queue>(
    q: &Q,
    data: &TensorView<'_>,
    rows: &TensorView<'_>,
    fill: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    let dtype = data.dtype();
    let g = ScatterGeometry::new(data, rows, fill, out)?;
    let key = table::segment_program(SegmentOp::Gather, dtype, q.fp64())
        .ok_or_else(|| q.unsupported("scatter_rows", dtype))?;
    let target = output_mem(q, out)?;
    let outputs = out.layout().num_elements();
    if outputs == 0 {
        return Ok(());
    }
    let program = q.program(key)?;
    let out_at = (target, out.layout().offset() as i64);
    let operands = (data, rows, fill);
    let [fill_args, scatter_args] =
        segment::scatter_args(&g, outputs, operands, out_at, |view| operand_at(q, view))?;
    let launch = Launch {
        kernel: "segment_fill",
        args: &fill_args,
        grid: map_grid::<Q>(outputs),
    };
    // SAFETY: `segment_fill`'s parameters (`segment` documents them): the one-element fill
    // and the output's `outputs` contiguous elements, checked by `ScatterGeometry::new`.
    unsafe { q.launch(&program, launch)? };
    let items = g.entries * g.width;
    if items == 0 {
        return Ok(());
    }
    let launch = Launch {
        kernel: "segment_scatter",
        args: &scatter_args,
        grid: map_grid::<Q>(items),
    };
    // SAFETY: `segment_scatter`'s parameters (`segment` documents them): the data's `items`
    // contiguous elements, one row number per data row, and the output of `out_rows` rows
    // of `width`, checked by `ScatterGeometry::new`; the kernel skips a row outside the
    // output, so the rows' values cannot send a write out of bounds.
    unsafe { q.launch(&program, launch) }
}

/// The `Device` methods of a [`Queue`] backend that only delegate to it or to this
/// module: supports, allocate_zeroed, unary, binary, select, cast, reduce, fill, copy,
/// the window kernels, the segment reduction and row scatter, and arange (computed on the host, exactly). Invoke it inside `impl Device for ...`.
#[macro_export]
macro_rules! queue_device_ops {
    () => {
        fn name(&self) -> &str {
            &$crate::launch::Queue::base(self).identity.name
        }

        fn kind(&self) -> polytensor_core::DeviceKind {
            $crate::launch::Queue::base(self).identity.kind
        }

        fn description(&self) -> String {
            $crate::launch::Queue::base(self)
                .identity
                .description
                .clone()
        }

        fn is_accelerator(&self) -> bool {
            $crate::launch::Queue::base(self).identity.accelerator
        }

        fn dlpack_device(&self) -> Option<polytensor_core::dlpack::DLDevice> {
            $crate::launch::Queue::base(self).identity.dlpack
        }

        fn supports(&self, op: polytensor_core::Op, dtype: polytensor_core::DataType) -> bool {
            $crate::launch::Queue::capabilities(self).supports(op, dtype)
        }

        fn allocator(&self) -> &dyn polytensor_core::AllocatorInfo {
            $crate::launch::Queue::base(self).memory.as_ref()
        }

        fn allocate(
            &self,
            bytes: usize,
        ) -> polytensor_core::Result<std::sync::Arc<dyn polytensor_core::TensorBuffer>> {
            $crate::launch::allocate(self, bytes)
        }

        fn allocate_zeroed(
            &self,
            bytes: usize,
        ) -> polytensor_core::Result<std::sync::Arc<dyn polytensor_core::TensorBuffer>> {
            $crate::launch::allocate_zeroed(self, bytes)
        }

        fn unary(
            &self,
            op: polytensor_core::UnaryOp,
            x: &polytensor_core::TensorView<'_>,
            out: &mut polytensor_core::OutView<'_>,
        ) -> polytensor_core::Result<()> {
            $crate::launch::unary(self, op, x, out)
        }

        fn binary(
            &self,
            op: polytensor_core::BinaryOp,
            a: &polytensor_core::TensorView<'_>,
            b: &polytensor_core::TensorView<'_>,
            out: &mut polytensor_core::OutView<'_>,
        ) -> polytensor_core::Result<()> {
            $crate::launch::binary(self, op, a, b, out)
        }

        fn select(
            &self,
            cond: &polytensor_core::TensorView<'_>,
            a: &polytensor_core::TensorView<'_>,
            b: &polytensor_core::TensorView<'_>,
            out: &mut polytensor_core::OutView<'_>,
        ) -> polytensor_core::Result<()> {
            $crate::launch::select(self, cond, a, b, out)
        }

        fn cast(
            &self,
            x: &polytensor_core::TensorView<'_>,
            out: &mut polytensor_core::OutView<'_>,
        ) -> polytensor_core::Result<()> {
            $crate::launch::cast(self, x, out)
        }

        fn reduce(
            &self,
            op: polytensor_core::ReduceOp,
            x: &polytensor_core::TensorView<'_>,
            axes: &[usize],
            out: &mut polytensor_core::OutView<'_>,
        ) -> polytensor_core::Result<()> {
            $crate::launch::reduce(self, op, x, axes, out)
        }

        fn fill(
            &self,
            value: polytensor_core::Scalar,
            out: &mut polytensor_core::OutView<'_>,
        ) -> polytensor_core::Result<()> {
            $crate::launch::fill(self, value, out)
        }

        fn arange(
            &self,
            start: polytensor_core::Scalar,
            step: polytensor_core::Scalar,
            out: &mut polytensor_core::OutView<'_>,
        ) -> polytensor_core::Result<()> {
            (self as &dyn polytensor_core::Device).arange_from_host(start, step, out)
        }

        fn copy(
            &self,
            x: &polytensor_core::TensorView<'_>,
            out: &mut polytensor_core::OutView<'_>,
        ) -> polytensor_core::Result<()> {
            $crate::launch::copy(self, x, out)
        }

        fn window_kernels(&self, dtype: polytensor_core::DataType) -> bool {
            $crate::launch::window_kernels(self, dtype)
        }

        fn conv2d(
            &self,
            x: &polytensor_core::TensorView<'_>,
            filter: &polytensor_core::TensorView<'_>,
            geometry: &polytensor_core::plan::window::WindowGeometry,
            depthwise: bool,
            epilogue: &polytensor_core::Epilogue<'_>,
            out: &mut polytensor_core::OutView<'_>,
        ) -> polytensor_core::Result<()> {
            $crate::launch::conv2d(self, x, filter, geometry, depthwise, epilogue, out)
        }

        fn pool2d(
            &self,
            x: &polytensor_core::TensorView<'_>,
            geometry: &polytensor_core::plan::window::WindowGeometry,
            max: bool,
            out: &mut polytensor_core::OutView<'_>,
        ) -> polytensor_core::Result<()> {
            $crate::launch::pool2d(self, x, geometry, max, out)
        }

        fn segment_reduce(
            &self,
            op: polytensor_core::plan::segment::SegmentOp,
            data: &polytensor_core::TensorView<'_>,
            segments: &polytensor_core::plan::segment::Segments<'_>,
            out: &mut polytensor_core::OutView<'_>,
        ) -> polytensor_core::Result<()> {
            $crate::launch::segment_reduce(self, op, data, segments, out)
        }

        fn scatter_rows(
            &self,
            data: &polytensor_core::TensorView<'_>,
            rows: &polytensor_core::TensorView<'_>,
            fill: &polytensor_core::TensorView<'_>,
            out: &mut polytensor_core::OutView<'_>,
        ) -> polytensor_core::Result<()> {
            $crate::launch::scatter_rows(self, data, rows, fill, out)
        }
    };
}
