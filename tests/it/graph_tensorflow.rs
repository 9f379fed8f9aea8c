//! Graphs built in polytensor, run in TensorFlow itself: each graph below is run by a
//! polytensor `Session` on cpu:0, written as a GraphDef, and handed with its feeds and
//! polytensor's results to `tests/python/tf_import_graph.py`, which imports it with
//! `tf.graph_util.import_graph_def`, runs it in a `tf.compat.v1.Session` and compares the
//! values and the static shapes TensorFlow prints.
//!
//! The Python is `POLYTENSOR_TF_PYTHON`, else the venv `.ci/run` makes in `target/tf-venv`.
//! Without TensorFlow the test says why and skips, unless `POLYTENSOR_REQUIRE_TENSORFLOW`
//! is set (as in CI): then it fails.

use crate::common;

use std::path::Path;

use polytensor::graph::{
    int_list, AttrValue, Graph, ImportOptions, Imported, ListValue, Operation, Output, Session,
};
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
    /// The absolute tolerance beside the relative 1e-6 (0: relative only).
    atol: f64,
    /// Run on every device present ([`polytensor::session`]), as its device fields ask,
    /// instead of on cpu:0 alone.
    every_device: bool,
}

impl Case {
    /// Run it in polytensor and write `NAME.pb` and `NAME.json` into `dir`.
    fn write(&self, dir: &Path) {
        let session = if self.every_device {
            polytensor::session(&self.graph).unwrap()
        } else {
            Session::new(&self.graph, polytensor::device("cpu:0").unwrap())
        };
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
            "atol": self.atol,
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
        atol: 0.0,
        every_device: false,
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
        atol: 0.0,
        every_device: false,
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
        atol: 0.0,
        every_device: false,
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
        atol: 0.0,
        every_device: false,
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
        atol: 0.0,
        every_device: false,
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
        atol: 0.0,
        every_device: false,
    }
}

/// `count` values `k / 8` for small integers `k` from a fixed sequence: sums of their
/// products are exact in float32, so any summation order gives TensorFlow's bits.
fn eighths(count: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state % 17) as f32 - 8.0) / 8.0
        })
        .collect()
}

/// A float32 constant of `dims` with [`eighths`] values.
fn weights(g: &mut Graph, dims: &[usize], seed: u64) -> Output {
    let n = dims.iter().product();
    g.constant_values(&eighths(n, seed), dims).unwrap()
}

/// Convolutions, pooling and the other layers of inference graphs, at padding edges:
/// SAME with odd sizes, VALID with strides larger than the window, dilation, EXPLICIT
/// padding, depthwise with a channel multiplier, and SAME averaging over the valid taps.
fn layers() -> Case {
    let mut g = Graph::new();
    let shape = PartialTensorShape::new(&[None, Some(7), Some(6), Some(3)]).unwrap();
    let x = g.placeholder(DataType::Float, &shape).unwrap();
    let conv = |g: &mut Graph,
                filter: &[usize],
                seed,
                strides: &[i64],
                dilations: &[i64],
                padding: &str| {
        let f = weights(g, filter, seed);
        let mut op = g
            .op("Conv2D")
            .inputs(&[x.clone(), f])
            .attr("strides", int_list(strides))
            .attr("dilations", int_list(dilations))
            .attr("padding", padding);
        if padding == "EXPLICIT" {
            op = op.attr("explicit_paddings", int_list(&[0, 0, 1, 2, 0, 1, 0, 0]));
        }
        op.build_output().unwrap()
    };
    let same = conv(
        &mut g,
        &[3, 3, 3, 4],
        1,
        &[1, 1, 1, 1],
        &[1, 1, 1, 1],
        "SAME",
    );
    let valid = conv(
        &mut g,
        &[2, 2, 3, 2],
        2,
        &[1, 3, 3, 1],
        &[1, 1, 1, 1],
        "VALID",
    );
    let dilated = conv(
        &mut g,
        &[3, 3, 3, 2],
        3,
        &[1, 1, 1, 1],
        &[1, 2, 2, 1],
        "SAME",
    );
    let explicit = conv(
        &mut g,
        &[2, 3, 3, 2],
        4,
        &[1, 2, 1, 1],
        &[1, 1, 1, 1],
        "EXPLICIT",
    );
    let dw_filter = weights(&mut g, &[3, 3, 3, 2], 5);
    let depthwise = g
        .op("DepthwiseConv2dNative")
        .inputs(&[x.clone(), dw_filter])
        .attr("strides", int_list(&[1, 2, 2, 1]))
        .attr("padding", "SAME")
        .build_output()
        .unwrap();
    let pool = |g: &mut Graph, op: &str, padding: &str| {
        g.op(op)
            .input(&x)
            .attr("ksize", int_list(&[1, 3, 3, 1]))
            .attr("strides", int_list(&[1, 2, 2, 1]))
            .attr("padding", padding)
            .build_output()
            .unwrap()
    };
    let max_same = pool(&mut g, "MaxPool", "SAME");
    let avg_same = pool(&mut g, "AvgPool", "SAME");
    let avg_valid = pool(&mut g, "AvgPool", "VALID");
    let bias = weights(&mut g, &[4], 6);
    let biased = g
        .op("BiasAdd")
        .inputs(&[same.clone(), bias])
        .build_output()
        .unwrap();
    let params: Vec<Output> = [(7, 0.0), (8, 0.0), (9, 0.0), (10, 2.0)]
        .iter()
        .map(|&(seed, shift)| {
            let values: Vec<f32> = eighths(3, seed).iter().map(|v| v + shift).collect();
            g.constant_values(&values, &[3]).unwrap()
        })
        .collect();
    let mut inputs = vec![x.clone()];
    inputs.extend(params);
    let normalized = g
        .op("FusedBatchNormV3")
        .inputs(&inputs)
        .attr("epsilon", 0.001f32)
        .attr("is_training", false)
        .build_output()
        .unwrap();
    let rows = g_shape(&mut g, &[-1, 4]);
    let logits = g
        .op("Reshape")
        .inputs(&[valid.clone(), rows])
        .build_output()
        .unwrap();
    let softmax = g.unary("Softmax", &logits).unwrap();
    let log_softmax = g.unary("LogSoftmax", &logits).unwrap();
    let feed = Tensor::from_slice(&eighths(2 * 7 * 6 * 3, 11), [2, 7, 6, 3], &cpu()).unwrap();
    Case {
        name: "layers",
        graph: g,
        feeds: vec![(x, feed)],
        fetches: vec![
            same,
            valid,
            dilated,
            explicit,
            depthwise,
            max_same,
            avg_same,
            avg_valid,
            biased,
            normalized,
            softmax,
            log_softmax,
        ],
        target_runs: Vec::new(),
        atol: 1e-6,
        every_device: false,
    }
}

