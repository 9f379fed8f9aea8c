//! A C program that uses only `polytensor.h`, compiled here with the C compiler the `cc`
//! crate finds and linked against the library this build made, then run; the header
//! compiled alone as strict C99 and as C++; and the README's two link lines.

use crate::common;

#[test]
fn a_c_consumer_runs_against_the_library() {
    let exe = common::compile_c_program("roundtrip.c");
    let output = common::run(&mut common::c_program(&exe), "running the C consumer");
    assert!(output.contains("all checks passed"), "{output}");
}

#[test]
fn a_c_program_makes_views_strings_and_graphs_with_every_attribute_kind() {
    let exe = common::compile_c_program("views.c");
    let output = common::run(&mut common::c_program(&exe), "running views.c");
    assert!(output.contains("all checks passed"), "{output}");
}

/// The header with nothing else, as C99 with every pedantic warning an error (no C11
/// features, such as a repeated typedef) and as C++11 and C++17.
#[test]
fn the_header_is_strict_c99_and_cpp() {
    let out = common::tempdir("strict_header");
    let c = out.join("header.c");
    std::fs::write(
        &c,
        "#include \"polytensor.h\"\nint main(void) { return PT_GetCode(NULL) == PT_OK; }\n",
    )
    .unwrap();
    let mut cc = common::c_compiler().to_command();
    cc.args([
        "-std=c99",
        "-pedantic-errors",
        "-Wall",
        "-Wextra",
        "-Werror",
    ])
    .arg("-fsyntax-only")
    .arg("-I")
    .arg(common::include_dir())
    .arg(&c);
    common::run(&mut cc, "compiling polytensor.h as C99");
    let cpp = out.join("header.cpp");
    std::fs::write(
        &cpp,
        "#include \"polytensor.h\"\nint main() { return PT_GetCode(NULL) == PT_OK; }\n",
    )
    .unwrap();
    for standard in ["-std=c++11", "-std=c++17"] {
        let mut cxx = common::c_compiler_for_cpp().to_command();
        cxx.args([standard, "-pedantic-errors", "-Wall", "-Werror"])
            .arg("-fsyntax-only")
            .arg("-I")
            .arg(common::include_dir())
            .arg(&cpp);
        common::run(
            &mut cxx,
            &format!("compiling polytensor.h as C++ ({standard})"),
        );
    }
}

/// The README's two link lines, as written but for the library's folder: the shared
/// library found through an rpath, and the static one with `-lm -lpthread -ldl`.
#[test]
fn the_readme_link_lines_work() {
    let lib = common::library_dir();
    let source = common::capi_dir().join("tests/c/roundtrip.c");
    let out = common::tempdir("link_lines");
    let shared = out.join("shared");
    let mut cc = common::c_compiler().to_command();
    cc.arg(&source)
        .arg("-I")
        .arg(common::include_dir())
        .arg(format!("-L{}", lib.display()))
        .arg("-lpolytensor_capi")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-o")
        .arg(&shared);
    common::run(&mut cc, "linking against libpolytensor_capi.so");
    let output = common::run(&mut common::c_program(&shared), "running the shared build");
    assert!(output.contains("all checks passed"), "{output}");
    let static_exe = out.join("static");
    let mut cc = common::c_compiler().to_command();
    cc.arg(&source)
        .arg("-I")
        .arg(common::include_dir())
        .arg(lib.join("libpolytensor_capi.a"))
        .args(["-lm", "-lpthread", "-ldl"])
        .arg("-o")
        .arg(&static_exe);
    common::run(&mut cc, "linking against libpolytensor_capi.a");
    let output = common::run(
        &mut common::c_program(&static_exe),
        "running the static build",
    );
    assert!(output.contains("all checks passed"), "{output}");
    // The static build needs no libpolytensor_capi.so at run time.
    let ldd = common::run(
        std::process::Command::new("ldd").arg(&static_exe),
        "ldd of the static build",
    );
    assert!(!ldd.contains("libpolytensor_capi"), "{ldd}");
}
