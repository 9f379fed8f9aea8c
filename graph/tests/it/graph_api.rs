//! The graph layer on cpu:0: names, printing, inference errors, sessions, variables and
//! TensorFlow's op semantics. (TensorFlow's own graphs are run on every device by the
//! facade's `tests/graph_golden.rs`.)

use std::sync::Arc;

use polytensor_core::{DataType, Device, PartialTensorShape, Result, Tensor};
use polytensor_cpu::CpuDevice;
use polytensor_graph::proto::{FunctionDef, FunctionDefLibrary, GraphDef, NodeDef, OpSignature};
use polytensor_graph::{int_list, Graph, Output, Session};
use polytensor_graph::{type_list, AttrValue};
use prost::Message;

fn cpu() -> Arc<dyn Device> {
    CpuDevice::shared()
}

fn run1(g: &Graph, fetch: &Output) -> Tensor {
    Session::new(g, cpu())
        .run(&[], &[fetch], &[])
        .unwrap()
        .remove(0)
}

fn ints(values: &[i32], dims: &[usize], g: &mut Graph) -> Output {
    g.constant_values(values, dims).unwrap()
}

#[test]
fn names_are_made_unique_as_tensorflow_makes_them() {
    let mut g = Graph::new();
    let a = g.constant(1.0f32).unwrap();
    let b = g.constant(2.0f32).unwrap();
    let c = g.add(&a, &b).unwrap();
    let d = g.add(&c, &b).unwrap();
    assert_eq!(
        [a.name(), b.name(), c.name(), d.name()],
        ["Const:0", "Const_1:0", "add:0", "add_1:0"]
    );
    // Explicit names collide the same way, case-insensitively, and `x_1` asked for
    // explicitly after `x` made it becomes `x_1_1`.
    let x = g
        .op("Identity")
        .name("x")
        .input(&a)
        .attr("T", DataType::Float);
    let x = x.build().unwrap();
    let x2 = g.op("Identity").name("x").input(&a).build().unwrap();
    let upper = g.op("Identity").name("X").input(&a).build().unwrap();
    let x1 = g.op("Identity").name("x_1").input(&a).build().unwrap();
    assert_eq!(
        [x.name(), x2.name(), upper.name(), x1.name()],
        ["x", "x_1", "X_2", "x_1_1"]
    );
    // Name scopes, made unique themselves, and nested.
    let (inner, outer) = g.name_scope("layer", |g| {
        let inner = g.name_scope("dense", |g| g.constant(1i32).unwrap());
        (inner, g.constant(2i32).unwrap())
    });
    let again = g.name_scope("layer", |g| g.constant(3i32).unwrap());
    assert_eq!(inner.name(), "layer/dense/Const:0");
    assert_eq!(outer.name(), "layer/Const:0");
    assert_eq!(again.name(), "layer_1/Const:0");
    assert!(g.op("Const").name("bad name!").build().is_err());
}

#[test]
fn symbolic_tensors_print_as_tensorflow_prints_them() {
    let mut g = Graph::new();
    let x = g
        .placeholder(
            DataType::Float,
            &PartialTensorShape::new(&[None, Some(4)]).unwrap(),
        )
        .unwrap();
    assert_eq!(
        x.to_string(),
        r#"Tensor("Placeholder:0", shape=(None, 4), dtype=float32)"#
    );
    let any = g
        .placeholder(DataType::Int64, &PartialTensorShape::unknown_rank())
        .unwrap();
    assert_eq!(any.to_string(), r#"Tensor("Placeholder_1:0", dtype=int64)"#);
    let v = ints(&[1, 2, 3], &[3], &mut g);
    assert_eq!(
        v.to_string(),
        r#"Tensor("Const:0", shape=(3,), dtype=int32)"#
    );
    let w = g
        .constant_values(&[1.0f32; 12], &[4, 3])
        .and_then(|w| g.matmul(&x, &w))
        .unwrap();
    assert_eq!(
        w.to_string(),
        r#"Tensor("MatMul:0", shape=(None, 3), dtype=float32)"#
    );
}

#[test]
fn build_time_mismatches_name_the_op_and_its_inputs() {
    let mut g = Graph::new();
    let a = g.constant_values(&[1.0f32; 6], &[2, 3]).unwrap();
    let b = g.constant_values(&[1.0f32; 4], &[4]).unwrap();
    let message = g.add(&a, &b).unwrap_err().to_string();
    assert!(
        message.contains("AddV2 'add'")
            && message.contains("Const:0")
            && message.contains("Const_1:0"),
        "{message}"
    );
    let i = ints(&[1], &[], &mut g);
    let message = g.add(&a, &i).unwrap_err().to_string();
    assert!(
        message.contains(
            "Input 1 of node add_1 was passed int32 from Const_2:0 incompatible \
             with expected float."
        ),
        "{message}"
    );
    let message = g.matmul(&a, &a).unwrap_err().to_string();
    assert!(
        message.contains("inner dim 3") && message.contains("inner dim 2"),
        "{message}"
    );
    let message = g
        .op("Frobnicate")
        .input(&a)
        .build()
        .unwrap_err()
        .to_string();
    assert!(message.contains("'Frobnicate'"), "{message}");
}

#[test]
fn sessions_run_only_what_fetches_need_and_cache_plans() {
    let mut g = Graph::new();
    let x = g
        .placeholder(
            DataType::Float,
            &PartialTensorShape::new(&[Some(2)]).unwrap(),
        )
        .unwrap();
    let two = g.constant(2.0f32).unwrap();
    let y = g.mul(&x, &two).unwrap();
    let unrelated = g.add(&two, &two).unwrap();
    let session = Session::new(&g, cpu());
    // The placeholder is not needed for `unrelated`.
    let four = session.run(&[], &[&unrelated], &[]).unwrap();
    assert_eq!(four[0].item::<f32>().unwrap(), 4.0);
    let feed = Tensor::from_slice(&[1.5f32, -2.0], [2], &cpu()).unwrap();
    for _ in 0..3 {
        let out = session.run(&[(&x, &feed)], &[&y], &[]).unwrap();
        assert_eq!(out[0].to_vec::<f32>().unwrap(), [3.0, -4.0]);
    }
    assert_eq!(session.cached_plans(), 2);
    // Feeding an intermediate tensor replaces it.
    let fed = Tensor::from_slice(&[7.0f32, 8.0], [2], &cpu()).unwrap();
    let out = session.run(&[(&y, &fed)], &[&y], &[]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), [7.0, 8.0]);

    let missing = session.run(&[], &[&y], &[]).unwrap_err().to_string();
    assert!(
        missing.contains(
            "You must feed a value for placeholder tensor 'Placeholder' with dtype float and shape [2]"
        ),
        "{missing}"
    );
    let wrong_dtype = Tensor::from_slice(&[1i32, 2], [2], &cpu()).unwrap();
    let message = session
        .run(&[(&x, &wrong_dtype)], &[&y], &[])
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("Cannot feed value of dtype int32"),
        "{message}"
    );
    let wrong_shape = Tensor::from_slice(&[1.0f32, 2.0, 3.0], [3], &cpu()).unwrap();
    let message = session
        .run(&[(&x, &wrong_shape)], &[&y], &[])
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("Cannot feed value of shape (3,)"),
        "{message}"
    );
}

