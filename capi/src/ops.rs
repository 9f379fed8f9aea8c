//! The ops of the kernel surface: elementwise (by name), matmul, reductions and casts. Each
//! returns a new tensor handle, or NULL with the status set.

use std::ffi::{c_char, c_int};
use std::ptr::null_mut;

use polytensor::{BinaryOp, Error, ReduceOp, Tensor, UnaryOp};

use crate::status::{arg, array, guard, PT_Status};
use crate::tensor::{dtype_of, text, PT_DataType, PT_Tensor};

/// The op of `ops` named `name`, or an `Err` listing them.
fn named<T: Copy + std::fmt::Display>(ops: &[T], name: &str, family: &str) -> Result<T, Error> {
    ops.iter()
        .copied()
        .find(|op| op.to_string() == name)
        .ok_or_else(|| {
            let names: Vec<String> = ops.iter().map(ToString::to_string).collect();
            Error::invalid(format!(
                "no {family} op is called {name:?}; there are {}",
                names.join(", ")
            ))
        })
}

/// The tensor of a handle argument.
///
/// # Safety
///
/// `tensor` is NULL or a live handle for the call.
pub(crate) unsafe fn operand<'a>(
    tensor: *const PT_Tensor,
    what: &str,
) -> Result<&'a Tensor, Error> {
    // SAFETY: the caller's contract.
    Ok(&unsafe { arg(tensor, what) }?.tensor)
}

/// The elementwise op `op` of one operand (`neg`, `abs`, `sqrt`, `exp`, `log`, `tanh`, ...).
///
/// # Safety
///
/// `op` is NULL or a NUL-terminated string; `x` NULL or a live handle; `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_Unary(
    op: *const c_char,
    x: *const PT_Tensor,
    status: *mut PT_Status,
) -> *mut PT_Tensor {
    guard(status, null_mut(), || {
        // SAFETY: the caller's contract.
        let (op, x) = unsafe { (text(op, "op")?, operand(x, "x")?) };
        let op = named(UnaryOp::ALL, op, "unary")?;
        Ok(PT_Tensor::boxed(x.unary(op)?))
    })
}

/// The elementwise op `op` of two operands, broadcasting (`add`, `sub`, `mul`, `div`,
/// `maximum`, `pow`, `equal`, `less`, `logical_and`, ...).
///
/// # Safety
///
/// `op` is NULL or a NUL-terminated string; `a`, `b` NULL or live handles; `status` NULL or
/// live.
#[no_mangle]
pub unsafe extern "C" fn PT_Binary(
    op: *const c_char,
    a: *const PT_Tensor,
    b: *const PT_Tensor,
    status: *mut PT_Status,
) -> *mut PT_Tensor {
    guard(status, null_mut(), || {
        // SAFETY: the caller's contract.
        let (op, a, b) = unsafe { (text(op, "op")?, operand(a, "a")?, operand(b, "b")?) };
        let op = named(BinaryOp::ALL, op, "binary")?;
        Ok(PT_Tensor::boxed(a.binary(op, b)?))
    })
}

/// The (batched, broadcasting) matrix product of `a` and `b`, each transposed first if asked
/// (nonzero `transpose_a`, `transpose_b`).
///
/// # Safety
///
/// `a`, `b` are NULL or live handles; `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_MatMul(
    a: *const PT_Tensor,
    b: *const PT_Tensor,
    transpose_a: c_int,
    transpose_b: c_int,
    status: *mut PT_Status,
) -> *mut PT_Tensor {
    guard(status, null_mut(), || {
        // SAFETY: the caller's contract.
        let (a, b) = unsafe { (operand(a, "a")?, operand(b, "b")?) };
        Ok(PT_Tensor::boxed(a.matmul_t(
            b,
            transpose_a != 0,
            transpose_b != 0,
        )?))
    })
}

/// The reduction `op` (`sum`, `prod`, `mean`, `max`, `min`, `all`, `any`, `argmax`,
/// `argmin`) over `num_axes` axes at `axes` (negative count from the end; none reduces
/// nothing), keeping reduced dims as 1 if `keep_dims` is nonzero.
///
/// # Safety
///
/// `op` is NULL or a NUL-terminated string; `x` NULL or a live handle; `axes` points to
/// `num_axes` values; `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_Reduce(
    op: *const c_char,
    x: *const PT_Tensor,
    axes: *const i64,
    num_axes: c_int,
    keep_dims: c_int,
    status: *mut PT_Status,
) -> *mut PT_Tensor {
    guard(status, null_mut(), || {
        // SAFETY: the caller's contract.
        let (op, x, axes) = unsafe {
            (
                text(op, "op")?,
                operand(x, "x")?,
                array(axes, num_axes, "axes")?,
            )
        };
        let op = named(ReduceOp::ALL, op, "reduction")?;
        let axes = axes
            .iter()
            .map(|&a| isize::try_from(a).map_err(|_| Error::invalid(format!("axis {a}"))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PT_Tensor::boxed(x.reduce(op, &axes, keep_dims != 0)?))
    })
}

/// `x` converted to `dtype` (TensorFlow's `Cast`).
///
/// # Safety
///
/// `x` is NULL or a live handle; `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_Cast(
    x: *const PT_Tensor,
    dtype: PT_DataType,
    status: *mut PT_Status,
) -> *mut PT_Tensor {
    guard(status, null_mut(), || {
        // SAFETY: the caller's contract.
        let x = unsafe { operand(x, "x") }?;
        Ok(PT_Tensor::boxed(x.cast(dtype_of(dtype)?)?))
    })
}
