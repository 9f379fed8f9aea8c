//! Graphs built in polytensor, run in TensorFlow itself: each graph below is run by a
//! polytensor `Session` on cpu:0, written as a GraphDef, and handed with its feeds and
//! polytensor's results to `tests/python/tf_import_graph.py`, which imports it with
//! `tf.graph_util.import_graph_def`, runs it in a `tf.compat.v1.Session` and compares.
//!
//! The Python is `POLYTENSOR_TF_PYTHON`, else the venv `.ci/run` makes in `target/tf-venv`.
//! Without TensorFlow the test says why and skips, unless `POLYTENSOR_REQUIRE_TENSORFLOW`
//! is set (as in CI): then it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use polytensor::graph::{int_list, Graph, Operation, Output, Session};
use polytensor::{DataType, PartialTensorShape, Tensor};
use serde_json::{json, Map, Value as Json};

/// A Python that imports TensorFlow, or why there is none.
fn python() -> Result<PathBuf, String> {
    let python = match std::env::var_os("POLYTENSOR_TF_PYTHON") {
        Some(path) => PathBuf::from(path),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tf-venv/bin/python"),
    };
    let probe = Command::new(&python)
        .args(["-c", "import tensorflow"])
        .output()
        .map_err(|e| format!("no Python at {}: {e}", python.display()))?;
    if !probe.status.success() {
        return Err(format!("{} cannot import tensorflow", python.display()));
    }
    Ok(python)
}

fn spec(t: &Tensor) -> Json {
    let hex: String = t
        .to_bytes()
        .unwrap()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    json!({"dtype": t.dtype().name(), "shape": t.dims(), "data_hex": hex})
}

/// One graph with what to run: feeds, fetches, and target runs before the fetch.
struct Case {
    name: &'static str,
    graph: Graph,
    feeds: Vec<(Output, Tensor)>,
    fetches: Vec<Output>,
    target_runs: Vec<Vec<Operation>>,
}

impl Case {
    /// Run it in polytensor and write `NAME.pb` and `NAME.json` into `dir`.
    fn write(&self, dir: &Path) {
        let mut session = Session::new(&self.graph, polytensor::device("cpu:0").unwrap());
        for targets in &self.target_runs {
            let targets: Vec<&Operation> = targets.iter().collect();
            session.run(&[], &[], &targets).unwrap();
        }
        let feeds: Vec<(&Output, &Tensor)> = self.feeds.iter().map(|(o, t)| (o, t)).collect();
        let fetches: Vec<&Output> = self.fetches.iter().collect();
        let values = session.run(&feeds, &fetches, &[]).unwrap();
        let mut ours = Map::new();
        for (output, value) in self.fetches.iter().zip(&values) {
            ours.insert(output.name(), spec(value));
        }
        let case = json!({
            "feeds": self.feeds.iter().map(|(o, t)| (o.name(), spec(t))).collect::<Map<_, _>>(),
            "fetches": self.fetches.iter().map(Output::name).collect::<Vec<_>>(),
            "target_runs": self.target_runs.iter()
                .map(|run| run.iter().map(|op| op.name().to_string()).collect::<Vec<_>>())
                .collect::<Vec<_>>(),
            "polytensor": ours,
        });
        std::fs::write(
            dir.join(format!("{}.pb", self.name)),
            self.graph.to_graph_def_bytes(),
        )
        .unwrap();
        std::fs::write(dir.join(format!("{}.json", self.name)), case.to_string()).unwrap();
    }
}

fn cpu() -> std::sync::Arc<dyn polytensor::Device> {
    polytensor::device("cpu:0").unwrap()
}

fn seed() -> Case {
    let mut g = Graph::new();
    let a = g.constant(3.0f32).unwrap();
    let b = g.constant(4.0f32).unwrap();
    let total = g.add(&a, &b).unwrap();
    Case {
        name: "seed",
        graph: g,
        feeds: Vec::new(),
        fetches: vec![total],
        target_runs: Vec::new(),
    }
}

fn dense_layer() -> Case {
    let mut g = Graph::new();
    let x = g
        .placeholder(
            DataType::Float,
            &PartialTensorShape::new(&[None, Some(3)]).unwrap(),
        )
        .unwrap();
    let w = g
        .constant_values(&[0.5f32, -1.0, 2.0, 1.5, 0.25, -0.75], &[2, 3])
        .unwrap();
    let h = g
        .op("MatMul")
        .inputs(&[x.clone(), w])
        .attr("transpose_b", true)
        .build_output()
        .unwrap();
    let relu = g.unary("Relu", &h).unwrap();
    let axes = g.constant_values(&[1i32], &[1]).unwrap();
    let total = g
        .op("Sum")
        .inputs(&[relu.clone(), axes])
        .attr("keep_dims", true)
        .build_output()
        .unwrap();
    let feed = Tensor::from_slice(&[1.0f32, 2.0, 3.0, -1.0, 0.5, 4.0], [2, 3], &cpu()).unwrap();
    Case {
        name: "dense_layer",
        graph: g,
        feeds: vec![(x, feed)],
        fetches: vec![relu, total],
        target_runs: Vec::new(),
    }
}