#[test]
fn the_plan_cache_keeps_the_plans_used_most_recently() {
    let mut g = Graph::new();
    let constants: Vec<Output> = (0..40).map(|i| g.constant(i as f32).unwrap()).collect();
    let session = Session::new(&g, cpu());
    // 1600 distinct fetch lists: the cache stays at its capacity.
    for a in &constants {
        for b in &constants {
            let values = session.run(&[], &[a, b], &[]).unwrap();
            assert_eq!(values.len(), 2);
        }
    }
    assert_eq!(
        session.cached_plans(),
        polytensor_graph::PLAN_CACHE_CAPACITY
    );
    // A signature dropped long ago is planned again, and runs as before.
    let again = session
        .run(&[], &[&constants[0], &constants[1]], &[])
        .unwrap();
    assert_eq!(again[1].item::<f32>().unwrap(), 1.0);
    assert_eq!(
        session.cached_plans(),
        polytensor_graph::PLAN_CACHE_CAPACITY
    );
}

#[test]
fn graph_defs_that_polytensor_cannot_run_are_errors() {
    let node = |name: &str, op: &str, inputs: &[&str]| NodeDef {
        name: name.into(),
        op: op.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    let def = |nodes: Vec<NodeDef>| GraphDef {
        node: nodes,
        ..Default::default()
    };
    let message = Graph::from_graph_def(&def(vec![node("a", "Wibble", &[])]))
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("'Wibble'") && message.contains("'a'"),
        "{message}"
    );
    let message = Graph::from_graph_def(&def(vec![node("a", "NoOp", &["b"])]))
        .unwrap_err()
        .to_string();
    assert!(message.contains("Unknown input node 'b'"), "{message}");
    let cycle = def(vec![node("a", "NoOp", &["^b"]), node("b", "NoOp", &["^a"])]);
    assert!(Graph::from_graph_def(&cycle)
        .unwrap_err()
        .to_string()
        .contains("cycle"));
    let mut calls = def(vec![node("a", "my_fn", &[])]);
    calls.library = Some(
        FunctionDefLibrary {
            function: vec![FunctionDef {
                signature: Some(OpSignature {
                    name: "my_fn".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }],
        }
        .encode_to_vec(),
    );
    assert!(Graph::from_graph_def(&calls)
        .unwrap_err()
        .to_string()
        .contains("my_fn"));
    assert!(Graph::from_graph_def_bytes(&[0xff, 0xff, 0xff]).is_err());
    let dup = def(vec![node("a", "NoOp", &[]), node("a", "NoOp", &[])]);
    assert!(Graph::from_graph_def(&dup)
        .unwrap_err()
        .to_string()
        .contains("Duplicate"));
}

#[test]
fn a_graph_built_here_round_trips_through_graph_def() {
    let mut g = Graph::new();
    let a = ints(&[1, 2, 3, 4, 5, 6], &[2, 3], &mut g);
    let total = g.name_scope("sum", |g| {
        let axes = ints(&[1], &[1], g);
        g.op("Sum")
            .input(&a)
            .input(&axes)
            .attr("T", DataType::Int32)
            .attr("Tidx", DataType::Int32)
            .attr("keep_dims", false)
            // Attributes TensorFlow adds that do not change the result are kept and ignored.
            .attr("_class", "loc:@a")
            .build_output()
            .unwrap()
    });
    let def = g.to_graph_def();
    let back = Graph::from_graph_def(&def).unwrap();
    assert_eq!(back.to_graph_def(), def);
    let fetched = back.tensor(&total.name()).unwrap();
    assert_eq!(run1(&back, &fetched).to_vec::<i32>().unwrap(), [6, 15]);
}

#[test]
fn division_follows_tensorflow() {
    let mut g = Graph::new();
    let a = ints(&[7, -7, 7, -7], &[4], &mut g);
    let b = ints(&[2, 2, -2, -2], &[4], &mut g);
    let mut op = |op_type: &str| g.binary(op_type, op_type, &a, &b).unwrap();
    let (fd, fm, td, tm) = (
        op("FloorDiv"),
        op("FloorMod"),
        op("TruncateDiv"),
        op("TruncateMod"),
    );
    let session = Session::new(&g, cpu());
    let out = session.run(&[], &[&fd, &fm, &td, &tm], &[]).unwrap();
    let values: Vec<Vec<i32>> = out.iter().map(|t| t.to_vec().unwrap()).collect();
    assert_eq!(values[0], [3, -4, -4, 3]);
    assert_eq!(values[1], [1, 1, -1, -1]);
    assert_eq!(values[2], [3, -3, -3, 3]);
    assert_eq!(values[3], [1, -1, 1, -1]);

    let mut g = Graph::new();
    let a = ints(&[1, 2], &[2], &mut g);
    let zero = ints(&[1, 0], &[2], &mut g);
    let q = g.binary("FloorDiv", "q", &a, &zero).unwrap();
    let negative = ints(&[-1], &[], &mut g);
    let p = g.binary("Pow", "p", &a, &negative).unwrap();
    let session = Session::new(&g, cpu());
    let message = session.run(&[], &[&q], &[]).unwrap_err().to_string();
    assert!(message.contains("Integer division by zero"), "{message}");
    let message = session.run(&[], &[&p], &[]).unwrap_err().to_string();
    assert!(message.contains("negative integer powers"), "{message}");

    let mut g = Graph::new();
    let x = g.constant_values(&[7.5f32, -7.5], &[2]).unwrap();
    let y = g.constant_values(&[2.0f32, 2.0], &[2]).unwrap();
    let fd = g.binary("FloorDiv", "fd", &x, &y).unwrap();
    let fm = g.binary("FloorMod", "fm", &x, &y).unwrap();
    let out = Session::new(&g, cpu()).run(&[], &[&fd, &fm], &[]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), [3.0, -4.0]);
    assert_eq!(out[1].to_vec::<f32>().unwrap(), [1.5, 0.5]);
}

#[test]
fn paddings_that_overflow_a_dimension_are_refused_when_added() {
    let mut g = Graph::new();
    let x = g.constant_values(&[1.0f32, 2.0], &[2]).unwrap();
    for (pad, at) in [
        ([i64::MAX, 1], "2 and 9223372036854775807"),
        ([i64::MAX - 2, 5], "9223372036854775807 and 5"),
    ] {
        let paddings = g.constant_values(&pad, &[1, 2]).unwrap();
        let error = g
            .op("Pad")
            .input(&x)
            .input(&paddings)
            .build_output()
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(&format!("Dimension size overflow from adding {at}")),
            "{error}"
        );
    }
}

