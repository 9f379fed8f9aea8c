//! What the C and Python tests share: where the library and header are, and a C compiler.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// The crate's directory.
pub fn capi_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The directory of `polytensor.h`.
pub fn include_dir() -> PathBuf {
    capi_dir().join("include")
}

/// The directory holding the `libpolytensor_capi.so` that `cargo test` built with this
/// test: the test binary's own `deps/` (only `cargo build` copies it one level up).
pub fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().to_path_buf();
    assert!(
        dir.join("libpolytensor_capi.so").exists(),
        "no libpolytensor_capi.so in {}: build the crate's library first",
        dir.display()
    );
    dir
}

fn build() -> cc::Build {
    let target = env!("POLYTENSOR_CAPI_TARGET");
    let mut build = cc::Build::new();
    build
        .target(target)
        .host(target)
        .opt_level(1)
        .cargo_metadata(false)
        .warnings(true);
    build
}

/// The C compiler for this target.
pub fn c_compiler() -> cc::Tool {
    build().get_compiler()
}

/// The C++ compiler for this target.
pub fn c_compiler_for_cpp() -> cc::Tool {
    build().cpp(true).get_compiler()
}

/// Compile `tests/c/SOURCE` (C11, warnings as errors) against `polytensor.h` and link it
/// with this build's library (found through an rpath); the executable's path.
pub fn compile_c_program(source: &str) -> PathBuf {
    let lib = library_dir();
    let stem = source.trim_end_matches(".c");
    let exe = tempdir(stem).join(stem);
    let mut cc = c_compiler().to_command();
    cc.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic"])
        .arg("-I")
        .arg(include_dir())
        .arg(capi_dir().join("tests/c").join(source))
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(&lib)
        .args(["-lpolytensor_capi", "-lm"])
        .arg(format!("-Wl,-rpath,{}", lib.display()));
    run(&mut cc, &format!("compiling tests/c/{source}"));
    exe
}

/// Run a program from [`compile_c_program`]: Cargo's `LD_LIBRARY_PATH` names
/// `target/debug`, where `cargo build` leaves an older copy of the library, so the rpath
/// alone says which one to load.
pub fn c_program(exe: &std::path::Path) -> Command {
    let mut program = Command::new(exe);
    program.env_remove("LD_LIBRARY_PATH");
    program
}

/// A fresh directory for this test process's files.
pub fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("polytensor-capi-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Run `command`; its output, or a panic with it if it failed.
pub fn run(command: &mut Command, what: &str) -> String {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start {command:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{text}",
        output.status
    );
    text
}
