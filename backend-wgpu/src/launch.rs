//! Launching kernels on a [`WgpuDevice`]: bind groups and dispatches, the elementwise
//! launch (geometry from `polytensor_core::plan`), packed outputs through word-sized scratch,
//! workgroup counts and the pipeline cache.

use std::sync::Arc;

use polytensor_core::layout::contiguous_strides;
use polytensor_core::{Device, Error, OutView, Result, TensorView};

use polytensor_kernels_c::ir;
use polytensor_kernels_c::launch::Arg;
use polytensor_kernels_c::render;

use crate::buffer::{output_buffer, storage, wgpu_buffer};
use crate::device::WgpuDevice;
use crate::kernels::elementwise;
use crate::kernels::key::{MapKey, PipelineKey};
use crate::memory;
use crate::table::Kernel;
use polytensor_kernels_c::wgsl::Storage;
use polytensor_kernels_c::wgsl::Ty;

/// One kernel input: a buffer and the offset and strides (in elements) it is read with.
pub(crate) struct Operand<'a> {
    pub(crate) buffer: &'a wgpu::Buffer,
    pub(crate) storage: Storage,
    pub(crate) offset: usize,
    pub(crate) strides: &'a [isize],
}

impl WgpuDevice {
    /// Run `pipeline` on `groups` workgroups with `bindings` (in binding order) after
    /// the geometry words.
    pub(crate) fn dispatch(
        &self,
        pipeline: &wgpu::ComputePipeline,
        geometry: &[u32],
        bindings: &[&wgpu::Buffer],
        groups: [u32; 3],
    ) {
        use wgpu::util::DeviceExt;
        let geometry = self
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("polytensor geometry"),
                contents: &geometry
                    .iter()
                    .flat_map(|w| w.to_le_bytes())
                    .collect::<Vec<u8>>(),
                usage: wgpu::BufferUsages::STORAGE,
            });
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
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
        }
        self.queue.submit([encoder.finish()]);
    }

    /// `out[i] = kernel(inputs[..][i])` for inputs of the output's shape (already
    /// broadcast).
    pub(crate) fn map(
        &self,
        kernel: &Kernel,
        inputs: &[&TensorView<'_>],
        out: &mut OutView<'_>,
    ) -> Result<()> {
        polytensor_core::device::checks::same_shapes(inputs, &out.view())?;
        let operands = inputs
            .iter()
            .map(|x| {
                Ok(Operand {
                    buffer: storage(x)?,
                    storage: (kernel.storage)(x.dtype())
                        .ok_or_else(|| self.unsupported(kernel.key, x.dtype()))?,
                    offset: x.layout().offset(),
                    strides: x.layout().strides(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let output = (kernel.storage)(out.dtype())
            .ok_or_else(|| self.unsupported(kernel.key, out.dtype()))?;
        self.run_map(kernel.key, &operands, output, out, &kernel.expression)
    }

    /// [`WgpuDevice::map`] on operands already checked against the output's shape.
    pub(crate) fn run_map(
        &self,
        key: MapKey,
        operands: &[Operand<'_>],
        output: Storage,
        out: &mut OutView<'_>,
        expression: &str,
    ) -> Result<()> {
        let lo = out.layout();
        if !lo.is_contiguous() || u32::try_from(lo.offset()).is_err() {
            return Err(Error::invalid(
                "a wgpu kernel output must be contiguous, from an element offset below 2^32",
            ));
        }
        // Elementwise kernels write from any element of their output's buffer on.
        let target = storage(&out.view())?;
        let offsets: Vec<usize> = operands.iter().map(|x| x.offset).collect();
        let strides: Vec<&[isize]> = operands.iter().map(|x| x.strides).collect();
        let (geometry, flat) =
            elementwise::geometry(&lo.shape().dims(), &offsets, &strides, lo.offset());
        let inputs: Vec<Storage> = operands.iter().map(|x| x.storage).collect();
        // Outputs from their buffer's start (nearly all) store at a constant base, which
        // lets the compiler see the stores are consecutive.
        let offset = lo.offset() != 0;
        let key = PipelineKey::Map {
            map: key,
            flat,
            offset,
        };
        let pipeline = self.pipeline(key, || {
            Ok(elementwise::map_source(
                &inputs, output, expression, flat, offset,
            ))
        })?;
        let mut buffers: Vec<&wgpu::Buffer> = operands.iter().map(|x| x.buffer).collect();
        buffers.push(target);
        // A packed output's words, the first one shared with the elements before the offset.
        let lanes = output.lanes();
        let invocations = (lo.offset() % lanes + lo.num_elements()).div_ceil(lanes);
        let groups = self.workgroups(invocations.div_ceil(elementwise::WORKGROUP as usize));
        self.dispatch(&pipeline, &geometry, &buffers, groups);
        Ok(())
    }

    /// Run `kernel` on the buffer that receives `out`'s elements as words of their value
    /// type: `out`'s own buffer for word dtypes; for packed ones (f16, bf16, 8- and 16-bit
    /// ints) a scratch buffer, narrowed into `out` afterwards, so that no two invocations
    /// write one word.
    pub(crate) fn through_words(
        &self,
        out: &mut OutView<'_>,
        kernel: impl FnOnce(&wgpu::Buffer) -> Result<()>,
    ) -> Result<()> {
        let Some(packed @ Storage::Packed(packing)) = Storage::of(out.dtype()) else {
            return kernel(output_buffer(out)?);
        };
        let scratch = self.allocate(out.layout().num_elements() * memory::WORD as usize)?;
        let buffer = wgpu_buffer(&scratch);
        kernel(buffer)?;
        let strides = contiguous_strides(out.layout().shape());
        let words = Operand {
            buffer,
            storage: Storage::Word(Ty::Real(packing.value_type())),
            offset: 0,
            strides: &strides,
        };
        self.run_map(MapKey::Narrow(out.dtype()), &[words], packed, out, "x")
    }

    /// `count` workgroups (at least one) laid out as `[x, y, 1]` within the per-dimension
    /// limit; a kernel numbers them `x + y * groups.x`.
    pub(crate) fn workgroups(&self, count: usize) -> [u32; 3] {
        let limit = self.device.limits().max_compute_workgroups_per_dimension;
        let (x, y) = elementwise::workgroups(count, limit);
        [x, y, 1]
    }

    /// Launch a kit kernel ([`polytensor_kernels_c::ir`]) compiled as `pipeline` over
    /// `invocations` ([`render::wgsl_invocations`]), with its arguments in parameter order:
    /// each index a geometry word (which must fit the `i32` the kernel reads it as), each
    /// buffer a binding.
    pub(crate) fn launch_kit(
        &self,
        pipeline: &wgpu::ComputePipeline,
        args: &[Arg<&wgpu::Buffer>],
        invocations: usize,
    ) -> Result<()> {
        let mut words = Vec::new();
        let mut bindings = Vec::new();
        for arg in args {
            match *arg {
                Arg::I64(value) => {
                    words.push(i32::try_from(value).map(|v| v as u32).map_err(|_| {
                        Error::invalid(format!(
                            "a size or offset of {value} is beyond a wgpu kernel (2^31 - 1)"
                        ))
                    })?)
                }
                Arg::Mem(buffer) => bindings.push(buffer),
            }
        }
        let groups = self.workgroups(invocations.div_ceil(render::WGSL_GROUP as usize));
        self.dispatch(pipeline, &words, &bindings, groups);
        Ok(())
    }

    /// The pipeline of a kit kernel cached as `key`, its WGSL rendered only on a cache
    /// miss.
    pub(crate) fn kit_pipeline(
        &self,
        key: PipelineKey,
        kernel: &ir::Kernel,
    ) -> Result<Arc<wgpu::ComputePipeline>> {
        self.pipeline(key, || {
            render::wgsl_kernel(kernel).ok_or_else(|| Error::Backend {
                device: self.name().to_string(),
                message: format!("kernel {} has no WGSL rendering", kernel.name),
            })
        })
    }

    /// The pipeline cached as `key`, compiled from `source()` on first use.
    pub(crate) fn pipeline(
        &self,
        key: PipelineKey,
        source: impl FnOnce() -> Result<String>,
    ) -> Result<Arc<wgpu::ComputePipeline>> {
        self.pipelines
            .get(&self.device, key, source)
            .map_err(|e| self.relabel(e))
    }

    /// The wgpu device's limits.
    pub(crate) fn limits(&self) -> wgpu::Limits {
        self.device.limits()
    }
}