#[test]
fn array_ops_infer_and_run() {
    let mut g = Graph::new();
    let x = ints(&[1, 2, 3, 4, 5, 6], &[2, 3], &mut g);
    let shape = ints(&[3, -1], &[2], &mut g);
    let reshaped = g
        .op("Reshape")
        .input(&x)
        .input(&shape)
        .attr("T", DataType::Int32)
        .build_output()
        .unwrap();
    assert_eq!(reshaped.shape().to_string(), "[3,2]");
    let perm = ints(&[1, 0], &[2], &mut g);
    let transposed = g
        .op("Transpose")
        .input(&x)
        .input(&perm)
        .build_output()
        .unwrap();
    assert_eq!(transposed.shape().to_string(), "[3,2]");
    let dim = ints(&[0], &[], &mut g);
    let expanded = g
        .op("ExpandDims")
        .input(&x)
        .input(&dim)
        .build_output()
        .unwrap();
    assert_eq!(expanded.shape().to_string(), "[1,2,3]");
    let squeezed = g
        .op("Squeeze")
        .input(&expanded)
        .attr("squeeze_dims", int_list(&[0]))
        .build_output()
        .unwrap();
    assert_eq!(squeezed.shape().to_string(), "[2,3]");
    let shape_of = g.op("Shape").input(&x).build_output().unwrap();
    let dims = ints(&[2, 2], &[2], &mut g);
    let nine = g.constant(9.0f32).unwrap();
    let filled = g
        .op("Fill")
        .input(&dims)
        .input(&nine)
        .build_output()
        .unwrap();
    assert_eq!(filled.shape().to_string(), "[2,2]");
    let (start, limit, delta) = (
        ints(&[1], &[], &mut g),
        ints(&[10], &[], &mut g),
        ints(&[3], &[], &mut g),
    );
    let range = g
        .op("Range")
        .inputs(&[start, limit, delta])
        .build_output()
        .unwrap();
    assert_eq!(range.shape().to_string(), "[3]");
    let summed = g
        .op("AddN")
        .inputs(&[x.clone(), x.clone(), x.clone()])
        .build_output()
        .unwrap();
    let cast = g
        .op("Cast")
        .input(&x)
        .attr("DstT", DataType::Float)
        .build_output()
        .unwrap();
    let stopped = g.op("StopGradient").input(&cast).build_output().unwrap();
    let both = g
        .op("IdentityN")
        .inputs(&[x.clone(), cast.clone()])
        .build()
        .unwrap();
    let both = g.outputs(&both).unwrap();
    let cond = g.constant_values(&[true, false, true], &[3]).unwrap();
    let zeros = ints(&[0], &[], &mut g);
    let selected = g
        .op("SelectV2")
        .inputs(&[cond, x.clone(), zeros])
        .build_output()
        .unwrap();
    let fetches = [
        &reshaped,
        &transposed,
        &squeezed,
        &shape_of,
        &filled,
        &range,
        &summed,
        &stopped,
        &both[1],
        &selected,
    ];
    let out = Session::new(&g, cpu()).run(&[], &fetches, &[]).unwrap();
    let i = |k: usize| out[k].to_vec::<i32>().unwrap();
    assert_eq!(i(0), [1, 2, 3, 4, 5, 6]);
    assert_eq!(out[0].dims(), [3, 2]);
    assert_eq!(i(1), [1, 4, 2, 5, 3, 6]);
    assert_eq!(out[2].dims(), [2, 3]);
    assert_eq!(i(3), [2, 3]);
    assert_eq!(out[4].to_vec::<f32>().unwrap(), [9.0; 4]);
    assert_eq!(i(5), [1, 4, 7]);
    assert_eq!(i(6), [3, 6, 9, 12, 15, 18]);
    assert_eq!(
        out[7].to_vec::<f32>().unwrap(),
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    assert_eq!(out[8].dtype(), DataType::Float);
    assert_eq!(i(9), [1, 0, 3, 4, 0, 6]);
}

#[test]
fn reference_variables_live_in_the_session() {
    let mut g = Graph::new();
    let shape = PartialTensorShape::new(&[Some(2)]).unwrap();
    let v = g
        .op("VariableV2")
        .name("v")
        .attr("dtype", DataType::Float)
        .attr("shape", &shape)
        .build_output()
        .unwrap();
    let init_value = g.constant_values(&[1.0f32, 2.0], &[2]).unwrap();
    let init = g
        .op("Assign")
        .inputs(&[v.clone(), init_value])
        .build()
        .unwrap();
    let delta = g.constant_values(&[10.0f32, 10.0], &[2]).unwrap();
    let bump = g
        .op("AssignAdd")
        .inputs(&[v.clone(), delta])
        .build()
        .unwrap();
    let read = g.op("Identity").input(&v).build_output().unwrap();
    let session = Session::new(&g, cpu());
    let message = session.run(&[], &[&read], &[]).unwrap_err().to_string();
    assert!(
        message.contains("Attempting to use uninitialized value v"),
        "{message}"
    );
    session.run(&[], &[], &[&init]).unwrap();
    session.run(&[], &[], &[&bump]).unwrap();
    session.run(&[], &[], &[&bump]).unwrap();
    let out = session.run(&[], &[&read], &[]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), [21.0, 22.0]);
    // A second session has its own variables.
    let other = Session::new(&g, cpu());
    assert!(other.run(&[], &[&read], &[]).is_err());
}

