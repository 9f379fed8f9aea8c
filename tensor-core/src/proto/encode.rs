//! Tensors to `TensorProto`, as TensorFlow writes them.

use bytes::Bytes;
use prost::encoding::{encode_key, encode_varint, WireType};
use prost::Message;

use super::fields::Field;
use super::messages::TensorProto;
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::shape::TensorShape;
use crate::tensor::Tensor;

/// The dtypes whose values TensorFlow's Python encoder writes as `tensor_content` (its
/// `_TENSOR_CONTENT_TYPES`): not uint16, bool, complex, string, int4/uint4/int2/uint2 nor the
/// fnuz float8 variants, which take their typed field.
pub fn uses_tensor_content(dtype: DataType) -> bool {
    use DataType as D;
    matches!(
        dtype,
        D::Half
            | D::BFloat16
            | D::Float
            | D::Double
            | D::Int8
            | D::Int16
            | D::Int32
            | D::Int64
            | D::UInt8
            | D::UInt32
            | D::UInt64
            | D::QInt8
            | D::QUInt8
            | D::QInt16
            | D::QUInt16
            | D::QInt32
            | D::Float8E5M2
            | D::Float8E4M3FN
    )
}

/// Protobuf messages are limited to 2 GiB; TensorFlow refuses larger `tensor_content`.
const MAX_CONTENT_BYTES: usize = (1 << 31) - 1;

/// `tf.make_tensor_proto(values, shape=shape)`: `values` (any layout, any device) as a
/// `TensorProto` of `shape` (the values' own shape when `None`), by TensorFlow's Python
/// rule: `tensor_content` when the number of values equals the element count, the count is
/// over 1 and the dtype [uses tensor content](uses_tensor_content); otherwise the typed
/// field, where fewer values than elements mean "repeat the last value".
///
/// ```
/// # use polytensor_core::proto::make_tensor_proto;
/// # use polytensor_core::{Tensor, TensorShape};
/// # let device = polytensor_cpu::CpuDevice::shared();
/// let one = Tensor::from_slice(&[1.5f32], [1], &device)?;
/// let proto = make_tensor_proto(&one, Some(&TensorShape::new(&[2, 2])?))?;
/// assert_eq!(proto.float_val, [1.5]); // a splat: one value for four elements
/// # Ok::<(), polytensor_core::Error>(())
/// ```
pub fn make_tensor_proto(values: &Tensor, shape: Option<&TensorShape>) -> Result<TensorProto> {
    let shape = shape.unwrap_or(values.shape());
    if values.dtype() == DataType::String {
        check_count(values.num_elements(), shape)?;
        let mut proto = header(DataType::String, shape)?;
        proto.string_val = values.to_strings()?;
        return Ok(proto);
    }
    if !values.dtype().is_pod() {
        return Err(Error::invalid(format!(
            "{} tensors have no TensorProto values",
            values.dtype()
        )));
    }
    make_tensor_proto_from_bytes(values.dtype(), &values.to_bytes()?, shape)
}

/// [`make_tensor_proto`] of host elements, with no tensor: `bytes` holds elements of the
/// plain-old-data `dtype` (little-endian, row-major), at most as many as `shape` has.
///
/// ```
/// # use polytensor_core::proto::make_tensor_proto_from_bytes;
/// # use polytensor_core::{DataType, TensorShape};
/// let proto = make_tensor_proto_from_bytes(DataType::Float, &3.0f32.to_le_bytes(), &TensorShape::scalar())?;
/// assert_eq!(proto.float_val, [3.0]);
/// # Ok::<(), polytensor_core::Error>(())
/// ```
pub fn make_tensor_proto_from_bytes(
    dtype: DataType,
    bytes: &[u8],
    shape: &TensorShape,
) -> Result<TensorProto> {
    let size = dtype.size();
    if !dtype.is_pod() || size == 0 || !bytes.len().is_multiple_of(size) {
        return Err(Error::invalid(format!(
            "{} bytes are not whole {dtype} elements",
            bytes.len()
        )));
    }
    let count = bytes.len() / size;
    check_count(count, shape)?;
    let mut proto = header(dtype, shape)?;
    if takes_content(dtype, count, shape.num_elements()) {
        proto.tensor_content = content(Bytes::copy_from_slice(bytes))?;
    } else {
        Field::of(dtype)?.write(&mut proto, bytes, size);
    }
    Ok(proto)
}

/// At most as many values as `shape` has elements (fewer repeat the last one).
fn check_count(count: usize, shape: &TensorShape) -> Result<()> {
    let elements = shape.num_elements();
    if count > elements {
        return Err(Error::shape(
            "make_tensor_proto",
            format!("{count} values given for shape {shape}, which holds at most {elements}"),
        ));
    }
    Ok(())
}

/// TensorFlow's Python rule: `tensor_content` for `count` values of a shape with `elements`
/// elements when the counts agree, are over 1, and the dtype uses tensor content.
fn takes_content(dtype: DataType, count: usize, elements: usize) -> bool {
    count == elements && count > 1 && uses_tensor_content(dtype)
}

/// A proto with `dtype` and `shape` and no values.
fn header(dtype: DataType, shape: &TensorShape) -> Result<TensorProto> {
    Field::of(dtype)?;
    Ok(TensorProto {
        dtype: dtype as i32,
        tensor_shape: Some(shape.to_proto()),
        ..TensorProto::default()
    })
}

