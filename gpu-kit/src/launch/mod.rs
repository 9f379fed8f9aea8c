//! One launch path for every backend that runs the kit's C kernels (OpenCL, CUDA).
//!
//! A backend implements [`Queue`]: its programs by [`ProgramKey`], a kernel launch over a
//! [`Grid`] with [`Arg`]s, a geometry buffer, the memory handle of a buffer, a byte fill,
//! copies to and from the host. Everything between an operation and its launches (the
//! launch plans of `polytensor_core::plan`, the kernel variant, the argument list each
//! generated kernel takes, the reduction's stages, matmul's batch chunks) is written once
//! here, and [`KitDevice`] is the `Device` of any queue, written once, allocation included
//! (a [`BlockBuffer`](polytensor_core::buffer::BlockBuffer) of the device's memory cache).
//! A backend keeps what is truly its API's: opening the device, the driver's memory calls,
//! copies, compiling and launching, and the vendor libraries it prefers to the kit's
//! kernels ([`Queue::matmul`], [`Queue::library_conv2d`]).
//!
//! - [`map`](mod@map): elementwise ops, casts, copies, fills;
//! - [`reduce`](mod@reduce): reductions (serial, tree, split);
//! - [`matmul`](mod@matmul): the kit's matmul kernel;
//! - [`window`]: convolutions and pooling;
//! - [`segment`]: segment reductions and row scatters.

use std::sync::{Arc, Weak};

use polytensor_core::alloc::{BlockAllocator, BlockSource};
use polytensor_core::buffer::{BlockCache, Release};
use polytensor_core::device::{Capabilities, DeviceKind, FloatSemantics};
use polytensor_core::dlpack::DLDevice;
use polytensor_core::plan::window::WindowGeometry;
use polytensor_core::{
    CachingAllocator, Device, Error, OutView, ReduceOp, Result, TensorBuffer, TensorView,
};

use crate::ir::KernelName;
use crate::matmul::Schedule;
use crate::reduce::ReduceKernel;
use crate::table::ProgramKey;
use crate::Elem;

mod device;
pub mod map;
pub mod matmul;
pub mod reduce;
pub mod segment;
pub mod window;

pub use device::KitDevice;
pub use map::{binary, cast, copy, fill, map, map_into, select, unary};
pub use matmul::{matmul_kernel, matmul_plan};
pub use reduce::reduce;
pub use segment::{scatter_rows, segment_reduce};
pub use window::{conv2d, conv2d_backprop_input, pool2d, window_kernels};

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
    pub kernel: KernelName,
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
/// launch is reused only by later work. [`KitDevice`] makes it a `Device`.
pub trait Queue: Send + Sync + Sized + 'static {
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

    /// A read-only device buffer of `device` holding `words` (a kernel's geometry; at least
    /// one word), and its handle.
    fn constants(device: &KitDevice<Self>, words: &[i64]) -> Result<(Self::Constants, Self::Mem)>;

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

    /// How the device's float arithmetic departs from IEEE 754 (IEEE 754 by default).
    fn float_semantics(&self) -> FloatSemantics {
        FloatSemantics::default()
    }

    /// Whether kernels may compute in f64.
    fn fp64(&self) -> bool;

    /// The work-groups a reduction over few long outputs is split into
    /// ([`crate::reduce::split_groups`] of the device's compute units).
    fn split_groups(&self) -> usize;

    /// How matmul work is divided on this device.
    fn matmul_schedule(&self) -> Schedule;

    /// The reduction `op` of `input` as this device runs it; by default the C devices'
    /// ([`ReduceKernel::new`]: f64 accumulators where the device computes in f64).
    fn reduce_kernel(&self, op: ReduceOp, input: Elem) -> ReduceKernel {
        ReduceKernel::new(op, input, self.fp64())
    }

    /// `Device::copy_from_host`: `src` into `out`'s bytes.
    fn copy_from_host(&self, src: &[u8], out: &mut OutView<'_>) -> Result<()>;

    /// `Device::copy_to_host`: `src`'s bytes into `dst`, waiting for queued work.
    fn copy_to_host(&self, src: &TensorView<'_>, dst: &mut [u8]) -> Result<()>;

    /// `Device::synchronize`: wait for every queued launch and copy.
    fn synchronize(&self) -> Result<()>;

    /// `Device::matmul` (operands unchecked): the kit's kernel by default; a backend with
    /// a vendor library (cuBLAS) sends what it takes there.
    fn matmul(
        device: &KitDevice<Self>,
        a: &TensorView<'_>,
        b: &TensorView<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        match matmul_plan(device, a, b, out)? {
            Some(plan) => matmul_kernel(device, a, b, out, &plan),
            None => Ok(()),
        }
    }

    /// Convolve through a vendor library (cuDNN) where the device has one that takes this
    /// convolution, before the kit's own kernel: `Ok(true)` if it wrote `out` (without the
    /// epilogue, which [`conv2d`] then applies), `Ok(false)` to leave it to the kit. The
    /// operands are [`conv2d`]'s, already checked.
    fn library_conv2d(
        device: &KitDevice<Self>,
        x: &TensorView<'_>,
        filter: &TensorView<'_>,
        geometry: &WindowGeometry,
        depthwise: bool,
        out: &mut OutView<'_>,
    ) -> Result<bool> {
        let _ = (device, x, filter, geometry, depthwise, out);
        Ok(false)
    }

    /// `Device::adopt_memory`: wrap memory allocated outside polytensor (DLPack imports).
    /// By default a queue cannot, and says so (running `release` at once).
    fn adopt_memory(
        device: &KitDevice<Self>,
        address: usize,
        len: usize,
        read_only: bool,
        release: Release,
    ) -> Result<Arc<dyn TensorBuffer>> {
        let _ = (address, len, read_only);
        drop(release);
        Err(Error::invalid(format!(
            "{} cannot hold memory it did not allocate",
            device.name()
        )))
    }
}

/// What a [`KitDevice`] says about itself: its `Device` accessors.
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

/// The parts every [`KitDevice`] keeps: what it says about itself, the cache of its
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
pub fn map_grid<Q: Queue>(count: usize) -> Grid {
    Grid::linear(
        count.div_ceil(Q::MAP_GROUP).clamp(1, Q::MAX_MAP_GROUPS),
        Q::MAP_GROUP,
    )
}

/// A contiguous operand as the kit's kernels take it: its memory and its element offset.
fn operand_at<Q: Queue>(q: &KitDevice<Q>, view: &TensorView<'_>) -> Result<(Q::Mem, i64)> {
    Ok((q.mem(view.buffer())?, view.layout().offset() as i64))
}

/// The memory a kernel writes `out` into, contiguously from `out`'s offset.
pub fn output_mem<Q: Queue>(q: &KitDevice<Q>, out: &OutView<'_>) -> Result<Q::Mem> {
    if !out.layout().is_contiguous() {
        return Err(Error::invalid(format!(
            "a kernel output on {} must be contiguous",
            q.name()
        )));
    }
    q.mem(out.view().buffer())
}