#[test]
fn hostile_shapes_are_errors_not_panics() {
    let mut g = Graph::new();
    let x = ints(&[1, 2, 3, 4, 5, 6], &[2, 3], &mut g);
    for target in [[i64::MAX, i64::MAX], [-2, 3], [-1, -1], [4, -1]] {
        let shape = g.constant_values(&target, &[2]).unwrap();
        let reshaped = g.op("Reshape").input(&x).input(&shape).build();
        assert!(reshaped.is_err(), "{target:?}");
    }
    let (lo, hi, step) = (
        g.constant(i64::MIN).unwrap(),
        g.constant(i64::MAX).unwrap(),
        g.constant(1i64).unwrap(),
    );
    // Statically about 2^64 elements: the dim is unknown rather than a wrapped count, and
    // running it is an error, not an allocation of everything.
    if let Ok(range) = g.op("Range").inputs(&[lo, hi, step]).build_output() {
        assert!(Session::new(&g, cpu()).run(&[], &[&range], &[]).is_err());
    }
    let axis = ints(&[5], &[], &mut g);
    assert!(g.op("ArgMax").input(&x).input(&axis).build().is_err());
}

#[test]
fn a_huge_splat_constant_is_not_expanded_at_build_time() {
    use polytensor_core::proto::{DimProto, TensorProto, TensorShapeProto};
    // One value for 2^40 elements: as a Reshape target, inference reads it with a small
    // limit and leaves the shape unknown rather than allocating 8 TiB; running it is an
    // error (over the decoder's limit), not an allocation either.
    let splat = TensorProto {
        dtype: DataType::Int64.as_i32(),
        tensor_shape: Some(TensorShapeProto {
            dim: vec![DimProto {
                size: 1 << 40,
                name: String::new(),
            }],
            unknown_rank: false,
        }),
        int64_val: vec![2],
        ..TensorProto::default()
    };
    let mut g = Graph::new();
    let x = ints(&[1, 2, 3, 4], &[4], &mut g);
    let target = g
        .op("Const")
        .attr("dtype", DataType::Int64)
        .attr("value", splat)
        .build_output()
        .unwrap();
    let reshaped = g.op("Reshape").input(&x).input(&target).build_output();
    let reshaped = reshaped.unwrap();
    assert_eq!(reshaped.shape().rank(), None);
    let err = Session::new(&g, cpu())
        .run(&[], &[&reshaped], &[])
        .unwrap_err();
    assert!(err.to_string().contains("max_bytes"), "{err}");
}

/// A GraphDef of float constants `a` and `b` and one node `op` over `inputs`, with `attrs`.
fn imported_with(op: &str, inputs: &[&str], attrs: &[(&str, AttrValue)]) -> Result<Graph> {
    let mut g = Graph::new();
    g.op("Const")
        .name("a")
        .attr("dtype", DataType::Float)
        .attr(
            "value",
            Tensor::from_slice(&[1.0f32, 2.0], [2], &cpu())
                .unwrap()
                .to_proto()
                .unwrap(),
        )
        .build()
        .unwrap();
    g.op("Const")
        .name("i")
        .attr("dtype", DataType::Int32)
        .attr(
            "value",
            Tensor::from_slice(&[3i32], [1], &cpu())
                .unwrap()
                .to_proto()
                .unwrap(),
        )
        .build()
        .unwrap();
    let def = with_node(&g, op, inputs, attrs);
    Graph::from_graph_def_bytes(&def.encode_to_vec())
}

/// The GraphDef of `g` and a node `n` of `op` over `inputs` with `attrs`.
fn with_node(g: &Graph, op: &str, inputs: &[&str], attrs: &[(&str, AttrValue)]) -> GraphDef {
    let mut def = g.to_graph_def();
    def.node.push(NodeDef {
        name: "n".into(),
        op: op.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        attr: attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        ..Default::default()
    });
    def
}

/// A node the importer must refuse: op, inputs, attributes, and what the error says.
type Refusal = (
    &'static str,
    &'static [&'static str],
    Vec<(&'static str, AttrValue)>,
    &'static str,
);

/// TensorFlow's importer refuses type attributes that contradict the inputs; so does
/// polytensor's, for every op, with TensorFlow's messages.
#[test]
fn attributes_that_contradict_the_inputs_are_refused_at_import() {
    let int32 = || AttrValue::from(DataType::Int32);
    let int64 = || AttrValue::from(DataType::Int64);
    let float = || AttrValue::from(DataType::Float);
    let expected_int64 =
        "Input 1 of node n was passed int32 from i:0 incompatible with expected int64.";
    #[rustfmt::skip]
    let cases: Vec<Refusal> = vec![
        ("AddV2", &["a", "a"], vec![("T", int32())],
            "Input 0 of node n was passed float from a:0 incompatible with expected int32."),
        ("AddV2", &["a", "i"], vec![("T", float())],
            "Input 1 of node n was passed int32 from i:0 incompatible with expected float."),
        ("AddN", &["a", "a"], vec![("N", AttrValue::from(1i64 << 40)), ("T", float())],
            "has attr 'N' = 1099511627776, but 2 inputs are specified"),
        ("AddN", &["a", "i"], vec![("N", AttrValue::from(2i64)), ("T", float())],
            "Input 1 of node n was passed int32"),
        ("IdentityN", &["a"],
            vec![("T", type_list(&[DataType::Float, DataType::Int32, DataType::Int64]))],
            "lists 3 types in attr 'T', but 1 inputs are specified"),
        ("IdentityN", &["a", "i"], vec![("T", type_list(&[DataType::Float, DataType::Int64]))],
            expected_int64),
        ("Sum", &["a", "i"], vec![("T", float()), ("Tidx", int64())], expected_int64),
        ("Cast", &["a"], vec![("SrcT", int32()), ("DstT", float())],
            "Input 0 of node n was passed float"),
        ("Real", &["a"], vec![("T", float())],
            "Value for attr 'T' of float32 is not in the list of allowed values"),
        ("SelectV2", &["i", "a", "a"], vec![("T", int32())], "Input 1 of node n was passed float"),
        ("Fill", &["i", "a"], vec![("T", float()), ("index_type", int64())],
            "Input 0 of node n was passed int32"),
        // A type attribute that is not a type is an error too.
        ("Neg", &["a"], vec![("T", AttrValue::from(3i64))],
            "attribute 'T' of node 'n' is not a type"),
    ];
    for (op, inputs, attrs, needle) in cases {
        let message = imported_with(op, inputs, &attrs).unwrap_err().to_string();
        assert!(message.contains(needle), "{op}: {message}");
    }
    // Consistent attributes import and run.
    let g = imported_with(
        "AddN",
        &["a", "a"],
        &[("N", AttrValue::from(2i64)), ("T", float())],
    )
    .unwrap();
    let sum = g.tensor("n:0").unwrap();
    assert_eq!(run1(&g, &sum).to_vec::<f32>().unwrap(), [2.0, 4.0]);
}

