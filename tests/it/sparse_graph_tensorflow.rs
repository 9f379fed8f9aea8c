//! A GraphDef TensorFlow wrote with sparse placeholders (`tests/python/tf_sparse_graph.py`
//! in `target/tf-venv`): `tf.compat.v1.sparse_placeholder`s feeding
//! `SparseTensorDenseMatMul` (plain, with `adjoint_b`, and under a `Relu`),
//! `SparseReduceSum` and `SparseReduceSumSparse`, `SparseReorder` into `SparseToDense`,
//! `SparseTensorDenseAdd`, `SparseAdd` and `SparseSegmentSum`. It is imported (every sparse
//! op's outputs with the static shapes TensorFlow gives them) and run on every device present, each sparse placeholder fed one `SparseTensor` and each sparse
//! result fetched as one, and every value must be TensorFlow's.
//!
//! Without TensorFlow the test says why and skips, unless `POLYTENSOR_REQUIRE_TENSORFLOW`
//! is set (as in CI): then it fails.

use crate::common;

use std::sync::Arc;

use common::golden;
use polytensor::graph::{Endpoint, Graph, Session, SessionValue, SparseOutput};
use polytensor::{DataType, Device, SparseTensor, Tensor};
use serde_json::Value as Json;

fn floats(json: &Json) -> Vec<f32> {
    serde_json::from_value(json.clone()).unwrap()
}

fn sparse_feed(json: &Json, device: &Arc<dyn Device>) -> SparseTensor {
    let indices: Vec<Vec<i64>> = serde_json::from_value(json["indices"].clone()).unwrap();
    let shape: Vec<i64> = serde_json::from_value(json["shape"].clone()).unwrap();
    let flat: Vec<i64> = indices.iter().flatten().copied().collect();
    let values = floats(&json["values"]);
    SparseTensor::new(
        Tensor::from_slice(&flat, [indices.len(), shape.len()], device).unwrap(),
        Tensor::from_slice(&values, [values.len()], device).unwrap(),
        Tensor::from_slice(&shape, [shape.len()], device).unwrap(),
    )
    .unwrap()
}

fn endpoint(graph: &Graph, names: &Json) -> SparseOutput {
    let name = |key: &str| names[key].as_str().unwrap();
    SparseOutput::by_names(graph, name("indices"), name("values"), name("shape")).unwrap()
}

