//! Train a small CNN on synthetic MNIST-like data, on any device, and print the loss per
//! step: the model is a TensorFlow graph built here (two convolutions with ReLU and max
//! pooling, a dense layer, sparse softmax cross entropy), trained by `Graph::minimize`
//! with Adam. Each of the 10 classes is a fixed random 16x16 pattern; an image is its
//! class's pattern plus noise, so the loss falls from ln 10 ≈ 2.3 towards 0.
//!
//! Run with `cargo run --release --example train_mnist_like -- [DEVICE] [STEPS]`
//! (`cpu:0` and 60 steps by default; `wgpu:0`, `opencl:0` or `cuda:0` where present).

use polytensor::graph::{Graph, Optimizer, Output, Session, SessionOptions, Variable};
use polytensor::prelude::*;
use polytensor::PartialTensorShape;

const SIDE: usize = 16;
const CLASSES: usize = 10;
const BATCH: usize = 32;

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let device = polytensor::device(&args.next().unwrap_or_else(|| "cpu:0".into()))?;
    let steps: usize = args
        .next()
        .map_or(Ok(60), |s| s.parse())
        .map_err(|e| polytensor::Error::invalid(format!("STEPS must be a number: {e}")))?;

    let mut graph = Graph::new();
    let images = graph.placeholder_named(
        "images",
        DataType::Float,
        &PartialTensorShape::new(&[None, Some(SIDE), Some(SIDE), Some(1)])?,
    )?;
    let labels = graph.placeholder_named(
        "labels",
        DataType::Int32,
        &PartialTensorShape::new(&[None])?,
    )?;
    let mut weights = Vec::new();
    let mut initializers = Vec::new();
    let mut weight = |g: &mut Graph, name: &str, dims: &[usize], scale: f32| -> Result<Output> {
        let variable = variable(g, name, dims, scale)?;
        weights.push(variable.handle);
        initializers.push(variable.initializer);
        Ok(variable.value)
    };
    let conv1 = weight(&mut graph, "conv1", &[3, 3, 1, 8], 0.3)?;
    let bias1 = weight(&mut graph, "bias1", &[8], 0.0)?;
    let conv2 = weight(&mut graph, "conv2", &[3, 3, 8, 16], 0.1)?;
    let bias2 = weight(&mut graph, "bias2", &[16], 0.0)?;
    let dense = weight(&mut graph, "dense", &[4 * 4 * 16, CLASSES], 0.05)?;
    let x = conv_block(&mut graph, &images, &conv1, &bias1)?;
    let x = conv_block(&mut graph, &x, &conv2, &bias2)?;
    let flat = graph.constant_values(&[-1i32, 4 * 4 * 16], &[2])?;
    let x = graph.op("Reshape").input(&x).input(&flat).build_output()?;
    let logits = graph.matmul(&x, &dense)?;
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
    let adam = Optimizer::Adam {
        learning_rate: 0.01,
        beta1: 0.9,
        beta2: 0.999,
        epsilon: 1e-7,
    };
    let training = graph.minimize(&loss, &weights, &adam)?;

    let session = Session::with_options(&graph, SessionOptions::new(vec![device.clone()]))?;
    let mut init: Vec<&polytensor::graph::Operation> = initializers.iter().collect();
    init.push(&training.init);
    session.run(&[], &[], &init)?;
    let mut data = Synthetic::new(7);
    println!("training on {} for {steps} steps", device.name());
    for step in 0..steps {
        let (x, y) = data.batch(&device)?;
        let values = session.run(&[(&images, &x), (&labels, &y)], &[&loss], &[&training.step])?;
        println!("step {step:3}: loss {:.4}", values[0].item::<f32>()?);
    }
    Ok(())
}

/// A resource variable of `dims` initialised to a truncated normal times `scale` (zeros for
/// a scale of 0).
fn variable(g: &mut Graph, name: &str, dims: &[usize], scale: f32) -> Result<Variable> {
    let dims_i32: Vec<i32> = dims.iter().map(|&d| d as i32).collect();
    let shape = g.constant_values(&dims_i32, &[dims.len()])?;
    let random = g
        .op("TruncatedNormal")
        .input(&shape)
        .attr("dtype", DataType::Float)
        .attr("seed", 1i64)
        .attr("seed2", dims.iter().product::<usize>() as i64)
        .build_output()?;
    let scale = g.constant(scale)?;
    let initial = g.mul(&random, &scale)?;
    g.resource_variable(name, &initial)
}

/// `MaxPool(Relu(BiasAdd(Conv2D(x, filter), bias)))`, 2x2 pooling.
fn conv_block(g: &mut Graph, x: &Output, filter: &Output, bias: &Output) -> Result<Output> {
    let conv = g.conv2d(x, filter, [1, 1], "SAME")?;
    let biased = g.bias_add(&conv, bias)?;
    let relu = g.unary("Relu", &biased)?;
    g.max_pool(&relu, [2, 2], [2, 2], "VALID")
}

/// Ten fixed random patterns; a batch is random classes' patterns plus noise.
struct Synthetic {
    state: u64,
    patterns: Vec<Vec<f32>>,
}

impl Synthetic {
    fn new(seed: u64) -> Self {
        let mut data = Synthetic {
            state: seed,
            patterns: Vec::new(),
        };
        data.patterns = (0..CLASSES)
            .map(|_| {
                (0..SIDE * SIDE)
                    .map(|_| data.uniform() * 2.0 - 1.0)
                    .collect()
            })
            .collect();
        data
    }

    /// A uniform number in [0, 1) (a 64-bit LCG's top bits).
    fn uniform(&mut self) -> f32 {
        self.state = self
            .state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.state >> 40) as f32 / (1u64 << 24) as f32
    }

    fn batch(&mut self, device: &std::sync::Arc<dyn Device>) -> Result<(Tensor, Tensor)> {
        let mut images = Vec::with_capacity(BATCH * SIDE * SIDE);
        let mut labels = Vec::with_capacity(BATCH);
        for _ in 0..BATCH {
            let class = ((self.uniform() * CLASSES as f32) as usize).min(CLASSES - 1);
            labels.push(class as i32);
            for p in 0..SIDE * SIDE {
                let noise = self.uniform() - 0.5;
                images.push(self.patterns[class][p] + noise);
            }
        }
        Ok((
            Tensor::from_slice(&images, [BATCH, SIDE, SIDE, 1], device)?,
            Tensor::from_slice(&labels, [BATCH], device)?,
        ))
    }
}