#[test]
fn a_tensor_fed_twice_in_one_run_is_an_error() {
    let mut g = Graph::new();
    let x = g
        .placeholder(DataType::Float, &PartialTensorShape::unknown_rank())
        .unwrap();
    let y = g.unary("Neg", &x).unwrap();
    let one = Tensor::scalar(1.0f32, &cpu()).unwrap();
    let two = Tensor::scalar(2.0f32, &cpu()).unwrap();
    let session = Session::new(&g, cpu());
    let message = session
        .run(&[(&x, &one), (&x, &two)], &[&y], &[])
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("Duplicate feed: Placeholder:0 is fed more than once"),
        "{message}"
    );
    let message = session
        .run_by_name(
            &[("Placeholder:0", &one), ("Placeholder", &two)],
            &["Neg:0"],
            &[],
        )
        .unwrap_err()
        .to_string();
    assert!(message.contains("Duplicate feed"), "{message}");
    // Fetching one tensor twice is fine.
    let values = session.run(&[(&x, &two)], &[&y, &y], &[]).unwrap();
    assert_eq!(values[1].item::<f32>().unwrap(), -2.0);
}

#[test]
fn shapes_that_need_build_time_values_are_inferred() {
    let mut g = Graph::new();
    let rows_of_three = PartialTensorShape::new(&[None, Some(3)]).unwrap();
    let x = g.placeholder(DataType::Float, &rows_of_three).unwrap();
    let shape = g.op("Shape").input(&x).build_output().unwrap();
    let v = g.constant(7i32).unwrap();
    let filled = g
        .op("Fill")
        .inputs(&[shape, v.clone()])
        .build_output()
        .unwrap();
    assert_eq!(filled.shape().to_string(), "[?,3]");
    // A shape vector of known length but unknown values: the rank is known.
    let dims = g
        .placeholder(
            DataType::Int32,
            &PartialTensorShape::new(&[Some(2)]).unwrap(),
        )
        .unwrap();
    let unknown = g.op("Fill").inputs(&[dims, v]).build_output().unwrap();
    assert_eq!(unknown.shape().to_string(), "[?,?]");
    let range = |g: &mut Graph, s: f64, l: f64, d: f64| {
        let (s, l, d) = (
            g.constant(s).unwrap(),
            g.constant(l).unwrap(),
            g.constant(d).unwrap(),
        );
        g.op("Range").inputs(&[s, l, d]).build_output().unwrap()
    };
    for ((s, l, d), n) in [
        ((0.0, 1.0, 0.25), "[4]"),
        ((0.0, 1.0, 0.3), "[4]"),
        ((1.0, 0.0, -0.5), "[2]"),
        ((1.0, 1.0, 0.5), "[0]"),
    ] {
        let r = range(&mut g, s, l, d);
        assert_eq!(r.shape().to_string(), n, "range({s}, {l}, {d})");
        assert_eq!(run1(&g, &r).num_elements().to_string(), n[1..n.len() - 1]);
    }
    // A delta pointing away from the limit is TensorFlow's error, not an empty range.
    let (s, l, d) = (
        g.constant(0.0).unwrap(),
        g.constant(1.0).unwrap(),
        g.constant(-1.0).unwrap(),
    );
    let message = g.op("Range").inputs(&[s, l, d]).build_output().unwrap_err();
    assert!(
        message
            .to_string()
            .contains("Requires start >= limit when delta < 0: 0/1"),
        "{message}"
    );
}

#[test]
fn complex_ops_check_tout_against_the_pair_tensorflow_registers() {
    let mut g = Graph::new();
    let re = g.constant_values(&[3.0f32, -1.0], &[2]).unwrap();
    let im = g.constant_values(&[4.0f32, 0.0], &[2]).unwrap();
    let z = g.op("Complex").inputs(&[re, im]).build_output().unwrap();
    assert_eq!(z.dtype(), DataType::Complex64);
    let message = g
        .op("Real")
        .input(&z)
        .attr("Tout", DataType::Double)
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("attr 'Tout' is float64, but Real of complex64 gives float32"),
        "{message}"
    );
    let modulus = g.unary("ComplexAbs", &z).unwrap();
    assert_eq!(run1(&g, &modulus).to_vec::<f32>().unwrap(), [5.0, 1.0]);
    let conj = g.unary("Conj", &z).unwrap();
    let imag = g.unary("Imag", &conj).unwrap();
    assert_eq!(run1(&g, &imag).to_vec::<f32>().unwrap(), [-4.0, -0.0]);
}

#[test]
fn placeholders_and_constants_take_a_name() {
    let mut g = Graph::new();
    let shape = PartialTensorShape::new(&[Some(2)]).unwrap();
    let x = g.placeholder_named("x", DataType::Float, &shape).unwrap();
    let w = g.constant_named("w", &[3.0f32, 4.0], &[2]).unwrap();
    let w2 = g.constant_named("w", &[1.0f32], &[]).unwrap();
    assert_eq!([x.name(), w.name(), w2.name()], ["x:0", "w:0", "w_1:0"]);
    let y = g.mul(&x, &w).unwrap();
    let feed = Tensor::from_slice(&[1.0f32, 2.0], [2], &cpu()).unwrap();
    let out = Session::new(&g, cpu())
        .run_by_name(&[("x:0", &feed)], &[&y.name()], &[])
        .unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), [3.0, 8.0]);
}

#[test]
fn erf_runs_in_a_graph_as_eagerly_and_refuses_integers_when_run() {
    let values = [-7.0f32, -1.0, -0.5, 0.0, 1e-20, 0.5, 1.0, 4.0];
    let mut g = Graph::new();
    let x = g.constant_values(&values, &[values.len()]).unwrap();
    let erf = g.unary("Erf", &x).unwrap();
    assert_eq!(erf.dtype(), DataType::Float);
    let got = run1(&g, &erf).to_vec::<f32>().unwrap();
    let eager = Tensor::from_slice(&values, [values.len()], &cpu())
        .unwrap()
        .erf()
        .unwrap();
    assert_eq!(got, eager.to_vec::<f32>().unwrap());
    // An odd function, +-1 far out, 0 at 0, 2x / sqrt(pi) near it.
    assert_eq!((got[0], got[3], got[7]), (-1.0, 0.0, 1.0));
    assert_eq!((got[1], got[2]), (-got[6], -got[5]));
    let slope = 2.0 / std::f64::consts::PI.sqrt();
    let near_zero = slope * f64::from(values[4]);
    assert!((f64::from(got[4]) - near_zero).abs() <= near_zero * f64::from(f32::EPSILON));
    let ints = ints(&[1, 2], &[2], &mut g);
    let refused = g.unary("Erf", &ints).and_then(|erf| {
        Session::new(&g, cpu()).run(&[], &[&erf], &[])?;
        Ok(())
    });
    let message = refused.unwrap_err().to_string();
    assert!(
        message.contains("erf is not supported for dtype int32"),
        "{message}"
    );
}

