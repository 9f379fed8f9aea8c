//! `tests/c/graph.c`, compiled with the C compiler the `cc` crate finds and linked against
//! this build's library: the seed's `a + b` built through the operation builder (7), and
//! TensorFlow's `mlp_placeholder` GraphDef from the golden data beside the repository
//! imported, fed and run with `PT_SessionRun`, its `y:0` compared with what TensorFlow
//! computed. Without the golden data the second part skips, unless
//! `POLYTENSOR_REQUIRE_GOLDEN` is set (as in CI).

mod common;

use std::path::Path;

#[test]
fn a_c_program_builds_imports_and_runs_graphs() {
    let exe = common::compile_c_program("graph.c");
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/tf-golden/graph");
    let case = golden.join("mlp_placeholder.json");
    let mut program = common::c_program(&exe);
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
    let output = common::run(&mut program, "running the C graph program");
    assert!(output.contains("all checks passed"), "{output}");
    assert!(output.lines().next() == Some("7"), "{output}");
    if let Some(want) = expected {
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
