//! `polytensor`: see the library's documentation (`polytensor --help`).

fn main() -> std::process::ExitCode {
    polytensor_cli::main_with(std::env::args_os())
}
