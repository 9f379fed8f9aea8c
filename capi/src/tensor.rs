//! `PT_Tensor`: creating tensors (from the caller's memory, or allocated), reading their
//! dtype, shape and bytes, moving them between devices, and deleting them.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr::{null_mut, NonNull};

use std::sync::Arc;

use polytensor::layout::Layout;
use polytensor::{buffer::adopt, DataType, Device, Error, Tensor, TensorShape};

use crate::status::{arg, array, guard, quietly, PT_Status};

/// A dtype, with TensorFlow's `TF_DataType` numbers (`PT_FLOAT` is 1, as `TF_FLOAT`).
pub type PT_DataType = c_int;

/// float32.
pub const PT_FLOAT: PT_DataType = 1;
/// float64.
pub const PT_DOUBLE: PT_DataType = 2;
/// int32.
pub const PT_INT32: PT_DataType = 3;
/// uint8.
pub const PT_UINT8: PT_DataType = 4;
/// int16.
pub const PT_INT16: PT_DataType = 5;
/// int8.
pub const PT_INT8: PT_DataType = 6;
/// complex64.
pub const PT_COMPLEX64: PT_DataType = 8;
/// int64.
pub const PT_INT64: PT_DataType = 9;
/// bool (one byte, 0 or 1).
pub const PT_BOOL: PT_DataType = 10;
/// string (bytes of any length: [`crate::view::PT_NewStringTensor`]).
pub const PT_STRING: PT_DataType = 7;
/// bfloat16.
pub const PT_BFLOAT16: PT_DataType = 14;
/// uint16.
pub const PT_UINT16: PT_DataType = 17;
/// complex128.
pub const PT_COMPLEX128: PT_DataType = 18;
/// float16.
pub const PT_HALF: PT_DataType = 19;
/// uint32.
pub const PT_UINT32: PT_DataType = 22;
/// uint64.
pub const PT_UINT64: PT_DataType = 23;

/// Frees the memory given to [`PT_NewTensor`]: called once with the `data`, `len` and
/// `arg` given there, from whichever thread drops the last view of the tensor.
pub type PT_Deallocator =
    Option<unsafe extern "C" fn(data: *mut c_void, len: usize, arg: *mut c_void)>;

/// A tensor: a handle on a polytensor tensor (its views share memory).
pub struct PT_Tensor {
    pub(crate) tensor: Tensor,
    device_name: CString,
}

impl PT_Tensor {
    /// A new handle, for the caller to free with [`PT_DeleteTensor`].
    pub(crate) fn boxed(tensor: Tensor) -> *mut PT_Tensor {
        let device_name = CString::new(tensor.device().name()).unwrap_or_default();
        Box::into_raw(Box::new(PT_Tensor {
            tensor,
            device_name,
        }))
    }
}

/// The size in bytes of one element of `dtype` (TensorFlow's `TF_DataTypeSize`); 0 for a
/// dtype of no fixed size (strings, resources, variants) or a number that names none.
#[no_mangle]
pub extern "C" fn PT_DataTypeSize(dtype: PT_DataType) -> usize {
    quietly(0, || {
        DataType::from_i32(dtype)
            .ok()
            .filter(|d| d.is_pod())
            .map_or(0, |d| d.size())
    })
}

/// The library's version (`0.1.0`), a static string (TensorFlow's `TF_Version`).
#[no_mangle]
pub extern "C" fn PT_Version() -> *const c_char {
    static VERSION: &std::ffi::CStr = match std::ffi::CStr::from_bytes_with_nul(
        concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes(),
    ) {
        Ok(version) => version,
        Err(_) => c"unknown",
    };
    VERSION.as_ptr()
}

/// The dtype of a C dtype number (fixed-size dtypes only).
pub(crate) fn dtype_of(dtype: PT_DataType) -> Result<DataType, Error> {
    let dtype = DataType::from_i32(dtype)?;
    if !dtype.is_pod() {
        return Err(Error::invalid(format!(
            "{dtype} tensors cannot be made through the C API"
        )));
    }
    Ok(dtype)
}

