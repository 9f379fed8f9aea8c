//! Real inference work on cpu:0 next to TensorFlow's own CPU runtime in the same run:
//! - `conv2d_3x3_56x56x64_b8_f32`, `conv2d_3x3_28x28x256_b8_f32`: one 3x3 SAME
//!   convolution, 64 to 64 channels (3.7 GFLOP) and 256 to 256 (14.8), batch 8, with the
//!   machine's FMA peak in `fma_peak_avx512` of the `cpu` bench;
//!   `conv2d_3x3_28x28x1_b32_f32`, `conv2d_3x3_64x64x3_b16_f32`: first layers (one channel
//!   to 32 at batch 32, the MNIST CNN's; three to 32 at batch 16), the direct kernel of
//!   few channels;
//! - `conv1d_k5_128x64_b16_f32`: Keras's `Conv1D` (the text CNN's widest layer, width 5,
//!   64 to 64 channels, VALID), as TensorFlow runs it;
//! - `model_cnn`, `model_mobilenet_v2`: `Session::run` of the frozen models of
//!   `shared/tf-golden/models` at batch 2 and 32;
//! - `model_keras_lstm`, `model_keras_gru`, `model_keras_attention`, `model_keras_unet`,
//!   `model_keras_resnet50`: Keras models frozen the TensorFlow 2 way by
//!   `tests/python/keras_models.py` (made into `target/keras-bench` at the start), at batch
//!   1 and 32.
//!
//! - `gpu_conv2d_3x3_28x28x32_b2_f32`, `gpu_model_cnn`, `gpu_model_mobilenet_v2`: the direct
//!   window kernels and the models at batch 2 on the first device of every GPU backend
//!   present (OpenCL, wgpu, CUDA), cpu:0 beside them; on PoCL and lavapipe this measures
//!   the backends' overhead, not GPU speed.
//!
//! - `zoo_resnet50`, `zoo_densenet121`, `zoo_inception_v3`, `zoo_xception`,
//!   `zoo_efficientnet_b0`, `zoo_mobilenet_v3_small`, `zoo_vgg16`,
//!   `zoo_transformer_encoder`, `zoo_text_cnn`: the zoo of issue 50, one Keras network of
//!   each family (`keras.applications` with `weights=None` at 64x64, 96x96 for Inception
//!   and Xception), a transformer encoder block and a text CNN, frozen by
//!   `tests/python/keras_models.py` into `target/zoo-bench`, at batch 1 and 16;
//!   `bf16_zoo_*`: the same in mixed precision, polytensor's `bf16_weights` beside
//!   TensorFlow's `auto_mixed_precision_onednn_bfloat16`;
//! - `conv2d_bf16_weights_*`: the mixed-precision convolution kernels (implicit GEMM and
//!   Winograd's), each with its f32 filter and with it rounded to bf16.
//!
//! - `train_step_mnist_cnn_b32`, `train_step_mlp_b32`, `train_step_text_b32`,
//!   `train_step_lstm_b32`: one training step (forward, backward, optimizer) of Keras's
//!   MNIST CNN, an MLP, a text classifier (sparse Adagrad) and an LSTM classifier (its
//!   gradient through a `While`) at batch 32, the graph `Graph::minimize` writes
//!   (`benches::training`), beside TensorFlow running that graph.
//!
//! - `saved_model_load_and_first_run`: `SavedModel::load` of a SavedModel directory plus
//!   its first signature call (the time to a first result), for three SavedModels
//!   `tests/python/saved_models.py` makes into `target/saved-models-bench` (a Keras
//!   MobileNetV3Small, a module with `tf.cond` and `tf.while_loop`, one with lookup
//!   tables), next to `tf.saved_model.load` plus its first call (issue 49's goal: 10x).
//!
//! TensorFlow (`tensorflow-cpu` in `target/tf-venv`) runs with as many intra-op threads as
//! polytensor's pool has, and one inter-op thread; it is skipped, saying why, without the
//! venv.

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;

use benches::tensorflow::{workspace, TensorFlow};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use polytensor::graph::{Graph, Session, SessionOptions};
use polytensor::{Conv2dOptions, DataType, Device, Padding};

