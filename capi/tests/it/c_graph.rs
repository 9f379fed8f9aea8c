//! `tests/c/graph.c`, compiled with the C compiler the `cc` crate finds and linked against
//! this build's library: the seed's `a + b` built through the operation builder (7), and
//! TensorFlow's `mlp_placeholder` GraphDef from the golden data beside the repository
//! imported, fed and run with `PT_SessionRun`, its `y:0` compared with what TensorFlow
//! computed (without the golden data that part skips, unless `POLYTENSOR_REQUIRE_GOLDEN`
//! is set, as in CI); a loop that never ends, stopped by deadlines and cancellation; and
//! gradients added with `PT_AddGradients`.

use crate::common;

use std::path::{Path, PathBuf};

use polytensor::graph::proto::{GraphDef, NodeDef};
use polytensor::graph::{AttrValue, Graph};
use polytensor::{DataType, Tensor};

/// `i = 0; while True: i += 1` as `tf.compat.v1.while_loop` writes it, in a file.
fn forever_graph() -> PathBuf {
    let cpu = polytensor::device("cpu:0").unwrap();
    let node = |name: &str, op: &str, inputs: &[&str], attrs: Vec<(&str, AttrValue)>| NodeDef {
        name: name.into(),
        op: op.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        attr: attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        ..Default::default()
    };
    let constant = |name: &str, value: Tensor, inputs: &[&str]| {
        let dtype = value.dtype();
        let value = value.to_proto().unwrap();
        node(
            name,
            "Const",
            inputs,
            vec![("dtype", dtype.into()), ("value", value.into())],
        )
    };
    let enter = |name: &str, input: &str, dtype: DataType, constant: bool| {
        let attrs = vec![
            ("T", dtype.into()),
            ("frame_name", "loop".into()),
            ("is_constant", constant.into()),
        ];
        node(name, "Enter", &[input], attrs)
    };
    let t = || vec![("T", AttrValue::from(DataType::Int32))];
    let def = GraphDef {
        node: vec![
            constant("start", Tensor::scalar(0i32, &cpu).unwrap(), &[]),
            constant("always", Tensor::scalar(true, &cpu).unwrap(), &[]),
            enter("loop/Enter", "start", DataType::Int32, false),
            enter("loop/always", "always", DataType::Bool, true),
            node(
                "loop/Merge",
                "Merge",
                &["loop/Enter", "loop/NextIteration"],
                t(),
            ),
            node("loop/LoopCond", "LoopCond", &["loop/always"], vec![]),
            node(
                "loop/Switch",
                "Switch",
                &["loop/Merge", "loop/LoopCond"],
                t(),
            ),
            node("loop/Identity", "Identity", &["loop/Switch:1"], t()),
            constant(
                "loop/one",
                Tensor::scalar(1i32, &cpu).unwrap(),
                &["^loop/Identity"],
            ),
            node("loop/add", "AddV2", &["loop/Identity", "loop/one"], t()),
            node("loop/NextIteration", "NextIteration", &["loop/add"], t()),
            node("loop/Exit", "Exit", &["loop/Switch"], t()),
        ],
        ..Default::default()
    };
    let bytes = Graph::from_graph_def(&def).unwrap().to_graph_def_bytes();
    let path = common::tempdir("forever").join("forever.pb");
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn a_c_program_builds_imports_and_runs_graphs() {
    let exe = common::compile_c_program("graph.c");
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/tf-golden/graph");
    let case = golden.join("mlp_placeholder.json");
    let mut program = common::c_program(&exe);
    program.env("POLYTENSOR_FOREVER_GRAPH", forever_graph());
    let expected = if case.is_file() {
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&case).unwrap()).unwrap();
        program.arg(golden.join("mlp_placeholder.pb"));
        for v in json["feeds"]["x:0"]["values"].as_array().unwrap() {
            program.arg(v.as_f64().unwrap().to_string());
        }
        let want: Vec<f64> = json["expected"]["y:0"]["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        Some(want)
    } else {
        assert!(
            std::env::var_os("POLYTENSOR_REQUIRE_GOLDEN").is_none(),
            "POLYTENSOR_REQUIRE_GOLDEN is set but {} is missing",
            case.display()
        );
        eprintln!("the golden-graph part skips: no {}", case.display());
        None
    };
    let model = golden.join("../saved_models/keras_mlp_export");
    let saved_model_want = if model.is_dir() {
        let json: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(golden.join("../saved_models/keras_mlp_export.json")).unwrap(),
        )
        .unwrap();
        let run = &json["runs"][0];
        let feed: Vec<String> = run["feeds"]["x"]["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap().to_string())
            .collect();
        program.env("POLYTENSOR_SAVED_MODEL", &model);
        program.env("POLYTENSOR_SAVED_MODEL_FEED", feed.join(" "));
        Some(
            run["expected"]["output_0"]["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect::<Vec<f64>>(),
        )
    } else {
        None
    };
    let output = common::run(&mut program, "running the C graph program");
    if let Some(want) = saved_model_want {
        let got: Vec<f64> = output
            .lines()
            .filter_map(|l| l.strip_prefix("saved_model "))
            .map(|v| v.parse().unwrap())
            .collect();
        assert_eq!(got.len(), want.len(), "{output}");
        let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-4 * scale + 1e-5,
                "saved_model: {g} vs {w}"
            );
        }
        assert!(output.contains("signature serving_default"), "{output}");
    }
    assert!(output.contains("all checks passed"), "{output}");
    assert!(output.lines().next() == Some("7"), "{output}");
    // Mixed precision switched off and on (the program checks the values).
    assert!(
        output.contains("bf16 weights off: ") && output.contains("bf16 weights on: "),
        "{output}"
    );
    let stopped: Vec<&str> = output
        .lines()
        .filter_map(|l| l.strip_prefix("stopped: "))
        .collect();
    assert_eq!(
        stopped,
        [
            "deadline exceeded: Timed out waiting for notification",
            "cancelled: Run call was cancelled"
        ],
        "{output}"
    );
    if let Some(want) = expected {
        // The traced run's summary, as `PT_RunMetadataSummary` gave it.
        assert!(
            output.contains("traced ") && output.contains("MatMul"),
            "{output}"
        );
        let got: Vec<f64> = output
            .lines()
            .filter_map(|l| l.strip_prefix("y "))
            .map(|v| v.parse().unwrap())
            .collect();
        assert_eq!(got.len(), want.len(), "{output}");
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-6 * w.abs().max(1.0),
                "{got:?} != {want:?}"
            );
        }
    }
}