/// Gathers, one-hots, evenly spaced values, and seeded random values: TensorFlow's Philox
/// streams, uniform bit for bit, normal within the comparison's 1e-6, and a random op run
/// once before the fetch continues its stream as TensorFlow's does.
fn generators() -> Case {
    let mut g = Graph::new();
    let params = weights(&mut g, &[2, 4, 3], 1);
    let indices = g.constant_values(&[3i32, 0, 0, 1, 2, 1], &[2, 3]).unwrap();
    let (axis0, axis1) = (g.constant(0i32).unwrap(), g.constant(1i32).unwrap());
    let gather = g
        .op("GatherV2")
        .inputs(&[params.clone(), indices.clone(), axis1.clone()])
        .build_output()
        .unwrap();
    let batched = g
        .op("GatherV2")
        .inputs(&[params.clone(), indices, axis1])
        .attr("batch_dims", 1i64)
        .build_output()
        .unwrap();
    let rows = g.constant_values(&[1i64, 0, 1], &[3]).unwrap();
    let gather_rows = g
        .op("GatherV2")
        .inputs(&[params, rows, axis0])
        .build_output()
        .unwrap();
    let hot_indices = g.constant_values(&[0i32, 3, -1, 5, 2], &[5]).unwrap();
    let depth = g.constant(4i32).unwrap();
    let (on, off) = (g.constant(2.5f32).unwrap(), g.constant(-1.0f32).unwrap());
    let one_hot = g
        .op("OneHot")
        .inputs(&[hot_indices.clone(), depth.clone(), on.clone(), off.clone()])
        .build_output()
        .unwrap();
    let one_hot_first = g
        .op("OneHot")
        .inputs(&[hot_indices, depth, on, off])
        .attr("axis", 0i64)
        .build_output()
        .unwrap();
    let spaced = |g: &mut Graph, start: Output, stop: Output, num: i32| {
        let num = g.constant(num).unwrap();
        g.op("LinSpace")
            .inputs(&[start, stop, num])
            .build_output()
            .unwrap()
    };
    let (a, b) = (g.constant(-1.0f32).unwrap(), g.constant(2.0f32).unwrap());
    let linspace = spaced(&mut g, a, b, 7);
    let (a, b) = (g.constant(0.1f64).unwrap(), g.constant(0.7f64).unwrap());
    let linspace64 = spaced(&mut g, a, b, 4);
    let random = |g: &mut Graph, op: &str, dtype: DataType, dims: &[i32], seeds: (i64, i64)| {
        let shape = g.constant_values(dims, &[dims.len()]).unwrap();
        g.op(op)
            .input(&shape)
            .attr("dtype", dtype)
            .attr("seed", seeds.0)
            .attr("seed2", seeds.1)
            .build_output()
            .unwrap()
    };
    let mut fetches = vec![
        gather,
        batched,
        gather_rows,
        one_hot,
        one_hot_first,
        linspace,
        linspace64,
    ];
    for (op, dtype, dims, seeds) in [
        ("RandomUniform", DataType::Float, &[3, 5][..], (7, 3)),
        ("RandomUniform", DataType::Double, &[5][..], (7, 3)),
        ("RandomUniform", DataType::Half, &[6][..], (1, 0)),
        ("RandomUniform", DataType::BFloat16, &[6][..], (0, 9)),
        ("RandomStandardNormal", DataType::Float, &[9][..], (1, 2)),
        ("RandomStandardNormal", DataType::Double, &[5][..], (1, 2)),
        ("TruncatedNormal", DataType::Float, &[2, 7][..], (5, 6)),
        ("TruncatedNormal", DataType::Double, &[5][..], (5, 6)),
    ] {
        fetches.push(random(&mut g, op, dtype, dims, seeds));
    }
    let advanced = random(&mut g, "RandomUniform", DataType::Float, &[5], (11, 12));
    fetches.push(advanced.clone());
    Case {
        name: "generators",
        graph: g,
        feeds: Vec::new(),
        fetches,
        target_runs: vec![vec![advanced.op().clone()]],
        atol: 0.0,
        every_device: false,
    }
}

