//! [`TensorData`]: a tensor's dtype, shape and elements on the host, with `serde`'s
//! `Serialize` and `Deserialize` (feature `serde`); `Tensor` serializes as one.
//!
//! ```
//! # use polytensor_core::{data::TensorData, Tensor};
//! # let cpu = polytensor_cpu::CpuDevice::shared();
//! let t = Tensor::from_slice(&[1.5f32, -2.0], [2], &cpu)?;
//! let json = serde_json::to_string(&t).unwrap();
//! assert_eq!(json, r#"{"dtype":"float32","shape":[2],"bytes":[0,0,192,63,0,0,0,192]}"#);
//! // A tensor needs a device, which serde cannot pass: read the data, then place it.
//! let data: TensorData = serde_json::from_str(&json).unwrap();
//! assert_eq!(data.to_tensor(&cpu)?.to_vec::<f32>()?, [1.5, -2.0]);
//! # Ok::<(), polytensor_core::Error>(())
//! ```
//!
//! Elements are little-endian bytes, row-major (any view is written as its elements);
//! string tensors carry their strings instead. Reading checks the data as every way into a
//! tensor does: the byte count against the shape, bool and sub-byte values.

use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::device::Device;
use crate::dtype::DataType;
use crate::error::Result;
use crate::shape::TensorShape;
use crate::tensor::Tensor;

/// A tensor's dtype, shape and elements on the host.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorData {
    /// The dtype, by TensorFlow's name (`float32`).
    pub dtype: DataType,
    /// The dims.
    pub shape: Vec<usize>,
    /// The elements as little-endian bytes, row-major (empty for strings).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bytes: Vec<u8>,
    /// The elements of a string tensor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strings: Option<Vec<Vec<u8>>>,
}

impl TensorData {
    /// The tensor this describes, on `device`; an `Err` where the bytes do not fit the
    /// shape and dtype or hold invalid values.
    pub fn to_tensor(&self, device: &Arc<dyn Device>) -> Result<Tensor> {
        let shape = TensorShape::new(&self.shape)?;
        match &self.strings {
            Some(strings) if self.dtype == DataType::String => {
                Tensor::from_strings(strings.clone(), shape, device)
            }
            _ => Tensor::from_bytes(&self.bytes, shape, self.dtype, device),
        }
    }
}

impl Tensor {
    /// This tensor's dtype, shape and elements, copied to the host.
    pub fn to_data(&self) -> Result<TensorData> {
        let strings = (self.dtype() == DataType::String)
            .then(|| self.to_strings())
            .transpose()?;
        Ok(TensorData {
            dtype: self.dtype(),
            shape: self.dims(),
            bytes: if strings.is_some() {
                Vec::new()
            } else {
                self.to_bytes()?
            },
            strings,
        })
    }
}

impl Serialize for Tensor {
    /// As [`TensorData`]; a device error (a failed copy to the host) is a serializer error.
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        self.to_data()
            .map_err(serde::ser::Error::custom)?
            .serialize(serializer)
    }
}

impl Serialize for DataType {
    /// TensorFlow's name (`float32`, `bfloat16`, ...).
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for DataType {
    /// From TensorFlow's name; an unknown name is an error.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        DataType::from_str(&name).map_err(serde::de::Error::custom)
    }
}
