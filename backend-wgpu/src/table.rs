//! The kernel table: the WGSL expression that runs each elementwise (op, dtype) (the kit's
//! body of the op, rendered as WGSL), and how its operands are stored. The single source
//! of `supports` and of the elementwise kernels.

use polytensor_core::{DataType, Op};
use polytensor_kernels_c::{body, render, Elem};

use crate::kernels::key::MapKey;
use polytensor_kernels_c::wgsl::Storage;

/// An elementwise kernel: its pipeline's cache key, its WGSL expression over `x`, `y`,
/// `z`, and how its operands and output are stored.
pub(crate) struct Kernel {
    pub(crate) key: MapKey,
    pub(crate) expression: String,
    pub(crate) storage: fn(DataType) -> Option<Storage>,
}

/// The kernel that runs `op` on `dtype`, or `None` where this backend has none: the
/// single source of `supports` and the elementwise kernels.
pub(crate) fn kernel_for(op: Op, dtype: DataType) -> Option<Kernel> {
    if !op.is_defined_for(dtype) {
        return None;
    }
    let key = MapKey::Op(op, dtype);
    let raw = |expression: &str| Kernel {
        key,
        expression: expression.into(),
        storage: Storage::raw,
    };
    // Moves of any fixed-size dtype, on its raw bits.
    match op {
        Op::Where => {
            let select = render::wgsl(&body::select(), Elem::Bool)?;
            return Storage::raw(dtype).map(|_| raw(&select));
        }
        Op::Copy | Op::Fill => return Storage::raw(dtype).map(|_| raw("x")),
        _ => {}
    }
    // The op's body, written once in the kit and rendered as WGSL; `None` where wgpu's
    // library lacks a function for the dtype.
    Storage::of(dtype)?;
    let elem = Elem::of(dtype)?;
    let body = match op {
        Op::Unary(op) => body::unary(op, elem)?,
        Op::Binary(op) => body::binary(op, elem)?,
        _ => return None,
    };
    let expression = render::wgsl(&body, elem)?;
    Some(Kernel {
        key,
        expression,
        storage: Storage::of,
    })
}
