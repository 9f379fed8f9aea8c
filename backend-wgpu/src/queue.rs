//! [`WgpuQueue`]: a wgpu device and queue as the kit's [`Queue`], so that
//! [`WgpuDevice`](crate::WgpuDevice) is the kit's `KitDevice` and runs the kit's kernels by
//! the kit's launches, as OpenCL and CUDA do. What is wgpu's own: programs compiled kernel
//! by kernel ([`WgslProgram`]), a launch as a bind group (index arguments as the words of
//! binding 0, memory as the bindings after it) and a dispatch, fills, host copies, and
//! the errors the driver reports asynchronously.

use std::sync::{Arc, Mutex};

use polytensor_core::device::{Capabilities, FloatSemantics};
use polytensor_core::plan::Coalesced;
use polytensor_core::{Error, OutView, ReduceOp, Result, TensorBuffer, TensorView};
use polytensor_gpu_kit::elementwise::{map_args, Variant};
use polytensor_gpu_kit::launch::{map_grid, Arg, KitDevice, Launch, Queue};
use polytensor_gpu_kit::matmul::Schedule;
use polytensor_gpu_kit::reduce::{ReduceKernel, WGSL_WORKGROUP};
use polytensor_gpu_kit::render::{self, WGSL_GROUP};
use polytensor_gpu_kit::table::{self, ProgramKey};
use polytensor_gpu_kit::Elem;

use crate::memory::{self, BufferSource, WgpuBuffer, WORD};
use crate::programs::{Programs, WgslProgram};

/// Work-groups a split reduction aims to keep busy ([`polytensor_gpu_kit::reduce::plan`]).
const BUSY_GROUPS: usize = 1024;

/// A storage buffer as a kernel argument: the address of a live `wgpu::Buffer` (the block
/// of a tensor's buffer, or a geometry buffer held by the launch's caller), which the
/// launch's contract keeps alive until the launch is queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WgpuMem(*const wgpu::Buffer);

impl WgpuMem {
    /// The buffer.
    ///
    /// # Safety
    ///
    /// The buffer this handle was made from is alive.
    unsafe fn buffer<'a>(self) -> &'a wgpu::Buffer {
        // SAFETY: the caller's promise: the buffer is alive, and nothing moves it (a
        // tensor's block sits in its shared buffer, a geometry buffer in a `Box`).
        unsafe { &*self.0 }
    }
}

/// One wgpu adapter's device and queue, as the kit's [`Queue`].
pub struct WgpuQueue {
    pub(crate) name: String,
    pub(crate) info: wgpu::AdapterInfo,
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) programs: Programs,
    /// What the device runs, computed when it opened (64-bit dtypes only with
    /// `SHADER_F64` and `SHADER_INT64`).
    pub(crate) capabilities: Capabilities,
    /// Whether kernels compute in f64 (`SHADER_F64` and `SHADER_INT64`: f64's NaN tests
    /// read its bits as `u64`).
    pub(crate) fp64: bool,
    /// Asynchronous errors the driver reported since the last synchronising call.
    pub(crate) failures: Arc<Mutex<Vec<String>>>,
    /// The most work-groups a dispatch takes along one dim (read once, when it opened).
    pub(crate) max_groups: usize,
    /// How its float arithmetic departs from IEEE 754, probed once it opened
    /// (`crate::semantics`).
    pub(crate) semantics: std::sync::OnceLock<FloatSemantics>,
}

impl WgpuQueue {
    /// The adapter's name, backend and type, as wgpu reports them.
    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.info
    }

    /// The wgpu queue every launch and copy of this device goes through.
    pub fn wgpu_queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    /// `Err` with the asynchronous errors reported since the last call (which it clears),
    /// or `Ok`.
    fn take_failures(&self) -> Result<()> {
        let failures =
            std::mem::take(&mut *self.failures.lock().unwrap_or_else(|e| e.into_inner()));
        if failures.is_empty() {
            return Ok(());
        }
        Err(Error::Backend {
            device: self.name.clone(),
            message: format!("the device reported: {}", failures.join("; ")),
        })
    }

    /// A driver failure reported by a helper, named after this device.
    fn relabel(&self, error: Error) -> Error {
        match error {
            Error::Backend { message, .. } => Error::Backend {
                device: self.name.clone(),
                message,
            },
            other => other,
        }
    }

    /// A storage buffer holding `bytes` (at least one word).
    fn buffer_of(&self, label: &str, bytes: &[u8]) -> wgpu::Buffer {
        use wgpu::util::DeviceExt;
        let mut contents = bytes.to_vec();
        contents.resize(bytes.len().max(1).next_multiple_of(WORD as usize), 0);
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: &contents,
                usage: wgpu::BufferUsages::STORAGE,
            })
    }
}

