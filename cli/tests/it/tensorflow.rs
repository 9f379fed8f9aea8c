//! With TensorFlow: a SavedModel TensorFlow writes here, shown and run, and `--compare-tf`
//! on it and on a frozen graph. Without a Python that imports TensorFlow the tests say why
//! and skip, unless `POLYTENSOR_REQUIRE_TENSORFLOW` is set (CI): then they fail.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{arg, polytensor_with, scratch};

/// TensorFlow's Python: `POLYTENSOR_TF_PYTHON`, else the venv `.ci/run` makes.
fn tensorflow() -> Option<PathBuf> {
    let python = std::env::var_os("POLYTENSOR_TF_PYTHON").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tf-venv/bin/python"),
        PathBuf::from,
    );
    let imports = Command::new(&python)
        .args(["-c", "import tensorflow"])
        .env("TF_CPP_MIN_LOG_LEVEL", "3")
        .output()
        .is_ok_and(|o| o.status.success());
    if imports {
        return Some(python);
    }
    let why = format!("{} cannot import tensorflow", python.display());
    if std::env::var_os("POLYTENSOR_REQUIRE_TENSORFLOW").is_some() {
        panic!("POLYTENSOR_REQUIRE_TENSORFLOW is set, but {why}");
    }
    eprintln!("skipped: {why}");
    None
}

/// A SavedModel of a dense layer with a tanh (its variables restored from `variables/`),
/// written by TensorFlow into `dir`.
fn saved_model(python: &Path, dir: &Path) -> PathBuf {
    let out = dir.join("saved");
    let script = r#"
import sys
import tensorflow as tf
class Dense(tf.Module):
    def __init__(self):
        self.w = tf.Variable(tf.random.stateless_normal([3, 4], seed=[1, 2]), name="w")
        self.b = tf.Variable(tf.linspace(-1.0, 1.0, 4), name="b")
    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    def __call__(self, x):
        return {"y": tf.tanh(tf.matmul(x, self.w) + self.b)}
m = Dense()
tf.saved_model.save(m, sys.argv[1], signatures=m.__call__)
"#;
    let ran = Command::new(python)
        .args(["-c", script, arg(&out)])
        .env("TF_CPP_MIN_LOG_LEVEL", "3")
        .output()
        .unwrap();
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    out
}

