//! The kernel table: the kit's elementwise kernel each pipeline key names
//! ([`map_kernel`], from the kit's table, [`polytensor_gpu_kit::table`]), and whether WGSL
//! renders it ([`renders`]): the rule behind `supports`, asked once when a device opens, so
//! that a launch needs only the key and builds the kernel on a pipeline-cache miss.

use polytensor_core::{DataType, Op};
use polytensor_gpu_kit::elementwise::MapKernel;
use polytensor_gpu_kit::table;

use crate::kernels::key::MapKey;

/// The key of the kernel that runs `op` on `dtype`, or `None` where the op is not defined
/// for it (fill is the copy of a one-element buffer read with zero strides).
pub(crate) fn map_key(op: Op, dtype: DataType) -> Option<MapKey> {
    let op = match op {
        _ if !op.is_defined_for(dtype) => return None,
        Op::Fill => Op::Copy,
        _ => op,
    };
    Some(MapKey::Op(op, dtype))
}

/// The kit's kernel `key` names, or `None` where the kit's table has none.
pub(crate) fn map_kernel(key: MapKey) -> Option<MapKernel> {
    Some(match key {
        MapKey::Op(op, dtype) => table::map_spec(op, dtype)?.1,
        MapKey::Cast(from, to) => table::cast_spec(from, to)?.1,
    })
}

/// Whether WGSL renders the kernel `key` names (every operand has a storage and the
/// helper library has the op's functions).
pub(crate) fn renders(key: MapKey) -> bool {
    map_kernel(key).is_some_and(|kernel| kernel.renders_wgsl())
}

#[cfg(test)]
mod tests {
    use super::*;
    use polytensor_gpu_kit::wgsl::Storage;

    /// A cast's launch asks only whether the device holds both dtypes (the capability of
    /// `Op::Cast` is per dtype): every cast between dtypes with a storage must render.
    #[test]
    fn every_cast_between_held_dtypes_renders() {
        let held: Vec<DataType> = DataType::ALL
            .iter()
            .copied()
            .filter(|&d| Storage::of(d).is_some())
            .collect();
        for &from in &held {
            for &to in &held {
                assert!(renders(MapKey::Cast(from, to)), "cast {from} to {to}");
            }
        }
    }
}
