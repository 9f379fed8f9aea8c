//! Tensors to and from NumPy's `.npy` and `.npz` files, through the `npyz` crate. Feature
//! `npy`.
//!
//! ```
//! # use polytensor_core::{npy, Tensor};
//! # let cpu = polytensor_cpu::CpuDevice::shared();
//! let t = Tensor::from_slice(&[1i16, -2, 3, -4, 5, -6], [2, 3], &cpu)?;
//! let bytes = npy::to_bytes(&t)?; // what numpy.save writes
//! assert_eq!(npy::from_bytes(&bytes, &cpu)?.to_vec::<i16>()?, [1, -2, 3, -4, 5, -6]);
//! # Ok::<(), polytensor_core::Error>(())
//! ```
//!
//! The dtypes NumPy and polytensor share: bool, the 8- to 64-bit integers, float16,
//! float32, float64, complex64 and complex128, in either byte order and in C or Fortran
//! order (a Fortran-order array is read as a transposed view, no copy). Tensors of any
//! layout and device are written row-major. bfloat16 and the other dtypes NumPy lacks,
//! object arrays, structured dtypes, malformed files and out-of-range bool bytes are an
//! `Err`, never a panic.

use std::io::{self, Cursor, Read, Seek, Write};
use std::path::Path;
use std::sync::Arc;

use npyz::npz::{NpzArchive, NpzWriter};
use npyz::{DType, NpyFile, Order, TypeChar, WriteOptions, WriterBuilder};

use crate::device::Device;
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Run `$body` with `$t` the Rust element type NumPy and polytensor share for `$dtype`;
/// `$other` for the rest.
macro_rules! with_npy_type {
    ($dtype:expr, $t:ident => $body:expr, _ => $other:expr) => {
        match $dtype {
            DataType::Bool => {
                type $t = bool;
                $body
            }
            DataType::Int8 => {
                type $t = i8;
                $body
            }
            DataType::Int16 => {
                type $t = i16;
                $body
            }
            DataType::Int32 => {
                type $t = i32;
                $body
            }
            DataType::Int64 => {
                type $t = i64;
                $body
            }
            DataType::UInt8 => {
                type $t = u8;
                $body
            }
            DataType::UInt16 => {
                type $t = u16;
                $body
            }
            DataType::UInt32 => {
                type $t = u32;
                $body
            }
            DataType::UInt64 => {
                type $t = u64;
                $body
            }
            DataType::Half => {
                type $t = half::f16;
                $body
            }
            DataType::Float => {
                type $t = f32;
                $body
            }
            DataType::Double => {
                type $t = f64;
                $body
            }
            DataType::Complex64 => {
                type $t = num_complex::Complex<f32>;
                $body
            }
            DataType::Complex128 => {
                type $t = num_complex::Complex<f64>;
                $body
            }
            _ => $other,
        }
    };
}

fn io_error(what: &str, error: io::Error) -> Error {
    Error::invalid(format!("{what}: {error}"))
}

/// polytensor's dtype for a NumPy type string (`<f4`, `|b1`, `>i8`, ...).
fn dtype_of(dtype: &DType) -> Result<DataType> {
    let unsupported = || Error::invalid(format!("npy: no polytensor dtype for NumPy's {dtype:?}"));
    let DType::Plain(ts) = dtype else {
        return Err(unsupported());
    };
    Ok(match (ts.type_char(), ts.size_field()) {
        (TypeChar::Bool, 1) => DataType::Bool,
        (TypeChar::Int, 1) => DataType::Int8,
        (TypeChar::Int, 2) => DataType::Int16,
        (TypeChar::Int, 4) => DataType::Int32,
        (TypeChar::Int, 8) => DataType::Int64,
        (TypeChar::Uint, 1) => DataType::UInt8,
        (TypeChar::Uint, 2) => DataType::UInt16,
        (TypeChar::Uint, 4) => DataType::UInt32,
        (TypeChar::Uint, 8) => DataType::UInt64,
        (TypeChar::Float, 2) => DataType::Half,
        (TypeChar::Float, 4) => DataType::Float,
        (TypeChar::Float, 8) => DataType::Double,
        (TypeChar::Complex, 8) => DataType::Complex64,
        (TypeChar::Complex, 16) => DataType::Complex128,
        _ => return Err(unsupported()),
    })
}

/// The array of one `.npy` stream, on `device`.
fn read_array<R: Read>(file: NpyFile<R>, device: &Arc<dyn Device>) -> Result<Tensor> {
    let dtype = dtype_of(&file.dtype())?;
    let dims = file
        .shape()
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| Error::invalid(format!("npy: dim {d}"))))
        .collect::<Result<Vec<usize>>>()?;
    let fortran = file.order() == Order::Fortran;
    // A Fortran-order array is the row-major array of the reversed shape, transposed.
    let stored: Vec<usize> = if fortran {
        dims.iter().rev().copied().collect()
    } else {
        dims.clone()
    };
    let flat = with_npy_type!(dtype,
        T => Tensor::from_vec(file.into_vec::<T>().map_err(|e| io_error("npy data", e))?, device)?,
        _ => unreachable!("dtype_of gives only NumPy's dtypes"));
    let tensor = flat.reshape(stored)?;
    if fortran {
        let reversed: Vec<usize> = (0..dims.len()).rev().collect();
        tensor.permute(&reversed)
    } else {
        Ok(tensor)
    }
}

