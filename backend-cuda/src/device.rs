//! [`CudaDevice`]: one CUDA GPU as a polytensor `Device` (the kit's [`KitDevice`] over a
//! [`CudaQueue`]): a context, one stream that
//! every kernel and copy is queued on, buffers from a [`CachingAllocator`](polytensor_core::CachingAllocator), kernels from
//! the shared C-family generator compiled by NVRTC, cuBLAS for floating-point matmul and
//! cuDNN for convolutions.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::{
    sys, CudaContext, CudaFunction, CudaModule, CudaStream, DriverError, LaunchConfig,
    PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use polytensor_core::buffer::Release;
use polytensor_core::device::Capabilities;
use polytensor_core::dlpack::{DLDevice, DLDeviceType};
use polytensor_core::plan::window::WindowGeometry;
use polytensor_core::plan::MatmulPlan;
use polytensor_core::{Device, Error, Layout, Op, OutView, Result, TensorBuffer, TensorView};
use polytensor_gpu_kit::ir::KernelName;
use polytensor_gpu_kit::launch::{self, Arg, Grid, Identity, KitDevice, Launch, Queue};
use polytensor_gpu_kit::matmul::Schedule;
use polytensor_gpu_kit::reduce;
use polytensor_gpu_kit::table::{self, ProgramKey};

use crate::blas::{Addresses, Blas, Operand};
use crate::compile::{compile_cached, Arch};
use crate::dnn::{self as cudnn, Convolution, Dnn};
use crate::loader::{self, describe};
use crate::memory::{AdoptedBuffer, CudaAllocator, CudaBuffer, CudaMemory, Deferred};
use crate::programs::{self, uses_cublas};
use crate::staging::Staging;

/// The bytes of freed buffers a CUDA device keeps for reuse by default.
pub const DEFAULT_CACHE_BYTES: usize = 4 << 30;

/// The threads of a block of elementwise and serial-reduction launches.
const MAP_BLOCK: usize = 256;

/// The most blocks an elementwise launch starts; kernels loop over the rest (they stride
/// by the grid's size).
const MAX_MAP_BLOCKS: usize = 1 << 20;

/// The most blocks along a grid's second and third dims.
const MAX_GRID_YZ: usize = 65_535;

/// A compiled program (what [`CudaQueue`] launches): its
/// module and its kernels by name.
pub struct Module {
    _module: Arc<CudaModule>,
    functions: HashMap<KernelName, CudaFunction>,
}

/// A CUDA device: its own context and stream, memory from a
/// [`CachingAllocator`](polytensor_core::CachingAllocator), kernels compiled by NVRTC for its
/// architecture, cuBLAS for floating-point matmul, cuDNN for convolutions.
pub type CudaDevice = KitDevice<CudaQueue>;

/// What a [`CudaDevice`] runs the kit's kernels with: its context and stream, its loaded
/// programs, and cuBLAS and cuDNN.
pub struct CudaQueue {
    /// The device's name, for errors.
    name: String,
    /// cuDNN on the device's stream, or why it is missing (convolutions then run the
    /// kit's kernels). Declared before the stream, so its handle goes first.
    dnn: std::result::Result<Dnn, String>,
    context: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// cuBLAS, or why it is missing (floating-point matmul is then unsupported).
    blas: std::result::Result<Blas, String>,
    modules: Mutex<HashMap<ProgramKey, Arc<Module>>>,
    arch: Arch,
    /// The work-groups a reduction over few outputs is split into (from the GPU's
    /// multiprocessor count).
    split_groups: usize,
    /// What the device runs: the kernel table's pairs, float matmul only with cuBLAS.
    capabilities: Capabilities,
    deferred: Arc<Deferred>,
    staging: Staging,
    tf32: AtomicBool,
}

impl fmt::Debug for CudaQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CudaQueue({})", self.name)
    }
}

