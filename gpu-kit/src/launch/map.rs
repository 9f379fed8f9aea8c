//! Elementwise launches: unary and binary ops, `where`, casts, copies and fills, through
//! the map kernel ([`crate::elementwise::MapKernel`]).

use polytensor_core::device::checks;
use polytensor_core::plan::Coalesced;
use polytensor_core::{
    BinaryOp, DataType, Device, Op, OutView, Result, Scalar, TensorView, UnaryOp,
};

use super::{map_grid, output_mem, KitDevice, Launch, Queue};
use crate::elementwise::{map_args, MapKernel, Variant};
use crate::ir::KernelName;
use crate::table::{self, ProgramKey};

/// `out[i] = kernel(inputs[..][i])` for inputs of the output's shape (already broadcast),
/// the kernel named by its program and name (before the variant's suffix:
/// [`table::map_name`], [`table::cast_name`]).
pub fn map<Q: Queue>(
    q: &KitDevice<Q>,
    spec: (ProgramKey, KernelName),
    inputs: &[&TensorView<'_>],
    out: &mut OutView<'_>,
) -> Result<()> {
    checks::same_shapes(inputs, &out.view())?;
    let layout = out.layout();
    let target = output_mem(q, out)?;
    map_into(
        q,
        spec,
        inputs,
        &layout.shape().dims(),
        target,
        layout.offset(),
    )
}

/// [`map`] into the contiguous elements of `dims` from element `offset` of `target`.
pub fn map_into<Q: Queue>(
    q: &KitDevice<Q>,
    (key, name): (ProgramKey, KernelName),
    inputs: &[&TensorView<'_>],
    dims: &[usize],
    target: Q::Mem,
    offset: usize,
) -> Result<()> {
    let count: usize = dims.iter().product();
    if count == 0 {
        return Ok(());
    }
    let strides: Vec<&[isize]> = inputs.iter().map(|x| x.layout().strides()).collect();
    let plan = Coalesced::new(dims, &strides);
    let variant = Variant::of(&plan);
    let program = q.program(key)?;
    let geometry = match variant {
        Variant::Strided => Some(Q::constants(q, &MapKernel::geometry(&plan, inputs.len()))?),
        Variant::Contiguous | Variant::Flat => None,
    };
    let operands = inputs
        .iter()
        .map(|x| Ok((q.mem(x.buffer())?, x.layout().offset())))
        .collect::<Result<Vec<_>>>()?;
    let args = map_args(
        &plan,
        variant,
        count,
        geometry.as_ref().map(|(_, g)| *g),
        &operands,
        (target, offset),
    );
    let grid = map_grid::<Q>(count);
    let launch = Launch {
        kernel: name.with(variant.suffix()),
        args: &args,
        grid,
    };
    // SAFETY: the arguments are the map kernel's (count, geometry if strided, then each
    // input's memory, offset and flat stride, then the output's), all of live buffers; the
    // views' layouts lie within their buffers (a `TensorView`'s invariant) and the caller's
    // `count` elements of `target` from `offset` are its own.
    unsafe { q.launch(&program, launch) }
}

/// The elementwise kernel of `op` on `dtype` over `inputs`, or `Unsupported`.
fn map_op<Q: Queue>(
    q: &KitDevice<Q>,
    op: Op,
    dtype: DataType,
    inputs: &[&TensorView<'_>],
    out: &mut OutView<'_>,
) -> Result<()> {
    if !q.supports(op, dtype) {
        return Err(q.unsupported(op, dtype));
    }
    let name = table::map_name(op, dtype).ok_or_else(|| q.unsupported(op, dtype))?;
    map(q, name, inputs, out)
}

/// `Device::unary`.
pub fn unary<Q: Queue>(
    q: &KitDevice<Q>,
    op: UnaryOp,
    x: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    map_op(q, Op::Unary(op), x.dtype(), &[x], out)
}

/// `Device::binary`.
pub fn binary<Q: Queue>(
    q: &KitDevice<Q>,
    op: BinaryOp,
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    checks::same_dtype(op.name(), a.dtype(), &[b.dtype()])?;
    map_op(q, Op::Binary(op), a.dtype(), &[a, b], out)
}

/// `Device::select`.
pub fn select<Q: Queue>(
    q: &KitDevice<Q>,
    cond: &TensorView<'_>,
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    checks::select_dtypes(cond.dtype(), a.dtype(), b.dtype())?;
    map_op(q, Op::Where, a.dtype(), &[cond, a, b], out)
}

/// `Device::copy`.
pub fn copy<Q: Queue>(q: &KitDevice<Q>, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
    checks::copy_dtypes(x.dtype(), out.dtype())?;
    map_op(q, Op::Copy, x.dtype(), &[x], out)
}

/// `Device::cast`.
pub fn cast<Q: Queue>(q: &KitDevice<Q>, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
    let (from, to) = (x.dtype(), out.dtype());
    for dtype in [from, to] {
        if !q.supports(Op::Cast, dtype) {
            return Err(q.unsupported("cast", dtype));
        }
    }
    map(q, table::cast_name(from, to), &[x], out)
}

/// `Device::fill`: the value's bytes repeated over the output.
pub fn fill<Q: Queue>(q: &KitDevice<Q>, value: Scalar, out: &mut OutView<'_>) -> Result<()> {
    let dtype = out.dtype();
    let unsupported = || q.unsupported("fill", dtype);
    if !q.supports(Op::Fill, dtype) {
        return Err(unsupported());
    }
    let bytes = polytensor_core::element::scalar_bytes(value, dtype).ok_or_else(unsupported)?;
    let target = output_mem(q, out)?;
    let (layout, size) = (out.layout(), dtype.size());
    // SAFETY: the output's contiguous elements lie within its buffer, which `out` borrows.
    unsafe {
        q.fill_bytes(
            target,
            layout.offset() * size,
            &bytes,
            layout.num_elements() * size,
        )
    }
}
