//! Loops and conditionals as TensorFlow writes them, run on every device present (cpu:0,
//! opencl:0 and wgpu:0 in CI): `tests/python/tf_control_flow.py` builds each case with
//! TensorFlow 1.x control flow (`Switch`, `Merge`, `Enter`, `Exit`, `NextIteration`,
//! `LoopCond`) and with control flow v2 (`StatelessWhile` and `StatelessIf` calling the
//! GraphDef's function library), runs it in TensorFlow, and writes the GraphDef with
//! TensorFlow's values: a counter loop, a loop carrying a tensor whose shape changes,
//! nested loops, a conditional inside a loop, a conditional at the top (both branches),
//! a recurrent cell, and a loop with an assert, a print and `check_numerics` (runs that
//! fail must fail with TensorFlow's message).
//!
//! The Python is `POLYTENSOR_TF_PYTHON`, else the venv `.ci/run` makes in `target/tf-venv`.
//! Without TensorFlow the test says why and skips, unless `POLYTENSOR_REQUIRE_TENSORFLOW`
//! is set (as in CI): then it fails.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;

use common::golden;
use polytensor::graph::{Graph, Session, SessionOptions};
use polytensor::{same_device, DataType, Device, Tensor};
use serde_json::Value as Json;

/// The cases TensorFlow wrote, as (name, GraphDef bytes, spec), in name order.
fn tensorflow_cases() -> Option<Vec<(String, Vec<u8>, Json)>> {
    let python = common::TENSORFLOW.python("tensorflow")?;
    let dir = std::env::temp_dir().join(format!("polytensor-tf-control-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    print!(
        "{}",
        common::run_script(&python, "tf_control_flow.py", &[dir.as_os_str()])
    );
    let mut cases = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let spec: Json = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            let bytes = std::fs::read(path.with_extension("pb")).unwrap();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            cases.push((name, bytes, spec));
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    cases.sort_by(|a, b| a.0.cmp(&b.0));
    Some(cases)
}

/// `got` is TensorFlow's `want`: same dtype and shape, integers exact, floats within
/// 1e-5 relative (1e-6 absolute).
fn assert_matches(case: &str, device: &Arc<dyn Device>, got: &Tensor, want: &Tensor) {
    let at = format!("{case} on {}", device.name());
    assert_eq!(got.dtype(), want.dtype(), "{at}");
    assert_eq!(got.dims(), want.dims(), "{at}");
    match want.dtype() {
        DataType::Float => {
            let (got, want) = (got.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
            for (a, b) in got.iter().zip(&want) {
                assert!(
                    (a - b).abs() <= 1e-5 * b.abs() + 1e-6,
                    "{at}: {got:?} != {want:?}"
                );
            }
        }
        _ => assert_eq!(got.to_bytes().unwrap(), want.to_bytes().unwrap(), "{at}"),
    }
}

#[test]
fn tensorflow_loops_and_conditionals_run_on_every_device() {
    let Some(cases) = tensorflow_cases() else {
        return;
    };
    let devices = golden::devices();
    let cpu = devices[0].clone();
    let mut ops = BTreeSet::new();
    for (name, bytes, spec) in &cases {
        let graph = Graph::from_graph_def_bytes(bytes).unwrap();
        ops.extend(graph.operations().map(|op| op.op_type().to_string()));
        let feeds: Vec<(String, Tensor)> = spec["feeds"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(name, value)| (name.clone(), golden::tensor(value, &cpu)))
            .collect();
        let feeds: Vec<(&str, &Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let fetches: Vec<&str> = spec["fetches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        // Strings live on host devices only: a graph with asserts and prints runs its
        // string ops on cpu:0 beside the device, as TensorFlow's GPU sessions run them on
        // their CPU.
        let strings = spec["strings"].as_bool().unwrap_or(false);
        for device in &devices {
            let mut placed = vec![device.clone()];
            if strings && !same_device(device, &cpu) {
                placed.push(cpu.clone());
            }
            let session = Session::with_options(&graph, SessionOptions::new(placed)).unwrap();
            let result = session.run_by_name(&feeds, &fetches, &[]);
            if let Some(error) = spec["error"].as_str() {
                // A check TensorFlow failed fails here, with its message.
                let message = result.err().map(|e| e.to_string()).unwrap_or_default();
                assert!(
                    message.contains(error),
                    "{name} on {}: {message:?} lacks {error:?}",
                    device.name()
                );
                continue;
            }
            let got = result.unwrap_or_else(|e| panic!("{name} on {}: {e}", device.name()));
            for (got, want) in got.iter().zip(spec["expected"].as_array().unwrap()) {
                assert_matches(name, device, got, &golden::tensor(want, &cpu));
            }
        }
        println!("{name}: TensorFlow's values on {} devices", devices.len());
    }
    // The graphs hold every primitive and both functional forms.
    for op in [
        "Switch",
        "Merge",
        "Enter",
        "Exit",
        "NextIteration",
        "LoopCond",
        "StatelessWhile",
        "StatelessIf",
        "Assert",
        "PrintV2",
        "StringFormat",
        "CheckNumerics",
    ] {
        assert!(ops.contains(op), "no case has {op}: {ops:?}");
    }
    assert_eq!(
        cases.len(),
        22,
        "{:?}",
        cases.iter().map(|c| &c.0).collect::<Vec<_>>()
    );
}
