//! The [`Device`] trait: memory, copies and the kernel surface every backend implements,
//! and the operand views kernels receive.

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use crate::alloc::AllocatorInfo;
use crate::buffer::EmbeddedBuffer;
use crate::dlpack::ffi::DLDevice;
use crate::dtype::{DTypeSet, DataType};
use crate::element::{Element, Scalar};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::ops::{BinaryOp, Op, ReduceOp, UnaryOp};
use crate::plan::segment::{SegmentOp, Segments};
use crate::plan::window::WindowGeometry;

mod buffer;
mod capabilities;

pub use buffer::TensorBuffer;
pub use capabilities::{Capabilities, FloatSemantics};

/// The family of a device, by the name its devices carry (`cpu` in `cpu:0`). Kinds are
/// open: a backend names its own (`DeviceKind::new("opencl")`, kept as a constant of the
/// backend crate) without editing this crate. The host CPU's kind is here because the core
/// itself asks for it (host memory is what decoded protos may borrow).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceKind(&'static str);

impl DeviceKind {
    /// The host CPU.
    pub const CPU: DeviceKind = DeviceKind("cpu");

    /// The kind named `name`: lowercase letters and digits, the prefix of its devices'
    /// names.
    pub const fn new(name: &'static str) -> Self {
        DeviceKind(name)
    }

    /// The name used in device names (`cpu`, `opencl`, `wgpu`).
    pub const fn name(self) -> &'static str {
        self.0
    }
}

/// Whether two device handles are the same device.
pub fn same_device(a: &Arc<dyn Device>, b: &Arc<dyn Device>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A kernel operand: a tensor's dtype, layout and buffer, borrowed for one kernel call.
///
/// Made only from a [`crate::Tensor`], so its layout always lies within its buffer.
#[derive(Debug, Clone, Copy)]
pub struct TensorView<'a> {
    dtype: DataType,
    layout: &'a Layout,
    buffer: &'a dyn TensorBuffer,
}

/// Whether host elements of `dtype` may be read and written as `T`: its own element type,
/// or `u8` for the float8 dtypes (storage-only, every byte a value).
fn stores<T: Element>(dtype: DataType) -> bool {
    T::DTYPE == dtype || (T::DTYPE == DataType::UInt8 && crate::float8::Float8::of(dtype).is_some())
}

impl<'a> TensorView<'a> {
    #[inline]
    pub(crate) fn new(dtype: DataType, layout: &'a Layout, buffer: &'a dyn TensorBuffer) -> Self {
        Self {
            dtype,
            layout,
            buffer,
        }
    }

    /// The element dtype.
    #[inline]
    pub fn dtype(&self) -> DataType {
        self.dtype
    }

    /// Shape, strides (in elements) and offset (in elements).
    #[inline]
    pub fn layout(&self) -> &'a Layout {
        self.layout
    }

    /// The buffer (downcast it to the backend's own type).
    #[inline]
    pub fn buffer(&self) -> &'a dyn TensorBuffer {
        self.buffer
    }

    /// The whole buffer as host bytes, if the memory is host-visible. Index it with the
    /// layout's positions times the element size.
    #[inline]
    pub fn host_bytes(&self) -> Option<&'a [u8]> {
        self.buffer.host_bytes()
    }

    /// The byte range of this view's elements in its buffer, for a `copy_to_host` of them
    /// into `dst_len` bytes: an `Err` unless the view is contiguous and exactly that size.
    pub fn host_copy_range(&self, dst_len: usize) -> Result<std::ops::Range<usize>> {
        if !self.layout.is_contiguous() {
            return Err(Error::invalid("copy_to_host needs a contiguous source"));
        }
        let size = self.dtype.size();
        let (start, len) = (
            self.layout.offset() * size,
            self.layout.num_elements() * size,
        );
        if dst_len != len {
            return Err(Error::invalid(format!(
                "copy_to_host of {len} bytes into {dst_len} bytes"
            )));
        }
        Ok(start..start + len)
    }

    /// The whole buffer as host elements of type `T` (or `u8` for float8), if the memory is host-visible, `T`
    /// is this view's element type and the memory is aligned for it. Index it with the
    /// layout's positions.
    pub fn host_slice<T: Element>(&self) -> Option<&'a [T]> {
        if !stores::<T>(self.dtype) {
            return None;
        }
        let ptr = self.buffer.host_ptr()?;
        if !(ptr as usize).is_multiple_of(std::mem::align_of::<T>()) {
            return None;
        }
        let len = self.buffer.len_bytes() / std::mem::size_of::<T>();
        // SAFETY: the buffer guarantees `len_bytes` valid bytes at `ptr` for its lifetime,
        // which `'a` borrows; alignment is checked; every bit pattern is a valid `T` (bool
        // storage is kept at 0/1, see `Element`); nothing writes to a buffer that a view
        // borrows (outputs are uniquely owned, see `OutView`).
        Some(unsafe { std::slice::from_raw_parts(ptr as *const T, len) })
    }
}