#[test]
fn a_graphs_constants_are_decoded_once_for_all_its_cpu_sessions() {
    let mut g = Graph::new();
    let weights: Vec<f32> = (0..4096).map(|i| i as f32).collect();
    let c = g.constant_values(&weights, &[64, 64]).unwrap();
    let buffer = |t: &Tensor| t.buffer() as *const dyn polytensor_core::TensorBuffer as *const u8;
    let first = run1(&g, &c);
    // A second session, and a session of a copy of the graph grown since, share the
    // buffer the first decoded.
    let second = run1(&g, &c);
    let mut grown = g.clone();
    let doubled = grown.add(&c, &c).unwrap();
    let session = Session::new(&grown, cpu());
    let outputs = session.run(&[], &[&c, &doubled], &[]).unwrap();
    assert_eq!(buffer(&first), buffer(&second));
    assert_eq!(buffer(&first), buffer(&outputs[0]));
    assert_eq!(first.to_vec::<f32>().unwrap(), weights);
    assert_eq!(outputs[1].to_vec::<f32>().unwrap()[5], 10.0);
}

/// A GraphDef of an image `x` (float `[1, 5, 5, 2]`), a filter `w` (`[3, 3, 2, 4]`),
/// int32 constants `v2` (`[[2, 3]]`), `v` (`[2, 3]`), `s5`, `s0`, `s1`, `neg` (5, 0, 1,
/// -1) and float `one` (`[1.0]`), and node `n`.
fn refusal_graph(op: &str, inputs: &[&str], attrs: &[(&str, AttrValue)]) -> Result<Graph> {
    let mut g = Graph::new();
    let cpu = cpu();
    let constants = [
        ("x", Tensor::zeros([1, 5, 5, 2], DataType::Float, &cpu)?),
        ("w", Tensor::zeros([3, 3, 2, 4], DataType::Float, &cpu)?),
        ("v2", Tensor::from_slice(&[2i32, 3], [1, 2], &cpu)?),
        ("v", Tensor::from_slice(&[2i32, 3], [2], &cpu)?),
        ("s5", Tensor::scalar(5i32, &cpu)?),
        ("s0", Tensor::scalar(0i32, &cpu)?),
        ("s1", Tensor::scalar(1i32, &cpu)?),
        ("neg", Tensor::scalar(-1i32, &cpu)?),
        ("one", Tensor::from_slice(&[1.0f32], [1], &cpu)?),
        ("f", Tensor::scalar(1.0f32, &cpu)?),
        ("dup", Tensor::from_slice(&[1i32, -3], [2], &cpu)?),
        ("far", Tensor::from_slice(&[7i32], [1], &cpu)?),
        ("pads", Tensor::from_slice(&[0i32, 0, 0, 0], [2, 2], &cpu)?),
        ("cut", Tensor::from_slice(&[-1i32, 0, 0, 0], [2, 2], &cpu)?),
    ];
    for (name, value) in constants {
        g.op("Const")
            .name(name)
            .attr("dtype", value.dtype())
            .attr("value", value.to_proto()?)
            .build()?;
    }
    Graph::from_graph_def(&with_node(&g, op, inputs, attrs))
}

