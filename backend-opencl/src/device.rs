//! [`OpenClDevice`]: one OpenCL device as a polytensor `Device`, the kit's [`KitDevice`] over
//! an [`OpenClQueue`] (its context, in-order command queue and programs).

use std::ffi::c_void;
use std::fmt;
use std::sync::Arc;

use opencl3::command_queue::{CommandQueue, CL_BLOCKING};
use opencl3::context::Context;
use opencl3::device::{Device as ClDevice, CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT};
use opencl3::error_codes::ClError;
use opencl3::event::Event;
use opencl3::memory::{Buffer, ClMem, CL_MEM_COPY_HOST_PTR, CL_MEM_READ_ONLY};
use opencl3::types::cl_mem;
use polytensor_core::device::Capabilities;
use polytensor_core::dlpack::{DLDevice, DLDeviceType};
use polytensor_core::{Error, OutView, Result, TensorBuffer, TensorView};
use polytensor_gpu_kit::ir::KernelName;
use polytensor_gpu_kit::launch::{Identity, KitDevice, Launch, Queue};
use polytensor_gpu_kit::matmul::Schedule;
use polytensor_gpu_kit::reduce;
use polytensor_gpu_kit::table::{self, ProgramKey};
use polytensor_gpu_kit::Dialect;

use crate::launch::enqueue;
use crate::memory::{ClAllocator, ClBuffer, ClMemory};
use crate::platform::{driver_lock, Found};
use crate::programs::{Compiled, Programs};

/// The bytes of freed buffers an OpenCL device keeps for reuse by default.
pub const DEFAULT_CACHE_BYTES: usize = 1 << 30;

/// The most work-items an elementwise launch starts; each loops over the rest. Large:
/// PoCL runs one element per work-item five times faster than a loop per work-item (it
/// vectorises across work-items, not across a work-item's loop), measured on `a + b` of
/// 16M f32.
const MAX_MAP_ITEMS: usize = 1 << 30;

/// The work-group size of elementwise and serial-reduction launches. Always given, never
/// left to the runtime: PoCL compiles a kernel once per work-group size it runs with, and
/// its own choice follows the element count.
const MAP_GROUP: usize = 64;

/// An OpenCL device with its own context and in-order queue, buffers from a
/// [`CachingAllocator`](polytensor_core::CachingAllocator) and kernels from the kit.
pub type OpenClDevice = KitDevice<OpenClQueue>;

/// What an [`OpenClDevice`] runs the kit's kernels with: its context, its in-order command
/// queue and its programs.
pub struct OpenClQueue {
    /// The device's name, for errors.
    name: String,
    device: ClDevice,
    context: Arc<Context>,
    queue: CommandQueue,
    programs: Programs,
    /// Whether kernels may compute in f64 (`cl_khr_fp64`).
    fp64: bool,
    /// How matmul work is divided: blocked in registers on CPU devices, tiled through
    /// local memory elsewhere.
    matmul_schedule: Schedule,
    /// The build options of every program.
    options: String,
    /// The work-groups a reduction over few outputs is split into (from the device's
    /// compute units).
    split_groups: usize,
    /// What the device runs: the kernel table's pairs (f64 ones only with `cl_khr_fp64`).
    capabilities: Capabilities,
}

impl fmt::Debug for OpenClQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpenClQueue({})", self.name)
    }
}

/// Open `found` as `opencl:<index>` (a further device opened on the same OpenCL device is
/// `opencl:<index>.1`, ...: each has its own context and memory), its matmul divided as
/// suits its kind: tiled through local memory on accelerators, blocked in registers on CPU
/// devices (which vectorise a work-item's loops but pay for every barrier).
pub fn open(index: usize, found: Found) -> Result<Arc<OpenClDevice>> {
    open_with(index, found, OpenOptions::default())
}

/// What [`open_with`] may decide otherwise than the device reports: for devices whose
/// driver misreports them, and for running the kernels of other devices on a CPU device
/// in tests.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenOptions {
    /// How matmul divides its work (`None`: by the device's kind).
    pub schedule: Option<Schedule>,
    /// Compute as a device without `cl_khr_fp64` does, whether or not this one has it
    /// (no f64 dtypes; f32 sums accumulate in f32 and products as scaled significands).
    pub without_fp64: bool,
}

