//! The `polytensor` command: TensorFlow models (frozen graphs, SavedModels, checkpoints)
//! shown, run, profiled and checked against TensorFlow on any device this machine has, and
//! the conformance suite. `cargo install --path cli` installs it.
//!
//! ```sh
//! polytensor devices
//! polytensor show model.pb
//! polytensor run model.pb --device wgpu:0 --input x=random:1x224x224x3 --repeat 50
//! polytensor run exported/ --input x=batch.npy --save out.npz --compare-tf
//! polytensor profile model.pb --batch 16 --trace trace.json
//! polytensor convert exported/ -o frozen.pb
//! polytensor conformance --backend cpu
//! ```
//!
//! Exit codes: 0 success, 1 a check failed (conformance, `--compare-tf`), 2 bad input,
//! 3 an op or dtype polytensor or the device lacks, 4 a device failure.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod compare;
pub mod conformance;
mod convert;
mod devices;
mod error;
mod feeds;
mod model;
mod progress;
mod run;
mod show;

pub use error::{CliError, Failure};

use error::CliResult;
use feeds::FeedSpec;
use model::ModelPath;

/// TensorFlow's models and tensors on whatever device this machine has.
#[derive(Parser, Debug)]
#[command(name = "polytensor", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Every device, and every backend without one with the reason.
    Devices {
        /// Each device's ops with the dtypes it runs them for.
        #[arg(long)]
        ops: bool,
    },
    /// A model's inputs, outputs, signatures, op types (and which device runs each) and
    /// parameters; a checkpoint's keys with their dtypes, shapes and slices.
    Show {
        /// A frozen GraphDef (.pb), a SavedModel directory or a checkpoint prefix.
        model: PathBuf,
        /// The devices whose columns the op table shows (default: every device here).
        #[arg(long = "device", value_name = "NAME")]
        devices: Vec<String>,
    },
    /// Run a model: feed it, print or save its outputs, time it, compare with TensorFlow.
    Run {
        #[command(flatten)]
        model: ModelArgs,
        /// Run it N more times after the first and print latency percentiles.
        #[arg(long, default_value_t = 0, value_name = "N")]
        repeat: usize,
        /// Write the outputs: a .npz or .safetensors file, or a directory of .npy files.
        #[arg(long, value_name = "PATH")]
        save: Option<PathBuf>,
        /// Run TensorFlow (in the active Python, or POLYTENSOR_TF_PYTHON) on the same
        /// inputs and print each output's largest difference.
        #[arg(long)]
        compare_tf: bool,
        /// --compare-tf passes when |difference| <= atol + rtol * max|TensorFlow's value|.
        #[arg(long, default_value_t = 1e-4, value_name = "RTOL")]
        rtol: f64,
        /// See --rtol.
        #[arg(long, default_value_t = 1e-5, value_name = "ATOL")]
        atol: f64,
    },
    /// Time every node of a model's runs: the top op types and nodes, and a Chrome trace.
    Profile {
        #[command(flatten)]
        model: ModelArgs,
        /// How many runs to profile (after a first, untimed one).
        #[arg(long, default_value_t = 10, value_name = "N")]
        runs: usize,
        /// How many op types and nodes to list.
        #[arg(long, default_value_t = 15, value_name = "K")]
        top: usize,
        /// Write the runs in Chrome's trace-event format (Perfetto, chrome://tracing).
        #[arg(long, value_name = "FILE.json")]
        trace: Option<PathBuf>,
    },
    /// Freeze a SavedModel's signature into a GraphDef: its functions inlined, its
    /// variables constants (TensorFlow's convert_variables_to_constants_v2).
    Convert {
        /// The SavedModel directory.
        saved_model: PathBuf,
        /// Where the frozen GraphDef (.pb) goes.
        #[arg(short, long, value_name = "FROZEN.pb")]
        output: PathBuf,
        /// The signature to freeze.
        #[arg(long, default_value = "serving_default")]
        signature: String,
    },
    /// The conformance suite on every device here, its table and reports.
    Conformance(conformance::Options),
}

