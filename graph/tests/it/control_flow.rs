//! Control flow on cpu:0 from GraphDefs written here: a 1.x counter loop, dead branches,
//! and the errors TensorFlow's importer and executor give (cycles that are not loops,
//! inputs from different frames, fetches inside a loop or of a dead tensor, functions
//! that are missing or call themselves without end). TensorFlow's own loops and
//! conditionals run on every device in the facade's `tests/control_flow.rs`.

use std::sync::Arc;

use polytensor_core::{DataType, Device, Tensor};
use polytensor_cpu::CpuDevice;
use polytensor_graph::proto::{
    ArgDef, FunctionDef, FunctionDefLibrary, GraphDef, NameAttrList, NodeDef, OpSignature,
};
use polytensor_graph::{type_list, AttrKind, AttrValue, Graph, Session};
use prost::Message;

fn cpu() -> Arc<dyn Device> {
    CpuDevice::shared()
}

fn node(name: &str, op: &str, inputs: &[&str], attrs: &[(&str, AttrValue)]) -> NodeDef {
    NodeDef {
        name: name.into(),
        op: op.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        attr: attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        ..Default::default()
    }
}

fn int_const(name: &str, value: i32, inputs: &[&str]) -> NodeDef {
    let value = Tensor::scalar(value, &cpu()).unwrap().to_proto().unwrap();
    node(
        name,
        "Const",
        inputs,
        &[("dtype", DataType::Int32.into()), ("value", value.into())],
    )
}

fn enter(name: &str, input: &str, constant: bool) -> NodeDef {
    node(
        name,
        "Enter",
        &[input],
        &[
            ("T", DataType::Int32.into()),
            ("frame_name", "loop".into()),
            ("is_constant", constant.into()),
        ],
    )
}

/// `i = 0; while i < limit: i += 1`, as `tf.compat.v1.while_loop` writes it.
fn counter(limit: i32) -> GraphDef {
    let t = || ("T", AttrValue::from(DataType::Int32));
    GraphDef {
        node: vec![
            int_const("start", 0, &[]),
            int_const("limit", limit, &[]),
            enter("loop/Enter", "start", false),
            enter("loop/limit", "limit", true),
            node(
                "loop/Merge",
                "Merge",
                &["loop/Enter", "loop/NextIteration"],
                &[t()],
            ),
            node("loop/Less", "Less", &["loop/Merge", "loop/limit"], &[t()]),
            node("loop/LoopCond", "LoopCond", &["loop/Less"], &[]),
            node(
                "loop/Switch",
                "Switch",
                &["loop/Merge", "loop/LoopCond"],
                &[t()],
            ),
            node("loop/Identity", "Identity", &["loop/Switch:1"], &[t()]),
            int_const("loop/one", 1, &["^loop/Identity"]),
            node("loop/add", "AddV2", &["loop/Identity", "loop/one"], &[t()]),
            node("loop/NextIteration", "NextIteration", &["loop/add"], &[t()]),
            node("loop/Exit", "Exit", &["loop/Switch"], &[t()]),
        ],
        ..Default::default()
    }
}

fn run(def: &GraphDef, fetch: &str) -> polytensor_core::Result<Tensor> {
    let graph = Graph::from_graph_def_bytes(&def.encode_to_vec())?;
    Session::new(&graph, cpu())
        .run_by_name(&[], &[fetch], &[])
        .map(|mut v| v.remove(0))
}

#[test]
fn a_counter_loop_runs_its_iterations() {
    for limit in [0, 1, 7] {
        let got = run(&counter(limit), "loop/Exit:0").unwrap();
        assert_eq!(got.item::<i32>().unwrap(), limit);
    }
    // The loop's Merge has a back edge: its static shape is unknown, as TensorFlow's
    // shape refiner has it.
    let graph = Graph::from_graph_def(&counter(3)).unwrap();
    let merge = graph.tensor("loop/Merge:0").unwrap();
    assert!(merge.shape().rank().is_none(), "{merge}");
    assert_eq!(
        graph.tensor("loop/Merge:1").unwrap().dtype(),
        DataType::Int32
    );
    // And the GraphDef round-trips with its cycle.
    let again = Graph::from_graph_def_bytes(&graph.to_graph_def_bytes()).unwrap();
    assert_eq!(again.to_graph_def(), graph.to_graph_def());
}