fn cpu() -> Arc<dyn Device> {
    polytensor::device("cpu:0").expect("the CPU device")
}

fn threads() -> usize {
    rayon::current_num_threads()
}

/// A SAME `k x k` convolution of `[n, h, w, ch]` f32 images to `o` channels on `device`:
/// the image, the filter, the options, and its floating-point operations.
fn conv_case(
    [n, h, w, ch, k, o]: [usize; 6],
    device: &Arc<dyn Device>,
) -> (polytensor::Tensor, polytensor::Tensor, Conv2dOptions, u64) {
    let x = benches::tensor(&[n, h, w, ch], DataType::Float, 1, device);
    let f = benches::tensor(&[k, k, ch, o], DataType::Float, 2, device);
    let options = Conv2dOptions {
        padding: Padding::Same,
        ..Default::default()
    };
    (x, f, options, (2 * n * h * w * k * k * ch * o) as u64)
}

fn conv2d(c: &mut Criterion) {
    let device = cpu();
    // ResNet's first stage, and VGG's and ResNet's middle layers (both run by Winograd's
    // F(2x2, 3x3) on the CPU); first layers of one and three channels (the MNIST CNN's, a
    // picture's), run directly.
    for [n, h, w, ch, k, o] in [
        [8, 56, 56, 64, 3, 64],
        [8, 28, 28, 256, 3, 256],
        [32, 28, 28, 1, 3, 32],
        [16, 64, 64, 3, 3, 32],
    ] {
        let (x, f, options, flops) = conv_case([n, h, w, ch, k, o], &device);
        let mut group = c.benchmark_group(format!("conv2d_{k}x{k}_{h}x{w}x{ch}_b{n}_f32"));
        group.throughput(Throughput::Elements(flops));
        group.bench_function("polytensor", |b| {
            b.iter(|| black_box(x.conv2d(&f, &options).unwrap()))
        });
        if let Some(mut tf) = TensorFlow::start() {
            tf.load_conv2d([n, h, w, ch, k, o], threads());
            group.bench_function("tensorflow", |b| b.iter_custom(|iters| tf.time(iters)));
        }
        group.finish();
    }
}

/// Keras's `Conv1D` as TensorFlow runs it (`[1, k]` windows, VALID, on `[n, 1, w, c]`):
/// the text CNN's widest layer, whose windows the implicit GEMM reads in place.
fn conv1d(c: &mut Criterion) {
    let device = cpu();
    let [n, w, ch, k, o] = [16, 128, 64, 5, 64];
    let x = benches::tensor(&[n, 1, w, ch], DataType::Float, 1, &device);
    let f = benches::tensor(&[1, k, ch, o], DataType::Float, 2, &device);
    let options = Conv2dOptions::default();
    let flops = 2 * n * (w - k + 1) * k * ch * o;
    let mut group = c.benchmark_group(format!("conv1d_k{k}_{w}x{ch}_b{n}_f32"));
    group.throughput(Throughput::Elements(flops as u64));
    group.bench_function("polytensor", |b| {
        b.iter(|| black_box(x.conv2d(&f, &options).unwrap()))
    });
    if let Some(mut tf) = TensorFlow::start() {
        tf.load_conv1d([n, w, ch, k, o], threads());
        group.bench_function("tensorflow", |b| b.iter_custom(|iters| tf.time(iters)));
    }
    group.finish();
}

/// The mixed-precision convolution (`GraphOptimizations::bf16_weights`): a pointwise and a
/// 3x3 stride-2 layer (implicit GEMMs) and a 3x3 stride-1 one (Winograd's), each with its
/// f32 filter and with the filter rounded to bf16 (on a CPU without AVX512-BF16 the bf16
/// rows widen the filter and run the f32 kernels).
fn conv2d_bf16_weights(c: &mut Criterion) {
    let device = cpu();
    for (name, [n, h, w, ch, k, o], stride) in [
        ("1x1_28x28x256_to_512_b8", [8, 28, 28, 256, 1, 512], 1),
        ("3x3_s2_28x28x128_b8", [8, 28, 28, 128, 3, 128], 2),
        ("3x3_28x28x128_b8", [8, 28, 28, 128, 3, 128], 1),
    ] {
        let (x, f, mut options, flops) = conv_case([n, h, w, ch, k, o], &device);
        options.strides = [stride, stride];
        let rounded = f.cast(DataType::BFloat16).unwrap();
        let mut group = c.benchmark_group(format!("conv2d_bf16_weights_{name}"));
        group.throughput(Throughput::Elements(flops / (stride * stride) as u64));
        for (label, filter) in [("f32", &f), ("bf16", &rounded)] {
            group.bench_function(label, |b| {
                b.iter(|| black_box(x.conv2d(filter, &options).unwrap()))
            });
        }
        group.finish();
    }
}

