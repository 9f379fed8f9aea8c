//! TensorFlow as a peer in the same benchmark run: a Python process (`benches/python/
//! tf_peer.py`, with TensorFlow from `target/tf-venv` or `POLYTENSOR_TF_PYTHON`) that loads
//! a graph and times `Session.run` on request, so criterion measures it with `iter_custom`
//! beside polytensor's own runs.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

/// A running TensorFlow peer.
pub struct TensorFlow {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

/// The workspace root (the benches crate's parent).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The Python with TensorFlow: `POLYTENSOR_TF_PYTHON`, else `target/tf-venv`'s.
pub fn python() -> PathBuf {
    std::env::var_os("POLYTENSOR_TF_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/tf-venv/bin/python"))
}

/// Run `tests/python/SCRIPT DIR ARGS...` with TensorFlow's [`python`]; `Some(DIR)` when it
/// succeeds, else `None` after saying why (`what` names the benchmarks that skip).
fn made_by(script: &str, dir: PathBuf, args: &[&str], what: &str) -> Option<PathBuf> {
    let made = Command::new(python())
        .arg(workspace().join("tests/python").join(script))
        .arg(&dir)
        .args(args)
        .env("TF_CPP_MIN_LOG_LEVEL", "3")
        .stderr(Stdio::null())
        .status();
    match made {
        Ok(status) if status.success() => Some(dir),
        other => {
            eprintln!("{what} benchmarks skipped: making them failed ({other:?})");
            None
        }
    }
}

/// The Keras models `names` frozen by `tests/python/keras_models.py` (with TensorFlow's
/// [`python`]) into `target/keras-bench`, made afresh; `None` after saying why not.
pub fn keras_models(names: &[&str]) -> Option<PathBuf> {
    let dir = workspace().join("target/keras-bench");
    made_by("keras_models.py", dir, names, "Keras model")
}

/// The zoo models `names` frozen by `tests/python/keras_models.py` into `target/zoo-bench`,
/// made once (each model is large to write); `None` after saying why not.
pub fn zoo_models(names: &[&str]) -> Option<PathBuf> {
    let dir = workspace().join("target/zoo-bench");
    if names
        .iter()
        .all(|name| dir.join(format!("{name}.json")).exists())
    {
        return Some(dir);
    }
    made_by("keras_models.py", dir, names, "zoo model")
}

/// The recurrent classifier `tests/python/tf_recurrent_model.py` writes (a `tf.compat.v1`
/// graph of an LSTM loop over TensorArrays) into `target/training-bench/recurrent`, made
/// afresh; `None` after saying why not.
pub fn recurrent_model() -> Option<PathBuf> {
    let dir = workspace().join("target/training-bench/recurrent");
    made_by("tf_recurrent_model.py", dir, &[], "recurrent training")
}

/// The SavedModels `tests/python/saved_models.py` makes (with TensorFlow's [`python`]),
/// in `target/saved-models-bench`, made once; `None` after saying why not.
pub fn saved_models() -> Option<PathBuf> {
    let dir = workspace().join("target/saved-models-bench");
    if dir.join("index.json").exists() {
        return Some(dir);
    }
    made_by("saved_models.py", dir, &[], "SavedModel")
}