/// The chains a session fuses (`_FusedConv2D`): a convolution with its bias and `Relu`, a
/// `Pad` feeding a `VALID` depthwise convolution with its batch norm and `Relu6`, and a
/// convolution with a batch norm alone; only the chains' last values are fetched, so each
/// runs fused, and TensorFlow runs them unfused.
fn fused_layers() -> Case {
    let mut g = Graph::new();
    let shape = PartialTensorShape::new(&[None, Some(6), Some(7), Some(3)]).unwrap();
    let x = g.placeholder(DataType::Float, &shape).unwrap();
    let conv = |g: &mut Graph, op: &str, input: &Output, filter: &[usize], seed, padding: &str| {
        let f = weights(g, filter, seed);
        g.op(op)
            .inputs(&[input.clone(), f])
            .attr("strides", int_list(&[1, 2, 2, 1]))
            .attr("padding", padding)
            .build_output()
            .unwrap()
    };
    let norm = |g: &mut Graph, input: &Output, channels: usize, seed: u64| {
        let mut inputs = vec![input.clone()];
        for (k, shift) in [0.0f32, 0.0, 0.0, 2.0].into_iter().enumerate() {
            let values: Vec<f32> = eighths(channels, seed + k as u64)
                .iter()
                .map(|v| v + shift)
                .collect();
            inputs.push(g.constant_values(&values, &[channels]).unwrap());
        }
        g.op("FusedBatchNormV3")
            .inputs(&inputs)
            .attr("epsilon", 0.001f32)
            .attr("is_training", false)
            .build_output()
            .unwrap()
    };
    let c1 = conv(&mut g, "Conv2D", &x, &[3, 3, 3, 4], 21, "SAME");
    let bias = weights(&mut g, &[4], 22);
    let biased = g.op("BiasAdd").inputs(&[c1, bias]).build_output().unwrap();
    let relu = g.unary("Relu", &biased).unwrap();
    let paddings = g
        .constant_values(&[0i32, 0, 0, 1, 1, 1, 0, 0], &[4, 2])
        .unwrap();
    let padded = g
        .op("Pad")
        .inputs(&[x.clone(), paddings])
        .build_output()
        .unwrap();
    let d = conv(
        &mut g,
        "DepthwiseConv2dNative",
        &padded,
        &[3, 3, 3, 2],
        23,
        "VALID",
    );
    let d_norm = norm(&mut g, &d, 6, 24);
    let relu6 = g.unary("Relu6", &d_norm).unwrap();
    let c2 = conv(&mut g, "Conv2D", &x, &[1, 1, 3, 5], 30, "VALID");
    let c2_norm = norm(&mut g, &c2, 5, 31);
    // Keras 3's batch norm after a biased convolution: `Mul` and `AddV2` by per-channel
    // vectors (the vector first or second), then `Relu` or nothing; and a `Mul` by a scalar,
    // which is no per-channel scale.
    // Flipped, the vectors are `[1, 1, 1, C]`, as Keras reshapes them to broadcast.
    let keras_norm = |g: &mut Graph, input: &Output, channels: usize, seed: u64, flip: bool| {
        let dims = if flip {
            vec![1, 1, 1, channels]
        } else {
            vec![channels]
        };
        let scale = weights(g, &dims, seed);
        let shift = weights(g, &dims, seed + 1);
        let (a, b) = if flip {
            (scale, input.clone())
        } else {
            (input.clone(), scale)
        };
        let scaled = g.op("Mul").inputs(&[a, b]).build_output().unwrap();
        g.op("AddV2")
            .inputs(&[scaled, shift])
            .build_output()
            .unwrap()
    };
    let c3 = conv(&mut g, "Conv2D", &x, &[3, 3, 3, 4], 32, "SAME");
    let c3_bias = weights(&mut g, &[4], 33);
    let c3 = g
        .op("BiasAdd")
        .inputs(&[c3, c3_bias])
        .build_output()
        .unwrap();
    let c3 = keras_norm(&mut g, &c3, 4, 34, false);
    let c3_relu = g.unary("Relu", &c3).unwrap();
    let d2 = conv(
        &mut g,
        "DepthwiseConv2dNative",
        &x,
        &[3, 3, 3, 2],
        36,
        "SAME",
    );
    let d2_bias = weights(&mut g, &[6], 37);
    let d2 = g
        .op("BiasAdd")
        .inputs(&[d2, d2_bias])
        .build_output()
        .unwrap();
    let d2_norm = keras_norm(&mut g, &d2, 6, 38, true);
    let c4 = conv(&mut g, "Conv2D", &x, &[1, 1, 3, 5], 40, "VALID");
    let c4_bias = weights(&mut g, &[5], 41);
    let c4 = g
        .op("BiasAdd")
        .inputs(&[c4, c4_bias])
        .build_output()
        .unwrap();
    let half = g.constant_values(&[0.5f32], &[]).unwrap();
    let c4_scaled = g.op("Mul").inputs(&[c4, half]).build_output().unwrap();
    let feed = Tensor::from_slice(&eighths(2 * 6 * 7 * 3, 40), [2, 6, 7, 3], &cpu()).unwrap();
    Case {
        name: "fused_layers",
        graph: g,
        feeds: vec![(x, feed)],
        fetches: vec![relu, relu6, c2_norm, c3_relu, d2_norm, c4_scaled],
        target_runs: Vec::new(),
        atol: 1e-6,
        every_device: false,
    }
}

/// An int32 shape constant.
fn g_shape(g: &mut Graph, dims: &[i32]) -> Output {
    g.constant_values(dims, &[dims.len()]).unwrap()
}