/// The shape of `num_dims` dims at `dims`.
///
/// # Safety
///
/// `dims` is NULL or points to `num_dims` values.
pub(crate) unsafe fn shape_of(dims: *const i64, num_dims: c_int) -> Result<TensorShape, Error> {
    // SAFETY: the caller's contract.
    let dims = unsafe { array(dims, num_dims, "dims") }?;
    TensorShape::from_i64(dims)
}

/// The dtype, shape and host device of a new tensor of `len` bytes, checking that `len` is
/// the element count times the dtype's size.
///
/// # Safety
///
/// `dims` is NULL or points to `num_dims` values.
unsafe fn host_tensor(
    dtype: PT_DataType,
    dims: *const i64,
    num_dims: c_int,
    len: usize,
) -> Result<(DataType, TensorShape, Arc<dyn Device>), Error> {
    let dtype = dtype_of(dtype)?;
    // SAFETY: the caller's contract.
    let shape = unsafe { shape_of(dims, num_dims) }?;
    let expected = shape.num_elements().checked_mul(dtype.size());
    if expected != Some(len) {
        return Err(Error::invalid(format!(
            "{len} bytes given for {shape} of {dtype} ({} bytes)",
            expected.map_or("too many".into(), |e| e.to_string())
        )));
    }
    Ok((dtype, shape, polytensor::dlpack::host_device()?))
}

/// The C string at `ptr`, as UTF-8.
///
/// # Safety
///
/// `ptr` is NULL or a NUL-terminated string.
pub(crate) unsafe fn text<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, Error> {
    if ptr.is_null() {
        return Err(Error::invalid(format!("{what} is NULL")));
    }
    // SAFETY: the caller's contract.
    unsafe { CStr::from_ptr(ptr) }
        .to_str()
        .map_err(|_| Error::invalid(format!("{what} is not UTF-8")))
}

/// Send a raw pointer to the thread that frees it.
struct SendPtr(*mut c_void);
// SAFETY: the C caller of `PT_NewTensor` agrees that its deallocator may run on any thread.
unsafe impl Send for SendPtr {}

/// A tensor of `dtype` and shape `dims` over the caller's `len` bytes at `data`, without a
/// copy (as `TF_NewTensor`). Ownership of the memory passes to polytensor: `deallocator`
/// (if not NULL) is called once with `data`, `len` and `deallocator_arg` when the last
/// view of the tensor is deleted, from whichever thread that is, or before this returns
/// if the call fails, the tensor has no elements, or the memory is not aligned for the
/// dtype (it is then copied).
///
/// `len` must be the element count times the dtype's size; NULL `data` only for no
/// elements. Returns NULL on error (with the status set).
///
/// # Safety
///
/// `dims` points to `num_dims` values; `data` to `len` bytes that stay valid until the
/// deallocator is called and that nothing else writes meanwhile; `status` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_NewTensor(
    dtype: PT_DataType,
    dims: *const i64,
    num_dims: c_int,
    data: *mut c_void,
    len: usize,
    deallocator: PT_Deallocator,
    deallocator_arg: *mut c_void,
    status: *mut PT_Status,
) -> *mut PT_Tensor {
    // SAFETY: the caller's contract.
    unsafe {
        new_tensor(
            dtype,
            dims,
            num_dims,
            data,
            len,
            false,
            (deallocator, deallocator_arg),
            status,
        )
    }
}

/// [`PT_NewTensor`] over memory that must never be written (constants, a mapped file):
/// polytensor copies it before any write, and exports it through DLPack flagged
/// `READ_ONLY`.
///
/// # Safety
///
/// As [`PT_NewTensor`].
#[no_mangle]
pub unsafe extern "C" fn PT_NewConstTensor(
    dtype: PT_DataType,
    dims: *const i64,
    num_dims: c_int,
    data: *const c_void,
    len: usize,
    deallocator: PT_Deallocator,
    deallocator_arg: *mut c_void,
    status: *mut PT_Status,
) -> *mut PT_Tensor {
    // SAFETY: the caller's contract.
    unsafe {
        new_tensor(
            dtype,
            dims,
            num_dims,
            data.cast_mut(),
            len,
            true,
            (deallocator, deallocator_arg),
            status,
        )
    }
}