impl TensorFlow {
    /// Start the peer, or `None` after saying why not (no TensorFlow venv).
    pub fn start() -> Option<Self> {
        let python = python();
        if !python.exists() {
            eprintln!(
                "TensorFlow peer skipped: no {} (python3 -m venv target/tf-venv && \
                 target/tf-venv/bin/pip install tensorflow-cpu)",
                python.display()
            );
            return None;
        }
        let mut child = Command::new(&python)
            .arg(workspace().join("benches/python/tf_peer.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| eprintln!("TensorFlow peer skipped: {}: {e}", python.display()))
            .ok()?;
        let input = child.stdin.take()?;
        let output = BufReader::new(child.stdout.take()?);
        let mut peer = Self {
            child,
            input,
            output,
        };
        // Wait for the import of TensorFlow (seconds of a core): the rows timed meanwhile
        // (each group's first) had run 1.2-1.6x slower.
        let answer = peer.ask("ping");
        if answer != "ready" {
            eprintln!("TensorFlow peer skipped: it answered {answer:?} to ping");
            return None;
        }
        Some(peer)
    }

    /// Send one command and read its answer.
    fn ask(&mut self, command: &str) -> String {
        writeln!(self.input, "{command}").expect("write to the TensorFlow peer");
        self.input.flush().expect("flush the TensorFlow peer");
        let mut line = String::new();
        self.output
            .read_line(&mut line)
            .expect("read from the TensorFlow peer");
        line.trim().to_string()
    }

    /// Load a frozen model, fed a batch of `batch`, run on `threads` threads.
    pub fn load_model(&mut self, path: &Path, batch: usize, threads: usize) {
        let answer = self.ask(&format!("model {} {batch} {threads}", path.display()));
        assert_eq!(answer, "ready", "TensorFlow peer: {answer}");
    }

    /// Load the frozen Keras model at `path` (made by `tests/python/keras_models.py`, with
    /// its sidecar beside it) on a batch of `batch`, run on `threads` threads.
    pub fn load_frozen(&mut self, path: &Path, batch: usize, threads: usize) {
        let answer = self.ask(&format!("frozen {} {batch} {threads}", path.display()));
        assert_eq!(answer, "ready", "TensorFlow peer: {answer}");
    }

    /// [`TensorFlow::load_frozen`] with grappler's bf16 auto mixed precision
    /// (`auto_mixed_precision_onednn_bfloat16`: oneDNN's bf16 where the CPU has it).
    pub fn load_frozen_bf16(&mut self, path: &Path, batch: usize, threads: usize) {
        let answer = self.ask(&format!("frozen_bf16 {} {batch} {threads}", path.display()));
        assert_eq!(answer, "ready", "TensorFlow peer: {answer}");
    }

    /// Load one `Conv2D` (NHWC, SAME, stride 1) of `[n, h, w, c]` by a `k x k x c x o`
    /// filter, run on `threads` threads.
    pub fn load_conv2d(&mut self, [n, h, w, c, k, o]: [usize; 6], threads: usize) {
        let answer = self.ask(&format!("conv2d {n} {h} {w} {c} {k} {o} {threads}"));
        assert_eq!(answer, "ready", "TensorFlow peer: {answer}");
    }

    /// Load one Conv1D (VALID, stride 1) of a seeded `[n, w, c]` input and a `[k, c, o]`
    /// filter, run on `threads` threads.
    pub fn load_conv1d(&mut self, [n, w, c, k, o]: [usize; 5], threads: usize) {
        let answer = self.ask(&format!("conv1d {n} {w} {c} {k} {o} {threads}"));
        assert_eq!(answer, "ready", "TensorFlow peer: {answer}");
    }

    /// Load a training step polytensor wrote ([`crate::training::TrainingStep::write`] at
    /// `path`), its variables initialised, run on `threads` threads.
    pub fn load_training(&mut self, path: &Path, threads: usize) {
        let answer = self.ask(&format!("train {} {threads}", path.display()));
        assert_eq!(answer, "ready", "TensorFlow peer: {answer}");
    }

    /// Load a counter loop of `steps` iterations written with control flow `version`
    /// (`"v1"` or `"v2"`), run on `threads` threads, and write its GraphDef to `path`.
    pub fn load_while(&mut self, path: &Path, steps: usize, version: &str, threads: usize) {
        let answer = self.ask(&format!(
            "while {} {steps} {version} {threads}",
            path.display()
        ));
        assert_eq!(answer, "ready", "TensorFlow peer: {answer}");
    }

    /// Load a `SparseTensorDenseMatMul` of an `[m, k]` sparse matrix holding every
    /// `every`-th element (row-major, value `1 + position`) by a `[k, n]` matrix, run on
    /// `threads` threads.
    pub fn load_spmm(&mut self, [m, k, n, every]: [usize; 4], threads: usize) {
        let answer = self.ask(&format!("spmm {m} {k} {n} {every} {threads}"));
        assert_eq!(answer, "ready", "TensorFlow peer: {answer}");
    }

    /// Load an import of the GraphDef at `path` (`tf.graph_util.import_graph_def` into a
    /// new graph) as what [`time`](Self::time) runs.
    pub fn load_import(&mut self, path: &Path) {
        let answer = self.ask(&format!("import {}", path.display()));
        assert_eq!(answer, "ready", "TensorFlow peer: {answer}");
    }

    /// Load, as what [`time`](Self::time) runs, `tf.saved_model.load` of the SavedModel
    /// at `dir` (one of [`saved_models`]) and one call of its recorded signature.
    pub fn load_saved_model(&mut self, dir: &Path) {
        let answer = self.ask(&format!("saved_model {}", dir.display()));
        assert_eq!(answer, "ready", "TensorFlow peer: {answer}");
    }

    /// The time of `iters` runs of what was loaded last.
    pub fn time(&mut self, iters: u64) -> Duration {
        let answer = self.ask(&format!("time {iters}"));
        let seconds: f64 = answer
            .parse()
            .unwrap_or_else(|_| panic!("TensorFlow peer: {answer}"));
        Duration::from_secs_f64(seconds)
    }
}

impl Drop for TensorFlow {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