/// A kernel output: a contiguous tensor whose buffer nothing else references, borrowed
/// mutably for one kernel call. Kernels write every element of it.
#[derive(Debug)]
pub struct OutView<'a> {
    view: TensorView<'a>,
}

impl<'a> OutView<'a> {
    #[inline]
    pub(crate) fn new(view: TensorView<'a>) -> Self {
        Self { view }
    }

    /// The output as an operand view (dtype, layout, buffer).
    #[inline]
    pub fn view(&self) -> TensorView<'a> {
        self.view
    }

    /// The byte range of this output's elements in its buffer, for a `copy_from_host` of
    /// `src_len` bytes into them: an `Err` unless the output is contiguous and exactly that
    /// size (what a device whose copies take a byte offset needs).
    pub fn host_copy_range(&self, src_len: usize) -> Result<std::ops::Range<usize>> {
        let layout = self.view.layout;
        let size = self.view.dtype.size();
        let (start, len) = (layout.offset() * size, layout.num_elements() * size);
        if src_len != len || !layout.is_contiguous() {
            return Err(Error::invalid(format!(
                "copy_from_host of {src_len} bytes into {len} contiguous bytes"
            )));
        }
        Ok(start..start + len)
    }

    /// The element dtype.
    #[inline]
    pub fn dtype(&self) -> DataType {
        self.view.dtype
    }

    /// The (contiguous) layout.
    #[inline]
    pub fn layout(&self) -> &'a Layout {
        self.view.layout
    }

    /// The output's bytes (its elements only), if host-visible.
    #[inline]
    pub fn host_bytes_mut(&mut self) -> Option<&mut [u8]> {
        let ptr = self.view.buffer.host_ptr()?;
        let size = self.view.dtype.size();
        let start = self.view.layout.offset() * size;
        let len = self.view.layout.num_elements() * size;
        // SAFETY: as for `host_slice_mut`: the pointer is the buffer's own, the buffer is
        // uniquely owned for this borrow and the contiguous layout lies within it.
        Some(unsafe { std::slice::from_raw_parts_mut(ptr.add(start), len) })
    }

    /// The output's elements, if host-visible, of type `T` and aligned.
    pub fn host_slice_mut<T: Element>(&mut self) -> Option<&mut [T]> {
        if !stores::<T>(self.view.dtype) {
            return None;
        }
        // The buffer's own pointer, with its write permission: never one derived from a
        // shared slice (`host_slice`), which may not be written through.
        let ptr = self.view.buffer.host_ptr()?.cast::<T>();
        if !ptr.is_aligned() {
            return None;
        }
        let start = self.view.layout.offset();
        let len = self.view.layout.num_elements();
        // SAFETY: an OutView is made only from a `&mut Tensor` whose buffer has a reference
        // count of one (or a fresh output), so no other view of these elements exists while
        // this borrow lives; its contiguous layout lies within the buffer (checked when the
        // tensor was made), `T` is the dtype's element type, and the pointer is aligned.
        Some(unsafe { std::slice::from_raw_parts_mut(ptr.add(start), len) })
    }
}

/// How a buffer keeps its device: borrowed from a handle that lives for the whole process
/// (such as `CpuDevice::shared()`'s, so buffers keep no reference count on it), or shared.
#[derive(Clone, Debug)]
pub enum DeviceHandle {
    /// A device handle that is never dropped.
    Static(&'static Arc<dyn Device>),
    /// Any other device, kept alive by this handle.
    Shared(Arc<dyn Device>),
}

impl DeviceHandle {
    /// The device.
    #[inline]
    pub fn get(&self) -> &Arc<dyn Device> {
        match self {
            DeviceHandle::Static(device) => device,
            DeviceHandle::Shared(device) => device,
        }
    }
}

impl From<Arc<dyn Device>> for DeviceHandle {
    fn from(device: Arc<dyn Device>) -> Self {
        DeviceHandle::Shared(device)
    }
}

/// The operand checks every backend makes before it launches a kernel, written once: each
/// an `Err` naming what is wrong, as the `Tensor` API would have caught it.
pub mod checks {
    use crate::dtype::DataType;
    use crate::error::{Error, Result};
    use crate::ops::ReduceOp;

