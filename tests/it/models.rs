//! Real TensorFlow models: each frozen inference graph of `shared/tf-golden/models` (an MLP,
//! a small CNN and MobileNetV2, written and run by TensorFlow 2.21), and the Keras models
//! `tests/python/keras_models.py` builds and freezes the TensorFlow 2 way with the
//! TensorFlow of `target/tf-venv` (recurrent layers, attention, a U-Net, dilated and
//! grouped convolutions, `keras.applications` networks), imported and run on every device
//! here, their outputs within the model's own tolerance of TensorFlow's:
//! `max|got - want| <= rtol * max|want| + atol` per fetched tensor.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::golden;
use polytensor::graph::{
    Graph, GraphOptimizations, RunOptions, Session, SessionOptions, StepStats, Trace,
};
use polytensor::{Device, Tensor};
use serde_json::Value as Json;

/// Each model's name and JSON sidecar in `dir`, a folder laid out as
/// `shared/tf-golden/models` (`index.json`, `NAME.pb`, `NAME.json`).
fn models(dir: &Path) -> Vec<(String, Json)> {
    let index: Json =
        serde_json::from_slice(&std::fs::read(dir.join("index.json")).unwrap()).unwrap();
    index["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|model| {
            let name = model["name"].as_str().unwrap().to_string();
            let json = std::fs::read(dir.join(format!("{name}.json"))).unwrap();
            (name, serde_json::from_slice(&json).unwrap())
        })
        .collect()
}

/// A model's feeds (on `device`) and fetches, as its sidecar names them.
fn feeds_and_fetches(
    model: &Json,
    device: &Arc<dyn Device>,
) -> (Vec<(String, Tensor)>, Vec<String>) {
    let feeds = model["feeds"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, spec)| (name.clone(), golden::tensor(spec, device)))
        .collect();
    let fetches = model["fetches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    (feeds, fetches)
}

/// The sidecar and the graph of golden model `name` of `dir`.
fn golden_model(dir: &Path, name: &str) -> (Json, Graph) {
    let json = std::fs::read(dir.join(format!("{name}.json"))).unwrap();
    let pb = std::fs::read(dir.join(format!("{name}.pb"))).unwrap();
    (
        serde_json::from_slice(&json).unwrap(),
        Graph::from_graph_def_bytes(&pb).unwrap(),
    )
}

/// The largest absolute difference between two float tensors, and the largest `|want|`.
fn differences(got: &Tensor, want: &Tensor) -> (f64, f64) {
    let got = got.cast(polytensor::DataType::Double).unwrap();
    let want = want.cast(polytensor::DataType::Double).unwrap();
    let (g, w) = (got.to_vec::<f64>().unwrap(), want.to_vec::<f64>().unwrap());
    let diff = g
        .iter()
        .zip(&w)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0, f64::max);
    (diff, w.iter().map(|w| w.abs()).fold(0.0, f64::max))
}

