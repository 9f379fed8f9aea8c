//! Graphs built in polytensor, run in TensorFlow itself: each graph below is run by a
//! polytensor `Session` on cpu:0, written as a GraphDef, and handed with its feeds and
//! polytensor's results to `tests/python/tf_import_graph.py`, which imports it with
//! `tf.graph_util.import_graph_def`, runs it in a `tf.compat.v1.Session` and compares the
//! values and the static shapes TensorFlow prints.
//!
//! The Python is `POLYTENSOR_TF_PYTHON`, else the venv `.ci/run` makes in `target/tf-venv`.
//! Without TensorFlow the test says why and skips, unless `POLYTENSOR_REQUIRE_TENSORFLOW`
//! is set (as in CI): then it fails.

mod common;

use std::path::Path;

use polytensor::graph::{int_list, Graph, Operation, Output, Session};
use polytensor::{DataType, PartialTensorShape, Tensor};
use serde_json::{json, Map, Value as Json};

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
            "printed": self.fetches.iter().map(|o| (o.name(), json!(o.to_string()))).collect::<Map<_, _>>(),
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

/// A float32 placeholder of shape `(None, 3)`.
fn rows_of_three(g: &mut Graph) -> Output {
    let shape = PartialTensorShape::new(&[None, Some(3)]).unwrap();
    g.placeholder(DataType::Float, &shape).unwrap()
}

fn dense_layer() -> Case {
    let mut g = Graph::new();
    let x = rows_of_three(&mut g);
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

/// `Relu6` and `SquaredDifference` (of the inference op set) at their edges: NaN, signed
/// zeros, infinities, the cap, and an int32 difference whose square wraps.
fn activations() -> Case {
    let mut g = Graph::new();
    let shape = PartialTensorShape::new(&[Some(8)]).unwrap();
    let x = g.placeholder(DataType::Float, &shape).unwrap();
    let relu6 = g.unary("Relu6", &x).unwrap();
    let y = g
        .constant_values(&[1.0f32, -2.0, 0.5, 3.0, -0.0, 1e30, 0.0, -1.0], &[8])
        .unwrap();
    let squared = g
        .op("SquaredDifference")
        .inputs(&[x.clone(), y])
        .build_output()
        .unwrap();
    let a = g.constant_values(&[3i32, -4, 1 << 30], &[3]).unwrap();
    let b = g.constant_values(&[1i32, 5, -(1 << 30)], &[3]).unwrap();
    let wrapped = g
        .op("SquaredDifference")
        .inputs(&[a, b])
        .build_output()
        .unwrap();
    let values = [
        f32::NAN,
        -1.0,
        -0.0,
        3.0,
        6.0,
        7.5,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ];
    let feed = Tensor::from_slice(&values, [8], &cpu()).unwrap();
    Case {
        name: "activations",
        graph: g,
        feeds: vec![(x, feed)],
        fetches: vec![relu6, squared, wrapped],
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

/// TensorFlow's complex ops, and static shapes that need a value known at build time
/// (`Fill` of a partially known `Shape`, a float `Range`), which the script checks by
/// comparing TensorFlow's printed tensors with polytensor's.
fn complex_and_inference() -> Case {
    let mut g = Graph::new();
    let re = g
        .constant_values(&[1.5f32, -2.0, 0.0, -0.0, 3.0, -1.0], &[2, 3])
        .unwrap();
    let im = g.constant_values(&[0.5f32, -0.0, 4.0], &[3]).unwrap();
    let z = g.op("Complex").inputs(&[re, im]).build_output().unwrap();
    let mut fetches: Vec<Output> = ["Real", "Imag", "ComplexAbs", "Angle", "Conj"]
        .iter()
        .map(|op| g.unary(op, &z).unwrap())
        .collect();
    let re64 = g.constant_values(&[-1.0f64, 2.0], &[2]).unwrap();
    let im64 = g.constant_values(&[0.0f64, -3.0], &[2]).unwrap();
    let z64 = g
        .op("Complex")
        .inputs(&[re64, im64])
        .build_output()
        .unwrap();
    fetches.extend(
        ["Angle", "ComplexAbs", "Real"]
            .iter()
            .map(|op| g.unary(op, &z64).unwrap()),
    );
    let x = rows_of_three(&mut g);
    let shape_of = g.op("Shape").input(&x).build_output().unwrap();
    let two = g.constant(2.0f32).unwrap();
    let filled = g
        .op("Fill")
        .inputs(&[shape_of, two])
        .build_output()
        .unwrap();
    let (start, limit, delta) = (
        g.constant(0.0f32).unwrap(),
        g.constant(1.0f32).unwrap(),
        g.constant(0.25f32).unwrap(),
    );
    let range = g
        .op("Range")
        .inputs(&[start, limit, delta])
        .build_output()
        .unwrap();
    assert_eq!(
        filled.to_string(),
        r#"Tensor("Fill:0", shape=(None, 3), dtype=float32)"#
    );
    assert_eq!(
        range.to_string(),
        r#"Tensor("Range:0", shape=(4,), dtype=float32)"#
    );
    fetches.extend([z, z64, filled, range]);
    let feed = Tensor::from_slice(&[1.0f32; 6], [2, 3], &cpu()).unwrap();
    Case {
        name: "complex_and_inference",
        graph: g,
        feeds: vec![(x, feed)],
        fetches,
        target_runs: Vec::new(),
    }
}

#[test]
fn graphs_built_here_run_in_tensorflow() {
    let Some(python) = common::TENSORFLOW.python("tensorflow") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("polytensor-tf-graphs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = [
        seed(),
        dense_layer(),
        activations(),
        integer_ops(),
        variables(),
        complex_and_inference(),
    ];
    for case in cases {
        case.write(&dir);
    }
    let stdout = common::run_script(&python, "tf_import_graph.py", &[dir.as_os_str()]);
    std::fs::remove_dir_all(&dir).ok();
    println!("{stdout}");
    assert!(stdout.contains("ran 6 polytensor graphs"), "{stdout}");
}

/// A GraphDef TensorFlow wrote with the fields polytensor keeps without reading them (a
/// node's `experimental_debug_info` and `experimental_type`, `VersionDef.min_consumer` and
/// `bad_consumers`, the function library, the deprecated `version`) is written back byte
/// for byte, and runs.
#[test]
fn graph_def_round_trips_lose_nothing_tensorflow_wrote() {
    let Some(python) = common::TENSORFLOW.python("tensorflow") else {
        return;
    };
    let path = std::env::temp_dir().join(format!("polytensor-fields-{}.pb", std::process::id()));
    common::run_script(&python, "tf_graph_def_fields.py", &[path.as_os_str()]);
    let written = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).ok();
    let graph = Graph::from_graph_def_bytes(&written).unwrap();
    let def = graph.to_graph_def();
    let versions = def.versions.as_ref().unwrap();
    assert_eq!(
        (versions.min_consumer, &versions.bad_consumers[..]),
        (12, &[3, 7][..])
    );
    assert_eq!(def.version, 21);
    assert_eq!(def.function_names().unwrap().len(), 1);
    let y = def.node.iter().find(|n| n.name == "y").unwrap();
    assert!(y.experimental_debug_info.is_some() && y.experimental_type.is_some());
    assert!(
        graph.to_graph_def_bytes() == written,
        "the GraphDef written back differs from TensorFlow's"
    );
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0], [1, 3], &cpu()).unwrap();
    let mut session = Session::new(&graph, cpu());
    let y = session.run_by_name(&[("x:0", &x)], &["y:0"], &[]).unwrap();
    assert_eq!(y[0].to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0]);
}