/// [`PT_NewTensor`] and [`PT_NewConstTensor`].
///
/// # Safety
///
/// As [`PT_NewTensor`].
#[allow(clippy::too_many_arguments)]
unsafe fn new_tensor(
    dtype: PT_DataType,
    dims: *const i64,
    num_dims: c_int,
    data: *mut c_void,
    len: usize,
    read_only: bool,
    (deallocator, deallocator_arg): (PT_Deallocator, *mut c_void),
    status: *mut PT_Status,
) -> *mut PT_Tensor {
    let (data_ptr, arg_ptr) = (SendPtr(data), SendPtr(deallocator_arg));
    let release = move || {
        let (data_ptr, arg_ptr) = (data_ptr, arg_ptr);
        if let Some(deallocate) = deallocator {
            // SAFETY: the caller's deallocator, called once with its own arguments.
            unsafe { deallocate(data_ptr.0, len, arg_ptr.0) }
        }
    };
    let mut release = Some(release);
    let made = guard(status, null_mut(), || {
        // SAFETY: the caller's contract.
        let (dtype, shape, device) = unsafe { host_tensor(dtype, dims, num_dims, len) }?;
        if len == 0 {
            return Ok(PT_Tensor::boxed(Tensor::zeros(shape, dtype, &device)?));
        }
        let data = NonNull::new(data.cast::<u8>())
            .ok_or_else(|| Error::invalid("data is NULL for a tensor with elements"))?;
        let release = release.take().expect("taken once");
        // SAFETY: the caller vouches for `len` bytes at `data` until the deallocator runs.
        let buffer = unsafe {
            adopt(
                data,
                len,
                dtype.alignment(),
                read_only,
                Box::new(release),
                &device,
            )
        }?;
        let tensor = Tensor::from_parts(dtype, Layout::contiguous(shape), buffer)?;
        Ok(PT_Tensor::boxed(tensor))
    });
    // Not handed to a buffer (an early error, or no elements): the memory goes back now.
    if let Some(release) = release {
        release();
    }
    made
}

/// A new tensor of `dtype` and shape `dims` in polytensor's own host memory, `len` bytes
/// (the element count times the dtype's size), zeroed (as `TF_AllocateTensor`, whose
/// memory the caller then fills through [`PT_TensorData`]). NULL on error.
///
/// # Safety
///
/// `dims` points to `num_dims` values; `status` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_AllocateTensor(
    dtype: PT_DataType,
    dims: *const i64,
    num_dims: c_int,
    len: usize,
    status: *mut PT_Status,
) -> *mut PT_Tensor {
    guard(status, null_mut(), || {
        // SAFETY: the caller's contract.
        let (dtype, shape, device) = unsafe { host_tensor(dtype, dims, num_dims, len) }?;
        Ok(PT_Tensor::boxed(Tensor::zeros(shape, dtype, &device)?))
    })
}

/// Delete a tensor handle (NULL is ignored). The memory goes when its last view does.
///
/// # Safety
///
/// `tensor` is NULL or a live handle, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn PT_DeleteTensor(tensor: *mut PT_Tensor) {
    if !tensor.is_null() {
        // SAFETY: the caller's contract: a handle this library made.
        quietly((), || drop(unsafe { Box::from_raw(tensor) }));
    }
}

/// The read-only tensor at `tensor`, or NULL's default.
///
/// # Safety
///
/// `tensor` is NULL or live for the call.
unsafe fn read<T>(tensor: *const PT_Tensor, failed: T, f: impl FnOnce(&Tensor) -> T) -> T {
    // SAFETY: the caller's contract.
    match unsafe { tensor.as_ref() } {
        Some(t) => quietly(failed, || f(&t.tensor)),
        None => failed,
    }
}

/// The dtype (-1 for NULL).
///
/// # Safety
///
/// `tensor` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn PT_TensorType(tensor: *const PT_Tensor) -> PT_DataType {
    // SAFETY: the caller's contract.
    unsafe { read(tensor, -1, |t| t.dtype().as_i32()) }
}

/// The rank (-1 for NULL).
///
/// # Safety
///
/// `tensor` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn PT_NumDims(tensor: *const PT_Tensor) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { read(tensor, -1, |t| t.rank() as c_int) }
}

/// Dim `index` (-1 for NULL or an index out of range).
///
/// # Safety
///
/// `tensor` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn PT_Dim(tensor: *const PT_Tensor, index: c_int) -> i64 {
    // SAFETY: the caller's contract.
    unsafe {
        read(tensor, -1, |t| {
            usize::try_from(index)
                .ok()
                .and_then(|i| t.dims().get(i).copied())
                .map_or(-1, |d| d as i64)
        })
    }
}