/// `value` as a launch dimension, or an `Err` naming what is too large.
fn dim(value: usize, what: &str) -> Result<u32> {
    u32::try_from(value)
        .map_err(|_| Error::invalid(format!("{what} {value} is past CUDA's limits")))
}

/// Open GPU `ordinal` as `cuda:<ordinal>` (a further device opened on the same GPU is
/// `cuda:<ordinal>.1`, ...: each has its own stream and memory cache). An `Err` naming the
/// reason when the driver, the GPU or NVRTC is missing.
pub fn open(ordinal: usize) -> Result<Arc<CudaDevice>> {
    let base = format!("cuda:{ordinal}");
    let unavailable = |why: String| Error::DeviceUnavailable {
        device: base.clone(),
        why,
    };
    let count = loader::device_count().map_err(&unavailable)?;
    if ordinal >= count {
        return Err(unavailable(format!("the driver reports {count} GPU(s)")));
    }
    if let Some(why) = loader::nvrtc_unavailable() {
        return Err(unavailable(why));
    }
    let driver = |what: &str, e: DriverError| unavailable(format!("{what}: {}", describe(e)));
    let context = CudaContext::new(ordinal).map_err(|e| driver("creating a context", e))?;
    // SAFETY: polytensor never hands cudarc a `CudaSlice`: all memory is its own
    // and every use of it is ordered on the device's one stream.
    unsafe { context.disable_event_tracking() };
    let stream = context
        .new_stream()
        .map_err(|e| driver("creating a stream", e))?;
    let (major, minor) = context
        .compute_capability()
        .map_err(|e| driver("reading the compute capability", e))?;
    let hardware = context.name().unwrap_or_else(describe);
    let memory = context.total_mem().unwrap_or(0);
    let multiprocessors = context
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(|e| driver("reading the multiprocessor count", e))?;
    let blas = match loader::cublas_unavailable() {
        Some(why) => Err(why),
        None => Blas::new(stream.clone()).map_err(|e| e.to_string()),
    };
    let cublas = blas.is_ok();
    let dnn = match loader::cudnn_unavailable() {
        Some(why) => Err(why),
        None => context
            .bind_to_thread()
            .map_err(describe)
            .and_then(|()| Dnn::new(stream.cu_stream())),
    };
    let capabilities = Capabilities::compute(|op, dtype| match op {
        Op::Matmul if uses_cublas(dtype) => cublas,
        _ => table::has_kernel(op, dtype, true),
    });
    let description = format!(
        "{hardware} (compute capability {major}.{minor}, {} MiB{})",
        memory >> 20,
        match (blas.is_ok(), dnn.is_ok()) {
            (true, true) => ", cuBLAS, cuDNN",
            (true, false) => ", cuBLAS, no cuDNN",
            (false, true) => ", no cuBLAS, cuDNN",
            (false, false) => ", no cuBLAS, no cuDNN",
        }
    );
    let name = polytensor_core::device::instance_name(&base);
    let deferred = Arc::new(Deferred::default());
    let buffers = CudaAllocator::new(
        name.clone(),
        CudaMemory::new(context.clone(), deferred.clone()),
    );
    let identity = Identity {
        name: name.clone(),
        kind: crate::KIND,
        description,
        accelerator: true,
        dlpack: i32::try_from(ordinal)
            .ok()
            .map(|id| DLDevice::new(DLDeviceType::CUDA, id)),
    };
    let queue = CudaQueue {
        name,
        dnn,
        staging: Staging::new(context.clone()),
        context,
        stream,
        blas,
        modules: Mutex::new(HashMap::new()),
        arch: Arch::of(major, minor),
        split_groups: reduce::split_groups(multiprocessors.max(1) as usize),
        capabilities,
        deferred,
        tf32: AtomicBool::new(false),
    };
    Ok(KitDevice::new(
        identity,
        buffers,
        DEFAULT_CACHE_BYTES,
        queue,
    ))
}

