//! `polytensor run --compare-tf`: TensorFlow runs the same model on the same inputs (in the
//! active Python, when it imports `tensorflow`), and each output's largest difference is
//! printed and judged against a tolerance.

use std::path::{Path, PathBuf};
use std::process::Command;

use polytensor::{DataType, Tensor};

use crate::error::{CliError, CliResult, Context, Failure};
use crate::model::ModelPath;

/// The script TensorFlow runs: the model (a frozen graph in a `tf.compat.v1.Session`, a
/// SavedModel's signature eagerly) on the feeds of `in.npz`, its outputs to `out.npz`.
const SCRIPT: &str = r#"
import json, os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf
job = json.loads(sys.argv[1])
feeds = np.load(job["feeds"])
values = [feeds["in%d" % i] for i in range(len(job["inputs"]))]
if job["kind"] == "frozen":
    graph_def = tf.compat.v1.GraphDef()
    with open(job["path"], "rb") as f:
        graph_def.ParseFromString(f.read())
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")
    with tf.compat.v1.Session(graph=graph) as session:
        outputs = session.run(job["outputs"], dict(zip(job["inputs"], values)))
else:
    function = tf.saved_model.load(job["path"]).signatures[job["signature"]]
    result = function(**{k: tf.constant(v) for k, v in zip(job["inputs"], values)})
    outputs = [result[k].numpy() for k in job["outputs"]]
np.savez(job["out"], **{"out%d" % i: np.asarray(v) for i, v in enumerate(outputs)})
"#;

