//! A C program that uses only `polytensor.h`, compiled here with the C compiler the `cc`
//! crate finds and linked against the library this build made, then run. The header is
//! also compiled as C++.

mod common;

use std::process::Command;

#[test]
fn a_c_consumer_runs_against_the_library() {
    let lib = common::library_dir();
    let out = common::tempdir("c_program");
    let exe = out.join("roundtrip");
    let mut cc = common::c_compiler().to_command();
    cc.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic"])
        .arg("-I")
        .arg(common::include_dir())
        .arg(common::capi_dir().join("tests/c/roundtrip.c"))
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(&lib)
        .args(["-lpolytensor_capi", "-lm"])
        .arg(format!("-Wl,-rpath,{}", lib.display()));
    common::run(&mut cc, "compiling tests/c/roundtrip.c");
    // Cargo's LD_LIBRARY_PATH names target/debug, where `cargo build` leaves an older copy
    // of the library: the rpath alone says which one to load.
    let mut consumer = Command::new(&exe);
    consumer.env_remove("LD_LIBRARY_PATH");
    let output = common::run(&mut consumer, "running the C consumer");
    assert!(output.contains("all checks passed"), "{output}");
}

#[test]
fn the_header_is_valid_cpp() {
    let out = common::tempdir("cpp_header");
    let source = out.join("header.cpp");
    std::fs::write(
        &source,
        "#include \"polytensor.h\"\nint main() { return PT_GetCode(nullptr) == PT_OK; }\n",
    )
    .unwrap();
    let mut cxx = common::c_compiler_for_cpp().to_command();
    cxx.args(["-std=c++17", "-Wall", "-Werror", "-fsyntax-only"])
        .arg("-I")
        .arg(common::include_dir())
        .arg(&source);
    common::run(&mut cxx, "compiling polytensor.h as C++");
}
