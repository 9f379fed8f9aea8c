//! The kernel table: the WGSL expression that runs each elementwise (op, dtype), and how
//! its operands are stored. The single source of `supports` and of the elementwise kernels.

use polytensor_core::{DataType, Op, UnaryOp};

use crate::kernels::key::MapKey;
use crate::kernels::storage::Storage;
use crate::kernels::{complex, elementwise};

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
        Op::Where => return Storage::raw(dtype).map(|_| raw("select(z, y, x != 0u)")),
        Op::Copy | Op::Fill => return Storage::raw(dtype).map(|_| raw("x")),
        _ => {}
    }
    let t = Storage::of(dtype)?.value_type();
    if let Some(part) = t.part() {
        let expression = match op {
            Op::Binary(op) => complex::binary_expression(op)?,
            Op::Unary(op) => complex::unary_expression(op, part)?,
            _ => return None,
        };
        return Some(Kernel {
            key,
            expression,
            storage: Storage::of,
        });
    }
    let t = t.real()?;
    let expression = match op {
        Op::Binary(op) if op.is_comparison() => elementwise::compare_expression(op, t)?,
        Op::Binary(op) if dtype == DataType::Bool => elementwise::logical_expression(op)?.into(),
        Op::Unary(UnaryOp::Not) if dtype == DataType::Bool => "1u - x".into(),
        _ if dtype == DataType::Bool => return None,
        Op::Binary(op) => elementwise::binary_expression(op, t)?,
        Op::Unary(op) => elementwise::unary_expression(op, t)?,
        _ => return None,
    };
    Some(Kernel {
        key,
        expression,
        storage: Storage::of,
    })
}