fn integer_ops() -> Case {
    let mut g = Graph::new();
    let a = g
        .constant_values(&[7i32, -7, 7, -7, 9, 0], &[2, 3])
        .unwrap();
    let b = g.constant_values(&[2i32, 2, -2], &[3]).unwrap();
    let mut fetches: Vec<Output> = [
        "FloorDiv",
        "FloorMod",
        "TruncateDiv",
        "TruncateMod",
        "Maximum",
    ]
    .iter()
    .map(|op| g.binary(op, op, &a, &b).unwrap())
    .collect();
    let shape = g.constant_values(&[3i64, -1], &[2]).unwrap();
    let reshaped = g
        .op("Reshape")
        .inputs(&[a.clone(), shape])
        .build_output()
        .unwrap();
    let perm = g.constant_values(&[1i32, 0], &[2]).unwrap();
    let transposed = g
        .op("Transpose")
        .inputs(&[reshaped.clone(), perm])
        .build_output()
        .unwrap();
    let dim = g.constant(-1i32).unwrap();
    let expanded = g
        .op("ExpandDims")
        .inputs(&[transposed.clone(), dim])
        .build_output()
        .unwrap();
    let squeezed = g
        .op("Squeeze")
        .input(&expanded)
        .attr("squeeze_dims", int_list(&[2]))
        .build_output()
        .unwrap();
    let shape_of = g.op("Shape").input(&squeezed).build_output().unwrap();
    let nine = g.constant(9i64).unwrap();
    let filled = g
        .op("Fill")
        .inputs(&[shape_of.clone(), nine])
        .build_output()
        .unwrap();
    let (start, limit, delta) = (
        g.constant(10i64).unwrap(),
        g.constant(-2i64).unwrap(),
        g.constant(-3i64).unwrap(),
    );
    let range = g
        .op("Range")
        .inputs(&[start, limit, delta])
        .build_output()
        .unwrap();
    let sum = g
        .op("AddN")
        .inputs(&[a.clone(), a.clone(), a.clone()])
        .build_output()
        .unwrap();
    let as_float = g
        .op("Cast")
        .input(&sum)
        .attr("DstT", DataType::Float)
        .build_output()
        .unwrap();
    let zero = g.constant(0i32).unwrap();
    let positive = g.binary("Greater", "positive", &a, &zero).unwrap();
    let chosen = g
        .op("SelectV2")
        .inputs(&[positive, a.clone(), zero])
        .build_output()
        .unwrap();
    let axis = g.constant(1i32).unwrap();
    let argmax = g.op("ArgMax").inputs(&[a, axis]).build_output().unwrap();
    fetches.extend([squeezed, shape_of, filled, range, as_float, chosen, argmax]);
    Case {
        name: "integer_ops",
        graph: g,
        feeds: Vec::new(),
        fetches,
        target_runs: Vec::new(),
    }
}

fn variables() -> Case {
    let mut g = Graph::new();
    let shape = PartialTensorShape::new(&[Some(3)]).unwrap();
    // A resource variable, as tf.compat.v1.Variable makes one in TensorFlow 2.
    let v = g
        .op("VarHandleOp")
        .name("v")
        .attr("dtype", DataType::Float)
        .attr("shape", &shape)
        .attr("shared_name", "v")
        .build_output()
        .unwrap();
    let initial = g.constant_values(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    let assign = g
        .op("AssignVariableOp")
        .inputs(&[v.clone(), initial])
        .build()
        .unwrap();
    let delta = g.constant_values(&[10.0f32, 20.0, 30.0], &[3]).unwrap();
    let bump = g
        .op("AssignAddVariableOp")
        .inputs(&[v.clone(), delta])
        .build()
        .unwrap();
    let read = g
        .op("ReadVariableOp")
        .input(&v)
        .attr("dtype", DataType::Float)
        .build_output()
        .unwrap();
    // A reference variable, as TensorFlow 1 made them.
    let r = g
        .op("VariableV2")
        .name("r")
        .attr("dtype", DataType::Int32)
        .attr("shape", &PartialTensorShape::new(&[Some(2)]).unwrap())
        .build_output()
        .unwrap();
    let r0 = g.constant_values(&[5i32, 6], &[2]).unwrap();
    let init_r = g.op("Assign").inputs(&[r.clone(), r0]).build().unwrap();
    let init = g
        .op("NoOp")
        .name("init")
        .control_input(&assign)
        .control_input(&init_r)
        .build()
        .unwrap();
    let one = g.constant_values(&[1i32, 1], &[2]).unwrap();
    let add_r = g.op("AssignAdd").inputs(&[r.clone(), one]).build().unwrap();
    let read_r = g.op("Identity").input(&r).build_output().unwrap();
    Case {
        name: "variables",
        graph: g,
        feeds: Vec::new(),
        fetches: vec![read, read_r],
        target_runs: vec![vec![init], vec![bump.clone(), add_r], vec![bump]],
    }
}

#[test]
fn graphs_built_here_run_in_tensorflow() {
    let python = match python() {
        Ok(python) => python,
        Err(why) if std::env::var_os("POLYTENSOR_REQUIRE_TENSORFLOW").is_none() => {
            eprintln!(
                "skipped: {why} (make one with `python3 -m venv target/tf-venv && \
                 target/tf-venv/bin/pip install tensorflow-cpu`)"
            );
            return;
        }
        Err(why) => panic!("POLYTENSOR_REQUIRE_TENSORFLOW is set, but {why}"),
    };
    let dir = std::env::temp_dir().join(format!("polytensor-tf-graphs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for case in [seed(), dense_layer(), integer_ops(), variables()] {
        case.write(&dir);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/tf_import_graph.py");
    let output = Command::new(python)
        .arg(script)
        .arg(&dir)
        .env("TF_CPP_MIN_LOG_LEVEL", "2")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    std::fs::remove_dir_all(&dir).ok();
    assert!(output.status.success(), "{stdout}\n{stderr}");
    println!("{stdout}");
    assert!(stdout.contains("ran 4 polytensor graphs"), "{stdout}");
}
