//! `polytensor.Tensor`: a polytensor tensor seen from Python, with its properties,
//! conversions to NumPy and Python values, device moves, indexing and the DLPack protocol.
//! The operators and eager ops are in `ops.rs`.

use std::sync::Arc;

use num_complex::Complex;
use polytensor::dlpack::{DLDevice, DLDeviceType, DlpackRequest};
use polytensor::{DataType, Device, Scalar, Tensor};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyComplex, PyList, PyTuple};

use crate::capsule;
use crate::device::{self, PyDevice};
use crate::errors::IntoPyResult;
use crate::index;

/// A tensor: a dtype, a shape and a reference-counted buffer on a device.
///
/// `Tensor(data, dtype=None, device=None)` copies `data` (a NumPy array, any object NumPy
/// reads, a DLPack producer such as a PyTorch or TensorFlow tensor, or nested Python
/// lists), as `tf.constant` does: Python floats become float32 and Python ints int32
/// (int64 where they do not fit), NumPy arrays keep their dtype. `from_dlpack` shares
/// memory instead.
#[pyclass(name = "Tensor", module = "polytensor", frozen)]
#[derive(Clone)]
pub struct PyTensor {
    /// The tensor.
    pub tensor: Tensor,
}

impl From<Tensor> for PyTensor {
    fn from(tensor: Tensor) -> Self {
        PyTensor { tensor }
    }
}

/// A dtype argument: a TensorFlow name (`"float32"`, `"bfloat16"`), as `polytensor.float32`.
pub fn parse_dtype(name: &str) -> PyResult<DataType> {
    name.parse::<DataType>()
        .map_err(|e| PyTypeError::new_err(e.to_string()))
}

