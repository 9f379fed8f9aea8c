//! `TensorProto` to tensors, as TensorFlow's C++ `Tensor::FromProto` reads them, with a
//! clear `Err` wherever TensorFlow would truncate silently.

use std::sync::Arc;

use bytes::Bytes;
use prost::Message;

use super::fields::Field;
use super::messages::TensorProto;
use crate::device::Device;
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::shape::TensorShape;
use crate::tensor::Tensor;

/// Limits for decoding untrusted protos.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeOptions {
    /// The most bytes a decoded tensor may take. A proto of a few bytes can describe a huge
    /// tensor (one repeated value, or none, for a shape of 2^40 elements); decoding refuses
    /// it with an `Err` before allocating anything.
    pub max_bytes: usize,
}

/// The default cap on a decoded tensor: 4 GiB.
pub const DEFAULT_MAX_DECODED_BYTES: usize = 1 << 32;

impl Default for DecodeOptions {
    fn default() -> Self {
        Self {
            max_bytes: DEFAULT_MAX_DECODED_BYTES,
        }
    }
}

impl DecodeOptions {
    fn check(&self, shape: &TensorShape, dtype: DataType, bytes: Option<usize>) -> Result<()> {
        match bytes.filter(|&b| b <= self.max_bytes) {
            Some(_) => Ok(()),
            None => Err(Error::InvalidProto(format!(
                "a {dtype} tensor of shape {shape} needs more than the {} bytes allowed \
                 (DecodeOptions::max_bytes)",
                self.max_bytes
            ))),
        }
    }
}

impl Tensor {
    /// The tensor a serialized `TensorProto` describes, on `device`. The input's
    /// `tensor_content` is shared without a copy when `device` is the host and the bytes are
    /// aligned for the dtype, and copied once otherwise.
    pub fn decode_proto(bytes: impl Into<Bytes>, device: &Arc<dyn Device>) -> Result<Tensor> {
        Self::decode_proto_with(bytes, device, &DecodeOptions::default())
    }

    /// [`Tensor::decode_proto`] with explicit limits.
    pub fn decode_proto_with(
        bytes: impl Into<Bytes>,
        device: &Arc<dyn Device>,
        options: &DecodeOptions,
    ) -> Result<Tensor> {
        let proto = TensorProto::decode(bytes.into())
            .map_err(|e| Error::InvalidProto(format!("malformed TensorProto bytes: {e}")))?;
        Self::from_proto_with(&proto, device, options)
    }

    /// The tensor `proto` describes, on `device`, as TensorFlow's C++ decoder reads it:
    /// non-empty `tensor_content` wins over the typed fields; otherwise the dtype's typed
    /// field, where fewer values than elements repeat the last value and no values mean
    /// zeros (empty strings). Values in other typed fields are ignored.
    ///
    /// Where both of TensorFlow's decoders (C++ `FromProto` and Python `make_ndarray`)
    /// accept a proto, it is read as C++ reads it: an odd number of complex parts drops the
    /// last part, bool bytes other than 0 in `tensor_content` are true, sub-byte integers in
    /// `tensor_content` keep their low bits, and `unknown_rank` with dims means those dims.
    ///
    /// Errors, where at least one of TensorFlow's decoders rejects (C++ often truncates or
    /// wraps silently where Python raises): an unknown or reference dtype, `resource` and
    /// `variant`, a bad shape (negative or overflowing dims, rank over 254),
    /// `tensor_content` of the wrong length or for strings, more values than elements,
    /// integers outside the dtype's range, and tensors over [`DecodeOptions::max_bytes`].
    pub fn from_proto(proto: &TensorProto, device: &Arc<dyn Device>) -> Result<Tensor> {
        Self::from_proto_with(proto, device, &DecodeOptions::default())
    }

    /// [`Tensor::from_proto`] with explicit limits.
    pub fn from_proto_with(
        proto: &TensorProto,
        device: &Arc<dyn Device>,
        options: &DecodeOptions,
    ) -> Result<Tensor> {
        let (dtype, field, shape) = proto.header()?;
        if !proto.tensor_content.is_empty() && field == Field::String {
            let elements = shape.num_elements();
            options.check(
                &shape,
                dtype,
                proto
                    .tensor_content
                    .len()
                    .checked_add(elements.saturating_mul(std::mem::size_of::<Vec<u8>>())),
            )?;
            let strings = super::strings::decode_string_list(&proto.tensor_content, elements)?;
            return Tensor::from_strings(strings, shape, device);
        }
        if !proto.tensor_content.is_empty() {
            let content = content_bytes(proto.tensor_content.clone(), &shape, dtype)?;
            return Tensor::from_shared_bytes(content, shape, dtype, device);
        }
        if field != Field::String {
            let bytes = typed_bytes(proto, field, &shape, dtype, options)?;
            return Tensor::from_bytes(&bytes, shape, dtype, device);
        }
        let elements = shape.num_elements();
        check_count(proto, field, &shape)?;
        let last = proto.string_val.last().map_or(0, Vec::len);
        let per_string = std::mem::size_of::<Vec<u8>>() + last;
        options.check(&shape, dtype, elements.checked_mul(per_string))?;
        let mut strings = proto.string_val.clone();
        strings.resize(
            elements,
            proto.string_val.last().cloned().unwrap_or_default(),
        );
        Tensor::from_strings(strings, shape, device)
    }
}

