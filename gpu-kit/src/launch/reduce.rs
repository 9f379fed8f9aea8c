//! Reduction launches: one work-item per output when the reduced extent is short, a
//! work-group tree per output otherwise, and split reductions for few long outputs.

use polytensor_core::device::checks;
use polytensor_core::plan::ReducedAxes;
use polytensor_core::{Device, Op, OutView, ReduceOp, Result, TensorView};

use super::{map_grid, output_mem, Arg, Grid, KitDevice, Launch, Queue};
use crate::reduce::{self, ReduceKernel, Stage, PARTIAL_BYTES, WORKGROUP};
use crate::table::ProgramKey;
use crate::Elem;

/// `Device::reduce`: one work-item per output when the reduced extent is short, a
/// work-group tree per output otherwise, and few long outputs split across work-groups
/// whose partials a second launch gathers.
pub fn reduce<Q: Queue>(
    q: &KitDevice<Q>,
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
    let (_geometry, geometry_mem) = Q::constants(
        q,
        &ReduceKernel::geometry(
            &split.kept,
            &split.kept_strides,
            &split.reduced,
            &split.reduced_strides,
        ),
    )?;
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
