//! `TensorProto` on the wire: encode a tensor, decode one (TensorFlow's format).

use std::ffi::c_void;
use std::ptr::null_mut;

use polytensor::{Error, Tensor};

use crate::status::{arg, guard, PT_Status};
use crate::tensor::PT_Tensor;

/// Bytes made by polytensor (an encoded proto), freed with [`PT_DeleteBuffer`].
pub struct PT_Buffer {
    bytes: Vec<u8>,
}

impl PT_Buffer {
    /// A new buffer of `bytes`, for the caller to free with [`PT_DeleteBuffer`].
    pub(crate) fn boxed(bytes: Vec<u8>) -> *mut PT_Buffer {
        Box::into_raw(Box::new(PT_Buffer { bytes }))
    }
}

/// The tensor as a serialized `TensorProto` (what TensorFlow's `TensorProto.ParseFromString`
/// reads). NULL on error.
///
/// # Safety
///
/// `tensor` is NULL or a live handle; `status` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_EncodeTensorProto(
    tensor: *const PT_Tensor,
    status: *mut PT_Status,
) -> *mut PT_Buffer {
    guard(status, null_mut(), || {
        // SAFETY: the caller's contract.
        let t = &unsafe { arg(tensor, "tensor") }?.tensor;
        Ok(Box::into_raw(Box::new(PT_Buffer {
            bytes: t.encode_proto()?,
        })))
    })
}

/// The tensor a serialized `TensorProto` of `len` bytes at `data` describes, on the host,
/// in memory of its own that nothing else references: always writable
/// ([`PT_TensorIsReadOnly`](crate::tensor::PT_TensorIsReadOnly) is 0, whichever field the
/// values came in and wherever `tensor_content` lay), and independent of `data`, which the
/// caller may free at once. NULL on error (malformed or inconsistent protos included).
///
/// # Safety
///
/// `data` points to `len` bytes; `status` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_DecodeTensorProto(
    data: *const c_void,
    len: usize,
    status: *mut PT_Status,
) -> *mut PT_Tensor {
    guard(status, null_mut(), || {
        let bytes = if len == 0 {
            Vec::new()
        } else if data.is_null() {
            return Err(Error::invalid("data is NULL"));
        } else {
            // SAFETY: the caller vouches for `len` bytes at `data`.
            unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) }.to_vec()
        };
        let host = polytensor::dlpack::host_device()?;
        let mut tensor = Tensor::decode_proto(bytes, &host)?;
        if tensor.buffer().is_read_only() && tensor.dtype().is_pod() {
            // Aligned `tensor_content` is shared, read-only, with the decoded message: copy
            // it into memory the tensor owns, so that every decoded tensor is writable.
            tensor.try_out_view()?;
        }
        Ok(PT_Tensor::boxed(tensor))
    })
}

/// The bytes of a buffer (NULL for NULL).
///
/// # Safety
///
/// `buffer` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_BufferData(buffer: *const PT_Buffer) -> *const c_void {
    // SAFETY: the caller's contract.
    unsafe { buffer.as_ref() }.map_or(std::ptr::null(), |b| b.bytes.as_ptr().cast())
}

/// The length of a buffer in bytes (0 for NULL).
///
/// # Safety
///
/// `buffer` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_BufferLength(buffer: *const PT_Buffer) -> usize {
    // SAFETY: the caller's contract.
    unsafe { buffer.as_ref() }.map_or(0, |b| b.bytes.len())
}

/// Free a buffer (NULL is ignored).
///
/// # Safety
///
/// `buffer` is NULL or a buffer from this library, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn PT_DeleteBuffer(buffer: *mut PT_Buffer) {
    if !buffer.is_null() {
        // SAFETY: the caller's contract.
        drop(unsafe { Box::from_raw(buffer) });
    }
}
