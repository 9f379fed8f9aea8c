//! `devices`, `show`, `run`, `profile` and `conformance` on a dense layer and a checkpoint
//! written here, and the errors a user meets, with their exit codes.

use std::path::{Path, PathBuf};

use polytensor::graph::Graph;
use polytensor::{DataType, PartialTensorShape, Tensor};

use crate::{arg, polytensor, scratch};

const W: [f32; 6] = [0.5, -1.0, 2.0, 0.25, -0.75, 1.5];
const B: [f32; 2] = [0.1, -0.2];

/// `y = relu(x @ W + b)`, x of shape `(None, 3)`, as a frozen GraphDef in `dir`.
fn dense_model(dir: &Path) -> PathBuf {
    let mut g = Graph::new();
    let x = g
        .placeholder_named(
            "x",
            DataType::Float,
            &PartialTensorShape::new(&[None, Some(3)]).unwrap(),
        )
        .unwrap();
    let w = g.constant_named("w", &W, &[3, 2]).unwrap();
    let b = g.constant_named("b", &B, &[2]).unwrap();
    let xw = g.matmul(&x, &w).unwrap();
    let z = g.op("BiasAdd").input(&xw).input(&b).build_output().unwrap();
    g.op("Relu").name("y").input(&z).build_output().unwrap();
    let path = dir.join("dense.pb");
    std::fs::write(&path, g.to_graph_def_bytes()).unwrap();
    path
}

/// What `dense_model` computes, in f64.
fn dense(x: &[f32]) -> Vec<f64> {
    x.chunks(3)
        .flat_map(|row| {
            (0..2).map(move |j| {
                let v: f64 = (0..3)
                    .map(|k| f64::from(row[k]) * f64::from(W[k * 2 + j]))
                    .sum();
                (v + f64::from(B[j])).max(0.0)
            })
        })
        .collect()
}

#[test]
fn devices_lists_every_backend() {
    let ran = polytensor(&["devices"]).expect(0);
    assert!(ran.stdout.starts_with("cpu:0: "), "{}", ran.stdout);
    assert!(ran.stdout.contains("runs "), "capabilities: {}", ran.stdout);
    for backend in ["opencl", "wgpu", "cuda"] {
        assert!(
            ran.stdout.contains(&format!("{backend}:0: "))
                || ran.stdout.contains(&format!("{backend}: unavailable (")),
            "{backend} in\n{}",
            ran.stdout
        );
    }
    let ops = polytensor(&["devices", "--ops"]).expect(0);
    assert!(ops.stdout.contains("float32"), "{}", ops.stdout);
}

