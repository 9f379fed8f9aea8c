//! Training against TensorFlow: `tests/python/tf_training.py` writes small models (a CNN,
//! an MLP, a MobileNet-like stack with batch norms in training, a text model with an
//! embedding) as `tf.compat.v1` graphs with their loss, TensorFlow's gradients of it
//! (`tf.gradients`) and an optimizer's update ops, with TensorFlow's values. On every device
//! present (cpu:0, opencl:0 and wgpu:0 in CI):
//!
//! - TensorFlow's own gradient graph gives TensorFlow's loss and gradients, and 20 steps of
//!   its optimizer (Nesterov momentum, Adam, momentum, gradient descent, Adagrad, RMSProp)
//!   end with TensorFlow's weights;
//! - [`Graph::gradients`] on the graph before TensorFlow took gradients gives the same
//!   gradients.
//!
//! Within `1e-4 * max|want| + 1e-5`. Without TensorFlow the test says why and skips, unless
//! `POLYTENSOR_REQUIRE_TENSORFLOW` is set (as in CI): then it fails.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::golden;
use polytensor::graph::{Graph, Optimizer, Output, Session, SessionOptions};
use polytensor::{DataType, Device, Tensor};
use serde_json::Value as Json;

/// The cases `tf_training.py` wrote: (name, folder).
fn cases() -> Option<(Vec<String>, PathBuf)> {
    let dir = common::generated(
        "tf_training.py",
        "tf-training",
        "tensorflow",
        "POLYTENSOR_TF_TRAINING",
    )?;
    let index: Json = golden::json(dir.join("index.json"));
    let names = index
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    Some((names, dir))
}

/// Every float of `got` within `1e-4 * max|want| + 1e-5` of `want`'s.
fn assert_close(what: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.dims(), want.dims(), "{what}");
    let (got, want) = (got.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
    let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let tolerance = 1e-4 * scale + 1e-5;
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        assert!(
            (a - b).abs() <= tolerance,
            "{what}[{i}]: {a} against TensorFlow's {b} (tolerance {tolerance})"
        );
    }
}

/// The feeds of a `{"name": tensor}` spec, on `device`.
fn feeds(spec: &Json, device: &Arc<dyn Device>) -> Vec<(String, Tensor)> {
    spec.as_object()
        .unwrap()
        .iter()
        .map(|(name, value)| (name.clone(), golden::tensor(value, device)))
        .collect()
}

fn names(spec: &Json) -> Vec<&str> {
    spec.as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect()
}

/// A session of `graph` on `device` with its variables initialised by the `init` ops.
fn session(graph: &Graph, device: &Arc<dyn Device>, init: &[&str]) -> Session {
    let session = Session::with_options(graph, SessionOptions::new(vec![device.clone()])).unwrap();
    session.run_by_name(&[], &[], init).unwrap();
    session
}