/// The array ops: joins, splits, pads, slices with every mask, tiles and defaults, with
/// their static shapes as TensorFlow infers them.
fn array_ops() -> Case {
    let mut g = Graph::new();
    let shape = PartialTensorShape::new(&[Some(4), Some(5)]).unwrap();
    let x = g.placeholder(DataType::Float, &shape).unwrap();
    let y = weights(&mut g, &[4, 2], 1);
    let axis1 = g.constant(1i32).unwrap();
    let concat = g
        .op("ConcatV2")
        .inputs(&[x.clone(), y.clone(), axis1.clone()])
        .build_output()
        .unwrap();
    let row = weights(&mut g, &[5], 2);
    let pack = g
        .op("Pack")
        .inputs(&[row.clone(), row.clone(), row])
        .attr("axis", 1i64)
        .build_output()
        .unwrap();
    let unpack = g
        .op("Unpack")
        .input(&y)
        .attr("num", 2i64)
        .attr("axis", 1i64)
        .build()
        .unwrap();
    let split = g
        .op("Split")
        .inputs(&[axis1.clone(), concat.clone()])
        .attr("num_split", 7i64)
        .build()
        .unwrap();
    let sizes = g.constant_values(&[1i32, -1, 2], &[3]).unwrap();
    let split_v = g
        .op("SplitV")
        .inputs(&[x.clone(), sizes, axis1])
        .attr("num_split", 3i64)
        .build()
        .unwrap();
    let paddings = g.constant_values(&[1i32, 2, 0, 3], &[2, 2]).unwrap();
    let pad = g
        .op("Pad")
        .inputs(&[x.clone(), paddings.clone()])
        .build_output()
        .unwrap();
    let seven = g.constant(7.0f32).unwrap();
    let pad_v2 = g
        .op("PadV2")
        .inputs(&[x.clone(), paddings, seven])
        .build_output()
        .unwrap();
    let mirror = g.constant_values(&[2i32, 1, 3, 1], &[2, 2]).unwrap();
    let reflect = g
        .op("MirrorPad")
        .inputs(&[x.clone(), mirror.clone()])
        .attr("mode", "REFLECT")
        .build_output()
        .unwrap();
    let symmetric = g
        .op("MirrorPad")
        .inputs(&[x.clone(), mirror])
        .attr("mode", "SYMMETRIC")
        .build_output()
        .unwrap();
    let (begin, size) = (
        g.constant_values(&[1i32, 2], &[2]).unwrap(),
        g.constant_values(&[2i32, -1], &[2]).unwrap(),
    );
    let slice = g
        .op("Slice")
        .inputs(&[x.clone(), begin, size])
        .build_output()
        .unwrap();
    let strided = |g: &mut Graph, b: &[i32], e: &[i32], s: &[i32], masks: [i64; 5]| {
        let n = b.len();
        let (b, e, s) = (
            g.constant_values(b, &[n]).unwrap(),
            g.constant_values(e, &[n]).unwrap(),
            g.constant_values(s, &[n]).unwrap(),
        );
        g.op("StridedSlice")
            .inputs(&[x.clone(), b, e, s])
            .attr("begin_mask", masks[0])
            .attr("end_mask", masks[1])
            .attr("ellipsis_mask", masks[2])
            .attr("new_axis_mask", masks[3])
            .attr("shrink_axis_mask", masks[4])
            .build_output()
            .unwrap()
    };
    let reversed = strided(&mut g, &[-1, 4], &[0, 0], &[-2, -3], [0, 0, 0, 0, 0]);
    let masked = strided(&mut g, &[0, 0, 1], &[0, 0, 9], &[1, 1, 2], [1, 1, 2, 0, 0]);
    let new_axis = strided(&mut g, &[0, 0, 2], &[0, 0, 3], &[1, 1, 1], [0, 0, 1, 2, 4]);
    let shrunk = strided(&mut g, &[2, 1], &[3, 5], &[1, 2], [0, 0, 0, 0, 1]);
    let multiples = g.constant_values(&[2i32, 3], &[2]).unwrap();
    let tile = g
        .op("Tile")
        .inputs(&[y.clone(), multiples])
        .build_output()
        .unwrap();
    let default = g
        .op("PlaceholderWithDefault")
        .input(&y)
        .attr("dtype", DataType::Float)
        .attr("shape", &PartialTensorShape::new(&[None, Some(2)]).unwrap())
        .build_output()
        .unwrap();
    let feed = Tensor::from_slice(&eighths(20, 3), [4, 5], &cpu()).unwrap();
    let mut fetches = vec![concat, pack];
    for op in [&unpack, &split, &split_v] {
        fetches.extend(g.outputs(op).unwrap());
    }
    fetches.extend([
        pad, pad_v2, reflect, symmetric, slice, reversed, masked, new_axis, shrunk, tile, default,
    ]);
    Case {
        name: "array_ops",
        graph: g,
        feeds: vec![(x, feed)],
        fetches,
        target_runs: Vec::new(),
        atol: 0.0,
        every_device: false,
    }
}