/// The first GPU, opened (a test's and an example's shortcut); an `Err` naming why there
/// is none.
pub fn first() -> Result<Arc<CudaDevice>> {
    loader::preload_toolkit().map_err(|why| Error::DeviceUnavailable {
        device: "cuda".into(),
        why,
    })?;
    open(0)
}

impl CudaQueue {
    /// Allow (or forbid, the default) TF32 tensor cores in f32 and complex64 matmul:
    /// faster, with 10-bit mantissas in the products, so outside the conformance bounds.
    pub fn set_tf32(&self, allowed: bool) {
        self.tf32.store(allowed, Ordering::Relaxed);
    }

    /// How many programs this device has loaded (each (op family, dtype) once).
    pub fn programs_loaded(&self) -> usize {
        self.lock_modules().len()
    }

    /// The architecture kernels are compiled for (`compute_80`).
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// The device's context, for a library that calls CUDA itself (NCCL): bind it to the
    /// thread before such calls.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.context
    }

    /// The stream every kernel and copy of this device is queued on, in order: work a
    /// library queues here (an NCCL collective) is ordered with the device's own.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    fn lock_modules(&self) -> std::sync::MutexGuard<'_, HashMap<ProgramKey, Arc<Module>>> {
        self.modules.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn backend(&self, what: &str, e: DriverError) -> Error {
        Error::Backend {
            device: self.name.clone(),
            message: format!("{what}: {}", describe(e)),
        }
    }

    /// Make the context current on this thread (every raw driver call needs it).
    fn bind(&self) -> Result<()> {
        self.context
            .bind_to_thread()
            .map_err(|e| self.backend("binding the context", e))
    }

    /// The loaded program of `key`: compiled by NVRTC (or read from the disk cache) and
    /// loaded on first use. A compile error is an `Err` carrying NVRTC's log.
    fn module(&self, key: ProgramKey) -> Result<Arc<Module>> {
        if let Some(hit) = self.lock_modules().get(&key) {
            return Ok(hit.clone());
        }
        let backend = |message: String| Error::Backend {
            device: self.name.clone(),
            message,
        };
        let source = programs::source(key)
            .ok_or_else(|| backend(format!("no program {key:?} in the kernel table")))?;
        let ptx = compile_cached(&source.text, self.arch)
            .map_err(|log| backend(format!("compiling {key:?}: {log}")))?;
        let module = self
            .context
            .load_module(Ptx::from_src(ptx))
            .map_err(|e| backend(format!("loading {key:?}: {}", describe(e))))?;
        let functions = source
            .kernels
            .iter()
            .map(|name| {
                module
                    .load_function(&name.to_string())
                    .map(|f| (*name, f))
                    .map_err(|e| backend(format!("kernel {name} of {key:?}: {}", describe(e))))
            })
            .collect::<Result<HashMap<_, _>>>()?;
        let loaded = Arc::new(Module {
            _module: module,
            functions,
        });
        Ok(self.lock_modules().entry(key).or_insert(loaded).clone())
    }

    /// Copy `src` to device address `dst`, queued on the stream (large copies go through
    /// pinned staging memory; `src` may be reused when this returns).
    fn write(&self, dst: u64, src: &[u8]) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        self.bind()?;
        self.staging
            .write(&self.stream, dst, src)
            .map_err(|e| self.backend("copying to the device", e))
    }
}

/// A contiguous copy of `x` in a new buffer of this device, and its layout.
fn contiguous(device: &CudaDevice, x: &TensorView<'_>) -> Result<(Arc<dyn TensorBuffer>, Layout)> {
    let layout = Layout::contiguous(x.layout().shape().clone());
    let buffer = device.allocate(layout.num_elements() * x.dtype().size())?;
    let spec = table::map_name(Op::Copy, x.dtype())
        .ok_or_else(|| device.unsupported("copy", x.dtype()))?;
    let dims = layout.shape().dims();
    launch::map_into(device, spec, &[x], &dims, address_of(buffer.as_ref())?, 0)?;
    Ok((buffer, layout))
}

