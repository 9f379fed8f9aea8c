//! The launches of the matmul, reduction, window and segment kernels of a [`WgpuDevice`]: operand
//! checks, geometry and workgroup counts.

use polytensor_core::device::checks;
use polytensor_core::plan::segment::{ScatterGeometry, SegmentGeometry, SegmentOp, Segments};
use polytensor_core::plan::window::WindowGeometry;
use polytensor_core::plan::MatmulPlan;
use polytensor_core::plan::ReducedAxes;
use polytensor_core::{
    DataType, Device, Epilogue, Error, Op, OutView, ReduceOp, Result, TensorView, UnaryOp,
};
use polytensor_gpu_kit::reduce::{self, ReduceArgs, ReduceKernel, Stage};
use polytensor_gpu_kit::segment::{self, SegmentKernels};
use polytensor_gpu_kit::window::{WindowKernel, WindowKernels};
use polytensor_gpu_kit::{window as kit, Elem};

use crate::buffer::{output_buffer, storage, wgpu_buffer};
use crate::device::WgpuDevice;
use crate::kernels::key::PipelineKey;
use polytensor_gpu_kit::matmul::{matmul_args, MatmulKernel, Schedule, TILE};
use polytensor_gpu_kit::wgsl::Storage;

/// How matmul operands of `dtype` are stored, where this backend multiplies them (f16
/// and bf16 accumulate in f32).
pub(crate) fn matmul_storage(dtype: DataType) -> Option<Storage> {
    Storage::of(dtype).filter(|_| Op::Matmul.is_defined_for(dtype))
}

/// Work-groups a split reduction aims to keep busy ([`reduce::plan`]).
const BUSY_GROUPS: usize = 1024;

/// Whether this backend has a reduction kernel of `op` on `dtype`.
pub(crate) fn reduces(op: ReduceOp, dtype: DataType) -> bool {
    Op::Reduce(op).is_defined_for(dtype) && Storage::of(dtype).is_some()
}

/// `value`, or `Err` unless it fits the `i32` positions the kit's WGSL kernels compute.
fn within_i32(value: usize, what: &str) -> Result<u32> {
    i32::try_from(value).map(|v| v as u32).map_err(|_| {
        Error::invalid(format!(
            "{what} of {value} is beyond a wgpu kernel's positions (2^31 - 1)"
        ))
    })
}

/// A window operand's buffer and element offset, checked
/// (`polytensor_gpu_kit::window::check_operand`) and with positions that fit an `i32`.
fn window_operand<'a>(
    view: &TensorView<'a>,
    dtype: DataType,
    count: usize,
    what: &str,
) -> Result<(&'a wgpu::Buffer, i64)> {
    kit::check_operand(view, dtype, count, what)?;
    let offset = view.layout().offset();
    let end = offset
        .checked_add(count)
        .ok_or_else(|| Error::invalid("a window operand's extent overflows"))?;
    within_i32(end, "a window operand's extent")?;
    Ok((storage(view)?, offset as i64))
}

/// A kit kernel's operand: its buffer and its element offset, or `Err` unless its extent
/// fits the `i32` positions the kernels compute.
fn operand_at<'a>(view: &TensorView<'a>) -> Result<(&'a wgpu::Buffer, i64)> {
    let layout = view.layout();
    within_i32(
        layout.offset() + layout.num_elements(),
        "a kernel operand's extent",
    )?;
    Ok((storage(view)?, layout.offset() as i64))
}

impl WgpuDevice {
    /// Whether the window kernels run for `dtype` (floats the device computes on).
    pub(crate) fn runs_windows(&self, dtype: DataType) -> bool {
        WindowKernels::new(dtype).is_some() && self.supports(Op::Unary(UnaryOp::Relu), dtype)
    }