/// Run `model` of `dir` once on `device` and check every fetch against TensorFlow's.
fn run_model(dir: &Path, name: &str, model: &Json, device: &Arc<dyn Device>) {
    let graph = Graph::read_graph_def(dir.join(format!("{name}.pb")))
        .unwrap_or_else(|e| panic!("{name}: import: {e}"));
    let session = Session::new(&graph, device.clone());
    let (feeds, fetches) = feeds_and_fetches(model, device);
    let feeds: Vec<(&str, &Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
    let values = session
        .run_by_name(&feeds, &fetches, &[])
        .unwrap_or_else(|e| panic!("{name} on {}: {e}", device.name()));
    let (rtol, atol) = (
        model["tolerance"]["rtol"].as_f64().unwrap(),
        model["tolerance"]["atol"].as_f64().unwrap(),
    );
    let cpu = polytensor::device("cpu:0").unwrap();
    for (fetch, got) in fetches.iter().zip(values) {
        let want = golden::tensor(&model["expected"][*fetch], &cpu);
        assert_eq!(got.dtype(), want.dtype(), "{name} {fetch}: dtype");
        assert_eq!(got.dims(), want.dims(), "{name} {fetch}: shape");
        let (diff, scale) = differences(&got.to_device(&cpu).unwrap(), &want);
        let bound = rtol * scale + atol;
        eprintln!(
            "{name} on {}: {fetch}: max|got - want| = {diff:.3e} (bound {bound:.3e})",
            device.name()
        );
        assert!(
            diff <= bound,
            "{name} on {}: {fetch}: max|got - want| = {diff:e} > {bound:e}",
            device.name()
        );
    }
}

#[test]
fn tensorflow_models_match_tensorflow_on_every_device() {
    let Some(dir) = golden::dir("models") else {
        return;
    };
    let models = models(&dir);
    for device in golden::devices() {
        for (name, model) in &models {
            run_model(&dir, name, model, &device);
        }
    }
}

/// The folder of frozen Keras models: `POLYTENSOR_KERAS_MODELS` where set (made elsewhere,
/// as on a GPU machine without TensorFlow), else made by `tests/python/keras_models.py`
/// under `target/keras-models/`, once per version of the script.
fn keras_models() -> Option<PathBuf> {
    common::generated(
        "keras_models.py",
        "keras-models",
        "tensorflow, keras",
        "POLYTENSOR_KERAS_MODELS",
    )
}

/// The Keras models, frozen the TensorFlow 2 way, on every device (cpu, opencl and wgpu in
/// CI; cuda where there is one).
#[test]
fn keras_models_match_tensorflow_on_every_device() {
    let Some(dir) = keras_models() else {
        return;
    };
    let models = models(&dir);
    assert!(!models.is_empty(), "{} holds no models", dir.display());
    for device in golden::devices() {
        for (name, model) in &models {
            run_model(&dir, name, model, &device);
        }
    }
}

/// A second run of `graph` on cpu:0 with `optimizations` (the first also decodes the
/// constants): its values, and the steps it ran.
fn run_optimised(
    name: &str,
    graph: &Graph,
    feeds: &[(&str, &Tensor)],
    fetches: &[&str],
    optimizations: GraphOptimizations,
) -> (Vec<Tensor>, StepStats) {
    let cpu = polytensor::device("cpu:0").unwrap();
    let mut options = SessionOptions::new(vec![cpu]);
    options.optimizations = optimizations;
    let session = Session::with_options(graph, options).unwrap();
    let trace = Trace::new();
    let traced = RunOptions {
        trace: Some(trace.clone()),
        ..RunOptions::default()
    };
    session.run_by_name(feeds, fetches, &[]).unwrap();
    let values = session
        .run_by_name_with(&traced, feeds, fetches, &[])
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    (values, trace.take())
}

/// How a test runs one Keras model: on cpu:0 with the optimizations given, its outputs and
/// trace ([`run_optimised`]).
type RunWith<'a> = &'a dyn Fn(GraphOptimizations) -> (Vec<Tensor>, StepStats);

/// `check(name, sidecar, fetches, run)` for every Keras model of `dir`, each fed as its
/// sidecar says.
fn for_every_keras_model(dir: &Path, mut check: impl FnMut(&str, &Json, &[&str], RunWith<'_>)) {
    let cpu = polytensor::device("cpu:0").unwrap();
    for (name, model) in &models(dir) {
        let graph = Graph::read_graph_def(dir.join(format!("{name}.pb"))).unwrap();
        let (feeds, fetches) = feeds_and_fetches(model, &cpu);
        let feeds: Vec<(&str, &Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
        let run = |optimizations| run_optimised(name, &graph, &feeds, &fetches, optimizations);
        check(name, model, &fetches, &run);
    }
}

/// The graph passes (constant folding, remapping) keep every Keras model's results: each
/// runs on cpu:0 with every pass on (the default) and with none, within the model's
/// tolerance of each other, and the passes leave fewer kernels to run.
#[test]
fn graph_optimizations_keep_every_keras_models_results() {
    let Some(dir) = keras_models() else {
        return;
    };
    let mut fewer = false;
    for_every_keras_model(&dir, |name, model, fetches, run| {
        let (optimised, steps) = run(GraphOptimizations::default());
        let (plain, plain_steps) = run(GraphOptimizations::NONE);
        let (kernels, plain_kernels) = (steps.nodes.len(), plain_steps.nodes.len());
        if name == "keras_resnet50" {
            // Every residual `AddV2` and the `Relu` after it run in a convolution's step.
            let ops = |op: &str| steps.nodes.iter().filter(|n| n.op == op).count();
            let residuals = ops("Conv2D+BiasAdd+Mul+AddV2+AddV2+Relu");
            assert_eq!((residuals, ops("AddV2"), ops("Relu")), (16, 0, 0), "{name}");
        }
        if name == "keras_mobilenet_v3_small" {
            // Every hard swish (four ops) runs as one step.
            let ops = |op: &str| steps.nodes.iter().filter(|n| n.op == op).count();
            let fused = ops("AddV2+Relu6+RealDiv+Mul");
            assert!(
                fused > 0 && ops("RealDiv") == 0,
                "{name}: {fused} hard swishes fused"
            );
        }
        // Every layer normalization (Keras 3's ten ops) runs as one step.
        let unfused = steps.nodes.iter().filter(|n| n.op == "Rsqrt").count();
        assert_eq!(unfused, 0, "{name}: a layer normalization left unfused");
        // Plans with TensorFlow 1.x control flow (a lowered loop) are not rewritten.
        assert!(
            kernels <= plain_kernels,
            "{name}: {kernels} kernels optimised, {plain_kernels} without"
        );
        fewer |= kernels < plain_kernels;
        let (rtol, atol) = (
            model["tolerance"]["rtol"].as_f64().unwrap(),
            model["tolerance"]["atol"].as_f64().unwrap(),
        );
        for ((fetch, got), want) in fetches.iter().zip(&optimised).zip(&plain) {
            if !got.dtype().is_float() {
                assert_eq!(
                    got.to_bytes().unwrap(),
                    want.to_bytes().unwrap(),
                    "{name} {fetch}"
                );
                continue;
            }
            let (diff, scale) = differences(got, want);
            assert!(
                diff <= rtol * scale + atol,
                "{name} {fetch}: optimised and plain differ by {diff:e}"
            );
        }
        eprintln!("{name}: {kernels} kernels optimised, {plain_kernels} without");
    });
    assert!(fewer, "no model ran fewer kernels optimised");
}

/// Independent branches run side by side (`GraphOptimizations::parallel_branches`, on by
/// default) give every Keras model the bits of its steps run one after another, and the
/// same kernels.
#[test]
fn branches_side_by_side_keep_every_keras_models_bits() {
    let Some(dir) = keras_models() else {
        return;
    };
    for_every_keras_model(&dir, |name, _, fetches, run| {
        let (together, steps) = run(GraphOptimizations::default());
        let (in_order, in_order_steps) = run(GraphOptimizations {
            parallel_branches: false,
            ..GraphOptimizations::default()
        });
        let ops = |stats: &StepStats| {
            let mut ops: Vec<String> = stats.nodes.iter().map(|n| n.op.clone()).collect();
            ops.sort();
            ops
        };
        assert_eq!(ops(&steps), ops(&in_order_steps), "{name}");
        for ((fetch, got), want) in fetches.iter().zip(&together).zip(&in_order) {
            assert_eq!(
                got.to_bytes().unwrap(),
                want.to_bytes().unwrap(),
                "{name} {fetch}"
            );
        }
    });
}

/// The opt-in bf16 pass (`GraphOptimizations::bf16_weights`) keeps every Keras model within
/// bf16's rounding of its f32 results (2% of the largest value: 8 significant bits through
/// up to 50 layers), runs the same kernels, and changes results only where the CPU
/// multiplies bf16 natively (AVX512-BF16); without that, results keep their bits.
#[test]
fn bf16_weights_stay_near_float32_on_every_keras_model() {
    let Some(dir) = keras_models() else {
        return;
    };
    let native = polytensor::device("cpu:0").unwrap().bf16_weights();
    let mut changed = false;
    for_every_keras_model(&dir, |name, _, fetches, run| {
        let (f32_values, steps) = run(GraphOptimizations::default());
        let mixed = GraphOptimizations {
            bf16_weights: true,
            ..GraphOptimizations::default()
        };
        let (bf16_values, bf16_steps) = run(mixed);
        assert_eq!(steps.nodes.len(), bf16_steps.nodes.len(), "{name}");
        for ((fetch, got), want) in fetches.iter().zip(&bf16_values).zip(&f32_values) {
            if !native || !got.dtype().is_float() {
                assert_eq!(
                    got.to_bytes().unwrap(),
                    want.to_bytes().unwrap(),
                    "{name} {fetch}"
                );
                continue;
            }
            let (diff, scale) = differences(got, want);
            assert!(
                diff <= 2e-2 * scale + 1e-4,
                "{name} {fetch}: bf16 and f32 differ by {diff:e} (largest |f32| {scale:e})"
            );
            changed |= diff > 0.0;
            eprintln!("{name} {fetch}: bf16 {diff:e} from f32 (largest |f32| {scale:e})");
        }
    });
    assert!(
        changed || !native,
        "AVX512-BF16 is here, yet no model's results moved"
    );
}

/// A session fuses a convolution with its batch norm, `Relu6` and the `Pad` before it
/// (`_FusedConv2D`) only where nothing else reads the values the fusion hides: fetching
/// them unfuses those chains, and the model's result stays TensorFlow's.
#[test]
fn fetching_inside_a_fused_chain_unfuses_it() {
    let Some(dir) = golden::dir("models") else {
        return;
    };
    let (model, graph) = golden_model(&dir, "mobilenet_v2");
    let cpu = polytensor::device("cpu:0").unwrap();
    let feed = golden::tensor(&model["feeds"]["input:0"], &cpu);
    let session = Session::new(&graph, cpu.clone());
    let inside = [
        "Conv1/Conv2D:0",
        "bn_Conv1/FusedBatchNormV3:0",
        "Conv1_relu/Relu6:0",
        "block_1_pad/Pad:0",
        "probs:0",
    ];
    let values = session
        .run_by_name(&[("input:0", &feed)], &inside, &[])
        .unwrap();
    assert_eq!(values[0].dims(), [2, 32, 32, 16]);
    assert_eq!(values[3].dims(), [2, 33, 33, 48]);
    // The fetched batch norm, through Relu6, is the fetched Relu6.
    let relu6 = values[1].relu6().unwrap();
    assert_eq!(
        relu6.to_vec::<f32>().unwrap(),
        values[2].to_vec::<f32>().unwrap()
    );
    let want = golden::tensor(&model["expected"]["probs:0"], &cpu);
    let (diff, scale) = differences(&values[4], &want);
    assert!(diff <= 1e-4 * scale + 1e-5, "probs: {diff:e}");
}

/// A layer normalization runs as one step only where nothing else reads the values it
/// hides: fetching its mean unfuses that one (its `Rsqrt` runs again), the other stays
/// fused, and the model's result and the mean are those of the plain ops.
#[test]
fn fetching_inside_a_layer_normalization_unfuses_it() {
    let Some(dir) = keras_models() else {
        return;
    };
    let name = "keras_attention";
    let model = models(&dir)
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, m)| m)
        .expect("the attention model");
    let graph = Graph::read_graph_def(dir.join(format!("{name}.pb"))).unwrap();
    let cpu = polytensor::device("cpu:0").unwrap();
    let (feeds, _) = feeds_and_fetches(&model, &cpu);
    let feeds: Vec<(&str, &Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mean = "functional_6_1/layer_normalization_1/moments/mean:0";
    let fetches = ["Identity:0", mean];
    let run = |optimizations| run_optimised(name, &graph, &feeds, &fetches, optimizations);
    let (fused, steps) = run(GraphOptimizations::default());
    let (plain, _) = run(GraphOptimizations::NONE);
    let ops = |op: &str| steps.nodes.iter().filter(|n| n.op == op).count();
    let fused_norms = steps
        .nodes
        .iter()
        .filter(|n| n.op.starts_with("Mean+SquaredDifference"))
        .count();
    assert_eq!(
        (ops("Rsqrt"), fused_norms),
        (1, 1),
        "one unfused, one fused"
    );
    for ((fetch, got), want) in fetches.iter().zip(&fused).zip(&plain) {
        let (diff, scale) = differences(got, want);
        assert!(diff <= 1e-5 * scale + 1e-6, "{fetch}: {diff:e}");
    }
}

/// A traced run (`RunOptions::trace`, TensorFlow's `trace_level` with `RunMetadata`)
/// records every kernel it runs on every device: the node, its op type (a fused chain's
/// joined by `+`), the device, the time and the outputs, without changing what it returns;
/// TensorFlow's own `RunMetadata` proto and `timeline.Timeline` read what it writes.
#[test]
fn a_traced_run_records_every_kernel_and_tensorflow_reads_its_run_metadata() {
    let Some(dir) = golden::dir("models") else {
        return;
    };
    let (model, graph) = golden_model(&dir, "mobilenet_v2");
    let cpu = polytensor::device("cpu:0").unwrap();
    let want = golden::tensor(&model["expected"]["probs:0"], &cpu);
    for device in golden::devices() {
        let feed = golden::tensor(&model["feeds"]["input:0"], &device);
        let session = Session::new(&graph, device.clone());
        let trace = Trace::new();
        let options = RunOptions {
            trace: Some(trace.clone()),
            ..RunOptions::default()
        };
        for _ in 0..2 {
            let values = session
                .run_by_name_with(&options, &[("input:0", &feed)], &["probs:0"], &[])
                .unwrap();
            let (diff, scale) = differences(&values[0].to_device(&cpu).unwrap(), &want);
            assert!(diff <= 1e-4 * scale + 1e-5, "traced probs: {diff:e}");
        }
        let stats = trace.take();
        assert_eq!(stats.runs, 2);
        assert!(
            trace.stats().nodes.is_empty(),
            "take leaves the trace empty"
        );
        // Both runs record the same steps; the first also runs the `Const` kernels.
        let per_run = stats.nodes.iter().filter(|n| n.node == "probs").count();
        assert_eq!(per_run, 2, "{}", device.name());
        for node in &stats.nodes {
            assert!(graph.operation(&node.node).is_some(), "{}", node.node);
            assert_eq!(node.device, device.name());
        }
        let probs = stats.nodes.iter().rfind(|n| n.node == "probs").unwrap();
        assert_eq!(probs.op, "Softmax");
        assert_eq!(probs.output_bytes(), want.num_elements() as u64 * 4);
        assert_eq!(probs.outputs[0].shape.dims().to_vec(), want.dims());
        let ops = stats.by_op_type();
        assert!(
            ops.iter()
                .any(|o| o.op == "Conv2D+FusedBatchNormV3+Relu6" && o.count >= 2),
            "{:?}",
            ops.iter().map(|o| &o.op).collect::<Vec<_>>()
        );
        assert!(stats.kernel_time() <= stats.wall, "{}", device.name());
        let summary = stats.summary(5);
        assert!(summary.starts_with("2 run(s)"), "{summary}");
        let chrome: Json = serde_json::from_str(&stats.chrome_trace()).unwrap();
        let events = chrome["traceEvents"].as_array().unwrap();
        assert_eq!(
            events.len(),
            stats.nodes.len() + 1,
            "a step each and the device row"
        );

        let Some(python) = common::TENSORFLOW.python("tensorflow") else {
            continue;
        };
        let path = std::env::temp_dir().join(format!(
            "polytensor-run-metadata-{}-{}.pb",
            std::process::id(),
            device.name().replace(':', "-")
        ));
        std::fs::write(&path, stats.run_metadata_proto()).unwrap();
        let read: Json = serde_json::from_str(&common::run_script(
            &python,
            "run_metadata.py",
            &[path.as_os_str()],
        ))
        .unwrap();
        std::fs::remove_file(&path).ok();
        assert_eq!(read["devices"], serde_json::json!([device.name()]));
        assert_eq!(read["nodes"], stats.nodes.len());
        assert_eq!(read["complete_events"], stats.nodes.len());
        let bytes: u64 = stats.nodes.iter().map(|n| n.output_bytes()).sum();
        assert_eq!(read["output_bytes"], bytes);
        let micros: u64 = stats
            .nodes
            .iter()
            .map(|n| n.duration.as_micros() as u64)
            .sum();
        assert_eq!(read["micros"], micros);
    }
}