/// Floating-point matmul through cuBLAS, operands cuBLAS cannot take as they lie made
/// contiguous first.
fn matmul_blas(
    device: &CudaDevice,
    blas: &Blas,
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    let dtype = a.dtype();
    let size = dtype.size() as u64;
    let mut plan = MatmulPlan::new(a.layout(), b.layout(), out.layout())?;
    let mut a_at = address_of(a.buffer())? + a.layout().offset() as u64 * size;
    let mut b_at = address_of(b.buffer())? + b.layout().offset() as u64 * size;
    // Copies of operands cuBLAS cannot take, alive until the call is queued.
    let mut copies = Vec::new();
    let mut ta = Operand::of(plan.m, plan.k, plan.a_strides);
    if ta.is_none() {
        let (buffer, layout) = contiguous(device, a)?;
        a_at = address_of(buffer.as_ref())?;
        plan = MatmulPlan::new(&layout, b.layout(), out.layout())?;
        ta = Operand::of(plan.m, plan.k, plan.a_strides);
        copies.push((buffer, layout));
    }
    let mut tb = Operand::of(plan.k, plan.n, plan.b_strides);
    if tb.is_none() {
        let (buffer, layout) = contiguous(device, b)?;
        b_at = address_of(buffer.as_ref())?;
        let a_layout = copies.first().map_or(a.layout(), |(_, l)| l);
        plan = MatmulPlan::new(a_layout, &layout, out.layout())?;
        tb = Operand::of(plan.k, plan.n, plan.b_strides);
        copies.push((buffer, layout));
    }
    let (Some(ta), Some(tb)) = (ta, tb) else {
        return Err(Error::invalid(
            "contiguous matmul operands that cuBLAS refuses",
        ));
    };
    let at = Addresses {
        a: a_at,
        b: b_at,
        out: launch::output_mem(device, out)? + out.layout().offset() as u64 * size,
    };
    device.bind()?;
    blas.gemm(
        dtype,
        &plan,
        (ta, tb),
        at,
        device.tf32.load(Ordering::Relaxed),
    )
    .map_err(|message| Error::Backend {
        device: device.name().to_string(),
        message,
    })
}

/// The device address of a CUDA buffer, or an `Err` naming what it is instead.
fn address_of(buffer: &dyn TensorBuffer) -> Result<u64> {
    if let Some(cached) = buffer.downcast_ref::<CudaBuffer>() {
        return Ok(*cached.handle());
    }
    buffer
        .downcast_ref::<AdoptedBuffer>()
        .map(AdoptedBuffer::address)
        .ok_or_else(|| Error::invalid(format!("{buffer:?} is not a CUDA buffer")))
}

impl Queue for CudaQueue {
    type Mem = u64;
    type Program = Module;
    type Constants = Arc<dyn TensorBuffer>;
    type Memory = CudaMemory;

    const MAP_GROUP: usize = MAP_BLOCK;
    const MAX_MAP_GROUPS: usize = MAX_MAP_BLOCKS;

    /// Compiled by NVRTC (or read from the disk cache) and loaded on first use. A compile
    /// error is an `Err` carrying NVRTC's log.
    fn program(&self, key: ProgramKey) -> Result<Arc<Module>> {
        self.module(key)
    }

