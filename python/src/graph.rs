//! `polytensor.Graph` and `polytensor.Session`: TensorFlow `GraphDef`s (frozen models) run
//! from Python, with NumPy arrays in and out, as `tf.compat.v1.Session.run`, with
//! `polytensor.RunOptions` and `polytensor.CancellationManager` to stop a run.

use std::time::Duration;

use polytensor::graph::{
    timeout_from_millis, CancellationManager, Graph, RunOptions, Session, SessionOptions,
    StepStats, Trace,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

use crate::device::{self, PyDevice};
use crate::errors::IntoPyResult;
use crate::tensor::PyTensor;

/// A TensorFlow graph: operations and the `name:index` tensors they produce.
#[pyclass(name = "Graph", module = "polytensor", frozen)]
pub struct PyGraph {
    graph: Graph,
}

#[pymethods]
impl PyGraph {
    /// The graph a serialized `GraphDef` describes (`graph.as_graph_def().SerializeToString()`
    /// in TensorFlow, or the bytes of a frozen `.pb`).
    #[staticmethod]
    fn from_graph_def(py: Python<'_>, graph_def: &[u8]) -> PyResult<Self> {
        let graph = py.detach(|| Graph::from_graph_def_bytes(graph_def)).py()?;
        Ok(PyGraph { graph })
    }

    /// The graph as a serialized `GraphDef`.
    fn as_graph_def<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.graph.to_graph_def_bytes())
    }

    /// The names of the operations, in the order they were added.
    fn operations(&self) -> Vec<String> {
        self.graph
            .operations()
            .map(|op| op.name().to_string())
            .collect()
    }

    /// The dtype of the tensor `name` (`"x:0"`).
    fn dtype_of(&self, name: &str) -> PyResult<&'static str> {
        Ok(self.graph.tensor(name).py()?.dtype().name())
    }

    fn __len__(&self) -> usize {
        self.graph.len()
    }

    fn __repr__(&self) -> String {
        format!("<polytensor.Graph of {} operations>", self.graph.len())
    }
}

/// A session that runs a graph: on `device` (a `Device` or a name), or over every device
/// present with TensorFlow's placement when `device` is `None`.
/// `operation_timeout_in_ms` (TensorFlow's `ConfigProto` field) bounds every run whose
/// options give no timeout. `bf16_weights=True` turns on mixed precision in bf16 (grappler's
/// `auto_mixed_precision_onednn_bfloat16`): on CPUs with AVX512-BF16, convolutions and
/// dense layers multiply their constant weights rounded to bf16, summing in f32.
#[pyclass(name = "Session", module = "polytensor", frozen)]
pub struct PySession {
    session: Session,
    operation_timeout: Option<Duration>,
}

/// What stops a run (TensorFlow's `RunOptions`): `timeout_in_ms` (0 or less: the session's),
/// and a `CancellationManager` whose `start_cancel()` stops it from another thread. A run
/// past its timeout raises `DeadlineExceededError`, a cancelled one `CancelledError`.
#[pyclass(name = "RunOptions", module = "polytensor", frozen)]
pub struct PyRunOptions {
    options: RunOptions,
}

#[pymethods]
impl PyRunOptions {
    #[new]
    #[pyo3(signature = (timeout_in_ms=0, cancellation=None))]
    fn new(timeout_in_ms: i64, cancellation: Option<&PyCancellationManager>) -> Self {
        PyRunOptions {
            options: RunOptions {
                timeout: timeout_from_millis(timeout_in_ms),
                cancellation: cancellation.map(|c| c.manager.clone()),
                trace: None,
            },
        }
    }

    /// The timeout in milliseconds (0: none of the run's own).
    #[getter]
    fn timeout_in_ms(&self) -> u128 {
        self.options.timeout.map_or(0, |t| t.as_millis())
    }
}

/// What traced runs recorded (TensorFlow's `RunMetadata`): pass it to `Session.run` as
/// `run_metadata`, and every step of the run is added, with its node, op type (a fused
/// chain's joined by `+`), device, start, duration and outputs. `summary()` prints the op
/// types and nodes that took longest, `chrome_trace()` writes Chrome's trace-event JSON,
/// `SerializeToString()` TensorFlow's `RunMetadata` proto.
#[pyclass(name = "RunMetadata", module = "polytensor", frozen)]
pub struct PyRunMetadata {
    trace: Trace,
}

#[pymethods]
impl PyRunMetadata {
    #[new]
    fn new() -> Self {
        PyRunMetadata {
            trace: Trace::new(),
        }
    }

    /// How many traced runs added their steps.
    #[getter]
    fn runs(&self) -> usize {
        self.trace.inspect(|s| s.runs)
    }

