//! The training benchmarks' models, built as TensorFlow graphs with `Graph::minimize`
//! (Adam), so that polytensor and TensorFlow run the very same training step: Keras's
//! MNIST CNN (28x28x1 images; 3x3 convolutions of 32 and 64 filters, each with ReLU and 2x2
//! max pooling; a dense layer of 128 with ReLU; 10 classes) and an MLP (784, 256, 256, 10,
//! ReLU), each with sparse softmax cross entropy; and a text classifier whose embedding
//! table (10000 x 64) is trained sparsely with Adagrad (`ResourceSparseApplyAdagrad` of
//! the rows a batch reads), its mean over 20 tokens through a dense layer of 128; and an
//! LSTM classifier TensorFlow wrote (`tests/python/tf_recurrent_model.py`: a
//! `tf.while_loop` over TensorArrays, as Keras's recurrent layers run), whose gradient
//! runs through its `While`.

use std::path::Path;
use std::sync::Arc;

use polytensor::graph::{Graph, Operation, Optimizer, Output};
use polytensor::{DataType, Device, PartialTensorShape, Result, Tensor};

/// A training step ready to run: the graph, what initialises it, the step, and one batch.
pub struct TrainingStep {
    /// The model, its loss and its optimizer.
    pub graph: Graph,
    /// The weights' and the optimizer's initializers.
    pub init: Vec<Operation>,
    /// One optimizer step.
    pub step: Operation,
    /// The batch fed to every step: (placeholder, value).
    pub feeds: Vec<(Output, Tensor)>,
}

impl TrainingStep {
    /// Write the graph to `dir/NAME.pb` and `dir/NAME.json` (the init and step op names and
    /// the feeds), what the TensorFlow peer's `train` command loads.
    pub fn write(&self, dir: &Path, name: &str) -> std::io::Result<std::path::PathBuf> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!("{name}.pb"));
        std::fs::write(&path, self.graph.to_graph_def_bytes())?;
        let feeds: serde_json::Map<String, serde_json::Value> = self
            .feeds
            .iter()
            .map(|(placeholder, value)| {
                let spec = serde_json::json!({
                    "dtype": value.dtype().name(),
                    "shape": value.dims(),
                    "data_hex": value.to_bytes().expect("feed bytes").iter()
                        .map(|b| format!("{b:02x}")).collect::<String>(),
                });
                (placeholder.name(), spec)
            })
            .collect();
        let sidecar = serde_json::json!({
            "init": self.init.iter().map(|op| op.name()).collect::<Vec<_>>(),
            "step": self.step.name(),
            "feeds": feeds,
        });
        std::fs::write(dir.join(format!("{name}.json")), sidecar.to_string())?;
        Ok(path)
    }
}

