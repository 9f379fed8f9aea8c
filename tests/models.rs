//! Real TensorFlow models: each frozen inference graph of `shared/tf-golden/models` (an MLP,
//! a small CNN and MobileNetV2, written and run by TensorFlow 2.21) imported and run on
//! every device here, its outputs within the model's own tolerance of TensorFlow's:
//! `max|got - want| <= rtol * max|want| + atol` per fetched tensor.

mod common;

use std::sync::Arc;

use common::golden;
use polytensor::graph::{Graph, Session};
use polytensor::{Device, Tensor};
use serde_json::Value as Json;

/// Each model's name and JSON sidecar.
fn models() -> Vec<(String, Json)> {
    let Some(dir) = golden::dir("models") else {
        return Vec::new();
    };
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

/// Run `model` once on `device` and check every fetch against TensorFlow's.
fn run_model(name: &str, model: &Json, device: &Arc<dyn Device>) {
    let dir = golden::dir("models").unwrap();
    let graph =
        Graph::from_graph_def_bytes(&std::fs::read(dir.join(format!("{name}.pb"))).unwrap())
            .unwrap_or_else(|e| panic!("{name}: import: {e}"));
    let mut session = Session::new(&graph, device.clone());
    let feeds: Vec<(String, Tensor)> = model["feeds"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, spec)| (name.clone(), golden::tensor(spec, device)))
        .collect();
    let feeds: Vec<(&str, &Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let fetches: Vec<&str> = model["fetches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
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
    let models = models();
    for device in golden::devices() {
        for (name, model) in &models {
            run_model(name, model, &device);
        }
    }
}
