//! The operation builder's setters for the attributes beyond a dtype, an integer, a bool
//! and a tensor (`capi/src/graph.rs`): strings, floats, shapes and lists, as TensorFlow's
//! `TF_SetAttrString`, `TF_SetAttrFloat`, `TF_SetAttrShape`, `TF_SetAttrTypeList` and
//! `TF_SetAttrIntList`.

use std::ffi::{c_char, c_int, c_void};
use std::ptr::null_mut;

use polytensor::graph::{int_list, type_list, AttrKind, AttrValue};
use polytensor::{DataType, Error, PartialTensorShape};

use crate::graph::{set_attr, PT_OperationDescription};
use crate::status::array;
use crate::tensor::PT_DataType;

/// Set a string attribute to the `length` bytes at `value` (a `frame_name`, `padding`).
///
/// # Safety
///
/// `desc` is a live description, `name` NUL-terminated, `value` NULL or `length`
/// readable bytes.
#[no_mangle]
pub unsafe extern "C" fn PT_SetAttrString(
    desc: *mut PT_OperationDescription,
    name: *const c_char,
    value: *const c_void,
    length: usize,
) {
    let bytes = || {
        let length = i32::try_from(length)
            .map_err(|_| Error::invalid(format!("a string of {length} bytes is too long")))?;
        // SAFETY: the caller's contract.
        let bytes = unsafe { array(value.cast::<u8>(), length, "value") }?;
        Ok(AttrValue {
            value: Some(AttrKind::S(bytes.to_vec())),
        })
    };
    // SAFETY: the caller's contract.
    unsafe { set_attr(desc, name, null_mut(), bytes) }
}

/// Set a float attribute (`epsilon`, `alpha`).
///
/// # Safety
///
/// `desc` is a live description and `name` NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn PT_SetAttrFloat(
    desc: *mut PT_OperationDescription,
    name: *const c_char,
    value: f32,
) {
    // SAFETY: the caller's contract.
    unsafe { set_attr(desc, name, null_mut(), || Ok(value.into())) }
}

/// Set a shape attribute (a `Placeholder`'s `shape`): `num_dims` dims, each -1 where
/// unknown; `num_dims` -1 for an unknown rank.
///
/// # Safety
///
/// `desc` is a live description, `name` NUL-terminated, `dims` NULL or `num_dims` values.
#[no_mangle]
pub unsafe extern "C" fn PT_SetAttrShape(
    desc: *mut PT_OperationDescription,
    name: *const c_char,
    dims: *const i64,
    num_dims: c_int,
) {
    let shape = || {
        let shape = if num_dims == -1 {
            PartialTensorShape::unknown_rank()
        } else {
            // SAFETY: the caller's contract.
            PartialTensorShape::from_i64(unsafe { array(dims, num_dims, "dims") }?)?
        };
        Ok(AttrValue::from(&shape))
    };
    // SAFETY: the caller's contract.
    unsafe { set_attr(desc, name, null_mut(), shape) }
}

/// Set a list-of-dtypes attribute (`IdentityN`'s `T`, a call's `Tin`).
///
/// # Safety
///
/// `desc` is a live description, `name` NUL-terminated, `values` NULL or `num_values`
/// dtypes.
#[no_mangle]
pub unsafe extern "C" fn PT_SetAttrTypeList(
    desc: *mut PT_OperationDescription,
    name: *const c_char,
    values: *const PT_DataType,
    num_values: c_int,
) {
    let list = || {
        // SAFETY: the caller's contract.
        let values = unsafe { array(values, num_values, "values") }?;
        let dtypes = values
            .iter()
            .map(|&v| Ok(DataType::from_i32(v)?))
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(type_list(&dtypes))
    };
    // SAFETY: the caller's contract.
    unsafe { set_attr(desc, name, null_mut(), list) }
}

/// Set a list-of-integers attribute (`strides`, `squeeze_dims`).
///
/// # Safety
///
/// `desc` is a live description, `name` NUL-terminated, `values` NULL or `num_values`
/// integers.
#[no_mangle]
pub unsafe extern "C" fn PT_SetAttrIntList(
    desc: *mut PT_OperationDescription,
    name: *const c_char,
    values: *const i64,
    num_values: c_int,
) {
    // SAFETY: the caller's contract.
    let list = || Ok(int_list(unsafe { array(values, num_values, "values") }?));
    // SAFETY: the caller's contract.
    unsafe { set_attr(desc, name, null_mut(), list) }
}
