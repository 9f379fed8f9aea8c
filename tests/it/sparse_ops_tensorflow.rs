//! The sparse ops against TensorFlow 2.21 (`tests/python/tf_sparse_ops.py` in
//! `target/tf-venv`): every case (to_dense, sparse x dense matmul with adjoints, reductions
//! with dense and sparse outputs, segment reductions, embedding lookups, additions,
//! reshape, slice, retain, fill_empty_rows; empty, repeated, unordered and out-of-range
//! indices, ranks 1 to 5, a large matrix) on every device present gives TensorFlow's
//! result, or an error whose message TensorFlow's contains; and `serialize` writes the bytes
//! of TensorFlow's `SerializeSparse`, which `deserialize` reads back.
//!
//! Without TensorFlow the test says why and skips, unless `POLYTENSOR_REQUIRE_TENSORFLOW`
//! is set (as in CI): then it fails.

use crate::common;

use std::sync::Arc;

use common::golden;
use polytensor::sparse::{self, Combiner, SparseReduce};
use polytensor::{DataType, Device, DeviceKind, Result, Scalar, SparseTensor, Tensor};
use serde_json::Value as Json;

/// A JSON value as f64 (`"nan"` is NaN; bools are 0 and 1).
fn number(v: &Json) -> f64 {
    match v {
        Json::String(s) if s == "nan" => f64::NAN,
        Json::Bool(b) => f64::from(u8::from(*b)),
        other => other.as_f64().unwrap(),
    }
}

/// JSON values as a tensor of `dtype` and `shape` on `device`.
fn tensor(values: &Json, dtype: DataType, shape: &[usize], device: &Arc<dyn Device>) -> Tensor {
    let values = values.as_array().unwrap();
    if dtype == DataType::String {
        let strings: Vec<Vec<u8>> = values
            .iter()
            .map(|v| v.as_str().unwrap().as_bytes().to_vec())
            .collect();
        return Tensor::from_strings(strings, shape, device).unwrap();
    }
    let numbers: Vec<f64> = values.iter().map(number).collect();
    Tensor::from_slice(&numbers, shape, device)
        .unwrap()
        .cast(dtype)
        .unwrap()
}

fn dtype_of(json: &Json) -> DataType {
    json["dtype"].as_str().unwrap().parse().unwrap()
}

fn dense(json: &Json, device: &Arc<dyn Device>) -> Tensor {
    let shape: Vec<usize> = serde_json::from_value(json["shape"].clone()).unwrap();
    tensor(&json["values"], dtype_of(json), &shape, device)
}

fn sparse_tensor(json: &Json, device: &Arc<dyn Device>) -> SparseTensor {
    let shape: Vec<i64> = serde_json::from_value(json["shape"].clone()).unwrap();
    let indices: Vec<i64> = serde_json::from_value(json["indices"].clone()).unwrap();
    let rank = shape.len();
    let count = json["values"].as_array().unwrap().len();
    SparseTensor::new(
        Tensor::from_slice(&indices, [count, rank], device).unwrap(),
        tensor(&json["values"], dtype_of(json), &[count], device),
        Tensor::from_slice(&shape, [rank], device).unwrap(),
    )
    .unwrap()
}

fn int32s(json: &Json, device: &Arc<dyn Device>) -> Tensor {
    let values: Vec<i32> = serde_json::from_value(json.clone()).unwrap();
    Tensor::from_slice(&values, [values.len()], device).unwrap()
}

