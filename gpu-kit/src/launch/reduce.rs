//! Reduction launches: one work-item per output when the reduced extent is short, a
//! work-group tree per output otherwise, and split reductions for few long outputs
//! ([`crate::reduce::plan`]).

use polytensor_core::device::checks;
use polytensor_core::plan::ReducedAxes;
use polytensor_core::{Device, Op, OutView, ReduceOp, Result, TensorView};

use super::{map_grid, output_mem, Grid, KitDevice, Launch, Queue};
use crate::reduce::{self, ReduceArgs, Stage};
use crate::table::ProgramKey;
use crate::Elem;

/// The most work-groups a reduction launches (every device's limit on a grid's first
/// dim holds it); the kernels loop over the rest.
const MAX_GROUPS: usize = 65_535;

/// `Device::reduce`: the stage [`reduce::plan`] picks; a split's partials are gathered by
/// a second launch.
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
    let kernel = q.reduce_kernel(op, input);
    let partial_elems = kernel
        .partials()
        .ok_or_else(|| q.unsupported(op.name(), dtype))?;
    let program = q.program(ProgramKey::Reduce(dtype))?;
    let (_kept, kept) = Q::constants(q, &reduce::geometry(&split.kept, &split.kept_strides))?;
    let (_reduced, reduced) =
        Q::constants(q, &reduce::geometry(&split.reduced, &split.reduced_strides))?;
    let (stage, parts) = reduce::plan(outputs, count, q.split_groups());
    // Kept alive (and so their memory valid) until every launch is queued.
    let mut partial_buffers = Vec::new();
    if stage == Stage::Split {
        for e in &partial_elems {
            let bytes = outputs
                .checked_mul(parts)
                .and_then(|n| n.checked_mul(e.dtype().size()))
                .ok_or_else(|| polytensor_core::Error::invalid("a split reduction overflows"))?;
            partial_buffers.push(q.allocate(bytes)?);
        }
    }
    let partials = partial_buffers
        .iter()
        .map(|b| q.mem(b.as_ref()))
        .collect::<Result<Vec<_>>>()?;
    let args = ReduceArgs {
        outputs,
        count,
        parts,
        kept,
        reduced,
        input: (q.mem(x.buffer())?, layout.offset()),
        partials,
        out: (target, out.layout().offset()),
    };
    let launch = |stage: Stage, grid: Grid| {
        let args = args.of(stage);
        let stage_launch = Launch {
            kernel: kernel.kernel_name(stage),
            args: &args,
            grid,
        };
        // SAFETY: each stage gets its kernel's parameters (`ReduceArgs::of`) over live
        // buffers: the input view, the geometry words and the partials held to the end of
        // this function, and the output, whose `outputs` contiguous elements lie within
        // its buffer.
        unsafe { q.launch(&program, stage_launch) }
    };
    let groups = |n: usize| Grid::linear(n.min(MAX_GROUPS), kernel.lanes as usize);
    match stage {
        Stage::Serial => launch(Stage::Serial, map_grid::<Q>(outputs)),
        Stage::Tree => launch(Stage::Tree, groups(outputs)),
        Stage::Split | Stage::Gather => {
            launch(Stage::Split, groups(outputs * parts))?;
            launch(Stage::Gather, groups(outputs))
        }
    }
}