/// Filters packed once (`GraphOptimizations::packed_filters`, `PackedFilter`): eight late
/// layers of a small image in turn (ResNet50's and VGG16's last 3x3 layers at batch 1,
/// 75 MB of filters, and ResNet50's last 1x1 layers, 34 MB: past the caches as in a
/// model's run), each filter as given and packed in strips. At 2x2 pixels the GEMM has 4
/// rows (`few_rows`).
fn conv2d_packed_filters(c: &mut Criterion) {
    let device = cpu();
    for [n, h, w, ch, k, o] in [
        [1, 4, 4, 512, 3, 512],
        [1, 2, 2, 512, 3, 512],
        [1, 2, 2, 2048, 1, 512],
    ] {
        let layers: Vec<_> = (0..8)
            .map(|seed| {
                let (x, _, options, flops) = conv_case([n, h, w, ch, k, o], &device);
                let f = benches::tensor(&[k, k, ch, o], DataType::Float, 10 + seed, &device);
                let packed = polytensor::PackedFilter::new(&f).unwrap();
                (x, f, packed, options, flops)
            })
            .collect();
        let flops = layers.iter().map(|l| l.4).sum();
        let mut group =
            c.benchmark_group(format!("conv2d_packed_filters_{k}x{k}_{h}x{w}x{ch}_b{n}"));
        group.throughput(Throughput::Elements(flops));
        group.bench_function("as_given", |b| {
            b.iter(|| {
                for (x, f, _, options, _) in &layers {
                    black_box(x.conv2d(f, options).unwrap());
                }
            })
        });
        group.bench_function("packed", |b| {
            b.iter(|| {
                for (x, f, packed, options, _) in &layers {
                    black_box(match packed {
                        Some(p) => x.conv2d_packed(p, options, &Default::default()).unwrap(),
                        None => x.conv2d(f, options).unwrap(),
                    });
                }
            })
        });
        group.finish();
    }
}

fn models(c: &mut Criterion) {
    let dir = workspace().join("../shared/tf-golden/models");
    if !dir.is_dir() {
        eprintln!("model benchmarks skipped: no {}", dir.display());
        return;
    }
    let device = cpu();
    let mut tf = TensorFlow::start();
    for model in ["cnn", "mobilenet_v2"] {
        let path = dir.join(format!("{model}.pb"));
        let mut group = c.benchmark_group(format!("model_{model}"));
        group.sample_size(10);
        for batch in [2, 32] {
            let (mut session, run) = session(&path, batch, &device);
            group.bench_function(
                BenchmarkId::new("polytensor", format!("batch_{batch}")),
                |b| b.iter(|| black_box(run(&mut session))),
            );
            if let Some(tf) = tf.as_mut() {
                tf.load_model(&path, batch, threads());
                group.bench_function(
                    BenchmarkId::new("tensorflow", format!("batch_{batch}")),
                    |b| b.iter_custom(|iters| tf.time(iters)),
                );
            }
        }
        group.finish();
    }
}

/// The Keras models of `tests/python/keras_models.py` the speed goal names (issue 48): an
/// LSTM and a GRU text classifier, the attention block, the U-Net, ResNet50 at 64x64.
const KERAS: [&str; 5] = [
    "keras_lstm",
    "keras_gru",
    "keras_attention",
    "keras_unet",
    "keras_resnet50",
];

/// `Session::run` of each [`KERAS`] model at batch 1 and 32, TensorFlow beside it.
fn keras(c: &mut Criterion) {
    if let Some(dir) = benches::tensorflow::keras_models(&KERAS) {
        frozen_models(c, &dir, &KERAS, "model_", [1, 32], Precision::F32);
    }
}