/// A node to import: op, inputs, attributes, and what its refusal says.
type ImportCase = (
    &'static str,
    Vec<&'static str>,
    Vec<(&'static str, AttrValue)>,
    &'static str,
);

/// The attributes and inputs TensorFlow refuses when it imports a graph, refused with its
/// messages: window ops' formats, paddings and required attributes, shape inputs that are
/// not vectors, bounds that are not scalars, `Range`s that never reach their limit, and a
/// `Merge` whose `N` does not count its inputs.
#[test]
fn inputs_tensorflow_refuses_are_refused_at_import() {
    let s = |v: &str| AttrValue::from(v);
    let float = || ("T", AttrValue::from(DataType::Float));
    let int32 = || AttrValue::from(DataType::Int32);
    let four = || int_list(&[1, 1, 1, 1]);
    let explicit = |p: &[i64]| ("explicit_paddings", int_list(p));
    let conv = |extra: Vec<(&'static str, AttrValue)>| {
        let mut attrs = vec![float(), ("strides", four()), ("padding", s("EXPLICIT"))];
        attrs.extend(extra);
        attrs
    };
    let pool = |op: &'static str, extra: Vec<(&'static str, AttrValue)>| {
        let mut attrs = vec![
            float(),
            ("ksize", int_list(&[1, 2, 2, 1])),
            ("strides", four()),
        ];
        attrs.extend(extra);
        (op, attrs)
    };
    #[rustfmt::skip]
    let cases: Vec<ImportCase> = vec![
        ("Conv2D", vec!["x", "w"], conv(vec![explicit(&[1, 1, 1, 1, 1, 1, 0, 0])]),
            "Nonzero explicit padding in the batch or depth dimensions is not supported"),
        ("Conv2D", vec!["x", "w"], conv(vec![explicit(&[0, 0, 1, 1, 1, 1, 1, 0])]),
            "Nonzero explicit padding in the batch or depth dimensions is not supported"),
        ("Conv2D", vec!["x", "w"],
            vec![float(), ("strides", four()), ("padding", s("SAME")),
                 explicit(&[0, 0, 1, 1, 1, 1, 0, 0])],
            "explicit_paddings attribute must be empty if the padding attribute is not EXPLICIT"),
        ("Conv2D", vec!["x", "w"], conv(vec![explicit(&[0, 0, 1, 1])]),
            "explicit_paddings attribute must contain 8 values, but got: 4"),
        ("Conv2D", vec!["x", "w"],
            conv(vec![explicit(&[0, 0, 1, 1, 1, 1, 0, 0]), ("data_format", s("NDHWC"))]),
            "Value for attr 'data_format' of \"NDHWC\" is not in the list of allowed values: \
             \"NHWC\", \"NCHW\""),
        ("Conv2D", vec!["x", "w"], vec![float(), ("padding", s("VALID"))],
            "NodeDef missing attr 'strides' from Op<name=Conv2D"),
        ("DepthwiseConv2dNative", vec!["x", "w"], vec![float(), ("strides", four())],
            "NodeDef missing attr 'padding' from Op<name=DepthwiseConv2dNative"),
    ];
    let pools = vec![
        (pool("MaxPool", vec![("padding", s("VALID"))]), "ksize", "NodeDef missing attr 'ksize' from Op<name=MaxPool"),
        (pool("MaxPool", vec![("padding", s("VALID"))]), "strides", "NodeDef missing attr 'strides' from Op<name=MaxPool"),
        (pool("AvgPool", vec![("padding", s("VALID"))]), "ksize", "NodeDef missing attr 'ksize' from Op<name=AvgPool"),
        (pool("AvgPool", vec![("padding", s("EXPLICIT")), explicit(&[0, 0, 1, 1, 1, 1, 0, 0])]), "",
            "Value for attr 'padding' of \"EXPLICIT\" is not in the list of allowed values: \"SAME\", \"VALID\""),
        (pool("MaxPool", vec![("padding", s("VALID")), ("data_format", s("NDHWC"))]), "",
            "Value for attr 'data_format' of \"NDHWC\" is not in the list of allowed values: \"NHWC\", \"NCHW\", \"NCHW_VECT_C\""),
        (pool("AvgPool", vec![("padding", s("SAME")), ("data_format", s("NDHWC"))]), "",
            "Value for attr 'data_format' of \"NDHWC\" is not in the list of allowed values: \"NHWC\", \"NCHW\""),
        (pool("MaxPool", vec![("padding", s("EXPLICIT")), explicit(&[1, 1, 0, 0, 0, 0, 0, 0])]), "",
            "Nonzero explicit padding in the batch or depth dimensions is not supported"),
        (pool("MaxPool", vec![("padding", s("VALID")), explicit(&[0, 0, 1, 1, 1, 1, 0, 0])]), "",
            "explicit_paddings attribute must be empty if the padding attribute is not EXPLICIT"),
    ];
    let index = || ("Tidx", int32());
    #[rustfmt::skip]
    let shapes: Vec<ImportCase> = vec![
        ("Reshape", vec!["x", "v2"], vec![float(), ("Tshape", int32())],
            "Shape must be rank 1 but is rank 2"),
        ("Fill", vec!["v2", "f"], vec![float(), ("index_type", int32())],
            "Shape must be rank 1 but is rank 2"),
        ("Fill", vec!["v", "one"], vec![float(), ("index_type", int32())],
            "Shape must be rank 0 but is rank 1"),
        ("RandomUniform", vec!["v2"], vec![("dtype", DataType::Float.into()), ("T", int32())],
            "Shape must be rank 1 but is rank 2"),
        ("RandomStandardNormal", vec!["v2"],
            vec![("dtype", DataType::Float.into()), ("T", int32())],
            "Shape must be rank 1 but is rank 2"),
        ("Range", vec!["v", "s5", "s1"], vec![index()], "Shape must be rank 0 but is rank 1"),
        ("Range", vec!["s0", "v", "s1"], vec![index()], "Shape must be rank 0 but is rank 1"),
        ("Range", vec!["s5", "s0", "s1"], vec![index()],
            "Requires start <= limit when delta > 0: 5/0"),
        ("Range", vec!["s0", "s5", "neg"], vec![index()],
            "Requires start >= limit when delta < 0: 0/5"),
        ("Range", vec!["s0", "s5", "s0"], vec![index()], "Requires delta != 0"),
        ("ReverseV2", vec!["x", "dup"], vec![float(), index()],
            "axis 1 specified more than once."),
        ("ReverseV2", vec!["x", "far"], vec![float(), index()],
            "'axis'[0] = 7 is out of valid range [0, 3"),
        ("ReverseV2", vec!["x", "s1"], vec![float(), index()],
            "Shape must be rank 1 but is rank 0"),
        ("BroadcastTo", vec!["x", "v"], vec![float(), index()],
            "Shape must be at most rank 2 but is rank 4"),
        ("SpaceToBatchND", vec!["x", "v", "pads"], vec![float()],
            "Dimension size must be evenly divisible by 2 but is 5"),
        ("BatchToSpaceND", vec!["x", "v", "cut"], vec![float()],
            "crops cannot be negative"),
        ("SpaceToBatchND", vec!["x", "v", "v"], vec![float()],
            "Shape must be rank 2 but is rank 1"),
        ("Einsum", vec!["x", "x"], vec![float(), ("equation", s("abcd,abcd"))],
            "Expecting exactly one '->' in einsum equation: abcd,abcd"),
        ("Einsum", vec!["x"], vec![float(), ("equation", s("abc->a"))],
            "has 3 labels for a tensor of rank 4"),
        ("Merge", vec!["s0", "s1"], vec![("T", int32()), ("N", AttrValue::from(3i64))],
            "NodeDef expected inputs 'int32, int32, int32' do not match 2 inputs specified"),
    ];
    let mut all = cases;
    for ((op, mut attrs), drop, needle) in pools {
        attrs.retain(|(name, _)| *name != drop);
        all.push((op, vec!["x"], attrs, needle));
    }
    all.extend(shapes);
    for (op, inputs, attrs, needle) in all {
        let message = refusal_graph(op, &inputs, &attrs).unwrap_err().to_string();
        assert!(message.contains(needle), "{op}: {message}");
    }
    // What TensorFlow takes still imports: explicit spatial padding on a convolution and a
    // max pool, a range that ends, a float range counted down.
    let graph = refusal_graph(
        "Conv2D",
        &["x", "w"],
        &conv(vec![explicit(&[0, 0, 1, 1, 1, 1, 0, 0])]),
    )
    .unwrap();
    assert_eq!(
        graph.tensor("n:0").unwrap().shape().to_string(),
        "[1,5,5,4]"
    );
    let graph = refusal_graph("Range", &["s5", "s0", "neg"], &[index()]).unwrap();
    let counted = run1(&graph, &graph.tensor("n:0").unwrap());
    assert_eq!(counted.to_vec::<i32>().unwrap(), [5, 4, 3, 2, 1]);
}

/// A `Const` of `value` in `g`.
fn const_of(g: &mut Graph, value: Tensor) -> Output {
    g.op("Const")
        .attr("dtype", value.dtype())
        .attr("value", value.to_proto().unwrap())
        .build_output()
        .unwrap()
}