fn close(ours: &[f32], theirs: &[f32], at: &str) {
    assert_eq!(ours.len(), theirs.len(), "{at}");
    for (a, b) in ours.iter().zip(theirs) {
        assert!(
            (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
            "{at}: {ours:?} vs {theirs:?}"
        );
    }
}

#[test]
fn a_tensorflow_graph_with_sparse_placeholders_runs_on_every_device() {
    let Some(python) = common::TENSORFLOW.python("tensorflow") else {
        return;
    };
    let answers: Json =
        serde_json::from_str(&common::run_script(&python, "tf_sparse_graph.py", &[])).unwrap();
    let hex = answers["graph_def"].as_str().unwrap();
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    let graph = Graph::from_graph_def_bytes(&bytes).unwrap();
    // Every sparse op's outputs have the static shapes TensorFlow gives them.
    for (name, want) in answers["static_shapes"].as_object().unwrap() {
        let tensor = graph.tensor(name).unwrap();
        let got = tensor.shape().dims().map(|dims| dims.to_vec());
        let want: Option<Vec<Option<usize>>> = serde_json::from_value(want.clone()).unwrap();
        assert_eq!(got, want, "the static shape of {name}");
    }
    let ids = endpoint(&graph, &answers["placeholders"]["ids"]);
    let b = endpoint(&graph, &answers["placeholders"]["b"]);
    assert_eq!(ids.dtype(), DataType::Float);
    let dense = graph
        .tensor(answers["placeholders"]["dense"].as_str().unwrap())
        .unwrap();
    let dense_fetches: Vec<(&String, &Json)> =
        answers["dense"].as_object().unwrap().iter().collect();
    let sparse_fetches: Vec<(&String, &Json)> =
        answers["sparse"].as_object().unwrap().iter().collect();
    for device in golden::devices() {
        let session = Session::new(&graph, device.clone());
        let dense_value: Vec<f32> = answers["feeds"]["dense"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(floats)
            .collect();
        let feeds = [
            SessionValue::from(sparse_feed(&answers["feeds"]["ids"], &device)),
            SessionValue::from(sparse_feed(&answers["feeds"]["b"], &device)),
            SessionValue::Tensor(Tensor::from_slice(&dense_value, [4, 6], &device).unwrap()),
        ];
        let outputs: Vec<_> = dense_fetches
            .iter()
            .map(|(_, case)| graph.tensor(case["name"].as_str().unwrap()).unwrap())
            .collect();
        let sparse_outputs: Vec<SparseOutput> = sparse_fetches
            .iter()
            .map(|(_, case)| endpoint(&graph, &case["names"]))
            .collect();
        let mut fetches: Vec<Endpoint<'_>> = outputs.iter().map(Endpoint::Tensor).collect();
        fetches.extend(sparse_outputs.iter().map(Endpoint::Sparse));
        let values = session
            .run_values(
                &[
                    (Endpoint::Sparse(&ids), &feeds[0]),
                    (Endpoint::Sparse(&b), &feeds[1]),
                    (Endpoint::Tensor(&dense), &feeds[2]),
                ],
                &fetches,
                &[],
            )
            .unwrap();
        let (dense_values, sparse_values) = values.split_at(outputs.len());
        for ((name, case), value) in dense_fetches.iter().zip(dense_values) {
            let at = format!("{name} on {}", device.name());
            let t = value.clone().into_tensor().unwrap();
            let shape: Vec<usize> = serde_json::from_value(case["shape"].clone()).unwrap();
            assert_eq!(t.dims().as_slice(), shape.as_slice(), "{at}");
            assert_eq!(t.device().name(), device.name(), "{at}");
            close(&t.to_vec::<f32>().unwrap(), &floats(&case["values"]), &at);
        }
        for ((name, case), value) in sparse_fetches.iter().zip(sparse_values) {
            let at = format!("{name} on {}", device.name());
            let s = value.clone().into_sparse().unwrap();
            let indices: Vec<i64> = serde_json::from_value(case["indices"].clone()).unwrap();
            let shape: Vec<i64> = serde_json::from_value(case["shape"].clone()).unwrap();
            assert_eq!(s.indices().to_vec::<i64>().unwrap(), indices, "{at}");
            assert_eq!(s.dense_shape().to_vec::<i64>().unwrap(), shape, "{at}");
            close(
                &s.values().to_vec::<f32>().unwrap(),
                &floats(&case["values"]),
                &at,
            );
        }
        // A tensor fed to a sparse placeholder is refused with a clear message.
        let wrong = session
            .run_values(&[(Endpoint::Sparse(&ids), &feeds[2])], &fetches[..1], &[])
            .err()
            .unwrap();
        assert!(
            wrong.to_string().contains("must be fed a SparseTensor"),
            "{wrong}"
        );
    }
}

#[test]
fn sparse_placeholders_built_here_feed_and_fetch_as_one_value() {
    let device: Arc<dyn Device> = polytensor::CpuDevice::shared();
    let mut graph = Graph::new();
    let sp = graph
        .sparse_placeholder("ids", DataType::Float, Some(2))
        .unwrap();
    assert_eq!(sp.indices.name(), "ids/indices:0");
    assert_eq!(sp.dense_shape.name(), "ids/shape:0");
    let reordered = graph
        .op("SparseReorder")
        .input(&sp.indices)
        .input(&sp.values)
        .input(&sp.dense_shape)
        .build()
        .unwrap();
    let out = SparseOutput {
        indices: graph.output(&reordered, 0).unwrap(),
        values: graph.output(&reordered, 1).unwrap(),
        dense_shape: sp.dense_shape.clone(),
    };
    let values = Tensor::from_slice(&[1.0f32, 2.0], [2], &device).unwrap();
    let fed = SparseTensor::from_coo(&[[1, 0], [0, 1]], &values, &[2, 2]).unwrap();
    let session = Session::new(&graph, device.clone());
    let got = session
        .run_values(
            &[(Endpoint::Sparse(&sp), &SessionValue::from(fed))],
            &[Endpoint::Sparse(&out)],
            &[],
        )
        .unwrap()
        .remove(0)
        .into_sparse()
        .unwrap();
    assert_eq!(got.indices().to_vec::<i64>().unwrap(), vec![0, 1, 1, 0]);
    assert_eq!(got.values().to_vec::<f32>().unwrap(), vec![2.0, 1.0]);
}
