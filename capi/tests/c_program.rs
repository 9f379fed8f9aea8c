//! A C program that uses only `polytensor.h`, compiled here with the C compiler the `cc`
//! crate finds and linked against the library this build made, then run. The header is
//! also compiled as C++.

mod common;

#[test]
fn a_c_consumer_runs_against_the_library() {
    let exe = common::compile_c_program("roundtrip.c");
    let output = common::run(&mut common::c_program(&exe), "running the C consumer");
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
