//! `polytensor.saved_model.load(dir)`: a TensorFlow SavedModel whose signatures are called
//! with keyword arguments, as `tf.saved_model.load(dir).signatures["serving_default"](x=...)`
//! is, returning a dict of tensors by output key.

use std::collections::BTreeMap;
use std::sync::Arc;

use polytensor::graph::SessionOptions;
use polytensor::saved_model::SavedModel;
use polytensor::DataType;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::device;
use crate::errors::IntoPyResult;
use crate::tensor::PyTensor;

/// A signature's inputs or outputs: key to `(dtype, shape)`, `None` for an unknown rank or
/// dim.
type Specs = BTreeMap<String, (String, Option<Vec<Option<usize>>>)>;

/// A loaded SavedModel: `signatures` maps each key to a callable.
#[pyclass(name = "SavedModel", module = "polytensor", frozen)]
pub struct PySavedModel {
    model: Arc<SavedModel>,
}

/// One signature of a SavedModel: call it with its inputs as keyword arguments (arrays,
/// lists, numbers or tensors, converted to each input's dtype); it returns a dict of
/// `polytensor.Tensor` by output key.
#[pyclass(name = "ConcreteFunction", module = "polytensor", frozen)]
pub struct PySignature {
    model: Arc<SavedModel>,
    key: String,
}

/// Load the SavedModel in `export_dir` (the graph tagged `tags`, `["serve"]` by default)
/// into a session over `device` (a device or its name), or over every device present.
#[pyfunction]
#[pyo3(signature = (export_dir, tags=None, device=None))]
pub fn load_saved_model(
    py: Python<'_>,
    export_dir: std::path::PathBuf,
    tags: Option<Vec<String>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PySavedModel> {
    let tags = tags.unwrap_or_else(|| vec!["serve".into()]);
    let devices = match device {
        Some(d) if !d.is_none() => {
            let mut devices = vec![device::resolve(Some(d))?];
            // The file names the loader feeds are strings, which live on the CPU.
            if devices[0].name() != "cpu:0" {
                devices.push(polytensor::device("cpu:0").py()?);
            }
            Some(devices)
        }
        _ => None,
    };
    let model = py
        .detach(|| {
            let tags: Vec<&str> = tags.iter().map(String::as_str).collect();
            match devices {
                Some(devices) => SavedModel::load(&export_dir, &tags, SessionOptions::new(devices)),
                None => polytensor::saved_model::load(&export_dir, &tags),
            }
        })
        .py()?;
    Ok(PySavedModel {
        model: Arc::new(model),
    })
}

#[pymethods]
impl PySavedModel {
    /// The signatures, by key.
    #[getter]
    fn signatures(&self) -> BTreeMap<String, PySignature> {
        self.model
            .signatures()
            .keys()
            .map(|key| {
                let signature = PySignature {
                    model: self.model.clone(),
                    key: key.clone(),
                };
                (key.clone(), signature)
            })
            .collect()
    }

    /// The tags of the graph loaded.
    #[getter]
    fn tags(&self) -> Vec<String> {
        self.model.tags().to_vec()
    }

    fn __repr__(&self) -> String {
        format!(
            "<polytensor.SavedModel {} signatures={:?}>",
            self.model.dir().display(),
            self.model.signatures().keys().collect::<Vec<_>>()
        )
    }
}

#[pymethods]
impl PySignature {
    /// The inputs: key to `(dtype, shape)` (`None` dims are any size).
    #[getter]
    fn structured_input_signature(&self) -> Specs {
        self.specs(false)
    }

    /// The outputs: key to `(dtype, shape)`.
    #[getter]
    fn structured_outputs(&self) -> Specs {
        self.specs(true)
    }

    #[pyo3(signature = (*args, **kwargs))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<BTreeMap<String, PyTensor>> {
        if !args.is_empty() {
            return Err(PyTypeError::new_err(format!(
                "signature '{}' takes its inputs as keyword arguments",
                self.key
            )));
        }
        let signature = self.model.signature(&self.key).py()?;
        let session = self.model.session();
        let mut feeds = Vec::new();
        for (key, value) in kwargs.into_iter().flatten() {
            let key: String = key.extract()?;
            let dtype = signature.inputs.get(&key).map(|spec| spec.dtype);
            let device = match dtype {
                Some(DataType::String) => polytensor::device("cpu:0").py()?,
                _ => session.device().clone(),
            };
            feeds.push((key, PyTensor::from_data(&value, dtype, &device)?));
        }
        let model = &self.model;
        let key = &self.key;
        let outputs = py
            .detach(|| {
                let refs: Vec<(&str, &polytensor::Tensor)> =
                    feeds.iter().map(|(k, t)| (k.as_str(), t)).collect();
                model.run(key, &refs)
            })
            .py()?;
        Ok(outputs
            .into_iter()
            .map(|(k, t)| (k, PyTensor::from(t)))
            .collect())
    }

    fn __repr__(&self) -> String {
        format!("<polytensor.ConcreteFunction signature '{}'>", self.key)
    }
}

impl PySignature {
    fn specs(&self, outputs: bool) -> Specs {
        let Ok(signature) = self.model.signature(&self.key) else {
            return BTreeMap::new();
        };
        let side = if outputs {
            &signature.outputs
        } else {
            &signature.inputs
        };
        side.iter()
            .map(|(k, spec)| {
                let dims = spec.shape.dims().map(|d| d.to_vec());
                (k.clone(), (spec.dtype.name().to_string(), dims))
            })
            .collect()
    }
}
