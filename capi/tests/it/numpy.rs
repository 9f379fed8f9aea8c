//! DLPack with NumPy, the real consumer and producer: `tests/python/test_dlpack.py` runs
//! under a Python with NumPy (`POLYTENSOR_PYTHON`, else the venv `.ci/run` makes in
//! `target/pyenv`), loading this build's library with `ctypes` and a capsule helper
//! compiled here from `tests/python/capsule.c`. Without such a Python the test says why
//! and skips, unless `POLYTENSOR_REQUIRE_NUMPY` is set (as in CI): then it fails.

use crate::common;

use std::path::PathBuf;
use std::process::Command;

/// A Python that imports NumPy, or why there is none.
fn python() -> Result<PathBuf, String> {
    let python = match std::env::var_os("POLYTENSOR_PYTHON") {
        Some(path) => PathBuf::from(path),
        None => common::capi_dir().join("../target/pyenv/bin/python"),
    };
    let probe = Command::new(&python)
        .args(["-c", "import numpy"])
        .output()
        .map_err(|e| format!("no Python at {}: {e}", python.display()))?;
    if !probe.status.success() {
        return Err(format!("{} cannot import numpy", python.display()));
    }
    Ok(python)
}

#[test]
fn dlpack_with_numpy() {
    let python = match python() {
        Ok(python) => python,
        Err(why) if std::env::var_os("POLYTENSOR_REQUIRE_NUMPY").is_none() => {
            eprintln!(
                "skipped: {why} (make one with `python3 -m venv target/pyenv && \
                 target/pyenv/bin/pip install numpy`)"
            );
            return;
        }
        Err(why) => panic!("POLYTENSOR_REQUIRE_NUMPY is set, but {why}"),
    };
    let out = common::tempdir("numpy");
    let capsule_lib = out.join("capsule.so");
    let mut cc = common::c_compiler().to_command();
    cc.args(["-std=c11", "-Wall", "-Werror", "-shared", "-fPIC"])
        .arg("-I")
        .arg(common::include_dir())
        .arg(common::capi_dir().join("tests/python/capsule.c"))
        .arg("-o")
        .arg(&capsule_lib);
    common::run(&mut cc, "compiling tests/python/capsule.c");
    let mut script = Command::new(python);
    script
        .arg(common::capi_dir().join("tests/python/test_dlpack.py"))
        .env(
            "PT_LIB",
            common::library_dir().join("libpolytensor_capi.so"),
        )
        .env("PT_CAPSULE_LIB", &capsule_lib);
    let output = common::run(&mut script, "the NumPy DLPack script");
    println!("{output}");
    assert!(output.contains("DLPack cases passed"), "{output}");
}
