//! Graphs against TensorFlow itself: every GraphDef in `shared/tf-golden/graph`, written and
//! run by TensorFlow 2.21, is read, printed, written back and run on every device here.

use crate::common;

use std::path::{Path, PathBuf};

use common::golden;
use polytensor::graph::{Graph, Session};
use polytensor::{Scalar, Tensor};
use serde_json::Value as Json;

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/tf-golden/graph")
}

/// The cases of `index.json`, each with its JSON description; none (after saying why) when
/// the shared folder is not beside the repository, unless `POLYTENSOR_REQUIRE_GOLDEN` is
/// set (as in CI).
fn cases() -> Vec<(String, Json)> {
    let Some(dir) = golden::dir("graph") else {
        return Vec::new();
    };
    let index: Json =
        serde_json::from_slice(&std::fs::read(dir.join("index.json")).unwrap()).unwrap();
    index["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|case| {
            let name = case["name"].as_str().unwrap().to_string();
            let json = std::fs::read(dir.join(format!("{name}.json"))).unwrap();
            (name, serde_json::from_slice(&json).unwrap())
        })
        .collect()
}

fn pb(name: &str) -> Vec<u8> {
    std::fs::read(golden_dir().join(format!("{name}.pb"))).unwrap()
}

/// Exact for integers and bools; floats within a few ULPs (NaN equal to NaN).
fn assert_matches(got: &Tensor, want: &Tensor, what: &str) {
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    assert_eq!(got.dims(), want.dims(), "{what}: shape");
    let (g, w) = (got.to_scalars().unwrap(), want.to_scalars().unwrap());
    for (i, (g, w)) in g.iter().zip(&w).enumerate() {
        let close = match (g, w) {
            (Scalar::F64(a), Scalar::F64(b)) => {
                (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 4e-7 * b.abs().max(1e-30)
            }
            (Scalar::C64(a), Scalar::C64(b)) => (a - b).norm() <= 4e-7 * b.norm().max(1e-30),
            (a, b) => a == b,
        };
        assert!(close, "{what}: element {i}: got {g:?}, want {w:?}");
    }
}

/// One `Session.run` of a case: targets first (their own call), then the fetches.
fn run_once(session: &mut Session, run: &Json, case: &str) {
    let device = session.device().clone();
    let names = |key: &str| -> Vec<String> {
        run[key]
            .as_array()
            .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    };
    let (targets, fetches) = (names("targets"), names("fetches"));
    let feeds: Vec<(String, Tensor)> = run["feeds"]
        .as_object()
        .map(|feeds| {
            feeds
                .iter()
                .map(|(name, spec)| (name.clone(), golden::tensor(spec, &device)))
                .collect()
        })
        .unwrap_or_default();
    let feeds: Vec<(&str, &Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let where_ = format!("{case} on {}", device.name());
    if !targets.is_empty() {
        let targets: Vec<&str> = targets.iter().map(String::as_str).collect();
        let result = session.run_by_name(&[], &[], &targets);
        if fetches.is_empty() {
            if let Some(error) = run["expected_error"].as_str() {
                let message = result.expect_err(&where_).to_string();
                assert!(message.contains(error), "{where_}: {message}");
                return;
            }
        }
        result.unwrap_or_else(|e| panic!("{where_}: targets {targets:?}: {e}"));
    }
    if fetches.is_empty() {
        return;
    }
    let fetch_names: Vec<&str> = fetches.iter().map(String::as_str).collect();
    let result = session.run_by_name(&feeds, &fetch_names, &[]);
    if let Some(error) = run["expected_error"].as_str() {
        let message = result.expect_err(&where_).to_string();
        assert!(
            message.contains(error),
            "{where_}: want {error:?}, got {message:?}"
        );
        return;
    }
    let values = result.unwrap_or_else(|e| panic!("{where_}: {e}"));
    let cpu = polytensor::device("cpu:0").unwrap();
    for (name, value) in fetches.iter().zip(values) {
        let want = golden::tensor(&run["expected"][name], &cpu);
        assert_matches(&value, &want, &format!("{where_}: {name}"));
    }
}

#[test]
fn tensorflow_graphs_print_as_tensorflow_prints_them() {
    for (name, case) in cases() {
        let graph = Graph::from_graph_def_bytes(&pb(&name)).unwrap();
        for (tensor, printed) in case["printed"].as_object().unwrap() {
            let output = graph.tensor(tensor).unwrap();
            assert_eq!(output.to_string(), printed.as_str().unwrap(), "{name}");
        }
        let names: Vec<String> = graph.operations().map(|op| op.name().to_string()).collect();
        let want: Vec<String> = case["node_names"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_string())
            .collect();
        assert_eq!(names, want, "{name}");
    }
}

/// What polytensor writes is the message TensorFlow wrote, field for field. (The bytes
/// differ only in the order of attribute keys where one is a prefix of another: TensorFlow's
/// Python protobuf writes `Tidx` before `T`, polytensor sorts them as strings.)
#[test]
fn graph_defs_are_written_back_as_tensorflow_wrote_them() {
    use polytensor::graph::proto::GraphDef;
    use prost::Message;
    for (name, _) in cases() {
        let bytes = pb(&name);
        let graph = Graph::from_graph_def_bytes(&bytes).unwrap();
        let tensorflow = GraphDef::decode(bytes.as_slice()).unwrap();
        assert_eq!(graph.to_graph_def(), tensorflow, "{name}");
        let again = Graph::from_graph_def(&graph.to_graph_def()).unwrap();
        assert_eq!(again.to_graph_def(), graph.to_graph_def(), "{name}");
    }
}

#[test]
fn tensorflow_graphs_run_on_every_device() {
    let devices = golden::devices();
    let names: Vec<&str> = devices.iter().map(|d| d.name()).collect();
    eprintln!("graph goldens run on {names:?}");
    for (name, case) in cases() {
        let graph = Graph::from_graph_def_bytes(&pb(&name)).unwrap();
        for device in &devices {
            let mut session = Session::new(&graph, device.clone());
            match case["runs"].as_array() {
                Some(runs) => runs
                    .iter()
                    .for_each(|run| run_once(&mut session, run, &name)),
                None => run_once(&mut session, &case, &name),
            }
        }
    }
}