/// `ReverseV2` (one axis, several, negative) and `BroadcastTo` (new leading dims, size-1
/// dims spread), as Keras's `Bidirectional` and attention layers write them, placed on
/// the first two devices that are not the CPU (TensorFlow, with no GPU, soft-places them).
fn reverse_and_broadcast() -> Case {
    let mut g = Graph::new();
    let shape = PartialTensorShape::new(&[Some(2), Some(3), Some(4)]).unwrap();
    let x = g.placeholder(DataType::Float, &shape).unwrap();
    let reverse = |g: &mut Graph, axes: &[i32]| {
        let axes = g.constant_values(axes, &[axes.len()]).unwrap();
        g.op("ReverseV2")
            .inputs(&[x.clone(), axes])
            .build_output()
            .unwrap()
    };
    // On the first two devices that are not the CPU (opencl:0 and wgpu:0 in CI).
    let (time, both, none) = g.device_scope("/device:GPU:0", |g| {
        (reverse(g, &[1]), reverse(g, &[0, -1]), reverse(g, &[]))
    });
    let column = weights(&mut g, &[3, 1], 4);
    let broadcast = |g: &mut Graph, input: &Output, dims: &[i32]| {
        let dims = g.constant_values(dims, &[dims.len()]).unwrap();
        g.op("BroadcastTo")
            .inputs(&[input.clone(), dims])
            .build_output()
            .unwrap()
    };
    let (spread, lead) = g.device_scope("/device:GPU:1", |g| {
        (
            broadcast(g, &column, &[2, 3, 4]),
            broadcast(g, &x, &[2, 2, 3, 4]),
        )
    });
    let feed = Tensor::from_slice(&eighths(24, 5), [2, 3, 4], &cpu()).unwrap();
    Case {
        name: "reverse_and_broadcast",
        graph: g,
        feeds: vec![(x, feed)],
        fetches: vec![time, both, none, spread, lead],
        target_runs: Vec::new(),
        atol: 0.0,
        every_device: true,
    }
}

/// A dilated convolution as TensorFlow writes it (`SpaceToBatchND`, a `Conv2D`,
/// `BatchToSpaceND`, with paddings and crops), and a 1-D round trip on odd sizes, on the
/// first device that is not the CPU.
fn space_and_batch() -> Case {
    let mut g = Graph::new();
    let image = PartialTensorShape::new(&[Some(1), Some(9), Some(7), Some(2)]).unwrap();
    let x = g.placeholder(DataType::Float, &image).unwrap();
    let sequence = PartialTensorShape::new(&[Some(2), Some(11), Some(3)]).unwrap();
    let s = g.placeholder(DataType::Float, &sequence).unwrap();
    let filter = weights(&mut g, &[3, 3, 2, 4], 6);
    let ints =
        |g: &mut Graph, values: &[i32], dims: &[usize]| g.constant_values(values, dims).unwrap();
    let block2 = ints(&mut g, &[2, 2], &[2]);
    let paddings = ints(&mut g, &[1, 2, 0, 1], &[2, 2]);
    let crops = ints(&mut g, &[0, 1, 0, 0], &[2, 2]);
    let block3 = ints(&mut g, &[3], &[1]);
    let pad1 = ints(&mut g, &[1, 0], &[1, 2]);
    let (batched, dilated, there, back) = g.device_scope("/device:GPU:0", |g| {
        let batched = g
            .op("SpaceToBatchND")
            .inputs(&[x.clone(), block2.clone(), paddings])
            .build_output()
            .unwrap();
        let conv = g
            .op("Conv2D")
            .inputs(&[batched.clone(), filter])
            .attr("strides", int_list(&[1, 1, 1, 1]))
            .attr("padding", "VALID")
            .build_output()
            .unwrap();
        let dilated = g
            .op("BatchToSpaceND")
            .inputs(&[conv, block2, crops])
            .build_output()
            .unwrap();
        let there = g
            .op("SpaceToBatchND")
            .inputs(&[s.clone(), block3.clone(), pad1.clone()])
            .build_output()
            .unwrap();
        let back = g
            .op("BatchToSpaceND")
            .inputs(&[there.clone(), block3, pad1])
            .build_output()
            .unwrap();
        (batched, dilated, there, back)
    });
    let feeds = vec![
        (
            x,
            Tensor::from_slice(&eighths(126, 7), [1, 9, 7, 2], &cpu()).unwrap(),
        ),
        (
            s,
            Tensor::from_slice(&eighths(66, 8), [2, 11, 3], &cpu()).unwrap(),
        ),
    ];
    Case {
        name: "space_and_batch",
        graph: g,
        feeds,
        fetches: vec![batched, dilated, there, back],
        target_runs: Vec::new(),
        atol: 1e-5,
        every_device: true,
    }
}

/// Grouped convolutions (a filter whose depth divides the input's, as ConvNeXt and
/// `Conv2D(groups=g)` write them), plain and followed by a bias and a `Relu` (which the
/// session fuses), on the first device that is not the CPU.
fn grouped_convolution() -> Case {
    let mut g = Graph::new();
    let image = PartialTensorShape::new(&[Some(2), Some(6), Some(5), Some(4)]).unwrap();
    let x = g.placeholder(DataType::Float, &image).unwrap();
    let two_groups = weights(&mut g, &[3, 3, 2, 6], 16);
    let four_groups = weights(&mut g, &[1, 2, 1, 8], 17);
    let bias = weights(&mut g, &[8], 18);
    let fetches = g.device_scope("/device:GPU:0", |g| {
        let conv = |g: &mut Graph, filter: &Output, padding: &str, strides: &[i64]| {
            g.op("Conv2D")
                .inputs(&[x.clone(), filter.clone()])
                .attr("strides", int_list(strides))
                .attr("padding", padding)
                .build_output()
                .unwrap()
        };
        let same = conv(g, &two_groups, "SAME", &[1, 1, 1, 1]);
        let strided = conv(g, &four_groups, "VALID", &[1, 2, 1, 1]);
        let biased = g
            .op("BiasAdd")
            .inputs(&[strided.clone(), bias])
            .build_output()
            .unwrap();
        let relu = g.op("Relu").input(&biased).build_output().unwrap();
        vec![same, strided, relu]
    });
    let feed = Tensor::from_slice(&eighths(240, 19), [2, 6, 5, 4], &cpu()).unwrap();
    Case {
        name: "grouped_convolution",
        graph: g,
        feeds: vec![(x, feed)],
        fetches,
        target_runs: Vec::new(),
        atol: 1e-5,
        every_device: true,
    }
}

