//! Segment reduction and row scatter launches.

use polytensor_core::plan::segment::{ScatterGeometry, SegmentGeometry, SegmentOp, Segments};
use polytensor_core::{Device, OutView, Result, TensorView};

use super::{map_grid, operand_at, output_mem, KitDevice, Launch, Queue};
use crate::segment;
use crate::table;

/// `Device::segment_reduce`: the kit's segment kernel of `op` for the data's dtype.
pub fn segment_reduce<Q: Queue>(
    q: &KitDevice<Q>,
    op: SegmentOp,
    data: &TensorView<'_>,
    segments: &Segments<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    let dtype = data.dtype();
    let g = SegmentGeometry::new(op, data, segments, out)?;
    let key = table::segment_program(op, dtype, q.fp64())
        .ok_or_else(|| q.unsupported(op.name(), dtype))?;
    let target = output_mem(q, out)?;
    let items = g.segments * g.width;
    if items == 0 {
        return Ok(());
    }
    let program = q.program(key)?;
    let out_at = (target, out.layout().offset() as i64);
    let args = segment::fold_args(&g, data, segments, out_at, |view| operand_at(q, view))?;
    let launch = Launch {
        kernel: op.name().into(),
        args: &args,
        grid: map_grid::<Q>(items),
    };
    // SAFETY: the segment kernel's parameters (`segment` documents them), every operand a
    // contiguous view of its live buffer with the counts `SegmentGeometry::new` checked;
    // the kernel clamps the offsets it reads to the entries and skips rows outside the
    // data, so the rows' and offsets' values cannot send a read or write out of bounds.
    unsafe { q.launch(&program, launch) }
}

/// `Device::scatter_rows`: the kit's `segment_fill`, then `segment_scatter`, of the
/// dtype's raw element; without a fill (`Device::assign_rows`) only the scatter, the
/// output's other rows kept.
pub fn scatter_rows<Q: Queue>(
    q: &KitDevice<Q>,
    data: &TensorView<'_>,
    rows: &TensorView<'_>,
    fill: Option<&TensorView<'_>>,
    out: &mut OutView<'_>,
) -> Result<()> {
    let dtype = data.dtype();
    let g = ScatterGeometry::new(data, rows, fill, out)?;
    let key = table::segment_program(SegmentOp::Gather, dtype, q.fp64())
        .ok_or_else(|| q.unsupported("scatter_rows", dtype))?;
    let target = output_mem(q, out)?;
    let outputs = out.layout().num_elements();
    if outputs == 0 {
        return Ok(());
    }
    let program = q.program(key)?;
    let out_at = (target, out.layout().offset() as i64);
    let operands = (data, rows, fill);
    let (fill_args, scatter_args) =
        segment::scatter_args(&g, outputs, operands, out_at, |view| operand_at(q, view))?;
    if let Some(fill_args) = fill_args {
        let launch = Launch {
            kernel: "segment_fill".into(),
            args: &fill_args,
            grid: map_grid::<Q>(outputs),
        };
        // SAFETY: `segment_fill`'s parameters (`segment` documents them): the one-element
        // fill and the output's `outputs` contiguous elements, checked by
        // `ScatterGeometry::new`.
        unsafe { q.launch(&program, launch)? };
    }
    let items = g.entries * g.width;
    if items == 0 {
        return Ok(());
    }
    let launch = Launch {
        kernel: "segment_scatter".into(),
        args: &scatter_args,
        grid: map_grid::<Q>(items),
    };
    // SAFETY: `segment_scatter`'s parameters (`segment` documents them): the data's `items`
    // contiguous elements, one row number per data row, and the output of `out_rows` rows
    // of `width`, checked by `ScatterGeometry::new`; the kernel skips a row outside the
    // output, so the rows' values cannot send a write out of bounds.
    unsafe { q.launch(&program, launch) }
}