/// Write `tensor` as one `.npy` stream (C order) into `writer` (a file's bytes, or an entry
/// of an `.npz` archive).
fn write_array<W: Write>(tensor: &Tensor, writer: W) -> Result<()> {
    let shape: Vec<u64> = tensor.dims().iter().map(|&d| d as u64).collect();
    let unsupported = || {
        Error::invalid(format!(
            "npy: NumPy has no dtype for {} (cast it first)",
            tensor.dtype()
        ))
    };
    with_npy_type!(tensor.dtype(),
        T => {
            let values = tensor.to_vec::<T>()?;
            let mut out = WriteOptions::<T>::new()
                .default_dtype()
                .shape(&shape)
                .writer(writer)
                .begin_nd()
                .map_err(|e| io_error("npy header", e))?;
            out.extend(values).map_err(|e| io_error("npy data", e))?;
            out.finish().map_err(|e| io_error("npy data", e))
        },
        _ => Err(unsupported()))
}

/// The bytes of a `.npy` file holding `tensor` (what `numpy.save` writes).
pub fn to_bytes(tensor: &Tensor) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    write_array(tensor, &mut bytes)?;
    Ok(bytes)
}

/// The array of a `.npy` file's bytes, on `device`.
pub fn from_bytes(bytes: &[u8], device: &Arc<dyn Device>) -> Result<Tensor> {
    let file = NpyFile::new(bytes).map_err(|e| io_error("npy header", e))?;
    read_array(file, device)
}

/// Write `tensor` to a `.npy` file at `path`.
pub fn save(tensor: &Tensor, path: impl AsRef<Path>) -> Result<()> {
    let bytes = to_bytes(tensor)?;
    std::fs::write(path.as_ref(), bytes)
        .map_err(|e| io_error(&format!("cannot write {}", path.as_ref().display()), e))
}

/// The array of the `.npy` file at `path`, on `device`.
pub fn load(path: impl AsRef<Path>, device: &Arc<dyn Device>) -> Result<Tensor> {
    from_bytes(&read_file(path.as_ref())?, device)
}

fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| io_error(&format!("cannot read {}", path.display()), e))
}

/// Write `tensors` as an `.npz` archive (`numpy.savez`: one `NAME.npy` entry each,
/// uncompressed) into `writer`.
fn write_npz<W: Write + Seek>(tensors: &[(&str, &Tensor)], writer: W) -> Result<W> {
    let mut archive = NpzWriter::new(writer);
    for &(name, tensor) in tensors {
        let entry = format!("{name}.npy");
        let zip = archive.zip_writer();
        let stored = npyz::zip::write::FileOptions::default()
            .compression_method(npyz::zip::CompressionMethod::Stored);
        zip.start_file(entry, stored)
            .map_err(|e| Error::invalid(format!("npz entry {name:?}: {e}")))?;
        write_array(tensor, &mut *zip)?;
    }
    archive
        .zip_writer()
        .finish()
        .map_err(|e| Error::invalid(format!("npz: {e}")))
}

/// The bytes of an `.npz` archive holding `tensors` under their names (`numpy.savez`).
pub fn to_npz_bytes(tensors: &[(&str, &Tensor)]) -> Result<Vec<u8>> {
    Ok(write_npz(tensors, Cursor::new(Vec::new()))?.into_inner())
}

/// Write `tensors` to an `.npz` archive at `path`.
pub fn save_npz(tensors: &[(&str, &Tensor)], path: impl AsRef<Path>) -> Result<()> {
    let bytes = to_npz_bytes(tensors)?;
    std::fs::write(path.as_ref(), bytes)
        .map_err(|e| io_error(&format!("cannot write {}", path.as_ref().display()), e))
}

/// Every array of an `.npz` archive's bytes (`numpy.savez` or `savez_compressed`), with
/// its name, on `device`, sorted by name.
pub fn from_npz_bytes(bytes: &[u8], device: &Arc<dyn Device>) -> Result<Vec<(String, Tensor)>> {
    let mut archive = NpzArchive::new(Cursor::new(bytes)).map_err(|e| io_error("npz", e))?;
    let mut names: Vec<String> = archive.array_names().map(str::to_string).collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let file = archive
                .by_name(&name)
                .map_err(|e| io_error(&format!("npz entry {name:?}"), e))?
                .ok_or_else(|| Error::invalid(format!("npz entry {name:?} is missing")))?;
            let tensor = read_array(file, device)
                .map_err(|e| Error::invalid(format!("npz entry {name:?}: {e}")))?;
            Ok((name, tensor))
        })
        .collect()
}

/// Every array of the `.npz` archive at `path`, with its name, on `device`, sorted by name.
pub fn load_npz(path: impl AsRef<Path>, device: &Arc<dyn Device>) -> Result<Vec<(String, Tensor)>> {
    from_npz_bytes(&read_file(path.as_ref())?, device)
}