#[test]
fn show_tells_inputs_outputs_ops_and_weights() {
    let dir = scratch("show");
    let model = dense_model(&dir);
    let ran = polytensor(&["show", arg(&model), "--device", "cpu:0"]).expect(0);
    let out = &ran.stdout;
    assert!(out.contains("a frozen GraphDef"), "{out}");
    assert!(out.contains("inputs:\n  x:0 float32 (None, 3)"), "{out}");
    assert!(out.contains("outputs:\n  y:0 float32 (None, 2)"), "{out}");
    assert!(
        out.contains("constants (the weights): 8 values, 32 B in 2 tensors"),
        "{out}"
    );
    let matmul = out
        .lines()
        .find(|l| l.trim_start().starts_with("MatMul"))
        .unwrap();
    assert!(
        matmul.split_whitespace().eq(["MatMul", "1", "yes"]),
        "{matmul}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn run_feeds_a_file_and_saves_the_outputs() {
    let dir = scratch("run");
    let model = dense_model(&dir);
    let cpu = polytensor::device("cpu:0").unwrap();
    let x = [1.0f32, 2.0, 3.0, -1.0, 0.5, 4.0];
    polytensor::npy::save(
        &Tensor::from_slice(&x, [2, 3], &cpu).unwrap(),
        dir.join("x.npy"),
    )
    .unwrap();
    let feed = format!("x={}", arg(&dir.join("x.npy")));
    let saved = dir.join("out.npz");
    let ran = polytensor(&["run", arg(&model), "--input", &feed, "--save", arg(&saved)]).expect(0);
    assert!(
        ran.stderr.contains("input x:0 fed float32 [2,3]"),
        "{}",
        ran.stderr
    );
    let outputs = polytensor::npy::load_npz(&saved, &cpu).unwrap();
    assert_eq!(outputs.len(), 1);
    assert_eq!(outputs[0].0, "y:0");
    let got = outputs[0]
        .1
        .cast(DataType::Double)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    let want = dense(&x);
    assert!(
        got.iter().zip(&want).all(|(g, w)| (g - w).abs() < 1e-5),
        "{got:?} {want:?}"
    );

    // Printed as TensorFlow prints, and timed.
    let printed = polytensor(&["run", arg(&model), "--input", &feed, "--repeat", "5"]).expect(0);
    assert!(
        printed.stdout.starts_with("y:0: tf.Tensor("),
        "{}",
        printed.stdout
    );
    assert!(
        printed.stdout.contains("shape=(2, 2), dtype=float32)"),
        "{}",
        printed.stdout
    );
    assert!(
        printed.stdout.contains("5 runs: min "),
        "{}",
        printed.stdout
    );
    // Piped, progress is plain lines.
    assert!(!printed.stderr.contains('\u{1b}'), "{:?}", printed.stderr);

    // Random feeds take --batch for the unknown dim; a directory gets one .npy per output.
    let npys = dir.join("npys");
    polytensor(&["run", arg(&model), "--batch", "4", "--save", arg(&npys)]).expect(0);
    let y = polytensor::npy::load(npys.join("y_0.npy"), &cpu).unwrap();
    assert_eq!(y.dims(), &[4, 2]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn profile_prints_the_op_table_and_writes_a_chrome_trace() {
    let dir = scratch("profile");
    let model = dense_model(&dir);
    let trace = dir.join("trace.json");
    let ran = polytensor(&[
        "profile",
        arg(&model),
        "--batch",
        "8",
        "--runs",
        "3",
        "--trace",
        arg(&trace),
    ])
    .expect(0);
    assert!(ran.stdout.contains("op type"), "{}", ran.stdout);
    assert!(ran.stdout.contains("MatMul"), "{}", ran.stdout);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = json["traceEvents"].as_array().expect("trace events");
    assert!(
        events
            .iter()
            .any(|e| e["name"] == "Relu" && e["args"]["name"] == "y"),
        "a Relu event named y: {json}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn show_lists_a_checkpoints_keys() {
    let dir = scratch("checkpoint");
    let cpu = polytensor::device("cpu:0").unwrap();
    let prefix = dir.join("model.ckpt");
    let mut writer = polytensor::checkpoint::Writer::new(&prefix).unwrap();
    let kernel = Tensor::from_slice(&W, [3, 2], &cpu).unwrap();
    writer.add("dense/kernel", &kernel).unwrap();
    writer
        .add("step", &Tensor::from_slice(&[7i64], [], &cpu).unwrap())
        .unwrap();
    writer.finish().unwrap();
    for given in [prefix.clone(), dir.join("model.ckpt.index")] {
        let ran = polytensor(&["show", arg(&given)]).expect(0);
        assert!(
            ran.stdout
                .contains("a checkpoint of 2 tensors in 1 shard, 7 values, 32 B"),
            "{}",
            ran.stdout
        );
        assert!(
            ran.stdout.contains("  dense/kernel (float32) [3,2]"),
            "{}",
            ran.stdout
        );
        assert!(ran.stdout.contains("  step (int64) []"), "{}", ran.stdout);
    }
    // A checkpoint holds no graph to run.
    let ran = polytensor(&["run", arg(&prefix)]).expect(2);
    assert!(ran.stderr.contains("is a checkpoint"), "{}", ran.stderr);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn errors_are_one_message_with_an_exit_code_per_kind() {
    let dir = scratch("errors");
    let model = dense_model(&dir);
    // Bad input: 2.
    let missing = polytensor(&["run", arg(&dir.join("missing.pb"))]).expect(2);
    assert!(missing.stderr.starts_with("error: "), "{}", missing.stderr);
    assert!(
        missing.stderr.contains("no such file"),
        "{}",
        missing.stderr
    );
    let wrong = polytensor(&["run", arg(&model), "--input", "z=random"]).expect(2);
    assert!(
        wrong.stderr.contains("has no input \"z\""),
        "{}",
        wrong.stderr
    );
    let misfit = polytensor(&["run", arg(&model), "--input", "x=random:2x5"]).expect(2);
    assert!(misfit.stderr.contains("does not fit"), "{}", misfit.stderr);
    let garbage = dir.join("garbage.pb");
    std::fs::write(&garbage, b"\xff\xff\xff not a proto").unwrap();
    let malformed = polytensor(&["show", arg(&garbage)]).expect(2);
    assert!(
        !malformed.stderr.contains("{ "),
        "no Debug structs: {}",
        malformed.stderr
    );
    polytensor(&["run", arg(&model), "--frobnicate"]).expect(2);
    // A device this machine does not have: 4.
    let absent = polytensor(&["run", arg(&model), "--device", "abacus:0"]).expect(4);
    assert!(
        absent.stderr.contains("device abacus:0 unavailable"),
        "{}",
        absent.stderr
    );

    // An op polytensor lacks: 3 for run; show still tells what the model holds.
    let mut def = Graph::new().to_graph_def();
    def.node.push(polytensor::graph::proto::NodeDef {
        name: "mystery".into(),
        op: "FrobnicateV9".into(),
        ..Default::default()
    });
    let unknown = dir.join("unknown.pb");
    std::fs::write(&unknown, prost::Message::encode_to_vec(&def)).unwrap();
    let ran = polytensor(&["run", arg(&unknown)]).expect(3);
    assert!(
        ran.stderr.contains("Op type not registered 'FrobnicateV9'"),
        "{}",
        ran.stderr
    );
    let shown = polytensor(&["show", arg(&unknown)]).expect(0);
    assert!(shown.stdout.contains("FrobnicateV9") && shown.stdout.contains("not in polytensor"));

    let cuda_here = polytensor::devices()
        .iter()
        .any(|e| e.name == "cuda:0" && e.device().is_some());
    if !cuda_here {
        let ran = polytensor(&["run", arg(&model), "--device", "cuda:0"]).expect(4);
        assert!(ran.stderr.contains("cuda"), "{}", ran.stderr);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn conformance_runs_the_suite() {
    let dir = scratch("conformance");
    let (json, markdown) = (dir.join("r.json"), dir.join("r.md"));
    let ran = polytensor(&[
        "conformance",
        "--backend",
        "cpu",
        "--op",
        "add",
        "--json",
        arg(&json),
        "--markdown",
        arg(&markdown),
    ])
    .expect(0);
    assert!(ran.stdout.contains("conformance: PASS"), "{}", ran.stdout);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(report.to_string().contains("cpu:0"), "{report}");
    std::fs::remove_dir_all(&dir).unwrap();
}