/// How a model runs: in f32, or in mixed precision (polytensor's
/// `GraphOptimizations::bf16_weights`, TensorFlow's `auto_mixed_precision_onednn_bfloat16`).
#[derive(Clone, Copy, PartialEq)]
enum Precision {
    F32,
    Bf16,
}

/// A group `{prefix}{name}` per frozen Keras model of `dir`: `Session::run` on cpu:0 at each
/// of `batches` in `precision`, TensorFlow beside it in the same precision.
fn frozen_models(
    c: &mut Criterion,
    dir: &Path,
    names: &[&str],
    prefix: &str,
    batches: [usize; 2],
    precision: Precision,
) {
    let device = cpu();
    let mut tf = TensorFlow::start();
    for model in names {
        let path = dir.join(format!("{model}.pb"));
        let mut group = c.benchmark_group(format!("{prefix}{model}"));
        group.sample_size(10);
        for batch in batches {
            let (session, run) = frozen_session(&path, batch, &device, precision);
            group.bench_function(
                BenchmarkId::new("polytensor", format!("batch_{batch}")),
                |b| b.iter(|| black_box(run(&session))),
            );
            if let Some(tf) = tf.as_mut() {
                match precision {
                    Precision::F32 => tf.load_frozen(&path, batch, threads()),
                    Precision::Bf16 => tf.load_frozen_bf16(&path, batch, threads()),
                }
                group.bench_function(
                    BenchmarkId::new("tensorflow", format!("batch_{batch}")),
                    |b| b.iter_custom(|iters| tf.time(iters)),
                );
            }
        }
        group.finish();
    }
}

/// A session of the frozen Keras model at `path` and a closure that runs it on a batch of
/// `batch` made as its sidecar says (integers below its vocabulary, else seeded floats).
#[allow(clippy::type_complexity)]
fn frozen_session(
    path: &Path,
    batch: usize,
    device: &Arc<dyn Device>,
    precision: Precision,
) -> (Session, Box<dyn Fn(&Session) -> Vec<polytensor::Tensor>>) {
    let sidecar: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path.with_extension("json")).expect("sidecar"))
            .expect("sidecar JSON");
    let graph = Graph::from_graph_def_bytes(&std::fs::read(path).expect("model")).expect("import");
    let spec = &sidecar["input"];
    let input = graph
        .tensor(spec["name"].as_str().expect("input name"))
        .expect("input");
    let mut dims = vec![batch];
    dims.extend(
        spec["shape"]
            .as_array()
            .expect("input shape")
            .iter()
            .map(|d| d.as_u64().expect("a dim") as usize),
    );
    let feed = match spec["vocabulary"].as_u64() {
        Some(vocabulary) => {
            let n: usize = dims.iter().product();
            let ids: Vec<i32> = (0..n as u64)
                .map(|i| (i * 7919 % vocabulary) as i32)
                .collect();
            polytensor::Tensor::from_slice(&ids, dims, device).expect("ids")
        }
        None => benches::tensor(&dims, DataType::Float, 3, device),
    };
    let fetches: Vec<_> = sidecar["fetches"]
        .as_array()
        .expect("fetches")
        .iter()
        .map(|f| graph.tensor(f.as_str().expect("a fetch")).expect("fetch"))
        .collect();
    let mut options = SessionOptions::new(vec![device.clone()]);
    options.optimizations.bf16_weights = precision == Precision::Bf16;
    let session = Session::with_options(&graph, options).expect("session");
    let run = move |s: &Session| {
        let fetches: Vec<_> = fetches.iter().collect();
        s.run(&[(&input, &feed)], &fetches, &[]).expect("run")
    };
    (session, Box::new(run))
}

/// The zoo of issue 50: one Keras network of each family people run (residual, densely
/// connected, inception-style, separable, squeeze-excite, plain VGG-style), a transformer
/// encoder block and a text CNN, frozen by `tests/python/keras_models.py` into
/// `target/zoo-bench` (made once; hundreds of MB, never committed).
const ZOO: [&str; 9] = [
    "zoo_resnet50",
    "zoo_densenet121",
    "zoo_inception_v3",
    "zoo_xception",
    "zoo_efficientnet_b0",
    "zoo_mobilenet_v3_small",
    "zoo_vgg16",
    "zoo_transformer_encoder",
    "zoo_text_cnn",
];