#[test]
fn what_is_inside_a_loop_or_dead_cannot_be_fetched() {
    let message = run(&counter(3), "loop/add:0").unwrap_err().to_string();
    assert!(
        message.contains("inside the while loop 'loop'"),
        "{message}"
    );
    // A Switch's untaken output is dead; a node reading it is dead too.
    let pred = Tensor::scalar(false, &cpu()).unwrap().to_proto().unwrap();
    let t = || ("T", AttrValue::from(DataType::Int32));
    let def = GraphDef {
        node: vec![
            int_const("x", 5, &[]),
            node(
                "p",
                "Const",
                &[],
                &[("dtype", DataType::Bool.into()), ("value", pred.into())],
            ),
            node("s", "Switch", &["x", "p"], &[t()]),
            node("y", "Neg", &["s:1"], &[t()]),
            node("z", "Neg", &["s:0"], &[t()]),
            node("m", "Merge", &["y", "z"], &[t()]),
        ],
        ..Default::default()
    };
    for dead in ["s:1", "y:0"] {
        let message = run(&def, dead).unwrap_err().to_string();
        assert!(
            message.contains("Retval[0] does not have value"),
            "{message}"
        );
    }
    assert_eq!(run(&def, "z:0").unwrap().item::<i32>().unwrap(), -5);
    assert_eq!(run(&def, "m:0").unwrap().item::<i32>().unwrap(), -5);
    assert_eq!(run(&def, "m:1").unwrap().item::<i32>().unwrap(), 1);
}

#[test]
fn cycles_that_are_not_loops_and_mixed_frames_are_errors() {
    let t = || ("T", AttrValue::from(DataType::Int32));
    let cycle = GraphDef {
        node: vec![
            node("a", "Identity", &["b"], &[t()]),
            node("b", "Identity", &["a"], &[t()]),
        ],
        ..Default::default()
    };
    let message = Graph::from_graph_def(&cycle).unwrap_err().to_string();
    assert!(message.contains("cycle"), "{message}");
    // A loop body reading a tensor of the root frame without an Enter.
    let mut mixed = counter(3);
    mixed.node.push(int_const("outside", 2, &[]));
    mixed.node.push(node(
        "loop/mixed",
        "AddV2",
        &["loop/Identity", "outside"],
        &[t()],
    ));
    mixed.node[10].input[0] = "loop/mixed".into();
    let message = run(&mixed, "loop/Exit:0").unwrap_err().to_string();
    assert!(
        message.contains("has inputs from different frames"),
        "{message}"
    );
    // An Exit with no loop around it.
    let mut stray = counter(3);
    stray.node.push(node("stray", "Exit", &["start"], &[t()]));
    let message = run(&stray, "stray:0").unwrap_err().to_string();
    assert!(message.contains("not inside a while loop"), "{message}");
    // A Merge whose N does not count its back edge.
    let mut wrong_n = counter(3);
    wrong_n.node[4]
        .attr
        .insert("N".into(), AttrValue::from(1i64));
    let message = Graph::from_graph_def(&wrong_n).unwrap_err().to_string();
    assert!(
        message.contains("NodeDef expected inputs 'int32' do not match 2 inputs specified"),
        "{message}"
    );
}

fn func(name: &str) -> AttrValue {
    AttrValue {
        value: Some(AttrKind::Func(NameAttrList {
            name: name.into(),
            ..Default::default()
        })),
    }
}

fn int_arg(name: &str) -> ArgDef {
    ArgDef {
        name: name.into(),
        r#type: DataType::Int32.as_i32(),
        ..Default::default()
    }
}

/// A graph calling `f` on a constant through `PartitionedCall`, with `library`.
fn calling(library: Vec<FunctionDef>) -> GraphDef {
    let types = type_list(&[DataType::Int32]);
    GraphDef {
        node: vec![
            int_const("x", 4, &[]),
            node(
                "call",
                "PartitionedCall",
                &["x"],
                &[
                    ("f", func("f")),
                    ("Tin", types.clone()),
                    ("Tout", types.clone()),
                ],
            ),
        ],
        library: Some(FunctionDefLibrary { function: library }.encode_to_vec()),
        ..Default::default()
    }
}

/// `f(x)`: `body` over argument `x`, returning `ret`.
fn function(body: Vec<NodeDef>, ret: &str) -> FunctionDef {
    FunctionDef {
        signature: Some(OpSignature {
            name: "f".into(),
            input_arg: vec![int_arg("x")],
            output_arg: vec![int_arg("y")],
        }),
        node_def: body,
        ret: [("y".to_string(), ret.to_string())].into(),
        ..Default::default()
    }
}

