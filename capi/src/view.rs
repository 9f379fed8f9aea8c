//! Views and string tensors: a tensor reshaped, bitcast (TensorFlow's `TF_TensorBitcastFrom`
//! and `tf.bitcast`) or viewed through strides of the caller's choosing, each sharing the
//! buffer where it can; the strides and offset of any tensor; and string tensors made
//! from C strings and read one element at a time (TensorFlow's `TF_TString`).

use std::ffi::{c_char, c_int};
use std::ptr::null;

use polytensor::{buffer::StringBuffer, Error, Tensor, TensorShape};

use crate::ops::operand;
use crate::status::{array, guard, quietly, PT_Status};
use crate::tensor::PT_Tensor;

/// `from` with dims `dims` (one of them may be -1, inferred from the element count): a
/// view of the same buffer where the strides allow it, a contiguous copy otherwise. A
/// new handle; NULL with the status set where the element counts differ.
///
/// # Safety
///
/// `from` is NULL or a live handle; `dims` NULL or `num_dims` values; `status` NULL or
/// live.
#[no_mangle]
pub unsafe extern "C" fn PT_TensorReshape(
    from: *const PT_Tensor,
    dims: *const i64,
    num_dims: c_int,
    status: *mut PT_Status,
) -> *mut PT_Tensor {
    guard(status, std::ptr::null_mut(), || {
        // SAFETY: the caller's contract.
        let (from, dims) = unsafe { (operand(from, "from")?, array(dims, num_dims, "dims")?) };
        Ok(PT_Tensor::boxed(from.reshape_infer(dims)?))
    })
}

/// `from`'s bytes as `dtype` (`tf.bitcast`): equal element sizes keep the shape; a smaller
/// one adds an innermost dim of the ratio; a larger one needs an innermost dim of the
/// ratio, and removes it. Shares the buffer where the view lines up with the new element
/// size. A new handle, or NULL with the status set.
///
/// # Safety
///
/// `from` is NULL or a live handle; `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_TensorBitcast(
    from: *const PT_Tensor,
    dtype: crate::tensor::PT_DataType,
    status: *mut PT_Status,
) -> *mut PT_Tensor {
    guard(status, std::ptr::null_mut(), || {
        // SAFETY: the caller's contract.
        let from = unsafe { operand(from, "from") }?;
        let dtype = polytensor::DataType::from_i32(dtype)?;
        Ok(PT_Tensor::boxed(from.bitcast(dtype)?))
    })
}