    use super::TensorView;

    /// Every dtype in `others` equals `expected` (binary ops, matmul).
    pub fn same_dtype(op: &'static str, expected: DataType, others: &[DataType]) -> Result<()> {
        match others.iter().find(|&&d| d != expected) {
            Some(&found) => Err(Error::DTypeMismatch {
                op,
                expected: expected.to_string(),
                found,
            }),
            None => Ok(()),
        }
    }

    /// `where(cond, a, b)`: a bool condition and equal value dtypes.
    pub fn select_dtypes(cond: DataType, a: DataType, b: DataType) -> Result<()> {
        if cond != DataType::Bool || b != a {
            return Err(Error::invalid(format!(
                "where needs a bool condition and equal dtypes, not {cond}, {a} and {b}"
            )));
        }
        Ok(())
    }

    /// A copy keeps its dtype.
    pub fn copy_dtypes(from: DataType, to: DataType) -> Result<()> {
        if from != to {
            return Err(Error::invalid(format!("copy of {from} into {to}")));
        }
        Ok(())
    }

    /// A reduction's output has the dtype the op produces.
    pub fn reduce_output(op: ReduceOp, input: DataType, output: DataType) -> Result<()> {
        same_dtype(op.name(), op.output_dtype(input), &[output])
    }

    /// Elementwise operands already broadcast to the output's shape.
    pub fn same_shapes(inputs: &[&TensorView<'_>], out: &TensorView<'_>) -> Result<()> {
        let shape = out.layout().shape();
        match inputs.iter().find(|x| x.layout().shape() != shape) {
            Some(bad) => Err(Error::shape(
                "map",
                format!(
                    "operand of shape {} for an output of shape {shape}",
                    bad.layout().shape()
                ),
            )),
            None => Ok(()),
        }
    }
}

/// What a direct convolution applies to each output element of channel `o` before it
/// stores it: `activation(value * scale[o] + shift[o])`, each part optional (the bias,
/// folded batch norm and `Relu`/`Relu6` that TensorFlow's remapper fuses into
/// `_FusedConv2D`). `scale` and `shift` are contiguous vectors of one element per output
/// channel, of the convolution's dtype.
#[derive(Debug, Clone, Copy, Default)]
pub struct Epilogue<'a> {
    /// Multiplies each channel.
    pub scale: Option<TensorView<'a>>,
    /// Then added to each channel.
    pub shift: Option<TensorView<'a>>,
    /// Then added elementwise: a contiguous tensor of the output's shape (a residual
    /// connection). Only passed to a device whose [`Device::conv_residual`] holds.
    pub residual: Option<TensorView<'a>>,
    /// Then applied: `Relu` or `Relu6` (no other activation is passed to a kernel).
    pub activation: Option<UnaryOp>,
}

/// A name for a new instance of the device `base` (`wgpu:0`): `base` itself for the first
/// instance the process makes, then `base.1`, `base.2`, ..., so that two device objects
/// (each with its own memory) never share a name, and an error that names two devices
/// tells them apart. For backends that can open one piece of hardware more than once.
pub fn instance_name(base: &str) -> String {
    static OPENED: Mutex<BTreeMap<String, usize>> = Mutex::new(BTreeMap::new());
    let mut opened = OPENED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let count = opened.entry(base.to_string()).or_insert(0);
    let name = match *count {
        0 => base.to_string(),
        n => format!("{base}.{n}"),
    };
    *count += 1;
    name
}

/// A compute device: its memory, host copies and kernels.
///
/// The `Tensor` methods check shapes, dtypes and devices, broadcast the inputs, allocate a
/// contiguous output, and only then call a kernel, so kernels receive operands that are
/// already consistent: every input of an elementwise kernel has the output's shape
/// (broadcast dims have stride 0), matmul operands are `[batch.., m, k]` and
/// `[batch.., k, n]` with the transposes already applied as strides. Inputs may have any
/// strides and offset; outputs are contiguous. A kernel that meets an op or dtype it does not
/// run returns [`Error::Unsupported`] and says so in [`Device::supports`].
///
/// How a backend plugs in is described in `docs/ARCHITECTURE.md`. A device is also
/// [`Any`]: `<dyn Device>::downcast` gives back the backend's own type, for libraries that
/// queue work of their own on it (NCCL on a CUDA device's stream).
pub trait Device: Any + Send + Sync + fmt::Debug {
    /// The device name: `cpu:0`, `cuda:0`, `opencl:0`, `wgpu:0`.
    fn name(&self) -> &str;

