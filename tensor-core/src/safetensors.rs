//! Tensors to and from `.safetensors` files (Hugging Face's format, which PyTorch, JAX,
//! TensorFlow and candle read and write), through the `safetensors` crate. Feature
//! `safetensors`.
//!
//! ```
//! # use polytensor_core::{safetensors, DataType, Tensor};
//! # let cpu = polytensor_cpu::CpuDevice::shared();
//! let w = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], [2, 2], &cpu)?;
//! let b = Tensor::from_slice(&[true, false], [2], &cpu)?;
//! let bytes = safetensors::to_bytes(&[("weight", &w), ("mask", &b)])?;
//! let back = safetensors::from_bytes(&bytes, &cpu)?;
//! assert_eq!(back[1].0, "weight");
//! assert_eq!(back[1].1.to_vec::<f32>()?, [1.0, 2.0, 3.0, 4.0]);
//! # Ok::<(), polytensor_core::Error>(())
//! ```
//!
//! Every dtype the format names is read and written: bool, the 8- to 64-bit integers,
//! f16, bf16, f32, f64, complex64 and the float8 types (`float8_e4m3fn` is the format's
//! `F8_E4M3`). Tensors of any layout and device are written (a view is written as its
//! elements, row-major); files are read onto any device. Malformed files, dtypes polytensor
//! lacks (F4, F6, F8_E8M0) and invalid bool bytes are an `Err`, never a panic.

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

use ::safetensors::tensor::{Dtype, SafeTensors, View};

use crate::device::Device;
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::shape::TensorShape;
use crate::tensor::Tensor;

/// The format's name for `dtype`, or `None` where it has none.
fn format_dtype(dtype: DataType) -> Option<Dtype> {
    use DataType as D;
    Some(match dtype {
        D::Bool => Dtype::BOOL,
        D::UInt8 => Dtype::U8,
        D::Int8 => Dtype::I8,
        D::UInt16 => Dtype::U16,
        D::Int16 => Dtype::I16,
        D::UInt32 => Dtype::U32,
        D::Int32 => Dtype::I32,
        D::UInt64 => Dtype::U64,
        D::Int64 => Dtype::I64,
        D::Half => Dtype::F16,
        D::BFloat16 => Dtype::BF16,
        D::Float => Dtype::F32,
        D::Double => Dtype::F64,
        D::Complex64 => Dtype::C64,
        D::Float8E5M2 => Dtype::F8_E5M2,
        D::Float8E4M3FN => Dtype::F8_E4M3,
        D::Float8E4M3FNUZ => Dtype::F8_E4M3FNUZ,
        D::Float8E5M2FNUZ => Dtype::F8_E5M2FNUZ,
        _ => return None,
    })
}

/// polytensor's dtype for the format's `dtype`.
fn polytensor_dtype(dtype: Dtype) -> Result<DataType> {
    DataType::ALL
        .iter()
        .copied()
        .find(|&d| format_dtype(d) == Some(dtype))
        .ok_or_else(|| Error::invalid(format!("safetensors dtype {dtype} has no polytensor dtype")))
}

/// One tensor as the `safetensors` crate writes it: its elements, row-major, on the host.
struct Entry {
    dtype: Dtype,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

impl View for &Entry {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.bytes)
    }
    fn data_len(&self) -> usize {
        self.bytes.len()
    }
}

fn format_error(error: ::safetensors::SafeTensorError) -> Error {
    Error::invalid(format!("safetensors: {error}"))
}

/// The entries of `tensors`, checked: names unique, dtypes the format has.
fn entries<'n>(tensors: &[(&'n str, &Tensor)]) -> Result<Vec<(&'n str, Entry)>> {
    let mut seen = std::collections::BTreeSet::new();
    tensors
        .iter()
        .map(|&(name, tensor)| {
            if !seen.insert(name) {
                return Err(Error::invalid(format!(
                    "safetensors: the name {name:?} is given twice"
                )));
            }
            let dtype = format_dtype(tensor.dtype()).ok_or_else(|| {
                Error::invalid(format!(
                    "safetensors has no dtype for {} (tensor {name:?})",
                    tensor.dtype()
                ))
            })?;
            let entry = Entry {
                dtype,
                shape: tensor.dims(),
                bytes: tensor.to_bytes()?,
            };
            Ok((name, entry))
        })
        .collect()
}

/// The bytes of a `.safetensors` file holding `tensors` under their names (any order; the
/// file lists them sorted, as the format's writers do).
pub fn to_bytes(tensors: &[(&str, &Tensor)]) -> Result<Vec<u8>> {
    let entries = entries(tensors)?;
    ::safetensors::serialize(entries.iter().map(|(n, e)| (*n, e)), None).map_err(format_error)
}

/// Write `tensors` to a `.safetensors` file at `path`.
pub fn save(tensors: &[(&str, &Tensor)], path: impl AsRef<Path>) -> Result<()> {
    let entries = entries(tensors)?;
    ::safetensors::serialize_to_file(entries.iter().map(|(n, e)| (*n, e)), None, path.as_ref())
        .map_err(format_error)
}

/// Every tensor of a `.safetensors` file's bytes, with its name, on `device`, sorted by
/// name.
pub fn from_bytes(bytes: &[u8], device: &Arc<dyn Device>) -> Result<Vec<(String, Tensor)>> {
    let file = SafeTensors::deserialize(bytes).map_err(format_error)?;
    let mut tensors = file
        .tensors()
        .into_iter()
        .map(|(name, view)| {
            let dtype = polytensor_dtype(view.dtype())?;
            let shape = TensorShape::new(view.shape())?;
            let tensor = Tensor::from_bytes(view.data(), shape, dtype, device)
                .map_err(|e| Error::invalid(format!("safetensors tensor {name:?}: {e}")))?;
            Ok((name, tensor))
        })
        .collect::<Result<Vec<_>>>()?;
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(tensors)
}

/// Every tensor of the `.safetensors` file at `path`, with its name, on `device`, sorted
/// by name.
pub fn load(path: impl AsRef<Path>, device: &Arc<dyn Device>) -> Result<Vec<(String, Tensor)>> {
    let path = path.as_ref();
    let bytes = std::fs::read(path)
        .map_err(|e| Error::invalid(format!("cannot read {}: {e}", path.display())))?;
    from_bytes(&bytes, device)
}