    unsafe fn launch(&self, module: &Module, launch: Launch<'_, u64>) -> Result<()> {
        let Launch { kernel, args, grid } = launch;
        let function = (module.functions.get(&kernel)).ok_or_else(|| launch.missing(&self.name))?;
        let [x, y, z] = grid.groups;
        if y > MAX_GRID_YZ || z > MAX_GRID_YZ {
            return Err(Error::invalid(format!(
                "a launch of {:?} blocks is past CUDA's grid limits",
                grid.groups
            )));
        }
        let block = grid.group;
        let config = LaunchConfig {
            grid_dim: (dim(x, "grid")?, y as u32, z as u32),
            block_dim: (block[0] as u32, block[1] as u32, block[2] as u32),
            shared_mem_bytes: 0,
        };
        // Every parameter is 8 bytes: a device address or an `i64`.
        let words: Vec<u64> = args
            .iter()
            .map(|arg| match *arg {
                Arg::Mem(address) => address,
                Arg::I64(value) => value as u64,
            })
            .collect();
        let mut builder = self.stream.launch_builder(function);
        for word in &words {
            builder.arg(word);
        }
        // SAFETY: each argument has the size of the kernel parameter at its index (pointers
        // and `i64`s, 8 bytes each), as the generator documents each kernel's parameter
        // list; the addresses are of live buffers of this device, which stay allocated until
        // the stream has run the kernel (freed blocks are reused only by later work on this
        // stream, and `cuMemFree` synchronises).
        unsafe { builder.launch(config) }
            .map(drop)
            .map_err(|e| self.backend(&format!("launching {kernel}"), e))
    }

    /// Kept alive by the caller until the kernel is queued (the stream orders any reuse
    /// after it).
    fn constants(device: &CudaDevice, words: &[i64]) -> Result<(Arc<dyn TensorBuffer>, u64)> {
        let words = if words.is_empty() { &[0][..] } else { words };
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let buffer = device.allocate(bytes.len())?;
        let address = address_of(buffer.as_ref())?;
        device.write(address, &bytes)?;
        Ok((buffer, address))
    }

    fn mem(&self, buffer: &dyn TensorBuffer) -> Result<u64> {
        address_of(buffer)
    }