/// `ResizeBilinear` and `ResizeNearestNeighbor` up and down, with each of
/// `align_corners` and `half_pixel_centers` (Keras's `UpSampling2D` writes the latter), on
/// the first device that is not the CPU.
fn resizing() -> Case {
    let mut g = Graph::new();
    let image = PartialTensorShape::new(&[Some(2), Some(5), Some(4), Some(3)]).unwrap();
    let x = g.placeholder(DataType::Float, &image).unwrap();
    let fetches = g.device_scope("/device:GPU:0", |g| {
        let mut fetches = Vec::new();
        for op in ["ResizeBilinear", "ResizeNearestNeighbor"] {
            for size in [[10, 8], [3, 7], [1, 1]] {
                for (align, half) in [(false, false), (true, false), (false, true)] {
                    let size = g.constant_values(&size, &[2]).unwrap();
                    fetches.push(
                        g.op(op)
                            .inputs(&[x.clone(), size])
                            .attr("align_corners", align)
                            .attr("half_pixel_centers", half)
                            .build_output()
                            .unwrap(),
                    );
                }
            }
        }
        fetches
    });
    let feed = Tensor::from_slice(&eighths(120, 20), [2, 5, 4, 3], &cpu()).unwrap();
    Case {
        name: "resizing",
        graph: g,
        feeds: vec![(x, feed)],
        fetches,
        target_runs: Vec::new(),
        atol: 1e-5,
        every_device: true,
    }
}

/// `Einsum` with the equations Keras's `MultiHeadAttention` and `EinsumDense` write
/// (projections, scores, the weighted sum, the output projection), broadcasting `...`,
/// a single-operand sum and transpose, and an outer product, on the
/// first device that is not the CPU.
fn einsum() -> Case {
    let mut g = Graph::new();
    let query = PartialTensorShape::new(&[Some(2), Some(5), Some(6)]).unwrap();
    let q = g.placeholder(DataType::Float, &query).unwrap();
    let kernel = weights(&mut g, &[6, 3, 4], 9);
    let out_kernel = weights(&mut g, &[3, 4, 6], 10);
    let matrix = weights(&mut g, &[6, 7], 11);
    let batched = weights(&mut g, &[3, 1, 6, 2], 12);
    let vector = weights(&mut g, &[5], 13);
    let fetches = g.device_scope("/device:GPU:0", |g| {
        let einsum = |g: &mut Graph, equation: &str, inputs: &[Output]| {
            g.op("Einsum")
                .inputs(inputs)
                .attr("equation", equation)
                .build_output()
                .unwrap()
        };
        let heads = einsum(g, "abc,cde->abde", &[q.clone(), kernel]);
        let scores = einsum(g, "aecd,abcd->acbe", &[heads.clone(), heads.clone()]);
        let mixed = einsum(g, "acbe,aecd->abcd", &[scores.clone(), heads.clone()]);
        let projected = einsum(g, "abcd,cde->abe", &[mixed.clone(), out_kernel]);
        let broadcast = einsum(g, "...ij,...jk->...ik", &[q.clone(), matrix.clone()]);
        let wide = einsum(g, "bij,...jk->...bik", &[q.clone(), batched]);
        let right = weights(g, &[7, 2], 14);
        let implicit = einsum(g, "ij,jk->ik", &[matrix.clone(), right]);
        let sums = einsum(g, "abc->cb", std::slice::from_ref(&q));
        let outer = einsum(g, "i,j->ij", &[vector.clone(), vector]);
        vec![
            heads, scores, mixed, projected, broadcast, wide, implicit, sums, outer,
        ]
    });
    let feed = Tensor::from_slice(&eighths(60, 15), [2, 5, 6], &cpu()).unwrap();
    Case {
        name: "einsum",
        graph: g,
        feeds: vec![(q, feed)],
        fetches,
        target_runs: Vec::new(),
        atol: 1e-5,
        every_device: true,
    }
}