/// `Session::run` of each [`ZOO`] model at batch 1 and 16, TensorFlow beside it (issue 50's
/// goal: polytensor at 0.8x TensorFlow's time or less on each row).
fn zoo(c: &mut Criterion) {
    if let Some(dir) = benches::tensorflow::zoo_models(&ZOO) {
        frozen_models(c, &dir, &ZOO, "", [1, 16], Precision::F32);
    }
}

/// The zoo in mixed precision: polytensor's `bf16_weights` (weights rounded to bf16, f32
/// sums and activations) beside TensorFlow's `auto_mixed_precision_onednn_bfloat16`
/// (oneDNN's bf16 convolutions and matmuls, their activations in bf16 too), at batch 1 and
/// 16. On a CPU without AVX512-BF16 both run f32.
fn zoo_bf16(c: &mut Criterion) {
    if let Some(dir) = benches::tensorflow::zoo_models(&ZOO) {
        frozen_models(c, &dir, &ZOO, "bf16_", [1, 16], Precision::Bf16);
    }
}

/// cpu:0 and the first device of each GPU backend that has one.
fn gpu_devices() -> Vec<Arc<dyn Device>> {
    ["cpu", "opencl", "wgpu", "cuda"]
        .into_iter()
        .filter_map(
            |backend| match polytensor::device(&format!("{backend}:0")) {
                Ok(device) => Some(device),
                Err(e) => {
                    eprintln!("{backend} rows skipped: {e}");
                    None
                }
            },
        )
        .collect()
}

fn gpu(c: &mut Criterion) {
    let devices = gpu_devices();
    let mut group = c.benchmark_group("gpu_conv2d_3x3_28x28x32_b2_f32");
    for device in &devices {
        let (x, f, options, flops) = conv_case([2, 28, 28, 32, 3, 32], device);
        group.throughput(Throughput::Elements(flops));
        group.bench_function(device.name(), |b| {
            b.iter(|| {
                black_box(benches::finished(device, || {
                    x.conv2d(&f, &options).unwrap()
                }))
            })
        });
    }
    group.finish();
    let dir = workspace().join("../shared/tf-golden/models");
    if !dir.is_dir() {
        eprintln!("model benchmarks skipped: no {}", dir.display());
        return;
    }
    for model in ["cnn", "mobilenet_v2"] {
        let path = dir.join(format!("{model}.pb"));
        let mut group = c.benchmark_group(format!("gpu_model_{model}"));
        group.sample_size(10);
        for device in &devices {
            let (mut session, run) = session(&path, 2, device);
            group.bench_function(BenchmarkId::new(device.name(), "batch_2"), |b| {
                b.iter(|| {
                    let probs = run(&mut session);
                    device.synchronize().expect("synchronize");
                    black_box(probs)
                })
            });
        }
        group.finish();
    }
}

/// A session of the model at `path` and a closure that runs it on a batch of `batch`.
#[allow(clippy::type_complexity)]
fn session(
    path: &Path,
    batch: usize,
    device: &Arc<dyn Device>,
) -> (Session, Box<dyn Fn(&mut Session) -> polytensor::Tensor>) {
    let graph = Graph::from_graph_def_bytes(&std::fs::read(path).expect("model")).expect("import");
    let input = graph.tensor("input:0").expect("input:0");
    let probs = graph.tensor("probs:0").expect("probs:0");
    let mut dims: Vec<usize> = vec![batch];
    dims.extend(
        input.shape().dims().expect("known rank")[1..]
            .iter()
            .map(|d| d.expect("known dims")),
    );
    let feed = benches::tensor(&dims, DataType::Float, 3, device);
    let session = Session::new(&graph, device.clone());
    let run = move |s: &mut Session| {
        s.run(&[(&input, &feed)], &[&probs], &[])
            .expect("run")
            .remove(0)
    };
    (session, Box::new(run))
}