    /// A direct window op: `filter` and `epilogue` for a convolution (`depthwise` or
    /// full), none for pooling (`max` or average).
    pub(crate) fn run_window(
        &self,
        x: &TensorView<'_>,
        conv: Option<(&TensorView<'_>, bool, &Epilogue<'_>)>,
        g: &WindowGeometry,
        max: bool,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        let dtype = x.dtype();
        let name = if conv.is_some() { "conv2d" } else { "pool2d" };
        if !self.runs_windows(dtype) {
            return Err(self.unsupported(name, dtype));
        }
        let elem = Storage::of(dtype)
            .and(Elem::of(dtype))
            .ok_or_else(|| self.unsupported(name, dtype))?;
        let out_channels = match conv {
            Some((_, depthwise, _)) => g.conv_channels(depthwise)?,
            None => g.channels,
        };
        let inputs = g.input_elements()?;
        let outputs = g.output_elements(out_channels)?;
        within_i32(outputs, "a window op's output")?;
        let [kh, kw] = g.windows.map(|w| w.size);
        for size in [kh, kw, g.channels, g.filters] {
            within_i32(size, "a window size")?;
        }
        for w in g.windows {
            within_i32(w.stride, "a window stride")?;
            within_i32(w.dilation, "a window dilation")?;
        }
        within_i32(g.before[0].max(g.before[1]), "a window's padding")?;
        kit::check_operand(&out.view(), dtype, outputs, "output")?;
        let image = window_operand(x, dtype, inputs, "input")?;
        let target = operand_at(&out.view())?;
        let (op, items, args) = match conv {
            Some((filter, depthwise, epilogue)) => {
                let f = window_operand(filter, dtype, g.filter_elements()?, "filter")?;
                // Absent parts: the input, never read.
                let mut parts = [image; 2];
                for (part, view) in parts.iter_mut().zip([&epilogue.scale, &epilogue.shift]) {
                    if let Some(v) = view {
                        *part = window_operand(v, dtype, out_channels, "epilogue part")?;
                    }
                }
                let word = kit::Epilogue {
                    scale: epilogue.scale.is_some(),
                    shift: epilogue.shift.is_some(),
                    activation: epilogue.activation,
                }
                .word()
                .ok_or_else(|| {
                    Error::invalid("a window kernel applies only Relu or Relu6 after a convolution")
                })?;
                let (op, items) = if depthwise {
                    (WindowKernel::Depthwise, outputs)
                } else {
                    let pixels = outputs / out_channels.max(1);
                    (WindowKernel::Conv, kit::conv_items(pixels, g.filters))
                };
                (
                    op,
                    items,
                    kit::conv_args(items, g, image, f, parts, word, target),
                )
            }
            None => {
                let op = if max {
                    WindowKernel::MaxPool
                } else {
                    WindowKernel::AvgPool
                };
                (op, outputs, kit::pool_args(outputs, g, image, target))
            }
        };
        if outputs == 0 {
            return Ok(());
        }
        let pipeline =
            self.kit_pipeline(PipelineKey::Window(op, dtype), || Some(op.kernel(elem)))?;
        self.launch_kit(&pipeline, &args, items, target.1 as usize)
    }

    /// `out = a x b`, batched over the leading dims, with any strides.
    pub(crate) fn run_matmul(
        &self,
        a: &TensorView<'_>,
        b: &TensorView<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        let dtype = a.dtype();
        checks::same_dtype("matmul", dtype, &[b.dtype(), out.dtype()])?;
        let kernel = Elem::of(dtype)
            .filter(|_| matmul_storage(dtype).is_some())
            .and_then(|e| MatmulKernel::new(e, Schedule::Tiled))
            .ok_or_else(|| self.unsupported("matmul", dtype))?;
        let (la, lb) = (a.layout(), b.layout());
        let plan = MatmulPlan::new(la, lb, out.layout())?;
        let (m, k, n, batches) = (plan.m, plan.k, plan.n, plan.batches());
        if batches * m * n == 0 {
            return Ok(());
        }
        let limit = self.limits().max_compute_workgroups_per_dimension as usize;
        let tiles = [n.div_ceil(TILE), m.div_ceil(TILE)];
        if tiles.iter().any(|&t| t > limit) {
            return Err(Error::invalid(format!(
                "matmul of {m} x {k} x {n} needs more than {limit} workgroups along one dimension"
            )));
        }
        let pipeline = self.kit_pipeline(PipelineKey::Matmul(dtype), || Some(kernel.kernel()))?;
        let geometry = self.words(&MatmulKernel::geometry(&plan))?;
        let target = (storage(&out.view())?, out.layout().offset());
        let (a, b) = ((storage(a)?, la.offset()), (storage(b)?, lb.offset()));
        for first in (0..batches).step_by(limit) {
            let count = (batches - first).min(limit);
            let args = matmul_args(&plan, first, &geometry, a, b, target);
            let groups = [tiles[0] as u32, tiles[1] as u32, count as u32];
            self.launch_groups(&pipeline, &args, groups)?;
        }
        Ok(())
    }