/// A Python value for a scalar: `bool`, `int`, `float` or `complex`.
pub fn scalar_to_py(py: Python<'_>, value: Scalar) -> PyResult<Bound<'_, PyAny>> {
    Ok(match value {
        Scalar::Bool(b) => pyo3::types::PyBool::new(py, b).to_owned().into_any(),
        Scalar::I64(v) => v.into_pyobject(py)?.into_any(),
        Scalar::U64(v) => v.into_pyobject(py)?.into_any(),
        Scalar::F64(v) => v.into_pyobject(py)?.into_any(),
        Scalar::C64(c) => PyComplex::from_doubles(py, c.re, c.im).into_any(),
    })
}

/// A Python number as a scalar, or `None` for anything else.
pub fn py_to_scalar(value: &Bound<'_, PyAny>) -> PyResult<Option<Scalar>> {
    if let Ok(b) = value.cast::<pyo3::types::PyBool>() {
        return Ok(Some(Scalar::Bool(b.is_true())));
    }
    if value.is_instance_of::<pyo3::types::PyInt>() {
        if let Ok(v) = value.extract::<i64>() {
            return Ok(Some(Scalar::I64(v)));
        }
        return value
            .extract::<u64>()
            .map(|v| Some(Scalar::U64(v)))
            .map_err(|_| PyValueError::new_err(format!("{value} does not fit in 64 bits")));
    }
    if let Ok(f) = value.cast::<pyo3::types::PyFloat>() {
        return Ok(Some(Scalar::F64(f.value())));
    }
    if let Ok(c) = value.cast::<PyComplex>() {
        return Ok(Some(Scalar::C64(Complex::new(c.real(), c.imag()))));
    }
    Ok(None)
}

impl PyTensor {
    /// Copy `data` into a new tensor (see the class docs).
    pub fn from_data(
        data: &Bound<'_, PyAny>,
        dtype: Option<DataType>,
        device: &Arc<dyn Device>,
    ) -> PyResult<Tensor> {
        let py = data.py();
        let source = if let Ok(t) = data.cast::<PyTensor>() {
            t.get().tensor.clone()
        } else if data.hasattr("__dlpack__")? && !is_numpy_array(data)? {
            crate::from_dlpack_any(data)?
        } else {
            let converted = py
                .import("polytensor._convert")?
                .getattr("as_array")?
                .call1((data, dtype.map(DataType::name)))?;
            let (kind, payload, extra): (String, Bound<'_, PyAny>, Bound<'_, PyAny>) =
                converted.extract()?;
            if kind == "strings" {
                let values: Vec<Vec<u8>> = payload.extract()?;
                let shape: Vec<usize> = extra.extract()?;
                return Tensor::from_strings(values, shape, device).py();
            }
            let viewed = crate::from_dlpack_any(&payload)?;
            match extra.extract::<Option<String>>()? {
                Some(stored_as) => viewed.bitcast(parse_dtype(&stored_as)?).py()?,
                None => viewed,
            }
        };
        py.detach(|| match dtype {
            // A cast already makes memory of its own: only a move to `device` remains.
            Some(dtype) if dtype != source.dtype() => source.cast(dtype)?.to_device(device),
            _ => copy_onto(&source, device),
        })
        .py()
    }

    /// A Python value of a one-element tensor.
    fn scalar(&self, py: Python<'_>, what: &str) -> PyResult<Scalar> {
        if self.tensor.num_elements() != 1 {
            return Err(PyValueError::new_err(format!(
                "{what} of a tensor with {} elements: only one-element tensors convert to \
                 Python scalars",
                self.tensor.num_elements()
            )));
        }
        let t = &self.tensor;
        let values = py.detach(|| t.to_scalars()).py()?;
        Ok(values[0])
    }

    /// The tensor in host memory (itself where it is already there).
    fn on_host(&self, py: Python<'_>) -> PyResult<Tensor> {
        if self.tensor.device().dlpack_device() == Some(DLDevice::CPU) {
            return Ok(self.tensor.clone());
        }
        let host = polytensor::dlpack::host_device().py()?;
        let t = &self.tensor;
        py.detach(|| t.to_device(&host)).py()
    }
}

/// A copy of `source` on `device`, sharing nothing with it.
pub(crate) fn copy_onto(source: &Tensor, device: &Arc<dyn Device>) -> polytensor::Result<Tensor> {
    if !polytensor::same_device(source.device(), device) {
        return source.to_device(device);
    }
    if source.dtype() == DataType::String {
        return Tensor::from_strings(source.to_strings()?, source.shape().clone(), device);
    }
    Tensor::from_bytes(
        &source.to_bytes()?,
        source.shape().clone(),
        source.dtype(),
        device,
    )
}

fn is_numpy_array(data: &Bound<'_, PyAny>) -> PyResult<bool> {
    let ty = data.get_type();
    Ok(ty.module()?.to_cow()? == "numpy" && ty.name()?.to_cow()? == "ndarray")
}

#[pymethods]
impl PyTensor {
    #[new]
    #[pyo3(signature = (data, dtype=None, device=None))]
    pub fn new(
        data: &Bound<'_, PyAny>,
        dtype: Option<&str>,
        device: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let dtype = dtype.map(parse_dtype).transpose()?;
        let device = device::resolve(device)?;
        Ok(Self::from_data(data, dtype, &device)?.into())
    }

    /// The dtype's TensorFlow name (`"float32"`; compare with `polytensor.float32`).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.tensor.dtype().name()
    }

    /// The shape, a tuple of ints.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.tensor.dims())
    }

    /// The number of dims.
    #[getter]
    fn ndim(&self) -> usize {
        self.tensor.rank()
    }

    /// The number of elements.
    #[getter]
    fn size(&self) -> usize {
        self.tensor.num_elements()
    }

    /// The device the tensor is on.
    #[getter]
    fn device(&self) -> PyDevice {
        PyDevice {
            device: self.tensor.device().clone(),
        }
    }

    /// The strides, in elements (a view's may be zero or negative).
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.tensor.layout().strides())
    }

    /// The address of the first element (as `torch.Tensor.data_ptr`), where the memory has
    /// one (wgpu buffers have none: `None`); 0 for an empty tensor.
    fn data_ptr(&self) -> Option<usize> {
        let t = &self.tensor;
        if t.num_elements() == 0 {
            return Some(0);
        }
        let base = t.buffer().device_address()?;
        Some(base + t.layout().offset() * t.dtype().size())
    }

    /// Whether the elements are in row-major order with no gaps.
    fn is_contiguous(&self) -> bool {
        self.tensor.is_contiguous()
    }

    /// This tensor on `device` (itself if it is there already).
    fn to(&self, py: Python<'_>, device: &Bound<'_, PyAny>) -> PyResult<Self> {
        let device = device::resolve(Some(device))?;
        let t = &self.tensor;
        Ok(py.detach(|| t.to_device(&device)).py()?.into())
    }

    /// This tensor on `cpu:0`.
    fn cpu(&self, py: Python<'_>) -> PyResult<Self> {
        let device = polytensor::default_device().py()?;
        let t = &self.tensor;
        Ok(py.detach(|| t.to_device(&device)).py()?.into())
    }

    /// A copy that shares no memory with this tensor.
    fn copy(&self, py: Python<'_>) -> PyResult<Self> {
        let t = &self.tensor;
        Ok(py.detach(|| copy_onto(t, t.device())).py()?.into())
    }

    /// A NumPy array of the elements. Host memory is shared (as `np.from_dlpack`); a GPU
    /// tensor is copied to the host first. bfloat16 and float8 come as `ml_dtypes` arrays
    /// (TensorFlow's), strings as an object array of `bytes`.
    pub fn numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let host = PyTensor::from(self.on_host(py)?);
        let dtype = host.tensor.dtype();
        if dtype == DataType::String {
            let values = host.tensor.to_strings().py()?;
            let list = PyList::new(py, values.iter().map(|v| pyo3::types::PyBytes::new(py, v)))?;
            return py
                .import("polytensor._convert")?
                .getattr("object_array")?
                .call1((list, PyTuple::new(py, host.tensor.dims())?));
        }
        if let Some(bits) = ml_dtypes_carrier(dtype) {
            let raw = PyTensor::from(host.tensor.bitcast(bits).py()?);
            return py
                .import("polytensor._convert")?
                .getattr("ml_dtypes_view")?
                .call1((raw.into_pyobject(py)?, dtype.name()));
        }
        py.import("numpy")?
            .getattr("from_dlpack")?
            .call1((host.into_pyobject(py)?,))
    }

    /// NumPy's array protocol: `np.asarray(t)`.
    #[pyo3(signature = (dtype=None, copy=None))]
    fn __array__<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut array = self.numpy(py)?;
        if let Some(dtype) = dtype {
            array = array.call_method1("astype", (dtype,))?;
        } else if copy == Some(true) {
            array = array.call_method0("copy")?;
        }
        Ok(array)
    }

    /// The value of a one-element tensor as a Python number.
    fn item<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        scalar_to_py(py, self.scalar(py, "item()")?)
    }

    /// The elements as nested Python lists.
    fn tolist<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.numpy(py)?.call_method0("tolist")
    }

    fn __float__(&self, py: Python<'_>) -> PyResult<f64> {
        Ok(self.scalar(py, "float()")?.to_f64())
    }

    fn __int__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let value = self.scalar(py, "int()")?;
        match value {
            Scalar::F64(f) => {
                if !f.is_finite() {
                    return Err(PyValueError::new_err(format!(
                        "cannot convert float {f} to integer"
                    )));
                }
                Ok(f.trunc().into_pyobject(py)?.call_method0("__int__")?)
            }
            Scalar::C64(_) => Err(PyTypeError::new_err("int() of a complex tensor")),
            other => scalar_to_py(py, other)?.call_method0("__int__"),
        }
    }

    fn __bool__(&self, py: Python<'_>) -> PyResult<bool> {
        if self.tensor.num_elements() != 1 {
            return Err(PyValueError::new_err(format!(
                "The truth value of a tensor with {} elements is ambiguous. Use a.any() or \
                 a.all()",
                self.tensor.num_elements()
            )));
        }
        Ok(match self.scalar(py, "bool()")? {
            Scalar::Bool(b) => b,
            Scalar::C64(c) => c.re != 0.0 || c.im != 0.0,
            other => other.to_f64() != 0.0,
        })
    }

    fn __len__(&self) -> PyResult<usize> {
        self.tensor
            .dims()
            .first()
            .copied()
            .ok_or_else(|| PyTypeError::new_err("len() of a 0-d tensor"))
    }

    /// `t[1, ::2, None, ...]`: TensorFlow's strided slice.
    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Self> {
        let spec = index::spec(key, &self.tensor.dims())?;
        let t = &self.tensor;
        Ok(py.detach(|| t.strided_slice(&spec)).py()?.into())
    }

    /// TensorFlow's print form: `tf.Tensor([1. 2.], shape=(2,), dtype=float32)`.
    fn __repr__(&self, py: Python<'_>) -> String {
        let t = &self.tensor;
        py.detach(|| t.to_string())
    }

    /// The array API's `__dlpack__`: this tensor as a DLPack capsule, sharing its memory
    /// (a host copy where `copy=True`, `dl_device=(1, 0)` or the memory needs one).
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<i64>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let request = DlpackRequest {
            stream,
            max_version,
            dl_device: dl_device.map(|(device_type, device_id)| DLDevice {
                device_type: DLDeviceType(device_type),
                device_id,
            }),
            copy,
        };
        capsule::export(py, &self.tensor, request)
    }

    /// The array API's `__dlpack_device__`: `(device_type, device_id)` as DLPack numbers.
    fn __dlpack_device__(&self) -> PyResult<(i32, i32)> {
        let place = polytensor::dlpack::dlpack_device(&self.tensor).py()?;
        Ok((place.device_type.0, place.device_id))
    }
}

/// For the dtypes NumPy lacks and `ml_dtypes` has (bfloat16, float8, int4, int2), the
/// unsigned integer dtype of their size that carries their bits to NumPy.
fn ml_dtypes_carrier(dtype: DataType) -> Option<DataType> {
    use DataType::*;
    match dtype {
        BFloat16 => Some(UInt16),
        Float8E5M2 | Float8E4M3FN | Float8E4M3FNUZ | Float8E4M3B11FNUZ | Float8E5M2FNUZ | Int4
        | UInt4 | Int2 | UInt2 => Some(UInt8),
        _ => None,
    }
}