#[test]
fn functions_are_called_and_their_errors_are_clear() {
    let t = || ("T", AttrValue::from(DataType::Int32));
    // f(x) = x * x, its inputs in the function form (`node:out_arg:index`).
    let square = function(vec![node("sq", "Mul", &["x", "x"], &[t()])], "sq:z:0");
    assert_eq!(
        run(&calling(vec![square]), "call:0")
            .unwrap()
            .item::<i32>()
            .unwrap(),
        16
    );
    // A Switch's outputs by argument name.
    let pred = Tensor::scalar(true, &cpu()).unwrap().to_proto().unwrap();
    let switched = function(
        vec![
            node(
                "p",
                "Const",
                &[],
                &[("dtype", DataType::Bool.into()), ("value", pred.into())],
            ),
            node("s", "Switch", &["x", "p:output:0"], &[t()]),
            node("n", "Neg", &["s:output_true:0"], &[t()]),
        ],
        "n:y:0",
    );
    assert_eq!(
        run(&calling(vec![switched]), "call:0")
            .unwrap()
            .item::<i32>()
            .unwrap(),
        -4
    );
    // A call of a function that is not there.
    let message = run(&calling(vec![]), "call:0").unwrap_err().to_string();
    assert!(
        message.contains("Function 'f' is not in the graph's function library"),
        "{message}"
    );
    // A function calling itself without end.
    let types = type_list(&[DataType::Int32]);
    let recursive = function(
        vec![node(
            "again",
            "PartitionedCall",
            &["x"],
            &[("f", func("f")), ("Tin", types.clone()), ("Tout", types)],
        )],
        "again:output:0",
    );
    let message = run(&calling(vec![recursive]), "call:0")
        .unwrap_err()
        .to_string();
    assert!(message.contains("nest more than 64"), "{message}");
}

/// `while True: i += 1`, as a 1.x frame (`functional: false`) or a functional `While`.
fn forever(functional: bool) -> GraphDef {
    let t = || ("T", AttrValue::from(DataType::Int32));
    let yes = Tensor::scalar(true, &cpu()).unwrap().to_proto().unwrap();
    let yes = |name: &str, inputs: &[&str]| {
        node(
            name,
            "Const",
            inputs,
            &[
                ("dtype", DataType::Bool.into()),
                ("value", yes.clone().into()),
            ],
        )
    };
    if !functional {
        let mut def = counter(0);
        def.node.push(yes("always", &[]));
        def.node.push(node(
            "loop/always",
            "Enter",
            &["always"],
            &[
                ("T", DataType::Bool.into()),
                ("frame_name", "loop".into()),
                ("is_constant", true.into()),
            ],
        ));
        let cond = def.node.iter_mut().find(|n| n.name == "loop/LoopCond");
        cond.unwrap().input = vec!["loop/always".into()];
        return def;
    }
    let signature = |name: &str, output: ArgDef| OpSignature {
        name: name.into(),
        input_arg: vec![int_arg("i")],
        output_arg: vec![output],
    };
    let cond = FunctionDef {
        signature: Some(signature(
            "cond",
            ArgDef {
                name: "ok".into(),
                r#type: DataType::Bool.as_i32(),
                ..Default::default()
            },
        )),
        node_def: vec![yes("yes", &[])],
        ret: [("ok".to_string(), "yes:output:0".to_string())].into(),
        ..Default::default()
    };
    let body = FunctionDef {
        signature: Some(signature("body", int_arg("next"))),
        node_def: vec![
            int_const("one", 1, &[]),
            node("add", "AddV2", &["i", "one:output:0"], &[t()]),
        ],
        ret: [("next".to_string(), "add:z:0".to_string())].into(),
        ..Default::default()
    };
    let types = type_list(&[DataType::Int32]);
    GraphDef {
        node: vec![
            int_const("start", 0, &[]),
            node(
                "loop/Exit",
                "While",
                &["start"],
                &[("cond", func("cond")), ("body", func("body")), ("T", types)],
            ),
        ],
        library: Some(
            FunctionDefLibrary {
                function: vec![cond, body],
            }
            .encode_to_vec(),
        ),
        ..Default::default()
    }
}

#[test]
fn a_while_whose_body_disagrees_with_its_loop_variables_is_refused() {
    let mut def = forever(true);
    let types = type_list(&[DataType::Int64]);
    def.node[1].attr.insert("T".into(), types);
    let message = Graph::from_graph_def(&def)
        .and_then(|g| {
            Session::new(&g, cpu())
                .run_by_name(&[], &["loop/Exit:0"], &[])
                .map(drop)
        })
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("int32") && message.contains("int64"),
        "{message}"
    );
}