/// `Assert` and `StringFormat` summarise tensors as TensorFlow 2.21 does (the expected
/// strings are what TensorFlow's own kernels printed for the same tensors and attributes).
#[test]
fn asserts_and_string_formats_summarise_as_tensorflow() {
    let cpu = cpu();
    let mut g = Graph::new();
    let matrix = Tensor::from_slice(&[1.5f32, 2.0, 3.0, 4.25], [2, 2], &cpu).unwrap();
    let matrix = const_of(&mut g, matrix);
    let seven = g.constant(7i32).unwrap();
    let format = |g: &mut Graph, template: &str, inputs: &[Output], summarize: i64| {
        g.op("StringFormat")
            .inputs(inputs)
            .attr("template", template)
            .attr("placeholder", "{}")
            .attr("summarize", AttrValue::from(summarize))
            .build_output()
            .unwrap()
    };
    let both = format(&mut g, "{} and {}", &[matrix.clone(), seven], 3);
    let range = const_of(
        &mut g,
        Tensor::from_slice(&(0..20).collect::<Vec<i32>>(), [20], &cpu).unwrap(),
    );
    let ranged = format(&mut g, "{}", std::slice::from_ref(&range), 3);
    let words = const_of(&mut g, Tensor::from_strings(["a", "b"], [2], &cpu).unwrap());
    let quoted = format(&mut g, "{}", &[words], 3);
    let tiny = Tensor::from_slice(&[1e-7f32, 1.0 / 3.0, 1e10], [3], &cpu).unwrap();
    let tiny = const_of(&mut g, tiny);
    let other = Tensor::from_slice(&[1.0f32, 2.5, 3.0, 4.0], [2, 2], &cpu).unwrap();
    let matrix = const_of(&mut g, other);
    let ends = format(&mut g, "v={} w={}", &[matrix.clone(), tiny.clone()], 1);
    let session = Session::new(&g, cpu.clone());
    let texts = session
        .run(&[], &[&both, &ranged, &quoted, &ends], &[])
        .unwrap();
    let text = |t: &Tensor| String::from_utf8(t.to_strings().unwrap()[0].clone()).unwrap();
    assert_eq!(text(&texts[0]), "[[1.5 2]\n [3 4.25]] and 7");
    assert_eq!(text(&texts[1]), "[0 1 2 ... 17 18 19]");
    assert_eq!(text(&texts[2]), "[\"a\" \"b\"]");
    assert_eq!(text(&texts[3]), "v=[[1 2.5]\n [3 4]] w=[1e-07 ... 1e+10]");
    // A failed assert lists its data in TensorFlow's 1.x summaries.
    let no = g.constant(false).unwrap();
    let message = const_of(&mut g, Tensor::from_strings(["msg"], [], &cpu).unwrap());
    let third = g.constant(1.0f64 / 3.0).unwrap();
    let negative_zero = g.constant(-0.0f32).unwrap();
    let assert = g
        .op("Assert")
        .inputs(&[no, message, matrix, range, tiny, third, negative_zero])
        .attr("summarize", AttrValue::from(3i64))
        .build()
        .unwrap();
    let error = Session::new(&g, cpu.clone())
        .run(&[], &[], &[&assert])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(
            "assertion failed: [msg] [[1 2.5][3...]...] [0 1 2...] [1e-07 0.333333343 \
             1e+10] [0.33333333333333331] [-0]"
        ),
        "{error}"
    );
    let yes = const_of(&mut g, Tensor::from_slice(&[true], [1], &cpu).unwrap());
    let not_scalar = g.op("Assert").inputs(&[yes]).build().unwrap();
    let error = Session::new(&g, cpu)
        .run(&[], &[], &[&not_scalar])
        .unwrap_err()
        .to_string();
    assert!(error.contains("In[0] should be a scalar: [1]"), "{error}");
}

/// Static shapes near `i64::MAX` and output counts near `2^40`: every shape function checks
/// its arithmetic (an `Err`, never an overflow or an allocation of the count).
#[test]
fn shape_functions_check_their_arithmetic() {
    let huge = 1usize << 62;
    let mut g = Graph::new();
    let big = g
        .placeholder(
            DataType::Float,
            &PartialTensorShape::new(&[Some(huge)]).unwrap(),
        )
        .unwrap();
    let zero = g.constant(0i32).unwrap();
    let concat = g
        .op("ConcatV2")
        .inputs(&[
            big.clone(),
            big.clone(),
            big.clone(),
            big.clone(),
            zero.clone(),
        ])
        .build_output();
    let message = concat.unwrap_err().to_string();
    assert!(message.contains("Dimension size overflow"), "{message}");
    let multiples = g.constant_values(&[4i64], &[1]).unwrap();
    let tiled = g
        .op("Tile")
        .inputs(&[big.clone(), multiples])
        .build_output();
    let message = tiled.unwrap_err().to_string();
    assert!(
        message.contains("Negative dimension size caused by overflow when multiplying"),
        "{message}"
    );
    // A slice from i64::MIN to the end: no subtraction overflows.
    let begin = g.constant_values(&[i64::MIN], &[1]).unwrap();
    let size = g.constant_values(&[-1i64], &[1]).unwrap();
    let sliced = g
        .op("Slice")
        .inputs(&[big.clone(), begin, size])
        .build_output();
    if let Ok(sliced) = sliced {
        assert_eq!(sliced.shape().to_string(), "[?]");
    }
    // SplitV whose sizes overflow when added.
    let sizes = g.constant_values(&[i64::MAX, i64::MAX, -1], &[3]).unwrap();
    let split = g
        .op("SplitV")
        .inputs(&[big.clone(), sizes, zero.clone()])
        .attr("num_split", AttrValue::from(3i64))
        .build();
    if let Ok(split) = split {
        assert_eq!(g.outputs(&split).unwrap().len(), 3);
    }
    // Output counts: 2^40 outputs are refused before any is made; a split that does not
    // divide its dimension is TensorFlow's error.
    for (op, attr) in [("Split", "num_split"), ("Unpack", "num")] {
        let inputs = match op {
            "Split" => vec![zero.clone(), big.clone()],
            _ => vec![big.clone()],
        };
        let built = g
            .op(op)
            .inputs(&inputs)
            .attr(attr, AttrValue::from(1i64 << 40))
            .build();
        let message = built.unwrap_err().to_string();
        assert!(
            message.contains("at most 1048576 outputs"),
            "{op}: {message}"
        );
    }
    let six = g.constant_values(&[0.0f32; 6], &[6]).unwrap();
    let uneven = g
        .op("Split")
        .inputs(&[zero, six])
        .attr("num_split", AttrValue::from(4i64))
        .build();
    let message = uneven.unwrap_err().to_string();
    assert!(
        message.contains("should evenly divide the split dimension, but got split_dim 0 (size = 6) and num_split 4"),
        "{message}"
    );
}