/// The element count (-1 for NULL).
///
/// # Safety
///
/// `tensor` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn PT_TensorElementCount(tensor: *const PT_Tensor) -> i64 {
    // SAFETY: the caller's contract.
    unsafe { read(tensor, -1, |t| t.num_elements() as i64) }
}

/// The bytes of the elements (`TF_TensorByteSize`; 0 for NULL).
///
/// # Safety
///
/// `tensor` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn PT_TensorByteSize(tensor: *const PT_Tensor) -> usize {
    // SAFETY: the caller's contract.
    unsafe { read(tensor, 0, Tensor::total_bytes) }
}

/// The first element in host memory, for a contiguous tensor on a host device; NULL
/// otherwise (read other tensors with [`PT_TensorCopyTo`]). Writing through it is allowed
/// only while the caller holds the one handle of a tensor it made, which is not read-only.
///
/// # Safety
///
/// `tensor` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn PT_TensorData(tensor: *const PT_Tensor) -> *mut c_void {
    // SAFETY: the caller's contract.
    unsafe {
        read(tensor, null_mut(), |t| {
            match (t.is_contiguous(), t.buffer().host_ptr()) {
                (true, Some(base)) => base
                    .wrapping_add(t.layout().offset() * t.dtype().size())
                    .cast(),
                _ => null_mut(),
            }
        })
    }
}

/// Whether the memory must not be written (1): a tensor of `PT_NewConstTensor`, or a
/// DLPack import its producer marked read-only. 0 otherwise (a decoded proto owns writable
/// memory) and for NULL.
///
/// # Safety
///
/// `tensor` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn PT_TensorIsReadOnly(tensor: *const PT_Tensor) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { read(tensor, 0, |t| c_int::from(t.buffer().is_read_only())) }
}

/// The name of the tensor's device (`cpu:0`), valid while the handle lives; "" for NULL.
///
/// # Safety
///
/// `tensor` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn PT_TensorDevice(tensor: *const PT_Tensor) -> *const c_char {
    // SAFETY: the caller's contract.
    match unsafe { tensor.as_ref() } {
        Some(t) => t.device_name.as_ptr(),
        None => c"".as_ptr(),
    }
}

/// Copy the elements, in row-major order, into the caller's `len` bytes at `dst` (from any
/// device and any view); `len` must be [`PT_TensorByteSize`].
///
/// # Safety
///
/// `tensor` is NULL or a live handle; `dst` points to `len` writable bytes; `status` is
/// NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_TensorCopyTo(
    tensor: *const PT_Tensor,
    dst: *mut c_void,
    len: usize,
    status: *mut PT_Status,
) {
    guard(status, (), || {
        // SAFETY: the caller's contract.
        let t = &unsafe { arg(tensor, "tensor") }?.tensor;
        let bytes = t.to_bytes()?;
        if bytes.len() != len {
            return Err(Error::invalid(format!(
                "{len} bytes given for a tensor of {} bytes",
                bytes.len()
            )));
        }
        if len > 0 {
            if dst.is_null() {
                return Err(Error::invalid("dst is NULL"));
            }
            // SAFETY: the caller vouches for `len` writable bytes at `dst`.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst.cast::<u8>(), len) };
        }
        Ok(())
    })
}

/// A copy of the tensor on the device named `device` (`cpu:0`, `opencl:0`; a new handle on
/// the same tensor if it is already there). NULL on error.
///
/// # Safety
///
/// `tensor` is NULL or a live handle; `device` NULL or a NUL-terminated string; `status`
/// NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_TensorToDevice(
    tensor: *const PT_Tensor,
    device: *const c_char,
    status: *mut PT_Status,
) -> *mut PT_Tensor {
    guard(status, null_mut(), || {
        // SAFETY: the caller's contract.
        let t = &unsafe { arg(tensor, "tensor") }?.tensor;
        // SAFETY: the caller's contract.
        let device = polytensor::device(unsafe { text(device, "device") }?)?;
        Ok(PT_Tensor::boxed(t.to_device(&device)?))
    })
}