/// Every TensorList op (made from a tensor and by reserving, read, set, pushed, popped,
/// stacked, concatenated, split, measured) and `Erfc`, on the first device that is not the
/// CPU: the lists stay there, their elements flow through the ops as tensors.
fn tensor_lists() -> Case {
    let mut g = Graph::new();
    let rows = PartialTensorShape::new(&[Some(4), Some(3)]).unwrap();
    let x = g.placeholder(DataType::Float, &rows).unwrap();
    let fetches = g.device_scope("/device:GPU:0", |g| {
        let row_shape = g.constant_values(&[3i32], &[1]).unwrap();
        let int = |g: &mut Graph, v: i32| g.constant_values(&[v], &[]).unwrap();
        let list = g
            .op("TensorListFromTensor")
            .inputs(&[x.clone(), row_shape.clone()])
            .build_output()
            .unwrap();
        let length = g
            .op("TensorListLength")
            .inputs(std::slice::from_ref(&list))
            .build_output()
            .unwrap();
        let extra = g.constant_values(&[0.5f32, -1.5, 2.0], &[3]).unwrap();
        let pushed = g
            .op("TensorListPushBack")
            .inputs(&[list.clone(), extra])
            .build_output()
            .unwrap();
        let popped = g
            .op("TensorListPopBack")
            .inputs(&[pushed, row_shape.clone()])
            .attr("element_dtype", DataType::Float)
            .build()
            .unwrap();
        let [rest, last] = [0, 1].map(|i| g.output(&popped, i).unwrap());
        let at_two = int(g, 2);
        let item = g
            .op("TensorListGetItem")
            .inputs(&[rest.clone(), at_two, row_shape.clone()])
            .attr("element_dtype", DataType::Float)
            .build_output()
            .unwrap();
        let at_one = int(g, 1);
        let set = g
            .op("TensorListSetItem")
            .inputs(&[rest, at_one, last.clone()])
            .build_output()
            .unwrap();
        let stacked = g
            .op("TensorListStack")
            .inputs(&[set.clone(), row_shape.clone()])
            .attr("element_dtype", DataType::Float)
            .attr("num_elements", 4i64)
            .build_output()
            .unwrap();
        let lengths = g.constant_values(&[1i64, 3], &[2]).unwrap();
        let unknown = int(g, -1);
        let split = g
            .op("TensorListSplit")
            .inputs(&[x.clone(), unknown.clone(), lengths])
            .build_output()
            .unwrap();
        let no_dims = g.constant_values::<i64>(&[], &[0]).unwrap();
        let joined = g
            .op("TensorListConcatV2")
            .inputs(&[split, unknown, no_dims])
            .attr("element_dtype", DataType::Float)
            .build()
            .unwrap();
        let [concat, concat_lengths] = [0, 1].map(|i| g.output(&joined, i).unwrap());
        let element_shape = g
            .op("TensorListElementShape")
            .inputs(std::slice::from_ref(&set))
            .attr("shape_type", DataType::Int32)
            .build_output()
            .unwrap();
        let two = int(g, 2);
        let reserved = g
            .op("TensorListReserve")
            .inputs(&[row_shape.clone(), two])
            .attr("element_dtype", DataType::Float)
            .build_output()
            .unwrap();
        let at_zero = int(g, 0);
        let first = g
            .op("TensorListSetItem")
            .inputs(&[reserved, at_zero, last.clone()])
            .build_output()
            .unwrap();
        let half_set = g
            .op("TensorListStack")
            .inputs(&[first, row_shape])
            .attr("element_dtype", DataType::Float)
            .build_output()
            .unwrap();
        let erfc = g.unary("Erfc", &x).unwrap();
        vec![
            length,
            last,
            item,
            stacked,
            concat,
            concat_lengths,
            element_shape,
            half_set,
            erfc,
        ]
    });
    let feed = Tensor::from_slice(&eighths(12, 21), [4, 3], &cpu()).unwrap();
    Case {
        name: "tensor_lists",
        graph: g,
        feeds: vec![(x, feed)],
        fetches,
        target_runs: Vec::new(),
        atol: 1e-6,
        every_device: true,
    }
}

/// `Conv2DBackpropInput` as Keras's `Conv2DTranspose` writes it (stride 2, SAME and VALID),
/// with dilation, explicit padding, the two spatial `input_sizes` only, and NCHW, on the
/// first device that is not the CPU.
fn transposed_convolutions() -> Case {
    let mut g = Graph::new();
    let shape = PartialTensorShape::new(&[Some(2), Some(4), Some(5), Some(3)]).unwrap();
    let dy = g.placeholder(DataType::Float, &shape).unwrap();
    let filter = weights(&mut g, &[3, 3, 2, 3], 22);
    let small = weights(&mut g, &[2, 2, 2, 3], 23);
    let fetches = g.device_scope("/device:GPU:0", |g| {
        let mut fetches = Vec::new();
        // `input_sizes`, the filter, strides, dilations, padding and explicit paddings.
        type Transposed<'a> = (&'a [i32], &'a Output, [i64; 4], [i64; 4], &'a str, Vec<i64>);
        let cases: [Transposed<'_>; 5] = [
            (
                &[2, 8, 10, 2],
                &filter,
                [1, 2, 2, 1],
                [1, 1, 1, 1],
                "SAME",
                vec![],
            ),
            (
                &[2, 9, 11, 2],
                &filter,
                [1, 2, 2, 1],
                [1, 1, 1, 1],
                "VALID",
                vec![],
            ),
            (&[8, 9], &small, [1, 2, 2, 1], [1, 1, 1, 1], "SAME", vec![]),
            (
                &[2, 8, 9, 2],
                &filter,
                [1, 1, 1, 1],
                [1, 2, 2, 1],
                "VALID",
                vec![],
            ),
            (
                &[2, 3, 11, 2],
                &filter,
                [1, 1, 2, 1],
                [1, 1, 1, 1],
                "EXPLICIT",
                vec![0, 0, 1, 2, 0, 1, 0, 0],
            ),
        ];
        for (sizes, filter, strides, dilations, padding, explicit) in cases {
            let sizes = g.constant_values(sizes, &[sizes.len()]).unwrap();
            let mut op = g
                .op("Conv2DBackpropInput")
                .inputs(&[sizes, filter.clone(), dy.clone()])
                .attr("strides", int_list(&strides))
                .attr("dilations", int_list(&dilations))
                .attr("padding", padding);
            if !explicit.is_empty() {
                op = op.attr("explicit_paddings", int_list(&explicit));
            }
            fetches.push(op.build_output().unwrap());
        }
        fetches
    });
    let feed = Tensor::from_slice(&eighths(120, 24), [2, 4, 5, 3], &cpu()).unwrap();
    Case {
        name: "transposed_convolutions",
        graph: g,
        feeds: vec![(dy, feed)],
        fetches,
        target_runs: Vec::new(),
        atol: 1e-5,
        every_device: true,
    }
}

