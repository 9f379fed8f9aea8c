//! Training against TensorFlow: `tests/python/tf_training.py` writes small models (a CNN
//! and an MLP) as `tf.compat.v1` graphs with their loss, TensorFlow's gradients of it
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
use polytensor::graph::{Graph, Session, SessionOptions};
use polytensor::{Device, Tensor};
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

fn read(dir: &Path, file: String) -> Graph {
    Graph::from_graph_def_bytes(&std::fs::read(dir.join(file)).unwrap()).unwrap()
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
            let batches: Vec<Vec<(String, Tensor)>> = train["batches"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| feeds(b, &device))
                .collect();
            let op = train["op"].as_str().unwrap();
            for step in 0..train["steps"].as_u64().unwrap() as usize {
                let batch = &batches[step % batches.len()];
                let batch: Vec<(&str, &Tensor)> =
                    batch.iter().map(|(n, t)| (n.as_str(), t)).collect();
                session.run_by_name(&batch, &[], &[op]).unwrap();
            }
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
        let spec = golden::json(dir.join(format!("{case}.json")));
        let mut graph = read(&dir, format!("{case}.forward.pb"));
        let loss = graph.tensor(spec["loss"].as_str().unwrap()).unwrap();
        let weights: Vec<_> = names(&spec["weights"])
            .into_iter()
            .map(|w| graph.tensor(w).unwrap())
            .collect();
        let grads = graph.gradients(&[loss.clone()], &weights, None).unwrap();
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