/// Whether `ours` (of `dtype`) equals TensorFlow's `theirs` within the rounding a device
/// may differ by (fused multiply-adds; f16 keeps 11 bits).
fn close(ours: &[f64], theirs: &[f64], dtype: DataType) -> bool {
    let tolerance = if dtype == DataType::Half { 1e-3 } else { 1e-5 };
    ours.len() == theirs.len()
        && ours.iter().zip(theirs).all(|(&a, &b)| {
            (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tolerance * (1.0 + b.abs())
        })
}

/// A tensor's elements as f64s, or its strings.
fn elements(t: &Tensor) -> std::result::Result<Vec<f64>, Vec<String>> {
    if t.dtype() == DataType::String {
        let strings = t.to_strings().unwrap();
        return Err(strings
            .iter()
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect());
    }
    Ok(t.cast(DataType::Double).unwrap().to_vec::<f64>().unwrap())
}

fn check_values(ours: &Tensor, theirs: &Json, at: &str) {
    let expected = theirs.as_array().unwrap();
    match elements(ours) {
        Ok(values) => {
            let theirs: Vec<f64> = expected.iter().map(number).collect();
            assert!(
                close(&values, &theirs, ours.dtype()),
                "{at}: {values:?} vs {theirs:?}"
            );
        }
        Err(strings) => {
            let theirs: Vec<&str> = expected.iter().map(|v| v.as_str().unwrap()).collect();
            assert_eq!(strings, theirs, "{at}");
        }
    }
}

fn check_dense(ours: &Tensor, theirs: &Json, at: &str) {
    let shape: Vec<usize> = serde_json::from_value(theirs["shape"].clone()).unwrap();
    assert_eq!(ours.dims().as_slice(), shape.as_slice(), "{at}: shape");
    assert_eq!(ours.dtype(), dtype_of(theirs), "{at}: dtype");
    check_values(ours, &theirs["values"], at);
}

fn check_sparse(ours: &SparseTensor, theirs: &Json, at: &str) {
    let indices: Vec<i64> = serde_json::from_value(theirs["indices"].clone()).unwrap();
    let shape: Vec<i64> = serde_json::from_value(theirs["shape"].clone()).unwrap();
    assert_eq!(
        ours.indices().to_vec::<i64>().unwrap(),
        indices,
        "{at}: indices"
    );
    assert_eq!(
        ours.dense_shape().to_vec::<i64>().unwrap(),
        shape,
        "{at}: shape"
    );
    check_values(ours.values(), &theirs["values"], at);
}

/// What one case gives: a dense tensor, or a sparse one with the extra outputs of
/// `fill_empty_rows`.
enum Outcome {
    Dense(Tensor),
    Sparse(Box<SparseTensor>, Vec<Vec<f64>>),
}

fn run(case: &Json, device: &Arc<dyn Device>) -> Result<Outcome> {
    let a = || sparse_tensor(&case["a"], device);
    let flag = |name: &str| case[name].as_bool().unwrap();
    let ints = |name: &str| -> Vec<i64> { serde_json::from_value(case[name].clone()).unwrap() };
    let op = case["op"].as_str().unwrap();
    let reduce = |name: &str| match name {
        "sum" => SparseReduce::Sum,
        _ => SparseReduce::Max,
    };
    Ok(match op {
        "to_dense" => Outcome::Dense(a().to_dense(Some(Scalar::F64(number(&case["default"]))))?),
        "to_dense_unordered" => {
            Outcome::Dense(a().to_dense_unordered(Some(Scalar::F64(number(&case["default"]))))?)
        }
        "matmul" => Outcome::Dense(a().sparse_dense_matmul(
            &dense(&case["b"], device),
            flag("adjoint_a"),
            flag("adjoint_b"),
        )?),
        "reduce_sum_dense" | "reduce_max_dense" => {
            Outcome::Dense(a().reduce(reduce(&op[7..10]), &ints("axes"), flag("keep_dims"))?)
        }
        "reduce_sum_sparse" | "reduce_max_sparse" => Outcome::Sparse(
            Box::new(a().reduce_sparse(reduce(&op[7..10]), &ints("axes"), flag("keep_dims"))?),
            vec![],
        ),
        "segment_sum" | "segment_mean" | "segment_sqrt_n" => {
            let combiner = match op {
                "segment_sum" => Combiner::Sum,
                "segment_mean" => Combiner::Mean,
                _ => Combiner::SqrtN,
            };
            Outcome::Dense(sparse::segment_reduce(
                combiner,
                &dense(&case["data"], device),
                &int32s(&case["indices"], device),
                &int32s(&case["segment_ids"], device),
                case["num_segments"].as_i64(),
            )?)
        }
        "embedding_lookup_sparse" => {
            let combiner = match case["combiner"].as_str().unwrap() {
                "sum" => Combiner::Sum,
                "mean" => Combiner::Mean,
                _ => Combiner::SqrtN,
            };
            let weights =
                (!case["weights"].is_null()).then(|| sparse_tensor(&case["weights"], device));
            Outcome::Dense(sparse::embedding_lookup_sparse(
                &dense(&case["params"], device),
                &a(),
                weights.as_ref(),
                combiner,
            )?)
        }
        "add" => Outcome::Sparse(
            Box::new(a().add(
                &sparse_tensor(&case["b"], device),
                case["thresh"].as_f64().unwrap(),
            )?),
            vec![],
        ),
        "add_dense" => Outcome::Dense(a().add_dense(&dense(&case["b"], device))?),
        "reshape" => Outcome::Sparse(Box::new(a().reshape(&ints("new_shape"))?), vec![]),
        "slice" => Outcome::Sparse(Box::new(a().slice(&ints("start"), &ints("size"))?), vec![]),
        "retain" => {
            let keep: Vec<bool> = serde_json::from_value(case["keep"].clone()).unwrap();
            Outcome::Sparse(Box::new(a().retain(&keep)?), vec![])
        }
        "fill_empty_rows" => {
            let default = match &case["default"] {
                Json::String(_) => Scalar::I64(0),
                other => Scalar::F64(number(other)),
            };
            let (filled, rows) = a().fill_empty_rows(default)?;
            let empty = rows
                .empty_row_indicator
                .iter()
                .map(|&e| f64::from(u8::from(e)))
                .collect();
            let reverse = rows.reverse_index_map.iter().map(|&i| i as f64).collect();
            Outcome::Sparse(Box::new(filled), vec![empty, reverse])
        }
        other => panic!("no such op in the cases: {other}"),
    })
}

/// Whether the case holds strings (host devices only).
fn has_strings(case: &Json) -> bool {
    case.as_object()
        .unwrap()
        .values()
        .any(|v| v.get("dtype").and_then(Json::as_str) == Some("string"))
}

#[test]
fn sparse_ops_match_tensorflow() {
    let Some(python) = common::TENSORFLOW.python("tensorflow") else {
        return;
    };
    let answers: Json =
        serde_json::from_str(&common::run_script(&python, "tf_sparse_ops.py", &[])).unwrap();
    let cases = answers["cases"].as_array().unwrap();
    assert!(cases.len() > 200, "{} cases", cases.len());
    for device in golden::devices() {
        for case in cases {
            if has_strings(case) && device.kind() != DeviceKind::CPU {
                continue; // strings live on host devices
            }
            let at = format!(
                "{} {} on {}",
                case["op"].as_str().unwrap(),
                case["name"].as_str().unwrap(),
                device.name()
            );
            match (run(case, &device), case.get("error")) {
                (Ok(Outcome::Dense(t)), None) => {
                    assert_eq!(t.device().name(), device.name(), "{at}");
                    check_dense(&t, &case["dense_result"], &at);
                }
                (Ok(Outcome::Sparse(sp, extra)), None) => {
                    assert_eq!(sp.values().device().name(), device.name(), "{at}");
                    check_sparse(&sp, &case["sparse_result"], &at);
                    for (ours, theirs) in extra
                        .iter()
                        .zip(case["extra"].as_array().into_iter().flatten())
                    {
                        let theirs: Vec<f64> =
                            theirs.as_array().unwrap().iter().map(number).collect();
                        assert_eq!(ours, &theirs, "{at}: extra outputs");
                    }
                }
                (Err(e), Some(theirs)) => {
                    let message = e.to_string();
                    let ours = message.trim_start_matches("invalid argument: ");
                    let theirs = theirs.as_str().unwrap();
                    assert!(theirs.contains(ours), "{at}: {ours:?} vs {theirs:?}");
                }
                (Ok(_), Some(theirs)) => panic!("{at}: TensorFlow failed ({theirs}), we did not"),
                (Err(e), None) => panic!("{at}: we failed ({e}), TensorFlow did not"),
            }
        }
    }
}

#[test]
fn serialized_sparse_tensors_are_tensorflows_bytes() {
    let Some(python) = common::TENSORFLOW.python("tensorflow") else {
        return;
    };
    let answers: Json =
        serde_json::from_str(&common::run_script(&python, "tf_sparse_ops.py", &[])).unwrap();
    let hex = |bytes: &[u8]| -> String { bytes.iter().map(|b| format!("{b:02x}")).collect() };
    for device in golden::devices() {
        for case in answers["serialized"].as_array().unwrap() {
            if has_strings(case) && device.kind() != DeviceKind::CPU {
                continue;
            }
            let at = format!("{} on {}", case["name"].as_str().unwrap(), device.name());
            let sparse = sparse_tensor(&case["a"], &device);
            let ours = sparse.serialize().unwrap();
            let theirs: Vec<&str> = case["hex"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h.as_str().unwrap())
                .collect();
            let ours_hex: Vec<String> = ours.iter().map(|b| hex(b)).collect();
            assert_eq!(ours_hex, theirs, "{at}");
            let back = SparseTensor::deserialize(&ours, sparse.dtype(), &device).unwrap();
            assert_eq!(back.to_string(), sparse.to_string(), "{at}");
            assert_eq!(back.values().device().name(), device.name(), "{at}");
        }
    }
    let floats = &answers["serialized"][0];
    let cpu: Arc<dyn Device> = polytensor::CpuDevice::shared();
    let bytes = sparse_tensor(&floats["a"], &cpu).serialize().unwrap();
    let wrong = SparseTensor::deserialize(&bytes, DataType::Int32, &cpu)
        .err()
        .unwrap();
    let message = wrong.to_string();
    let ours = message.trim_start_matches("invalid argument: ");
    let theirs = answers["deserialize_error"].as_str().unwrap();
    assert!(theirs.contains(ours), "{ours:?} vs {theirs:?}");
    assert!(SparseTensor::deserialize(&bytes[..2], DataType::Float, &cpu).is_err());
    let mut truncated = bytes.clone();
    truncated[1].truncate(3);
    assert!(SparseTensor::deserialize(&truncated, DataType::Float, &cpu).is_err());
}
