//! `polytensor._native`, the extension module behind the `polytensor` Python package: the
//! Rust crate's tensors, devices, eager ops, graphs and DLPack, through PyO3. The package's
//! Python files (`python/polytensor/`) add what is Python's business: data conversion rules,
//! `wrap`, and the dtype names.

use polytensor::{DataType, Scalar, Tensor};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict};

mod capsule;
mod device;
mod errors;
mod graph;
mod index;
mod ops;
mod saved_model;
mod tensor;

use errors::IntoPyResult;
use tensor::{parse_dtype, py_to_scalar, PyTensor};

/// The tensor a DLPack producer gives: an object with `__dlpack__` (NumPy, PyTorch,
/// TensorFlow, JAX, CuPy, polytensor), asked for DLPack 1.x first and the legacy struct if
/// it does not take `max_version`; or a capsule itself (TensorFlow's `to_dlpack`).
pub(crate) fn from_dlpack_any(x: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    if let Ok(capsule) = x.cast::<PyCapsule>() {
        return capsule::import(capsule);
    }
    if let Ok(t) = x.cast::<PyTensor>() {
        return Ok(t.get().tensor.clone());
    }
    if !x.hasattr("__dlpack__")? {
        return Err(PyTypeError::new_err(format!(
            "from_dlpack takes an object with __dlpack__ or a DLPack capsule, not {}",
            x.get_type().name()?
        )));
    }
    let py = x.py();
    let kwargs = PyDict::new(py);
    kwargs.set_item("max_version", (1, 1))?;
    let capsule = match x.call_method("__dlpack__", (), Some(&kwargs)) {
        Ok(capsule) => capsule,
        // A producer from before DLPack 1.0 takes no `max_version`.
        Err(e) if e.is_instance_of::<PyTypeError>(py) => x.call_method0("__dlpack__")?,
        Err(e) => return Err(e),
    };
    let capsule = capsule
        .cast::<PyCapsule>()
        .map_err(|_| PyTypeError::new_err("__dlpack__ returned something that is not a capsule"))?;
    capsule::import(capsule)
}

/// The array API's `from_dlpack`: a polytensor tensor viewing the memory of `x` (any DLPack
/// producer, or a capsule) without a copy. `device` moves it (a copy); `copy=True` always
/// copies, `copy=False` refuses to.
#[pyfunction]
#[pyo3(signature = (x, /, *, device=None, copy=None))]
fn from_dlpack(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    device: Option<&Bound<'_, PyAny>>,
    copy: Option<bool>,
) -> PyResult<PyTensor> {
    let shared = from_dlpack_any(x)?;
    let wanted = match device {
        Some(d) if !d.is_none() => Some(device::resolve(Some(d))?),
        _ => None,
    };
    let moves = wanted
        .as_ref()
        .is_some_and(|d| !polytensor::same_device(d, shared.device()));
    if moves && copy == Some(false) {
        return Err(PyValueError::new_err(format!(
            "copy=False, but moving the tensor to {} copies it",
            wanted.as_ref().map_or("", |d| d.name())
        )));
    }
    if copy == Some(true) || moves {
        let target = wanted.unwrap_or_else(|| shared.device().clone());
        return Ok(py
            .detach(|| tensor::copy_onto(&shared, &target))
            .py()?
            .into());
    }
    Ok(shared.into())
}

/// A new tensor holding a copy of `data` (see `polytensor.Tensor`).
#[pyfunction]
#[pyo3(name = "tensor", signature = (data, dtype=None, device=None))]
fn new_tensor(
    data: &Bound<'_, PyAny>,
    dtype: Option<&str>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    PyTensor::new(data, dtype, device)
}

/// Dims given as an int or a sequence of ints.
fn shape_arg(shape: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    match shape.extract::<usize>() {
        Ok(one) => Ok(vec![one]),
        Err(_) => shape.extract(),
    }
}

fn made(
    py: Python<'_>,
    make: impl FnOnce() -> polytensor::Result<Tensor> + Send,
) -> PyResult<PyTensor> {
    Ok(py.detach(make).py()?.into())
}

/// A tensor of zeros.
#[pyfunction]
#[pyo3(signature = (shape, dtype="float32", device=None))]
fn zeros(
    py: Python<'_>,
    shape: &Bound<'_, PyAny>,
    dtype: &str,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    filled(py, shape, Scalar::I64(0), dtype, device)
}

/// A tensor of ones.
#[pyfunction]
#[pyo3(signature = (shape, dtype="float32", device=None))]
fn ones(
    py: Python<'_>,
    shape: &Bound<'_, PyAny>,
    dtype: &str,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    filled(py, shape, Scalar::I64(1), dtype, device)
}

/// `zeros`, `ones` and `full`: a tensor of `value` everywhere.
fn filled(
    py: Python<'_>,
    shape: &Bound<'_, PyAny>,
    value: Scalar,
    dtype: &str,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let (shape, dtype, device) = (
        shape_arg(shape)?,
        parse_dtype(dtype)?,
        device::resolve(device)?,
    );
    made(py, || Tensor::full(shape, value, dtype, &device))
}

/// A tensor of `value` everywhere.
#[pyfunction]
#[pyo3(signature = (shape, value, dtype="float32", device=None))]
fn full(
    py: Python<'_>,
    shape: &Bound<'_, PyAny>,
    value: &Bound<'_, PyAny>,
    dtype: &str,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    filled(py, shape, number(value)?, dtype, device)
}