/// The loss and the gradients `fetches` name, fed the case's first batch, against
/// TensorFlow's.
fn check_gradients(case: &str, session: &Session, fetches: &[&str], spec: &Json) {
    let device = golden::devices()[0].clone();
    let feeds = feeds(&spec["feeds"], &device);
    let feeds: Vec<(&str, &Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let got = session.run_by_name(&feeds, fetches, &[]).unwrap();
    let expected = spec["expected"].as_array().unwrap();
    assert_eq!(got.len(), expected.len(), "{case}");
    for ((got, want), name) in got.iter().zip(expected).zip(fetches) {
        assert_close(
            &format!("{case}: {name}"),
            got,
            &golden::tensor(want, &device),
        );
    }
}

/// Run the case's training: op `step` fed each of its batches in turn, for its steps.
fn run_steps(session: &Session, train: &Json, device: &Arc<dyn Device>, step: &str) {
    let batches: Vec<Vec<(String, Tensor)>> = train["batches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| feeds(b, device))
        .collect();
    for i in 0..train["steps"].as_u64().unwrap() as usize {
        let batch = &batches[i % batches.len()];
        let batch: Vec<(&str, &Tensor)> = batch.iter().map(|(n, t)| (n.as_str(), t)).collect();
        session.run_by_name(&batch, &[], &[step]).unwrap();
    }
}

fn read(dir: &Path, file: String) -> Graph {
    Graph::from_graph_def_bytes(&std::fs::read(dir.join(file)).unwrap()).unwrap()
}

/// A case's spec, its graph before the gradients, the loss and the weights' handles.
fn forward(dir: &Path, case: &str) -> (Json, Graph, Output, Vec<Output>) {
    let spec = golden::json(dir.join(format!("{case}.json")));
    let graph = read(dir, format!("{case}.forward.pb"));
    let loss = graph.tensor(spec["loss"].as_str().unwrap()).unwrap();
    let weights = names(&spec["weights"])
        .into_iter()
        .map(|w| graph.tensor(w).unwrap())
        .collect();
    (spec, graph, loss, weights)
}

#[test]
fn tensorflows_gradient_and_training_graphs_run_on_every_device() {
    let Some((cases, dir)) = cases() else {
        return;
    };
    let mut ops = BTreeSet::new();
    for case in &cases {
        let spec = golden::json(dir.join(format!("{case}.json")));
        let graph = read(&dir, format!("{case}.pb"));
        ops.extend(names(&spec["op_types"]).into_iter().map(String::from));
        let train = &spec["train"];
        for device in golden::devices() {
            let at = format!("{case} on {}", device.name());
            let session = session(&graph, &device, &[spec["init"].as_str().unwrap()]);
            let mut fetches = vec![spec["loss"].as_str().unwrap()];
            fetches.extend(names(&spec["grads"]));
            check_gradients(&at, &session, &fetches, &spec);
            run_steps(&session, train, &device, train["op"].as_str().unwrap());
            let finals = names(&train["fetches"]);
            let got = session.run_by_name(&[], &finals, &[]).unwrap();
            for ((got, want), name) in got
                .iter()
                .zip(train["expected"].as_array().unwrap())
                .zip(&finals)
            {
                let want = golden::tensor(want, &golden::devices()[0]);
                assert_close(&format!("{at}: trained {name}"), got, &want);
            }
            println!("{at}: TensorFlow's gradients and trained weights");
        }
    }
    // The graphs hold every gradient, loss and optimizer op TensorFlow wrote for them.
    for op in [
        "ReluGrad",
        "Relu6Grad",
        "SigmoidGrad",
        "TanhGrad",
        "BiasAddGrad",
        "Conv2DBackpropFilter",
        "Conv2DBackpropInput",
        "DepthwiseConv2dNativeBackpropInput",
        "DepthwiseConv2dNativeBackpropFilter",
        "FusedBatchNormGradV3",
        "MaxPoolGrad",
        "AvgPoolGrad",
        "BroadcastGradientArgs",
        "ZerosLike",
        "ShapeN",
        "L2Loss",
        "SoftmaxCrossEntropyWithLogits",
        "SparseSoftmaxCrossEntropyWithLogits",
        "ResourceApplyMomentum",
        "ResourceApplyAdam",
        "ResourceApplyGradientDescent",
        "ResourceApplyAdagrad",
        "ResourceApplyRMSProp",
        "ResourceSparseApplyMomentum",
        "ResourceSparseApplyAdagrad",
        "ResourceSparseApplyRMSProp",
        "ResourceScatterAdd",
        "AssignSubVariableOp",
        "Unique",
        "UnsortedSegmentSum",
        "StridedSliceGrad",
        "ConcatOffset",
        "BatchMatMulV2",
    ] {
        assert!(ops.contains(op), "no case has {op}: {ops:?}");
    }
}

#[test]
fn polytensors_gradients_are_tensorflows_on_every_device() {
    let Some((cases, dir)) = cases() else {
        return;
    };
    for case in &cases {
        let (spec, mut graph, loss, weights) = forward(&dir, case);
        let grads = graph
            .gradients(std::slice::from_ref(&loss), &weights, None)
            .unwrap();
        let mut fetches = vec![loss.name()];
        for (grad, weight) in grads.iter().zip(&weights) {
            let grad = grad
                .as_ref()
                .unwrap_or_else(|| panic!("{case}: no gradient of {weight}"));
            fetches.push(grad.name());
        }
        let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
        for device in golden::devices() {
            // The weights' initializers: the graph before the gradients has no `init`.
            let session = session(&graph, &device, &names(&spec["initializers"]));
            check_gradients(
                &format!("{case} on {}", device.name()),
                &session,
                &fetches,
                &spec,
            );
        }
        println!("{case}: polytensor's gradients are TensorFlow's");
    }
}

/// `tf.gradients` of frozen models with respect to every weight (`Const`), weighted by a
/// random `grad_ys`: Keras's MobileNetV2 and a stack of batch norms and depthwise
/// convolutions frozen the TF2 way, and the public frozen models where `../shared` has
/// them (`tests/python/tf_frozen_gradients.py`, which feeds each the input, of a few, that
/// keeps its ReLUs' inputs farthest from their kinks). [`Graph::gradients`] gives
/// TensorFlow's on every device.
#[test]
fn frozen_models_gradients_are_tensorflows_on_every_device() {
    let Some(dir) = common::generated(
        "tf_frozen_gradients.py",
        "tf-frozen-gradients",
        "tensorflow",
        "POLYTENSOR_TF_FROZEN_GRADIENTS",
    ) else {
        return;
    };
    let index: Json = golden::json(dir.join("index.json"));
    for case in names(&index) {
        let spec = golden::json(dir.join(format!("{case}.json")));
        let mut graph = read(&dir, format!("{case}.pb"));
        let output = graph.tensor(spec["output"].as_str().unwrap()).unwrap();
        let shape = polytensor::PartialTensorShape::unknown_rank();
        let grad_ys = graph
            .placeholder_named("grad_ys", DataType::Float, &shape)
            .unwrap();
        let weights: Vec<Output> = names(&spec["weights"])
            .iter()
            .map(|w| graph.tensor(&format!("{w}:0")).unwrap())
            .collect();
        let grads = graph
            .gradients(
                std::slice::from_ref(&output),
                &weights,
                Some(std::slice::from_ref(&grad_ys)),
            )
            .unwrap();
        let fetches: Vec<String> = grads
            .iter()
            .zip(&weights)
            .map(|(g, w)| {
                g.as_ref()
                    .unwrap_or_else(|| panic!("{case}: no gradient of {w}"))
                    .name()
            })
            .collect();
        let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
        for device in golden::devices() {
            let at = format!("{case} on {}", device.name());
            let session = session(&graph, &device, &[]);
            let input = golden::tensor(&spec["feeds"]["input"], &device);
            let weighting = golden::tensor(&spec["feeds"]["grad_ys"], &device);
            let feeds = [
                (spec["input"].as_str().unwrap(), &input),
                ("grad_ys:0", &weighting),
            ];
            let got = session.run_by_name(&feeds, &fetches, &[]).unwrap();
            for ((got, want), name) in got
                .iter()
                .zip(spec["expected"].as_array().unwrap())
                .zip(names(&spec["weights"]))
            {
                let want = golden::tensor(want, &golden::devices()[0]);
                assert_close(&format!("{at}: the gradient of {name}"), got, &want);
            }
            println!("{at}: TensorFlow's gradients of {} weights", weights.len());
        }
    }
}

/// Gradients through TensorFlow 2's control flow (`tests/python/tf_control_flow_gradients.py`:
/// `tf.cond` taken either way, a recurrent cell in a `tf.while_loop`, a loop whose body
/// branches and calls a `tf.function` and a loop of its own, resource variables read in a
/// loop, a recurrent cell over `tf.TensorArray`s, Keras's LSTM, GRU and SimpleRNN frozen
/// with their loops kept `While`s): [`Graph::gradients`] gives `tf.gradients`' values on
/// every device, and TensorFlow runs the gradient graphs polytensor writes (their new
/// `While`s, `If`s and functions) to the same values. A loop lowered to TensorFlow 1.x
/// control flow, and one that reads back a list it writes, are refused with clear errors.
#[test]
fn control_flow_gradients_are_tensorflows_on_every_device_and_run_in_tensorflow() {
    let Some(dir) = common::generated(
        "tf_control_flow_gradients.py",
        "tf-control-flow-gradients",
        "tensorflow",
        "POLYTENSOR_TF_CONTROL_FLOW_GRADIENTS",
    ) else {
        return;
    };
    let python = common::TENSORFLOW.python("tensorflow").unwrap();
    let folder = std::env::temp_dir().join(format!("polytensor-cf-grads-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let cases: Json = golden::json(dir.join("index.json"));
    let mut plans = Vec::new();
    for case in names(&cases) {
        let spec = golden::json(dir.join(format!("{case}.json")));
        let mut graph = read(&dir, format!("{case}.pb"));
        let loss = graph.tensor(spec["loss"].as_str().unwrap()).unwrap();
        let xs: Vec<Output> = names(&spec["xs"])
            .iter()
            .map(|x| graph.tensor(x).unwrap())
            .collect();
        let grads = graph
            .gradients(std::slice::from_ref(&loss), &xs, None)
            .unwrap();
        let fetches: Vec<String> = grads
            .iter()
            .zip(&xs)
            .map(|(g, x)| {
                g.as_ref()
                    .unwrap_or_else(|| panic!("{case}: no gradient of {x}"))
                    .name()
            })
            .collect();
        let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
        let expected = spec["expected"].as_array().unwrap();
        for device in golden::devices() {
            let at = format!("{case} on {}", device.name());
            let session = session(&graph, &device, &names(&spec["init"]));
            let feeds = feeds(&spec["feeds"], &device);
            let feeds: Vec<(&str, &Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t)).collect();
            let got = session.run_by_name(&feeds, &fetches, &[]).unwrap();
            for ((got, want), x) in got.iter().zip(expected).zip(&xs) {
                let want = golden::tensor(want, &golden::devices()[0]);
                assert_close(&format!("{at}: the gradient of {}", x.name()), got, &want);
            }
            println!("{at}: TensorFlow's gradients of {} tensors", xs.len());
        }
        let path = folder.join(format!("{case}.pb"));
        std::fs::write(&path, graph.to_graph_def_bytes()).unwrap();
        plans.push(serde_json::json!({
            "graph": path, "init": spec["init"], "batches": [], "steps": 0,
            "fetches": fetches, "feeds": spec["feeds"], "expected": expected,
        }));
    }
    // What the gradients refuse, they refuse with a clear error.
    let refused: Json = golden::json(dir.join("refused.json"));
    for case in refused.as_array().unwrap() {
        let mut graph = read(&dir, case["graph"].as_str().unwrap().to_string());
        let y = graph.tensor(case["y"].as_str().unwrap()).unwrap();
        let x = graph.tensor(case["x"].as_str().unwrap()).unwrap();
        let error = graph.gradients(&[y], &[x], None).unwrap_err().to_string();
        let want = case["error"].as_str().unwrap();
        assert!(error.contains(want), "{}: {error}", case["graph"]);
        println!("{}: refused: {error}", case["graph"]);
    }
    // TensorFlow runs polytensor's gradient graphs to its own gradients.
    let cases: Vec<String> = names(&cases).iter().map(|c| c.to_string()).collect();
    tensorflow_runs(&python, &folder, &plans, &cases, "runs");
    println!("TensorFlow runs polytensor's gradient graphs to its own gradients");
    std::fs::remove_dir_all(folder).unwrap();
}

/// TensorFlow (`tf_run_training.py`) runs each of `plans` (a graph polytensor wrote, what
/// initialises it, the steps to run, the tensors to fetch and what they must be): the
/// fetched values are the plans' `expected`, case by case (`how`: what TensorFlow does with
/// the graph, for the messages).
fn tensorflow_runs(python: &Path, folder: &Path, plans: &[Json], cases: &[String], how: &str) {
    let plan = folder.join("plans.json");
    std::fs::write(&plan, serde_json::to_vec(plans).unwrap()).unwrap();
    let ran: Json = serde_json::from_str(
        common::run_script(python, "tf_run_training.py", &[plan.as_os_str()]).trim(),
    )
    .unwrap();
    let cpu = &golden::devices()[0];
    for ((plan, values), case) in plans.iter().zip(ran.as_array().unwrap()).zip(cases) {
        for ((got, want), name) in values
            .as_array()
            .unwrap()
            .iter()
            .zip(plan["expected"].as_array().unwrap())
            .zip(names(&plan["fetches"]))
        {
            let (got, want) = (golden::tensor(got, cpu), golden::tensor(want, cpu));
            assert_close(
                &format!("{case}: {name} as TensorFlow {how} polytensor's graph"),
                &got,
                &want,
            );
        }
    }
}

/// The optimizer a case's `"optimizer"` spec describes.
fn optimizer(spec: &Json) -> Optimizer {
    let number = |name: &str| spec[name].as_f64().unwrap();
    match spec["kind"].as_str().unwrap() {
        "momentum" => Optimizer::Momentum {
            learning_rate: number("learning_rate"),
            momentum: number("momentum"),
            nesterov: spec["nesterov"].as_bool().unwrap(),
        },
        "adam" => Optimizer::Adam {
            learning_rate: number("learning_rate"),
            beta1: number("beta1"),
            beta2: number("beta2"),
            epsilon: number("epsilon"),
        },
        "sgd" => Optimizer::GradientDescent {
            learning_rate: number("learning_rate"),
        },
        "adagrad" => Optimizer::Adagrad {
            learning_rate: number("learning_rate"),
            initial_accumulator: number("initial_accumulator"),
        },
        "rmsprop" => Optimizer::RmsProp {
            learning_rate: number("learning_rate"),
            decay: number("decay"),
            momentum: number("momentum"),
            epsilon: number("epsilon"),
        },
        other => panic!("no optimizer {other}"),
    }
}

#[test]
fn polytensors_training_is_tensorflows_and_tensorflow_runs_and_restores_it() {
    let Some((cases, dir)) = cases() else {
        return;
    };
    let python = common::TENSORFLOW.python("tensorflow").unwrap();
    let folder = std::env::temp_dir().join(format!("polytensor-trained-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    // What TensorFlow is to run of the graphs polytensor writes, and what it must end with.
    let mut plans = Vec::new();
    let mut written = BTreeSet::new();
    for case in &cases {
        let (spec, mut graph, loss, weights) = forward(&dir, case);
        let training = graph
            .minimize(&loss, &weights, &optimizer(&spec["optimizer"]))
            .unwrap();
        let finals: Vec<String> = weights
            .iter()
            .map(|w| {
                let read = graph.op("ReadVariableOp").input(w);
                read.attr("dtype", DataType::Float)
                    .build_output()
                    .unwrap()
                    .name()
            })
            .collect();
        let finals: Vec<&str> = finals.iter().map(String::as_str).collect();
        let train = &spec["train"];
        for device in golden::devices() {
            let at = format!("{case} on {}", device.name());
            let session = session(&graph, &device, &names(&spec["initializers"]));
            session
                .run_by_name(&[], &[], &[training.init.name()])
                .unwrap();
            run_steps(&session, train, &device, training.step.name());
            let trained = session.run_by_name(&[], &finals, &[]).unwrap();
            let expected = train["expected"].as_array().unwrap();
            for ((got, want), name) in trained.iter().zip(expected).zip(&finals) {
                let want = golden::tensor(want, &golden::devices()[0]);
                assert_close(&format!("{at}: trained {name}"), got, &want);
            }
            if device.name() != "cpu:0" {
                continue;
            }
            // The trained weights as a checkpoint, restored by TensorFlow's `RestoreV2`.
            let prefix = folder.join(format!("{case}.ckpt"));
            let mut writer = polytensor::checkpoint::Writer::new(&prefix).unwrap();
            let variables: Vec<&str> = weights.iter().map(|w| w.op().name()).collect();
            for (name, value) in variables.iter().zip(&trained) {
                writer.add(name, value).unwrap();
            }
            writer.finish().unwrap();
            let mut args = vec![prefix.as_os_str()];
            args.extend(variables.iter().map(std::ffi::OsStr::new));
            let restored: Json =
                serde_json::from_str(common::run_script(&python, "tf_restore.py", &args).trim())
                    .unwrap();
            for ((restored, saved), name) in restored
                .as_array()
                .unwrap()
                .iter()
                .zip(&trained)
                .zip(&variables)
            {
                let restored = golden::tensor(restored, &device);
                assert_eq!(
                    restored.to_bytes().unwrap(),
                    saved.to_bytes().unwrap(),
                    "{at}: {name} as TensorFlow restores it"
                );
            }
        }
        written.extend(graph.operations().map(|op| op.op_type().to_string()));
        let path = folder.join(format!("{case}.pb"));
        std::fs::write(&path, graph.to_graph_def_bytes()).unwrap();
        let mut init = names(&spec["initializers"]);
        init.push(training.init.name());
        plans.push(serde_json::json!({
            "graph": path, "init": init, "step": training.step.name(),
            "batches": train["batches"], "steps": train["steps"], "fetches": finals,
            "expected": train["expected"],
        }));
        println!("{case}: trained by polytensor as by TensorFlow; TensorFlow restores it");
    }
    // The embedding's updates are sparse, as TensorFlow's.
    for op in [
        "ResourceSparseApplyMomentum",
        "ResourceSparseApplyAdagrad",
        "ResourceSparseApplyRMSProp",
        "ResourceScatterAdd",
        "Unique",
    ] {
        assert!(
            written.contains(op),
            "polytensor wrote no {op}: {written:?}"
        );
    }
    // TensorFlow runs the training graphs polytensor wrote to the same weights.
    tensorflow_runs(&python, &folder, &plans, &cases, "trains");
    std::fs::remove_dir_all(folder).unwrap();
}

/// The gradient of a max pool by the definition: each window's `dy` to its first element
/// (row-major) equal to the window's maximum.
fn first_maxima(
    x: &[f32],
    [h, w]: [usize; 2],
    window: [usize; 2],
    strides: [usize; 2],
) -> Vec<f32> {
    let out = [0, 1].map(|d| ([h, w][d] - window[d]) / strides[d] + 1);
    let mut grad = vec![0.0; h * w];
    for i in 0..out[0] {
        for j in 0..out[1] {
            let taps = (0..window[0]).flat_map(|a| (0..window[1]).map(move |b| (a, b)));
            let at = |(a, b): (usize, usize)| (i * strides[0] + a) * w + j * strides[1] + b;
            let best = taps.clone().map(|t| x[at(t)]).fold(f32::MIN, f32::max);
            let first = taps.map(at).find(|&p| x[p] == best).unwrap();
            grad[first] += 1.0;
        }
    }
    grad
}

/// TensorFlow's `MaxPoolGrad` gives each window's gradient to its first maximum, where
/// finite differences cannot tell (ties: ReLU's zeros): on tiling windows (one pass over
/// them) and overlapping ones (tap by tap), on every device.
#[test]
fn max_pool_gradients_go_to_the_first_maximum_of_each_window() {
    use polytensor::{DataFormat, Padding, Pool2dOptions};
    let zeros = vec![0.0f32; 36];
    let few: Vec<f32> = (0..36).map(|i| ((i * 7) % 3) as f32).collect();
    for device in golden::devices() {
        for x in [&zeros, &few] {
            for (window, strides) in [([2, 2], [2, 2]), ([3, 3], [1, 1]), ([2, 3], [2, 1])] {
                let options = Pool2dOptions {
                    window,
                    strides,
                    padding: Padding::Valid,
                    format: DataFormat::Nhwc,
                };
                let t = Tensor::from_slice(x, [1, 6, 6, 1], &device).unwrap();
                let y = t.max_pool2d(&options).unwrap();
                let dy = Tensor::ones(y.dims(), DataType::Float, &device).unwrap();
                let got = t.max_pool2d_grad(&y, &dy, &options).unwrap();
                let want = first_maxima(x, [6, 6], window, strides);
                let at = format!("{window:?} {strides:?} on {}", device.name());
                assert_eq!(got.to_vec::<f32>().unwrap(), want, "{at}");
            }
        }
        // An infinite gradient reaches its window's first maximum alone (no `0 * inf`
        // elsewhere).
        let options = Pool2dOptions {
            window: [2, 2],
            strides: [2, 2],
            padding: Padding::Valid,
            format: DataFormat::Nhwc,
        };
        let x = Tensor::from_slice(&[1.0f32, 4.0, 3.0, 4.0], [1, 2, 2, 1], &device).unwrap();
        let y = x.max_pool2d(&options).unwrap();
        let dy = Tensor::from_slice(&[f32::INFINITY], [1, 1, 1, 1], &device).unwrap();
        let got = x.max_pool2d_grad(&y, &dy, &options).unwrap();
        let want = [0.0, f32::INFINITY, 0.0, 0.0];
        assert_eq!(got.to_vec::<f32>().unwrap(), want, "{}", device.name());
    }
}

/// Every optimizer rule fused in one pass (the CPU's `apply_update`) gives the bits of the
/// same rule as elementwise ops, in float32 and float64.
#[test]
fn fused_updates_are_the_elementwise_ops_bit_for_bit() {
    use polytensor::train::Rule;
    let cpu = golden::devices()[0].clone();
    let rules = [
        Rule::GradientDescent,
        Rule::Momentum { nesterov: false },
        Rule::Momentum { nesterov: true },
        Rule::KerasMomentum { nesterov: true },
        Rule::Adam { nesterov: false },
        Rule::Adam { nesterov: true },
        Rule::Adagrad { update_slots: true },
        Rule::AdagradV2 {
            update_slots: false,
        },
        Rule::RmsProp,
    ];
    for dtype in [DataType::Float, DataType::Double] {
        let tensor = |seed: usize, positive: bool| {
            let values: Vec<f64> = (0..70_000)
                .map(|i| {
                    let v = ((i * 7919 + seed * 104_729) % 1000) as f64 / 500.0 - 1.0;
                    if positive {
                        v.abs() + 0.1
                    } else {
                        v
                    }
                })
                .collect();
            Tensor::from_slice(&values, [350, 200], &cpu)
                .unwrap()
                .cast(dtype)
                .unwrap()
        };
        for rule in rules {
            let count = |kind: fn(&polytensor::train::Operand) -> bool| {
                rule.operands().iter().filter(|o| kind(o)).count()
            };
            let slots: Vec<Tensor> =
                (0..count(|o| matches!(o, polytensor::train::Operand::Slot(_))))
                    .map(|i| tensor(i + 1, true))
                    .collect();
            let scalars: Vec<Tensor> =
                (0..count(|o| matches!(o, polytensor::train::Operand::Scalar(_))))
                    .map(|i| {
                        Tensor::scalar(0.05 * (i + 1) as f64, &cpu)
                            .unwrap()
                            .cast(dtype)
                            .unwrap()
                    })
                    .collect();
            let (var, grad) = (tensor(7, false), tensor(8, false));
            let (fused, fused_slots) = rule.apply(&var, &slots, &scalars, &grad).unwrap();
            let pick = |i: usize, all: &[Tensor]| all.get(i).unwrap_or(&var).clone();
            let (value, updated) = rule
                .update(
                    &var,
                    &[pick(0, &slots), pick(1, &slots)],
                    &[0, 1, 2, 3, 4, 5].map(|i| pick(i, &scalars)),
                    &grad,
                )
                .unwrap();
            let at = format!("{rule:?} in {dtype}");
            assert_eq!(fused.to_bytes().unwrap(), value.to_bytes().unwrap(), "{at}");
            for (a, b) in fused_slots.iter().zip(&updated) {
                assert_eq!(a.to_bytes().unwrap(), b.to_bytes().unwrap(), "{at}: a slot");
            }
        }
    }
}

/// A small CNN run eagerly on polytensor's [`GradientTape`] gives the loss and gradients
/// TensorFlow's `tf.GradientTape` gave (`tape.json` of `tf_training.py`), on every device;
/// the tape refuses an op on a variable.
#[test]
fn gradient_tape_gives_tensorflows_eager_gradients_on_every_device() {
    use polytensor::graph::{int_list, GradientTape};
    let Some((_, dir)) = cases() else {
        return;
    };
    let spec = golden::json(dir.join("tape.json"));
    let names = ["bias", "dense", "filter", "offset"];
    for device in golden::devices() {
        let at = device.name().to_string();
        let mut tape = GradientTape::new(device.clone());
        let mut watch = |spec: &Json| tape.watch(&golden::tensor(spec, &device)).unwrap();
        let (x, labels) = (watch(&spec["x"]), watch(&spec["labels"]));
        let w: Vec<_> = names.iter().map(|n| watch(&spec["weights"][n])).collect();
        let [bias, dense, filter, offset] = [&w[0], &w[1], &w[2], &w[3]];
        let shape = Tensor::from_slice(&[4i32, 36], [2], &device).unwrap();
        let axis = Tensor::from_slice(&[0i32], [1], &device).unwrap();
        let (shape, axis) = (tape.watch(&shape).unwrap(), tape.watch(&axis).unwrap());
        let window = |v: i64| int_list(&[1, v, v, 1]);
        let h = tape
            .op(
                "Conv2D",
                &[&x, filter],
                &[("strides", window(1)), ("padding", "SAME".into())],
            )
            .unwrap();
        let h = tape.op("BiasAdd", &[&h, bias], &[]).unwrap();
        let h = tape.op("Relu", &[&h], &[]).unwrap();
        let pool = [
            ("ksize", window(2)),
            ("strides", window(2)),
            ("padding", "VALID".into()),
        ];
        let h = tape.op("MaxPool", &[&h], &pool).unwrap();
        let h = tape.op("Reshape", &[&h, &shape], &[]).unwrap();
        let h = tape.op("MatMul", &[&h, dense], &[]).unwrap();
        let h = tape.op("AddV2", &[&h, offset], &[]).unwrap();
        let logits = tape.op("Tanh", &[&h], &[]).unwrap();
        let losses = tape
            .run(
                "SparseSoftmaxCrossEntropyWithLogits",
                &[&logits, &labels],
                &[],
            )
            .unwrap();
        let loss = tape.op("Mean", &[&losses[0], &axis], &[]).unwrap();
        let cpu = &golden::devices()[0];
        assert_close(
            &format!("{at}: the tape's loss"),
            loss.value(),
            &golden::tensor(&spec["loss"], cpu),
        );
        let sources: Vec<_> = w.iter().collect();
        let grads = tape.gradient(&loss, &sources).unwrap();
        for (grad, name) in grads.iter().zip(names) {
            let grad = grad
                .as_ref()
                .unwrap_or_else(|| panic!("{at}: no gradient of {name}"));
            let want = golden::tensor(&spec["grads"][name], cpu);
            assert_close(&format!("{at}: the tape's gradient of {name}"), grad, &want);
        }
        // The input's gradient exists too; the labels have none.
        let more = tape.gradient(&loss, &[&x, &labels]).unwrap();
        assert!(more[0].is_some() && more[1].is_none(), "{at}");
        let refused = tape
            .op("ReadVariableOp", &[&x], &[])
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("GradientTape runs tensor ops"),
            "{refused}"
        );
        println!("{at}: the tape's gradients are TensorFlow's");
    }
}

/// The new training ops refuse bad input with an error naming what is wrong, never a
/// panic: indices out of range, shapes that do not fit, a gather's gradient off axis 0.
#[test]
fn training_ops_refuse_bad_input_with_clear_errors() {
    use polytensor::train::Rule;
    use polytensor::{Conv2dOptions, DataFormat, StridedSliceSpec};
    let cpu = &golden::devices()[0];
    let floats = |values: &[f32], dims: &[usize]| Tensor::from_slice(values, dims, cpu).unwrap();
    let ints = |values: &[i32]| Tensor::from_slice(values, [values.len()], cpu).unwrap();
    let expect = |result: polytensor::Result<Tensor>, wanted: &str| {
        let message = result.map(|_| ()).unwrap_err().to_string();
        assert!(message.contains(wanted), "{message:?} lacks {wanted:?}");
    };
    let data = floats(&[1.0, 2.0, 3.0], &[3]);
    expect(
        data.unsorted_segment_sum(&ints(&[0, 5, 1]), 2),
        "segment_ids[1] = 5 is out of range [0, 2)",
    );
    expect(
        data.unsorted_segment_sum(&ints(&[0, 1]), 2),
        "does not start with segment_ids.shape",
    );
    let table = floats(&[0.0; 6], &[3, 2]);
    expect(
        table.scatter(
            Some(polytensor::BinaryOp::Add),
            &ints(&[3]),
            &floats(&[1.0, 1.0], &[1, 2]),
        ),
        "indices[0] = 3 is not in [0, 3)",
    );
    expect(
        table.scatter(None, &ints(&[0]), &floats(&[1.0], &[1, 1])),
        "must be indices.shape",
    );
    let spec = StridedSliceSpec {
        begin: vec![0],
        end: vec![4],
        strides: vec![2],
        ..Default::default()
    };
    expect(
        floats(&[1.0; 3], &[3]).strided_slice_grad(&[4], &spec),
        "is not the slice's",
    );
    let lr = Tensor::scalar(0.1f32, cpu).unwrap();
    let (mut var, mut accum) = (table.clone(), [table.clone()]);
    let rows = Rule::Adagrad { update_slots: true }.apply_rows(
        &mut var,
        &mut accum,
        std::slice::from_ref(&lr),
        &floats(&[1.0, 1.0], &[1, 2]),
        &ints(&[7]),
    );
    expect(
        rows.map(|()| var.clone()),
        "Index 7 at offset 0 in indices is out of range [0, 3)",
    );
    // The tensors are whole after the error, and the table others hold is untouched.
    assert_eq!(var.to_vec::<f32>().unwrap(), table.to_vec::<f32>().unwrap());
    let image = floats(&[0.0; 16], &[1, 2, 2, 4]);
    expect(
        image
            .batch_norm_training(
                &floats(&[1.0; 3], &[3]),
                &floats(&[0.0; 4], &[4]),
                &floats(&[], &[0]),
                &floats(&[], &[0]),
                1e-3,
                1.0,
                DataFormat::Nhwc,
            )
            .map(|(y, _)| y),
        "scale must have the same number of elements as the channels of x",
    );
    let dy = floats(&[0.0; 8], &[1, 2, 2, 2]);
    expect(
        dy.batch_norm_grad(
            &image,
            &floats(&[1.0; 4], &[4]),
            &floats(&[0.0; 4], &[4]),
            &floats(&[1.0; 4], &[4]),
            1e-3,
            DataFormat::Nhwc,
            true,
        )
        .map(|g| g.x),
        "x and y_backprop must have same shape",
    );
    let options = Conv2dOptions::default();
    expect(
        image.depthwise_conv2d_backprop_filter(
            [1, 1, 3, 1],
            &floats(&[0.0; 12], &[1, 2, 2, 3]),
            &options,
        ),
        "input and filter must have the same depth: 4 vs 3",
    );
    // In graphs: a gather's gradient off axis 0 is refused by name; Unique takes vectors.
    let mut graph = Graph::new();
    let params = graph.constant_values(&[1.0f32; 6], &[2, 3]).unwrap();
    let indices = graph.constant_values(&[0i32, 2], &[2]).unwrap();
    let axis = graph.constant(1i32).unwrap();
    let gathered = graph
        .op("GatherV2")
        .input(&params)
        .input(&indices)
        .input(&axis)
        .build_output()
        .unwrap();
    let error = graph
        .gradients(&[gathered], &[params], None)
        .unwrap_err()
        .to_string();
    assert!(error.contains("gathers on axis 0"), "{error}");
    let matrix = graph.constant_values(&[1i32; 4], &[2, 2]).unwrap();
    let error = graph
        .op("Unique")
        .input(&matrix)
        .build()
        .unwrap_err()
        .to_string();
    assert!(error.contains("unique expects a 1D vector"), "{error}");
}

/// A sparse update writes the rows into the variable's own buffer only where nothing else
/// holds it: a value fetched before the update keeps what it was, on every device; a row
/// named twice is updated twice, in order.
#[test]
fn sparse_updates_leave_values_fetched_before_them_alone() {
    for device in golden::devices() {
        let mut g = Graph::new();
        let initial = g.constant_values(&[1.0f32; 8], &[4, 2]).unwrap();
        let table = g.resource_variable("table", &initial).unwrap();
        let accum_initial = g.constant_values(&[0.1f32; 8], &[4, 2]).unwrap();
        let accum = g.resource_variable("accum", &accum_initial).unwrap();
        let lr = g.constant(0.5f32).unwrap();
        let grad = g
            .constant_values(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2])
            .unwrap();
        let indices = g.constant_values(&[2i32, 0, 2], &[3]).unwrap();
        let update = g
            .op("ResourceSparseApplyAdagrad")
            .input(&table.handle)
            .input(&accum.handle)
            .input(&lr)
            .input(&grad)
            .input(&indices)
            .build()
            .unwrap();
        let session = session(
            &g,
            &device,
            &[table.initializer.name(), accum.initializer.name()],
        );
        let before = session.run(&[], &[&table.value], &[]).unwrap().remove(0);
        session.run(&[], &[], &[&update]).unwrap();
        let after = session.run(&[], &[&table.value], &[]).unwrap().remove(0);
        assert_eq!(
            before.to_vec::<f32>().unwrap(),
            [1.0; 8],
            "{}",
            device.name()
        );
        // Adagrad by hand: row 2 twice (grads [1, 2] then [5, 6]), row 0 once ([3, 4]).
        let step = |var: f32, acc: &mut f32, g: f32| {
            *acc += g * g;
            var - 0.5 * g / acc.sqrt()
        };
        let mut want = [1.0f32; 8];
        let mut acc = [0.1f32; 8];
        for (row, g) in [(2, [1.0, 2.0]), (0, [3.0, 4.0]), (2, [5.0, 6.0])] {
            for c in 0..2 {
                want[row * 2 + c] = step(want[row * 2 + c], &mut acc[row * 2 + c], g[c]);
            }
        }
        let got = after.to_vec::<f32>().unwrap();
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!((a - b).abs() <= 1e-6, "{}: [{i}] {a} vs {b}", device.name());
        }
    }
}