/// A proto's elements decoded on the host, with no device: what [`Tensor::from_proto`]
/// places on one.
#[derive(Debug, Clone, PartialEq)]
pub struct ProtoElements {
    /// The tensor's shape.
    pub shape: TensorShape,
    /// The element type (never `DT_STRING`).
    pub dtype: DataType,
    /// The elements, row-major and little-endian, `dtype.size()` bytes each, in their
    /// canonical form (a bool is 0 or 1, a sub-byte integer sign- or zero-extended).
    pub bytes: Bytes,
}

/// `content` checked against the shape and dtype, in canonical form.
fn content_bytes(content: Bytes, shape: &TensorShape, dtype: DataType) -> Result<Bytes> {
    if !dtype.is_pod() {
        return Err(Error::InvalidProto(format!(
            "{dtype} values cannot come as tensor_content; use {}",
            Field::of(dtype).map_or("a typed field", Field::name)
        )));
    }
    let expected = shape.num_elements().checked_mul(dtype.size());
    if expected != Some(content.len()) {
        return Err(Error::InvalidProto(format!(
            "tensor_content has {} bytes, but shape {shape} of {dtype} needs {}",
            content.len(),
            expected.map_or("more than usize::MAX".to_string(), |e| e.to_string())
        )));
    }
    // Only bool and the sub-byte integers have invalid bytes: other dtypes return at once.
    if dtype.first_invalid_byte(&content).is_none() {
        return Ok(content);
    }
    // Both of TensorFlow's decoders take any byte: C++ reads a non-zero bool byte as true and
    // keeps the low bits of a sub-byte integer (ml_dtypes). Read them so, into the canonical
    // bytes every polytensor tensor holds.
    Ok(content.iter().map(|&b| dtype.canonical_byte(b)).collect())
}

/// An `Err` if the typed field holds more values than the shape has elements.
fn check_count(proto: &TensorProto, field: Field, shape: &TensorShape) -> Result<()> {
    let (count, elements) = (field.count(proto)?, shape.num_elements());
    if count > elements {
        return Err(Error::InvalidProto(format!(
            "{} holds {count} values for shape {shape}, which has {elements} elements",
            field.name()
        )));
    }
    Ok(())
}

/// The elements of a fixed-size dtype's typed field, expanded to the shape as TensorFlow
/// does: no values are zeros, fewer values than elements repeat the last one.
fn typed_bytes(
    proto: &TensorProto,
    field: Field,
    shape: &TensorShape,
    dtype: DataType,
    options: &DecodeOptions,
) -> Result<Vec<u8>> {
    check_count(proto, field, shape)?;
    let (elements, size) = (shape.num_elements(), dtype.size());
    options.check(shape, dtype, elements.checked_mul(size))?;
    let given = field.read(proto, size)?;
    let mut bytes = Vec::with_capacity(elements * size);
    bytes.extend_from_slice(&given);
    match given.len().checked_sub(size) {
        // No values: zeros.
        None => bytes.resize(elements * size, 0),
        // A splat: repeat the last value, doubling the repeated run (both lengths below are
        // whole elements, so the run stays a repeat of that value).
        Some(last) => {
            while bytes.len() < elements * size {
                let n = (bytes.len() - last).min(elements * size - bytes.len());
                bytes.extend_from_within(last..last + n);
            }
        }
    }
    Ok(bytes)
}

impl TensorProto {
    /// The dtype, its typed field and the shape (a scalar when absent).
    fn header(&self) -> Result<(DataType, Field, TensorShape)> {
        let dtype = DataType::from_i32(self.dtype)
            .map_err(|e| Error::InvalidProto(format!("TensorProto dtype: {e}")))?;
        let field = Field::of(dtype)?;
        let shape = match &self.tensor_shape {
            Some(shape) => TensorShape::from_proto(shape)?,
            None => TensorShape::scalar(),
        };
        Ok((dtype, field, shape))
    }

    /// The elements this proto describes, decoded on the host with the checks of
    /// [`Tensor::from_proto_with`] and no device: for reading a small constant (a shape, an
    /// axis) without placing it anywhere. `tensor_content` is shared, not copied, when it
    /// is already canonical. Strings have no fixed-size elements: an `Err`.
    pub fn decode_elements(&self, options: &DecodeOptions) -> Result<ProtoElements> {
        let (dtype, field, shape) = self.header()?;
        let bytes = if !self.tensor_content.is_empty() {
            content_bytes(self.tensor_content.clone(), &shape, dtype)?
        } else if field == Field::String {
            return Err(Error::InvalidProto(
                "string values have no fixed-size elements; read them with \
                 Tensor::from_proto"
                    .into(),
            ));
        } else {
            typed_bytes(self, field, &shape, dtype, options)?.into()
        };
        Ok(ProtoElements {
            shape,
            dtype,
            bytes,
        })
    }

    /// Where the values are: `"tensor_content"`, the dtype's typed field (`"float_val"`,
    /// `"half_val"`, ...), or `"none"` (all zeros). An `Err` for an unknown dtype.
    pub fn values_field(&self) -> Result<&'static str> {
        if !self.tensor_content.is_empty() {
            return Ok("tensor_content");
        }
        let dtype = DataType::from_i32(self.dtype)?;
        let field = Field::of(dtype)?;
        Ok(if field.count(self)? > 0 {
            field.name()
        } else {
            "none"
        })
    }
}
