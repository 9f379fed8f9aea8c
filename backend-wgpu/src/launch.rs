//! Launching kernels on a [`WgpuDevice`]: bind groups and dispatches, the kit's kernels
//! (the elementwise launch, its geometry from `polytensor_core::plan`), packed outputs
//! through word-sized scratch, workgroup counts and the pipeline cache.

use std::sync::Arc;

use polytensor_core::plan::Coalesced;
use polytensor_core::{Device, Error, OutView, Result, TensorView};

use polytensor_gpu_kit::elementwise::{map_args, MapKernel, Variant};
use polytensor_gpu_kit::launch::Arg;
use polytensor_gpu_kit::{ir, render};

use crate::buffer::storage;
use crate::device::WgpuDevice;
use crate::kernels::key::{MapKey, PipelineKey};
use crate::kernels::Pipeline;
use crate::table;

/// One kernel input: a buffer and the offset and strides (in elements) it is read with.
pub(crate) struct Operand<'a> {
    pub(crate) buffer: &'a wgpu::Buffer,
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
    /// broadcast), the kernel the one `key` names ([`table::map_kernel`]).
    pub(crate) fn map(
        &self,
        key: MapKey,
        inputs: &[&TensorView<'_>],
        out: &mut OutView<'_>,
    ) -> Result<()> {
        polytensor_core::device::checks::same_shapes(inputs, &out.view())?;
        let operands = inputs
            .iter()
            .map(|x| {
                Ok(Operand {
                    buffer: storage(x)?,
                    offset: x.layout().offset(),
                    strides: x.layout().strides(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        self.run_map(key, &operands, out)
    }

    /// [`WgpuDevice::map`] on operands already checked against the output's shape.
    pub(crate) fn run_map(
        &self,
        key: MapKey,
        operands: &[Operand<'_>],
        out: &mut OutView<'_>,
    ) -> Result<()> {
        let lo = out.layout();
        if !lo.is_contiguous() {
            return Err(Error::invalid("a wgpu kernel output must be contiguous"));
        }
        let count = lo.num_elements();
        if count == 0 {
            return Ok(());
        }
        // Elementwise kernels write from any element of their output's buffer on.
        let target = storage(&out.view())?;
        let strides: Vec<&[isize]> = operands.iter().map(|x| x.strides).collect();
        let plan = Coalesced::new(&lo.shape().dims(), &strides);
        let variant = Variant::of(&plan);
        let pipeline = self.kit_pipeline(PipelineKey::Map { map: key, variant }, || {
            table::map_kernel(key).map(|kernel| kernel.kernel(variant))
        })?;
        let geometry = match variant {
            Variant::Strided => Some(self.words(&MapKernel::geometry(&plan, operands.len()))?),
            Variant::Contiguous | Variant::Flat => None,
        };
        let inputs: Vec<_> = operands.iter().map(|x| (x.buffer, x.offset)).collect();
        let args = map_args(
            &plan,
            variant,
            count,
            geometry.as_ref(),
            &inputs,
            (target, lo.offset()),
        );
        self.launch_kit(&pipeline, &args, count, lo.offset())
    }

    /// A storage buffer of `words`, each as the `i32` a WGSL kernel reads it as.
    pub(crate) fn words(&self, words: &[i64]) -> Result<wgpu::Buffer> {
        use wgpu::util::DeviceExt;
        let mut bytes = Vec::with_capacity(4 * words.len());
        for &w in words {
            bytes.extend(index_word(w)?.to_le_bytes());
        }
        Ok(self
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("polytensor words"),
                contents: &bytes,
                usage: wgpu::BufferUsages::STORAGE,
            }))
    }

    /// `count` workgroups (at least one) laid out as `[x, y, 1]` within the per-dimension
    /// limit; a kernel numbers them `x + y * groups.x`.
    pub(crate) fn workgroups(&self, count: usize) -> [u32; 3] {
        let limit = u64::from(self.device.limits().max_compute_workgroups_per_dimension);
        let groups = count.max(1) as u64;
        let x = groups.min(limit);
        [x as u32, groups.div_ceil(x) as u32, 1]
    }

    /// Launch a kit kernel ([`polytensor_gpu_kit::ir`]) compiled as `pipeline` over
    /// `count` items, its output from element `out_offset` of its buffer, with its
    /// arguments in parameter order: each index a geometry word (which must fit the `i32`
    /// the kernel reads it as), each buffer and array of words a binding.
    pub(crate) fn launch_kit(
        &self,
        pipeline: &Pipeline,
        args: &[Arg<&wgpu::Buffer>],
        count: usize,
        out_offset: usize,
    ) -> Result<()> {
        let invocations = render::wgsl_invocations(pipeline.lanes, count, out_offset);
        let groups = self.workgroups(invocations.div_ceil(render::WGSL_GROUP as usize));
        self.launch_groups(pipeline, args, groups)
    }

    /// Launch a kit kernel of work-groups ([`ir::Body::Groups`]) compiled as `pipeline` on
    /// `groups` work-groups, with its arguments as [`WgpuDevice::launch_kit`] takes them.
    pub(crate) fn launch_groups(
        &self,
        pipeline: &Pipeline,
        args: &[Arg<&wgpu::Buffer>],
        groups: [u32; 3],
    ) -> Result<()> {
        let mut words = Vec::new();
        let mut bindings = Vec::new();
        for arg in args {
            match *arg {
                Arg::I64(value) => words.push(index_word(value)? as u32),
                Arg::Mem(buffer) => bindings.push(buffer),
            }
        }
        self.dispatch(pipeline, &words, &bindings, groups);
        Ok(())
    }

    /// The pipeline of a kit kernel cached as `key`, built by `kernel()` and rendered as
    /// WGSL only on a cache miss (`None`: the kit has no such kernel).
    pub(crate) fn kit_pipeline(
        &self,
        key: PipelineKey,
        kernel: impl FnOnce() -> Option<ir::Kernel>,
    ) -> Result<Arc<Pipeline>> {
        let source = || {
            let kernel = kernel().ok_or_else(|| Error::Backend {
                device: self.name().to_string(),
                message: format!("the kit has no kernel {key}"),
            })?;
            let text = render::wgsl_kernel(&kernel).ok_or_else(|| Error::Backend {
                device: self.name().to_string(),
                message: format!("kernel {} has no WGSL rendering", kernel.name),
            })?;
            Ok((text, render::wgsl_lanes(&kernel)))
        };
        self.pipelines
            .get(&self.device, key, source)
            .map_err(|e| self.relabel(e))
    }

    /// The wgpu device's limits.
    pub(crate) fn limits(&self) -> wgpu::Limits {
        self.device.limits()
    }
}

/// `value` as the `i32` a WGSL kernel reads an index as.
fn index_word(value: i64) -> Result<i32> {
    i32::try_from(value).map_err(|_| {
        Error::invalid(format!(
            "a size, offset or stride of {value} is beyond a wgpu kernel (2^31 - 1)"
        ))
    })
}
