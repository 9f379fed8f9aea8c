//! `cargo xtask`: polytensor's project tasks.
//!
//! - `cargo xtask conformance [--backend NAME ...] [--op NAME] [--dtype NAME] [--json PATH]
//!   [--markdown PATH]`: run the conformance suite on every device this machine has, print
//!   the table, write the reports, and exit non-zero on any failure, leak, or skip of a
//!   backend named in `POLYTENSOR_REQUIRE`.
//! - `cargo xtask bench [--quick] [FILTER]`: run the criterion benchmarks (peers measured in
//!   the same run) and write `target/bench/summary.md`.

mod bench;
mod conformance;
mod report;

use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask conformance [--backend NAME ...] [--op NAME] [--dtype NAME] [--json PATH] [--markdown PATH]
       cargo xtask bench [--quick] [FILTER]";

/// Quiet driver chatter that is not an error of polytensor's: Mesa's implicit Vulkan layer
/// `VK_LAYER_MESA_device_select` reorders GPUs by asking the display server, and on a
/// machine without one prints `error: XDG_RUNTIME_DIR is invalid or not set` four times.
/// polytensor orders adapters itself, so the layer is switched off (its documented
/// `NODEVICE_SELECT=1`) unless the user set it. Done first thing in `main`, while this is
/// the only thread: setting a variable while other threads read the environment is a race.
fn quiet_drivers() {
    if std::env::var_os("NODEVICE_SELECT").is_none() {
        std::env::set_var("NODEVICE_SELECT", "1");
    }
}

fn main() -> ExitCode {
    quiet_drivers();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("conformance") => {
            conformance::Options::parse(&args[1..]).and_then(|o| conformance::run(&o))
        }
        Some("bench") => bench::run(&args[1..]),
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
