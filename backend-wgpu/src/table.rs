//! The kernel table: the kit's elementwise kernel that runs each (op, dtype) on this
//! backend (the kit's table, [`polytensor_gpu_kit::table`], where WGSL renders it). The
//! single source of `supports` and of the elementwise kernels.

use polytensor_core::{DataType, Op};
use polytensor_gpu_kit::elementwise::MapKernel;
use polytensor_gpu_kit::table;

use crate::kernels::key::MapKey;

/// The kernel that runs `op` on `dtype` and its pipeline's key, or `None` where this
/// backend has none (fill is the copy of a one-element buffer read with zero strides).
pub(crate) fn kernel_for(op: Op, dtype: DataType) -> Option<(MapKey, MapKernel)> {
    if !op.is_defined_for(dtype) {
        return None;
    }
    let op = if op == Op::Fill { Op::Copy } else { op };
    let (_, kernel) = table::map_spec(op, dtype)?;
    kernel
        .renders_wgsl()
        .then_some((MapKey::Op(op, dtype), kernel))
}

/// The cast from `from` to `to` and its pipeline's key, where WGSL renders it.
pub(crate) fn cast_for(from: DataType, to: DataType) -> Option<(MapKey, MapKernel)> {
    let (_, kernel) = table::cast_spec(from, to)?;
    kernel
        .renders_wgsl()
        .then_some((MapKey::Cast(from, to), kernel))
}