    /// The device family.
    fn kind(&self) -> DeviceKind;

    /// A human description (hardware, driver).
    fn description(&self) -> String {
        self.name().to_string()
    }

    /// Whether the device is hardware of its own beside the host CPU (a GPU or another
    /// accelerator), as opposed to the CPU itself or a driver that runs on it (Mesa's
    /// lavapipe, PoCL's CPU device). `polytensor::best_device` prefers these.
    fn is_accelerator(&self) -> bool {
        false
    }

    /// The device as DLPack names it (`kDLCPU` for host memory, `kDLOpenCL` and its index,
    /// ...), or `None` where DLPack has no device type for it. Host devices (whose buffers
    /// have host pointers) say `DLDevice::CPU` and import host memory; a device that
    /// implements [`Device::adopt_memory`] imports memory DLPack says is its own.
    fn dlpack_device(&self) -> Option<DLDevice> {
        None
    }

    /// Wrap `len` bytes of this device's memory at device address `address`, owned outside
    /// polytensor until `release` runs (DLPack import of device memory, zero copy); never
    /// written if `read_only`. `release` runs exactly once: when the last view of the
    /// buffer drops, or at once with an `Err`. Devices that cannot take foreign memory
    /// (the default) return that `Err`.
    fn adopt_memory(
        &self,
        address: usize,
        len: usize,
        read_only: bool,
        release: crate::buffer::Release,
    ) -> Result<Arc<dyn TensorBuffer>> {
        let _ = (address, len, read_only);
        drop(release);
        Err(Error::invalid(format!(
            "{} cannot hold memory it did not allocate",
            self.name()
        )))
    }

    /// Whether the device runs `op` for `dtype` (for casts: as source or target). Never true
    /// where `op.is_defined_for(dtype)` is false: ops ask only this before running a kernel,
    /// and the conformance suite fails a device that claims more.
    fn supports(&self, op: Op, dtype: DataType) -> bool;

    /// How the device's float arithmetic departs from IEEE 754 (flushed subnormals,
    /// division within WGSL's bounds), as found when it opened; IEEE 754 by default.
    fn float_semantics(&self) -> FloatSemantics {
        FloatSemantics::default()
    }

    /// `Err(Unsupported)`'s error naming this device: what a backend returns for an op
    /// and dtype it does not run (see [`Capabilities`]).
    #[cold]
    fn unsupported(&self, op: impl fmt::Display, dtype: DataType) -> Error
    where
        Self: Sized,
    {
        Error::unsupported(op, dtype, self.name())
    }

    /// The allocator's name and statistics.
    fn allocator(&self) -> &dyn AllocatorInfo;

    /// Allocate `bytes` of uninitialised device memory.
    fn allocate(&self, bytes: usize) -> Result<Arc<dyn TensorBuffer>>;

    /// Allocate `bytes` of zeroed device memory.
    fn allocate_zeroed(&self, bytes: usize) -> Result<Arc<dyn TensorBuffer>>;

    /// A buffer of byte strings. Only host devices hold string tensors.
    fn strings(&self, values: Vec<Vec<u8>>) -> Result<Arc<dyn TensorBuffer>> {
        let _ = values;
        Err(Error::Unsupported {
            op: "string tensors (they live on host devices only)".into(),
            dtype: DataType::String,
            device: self.name().to_string(),
        })
    }