/// The wgpu buffer of a tensor's buffer, if it is this backend's.
pub fn wgpu_buffer(buffer: &dyn TensorBuffer) -> Option<&wgpu::Buffer> {
    buffer.downcast_ref::<WgpuBuffer>().map(WgpuBuffer::handle)
}

/// The wgpu buffer of a view, or an error naming what it is instead.
fn storage<'a>(view: &TensorView<'a>) -> Result<&'a wgpu::Buffer> {
    wgpu_buffer(view.buffer())
        .ok_or_else(|| Error::invalid(format!("{:?} is not a wgpu buffer", view.buffer())))
}

/// `value` as the `i32` a WGSL kernel reads an index as.
fn index_word(value: i64) -> Result<i32> {
    i32::try_from(value).map_err(|_| {
        Error::invalid(format!(
            "a size, offset or stride of {value} is beyond a wgpu kernel (2^31 - 1)"
        ))
    })
}

impl Queue for WgpuQueue {
    type Mem = WgpuMem;
    type Program = WgslProgram;
    type Constants = Box<wgpu::Buffer>;
    type Memory = BufferSource;

    const MAP_GROUP: usize = WGSL_GROUP as usize;
    /// Enough for every item of any tensor (positions are `i32`). The grid of a map or
    /// each is not used: [`WgpuQueue::launch`] starts one invocation per item
    /// ([`render::wgsl_invocations`]), as rows of work-groups.
    const MAX_MAP_GROUPS: usize = (1 << 31) / WGSL_GROUP as usize;

    fn program(&self, key: ProgramKey) -> Result<Arc<WgslProgram>> {
        self.programs
            .get(key, || {
                table::program_kernels(key, self.fp64, Schedule::Tiled, |op, e| {
                    self.reduce_kernel(op, e)
                })
            })
            .ok_or_else(|| Error::Backend {
                device: self.name.clone(),
                message: format!("no program {key:?} in the kernel table"),
            })
    }

