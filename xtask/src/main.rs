//! `cargo xtask`: polytensor's project tasks.
//!
//! - `cargo xtask conformance [--backend NAME ...] [--op NAME] [--dtype NAME] [--json PATH]
//!   [--markdown PATH]`: run the conformance suite on every device this machine has, print
//!   the table, write the reports, and exit non-zero on any failure, leak, or skip of a
//!   backend named in `POLYTENSOR_REQUIRE`.
//! - `cargo xtask bench [--quick] [FILTER]`: run the criterion benchmarks (peers measured in
//!   the same run) and write `target/bench/summary.md`.
//! - `cargo xtask build-check`: the README's second command rebuilds nothing the first
//!   built, and the test binaries stay within their budget (Cargo's unit graph, nightly).
//! - `cargo xtask python-bench`: time the Python package (`python/benches/bench.py`: DLPack
//!   round trips and small ops' call overhead, NumPy and PyTorch in the same run) with the
//!   Python of `target/tf-venv` (or `POLYTENSOR_PACKAGE_PYTHON`), which has it installed.

mod bench;
mod build_check;

use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask conformance [--backend NAME ...] [--op NAME] [--dtype NAME] [--json PATH] [--markdown PATH]
       cargo xtask bench [--quick] [FILTER]
       cargo xtask build-check
       cargo xtask python-bench";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        // (The suite's runner is the `polytensor` command's: one parser, one table.)
        Some("conformance") => {
            let line = ["polytensor".to_string()]
                .into_iter()
                .chain(args.iter().cloned());
            return polytensor_cli::main_with(line);
        }
        Some("bench") => bench::run(&args[1..]),
        Some("build-check") => build_check::run(),
        Some("python-bench") => bench::python(),
        Some("-h" | "--help") | None => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Some(other) => Err(format!("unknown task {other:?}\n{USAGE}")),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}