/// A matmul on `/device:GPU:0`, a reduction on `/device:GPU:1`: polytensor runs them on the
/// first two devices that are not the CPU (opencl:0 and wgpu:0 in CI), TensorFlow (with
/// soft placement, and no GPU) on its CPU.
fn placed_across_devices() -> Case {
    let (graph, x, fetches) = common::placed::across_devices();
    let feed = Tensor::from_slice(&[1.0f32, 2.0, 3.0, -1.0, 0.5, 4.0], [2, 3], &cpu()).unwrap();
    Case {
        name: "placed_across_devices",
        graph,
        feeds: vec![(x, feed)],
        fetches: fetches.to_vec(),
        target_runs: vec![],
        atol: 1e-5,
        every_device: true,
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
        layers(),
        array_ops(),
        generators(),
        fused_layers(),
        placed_across_devices(),
        reverse_and_broadcast(),
        space_and_batch(),
        einsum(),
        grouped_convolution(),
        resizing(),
        tensor_lists(),
        transposed_convolutions(),
    ];
    for case in cases {
        case.write(&dir);
    }
    let stdout = common::run_script(&python, "tf_import_graph.py", &[dir.as_os_str()]);
    std::fs::remove_dir_all(&dir).ok();
    println!("{stdout}");
    assert!(stdout.contains("ran 18 polytensor graphs"), "{stdout}");
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
    let session = Session::new(&graph, cpu());
    let y = session.run_by_name(&[("x:0", &x)], &["y:0"], &[]).unwrap();
    assert_eq!(y[0].to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0]);
}

/// `Graph::import_graph_def` with a prefix, an input map and return elements, done by
/// polytensor and by `tf.graph_util.import_graph_def` on the same GraphDefs: the same
/// node names, returned names, renamed colocation and value.
#[test]
fn imports_name_and_map_as_tensorflow_does() {
    let Some(python) = common::TENSORFLOW.python("tensorflow") else {
        return;
    };
    // The model: y = x * 2 + 1, `y` colocated with `x`, and a NoOp `init`.
    let mut model = Graph::new();
    let shape = PartialTensorShape::new(&[Some(2)]).unwrap();
    let x = model
        .placeholder_named("x", DataType::Float, &shape)
        .unwrap();
    let two = model.constant_named("two", &[2.0f32], &[]).unwrap();
    let one = model.constant_named("one", &[1.0f32], &[]).unwrap();
    let scaled = model.mul(&x, &two).unwrap();
    let classes = ListValue {
        s: vec![b"loc:@x".to_vec()],
        ..Default::default()
    };
    model
        .op("AddV2")
        .name("y")
        .inputs(&[scaled, one])
        .attr("_class", AttrValue::from(classes))
        .build()
        .unwrap();
    model.op("NoOp").name("init").build().unwrap();
    let def = model.to_graph_def();
    let mut g = Graph::new();
    let feed = g.constant_named("feed", &[3.0f32, -1.0], &[2]).unwrap();
    let base = g.to_graph_def_bytes();
    let first = g
        .import_graph_def(
            &def,
            &ImportOptions {
                prefix: "import".into(),
                input_map: vec![("x:0".into(), feed)],
                return_elements: vec!["y:0".into(), "init".into()],
            },
        )
        .unwrap();
    let second = g
        .import_graph_def(
            &def,
            &ImportOptions {
                return_elements: vec!["y:0".into()],
                ..ImportOptions::with_prefix("import")
            },
        )
        .unwrap();
    let name = |i: &Imported| match i {
        Imported::Output(o) => o.name(),
        Imported::Operation(op) => op.name().to_string(),
    };
    let Imported::Output(y) = &first[0] else {
        panic!("y:0 is a tensor")
    };
    let value = Session::new(&g, cpu()).run(&[], &[y], &[]).unwrap()[0]
        .to_vec::<f32>()
        .unwrap();
    let def_now = g.to_graph_def();
    let colocation = match &def_now
        .node
        .iter()
        .find(|n| n.name == "import_1/y")
        .unwrap()
        .attr["_class"]
        .value
    {
        Some(polytensor::graph::AttrKind::List(list)) => list
            .s
            .iter()
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect::<Vec<_>>(),
        other => panic!("_class is {other:?}"),
    };
    let ours = json!({
        "names": g.operations().map(|op| op.name().to_string()).collect::<Vec<_>>(),
        "returned": [name(&first[0]), name(&first[1]), name(&second[0])],
        "colocation": colocation,
        "value": value,
    });
    let dir = std::env::temp_dir().join(format!("polytensor-tf-import-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("base.pb"), base).unwrap();
    std::fs::write(dir.join("model.pb"), model.to_graph_def_bytes()).unwrap();
    std::fs::write(dir.join("polytensor.json"), ours.to_string()).unwrap();
    let stdout = common::run_script(&python, "tf_import_options.py", &[dir.as_os_str()]);
    std::fs::remove_dir_all(&dir).ok();
    println!("{stdout}");
    assert!(stdout.contains("imported as polytensor did"), "{stdout}");
}