#[test]
fn runs_stop_at_their_deadline_or_when_cancelled() {
    use polytensor_core::Error;
    use polytensor_graph::{CancellationManager, RunOptions, SessionOptions};
    use std::time::{Duration, Instant};
    for functional in [false, true] {
        let graph = Graph::from_graph_def(&forever(functional)).unwrap();
        // The session's default deadline.
        let mut options = SessionOptions::new(vec![cpu()]);
        options.operation_timeout = Some(Duration::from_millis(50));
        let session = Session::with_options(&graph, options).unwrap();
        let started = Instant::now();
        let error = session.run_by_name(&[], &["loop/Exit:0"], &[]).unwrap_err();
        assert!(matches!(error, Error::DeadlineExceeded(_)), "{error}");
        assert_eq!(
            error.to_string(),
            "deadline exceeded: Timed out waiting for notification"
        );
        assert!(started.elapsed() < Duration::from_secs(30));
        // The session still runs what ends.
        let start = session.run_by_name(&[], &["start:0"], &[]).unwrap();
        assert_eq!(start[0].item::<i32>().unwrap(), 0);

        // A run's own timeout, and a handle cancelled from another thread.
        let session = Session::new(&graph, cpu());
        let timed = RunOptions {
            timeout: Some(Duration::from_millis(20)),
            ..RunOptions::default()
        };
        let error = session
            .run_by_name_with(&timed, &[], &["loop/Exit:0"], &[])
            .unwrap_err();
        assert!(matches!(error, Error::DeadlineExceeded(_)), "{error}");
        let cancel = CancellationManager::new();
        let cancelled = RunOptions {
            cancellation: Some(cancel.clone()),
            ..RunOptions::default()
        };
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            cancel.start_cancel();
        });
        let error = session
            .run_by_name_with(&cancelled, &[], &["loop/Exit:0"], &[])
            .unwrap_err();
        canceller.join().unwrap();
        assert_eq!(error, Error::Cancelled("Run call was cancelled".into()));
        // A handle cancelled before the run stops it at its first step.
        let error = session
            .run_by_name_with(&cancelled, &[], &["start:0"], &[])
            .unwrap_err();
        assert!(matches!(error, Error::Cancelled(_)), "{error}");
        let start = session.run_by_name(&[], &["start:0"], &[]).unwrap();
        assert_eq!(start[0].item::<i32>().unwrap(), 0);
    }
}

#[test]
fn a_deep_call_chain_fails_at_the_depth_limit() {
    // f0 calls f1 calls ... f9999: the run stops at the depth limit, instantiating only the
    // functions it reaches.
    let types = type_list(&[DataType::Int32]);
    let library: Vec<FunctionDef> = (0..10_000)
        .map(|i| {
            let mut f = function(
                vec![node(
                    "next",
                    "PartitionedCall",
                    &["x"],
                    &[
                        ("f", func(&format!("f{}", i + 1))),
                        ("Tin", types.clone()),
                        ("Tout", types.clone()),
                    ],
                )],
                "next:output:0",
            );
            f.signature.as_mut().unwrap().name = format!("f{i}");
            f
        })
        .collect();
    let mut def = calling(library);
    def.node[1].attr.insert("f".into(), func("f0"));
    let message = run(&def, "call:0").unwrap_err().to_string();
    assert!(message.contains("nest more than 64"), "{message}");
}

#[test]
fn two_different_functions_of_one_name_are_refused_at_import() {
    let t = || ("T", AttrValue::from(DataType::Int32));
    let square = function(vec![node("sq", "Mul", &["x", "x"], &[t()])], "sq:z:0");
    let negate = function(vec![node("n", "Neg", &["x"], &[t()])], "n:y:0");
    let message = Graph::from_graph_def(&calling(vec![square.clone(), negate]))
        .unwrap_err()
        .to_string();
    assert_eq!(
        message,
        "invalid argument: Cannot add function 'f' because a different function with the same \
         name already exists."
    );
    // A call whose declared types are not the function's.
    let mut declared_float = calling(vec![square.clone()]);
    let floats = type_list(&[DataType::Float]);
    declared_float.node[1].attr.insert("Tout".into(), floats);
    let message = run(&declared_float, "call:0").unwrap_err().to_string();
    assert!(
        message.contains("Function 'f' returns [int32], but 'call' declares [float]"),
        "{message}"
    );
    // The same function twice is one function.
    let twice = calling(vec![square.clone(), square]);
    assert_eq!(run(&twice, "call:0").unwrap().item::<i32>().unwrap(), 16);
}
