//! [`Tensor`]: a dtype, a layout and a reference-counted buffer on a device.

use std::sync::Arc;

use crate::buffer::{EmbeddedBuffer, StringBuffer, TensorBuffer};
use crate::device::{Device, OutView, TensorView};
use crate::dtype::DataType;
use crate::element::{Element, Scalar};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::ops::Op;
use crate::shape::{IntoShape, TensorShape};

pub use host::HostView;
pub use nn::{Conv2dOptions, ConvEpilogue, PackedFilter, Pool2dOptions};
pub(crate) use segment::with_rows;
pub use shape_ops::MirrorMode;

/// A tensor: a dtype, a [`Layout`] and an `Arc` of a [`TensorBuffer`] on some device.
///
/// Cloning a tensor clones the `Arc`, never the data. Views (`slice`, `transpose`,
/// `broadcast_to`, `reshape` where possible) share the buffer. The one exception is a tensor
/// of at most [`EMBEDDED_BUFFER_BYTES`](crate::EMBEDDED_BUFFER_BYTES) on the process-wide
/// CPU device: its elements live inside the value (an [`EmbeddedBuffer`]), so it is made
/// with no allocation, and clones and views copy those few bytes. Operations allocate their
/// result on the operands' device and return `Result`: bad shapes, mismatched dtypes or
/// devices, and unsupported ops are errors, never panics.
///
/// ```
/// use std::sync::Arc;
/// use polytensor_core::{Device, Tensor};
/// # fn demo(cpu: &Arc<dyn Device>) -> polytensor_core::Result<()> {
/// let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], [2, 2], cpu)?;
/// let b = Tensor::scalar(10.0f32, cpu)?;
/// let c = a.add(&b)?.matmul(&a)?;
/// assert_eq!(c.to_vec::<f32>()?, vec![70.0, 104.0, 82.0, 122.0]);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Tensor {
    dtype: DataType,
    layout: Layout,
    storage: Storage,
}

/// Where a tensor's elements live.
#[derive(Clone)]
enum Storage {
    /// A reference-counted buffer, shared by every view of it.
    Shared(Arc<dyn TensorBuffer>),
    /// A few host bytes inside the tensor value.
    Embedded(EmbeddedBuffer),
}

impl Storage {
    /// A new buffer of `bytes` on `device`, embedded where the device allows it (always
    /// zeroed then), else allocated (zeroed only if asked).
    #[inline]
    fn allocate(device: &Arc<dyn Device>, bytes: usize, zeroed: bool) -> Result<Self> {
        if let Some(embedded) = EmbeddedBuffer::zeroed(bytes, device) {
            return Ok(Storage::Embedded(embedded));
        }
        let buffer = if zeroed {
            device.allocate_zeroed(bytes)?
        } else {
            device.allocate(bytes)?
        };
        Ok(Storage::Shared(buffer))
    }

    #[inline]
    fn buffer(&self) -> &dyn TensorBuffer {
        match self {
            Storage::Shared(buffer) => buffer.as_ref(),
            Storage::Embedded(embedded) => embedded,
        }
    }
}

pub use crate::device::same_device;

#[inline]
fn byte_len(shape: &TensorShape, dtype: DataType) -> Result<usize> {
    if !dtype.is_pod() {
        return Err(Error::invalid(format!(
            "dtype {dtype} has no fixed element size"
        )));
    }
    shape
        .num_elements()
        .checked_mul(dtype.size())
        .ok_or_else(|| {
            Error::InvalidShape(format!("{shape} of {dtype} overflows the address space"))
        })
}

/// `Err` naming the first element of `elements` (the bytes of `dtype`'s elements, in
/// order) that is not a valid `dtype` value: bool and the sub-byte integers use only some
/// byte values ([`DataType::byte_range`]). Every way bytes enter a tensor checks this.
fn check_element_bytes(dtype: DataType, elements: impl IntoIterator<Item = u8>) -> Result<()> {
    if dtype.byte_range().is_none() {
        return Ok(());
    }
    match elements
        .into_iter()
        .enumerate()
        .find(|&(_, b)| !dtype.is_valid_byte(b))
    {
        None => Ok(()),
        Some((i, b)) => Err(invalid_element(dtype, i, b)),
    }
}

/// [`check_element_bytes`] over contiguous elements, at memory speed.
pub(crate) fn check_element_slice(dtype: DataType, elements: &[u8]) -> Result<()> {
    match dtype.first_invalid_byte(elements) {
        None => Ok(()),
        Some(i) => Err(invalid_element(dtype, i, elements[i])),
    }
}

/// The error for element `i`, the byte `byte`, which is not a valid `dtype`.
fn invalid_element(dtype: DataType, i: usize, byte: u8) -> Error {
    let (min, max) = dtype.byte_range().unwrap_or((0, 255));
    Error::invalid(format!(
        "element {i} is the byte {byte:#04x}, not a valid {dtype} (values {min}..={max}, one \
         per byte{})",
        if min < 0 && dtype != DataType::Bool {
            ", sign-extended or in the low bits"
        } else {
            ""
        }
    ))
}

/// The element count of `arange(start, end, step)`.
fn arange_count(start: Scalar, end: Scalar, step: Scalar) -> Result<usize> {
    let as_int = |s: Scalar| match s {
        Scalar::I64(v) => Some(i128::from(v)),
        Scalar::U64(v) => Some(i128::from(v)),
        _ => None,
    };
    let count = match (as_int(start), as_int(end), as_int(step)) {
        (Some(_), Some(_), Some(0)) => return Err(Error::invalid("arange step must not be zero")),
        (Some(a), Some(b), Some(s)) => {
            let span = b - a;
            let n = if (span > 0) == (s > 0) && span != 0 {
                (span + s - s.signum()) / s
            } else {
                0
            };
            u64::try_from(n).unwrap_or(0) as f64
        }
        _ => {
            let (a, b, s) = (start.to_f64(), end.to_f64(), step.to_f64());
            if s == 0.0 || !s.is_finite() || !a.is_finite() || !b.is_finite() {
                return Err(Error::invalid(format!(
                    "arange({a}, {b}, {s}) has no finite length"
                )));
            }
            ((b - a) / s).ceil().max(0.0)
        }
    };
    if count > crate::shape::MAX_ELEMENTS as f64 {
        return Err(Error::InvalidShape(format!(
            "arange would have {count} elements"
        )));
    }
    Ok(count as usize)
}

// In the order rustdoc lists `Tensor`'s methods: construction first, then ops, views and
// host access.
mod basics;

mod math;

mod operators;

mod views;

mod shape_ops;

mod space_batch;

mod einsum;

mod resize;
pub use resize::ResizeOptions;

mod nn;

mod conv_transpose;

mod nn_grad;

mod norm_train;
pub use norm_train::{BatchNormGradients, BatchNormStatistics};

mod segment;

mod sequences;

mod indexing;

mod host;

mod complex;

mod display;
