//! The `polytensor` command run as a user runs it: the built binary, its stdout, stderr and
//! exit code, on models, SavedModels and checkpoints made here (and by TensorFlow, when
//! `target/tf-venv` or `POLYTENSOR_TF_PYTHON` has it), and on TensorFlow's golden files.

mod golden;
mod models;
mod tensorflow;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `polytensor ARGS` run to its end.
pub struct Ran {
    /// What it printed to stdout.
    pub stdout: String,
    /// What it printed to stderr.
    pub stderr: String,
    /// Its exit code.
    pub code: i32,
}

impl Ran {
    /// Panics, with what it printed, unless it exited with `code`.
    #[track_caller]
    pub fn expect(self, code: i32) -> Self {
        assert_eq!(
            self.code, code,
            "exit code {} (wanted {code})\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        );
        self
    }
}

/// Run the `polytensor` binary with `args` (stderr piped, as a CI log is).
pub fn polytensor(args: &[&str]) -> Ran {
    polytensor_with(args, &[])
}

/// [`polytensor`] with environment variables.
pub fn polytensor_with(args: &[&str], env: &[(&str, &Path)]) -> Ran {
    let mut command = Command::new(env!("CARGO_BIN_EXE_polytensor"));
    // (CI's list of backends that must run is for the suite it runs itself, not for the
    // one-backend runs of these tests.)
    command.args(args).env_remove("POLYTENSOR_REQUIRE");
    for (name, value) in env {
        command.env(name, value);
    }
    let Output {
        status,
        stdout,
        stderr,
    } = command.output().expect("the polytensor binary runs");
    Ran {
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        code: status.code().unwrap_or(-1),
    }
}

/// A fresh folder for one test's files.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("polytensor-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `path` as the command-line argument it is.
pub fn arg(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 temporary path")
}
