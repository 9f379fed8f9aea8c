//! polytensor's errors as the Python exceptions NumPy raises for the same mistakes, each
//! with the Rust message; a run stopped early raises TensorFlow's exception names.

use polytensor::Error;
use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyTimeoutError, PyTypeError, PyValueError};
use pyo3::PyErr;

pyo3::create_exception!(
    polytensor,
    DeadlineExceededError,
    PyTimeoutError,
    "A run went past its timeout (TensorFlow's `DeadlineExceededError`)."
);
pyo3::create_exception!(
    polytensor,
    CancelledError,
    PyRuntimeError,
    "A run was cancelled through its `CancellationManager` (TensorFlow's `CancelledError`)."
);

pyo3::create_exception!(
    polytensor,
    NotFoundError,
    pyo3::exceptions::PyLookupError,
    "A file or a checkpoint key does not exist (TensorFlow's `NotFoundError`)."
);
pyo3::create_exception!(
    polytensor,
    DataLossError,
    PyRuntimeError,
    "Stored data is corrupt: a checksum mismatch, a truncated file (TensorFlow's `DataLossError`)."
);

/// The Python exception for a polytensor error: `ValueError` for bad shapes, axes, slices,
/// protos and arguments; `TypeError` for dtypes an op does not take; `MemoryError` when a
/// device is out of memory; `RuntimeError` for devices and drivers; `DeadlineExceededError`
/// (a `TimeoutError`) and `CancelledError` (a `RuntimeError`) for runs stopped early.
pub fn to_py(error: Error) -> PyErr {
    let message = error.to_string();
    match error {
        Error::DTypeMismatch { .. } | Error::Unsupported { .. } => PyTypeError::new_err(message),
        Error::OutOfMemory { .. } | Error::ExceedsDeviceLimit { .. } => {
            PyMemoryError::new_err(message)
        }
        Error::DeviceMismatch { .. } | Error::DeviceUnavailable { .. } | Error::Backend { .. } => {
            PyRuntimeError::new_err(message)
        }
        Error::DeadlineExceeded(_) => DeadlineExceededError::new_err(message),
        Error::Cancelled(_) => CancelledError::new_err(message),
        Error::NotFound(_) => NotFoundError::new_err(message),
        Error::DataLoss(_) => DataLossError::new_err(message),
        Error::Io(_) => pyo3::exceptions::PyOSError::new_err(message),
        _ => PyValueError::new_err(message),
    }
}

/// `Result<T, polytensor::Error>` into `PyResult<T>`.
pub trait IntoPyResult<T> {
    /// The value, or the error as its Python exception ([`to_py`]).
    fn py(self) -> pyo3::PyResult<T>;
}

impl<T> IntoPyResult<T> for polytensor::Result<T> {
    fn py(self) -> pyo3::PyResult<T> {
        self.map_err(to_py)
    }
}