#[test]
fn a_tensorflow_saved_model_is_shown_run_and_compared() {
    let Some(python) = tensorflow() else { return };
    let dir = scratch("saved-model");
    let model = saved_model(&python, &dir);
    let env = [("POLYTENSOR_TF_PYTHON", python.as_path())];

    let shown = polytensor_with(&["show", arg(&model)], &env).expect(0);
    let out = &shown.stdout;
    assert!(
        out.contains("a SavedModel, MetaGraph with tags [\"serve\"]"),
        "{out}"
    );
    assert!(out.contains("signature \"serving_default\""), "{out}");
    assert!(
        out.contains("    x: float32 (None, 3) <- serving_default_x:0"),
        "{out}"
    );
    assert!(out.contains("    y: float32 (None, 4)"), "{out}");
    assert!(
        out.contains("variables: 16 values, 64 B in 2 tensors"),
        "{out}"
    );
    assert!(
        out.lines().any(|l| l.trim_start().starts_with("Tanh")),
        "{out}"
    );

    let ran = polytensor_with(
        &[
            "run",
            arg(&model),
            "--input",
            "x=random:5x3",
            "--compare-tf",
        ],
        &env,
    )
    .expect(0);
    assert!(ran.stdout.contains("y: tf.Tensor("), "{}", ran.stdout);
    assert!(
        ran.stdout.contains("shape=(5, 4), dtype=float32)"),
        "{}",
        ran.stdout
    );
    let line = ran
        .stdout
        .lines()
        .find(|l| l.contains("max |polytensor - TensorFlow|"));
    assert!(line.is_some_and(|l| l.ends_with(": ok")), "{}", ran.stdout);

    // Frozen into one GraphDef, which TensorFlow loads and runs alike.
    let frozen = dir.join("frozen.pb");
    let converted = polytensor_with(&["convert", arg(&model), "-o", arg(&frozen)], &env).expect(0);
    assert!(
        converted.stdout.contains("output y: y:0"),
        "{}",
        converted.stdout
    );
    let ran = polytensor_with(
        &[
            "run",
            arg(&frozen),
            "--input",
            "serving_default_x=random:2x3",
            "--output",
            "y:0",
            "--compare-tf",
        ],
        &env,
    )
    .expect(0);
    assert!(
        ran.stdout.contains("y:0: max |polytensor - TensorFlow|"),
        "{}",
        ran.stdout
    );
    assert!(!ran.stdout.contains("DIFFERS"), "{}", ran.stdout);
    // Only SavedModels freeze.
    polytensor_with(
        &["convert", arg(&frozen), "-o", arg(&dir.join("x.pb"))],
        &env,
    )
    .expect(2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn compare_tf_judges_a_frozen_graph() {
    let Some(python) = tensorflow() else { return };
    let dir = scratch("compare-frozen");
    let mut g = polytensor::graph::Graph::new();
    let x = g
        .placeholder_named(
            "x",
            polytensor::DataType::Float,
            &polytensor::PartialTensorShape::new(&[None, Some(4)]).unwrap(),
        )
        .unwrap();
    let sig = g.unary("Sigmoid", &x).unwrap();
    g.op("Softmax")
        .name("probs")
        .input(&sig)
        .build_output()
        .unwrap();
    let model = dir.join("softmax.pb");
    std::fs::write(&model, g.to_graph_def_bytes()).unwrap();
    let env = [("POLYTENSOR_TF_PYTHON", python.as_path())];
    let ran =
        polytensor_with(&["run", arg(&model), "--batch", "3", "--compare-tf"], &env).expect(0);
    assert!(
        ran.stdout
            .contains("probs:0: max |polytensor - TensorFlow|"),
        "{}",
        ran.stdout
    );
    // A bound nothing meets fails the check: exit code 1.
    let strict = polytensor_with(
        &[
            "run",
            arg(&model),
            "--compare-tf",
            "--rtol",
            "0",
            "--atol=-1",
        ],
        &env,
    )
    .expect(1);
    assert!(
        strict
            .stderr
            .contains("outputs differ from TensorFlow's: probs:0"),
        "{}",
        strict.stderr
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A Keras LSTM (its weights read inside a `While` body) exported as a SavedModel, frozen by
/// `convert`: the loop's functions are copied to take the weights' values, and TensorFlow
/// runs the frozen graph as polytensor does.
#[test]
fn a_keras_lstm_freezes_into_a_graph_tensorflow_runs() {
    let Some(python) = tensorflow() else { return };
    let dir = scratch("lstm");
    let exported = dir.join("lstm");
    let script = r#"
import sys
import keras
keras.utils.set_random_seed(3)
model = keras.Sequential([keras.Input((6, 3)), keras.layers.LSTM(5), keras.layers.Dense(2)])
model.export(sys.argv[1])
"#;
    let made = Command::new(&python)
        .args(["-c", script, arg(&exported)])
        .env("TF_CPP_MIN_LOG_LEVEL", "3")
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let env = [("POLYTENSOR_TF_PYTHON", python.as_path())];
    let frozen = dir.join("lstm.pb");
    polytensor_with(&["convert", arg(&exported), "-o", arg(&frozen)], &env).expect(0);
    let shown = polytensor_with(&["show", arg(&frozen)], &env).expect(0);
    assert!(shown.stdout.contains("  While "), "{}", shown.stdout);
    assert!(!shown.stdout.contains("ReadVariableOp"), "{}", shown.stdout);
    let ran = polytensor_with(
        &[
            "run",
            arg(&frozen),
            "--batch",
            "3",
            "--output",
            "output_0:0",
            "--compare-tf",
        ],
        &env,
    )
    .expect(0);
    assert!(
        ran.stdout.contains("shape=(3, 2), dtype=float32)"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout.contains("max |polytensor - TensorFlow|"),
        "{}",
        ran.stdout
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
