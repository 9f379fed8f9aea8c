//! What the facade's tests that run a real Python share: finding a Python that imports
//! what a test needs, skipping (or, when CI requires it, failing) without one, and running
//! a script of `tests/python`.

// Each test crate that includes this module uses only part of it.
#![allow(dead_code)]

pub mod golden;
pub mod placed;

use std::path::{Path, PathBuf};
use std::process::Command;

/// A Python environment a test may run in.
pub struct Venv {
    /// The variable that names another Python (`POLYTENSOR_TF_PYTHON`).
    pub override_var: &'static str,
    /// The venv `.ci/run` makes, under the repository (`target/tf-venv`).
    pub dir: &'static str,
    /// The variable that turns a skip into a failure (`POLYTENSOR_REQUIRE_TENSORFLOW`).
    pub require_var: &'static str,
    /// How to make it, for the skip message.
    pub make: &'static str,
}

/// TensorFlow's venv.
pub const TENSORFLOW: Venv = Venv {
    override_var: "POLYTENSOR_TF_PYTHON",
    dir: "target/tf-venv",
    require_var: "POLYTENSOR_REQUIRE_TENSORFLOW",
    make: "python3 -m venv target/tf-venv && target/tf-venv/bin/pip install tensorflow-cpu",
};

/// NumPy's venv (with Hugging Face's `safetensors`).
pub const NUMPY: Venv = Venv {
    override_var: "POLYTENSOR_PYTHON",
    dir: "target/pyenv",
    require_var: "POLYTENSOR_REQUIRE_NUMPY",
    make: "python3 -m venv target/pyenv && target/pyenv/bin/pip install numpy safetensors",
};

impl Venv {
    /// Its Python, if it imports `modules` (`"numpy, safetensors"`); otherwise `None` after
    /// saying why the test skips, or a panic when the require variable is set.
    pub fn python(&self, modules: &str) -> Option<PathBuf> {
        let python = match std::env::var_os(self.override_var) {
            Some(path) => PathBuf::from(path),
            None => Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(self.dir)
                .join("bin/python"),
        };
        let imports = Command::new(&python)
            .args(["-c", &format!("import {modules}")])
            .output()
            .is_ok_and(|out| out.status.success());
        if imports {
            return Some(python);
        }
        let why = format!("{} cannot import {modules}", python.display());
        if std::env::var_os(self.require_var).is_some() {
            panic!("{} is set, but {why}", self.require_var);
        }
        eprintln!("skipped: {why} (make one with `{}`)", self.make);
        None
    }
}

/// Run `tests/python/SCRIPT` with `args` in `python`; its stdout, after checking that it
/// succeeded.
pub fn run_script(python: &Path, script: &str, args: &[&std::ffi::OsStr]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(script);
    let output = Command::new(python)
        .arg(script)
        .args(args)
        .env("TF_CPP_MIN_LOG_LEVEL", "2")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    stdout
}

/// What `tests/python/SCRIPT DIR` makes, in `target/<folder>/<hash of the script>`: made
/// once per version of the script (earlier versions' output removed), or `None` after
/// saying why not when `python` lacks `modules`. `override_var` names a folder made
/// elsewhere (a GPU machine without TensorFlow).
pub fn generated(script: &str, folder: &str, modules: &str, override_var: &str) -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(override_var) {
        return Some(PathBuf::from(dir));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = std::fs::read(root.join("tests/python").join(script)).unwrap();
    // FNV-1a of the script: a new version makes its output afresh.
    let hash = source.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let dir = root.join(format!("target/{folder}/{hash:016x}"));
    // Tests of one binary that need the same folder make it once, one after another.
    static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _making = MAKING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if !dir.join("index.json").exists() {
        let python = TENSORFLOW.python(modules)?;
        std::fs::remove_dir_all(root.join("target").join(folder)).ok();
        let made = run_script(&python, script, &[dir.as_os_str()]);
        eprintln!("{}", made.trim());
    }
    Some(dir)
}
