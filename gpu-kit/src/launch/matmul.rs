//! The kit's matmul kernel launch, and the checks every backend's matmul shares.

use polytensor_core::device::checks;
use polytensor_core::plan::MatmulPlan;
use polytensor_core::{Device, Op, OutView, Result, Scalar, TensorView};

use super::{fill, output_mem, Grid, KitDevice, Launch, Queue};
use crate::matmul::{matmul_args, MatmulKernel};
use crate::table::ProgramKey;

/// The checks and trivial cases every matmul shares: dtypes, support, the plan; an empty
/// output needs nothing and `k = 0` is zeros. `Some(plan)` where there is work to do.
pub fn matmul_plan<Q: Queue>(
    q: &KitDevice<Q>,
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<Option<MatmulPlan>> {
    let dtype = a.dtype();
    checks::same_dtype("matmul", dtype, &[b.dtype(), out.dtype()])?;
    if !q.supports(Op::Matmul, dtype) {
        return Err(q.unsupported("matmul", dtype));
    }
    output_mem(q, out)?;
    let plan = MatmulPlan::new(a.layout(), b.layout(), out.layout())?;
    if plan.batches() * plan.m * plan.n == 0 {
        return Ok(None);
    }
    if plan.k == 0 {
        fill(q, Scalar::I64(0), out)?;
        return Ok(None);
    }
    Ok(Some(plan))
}

/// `out = a @ b` by the generated kernel of `plan`, in batch chunks that every device's
/// third launch dim holds.
pub fn matmul_kernel<Q: Queue>(
    q: &KitDevice<Q>,
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
    plan: &MatmulPlan,
) -> Result<()> {
    const BATCH_CHUNK: usize = 65_535;
    let program = q.program(ProgramKey::Matmul(a.dtype()))?;
    let (_geometry, geometry_mem) = Q::constants(q, &MatmulKernel::geometry(plan))?;
    let (la, lb) = (a.layout(), b.layout());
    let (a_mem, b_mem, out_mem) = (q.mem(a.buffer())?, q.mem(b.buffer())?, output_mem(q, out)?);
    let schedule = q.matmul_schedule();
    let batches = plan.batches();
    for first in (0..batches).step_by(BATCH_CHUNK) {
        let chunk = (batches - first).min(BATCH_CHUNK);
        let args = matmul_args(
            plan,
            first,
            geometry_mem,
            (a_mem, la.offset()),
            (b_mem, lb.offset()),
            (out_mem, out.layout().offset()),
        );
        let (global, group) = (schedule.global(plan.m, plan.n, chunk), schedule.local());
        let grid = Grid {
            groups: [0, 1, 2].map(|d| global[d] / group[d]),
            group,
        };
        let launch = Launch {
            kernel: "matmul".into(),
            args: &args,
            grid,
        };
        // SAFETY: the matmul kernel's parameters, in order, over the live operand and output
        // buffers and the geometry held to the end of this function; `MatmulPlan` checked
        // that the strided operands and the output fit their layouts.
        unsafe { q.launch(&program, launch)? };
    }
    Ok(())
}