/// `[start, start + step, ...)` as NumPy's `arange` (`arange(5)`, `arange(1, 2, 0.25)`).
#[pyfunction]
#[pyo3(signature = (start, stop=None, step=None, dtype=None, device=None))]
fn arange(
    py: Python<'_>,
    start: &Bound<'_, PyAny>,
    stop: Option<&Bound<'_, PyAny>>,
    step: Option<&Bound<'_, PyAny>>,
    dtype: Option<&str>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let (start, stop) = match stop {
        Some(stop) => (number(start)?, number(stop)?),
        None => (Scalar::I64(0), number(start)?),
    };
    let step = step.map(number).transpose()?.unwrap_or(Scalar::I64(1));
    let dtype = match dtype {
        Some(name) => parse_dtype(name)?,
        None if [start, stop, step]
            .iter()
            .any(|s| matches!(s, Scalar::F64(_))) =>
        {
            DataType::Float
        }
        None => DataType::Int32,
    };
    let device = device::resolve(device)?;
    made(py, || Tensor::arange(start, stop, step, dtype, &device))
}

fn number(value: &Bound<'_, PyAny>) -> PyResult<Scalar> {
    py_to_scalar(value)?.ok_or_else(|| {
        PyTypeError::new_err(format!(
            "a number, not {}",
            value
                .get_type()
                .name()
                .map_or_else(|_| "?".into(), |n| n.to_string())
        ))
    })
}

/// Elementwise `a op b` and friends as functions (`polytensor.matmul(a, b)`), for `wrap`.
#[pyfunction]
fn matmul(py: Python<'_>, a: &PyTensor, b: &PyTensor) -> PyResult<PyTensor> {
    let (a, b) = (&a.tensor, &b.tensor);
    made(py, || a.matmul(b))
}

/// The tensors joined along an existing `axis`.
#[pyfunction]
#[pyo3(signature = (tensors, axis=0))]
fn concat(py: Python<'_>, tensors: Vec<PyRef<'_, PyTensor>>, axis: i64) -> PyResult<PyTensor> {
    let tensors: Vec<&Tensor> = tensors.iter().map(|t| &t.tensor).collect();
    made(py, || Tensor::concat(&tensors, axis))
}

/// The tensors joined along a new `axis`.
#[pyfunction]
#[pyo3(signature = (tensors, axis=0))]
fn stack(py: Python<'_>, tensors: Vec<PyRef<'_, PyTensor>>, axis: i64) -> PyResult<PyTensor> {
    let tensors: Vec<&Tensor> = tensors.iter().map(|t| &t.tensor).collect();
    made(py, || Tensor::stack(&tensors, axis))
}

/// `where(cond, x, y)`: `x` where `cond` is true, else `y` (broadcasting).
#[pyfunction]
#[pyo3(name = "where")]
fn where_(py: Python<'_>, cond: &PyTensor, x: &PyTensor, y: &PyTensor) -> PyResult<PyTensor> {
    let (c, x, y) = (&cond.tensor, &x.tensor, &y.tensor);
    made(py, || c.where_(x, y))
}

/// Every dtype's TensorFlow name, in enum order.
#[pyfunction]
fn dtype_names() -> Vec<&'static str> {
    DataType::ALL.iter().map(|d| d.name()).collect()
}

/// The module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTensor>()?;
    m.add_class::<device::PyDevice>()?;
    m.add_class::<graph::PyGraph>()?;
    m.add_class::<graph::PySession>()?;
    m.add_class::<graph::PyRunOptions>()?;
    m.add_class::<graph::PyCancellationManager>()?;
    m.add_class::<graph::PyRunMetadata>()?;
    m.add_class::<saved_model::PySavedModel>()?;
    m.add_class::<saved_model::PySignature>()?;
    m.add_function(wrap_pyfunction!(saved_model::load_saved_model, m)?)?;
    let py = m.py();
    m.add(
        "DeadlineExceededError",
        py.get_type::<errors::DeadlineExceededError>(),
    )?;
    m.add("CancelledError", py.get_type::<errors::CancelledError>())?;
    m.add("NotFoundError", py.get_type::<errors::NotFoundError>())?;
    m.add("DataLossError", py.get_type::<errors::DataLossError>())?;
    m.add_function(wrap_pyfunction!(device::devices, m)?)?;
    m.add_function(wrap_pyfunction!(device::device, m)?)?;
    m.add_function(wrap_pyfunction!(device::unavailable, m)?)?;
    m.add_function(wrap_pyfunction!(from_dlpack, m)?)?;
    m.add_function(wrap_pyfunction!(new_tensor, m)?)?;
    m.add_function(wrap_pyfunction!(zeros, m)?)?;
    m.add_function(wrap_pyfunction!(ones, m)?)?;
    m.add_function(wrap_pyfunction!(full, m)?)?;
    m.add_function(wrap_pyfunction!(arange, m)?)?;
    m.add_function(wrap_pyfunction!(matmul, m)?)?;
    m.add_function(wrap_pyfunction!(concat, m)?)?;
    m.add_function(wrap_pyfunction!(stack, m)?)?;
    m.add_function(wrap_pyfunction!(where_, m)?)?;
    m.add_function(wrap_pyfunction!(dtype_names, m)?)?;
    m.add_function(wrap_pyfunction!(capsule::live_exports, m)?)?;
    Ok(())
}