/// `SavedModel::load` plus the first call of the signature `index.json` records, on cpu:0,
/// next to `tf.saved_model.load` plus its first call.
fn saved_model(c: &mut Criterion) {
    let Some(dir) = benches::tensorflow::saved_models() else {
        return;
    };
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("index.json")).expect("index.json"))
            .expect("index.json");
    let device = cpu();
    let mut tf = TensorFlow::start();
    let mut group = c.benchmark_group("saved_model_load_and_first_run");
    group.sample_size(10);
    for name in ["keras_mobilenet_v3_small", "control_flow", "lookup"] {
        let case = index["cases"]
            .as_array()
            .and_then(|cases| cases.iter().find(|c| c["name"] == name))
            .expect("the case in index.json");
        let call = &case["runs"][0];
        let signature = call["signature"].as_str().expect("signature").to_string();
        let feeds: Vec<(String, polytensor::Tensor)> = call["feeds"]
            .as_object()
            .expect("feeds")
            .iter()
            .map(|(key, spec)| (key.clone(), benches::tensor_from_json(spec, &device)))
            .collect();
        let path = dir.join(name);
        group.bench_function(BenchmarkId::new("polytensor", name), |b| {
            b.iter(|| {
                let model = polytensor::saved_model::SavedModel::load(
                    &path,
                    &["serve"],
                    polytensor::graph::SessionOptions::new(vec![device.clone()]),
                )
                .expect("load");
                let refs: Vec<(&str, &polytensor::Tensor)> =
                    feeds.iter().map(|(k, t)| (k.as_str(), t)).collect();
                black_box(model.run(&signature, &refs).expect("run"))
            })
        });
        if let Some(tf) = tf.as_mut() {
            tf.load_saved_model(&path);
            group.bench_function(BenchmarkId::new("tensorflow", name), |b| {
                b.iter_custom(|iters| tf.time(iters))
            });
        }
    }
    group.finish();
}

/// One training step (forward, backward and Adam) of Keras's MNIST CNN and of an MLP at
/// batch 32, of a text classifier with Adagrad (its embedding updated sparsely), and of an
/// LSTM classifier whose gradient runs through its `While` (batch 32, 16 steps), the graph
/// `Graph::minimize` writes, run by polytensor and by TensorFlow.
fn training(c: &mut Criterion) {
    let device = cpu();
    let dir = workspace().join("target/training-bench");
    let mut steps = vec![
        ("mnist_cnn", benches::training::mnist_cnn(32, &device)),
        ("mlp", benches::training::mlp(32, &device)),
        ("text", benches::training::text_classifier(32, &device)),
    ];
    if let Some(dir) = benches::tensorflow::recurrent_model() {
        steps.push(("lstm", benches::training::recurrent(&dir, &device)));
    }
    let mut tf = TensorFlow::start();
    for (name, step) in steps {
        let step = step.expect("the training graph");
        let session = Session::with_options(&step.graph, SessionOptions::new(vec![device.clone()]))
            .expect("a session");
        let init: Vec<_> = step.init.iter().collect();
        session.run(&[], &[], &init).expect("initialised");
        let feeds: Vec<_> = step.feeds.iter().map(|(p, v)| (p, v)).collect();
        let mut group = c.benchmark_group(format!("train_step_{name}_b32"));
        group.bench_function("polytensor", |b| {
            b.iter(|| black_box(session.run(&feeds, &[], &[&step.step]).unwrap()))
        });
        if let Some(tf) = tf.as_mut() {
            tf.load_training(&step.write(&dir, name).expect("written"), threads());
            group.bench_function("tensorflow", |b| b.iter_custom(|iters| tf.time(iters)));
            // TensorFlow's own training graph of the model, where it wrote one: its
            // gradient through the loop keeps the forward's intermediates, polytensor's
            // recomputes them.
            let own = dir.join("recurrent").join(format!("{name}_tensorflow.pb"));
            if own.exists() {
                tf.load_training(&own, threads());
                group.bench_function("tensorflow_own_graph", |b| {
                    b.iter_custom(|iters| tf.time(iters))
                });
            }
        }
        group.finish();
    }
}

criterion_group! {
    name = model_benches;
    config = benches::criterion_config();
    targets = training, conv2d, conv1d, conv2d_bf16_weights, conv2d_packed_filters, models, keras, zoo, zoo_bf16, saved_model, gpu
}
criterion_main!(model_benches);