    /// Every recorded step, in the order they ran: dicts of `node`, `op`, `device`,
    /// `start_us` (from when the metadata was made), `duration_us`, `output_shapes` and
    /// `output_bytes`.
    #[getter]
    fn step_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let steps = self.trace.inspect(|stats| {
            stats
                .nodes
                .iter()
                .map(|n| {
                    let step = PyDict::new(py);
                    step.set_item("node", &n.node)?;
                    step.set_item("op", &n.op)?;
                    step.set_item("device", &n.device)?;
                    step.set_item("start_us", n.start.as_secs_f64() * 1e6)?;
                    step.set_item("duration_us", n.duration.as_secs_f64() * 1e6)?;
                    let shapes: Vec<Vec<usize>> =
                        n.outputs.iter().map(|o| o.shape.dims().to_vec()).collect();
                    step.set_item("output_shapes", shapes)?;
                    step.set_item("output_bytes", n.output_bytes())?;
                    Ok(step)
                })
                .collect::<PyResult<Vec<_>>>()
        })?;
        PyList::new(py, steps)
    }

    /// The time of each op type over every traced run, the longest first: a list of
    /// `(op, count, total_ms)`.
    fn by_op_type(&self) -> Vec<(String, usize, f64)> {
        self.trace
            .inspect(StepStats::by_op_type)
            .into_iter()
            .map(|o| (o.op, o.count, o.total.as_secs_f64() * 1e3))
            .collect()
    }

    /// A table of the op types and the `top` slowest nodes, per run.
    #[pyo3(signature = (top=10))]
    fn summary(&self, top: usize) -> String {
        self.trace.inspect(|s| s.summary(top))
    }

    /// The steps in Chrome's trace-event JSON (for Perfetto or `chrome://tracing`).
    fn chrome_trace(&self) -> String {
        self.trace.inspect(StepStats::chrome_trace)
    }

    /// TensorFlow's `RunMetadata` proto of the steps (`config_pb2.RunMetadata.FromString`
    /// and `timeline.Timeline(metadata.step_stats)` read it).
    #[allow(non_snake_case)]
    fn SerializeToString<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.trace.inspect(StepStats::run_metadata_proto))
    }

    /// Forget every recorded step.
    fn clear(&self) {
        self.trace.take();
    }
}

/// A handle that cancels the runs given it (in their `RunOptions`), from any thread:
/// TensorFlow's `CancellationManager`. Once cancelled it stays cancelled.
#[pyclass(name = "CancellationManager", module = "polytensor", frozen)]
pub struct PyCancellationManager {
    manager: CancellationManager,
}

#[pymethods]
impl PyCancellationManager {
    #[new]
    fn new() -> Self {
        PyCancellationManager {
            manager: CancellationManager::new(),
        }
    }

    /// Cancel every run given this handle: those running stop before their next step.
    fn start_cancel(&self) {
        self.manager.start_cancel();
    }

    /// Whether `start_cancel()` was called.
    #[getter]
    fn is_cancelled(&self) -> bool {
        self.manager.is_cancelled()
    }
}

#[pymethods]
impl PySession {
    #[new]
    #[pyo3(signature = (graph, device=None, operation_timeout_in_ms=None, bf16_weights=false))]
    fn new(
        graph: &PyGraph,
        device: Option<&Bound<'_, PyAny>>,
        operation_timeout_in_ms: Option<i64>,
        bf16_weights: bool,
    ) -> PyResult<Self> {
        let devices = match device {
            Some(d) if !d.is_none() => vec![device::resolve(Some(d))?],
            _ => polytensor::devices()
                .iter()
                .filter_map(|entry| entry.device().cloned())
                .collect(),
        };
        let mut options = SessionOptions::new(devices);
        options.optimizations.bf16_weights = bf16_weights;
        let session = Session::with_options(&graph.graph, options).py()?;
        Ok(PySession {
            session,
            operation_timeout: operation_timeout_in_ms.and_then(timeout_from_millis),
        })
    }

    /// The default device.
    #[getter]
    fn device(&self) -> PyDevice {
        PyDevice {
            device: self.session.device().clone(),
        }
    }

    /// Run the graph: `fetches` is a tensor name (`"y:0"`) or a list of them, whose values
    /// come back as NumPy arrays in the same structure; a name with no `:index` is an
    /// operation to run, which gives `None`. `feed_dict` maps tensor names to values
    /// (arrays, lists, numbers or tensors), converted to each tensor's dtype. `options`
    /// (`RunOptions`) give the run a timeout and a cancellation handle; the run releases
    /// the GIL, so another thread may cancel it. `run_metadata` (`RunMetadata`) traces the
    /// run: every step it runs is added to it, as TensorFlow's `FULL_TRACE` fills
    /// `RunMetadata.step_stats`.
    #[pyo3(signature = (fetches, feed_dict=None, options=None, run_metadata=None))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        fetches: &Bound<'py, PyAny>,
        feed_dict: Option<&Bound<'py, PyDict>>,
        options: Option<&PyRunOptions>,
        run_metadata: Option<&PyRunMetadata>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut run_options = options.map(|o| o.options.clone()).unwrap_or_default();
        run_options.timeout = run_options.timeout.or(self.operation_timeout);
        run_options.trace = run_metadata.map(|m| m.trace.clone());
        let single = fetches.is_instance_of::<PyString>();
        let names: Vec<String> = if single {
            vec![fetches.extract()?]
        } else {
            fetches.extract()?
        };
        let graph = self.session.graph();
        let mut feeds = Vec::new();
        if let Some(feed_dict) = feed_dict {
            for (name, value) in feed_dict.iter() {
                let name: String = name.str()?.extract()?;
                let dtype = graph.tensor(&name).py()?.dtype();
                let value = PyTensor::from_data(&value, Some(dtype), self.session.device())?;
                feeds.push((name, value));
            }
        }
        let (tensors, targets): (Vec<&str>, Vec<&str>) = names
            .iter()
            .map(String::as_str)
            .partition(|n| n.contains(':'));
        let session = &self.session;
        let values = py
            .detach(|| {
                let feeds: Vec<(&str, &polytensor::Tensor)> =
                    feeds.iter().map(|(n, t)| (n.as_str(), t)).collect();
                session.run_by_name_with(&run_options, &feeds, &tensors, &targets)
            })
            .py()?;
        let mut values = values.into_iter();
        let results = names
            .iter()
            .map(|name| match name.contains(':') {
                true => {
                    let value = values.next().expect("one value per fetched tensor");
                    PyTensor::from(value).numpy(py)
                }
                false => Ok(py.None().into_bound(py)),
            })
            .collect::<PyResult<Vec<_>>>()?;
        if single {
            return Ok(results.into_iter().next().expect("one fetch"));
        }
        Ok(PyList::new(py, results)?.into_any())
    }
}