    /// Copy `src` (little-endian element bytes, exactly the output's size) into `out`.
    fn copy_from_host(&self, src: &[u8], out: &mut OutView<'_>) -> Result<()>;

    /// Copy the elements of a contiguous `src` into `dst` (exactly its size in bytes).
    fn copy_to_host(&self, src: &TensorView<'_>, dst: &mut [u8]) -> Result<()>;

    /// Wait until all work queued on the device has finished.
    fn synchronize(&self) -> Result<()>;

    /// `out = op(x)`.
    fn unary(&self, op: UnaryOp, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()>;

    /// `out = op(a, b)`, `a` and `b` already broadcast to the output's shape.
    fn binary(
        &self,
        op: BinaryOp,
        a: &TensorView<'_>,
        b: &TensorView<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()>;

    /// The shortcut for scalars and tiny tensors of the registered host device
    /// ([`EmbeddedBuffer`]): `out[i] = op(a[i], b[i])` for the first `len` elements of
    /// `dtype` in each (the result in `op`'s output dtype). Returns whether it ran. `false`,
    /// the default and the answer for any op or dtype the device takes no shortcut for,
    /// sends the caller the general way, [`Device::binary`] through views, which also reports
    /// every error. Only the device registered with
    /// [`EmbeddedBuffer::register_host_device`] is asked; both ways compute the same values.
    fn embedded_binary(
        &self,
        op: BinaryOp,
        dtype: DataType,
        len: usize,
        a: &EmbeddedBuffer,
        b: &EmbeddedBuffer,
        out: &mut EmbeddedBuffer,
    ) -> bool {
        let _ = (op, dtype, len, a, b, out);
        false
    }

    /// `out = cond ? a : b`, all three broadcast to the output's shape.
    fn select(
        &self,
        cond: &TensorView<'_>,
        a: &TensorView<'_>,
        b: &TensorView<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()>;

    /// `out = x` converted to `out`'s dtype.
    fn cast(&self, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()>;

    /// `out[.., m, n] = sum_k a[.., m, k] * b[.., k, n]` over broadcast batch dims. Also,
    /// where [`Device::bf16_weights`] holds, an f32 `a` (contiguous) times a bf16 matrix `b`
    /// (contiguous, rank 2) into f32 `out`.
    fn matmul(&self, a: &TensorView<'_>, b: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()>;

    /// Reduce `x` over `axes` (sorted, distinct); `out` holds the kept dims in order.
    fn reduce(
        &self,
        op: ReduceOp,
        x: &TensorView<'_>,
        axes: &[usize],
        out: &mut OutView<'_>,
    ) -> Result<()>;

    /// Set every element of `out` to `value` (converted with cast semantics).
    fn fill(&self, value: Scalar, out: &mut OutView<'_>) -> Result<()>;

    /// `out[i] = start + i * step` in row-major order, computed exactly and then converted.
    fn arange(&self, start: Scalar, step: Scalar, out: &mut OutView<'_>) -> Result<()>;

    /// Copy `x` (any layout) into the contiguous `out` of the same shape and dtype.
    fn copy(&self, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()>;

    /// Join the contiguous `pieces` along `axis` into `out` (TensorFlow's `ConcatV2`, its
    /// inputs checked: one dtype, equal dims but along `axis`, which `out` sums), each
    /// outer row of every piece copied straight to its place. Returns whether it ran;
    /// `false`, the default, has the caller compose the join from [`Device::copy`]s
    /// (through a transposed copy when `axis` is not the first non-unit dim).
    fn concat(
        &self,
        pieces: &[TensorView<'_>],
        axis: usize,
        out: &mut OutView<'_>,
    ) -> Result<bool> {
        let _ = (pieces, axis, out);
        Ok(false)
    }

    /// `out = activation(x * scale + shift)` per channel of the last dim, in one pass: a
    /// batch norm in inference with its activation, when no convolution precedes it to take
    /// it as its epilogue. `epilogue` holds contiguous vectors of one element per channel,
    /// of `x`'s dtype, and `Relu`, `Relu6` or no activation. Returns whether it ran;
    /// `false`, the default, has the caller run the elementwise ops one after another.
    fn channel_affine(
        &self,
        x: &TensorView<'_>,
        epilogue: &Epilogue<'_>,
        out: &mut OutView<'_>,
    ) -> Result<bool> {
        let _ = (x, epilogue, out);
        Ok(false)
    }

    /// `out = x * sigmoid(beta * x)` (swish, SiLU at `beta` 1) in one pass over the
    /// contiguous `x`, as Keras writes it with three ops (`Mul`, `Sigmoid`, `Mul`). Returns
    /// whether it ran; `false`, the default, has the caller run the ops.
    fn swish(&self, x: &TensorView<'_>, beta: f64, out: &mut OutView<'_>) -> Result<bool> {
        let _ = (x, beta, out);
        Ok(false)
    }

    /// `out = x * (relu6(x + 3) / 6)` (the hard swish) in one pass over the contiguous `x`,
    /// as Keras's MobileNetV3 writes it with four ops (`AddV2`, `Relu6`, `RealDiv`, `Mul`;
    /// `divide` false: a `Mul` by 1/6 for the `RealDiv`), rounded as those ops round.
    /// Returns whether it ran; `false`, the default, has the caller run the ops.
    fn hard_swish(&self, x: &TensorView<'_>, divide: bool, out: &mut OutView<'_>) -> Result<bool> {
        let _ = (x, divide, out);
        Ok(false)
    }

    /// `out = (0.5 * x) * erfc(-x * (1/√2))` (the exact GELU) in one pass over the
    /// contiguous `x`, as Keras 3 writes it with five ops (`Mul`, `Neg`, `Mul`, `Erfc`,
    /// `Mul`), rounded as those ops round. Returns whether it ran; `false`, the default, has
    /// the caller run the ops.
    fn gelu(&self, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<bool> {
        let _ = (x, out);
        Ok(false)
    }

    /// Layer normalization over the last dim of the contiguous `x`, each row in one pass
    /// while it is in cache, as Keras 3 writes it: `inv = rsqrt(var + epsilon) * gamma`,
    /// `out = x * inv + (-mean * inv + beta)`, with the row's `mean` and (biased) `var`;
    /// `gamma` and `beta` (contiguous, one value per column) each optional. Rounded as
    /// those ops round. Returns whether it ran; `false`, the default, has the caller run
    /// the ops.
    fn layer_norm(
        &self,
        x: &TensorView<'_>,
        gamma: Option<&TensorView<'_>>,
        beta: Option<&TensorView<'_>>,
        epsilon: f64,
        out: &mut OutView<'_>,
    ) -> Result<bool> {
        let _ = (x, gamma, beta, epsilon, out);
        Ok(false)
    }

    /// TensorFlow's `Softmax` (`log`: `LogSoftmax`) over the last dim of the contiguous
    /// `x`, each row in one pass while it is in cache: `exp(x - max) / sum`, or `x - max -
    /// log(sum)`. Returns whether it ran; `false`, the default, has the caller compose it
    /// from a reduction, elementwise ops and a second reduction.
    fn softmax(&self, x: &TensorView<'_>, log: bool, out: &mut OutView<'_>) -> Result<bool> {
        let _ = (x, log, out);
        Ok(false)
    }

    /// One optimizer update of `rule` in one pass over contiguous tensors of one dtype:
    /// reads the variable `var`, its `slots` (as many as the rule keeps, in
    /// [`Rule::operands`](crate::train::Rule::operands) order) and `grad`, with the
    /// hyperparameters `scalars` (0-d tensors of that dtype, in that order; a device reads
    /// them where it computes, so one without the kernel reads nothing), and writes the variable's new value to
    /// `outs[0]` and the slots' to the rest, rounded as
    /// [`Rule::update`](crate::train::Rule::update) on tensors rounds. Returns whether it
    /// ran; `false`, the default, has the caller run the rule as elementwise ops.
    fn apply_update(
        &self,
        rule: crate::train::Rule,
        var: &TensorView<'_>,
        slots: &[TensorView<'_>],
        scalars: &[TensorView<'_>],
        grad: &TensorView<'_>,
        outs: &mut [OutView<'_>],
    ) -> Result<bool> {
        let _ = (rule, var, slots, scalars, grad, outs);
        Ok(false)
    }

    /// Whether [`Device::conv2d`] and [`Device::pool2d`] run for `dtype`. Devices without
    /// such kernels (the default) run TensorFlow's window ops as the `Tensor` methods
    /// compose them from the kernels above: a padded copy viewed as overlapping windows,
    /// then a matmul, a product and a sum, or a reduction.
    fn window_kernels(&self, dtype: DataType) -> bool {
        let _ = dtype;
        false
    }

    /// Whether [`Device::conv2d`] takes an [`Epilogue::residual`] for `dtype` (else the
    /// residual and what follows it run as ops after the kernel). The default: no.
    fn conv_residual(&self, dtype: DataType) -> bool {
        let _ = dtype;
        false
    }

    /// Whether [`Device::conv2d`] and [`Device::matmul`] take f32 activations with bf16
    /// weights (the result f32) and multiply them in bf16 faster than in f32 (AVX512-BF16's
    /// dot products): the session's mixed-precision pass rounds constant weights to bf16
    /// only for such devices. The default: no.
    fn bf16_weights(&self) -> bool {
        false
    }

    /// The width of the strips in which a [`crate::PackedFilter`] lays out a filter of
    /// `dims` (`[k_h, k_w, channels, filters]`) of `dtype` for this device's
    /// [`Device::conv2d`]: the filters in strips of `width`, each strip's `[k_h * k_w *
    /// channels, width]` contiguous (the last padded with zero filters where `width` does
    /// not divide them), so that a GEMM streams the filter from memory in order (oneDNN's
    /// reordered weights). `None`, the default, keeps filters as given.
    fn filter_strip(&self, dtype: DataType, dims: [usize; 4]) -> Option<usize> {
        let _ = (dtype, dims);
        None
    }

    /// A direct 2-D convolution: the contiguous NHWC `x` by the contiguous filter
    /// `[k_h, k_w, channels, filters]` into the contiguous NHWC `out`, with zero padding as
    /// `geometry` says; `depthwise` convolves each channel with its own filters (output
    /// channel `c * filters + f`). Then, per output channel, `epilogue`. Only called where
    /// [`Device::window_kernels`] holds; the filter's dtype is `x`'s, or bf16 for an f32
    /// `x` where [`Device::bf16_weights`] holds. A filter of rank 3 is one this device
    /// packed ([`Device::filter_strip`]): `[ceil(filters / width), k_h * k_w * channels,
    /// width]`, never depthwise.
    fn conv2d(
        &self,
        x: &TensorView<'_>,
        filter: &TensorView<'_>,
        geometry: &WindowGeometry,
        depthwise: bool,
        epilogue: &Epilogue<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        let _ = (filter, geometry, depthwise, epilogue, out);
        Err(Error::unsupported("conv2d", x.dtype(), self.name()))
    }

    /// A direct transposed 2-D convolution (TensorFlow's `Conv2DBackpropInput`): the
    /// gradient of [`Device::conv2d`] (not depthwise) with respect to its input, for the
    /// forward convolution `geometry`. `dy` is the contiguous NHWC output gradient
    /// `[batch, output.., filters]`, `filter` `[k_h, k_w, channels, filters]`, and `out` the
    /// contiguous NHWC image `[batch, input.., channels]`: each of its elements the sum, over
    /// the taps whose windows read it and the filters, of the gradient times the filter.
    /// Only called where [`Device::window_kernels`] holds.
    fn conv2d_backprop_input(
        &self,
        dy: &TensorView<'_>,
        filter: &TensorView<'_>,
        geometry: &WindowGeometry,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        let _ = (filter, geometry, out);
        Err(Error::unsupported(
            "conv2d_backprop_input",
            dy.dtype(),
            self.name(),
        ))
    }

    /// TensorFlow's `Conv2DBackpropFilter` directly: the gradient of [`Device::conv2d`]'s
    /// filter (not depthwise) for the forward convolution `geometry`, from its contiguous
    /// NHWC input `x` and output gradient `dy` (`[batch, output.., filters]`), into the
    /// contiguous `out` (`[k_h, k_w, channels, filters]`): each element the sum, over the
    /// batch's output pixels, of the input at that tap times the gradient. Only called where
    /// [`Device::window_kernels`] holds. Returns whether it ran; `false`, the default, has
    /// the caller run it as a convolution of the transposed input by the gradient.
    fn conv2d_backprop_filter(
        &self,
        x: &TensorView<'_>,
        dy: &TensorView<'_>,
        geometry: &WindowGeometry,
        out: &mut OutView<'_>,
    ) -> Result<bool> {
        let _ = (x, dy, geometry, out);
        Ok(false)
    }

    /// Direct 2-D pooling of the contiguous NHWC `x` into the contiguous NHWC `out`: the
    /// largest element of each window (`max`), or the mean of the elements it covers
    /// (padding is not counted). Only called where [`Device::window_kernels`] holds.
    fn pool2d(
        &self,
        x: &TensorView<'_>,
        geometry: &WindowGeometry,
        max: bool,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        let _ = (geometry, max, out);
        Err(Error::unsupported("pool2d", x.dtype(), self.name()))
    }

    /// TensorFlow's `MaxPoolGrad` in one pass: the gradient `dy` of a max pool of `x`
    /// (its output `y`), all contiguous NHWC, taken back to `out` (of `x`'s shape): each
    /// window's gradient added at its first element (row-major, padding skipped) equal to
    /// the window's maximum. Returns whether it ran; `false`, the default, has the caller
    /// compose it from elementwise ops and reductions.
    fn max_pool_grad(
        &self,
        x: &TensorView<'_>,
        y: &TensorView<'_>,
        dy: &TensorView<'_>,
        geometry: &WindowGeometry,
        out: &mut OutView<'_>,
    ) -> Result<bool> {
        let _ = (x, y, dy, geometry, out);
        Ok(false)
    }

    /// TensorFlow's `ReluGrad`, `Relu6Grad`, `SigmoidGrad`, `TanhGrad`, `SqrtGrad`,
    /// `RsqrtGrad` and `ReciprocalGrad` in one pass: the gradient of unary `op` from its
    /// input (`Relu`, `Relu6`) or its output (the others) `value` and the output's gradient
    /// `dy`, of one shape and dtype, each element rounded as
    /// [`Tensor::unary_grad`](crate::Tensor::unary_grad)'s elementwise ops round it.
    /// Returns whether it ran; `false`, the default, has the caller compose it from those
    /// ops.
    fn unary_grad(
        &self,
        op: UnaryOp,
        value: &TensorView<'_>,
        dy: &TensorView<'_>,
        out: &mut OutView<'_>,
    ) -> Result<bool> {
        let _ = (op, value, dy, out);
        Ok(false)
    }

    /// A segment reduction (`polytensor_core::plan::segment`): output row `s` of the
    /// contiguous `out` combines, by `op`, the rows of the contiguous `data` that
    /// `segments` lists for it, in order. Every backend checks its operands with
    /// `SegmentGeometry::new` and bounds every row and offset it reads.
    fn segment_reduce(
        &self,
        op: SegmentOp,
        data: &TensorView<'_>,
        segments: &Segments<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        let _ = (segments, out);
        Err(Error::unsupported(op.name(), data.dtype(), self.name()))
    }

    /// TensorFlow's `GatherV2` without batch dims on the contiguous `params` viewed as
    /// `[outer, rows, inner]`: `out[o, i, ..] = params[o, rows[i], ..]`, the row numbers
    /// already checked to lie below `rows`' bound. Returns whether it ran; `false`, the
    /// default, has the caller compose the gather from copies.
    fn gather_rows(
        &self,
        params: &TensorView<'_>,
        outer: usize,
        rows: &[usize],
        out: &mut OutView<'_>,
    ) -> Result<bool> {
        let _ = (params, outer, rows, out);
        Ok(false)
    }

    /// Rows written in place: data row `j` of the contiguous `data` into row `rows[j]` of
    /// the contiguous `out`, its other rows kept (an optimizer's sparse update; the rows
    /// distinct, callers guarantee it). Returns whether it ran; `false`, the default, has
    /// the caller compose it (a select over the whole of `out`).
    fn assign_rows(
        &self,
        data: &TensorView<'_>,
        rows: &TensorView<'_>,
        out: &mut OutView<'_>,
    ) -> Result<bool> {
        let _ = (data, rows, out);
        Ok(false)
    }

    /// A row scatter (`polytensor_core::plan::segment::ScatterGeometry`): data row `j` of
    /// the contiguous `data` into row `rows[j]` of the contiguous `out`, every other row of
    /// `out` the one-element `fill`; the rows are distinct (callers guarantee it). Any
    /// fixed-size dtype, moved as bits. Backends bound every row they write.
    fn scatter_rows(
        &self,
        data: &TensorView<'_>,
        rows: &TensorView<'_>,
        fill: &TensorView<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        let _ = (rows, fill, out);
        Err(Error::unsupported(
            "scatter_rows",
            data.dtype(),
            self.name(),
        ))
    }
}

impl dyn Device {
    /// This device as the backend's own type `D` (`polytensor_cuda::CudaDevice`), or
    /// `None` if it is another kind of device.
    pub fn downcast<D: Device>(self: Arc<Self>) -> Option<Arc<D>> {
        let any: Arc<dyn Any + Send + Sync> = self;
        any.downcast::<D>().ok()
    }

    /// Every op this device supports, with the dtypes it supports it for.
    pub fn capabilities(&self) -> Vec<(Op, DTypeSet)> {
        Op::all()
            .into_iter()
            .map(|op| {
                (
                    op,
                    DTypeSet::filter(|d| op.is_defined_for(d) && self.supports(op, d)),
                )
            })
            .collect()
    }

    /// `Err(Unsupported)` unless the device runs `op` for `dtype`.
    #[inline]
    pub fn check_supports(&self, op: Op, dtype: DataType) -> Result<()> {
        if self.supports(op, dtype) {
            Ok(())
        } else {
            Err(Error::unsupported(op, dtype, self.name()))
        }
    }

    /// `arange` computed on the host, exactly (in i128 or f64, as the shared semantics
    /// define it), and uploaded with `copy_from_host`: for GPU backends, whose devices may
    /// lack the f64 that rounds every dtype's values exactly.
    pub fn arange_from_host(
        &self,
        start: Scalar,
        step: Scalar,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        let dtype = out.dtype();
        self.check_supports(Op::Arange, dtype)?;
        let count = out.layout().num_elements();
        let values = crate::ops::arange_bytes(dtype, start, step, count)
            .ok_or_else(|| Error::unsupported(Op::Arange, dtype, self.name()))?;
        self.copy_from_host(&values, out)
    }
}