/// The Python to run TensorFlow with: `POLYTENSOR_TF_PYTHON`, else the active `python3`.
fn python() -> PathBuf {
    std::env::var_os("POLYTENSOR_TF_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("python3"))
}

/// One output compared.
pub struct Difference {
    /// The output's name.
    pub name: String,
    /// The largest absolute difference.
    pub max_abs: f64,
    /// The largest magnitude of TensorFlow's values.
    pub scale: f64,
}

/// TensorFlow's outputs for `feeds` (named `inputs`), fetched as `outputs` (a frozen graph's
/// tensor names, a signature's keys), compared with polytensor's `values`.
pub fn compare_with_tensorflow(
    model: &ModelPath,
    signature: &str,
    (inputs, outputs): (&[String], &[String]),
    feeds: &[Tensor],
    values: &[(String, Tensor)],
) -> CliResult<Vec<Difference>> {
    let cpu = polytensor::device("cpu:0")?;
    let dir = std::env::temp_dir().join(format!("polytensor-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| polytensor::Error::io("a temporary folder", e))?;
    let result = (|| {
        let host: Vec<Tensor> = feeds
            .iter()
            .map(|t| t.to_device(&cpu))
            .collect::<polytensor::Result<_>>()?;
        let names: Vec<String> = (0..host.len()).map(|i| format!("in{i}")).collect();
        let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(&host).collect();
        let (feeds_path, out_path) = (dir.join("in.npz"), dir.join("out.npz"));
        polytensor::npy::save_npz(&named, &feeds_path).context("writing the feeds")?;
        let (kind, path) = match model {
            ModelPath::Frozen(p) => ("frozen", p),
            ModelPath::SavedModel(p) => ("saved", p),
            ModelPath::Checkpoint(p) => {
                return Err(CliError::bad_input(format!(
                    "{}: a checkpoint does not run",
                    p.display()
                )))
            }
        };
        let job = serde_json::json!({
            "kind": kind, "path": absolute(path), "signature": signature,
            "inputs": inputs, "outputs": outputs,
            "feeds": feeds_path, "out": out_path,
        });
        let python = python();
        eprintln!("running TensorFlow ({})...", python.display());
        let ran = Command::new(&python)
            .args(["-c", SCRIPT, &job.to_string()])
            .output()
            .map_err(|e| {
                CliError::bad_input(format!(
                    "--compare-tf needs a Python with TensorFlow; {} did not start: {e}",
                    python.display()
                ))
            })?;
        if !ran.status.success() {
            let stderr = String::from_utf8_lossy(&ran.stderr);
            let last: Vec<&str> = stderr.lines().rev().take(6).collect();
            let tail = last.into_iter().rev().collect::<Vec<_>>().join("\n");
            let why = if tail.contains("No module named 'tensorflow'") {
                format!(
                    "--compare-tf needs TensorFlow importable by {} (or set POLYTENSOR_TF_PYTHON)",
                    python.display()
                )
            } else {
                format!("TensorFlow failed on the model:\n{tail}")
            };
            return Err(CliError::bad_input(why));
        }
        let want =
            polytensor::npy::load_npz(&out_path, &cpu).context("reading TensorFlow's outputs")?;
        values
            .iter()
            .enumerate()
            .map(|(i, (name, got))| {
                let key = format!("out{i}");
                let want = &want
                    .iter()
                    .find(|(k, _)| *k == key)
                    .ok_or_else(|| CliError::bad_input(format!("TensorFlow gave no {name}")))?
                    .1;
                difference(name, got, want)
            })
            .collect()
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Print each difference against its bound, `atol + rtol * max|TensorFlow's|`; a failed
/// check for those beyond it.
pub fn judge(differences: &[Difference], rtol: f64, atol: f64) -> CliResult<()> {
    let mut failed = Vec::new();
    for d in differences {
        let bound = atol + rtol * d.scale;
        let pass = d.max_abs <= bound;
        println!(
            "{}: max |polytensor - TensorFlow| = {:.3e} (max |TensorFlow| {:.3e}, bound \
             {bound:.3e}): {}",
            d.name,
            d.max_abs,
            d.scale,
            if pass { "ok" } else { "DIFFERS" }
        );
        if !pass {
            failed.push(d.name.as_str());
        }
    }
    if failed.is_empty() {
        return Ok(());
    }
    Err(CliError::new(
        Failure::Check,
        format!("outputs differ from TensorFlow's: {}", failed.join(", ")),
    ))
}

fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The largest difference of two tensors of one shape (as f64).
fn difference(name: &str, got: &Tensor, want: &Tensor) -> CliResult<Difference> {
    if got.dims() != want.dims() {
        return Err(CliError::new(
            Failure::Check,
            format!(
                "{name}: polytensor's shape {} differs from TensorFlow's {}",
                got.shape(),
                want.shape()
            ),
        ));
    }
    let cpu = polytensor::device("cpu:0")?;
    let values = |t: &Tensor| -> CliResult<Vec<f64>> {
        if !(t.dtype().is_numeric() || t.dtype() == DataType::Bool) || t.dtype().is_complex() {
            return Err(CliError::bad_input(format!(
                "{name}: {} outputs are not compared",
                t.dtype()
            )));
        }
        Ok(t.to_device(&cpu)?.cast(DataType::Double)?.to_vec::<f64>()?)
    };
    let (got, want) = (values(got)?, values(want)?);
    let mut max_abs = 0f64;
    let mut scale = 0f64;
    for (g, w) in got.iter().zip(&want) {
        let d = if g.is_nan() && w.is_nan() {
            0.0
        } else {
            (g - w).abs()
        };
        max_abs = max_abs.max(if d.is_nan() { f64::INFINITY } else { d });
        scale = scale.max(w.abs());
    }
    Ok(Difference {
        name: name.to_string(),
        max_abs,
        scale,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_count_nan_mismatches() {
        let cpu = polytensor::device("cpu:0").unwrap();
        let a = Tensor::from_slice(&[1.0f32, f32::NAN, 3.0], [3], &cpu).unwrap();
        let b = Tensor::from_slice(&[1.5f32, f32::NAN, -4.0], [3], &cpu).unwrap();
        let d = difference("y", &a, &b).unwrap();
        assert_eq!((d.max_abs, d.scale), (7.0, 4.0));
        let c = Tensor::from_slice(&[f32::NAN], [1], &cpu).unwrap();
        let e = Tensor::from_slice(&[0f32], [1], &cpu).unwrap();
        assert_eq!(difference("y", &c, &e).unwrap().max_abs, f64::INFINITY);
        assert!(difference("y", &a, &e).is_err(), "shapes differ");
    }
}
