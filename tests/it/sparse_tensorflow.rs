//! `SparseTensor` against TensorFlow 2.21 (`tests/python/tf_sparse.py` in `target/tf-venv`):
//! for each case, on every device present, polytensor's `Display` equals TensorFlow's
//! `str()`, `to_dense` gives TensorFlow's dense values or its error message, `reorder` its
//! order, and `from_dense` its indices and values.
//!
//! Without TensorFlow the test says why and skips, unless `POLYTENSOR_REQUIRE_TENSORFLOW`
//! is set (as in CI): then it fails.

use crate::common;

use std::sync::Arc;

use common::golden;
use polytensor::{DataType, Device, SparseTensor, Tensor};
use serde_json::Value as Json;

/// A JSON array of values as a tensor of `dtype` with `shape` on `device`.
fn tensor(values: &Json, dtype: DataType, shape: &[usize], device: &Arc<dyn Device>) -> Tensor {
    let values = values.as_array().unwrap();
    if dtype == DataType::String {
        let strings = values
            .iter()
            .map(|v| v.as_str().unwrap().as_bytes().to_vec());
        return Tensor::from_strings(strings.collect::<Vec<_>>(), shape, device).unwrap();
    }
    let numbers: Vec<f64> = values
        .iter()
        .map(|v| v.as_f64().or_else(|| v.as_bool().map(f64::from)).unwrap())
        .collect();
    Tensor::from_slice(&numbers, shape, device)
        .unwrap()
        .cast(dtype)
        .unwrap()
}

fn int64_matrix(rows: &Json, columns: usize, device: &Arc<dyn Device>) -> Tensor {
    let flat: Vec<i64> = rows
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|row| row.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()))
        .collect();
    Tensor::from_slice(&flat, [flat.len() / columns.max(1), columns], device).unwrap()
}

/// A tensor's elements as TensorFlow's JSON has them (floats as f64, strings as text).
fn as_json(t: &Tensor) -> Vec<Json> {
    if t.dtype() == DataType::String {
        let strings = t.to_strings().unwrap();
        return strings
            .iter()
            .map(|s| Json::from(String::from_utf8_lossy(s).into_owned()))
            .collect();
    }
    let floats = t.cast(DataType::Double).unwrap().to_vec::<f64>().unwrap();
    floats.into_iter().map(Json::from).collect()
}

fn numbers(values: &Json) -> Vec<Json> {
    values
        .as_array()
        .unwrap()
        .iter()
        .map(|v| match v {
            Json::Bool(b) => Json::from(f64::from(u8::from(*b))),
            Json::Number(n) => Json::from(n.as_f64().unwrap()),
            other => other.clone(),
        })
        .collect()
}

#[test]
fn sparse_tensors_match_tensorflow() {
    let Some(python) = common::TENSORFLOW.python("tensorflow") else {
        return;
    };
    let answers: Json =
        serde_json::from_str(&common::run_script(&python, "tf_sparse.py", &[])).unwrap();
    for device in golden::devices() {
        for case in answers["sparse"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let dtype: DataType = case["dtype"].as_str().unwrap().parse().unwrap();
            if dtype == DataType::String && !device.kind().eq(&polytensor::DeviceKind::CPU) {
                continue; // strings live on host devices
            }
            let shape: Vec<i64> = serde_json::from_value(case["dense_shape"].clone()).unwrap();
            let rank = shape.len();
            let count = case["values"].as_array().unwrap().len();
            let sparse = SparseTensor::new(
                int64_matrix(&case["indices"], rank, &device),
                tensor(&case["values"], dtype, &[count], &device),
                Tensor::from_slice(&shape, [rank], &device).unwrap(),
            )
            .unwrap();
            let at = format!("{name} on {}", device.name());
            assert_eq!(sparse.to_string(), case["str"].as_str().unwrap(), "{at}");
            match sparse.to_dense(None) {
                Ok(dense) => {
                    assert_eq!(as_json(&dense), numbers(&case["dense"]), "{at}");
                    assert_eq!(dense.device().name(), device.name());
                }
                Err(e) => {
                    let tensorflow = case["to_dense_error"].as_str().unwrap_or_else(|| {
                        panic!("{at}: TensorFlow gave a dense tensor, polytensor: {e}")
                    });
                    let message = e.to_string();
                    let ours = message.trim_start_matches("invalid argument: ");
                    assert!(
                        tensorflow.contains(ours),
                        "{at}: {ours:?} vs {tensorflow:?}"
                    );
                }
            }
            let reordered = sparse.reorder().unwrap();
            let indices = reordered.indices().to_vec::<i64>().unwrap();
            let expected: Vec<i64> = case["reordered_indices"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|r| r.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()))
                .collect();
            assert_eq!(indices, expected, "{at}");
            assert_eq!(
                as_json(reordered.values()),
                numbers(&case["reordered_values"]),
                "{at}"
            );
        }
        for case in answers["dense"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let dtype: DataType = case["dtype"].as_str().unwrap().parse().unwrap();
            if dtype == DataType::String && !device.kind().eq(&polytensor::DeviceKind::CPU) {
                continue;
            }
            let shape: Vec<usize> = serde_json::from_value(case["shape"].clone()).unwrap();
            let dense = tensor(&case["dense"], dtype, &shape, &device);
            let sparse = SparseTensor::from_dense(&dense).unwrap();
            let at = format!("from_dense {name} on {}", device.name());
            let expected = int64_matrix(&case["indices"], shape.len(), &device);
            assert_eq!(
                sparse.indices().to_vec::<i64>().unwrap(),
                expected.to_vec::<i64>().unwrap(),
                "{at}"
            );
            assert_eq!(as_json(sparse.values()), numbers(&case["values"]), "{at}");
            assert_eq!(sparse.shape().dims().as_slice(), shape.as_slice(), "{at}");
            // And back.
            assert_eq!(
                as_json(&sparse.to_dense(None).unwrap()),
                numbers(&case["dense"]),
                "{at}"
            );
        }
    }
}
