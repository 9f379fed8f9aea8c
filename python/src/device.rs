//! `polytensor.Device`, `polytensor.devices()` and `polytensor.device(name)`.

use std::sync::Arc;

use polytensor::Device;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::IntoPyResult;

/// A device tensors live on (`cpu:0`, `opencl:0`, `wgpu:0`, `cuda:0`).
#[pyclass(name = "Device", module = "polytensor", frozen, eq, hash)]
pub struct PyDevice {
    /// The device.
    pub device: Arc<dyn Device>,
}

impl PartialEq for PyDevice {
    fn eq(&self, other: &Self) -> bool {
        self.device.name() == other.device.name()
    }
}

impl std::hash::Hash for PyDevice {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.device.name().hash(state);
    }
}

#[pymethods]
impl PyDevice {
    /// The device's name (`wgpu:0`).
    #[getter]
    fn name(&self) -> String {
        self.device.name().to_string()
    }

    /// The backend family (`cpu`, `cuda`, `opencl`, `wgpu`).
    #[getter]
    fn kind(&self) -> String {
        self.device.kind().name().to_string()
    }

    /// Whether the host can address the device's memory (NumPy sees it without a copy).
    #[getter]
    fn is_host(&self) -> bool {
        self.device.dlpack_device() == Some(polytensor::dlpack::DLDevice::CPU)
    }

    /// Wait for the work queued on the device (to time GPU work).
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        let device = &self.device;
        py.detach(|| device.synchronize()).py()
    }

    fn __repr__(&self) -> String {
        format!("polytensor.device('{}')", self.device.name())
    }

    fn __str__(&self) -> String {
        self.device.name().to_string()
    }
}

/// Every device available here, the default (`cpu:0`) first.
#[pyfunction]
pub fn devices() -> Vec<PyDevice> {
    polytensor::devices()
        .iter()
        .filter_map(|entry| entry.device().cloned())
        .map(|device| PyDevice { device })
        .collect()
}

/// The compiled-in backends that have no device here, each with the reason.
#[pyfunction]
pub fn unavailable(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let reasons = PyDict::new(py);
    for entry in polytensor::devices() {
        if let polytensor::DeviceStatus::Unavailable(why) = &entry.status {
            reasons.set_item(&entry.name, why)?;
        }
    }
    Ok(reasons)
}

/// The device called `name` (`"cpu"` is `"cpu:0"`; `"wgpu:0"`, `"opencl:1"`).
#[pyfunction]
pub fn device(name: &str) -> PyResult<PyDevice> {
    Ok(PyDevice {
        device: polytensor::device(name).py()?,
    })
}

/// A device argument: a `Device`, a name, or `None` for the default (`cpu:0`).
pub fn resolve(device: Option<&Bound<'_, PyAny>>) -> PyResult<Arc<dyn Device>> {
    match device {
        None => polytensor::default_device().py(),
        Some(d) if d.is_none() => polytensor::default_device().py(),
        Some(d) => match d.cast::<PyDevice>() {
            Ok(d) => Ok(d.get().device.clone()),
            Err(_) => polytensor::device(&d.str()?.to_cow()?).py(),
        },
    }
}