/// The LSTM classifier of `dir/lstm.pb` and `dir/lstm.json`
/// (`tests/python/tf_recurrent_model.py`), trained with Adam: `Graph::minimize` takes its
/// gradient through the loop.
pub fn recurrent(dir: &Path, device: &Arc<dyn Device>) -> Result<TrainingStep> {
    let spec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("lstm.json")).map_err(io_error)?)
            .map_err(|e| polytensor::Error::invalid(e.to_string()))?;
    let bytes = std::fs::read(dir.join("lstm.pb")).map_err(io_error)?;
    let mut graph = Graph::from_graph_def_bytes(&bytes)?;
    let name = |key: &str| spec[key].as_str().unwrap_or_default().to_string();
    let names = |key: &str| -> Vec<String> {
        spec[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    let input = graph.tensor(&name("input"))?;
    let logits = graph.tensor(&name("logits"))?;
    let weights = names("weights")
        .iter()
        .map(|w| graph.tensor(w))
        .collect::<Result<Vec<_>>>()?;
    let init = names("init")
        .iter()
        .map(|op| {
            graph
                .operation(op)
                .ok_or_else(|| polytensor::Error::invalid(format!("no op {op}")))
        })
        .collect::<Result<Vec<_>>>()?;
    let dims: Vec<usize> = spec["shape"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d.as_u64().map(|d| d as usize))
        .collect();
    let batch = dims.first().copied().unwrap_or(0);
    let labels = graph.placeholder_named(
        "labels",
        DataType::Int32,
        &PartialTensorShape::new(&[Some(batch)])?,
    )?;
    let x = crate::tensor(&dims, DataType::Float, 5, device);
    classifier_step(
        graph,
        Classifier {
            logits,
            labels,
            weights,
            init,
        },
        &adam(),
        (input, x),
        device,
    )
}

/// A classifier's graph: its logits, its labels' placeholder, its weights and their
/// initializers.
struct Classifier {
    logits: Output,
    labels: Output,
    weights: Vec<Output>,
    init: Vec<Operation>,
}

/// The benchmarks' Adam.
fn adam() -> Optimizer {
    Optimizer::Adam {
        learning_rate: 0.001,
        beta1: 0.9,
        beta2: 0.999,
        epsilon: 1e-7,
    }
}

/// `graph`'s loss (mean sparse softmax cross entropy of the classifier's logits), the step
/// of `optimizer` over its weights, and a batch: `input` fed to its placeholder and seeded
/// labels.
fn classifier_step(
    mut graph: Graph,
    classifier: Classifier,
    optimizer: &Optimizer,
    (placeholder, input): (Output, Tensor),
    device: &Arc<dyn Device>,
) -> Result<TrainingStep> {
    let Classifier {
        logits,
        labels,
        weights,
        mut init,
    } = classifier;
    let losses = graph
        .op("SparseSoftmaxCrossEntropyWithLogits")
        .input(&logits)
        .input(&labels)
        .build_output()?;
    let axis = graph.constant_values(&[0i32], &[1])?;
    let loss = graph
        .op("Mean")
        .input(&losses)
        .input(&axis)
        .build_output()?;
    let training = graph.minimize(&loss, &weights, optimizer)?;
    init.push(training.init);
    let batch = input.dims().first().copied().unwrap_or(0);
    let classes: Vec<i32> = (0..batch as i32).map(|i| (i * 7) % 10).collect();
    let classes = Tensor::from_slice(&classes, [batch], device)?;
    Ok(TrainingStep {
        graph,
        init,
        step: training.step,
        feeds: vec![(placeholder, input), (labels, classes)],
    })
}

fn io_error(e: std::io::Error) -> polytensor::Error {
    polytensor::Error::invalid(e.to_string())
}

/// Keras's MNIST CNN at `batch`, trained with Adam.
pub fn mnist_cnn(batch: usize, device: &Arc<dyn Device>) -> Result<TrainingStep> {
    let mut model = Model::new([28, 28, 1], batch)?;
    let x = model.conv_relu_pool(model.input.clone(), [3, 3, 1, 32])?;
    let x = model.conv_relu_pool(x, [3, 3, 32, 64])?;
    let flat = model.graph.constant_values(&[-1i32, 7 * 7 * 64], &[2])?;
    let x = model
        .graph
        .op("Reshape")
        .input(&x)
        .input(&flat)
        .build_output()?;
    let x = model.dense(&x, [7 * 7 * 64, 128], true)?;
    let logits = model.dense(&x, [128, 10], false)?;
    model.finish(&logits, device)
}

/// The text classifier at `batch` (20 token ids per example from 10000), trained with
/// Adagrad: the embedding's update sparse, of the rows read.
pub fn text_classifier(batch: usize, device: &Arc<dyn Device>) -> Result<TrainingStep> {
    const VOCAB: usize = 10_000;
    const LENGTH: usize = 20;
    const WIDTH: usize = 64;
    let mut model = Model::new([0, 0, 0], batch)?;
    let shape = PartialTensorShape::new(&[Some(batch), Some(LENGTH)])?;
    model.input = model
        .graph
        .placeholder_named("ids", DataType::Int32, &shape)?;
    model.dims = vec![batch, LENGTH];
    model.weight(&[VOCAB, WIDTH], 0.1)?;
    let table = model.weights[0].clone();
    let g = &mut model.graph;
    let rows = g
        .op("ResourceGather")
        .input(&table)
        .input(&model.input)
        .attr("dtype", DataType::Float)
        .build_output()?;
    let axis = g.constant_values(&[1i32], &[1])?;
    let mean = g.op("Mean").input(&rows).input(&axis).build_output()?;
    let x = model.dense(&mean, [WIDTH, 128], true)?;
    let logits = model.dense(&x, [128, 10], false)?;
    let ids: Vec<i32> = (0..batch * LENGTH)
        .map(|i| ((i * 7919) % VOCAB) as i32)
        .collect();
    let ids = Tensor::from_slice(&ids, [batch, LENGTH], device)?;
    let adagrad = Optimizer::Adagrad {
        learning_rate: 0.05,
        initial_accumulator: 0.1,
    };
    model.finish_with(&logits, device, &adagrad, ids)
}

/// An MLP (784, 256, 256, 10) at `batch`, trained with Adam.
pub fn mlp(batch: usize, device: &Arc<dyn Device>) -> Result<TrainingStep> {
    let mut model = Model::new([784, 0, 0], batch)?;
    let x = model.dense(&model.input.clone(), [784, 256], true)?;
    let x = model.dense(&x, [256, 256], true)?;
    let logits = model.dense(&x, [256, 10], false)?;
    model.finish(&logits, device)
}

/// A model being built: its graph, input, labels and weights.
struct Model {
    graph: Graph,
    input: Output,
    labels: Output,
    dims: Vec<usize>,
    weights: Vec<Output>,
    init: Vec<Operation>,
}

impl Model {
    /// A model of `[batch, dims...]` inputs (trailing zero dims left out).
    fn new(dims: [usize; 3], batch: usize) -> Result<Self> {
        let mut graph = Graph::new();
        let mut all = vec![batch];
        all.extend(dims.iter().copied().filter(|&d| d > 0));
        let known: Vec<Option<usize>> = all.iter().map(|&d| Some(d)).collect();
        let input =
            graph.placeholder_named("input", DataType::Float, &PartialTensorShape::new(&known)?)?;
        let labels = graph.placeholder_named(
            "labels",
            DataType::Int32,
            &PartialTensorShape::new(&[Some(batch)])?,
        )?;
        Ok(Model {
            graph,
            input,
            labels,
            dims: all,
            weights: Vec::new(),
            init: Vec::new(),
        })
    }

    /// A weight of `dims` initialised to a seeded truncated normal times `scale` (zeros for
    /// a scale of 0); its read.
    fn weight(&mut self, dims: &[usize], scale: f32) -> Result<Output> {
        let g = &mut self.graph;
        let name = format!("w{}", self.weights.len());
        let shape: Vec<i32> = dims.iter().map(|&d| d as i32).collect();
        let shape = g.constant_values(&shape, &[dims.len()])?;
        let random = g
            .op("TruncatedNormal")
            .input(&shape)
            .attr("dtype", DataType::Float)
            .attr("seed", 1i64)
            .attr("seed2", self.weights.len() as i64 + 1)
            .build_output()?;
        let scale = g.constant(scale)?;
        let initial = g.mul(&random, &scale)?;
        let variable = g.resource_variable(&name, &initial)?;
        self.init.push(variable.initializer);
        self.weights.push(variable.handle);
        Ok(variable.value)
    }

    /// `MaxPool(Relu(BiasAdd(Conv2D(x, filter), bias)))`, SAME 3x3 and 2x2 pooling.
    fn conv_relu_pool(&mut self, x: Output, filter: [usize; 4]) -> Result<Output> {
        let fan_in = (filter[0] * filter[1] * filter[2]) as f32;
        let kernel = self.weight(&filter, (2.0 / fan_in).sqrt())?;
        let bias = self.weight(&[filter[3]], 0.0)?;
        let g = &mut self.graph;
        let conv = g.conv2d(&x, &kernel, [1, 1], "SAME")?;
        let biased = g.bias_add(&conv, &bias)?;
        let relu = g.unary("Relu", &biased)?;
        g.max_pool(&relu, [2, 2], [2, 2], "VALID")
    }

    /// `Relu(BiasAdd(MatMul(x, w), b))` (no ReLU unless `relu`).
    fn dense(&mut self, x: &Output, [inputs, outputs]: [usize; 2], relu: bool) -> Result<Output> {
        let w = self.weight(&[inputs, outputs], (2.0 / inputs as f32).sqrt())?;
        let b = self.weight(&[outputs], 0.0)?;
        let g = &mut self.graph;
        let product = g.matmul(x, &w)?;
        let biased = g.bias_add(&product, &b)?;
        if relu {
            g.unary("Relu", &biased)
        } else {
            Ok(biased)
        }
    }

    /// The loss (mean sparse softmax cross entropy), Adam's step, and a seeded batch.
    fn finish(self, logits: &Output, device: &Arc<dyn Device>) -> Result<TrainingStep> {
        let images = crate::tensor(&self.dims, DataType::Float, 3, device);
        self.finish_with(logits, device, &adam(), images)
    }

    /// The loss, `optimizer`'s step, and a batch of `input` with seeded labels.
    fn finish_with(
        self,
        logits: &Output,
        device: &Arc<dyn Device>,
        optimizer: &Optimizer,
        input: Tensor,
    ) -> Result<TrainingStep> {
        let classifier = Classifier {
            logits: logits.clone(),
            labels: self.labels,
            weights: self.weights,
            init: self.init,
        };
        classifier_step(
            self.graph,
            classifier,
            optimizer,
            (self.input, input),
            device,
        )
    }
}