/// `bytes` as `tensor_content`, which protobuf's 2 GiB message limit bounds.
fn content(bytes: Bytes) -> Result<Bytes> {
    if bytes.len() > MAX_CONTENT_BYTES {
        return Err(Error::invalid(format!(
            "tensor_content of {} bytes is over protobuf's 2 GiB message limit",
            bytes.len()
        )));
    }
    Ok(bytes)
}

fn content_proto(values: &Tensor, shape: &TensorShape) -> Result<TensorProto> {
    if values.dtype() == DataType::String {
        let mut proto = header(values.dtype(), shape)?;
        let strings = values.to_strings()?;
        proto.tensor_content = content(Bytes::from(super::strings::encode_string_list(&strings)))?;
        return Ok(proto);
    }
    if !values.dtype().is_pod() {
        return Err(Error::invalid(format!(
            "{} tensors have no tensor_content form",
            values.dtype()
        )));
    }
    let mut proto = header(values.dtype(), shape)?;
    proto.tensor_content = content(Bytes::from(values.to_bytes()?))?;
    Ok(proto)
}

fn field_proto(values: &Tensor, shape: &TensorShape) -> Result<TensorProto> {
    let dtype = values.dtype();
    let mut proto = header(dtype, shape)?;
    let field = Field::of(dtype)?;
    if field == Field::String {
        proto.string_val = values.to_strings()?;
    } else {
        field.write(&mut proto, &values.to_bytes()?, dtype.size());
    }
    Ok(proto)
}

impl Tensor {
    /// This tensor as TensorFlow's Python encoder writes it ([`make_tensor_proto`] with the
    /// tensor's own shape).
    pub fn to_proto(&self) -> Result<TensorProto> {
        make_tensor_proto(self, None)
    }

    /// Every value in the dtype's typed field (TensorFlow's `Tensor::AsProtoField`).
    pub fn as_proto_field(&self) -> Result<TensorProto> {
        field_proto(self, self.shape())
    }

    /// The values as raw `tensor_content` (TensorFlow's `Tensor::AsProtoTensorContent`;
    /// strings as its `EncodeStringList`: every length as a varint, then the bytes).
    pub fn as_proto_tensor_content(&self) -> Result<TensorProto> {
        content_proto(self, self.shape())
    }

    /// The serialized bytes of [`Tensor::to_proto`]. A `tensor_content` tensor in host
    /// memory is copied once, straight from its buffer into the output.
    pub fn encode_proto(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.encode_proto_into(&mut out)?;
        Ok(out)
    }

    /// [`Tensor::encode_proto`], appending to `out`: reusing one buffer across calls saves
    /// the page faults of fresh memory, which cost more than the copy itself.
    pub fn encode_proto_into(&self, out: &mut Vec<u8>) -> Result<()> {
        let n = self.num_elements();
        if !takes_content(self.dtype(), n, n) {
            return self
                .to_proto()?
                .encode(out)
                .map_err(|e| Error::invalid(format!("encoding the TensorProto: {e}")));
        }
        let tensor = self.contiguous()?;
        let header = header(self.dtype(), self.shape())?;
        let len = tensor.num_elements() * self.dtype().size();
        if len > MAX_CONTENT_BYTES {
            return Err(Error::invalid(format!(
                "tensor_content of {len} bytes is over protobuf's 2 GiB message limit"
            )));
        }
        // dtype and tensor_shape (fields 1 and 2) precede tensor_content (field 4), and no
        // other field is set: the bytes are those of the encoded message.
        out.reserve(header.encoded_len() + 16 + len);
        header
            .encode(out)
            .map_err(|e| Error::invalid(format!("encoding the TensorProto header: {e}")))?;
        encode_key(4, WireType::LengthDelimited, out);
        encode_varint(len as u64, out);
        let start = tensor.layout().offset() * self.dtype().size();
        match tensor.view().host_bytes() {
            Some(bytes) => append_parallel(out, &bytes[start..start + len]),
            None => out.extend_from_slice(&tensor.to_bytes()?),
        }
        Ok(())
    }
}

/// Below this, one thread copies.
const PARALLEL_COPY_BYTES: usize = 4 << 20;

/// `out.extend_from_slice(src)`, with large copies split across rayon's threads: one core
/// cannot saturate memory bandwidth (a single-threaded memcpy reaches about half of it).
fn append_parallel(out: &mut Vec<u8>, src: &[u8]) {
    use rayon::prelude::*;
    if src.len() < PARALLEL_COPY_BYTES {
        out.extend_from_slice(src);
        return;
    }
    out.reserve(src.len());
    let spare = &mut out.spare_capacity_mut()[..src.len()];
    spare
        .par_chunks_mut(1 << 20)
        .zip(src.par_chunks(1 << 20))
        .for_each(|(dst, src)| {
            // SAFETY: `dst` and `src` have the same length (equal chunking of equal
            // lengths), `dst` is spare capacity of `out` and cannot overlap `src`, which
            // is borrowed immutably while `out` is borrowed mutably.
            unsafe {
                std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr().cast(), src.len())
            };
        });
    // SAFETY: the first `src.len()` spare bytes were all initialised above.
    unsafe { out.set_len(out.len() + src.len()) };
}