    unsafe fn fill_bytes(&self, mem: u64, offset: usize, pattern: &[u8], len: usize) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        self.bind()?;
        let at = mem + offset as u64;
        let stream = self.stream.cu_stream();
        let count = len / pattern.len();
        let word = |i: usize| u32::from_le_bytes([0, 1, 2, 3].map(|b| pattern[4 * i + b]));
        // SAFETY: `at..at + len` is memory of this device (the output view's elements);
        // the memsets are queued on the device's stream.
        let set = unsafe {
            match pattern.len() {
                1 => sys::cuMemsetD8Async(at, pattern[0], count, stream),
                2 => sys::cuMemsetD16Async(
                    at,
                    u16::from_le_bytes([pattern[0], pattern[1]]),
                    count,
                    stream,
                ),
                4 => sys::cuMemsetD32Async(at, word(0), count, stream),
                // Wider patterns: one pitched memset per 4-byte word of the pattern.
                wide => {
                    let mut status = sys::cudaError_enum::CUDA_SUCCESS;
                    for i in 0..wide / 4 {
                        status = sys::cuMemsetD2D32Async(
                            at + 4 * i as u64,
                            wide,
                            word(i),
                            1,
                            count,
                            stream,
                        );
                        if status != sys::cudaError_enum::CUDA_SUCCESS {
                            break;
                        }
                    }
                    status
                }
            }
        };
        set.result().map_err(|e| self.backend("filling memory", e))
    }

    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    fn fp64(&self) -> bool {
        true
    }

    fn split_groups(&self) -> usize {
        self.split_groups
    }

    fn matmul_schedule(&self) -> Schedule {
        Schedule::Tiled
    }

    fn library_conv2d(
        device: &CudaDevice,
        x: &TensorView<'_>,
        filter: &TensorView<'_>,
        geometry: &WindowGeometry,
        depthwise: bool,
        out: &mut OutView<'_>,
    ) -> Result<bool> {
        let Ok(dnn) = &device.dnn else {
            return Ok(false);
        };
        let dtype = x.dtype();
        let tf32 = device.tf32.load(Ordering::Relaxed);
        let Some(conv) = Convolution::of(dtype, geometry, depthwise, tf32) else {
            return Ok(false);
        };
        let size = dtype.size() as u64;
        let first = |view: &TensorView<'_>| -> Result<u64> {
            Ok(address_of(view.buffer())? + view.layout().offset() as u64 * size)
        };
        // The filter in cuDNN's order, by the kit's transpose (alive until the
        // convolution is queued).
        let [rows, cols] = conv.filter_matrix();
        let items = rows * cols;
        let krsc = device.allocate(items * dtype.size())?;
        let krsc_at = address_of(krsc.as_ref())?;
        let program = device.program(ProgramKey::Window(dtype))?;
        let args = [
            Arg::I64(items as i64),
            Arg::I64(rows as i64),
            Arg::I64(cols as i64),
            Arg::Mem(address_of(filter.buffer())?),
            Arg::I64(filter.layout().offset() as i64),
            Arg::Mem(krsc_at),
            Arg::I64(0),
        ];
        let transpose = Launch {
            kernel: "transpose".into(),
            args: &args,
            grid: Grid::linear(
                items.div_ceil(MAP_BLOCK).clamp(1, MAX_MAP_BLOCKS),
                MAP_BLOCK,
            ),
        };
        // SAFETY: the transpose kernel's parameters (the kit's `window` documents them):
        // the filter's `rows * cols` contiguous elements, which `launch::conv2d` checked
        // against its buffer, into the new buffer of as many.
        unsafe { device.launch(&program, transpose)? };
        device.bind()?;
        let at = cudnn::Addresses {
            image: first(x)?,
            filter: krsc_at,
            output: first(&out.view())?,
        };
        let workspace = |bytes: usize| {
            let buffer = device.allocate(bytes).map_err(|e| e.to_string())?;
            let at = address_of(buffer.as_ref()).map_err(|e| e.to_string())?;
            Ok((buffer, at))
        };
        dnn.forward(&conv, at, workspace)
            .map_err(|message| Error::Backend {
                device: device.name().to_string(),
                message,
            })
    }

    fn copy_from_host(&self, src: &[u8], out: &mut OutView<'_>) -> Result<()> {
        let range = out.host_copy_range(src.len())?;
        self.write(address_of(out.view().buffer())? + range.start as u64, src)
    }

    fn copy_to_host(&self, src: &TensorView<'_>, dst: &mut [u8]) -> Result<()> {
        let range = src.host_copy_range(dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        let from = address_of(src.buffer())? + range.start as u64;
        self.bind()?;
        self.staging
            .read(&self.stream, dst, from)
            .map_err(|e| self.backend("copying from the device", e))?;
        self.deferred.take().map_or(Ok(()), |message| {
            Err(Error::Backend {
                device: self.name.clone(),
                message,
            })
        })
    }

    fn synchronize(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(|e| self.backend("waiting for the stream", e))?;
        self.deferred.take().map_or(Ok(()), |message| {
            Err(Error::Backend {
                device: self.name.clone(),
                message,
            })
        })
    }

    fn matmul(
        device: &CudaDevice,
        a: &TensorView<'_>,
        b: &TensorView<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        let dtype = a.dtype();
        if !device.supports(Op::Matmul, dtype) {
            return Err(match &device.blas {
                Err(why) if uses_cublas(dtype) => Error::Unsupported {
                    op: format!("matmul (cuBLAS is missing: {why})"),
                    dtype,
                    device: device.name().to_string(),
                },
                _ => device.unsupported("matmul", dtype),
            });
        }
        let Some(plan) = launch::matmul_plan(device, a, b, out)? else {
            return Ok(());
        };
        match &device.blas {
            Ok(blas) if uses_cublas(dtype) => matmul_blas(device, blas, a, b, out),
            _ => launch::matmul_kernel(device, a, b, out, &plan),
        }
    }

    fn adopt_memory(
        device: &CudaDevice,
        address: usize,
        len: usize,
        read_only: bool,
        release: Release,
    ) -> Result<Arc<dyn TensorBuffer>> {
        Ok(Arc::new(AdoptedBuffer::new(
            address as u64,
            len,
            read_only,
            release,
            device.stream.clone(),
            device.base().shared(),
        )))
    }
}