    /// Reduce `x` over `axes` into `out` (the kept dims, row-major): the kit's reduction
    /// kernel of the stage [`reduce::plan`] picks, a split's partials gathered by a second
    /// dispatch.
    pub(crate) fn run_reduce(
        &self,
        op: ReduceOp,
        x: &TensorView<'_>,
        axes: &[usize],
        out: &mut OutView<'_>,
    ) -> Result<()> {
        let dtype = x.dtype();
        checks::reduce_output(op, dtype, out.dtype())?;
        let unsupported = || self.unsupported(op.name(), dtype);
        let kernel = Elem::of(dtype)
            .filter(|_| reduces(op, dtype))
            .map(|input| ReduceKernel {
                op,
                input,
                wide: false,
                lanes: reduce::WGSL_WORKGROUP,
            })
            .ok_or_else(unsupported)?;
        let partial_elems = kernel.partials().ok_or_else(unsupported)?;
        let layout = x.layout();
        let split = ReducedAxes::split(layout, axes, out.layout().num_elements())?;
        let outputs = within_i32(split.kept.iter().product(), "a reduction's output")? as usize;
        let count = within_i32(split.reduced.iter().product(), "a reduction")? as usize;
        if outputs == 0 {
            return Ok(());
        }
        let (stage, parts) = reduce::plan(outputs, count, BUSY_GROUPS);
        let pipeline = |stage: Stage| {
            self.kit_pipeline(PipelineKey::Reduce(op, dtype, stage), || {
                kernel.kernel(stage)
            })
        };
        let kept = self.words(&reduce::geometry(&split.kept, &split.kept_strides))?;
        let reduced = self.words(&reduce::geometry(&split.reduced, &split.reduced_strides))?;
        let mut partial_buffers = Vec::new();
        if stage == Stage::Split {
            for e in &partial_elems {
                partial_buffers.push(self.allocate(outputs * parts * e.dtype().size())?);
            }
        }
        let (input, input_offset) = operand_at(x)?;
        let args = ReduceArgs {
            outputs,
            count,
            parts,
            kept: &kept,
            reduced: &reduced,
            input: (input, input_offset as usize),
            partials: partial_buffers.iter().map(wgpu_buffer).collect(),
            out: (output_buffer(out)?, out.layout().offset()),
        };
        let groups = |n: usize| {
            let limit = self.limits().max_compute_workgroups_per_dimension as usize;
            [n.min(limit) as u32, 1, 1]
        };
        match stage {
            Stage::Serial => {
                let pipeline = pipeline(Stage::Serial)?;
                self.launch_kit(&pipeline, &args.of(stage), outputs, args.out.1)
            }
            Stage::Tree => {
                let pipeline = pipeline(Stage::Tree)?;
                self.launch_groups(&pipeline, &args.of(stage), groups(outputs))
            }
            Stage::Split | Stage::Gather => {
                let (split, gather) = (pipeline(Stage::Split)?, pipeline(Stage::Gather)?);
                self.launch_groups(&split, &args.of(Stage::Split), groups(outputs * parts))?;
                self.launch_groups(&gather, &args.of(Stage::Gather), groups(outputs))
            }
        }
    }

    /// `Device::segment_reduce`: the kit's segment kernel of `op` (a gather for every
    /// fixed-size dtype, folds for the dtypes this device reduces).
    pub(crate) fn run_segment(
        &self,
        op: SegmentOp,
        data: &TensorView<'_>,
        segments: &Segments<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        let dtype = data.dtype();
        let g = SegmentGeometry::new(op, data, segments, out)?;
        let computes = op == SegmentOp::Gather
            || (reduces(ReduceOp::Sum, dtype) && self.supports(Op::Reduce(ReduceOp::Sum), dtype));
        let kernels = SegmentKernels::new(op, dtype)
            .filter(|_| computes)
            .ok_or_else(|| self.unsupported(op.name(), dtype))?;
        let items = g.segments * g.width;
        if items == 0 {
            return Ok(());
        }
        let pipeline = self.kit_pipeline(PipelineKey::Segment(op, dtype), || {
            Some(segment::segment_kernel(op, kernels.elem()))
        })?;
        let out_at = operand_at(&out.view())?;
        let args = segment::fold_args(&g, data, segments, out_at, operand_at)?;
        self.launch_kit(&pipeline, &args, items, out_at.1 as usize)
    }

    /// `Device::scatter_rows`: the kit's fill pass, then its scatter pass, over the dtype's
    /// raw elements.
    pub(crate) fn run_scatter(
        &self,
        data: &TensorView<'_>,
        rows: &TensorView<'_>,
        fill: &TensorView<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        let dtype = data.dtype();
        let g = ScatterGeometry::new(data, rows, fill, out)?;
        let raw = SegmentKernels::new(SegmentOp::Gather, dtype)
            .ok_or_else(|| self.unsupported("scatter_rows", dtype))?
            .elem();
        let outputs = out.layout().num_elements();
        if outputs == 0 {
            return Ok(());
        }
        let out_at = operand_at(&out.view())?;
        let [fill_args, scatter_args] =
            segment::scatter_args(&g, outputs, (data, rows, fill), out_at, operand_at)?;
        let pipeline = self.kit_pipeline(PipelineKey::Scatter(dtype, false), || {
            Some(segment::fill_kernel(raw))
        })?;
        self.launch_kit(&pipeline, &fill_args, outputs, out_at.1 as usize)?;
        let items = g.entries * g.width;
        if items == 0 {
            return Ok(());
        }
        let pipeline = self.kit_pipeline(PipelineKey::Scatter(dtype, true), || {
            Some(segment::scatter_kernel(raw))
        })?;
        self.launch_kit(&pipeline, &scatter_args, items, 0)
    }
}
