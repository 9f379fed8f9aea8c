//! The launches of the matmul and reduction kernels of a [`WgpuDevice`]: operand checks,
//! geometry and workgroup counts.

use std::sync::Arc;

use polytensor_core::device::checks;
use polytensor_core::plan::MatmulPlan;
use polytensor_core::plan::ReducedAxes;
use polytensor_core::{DataType, Device, Error, Op, OutView, ReduceOp, Result, TensorView};
use polytensor_kernels_c::Elem;

use crate::buffer::{output_buffer, storage, wgpu_buffer};
use crate::device::WgpuDevice;
use crate::kernels::elementwise::{self, WORKGROUP};
use crate::kernels::key::PipelineKey;
use crate::kernels::storage::Storage;
use crate::kernels::ty::Ty;
use crate::kernels::{matmul, reduce};

/// How matmul operands of `dtype` are stored, where this backend multiplies them (f16
/// and bf16 accumulate in f32).
pub(crate) fn matmul_storage(dtype: DataType) -> Option<Storage> {
    Storage::of(dtype).filter(|_| Op::Matmul.is_defined_for(dtype))
}

/// Whether this backend has a reduction kernel of `op` on `dtype`.
pub(crate) fn reduces(op: ReduceOp, dtype: DataType) -> bool {
    Op::Reduce(op).is_defined_for(dtype) && Storage::of(dtype).is_some()
}

/// The lowest and highest values of `dtype` as WGSL expressions of its value type: the
/// identities of max and min.
fn bounds(dtype: DataType, t: Ty) -> (String, String) {
    match Elem::of(dtype).and_then(Elem::int_range) {
        Some((lo, hi)) => match t.real() {
            Some(t) => (
                elementwise::int_literal(lo, t),
                elementwise::int_literal(hi, t),
            ),
            None => (String::new(), String::new()),
        },
        None => (
            format!("{t}(bitcast<f32>(0xff800000u))"),
            format!("{t}(bitcast<f32>(0x7f800000u))"),
        ),
    }
}

/// `value`, or `Err` unless it fits the `u32` words kernels index with.
fn within_u32(value: usize, what: &str) -> Result<usize> {
    u32::try_from(value).map(|_| value).map_err(|_| {
        Error::invalid(format!(
            "{what} of {value} is beyond one wgpu dispatch (2^32 - 1)"
        ))
    })
}

impl WgpuDevice {
    /// `out = a x b`, batched over the leading dims, with any strides.
    pub(crate) fn run_matmul(
        &self,
        a: &TensorView<'_>,
        b: &TensorView<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        let dtype = a.dtype();
        checks::same_dtype("matmul", dtype, &[b.dtype(), out.dtype()])?;
        let input = matmul_storage(dtype).ok_or_else(|| self.unsupported("matmul", dtype))?;
        let (la, lb) = (a.layout(), b.layout());
        let plan = MatmulPlan::new(la, lb, out.layout())?;
        let (m, k, n, batches) = (plan.m, plan.k, plan.n, plan.batches());
        if batches * m * n == 0 {
            return Ok(());
        }
        let limit = self.limits().max_compute_workgroups_per_dimension as usize;
        let tiles = [n.div_ceil(matmul::TILE), m.div_ceil(matmul::TILE)];
        if tiles.iter().any(|&t| t > limit) {
            return Err(Error::invalid(format!(
                "matmul of {m} x {k} x {n} needs more than {limit} workgroups along one dimension"
            )));
        }
        for size in [m, n, k, batches] {
            within_u32(size, "a matmul size")?;
        }
        let geometry = matmul::Geometry {
            plan,
            offsets: [la.offset(), lb.offset()],
        };
        let pipeline = self.pipeline(PipelineKey::Matmul(dtype), || matmul::source(input))?;
        let (a, b) = (storage(a)?, storage(b)?);
        self.through_words(out, |target| {
            for first in (0..batches).step_by(limit) {
                let count = (batches - first).min(limit);
                let groups = [tiles[0] as u32, tiles[1] as u32, count as u32];
                self.dispatch(&pipeline, &geometry.words(first), &[a, b, target], groups);
            }
            Ok(())
        })
    }

    /// Reduce `x` over `axes` into `out` (the kept dims, row-major).
    pub(crate) fn run_reduce(
        &self,
        op: ReduceOp,
        x: &TensorView<'_>,
        axes: &[usize],
        out: &mut OutView<'_>,
    ) -> Result<()> {
        let dtype = x.dtype();
        let expected = op.output_dtype(dtype);
        checks::reduce_output(op, dtype, out.dtype())?;
        let unsupported = || self.unsupported(op.name(), dtype);
        let input = Storage::of(dtype)
            .filter(|_| reduces(op, dtype))
            .ok_or_else(unsupported)?;
        let layout = x.layout();
        let split = ReducedAxes::split(layout, axes, out.layout().num_elements())?;
        let outputs = within_u32(split.kept.iter().product(), "a reduction's output")?;
        let count = within_u32(split.reduced.iter().product(), "a reduction")?;
        if outputs == 0 {
            return Ok(());
        }
        let (variant, parts) = reduce::plan(outputs, count);
        let pipeline = |variant: reduce::Variant| -> Result<Arc<wgpu::ComputePipeline>> {
            self.pipeline(PipelineKey::Reduce(op, dtype, variant), || {
                let (lowest, highest) = bounds(dtype, input.value_type());
                reduce::source(op, input, (&lowest, &highest), variant)
            })
        };
        let geometry = reduce::geometry(
            &split.kept,
            &split.kept_strides,
            &split.reduced,
            &split.reduced_strides,
            layout.offset(),
            parts,
        );
        let per_invocation = self.workgroups(outputs.div_ceil(WORKGROUP as usize));
        let x = storage(x)?;
        let run = |target: &wgpu::Buffer| -> Result<()> {
            match variant {
                reduce::Variant::Serial => self.dispatch(
                    pipeline(variant)?.as_ref(),
                    &geometry,
                    &[x, target],
                    per_invocation,
                ),
                reduce::Variant::Tree => {
                    let groups = self.workgroups(outputs);
                    self.dispatch(pipeline(variant)?.as_ref(), &geometry, &[x, target], groups)
                }
                reduce::Variant::Split | reduce::Variant::Gather => {
                    let partials = self.allocate(outputs * parts * reduce::PARTIAL_BYTES)?;
                    let partials = wgpu_buffer(&partials);
                    let (first, second) = (
                        pipeline(reduce::Variant::Split)?,
                        pipeline(reduce::Variant::Gather)?,
                    );
                    let groups = self.workgroups(outputs * parts);
                    self.dispatch(&first, &geometry, &[x, partials], groups);
                    self.dispatch(&second, &geometry, &[partials, target], per_invocation);
                }
            }
            Ok(())
        };
        if expected == DataType::Int64 {
            run(output_buffer(out)?)
        } else {
            self.through_words(out, run)
        }
    }
}