    unsafe fn launch(&self, program: &WgslProgram, launch: Launch<'_, WgpuMem>) -> Result<()> {
        let Launch { kernel, args, grid } = launch;
        let limit = self.max_groups;
        // A map or each runs one invocation per item (a map's: per output word), numbered
        // over rows of `x` work-groups; a groups kernel runs on the launch's grid.
        let invocations = program
            .kernel(kernel)
            .and_then(|k| render::wgsl_invocations(k, args));
        let groups = match invocations {
            Some(invocations) => {
                let count = invocations.div_ceil(WGSL_GROUP as usize);
                let x = count.clamp(1, limit);
                [x, count.div_ceil(x), 1]
            }
            None => grid.groups,
        };
        if let Some(&many) = groups.iter().find(|&&g| g > limit) {
            return Err(Error::invalid(format!(
                "kernel {kernel} needs {many} workgroups along one dimension, more than \
                 {}'s {limit}",
                self.name
            )));
        }
        let pipeline = program.pipeline(&self.device, &self.name, kernel)?;
        let mut words = Vec::new();
        let mut bindings = Vec::new();
        for arg in args {
            match *arg {
                Arg::I64(value) => words.extend(index_word(value)?.to_le_bytes()),
                // SAFETY: the launch's contract: every memory argument is alive until the
                // launch is queued, which happens below.
                Arg::Mem(mem) => bindings.push(unsafe { mem.buffer() }),
            }
        }
        let geometry = self.buffer_of("polytensor geometry", &words);
        let entries: Vec<wgpu::BindGroupEntry<'_>> = std::iter::once(&geometry)
            .chain(bindings.iter().copied())
            .enumerate()
            .map(|(i, buffer)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: buffer.as_entire_binding(),
            })
            .collect();
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &group, &[]);
            let [x, y, z] = groups.map(|g| g as u32);
            pass.dispatch_workgroups(x, y, z);
        }
        self.queue.submit([encoder.finish()]);
        Ok(())
    }

    fn constants(device: &KitDevice<Self>, words: &[i64]) -> Result<(Box<wgpu::Buffer>, WgpuMem)> {
        let mut bytes = Vec::with_capacity(4 * words.len());
        for &w in words {
            bytes.extend(index_word(w)?.to_le_bytes());
        }
        let buffer = Box::new(device.buffer_of("polytensor words", &bytes));
        let mem = WgpuMem(buffer.as_ref());
        Ok((buffer, mem))
    }

    fn mem(&self, buffer: &dyn TensorBuffer) -> Result<WgpuMem> {
        wgpu_buffer(buffer)
            .map(|b| WgpuMem(b))
            .ok_or_else(|| Error::invalid(format!("{buffer:?} is not a wgpu buffer")))
    }

    /// Zeros from a word boundary are cleared by the queue, whole words at a time; the
    /// rest (other patterns, and the bytes before the first and after the last whole
    /// word) by the kit's copy kernel reading the pattern with stride 0.
    unsafe fn fill_bytes(
        &self,
        mem: WgpuMem,
        offset: usize,
        pattern: &[u8],
        len: usize,
    ) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let word = WORD as usize;
        if pattern.iter().all(|&b| b == 0) && offset.is_multiple_of(word) && len >= word {
            let whole = len - len % word;
            // SAFETY: the caller's promise: `mem` is alive, and the range within it.
            let buffer = unsafe { mem.buffer() };
            let mut encoder = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
            encoder.clear_buffer(buffer, offset as u64, Some(whole as u64));
            self.queue.submit([encoder.finish()]);
            // SAFETY: the rest of the caller's range.
            return unsafe { self.fill_bytes(mem, offset + whole, &[0], len - whole) };
        }
        let raw = table::raw_elem(pattern.len())
            .ok_or_else(|| Error::invalid(format!("a fill pattern of {} bytes", pattern.len())))?;
        let size = pattern.len();
        let value = Box::new(self.buffer_of("polytensor fill", pattern));
        let count = len / size;
        let program = self.program(ProgramKey::Move(raw))?;
        let (key, name) = table::map_name(polytensor_core::Op::Copy, raw.dtype())
            .ok_or_else(|| Error::invalid("no copy kernel"))?;
        debug_assert_eq!(key, ProgramKey::Move(raw));
        let plan = Coalesced::new(&[count], &[&[0]]);
        let args = map_args(
            &plan,
            Variant::Flat,
            count,
            None,
            &[(WgpuMem(value.as_ref()), 0)],
            (mem, offset / size),
        );
        let launch = Launch {
            kernel: name.with(Variant::Flat.suffix()),
            args: &args,
            grid: map_grid::<Self>(count),
        };
        // SAFETY: the copy kernel's arguments: the pattern's buffer (alive to the end of
        // this function) read with stride 0, and the caller's range of `mem`, `count`
        // elements of the pattern's size from element `offset / size`.
        unsafe { self.launch(&program, launch) }
    }

    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    fn float_semantics(&self) -> FloatSemantics {
        self.semantics.get().copied().unwrap_or_default()
    }

    fn fp64(&self) -> bool {
        self.fp64
    }

    fn split_groups(&self) -> usize {
        BUSY_GROUPS
    }

    fn matmul_schedule(&self) -> Schedule {
        Schedule::Tiled
    }

    /// f32 accumulators (f64 is slow or absent on most GPUs WGSL runs on: products keep a
    /// significand and a power of two instead) and 256 lanes a work-group.
    fn reduce_kernel(&self, op: ReduceOp, input: Elem) -> ReduceKernel {
        ReduceKernel {
            op,
            input,
            wide: false,
            lanes: WGSL_WORKGROUP,
        }
    }

    fn copy_from_host(&self, src: &[u8], out: &mut OutView<'_>) -> Result<()> {
        let view = out.view();
        let size = view.dtype().size();
        let (start, len) = (
            view.layout().offset() * size,
            view.layout().num_elements() * size,
        );
        if src.len() != len {
            return Err(Error::invalid(format!(
                "copy_from_host of {} bytes into {len} bytes",
                src.len()
            )));
        }
        if !(start as u64).is_multiple_of(WORD) {
            return Err(Error::invalid(
                "copy_from_host into an output that does not start on a 4-byte word",
            ));
        }
        memory::upload(&self.queue, storage(&view)?, start as u64, src);
        Ok(())
    }

    fn copy_to_host(&self, src: &TensorView<'_>, dst: &mut [u8]) -> Result<()> {
        let range = src.host_copy_range(dst.len())?;
        memory::download(
            &self.device,
            &self.queue,
            storage(src)?,
            range.start as u64,
            dst,
        )
        .map_err(|e| self.relabel(e))?;
        self.take_failures()
    }

    fn synchronize(&self) -> Result<()> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Backend {
                device: self.name.clone(),
                message: format!("waiting for the device failed: {e}"),
            })?;
        self.take_failures()
    }
}