/// A view of `from`'s buffer with `num_dims` dims and strides, starting `offset` elements
/// into the buffer (PyTorch's `as_strided`; strides and offset count elements, and may
/// be 0 to repeat one). NULL with the status set where an element of the view lies outside
/// the buffer or before its start. A new handle sharing the buffer.
///
/// # Safety
///
/// `from` is NULL or a live handle; `dims` and `strides` NULL or `num_dims` values;
/// `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_TensorStridedView(
    from: *const PT_Tensor,
    dims: *const i64,
    strides: *const i64,
    num_dims: c_int,
    offset: i64,
    status: *mut PT_Status,
) -> *mut PT_Tensor {
    guard(status, std::ptr::null_mut(), || {
        // SAFETY: the caller's contract.
        let (from, dims, strides) = unsafe {
            (
                operand(from, "from")?,
                array(dims, num_dims, "dims")?,
                array(strides, num_dims, "strides")?,
            )
        };
        let strides = strides
            .iter()
            .map(|&s| {
                isize::try_from(s).map_err(|_| Error::invalid(format!("stride {s} is too large")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let offset = usize::try_from(offset)
            .map_err(|_| Error::invalid(format!("offset {offset} is negative")))?;
        let view = from.as_strided(TensorShape::from_i64(dims)?, &strides, offset)?;
        Ok(PT_Tensor::boxed(view))
    })
}

/// Stride `index` of the tensor, in elements (0 for NULL or an index out of range).
///
/// # Safety
///
/// `tensor` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn PT_TensorStride(tensor: *const PT_Tensor, index: c_int) -> i64 {
    // SAFETY: the caller's contract.
    let Some(tensor) = (unsafe { tensor.as_ref() }) else {
        return 0;
    };
    quietly(0, || {
        usize::try_from(index)
            .ok()
            .and_then(|i| tensor.tensor.layout().strides().get(i).copied())
            .map_or(0, |s| s as i64)
    })
}

/// Where the tensor's first element lies in its buffer, in elements (-1 for NULL).
///
/// # Safety
///
/// `tensor` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn PT_TensorOffset(tensor: *const PT_Tensor) -> i64 {
    // SAFETY: the caller's contract.
    let Some(tensor) = (unsafe { tensor.as_ref() }) else {
        return -1;
    };
    quietly(-1, || tensor.tensor.layout().offset() as i64)
}

/// A string tensor (`PT_STRING`) of dims `dims` on the host, element `i` the
/// `lengths[i]` bytes at `strings[i]` (any bytes, NUL included), copied. A new handle, or
/// NULL with the status set.
///
/// # Safety
///
/// `strings` and `lengths` are NULL or hold as many entries as the dims have elements,
/// each string `lengths[i]` readable bytes; `dims` NULL or `num_dims` values; `status`
/// NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_NewStringTensor(
    strings: *const *const c_char,
    lengths: *const usize,
    dims: *const i64,
    num_dims: c_int,
    status: *mut PT_Status,
) -> *mut PT_Tensor {
    guard(status, std::ptr::null_mut(), || {
        // SAFETY: the caller's contract.
        let shape = TensorShape::from_i64(unsafe { array(dims, num_dims, "dims") }?)?;
        let count = i32::try_from(shape.num_elements())
            .map_err(|_| Error::invalid("too many strings for one call"))?;
        // SAFETY: the caller's contract: `count` entries each.
        let (strings, lengths) = unsafe {
            (
                array(strings, count, "strings")?,
                array(lengths, count, "lengths")?,
            )
        };
        let values = strings
            .iter()
            .zip(lengths)
            .map(|(&ptr, &len)| {
                // SAFETY: the caller's contract: `len` readable bytes at `ptr`.
                unsafe { array(ptr.cast::<u8>(), len_i32(len)?, "a string") }.map(<[u8]>::to_vec)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let host = polytensor::dlpack::host_device()?;
        Ok(PT_Tensor::boxed(Tensor::from_strings(
            values, shape, &host,
        )?))
    })
}

fn len_i32(len: usize) -> Result<i32, Error> {
    i32::try_from(len).map_err(|_| Error::invalid(format!("a string of {len} bytes is too long")))
}

/// The bytes of element `index` (row-major) of a string tensor, their count in `*length`;
/// valid while the tensor lives. NULL (and `*length` 0) for NULL, another dtype or an
/// index out of range.
///
/// # Safety
///
/// `tensor` is NULL or a live handle; `length` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn PT_TensorStringAt(
    tensor: *const PT_Tensor,
    index: i64,
    length: *mut usize,
) -> *const c_char {
    // SAFETY: the caller's contract.
    let tensor = unsafe { tensor.as_ref() };
    let found = quietly(None, || string_at(&tensor?.tensor, index));
    // SAFETY: the caller's contract.
    if let Some(length) = unsafe { length.as_mut() } {
        *length = found.map_or(0, <[u8]>::len);
    }
    found.map_or(null(), |bytes| bytes.as_ptr().cast())
}

/// Element `index` of a string tensor, in its buffer.
fn string_at(tensor: &Tensor, index: i64) -> Option<&[u8]> {
    let strings = tensor.buffer().downcast_ref::<StringBuffer>()?.strings();
    let mut rest = usize::try_from(index).ok()?;
    if rest >= tensor.num_elements() {
        return None;
    }
    let dims = tensor.dims();
    let mut at = vec![0usize; dims.len()];
    for (i, &dim) in dims.iter().enumerate().rev() {
        at[i] = rest % dim;
        rest /= dim;
    }
    let position = tensor.layout().position(&at).ok()?;
    strings.get(position).map(Vec::as_slice)
}