/// [`open`], with what `options` decide.
pub fn open_with(index: usize, found: Found, options: OpenOptions) -> Result<Arc<OpenClDevice>> {
    let schedule = options.schedule;
    let base = format!("opencl:{index}");
    let backend = |what: &str, e: ClError| Error::Backend {
        device: base.clone(),
        message: format!("{what}: {e}"),
    };
    let device = found.device;
    let (context, queue) = {
        let _driver = driver_lock();
        let context =
            Context::from_device(&device).map_err(|e| backend("creating a context", e))?;
        #[allow(deprecated)]
        // clCreateCommandQueue: the OpenCL 1.2 call PoCL and every ICD have.
        let queue = CommandQueue::create_default(&context, 0)
            .map_err(|e| backend("creating a command queue", e))?;
        (context, queue)
    };
    let info = |r: std::result::Result<String, ClError>| r.unwrap_or_else(|e| e.to_string());
    let extensions = device.extensions().unwrap_or_default();
    let fp64 = extensions.contains("cl_khr_fp64") && !options.without_fp64;
    let exact_f32 = device
        .single_fp_config()
        .is_ok_and(|c| c & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT != 0);
    let options = if exact_f32 {
        "-cl-fp32-correctly-rounded-divide-sqrt".to_string()
    } else {
        String::new()
    };
    let memory = device.global_mem_size().unwrap_or(0);
    let largest = device.max_mem_alloc_size().unwrap_or(0);
    let largest = usize::try_from(largest)
        .unwrap_or(usize::MAX)
        .min(i64::MAX as usize);
    let description = format!(
        "{} ({}, {}, {} MiB{})",
        info(device.name()).trim(),
        found.platform,
        device_type(&device),
        memory >> 20,
        if fp64 { ", fp64" } else { "" }
    );
    let accelerator = device_type(&device) != "CPU";
    let matmul_schedule = schedule.unwrap_or(if accelerator {
        Schedule::Tiled
    } else {
        Schedule::Blocked
    });
    let compute_units = device.max_compute_units().unwrap_or(1) as usize;
    let name = polytensor_core::device::instance_name(&base);
    let context = Arc::new(context);
    let buffers = ClAllocator::new(name.clone(), ClMemory::new(context.clone(), largest));
    let identity = Identity {
        name: name.clone(),
        kind: crate::KIND,
        description,
        accelerator,
        dlpack: i32::try_from(index)
            .ok()
            .map(|id| DLDevice::new(DLDeviceType::OPENCL, id)),
    };
    let queue = OpenClQueue {
        name,
        device,
        context,
        queue,
        programs: Programs::default(),
        fp64,
        matmul_schedule,
        options,
        split_groups: reduce::split_groups(compute_units),
        capabilities: Capabilities::compute(|op, dtype| table::has_kernel(op, dtype, fp64)),
    };
    Ok(KitDevice::new(
        identity,
        buffers,
        DEFAULT_CACHE_BYTES,
        queue,
    ))
}

/// The first OpenCL device, opened (a test's and an example's shortcut).
pub fn first() -> Result<Arc<OpenClDevice>> {
    let found = crate::platform::devices()
        .map_err(|why| Error::DeviceUnavailable {
            device: "opencl".into(),
            why,
        })?
        .into_iter()
        .next()
        .ok_or_else(|| Error::DeviceUnavailable {
            device: "opencl".into(),
            why: "no OpenCL device found".into(),
        })?;
    open(0, found)
}

impl OpenClQueue {
    /// How many programs this device has built (each (op, dtype, variant) once).
    pub fn programs_built(&self) -> usize {
        self.programs.len()
    }

    fn backend(&self, what: &str, e: ClError) -> Error {
        Error::Backend {
            device: self.name.clone(),
            message: format!("{what}: {e}"),
        }
    }

    /// The text and kernel names of the program of `key`.
    fn program_source(&self, key: ProgramKey) -> Result<(String, Vec<KernelName>)> {
        let program = table::program_source(Dialect::OpenCl, key, self.fp64, self.matmul_schedule)
            .ok_or_else(|| Error::Backend {
                device: self.name.clone(),
                message: format!("no program {key:?} in the kernel table"),
            })?;
        Ok((program.text, program.kernels))
    }

    /// Write `len` bytes at byte `offset` of `mem` from `src`, waiting for the copy.
    fn write(&self, mem: cl_mem, offset: usize, src: &[u8]) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        // SAFETY: a blocking write reads `src.len()` bytes of `src` before it returns;
        // the caller checked that `offset + src.len()` lies within `mem`.
        let event = unsafe {
            opencl3::command_queue::enqueue_write_buffer(
                self.queue.get(),
                mem,
                CL_BLOCKING,
                offset,
                src.len(),
                src.as_ptr() as *const c_void,
                0,
                std::ptr::null(),
            )
        }
        .map_err(|e| self.backend("writing to the device", ClError(e)))?;
        drop(Event::new(event));
        Ok(())
    }
}

/// The OpenCL device type in words.
fn device_type(device: &ClDevice) -> &'static str {
    use opencl3::device::{CL_DEVICE_TYPE_ACCELERATOR, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU};
    match device.dev_type() {
        Ok(t) if t & CL_DEVICE_TYPE_GPU != 0 => "GPU",
        Ok(t) if t & CL_DEVICE_TYPE_CPU != 0 => "CPU",
        Ok(t) if t & CL_DEVICE_TYPE_ACCELERATOR != 0 => "accelerator",
        _ => "other",
    }
}