/// The model and its feeds, as `run` and `profile` take them.
#[derive(clap::Args, Debug)]
struct ModelArgs {
    /// A frozen GraphDef (.pb) or a SavedModel directory.
    model: PathBuf,
    /// The device to run on (cpu:0, wgpu:0, opencl:0, cuda:0).
    #[arg(long, default_value = "cpu:0")]
    device: String,
    /// A feed: [NAME=]FILE.npy, NAME=FILE.npz[:KEY], NAME=FILE.safetensors[:KEY],
    /// NAME=random or NAME=random:1x224x224x3. Inputs not given are random.
    #[arg(long = "input", value_name = "SPEC")]
    inputs: Vec<FeedSpec>,
    /// An output to fetch: a frozen graph's tensor (name:0), a signature's key. Default:
    /// every output.
    #[arg(long = "output", value_name = "NAME")]
    outputs: Vec<String>,
    /// A SavedModel's signature.
    #[arg(long, default_value = "serving_default")]
    signature: String,
    /// The size of unknown dims (the batch) of random inputs.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// The seed of random inputs.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Mixed precision: f32 convolutions multiply in bf16 (weights rounded once, sums in
    /// f32) on CPUs with AVX512-BF16; elsewhere nothing changes.
    #[arg(long)]
    bf16: bool,
}

impl ModelArgs {
    fn request<'a>(&'a self, model: &'a ModelPath) -> run::RunRequest<'a> {
        run::RunRequest {
            model,
            device: &self.device,
            inputs: &self.inputs,
            outputs: &self.outputs,
            signature: &self.signature,
            batch: self.batch,
            seed: self.seed,
            bf16: self.bf16,
        }
    }
}

/// Run the command line `args` (the program's name first): what `polytensor` does, with
/// its exit code. Errors print to stderr as one message with their causes.
pub fn main_with<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => 0,
                _ => Failure::BadInput.code(),
            });
        }
    };
    match execute(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

fn execute(command: Command) -> CliResult<()> {
    match command {
        Command::Devices { ops } => {
            print!("{}", devices::list(ops));
            Ok(())
        }
        Command::Show { model, devices } => {
            let model = ModelPath::find(&model)?;
            let devices: Vec<std::sync::Arc<dyn polytensor::Device>> = if devices.is_empty() {
                polytensor::devices()
                    .iter()
                    .filter_map(|e| e.device().cloned())
                    .collect()
            } else {
                devices
                    .iter()
                    .map(|name| polytensor::device(name))
                    .collect::<polytensor::Result<_>>()?
            };
            print!("{}", show::show(&model, &devices)?);
            Ok(())
        }
        Command::Run {
            model,
            repeat,
            save,
            compare_tf,
            rtol,
            atol,
        } => {
            let path = ModelPath::find(&model.model)?;
            let prepared = run::prepare(&model.request(&path))?;
            let timed = prepared.timed(repeat, &polytensor::graph::RunOptions::default())?;
            let values = timed.values;
            run::deliver(&values, save.as_deref())?;
            if repeat > 0 {
                println!("{}", run::latency(timed.first, &timed.times));
            }
            if compare_tf {
                let (inputs, outputs) = prepared.loaded.tensorflow_view();
                let differences = compare::compare_with_tensorflow(
                    &path,
                    &model.signature,
                    (&inputs, &outputs),
                    &prepared.feeds,
                    &values,
                )?;
                compare::judge(&differences, rtol, atol)?;
            }
            Ok(())
        }
        Command::Profile {
            model,
            runs,
            top,
            trace,
        } => {
            let path = ModelPath::find(&model.model)?;
            let prepared = run::prepare(&model.request(&path))?;
            run::profile(&prepared, runs, top, trace.as_ref())
        }
        Command::Convert {
            saved_model,
            output,
            signature,
        } => convert::convert(&ModelPath::find(&saved_model)?, &signature, &output),
        Command::Conformance(options) => match conformance::run(&options) {
            Ok(true) => Ok(()),
            Ok(false) => Err(CliError::new(Failure::Check, "conformance failed")),
            Err(message) => Err(CliError::bad_input(message)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("polytensor").chain(line.split_whitespace()))
    }

    #[test]
    fn the_command_line_parses() {
        <Cli as clap::CommandFactory>::command().debug_assert();
        let Command::Run { model, repeat, .. } =
            parse("run m.pb --device wgpu:0 --input x=random:1x4 --repeat 3")
                .unwrap()
                .command
        else {
            panic!("not run");
        };
        assert_eq!((model.device.as_str(), repeat), ("wgpu:0", 3));
        assert_eq!(model.inputs[0].name.as_deref(), Some("x"));
        let Command::Conformance(_) = parse(
            "conformance --backend cpu --backend wgpu --op add --dtype bfloat16 --json a.json",
        )
        .unwrap()
        .command
        else {
            panic!("not conformance");
        };
        for bad in [
            "conformance --op",
            "conformance --dtype float33",
            "conformance --frobnicate",
            "run m.pb --input x=random:1xq",
            "frobnicate",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
