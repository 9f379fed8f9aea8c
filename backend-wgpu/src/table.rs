//! The kernel table: the kit's elementwise kernel that runs each (op, dtype) on this
//! backend (the kit's table, [`polytensor_gpu_kit::table`]), and whether WGSL renders it
//! ([`renders`]): the rule behind `supports`, asked once when a device opens, so that a
//! launch builds its kernel without rendering anything.

use polytensor_core::{DataType, Op};
use polytensor_gpu_kit::elementwise::MapKernel;
use polytensor_gpu_kit::table;

use crate::kernels::key::MapKey;

/// The kernel that runs `op` on `dtype` and its pipeline's key, or `None` where the kit's
/// table has none (fill is the copy of a one-element buffer read with zero strides).
pub(crate) fn kernel_for(op: Op, dtype: DataType) -> Option<(MapKey, MapKernel)> {
    if !op.is_defined_for(dtype) {
        return None;
    }
    let op = if op == Op::Fill { Op::Copy } else { op };
    let (_, kernel) = table::map_spec(op, dtype)?;
    Some((MapKey::Op(op, dtype), kernel))
}

/// Whether WGSL renders the kernel of `op` on `dtype` (every operand has a storage and the
/// helper library has the op's functions).
pub(crate) fn renders(op: Op, dtype: DataType) -> bool {
    kernel_for(op, dtype).is_some_and(|(_, kernel)| kernel.renders_wgsl())
}

/// The cast from `from` to `to` and its pipeline's key.
pub(crate) fn cast_for(from: DataType, to: DataType) -> Option<(MapKey, MapKernel)> {
    let (_, kernel) = table::cast_spec(from, to)?;
    Some((MapKey::Cast(from, to), kernel))
}