/// The `cl_mem` behind a view, or an error naming what it is instead.
fn mem_of(view: &TensorView<'_>) -> Result<cl_mem> {
    buffer_mem(view.buffer())
}

/// The `cl_mem` of a buffer, or an `Err` if it is not an OpenCL buffer.
fn buffer_mem(buffer: &dyn TensorBuffer) -> Result<cl_mem> {
    buffer
        .downcast_ref::<ClBuffer>()
        .map(|buffer| buffer.handle().get())
        .ok_or_else(|| Error::invalid(format!("{buffer:?} is not an OpenCL buffer")))
}

impl Queue for OpenClQueue {
    type Mem = cl_mem;
    type Program = Compiled;
    type Constants = Buffer<i64>;
    type Memory = ClMemory;

    const MAP_GROUP: usize = MAP_GROUP;
    const MAX_MAP_GROUPS: usize = MAX_MAP_ITEMS / MAP_GROUP;

    fn program(&self, key: ProgramKey) -> Result<Arc<Compiled>> {
        self.programs.get(
            &self.context,
            self.device.id(),
            &self.name,
            &self.options,
            key,
            || self.program_source(key),
        )
    }

    unsafe fn launch(&self, program: &Compiled, launch: Launch<'_, cl_mem>) -> Result<()> {
        let Launch { kernel, args, grid } = launch;
        let handle = (program.kernel(kernel)).ok_or_else(|| launch.missing(&self.name))?;
        enqueue(&self.queue, handle, args, &grid.global(), &grid.group)
            .map_err(|e| self.backend(&format!("launching {kernel}"), e))
    }

    /// Released once the kernels using it complete (OpenCL retains it while they run).
    fn constants(device: &OpenClDevice, words: &[i64]) -> Result<(Buffer<i64>, cl_mem)> {
        let mut words = words.to_vec();
        if words.is_empty() {
            words.push(0);
        }
        // SAFETY: COPY_HOST_PTR copies `words.len()` i64s from the vector, which outlives
        // the call.
        let buffer = unsafe {
            Buffer::<i64>::create(
                &device.context,
                CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                words.len(),
                words.as_mut_ptr() as *mut c_void,
            )
        }
        .map_err(|e| device.backend("creating a geometry buffer", e))?;
        let mem = buffer.get();
        Ok((buffer, mem))
    }

    fn mem(&self, buffer: &dyn TensorBuffer) -> Result<cl_mem> {
        buffer_mem(buffer)
    }

    unsafe fn fill_bytes(
        &self,
        mem: cl_mem,
        offset: usize,
        pattern: &[u8],
        len: usize,
    ) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        // SAFETY: the runtime copies the pattern before returning; `offset + len` lies
        // within `mem` (the output view's elements) and both are multiples of the
        // pattern's size.
        let event = unsafe {
            opencl3::command_queue::enqueue_fill_buffer(
                self.queue.get(),
                mem,
                pattern.as_ptr() as *const c_void,
                pattern.len(),
                offset,
                len,
                0,
                std::ptr::null(),
            )
        }
        .map_err(|e| self.backend("filling a buffer", ClError(e)))?;
        drop(Event::new(event));
        Ok(())
    }

    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    fn fp64(&self) -> bool {
        self.fp64
    }

    fn split_groups(&self) -> usize {
        self.split_groups
    }

    fn matmul_schedule(&self) -> Schedule {
        self.matmul_schedule
    }

    fn copy_from_host(&self, src: &[u8], out: &mut OutView<'_>) -> Result<()> {
        let range = out.host_copy_range(src.len())?;
        self.write(mem_of(&out.view())?, range.start, src)
    }

    fn copy_to_host(&self, src: &TensorView<'_>, dst: &mut [u8]) -> Result<()> {
        let range = src.host_copy_range(dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        // SAFETY: a blocking read fills `dst.len()` bytes of `dst` before it returns; the
        // range lies within the view's buffer (checked by `host_copy_range`).
        let event = unsafe {
            opencl3::command_queue::enqueue_read_buffer(
                self.queue.get(),
                mem_of(src)?,
                CL_BLOCKING,
                range.start,
                dst.len(),
                dst.as_mut_ptr() as *mut c_void,
                0,
                std::ptr::null(),
            )
        }
        .map_err(|e| self.backend("reading from the device", ClError(e)))?;
        drop(Event::new(event));
        Ok(())
    }

    fn synchronize(&self) -> Result<()> {
        self.queue
            .finish()
            .map_err(|e| self.backend("waiting for the queue", e))
    }
}
