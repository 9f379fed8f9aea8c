//! `SerializeSparse` and `DeserializeSparse`: a sparse tensor as the serialized
//! `TensorProto`s of its three components, written as TensorFlow's kernel writes them
//! (`Tensor::AsProtoTensorContent`: raw `tensor_content`, strings as its encoded string
//! list), so the bytes equal TensorFlow's.

use std::sync::Arc;

use super::SparseTensor;
use crate::device::Device;
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::proto::Message;
use crate::tensor::Tensor;

impl SparseTensor {
    /// `SerializeSparse`: the serialized `TensorProto`s of the indices, the values and the
    /// dense shape, in that order, byte for byte as TensorFlow writes them.
    pub fn serialize(&self) -> Result<[Vec<u8>; 3]> {
        let encode =
            |t: &Tensor| -> Result<Vec<u8>> { Ok(t.as_proto_tensor_content()?.encode_to_vec()) };
        Ok([
            encode(&self.indices)?,
            encode(&self.values)?,
            encode(&self.dense_shape)?,
        ])
    }

    /// `DeserializeSparse` of one serialized sparse tensor (its three `TensorProto`s, as
    /// [`serialize`](Self::serialize) writes them), placed on `device`; the values must be
    /// `dtype` (`Requested SparseTensor of type int32 but SparseTensor[0].values.dtype() ==
    /// float`, as TensorFlow says), and the components must make a sparse tensor.
    pub fn deserialize(
        serialized: &[Vec<u8>],
        dtype: DataType,
        device: &Arc<dyn Device>,
    ) -> Result<SparseTensor> {
        let [indices, values, shape] = serialized else {
            return Err(Error::invalid(format!(
                "Serialized sparse should have 3 as last dimension but received shape [{}]",
                serialized.len()
            )));
        };
        let decode = |bytes: &Vec<u8>| Tensor::decode_proto(bytes.clone(), device);
        let values = decode(values)?;
        if values.dtype() != dtype {
            return Err(Error::invalid(format!(
                "Requested SparseTensor of type {} but SparseTensor[0].values.dtype() == {}",
                type_string(dtype),
                type_string(values.dtype())
            )));
        }
        SparseTensor::new(decode(indices)?, values, decode(shape)?)
    }
}

/// TensorFlow's C++ name of `dtype` (`DataTypeString`: `float`, `double`, `half` where
/// Python says `float32`, `float64`, `float16`), as its kernels' messages print it.
fn type_string(dtype: DataType) -> &'static str {
    match dtype {
        DataType::Float => "float",
        DataType::Double => "double",
        DataType::Half => "half",
        other => other.name(),
    }
}
