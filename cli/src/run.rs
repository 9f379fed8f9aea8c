//! `polytensor run` and `polytensor profile`: a model loaded on a device, fed, run (once,
//! or `--repeat` times with latency percentiles), its outputs printed as TensorFlow prints
//! them or saved; the profile of the runs as a table and a Chrome trace.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use polytensor::graph::{RunOptions, Trace};
use polytensor::{Device, Tensor};

use crate::error::{CliResult, Context};
use crate::feeds::{self, FeedSpec};
use crate::model::{LoadOptions, Loaded, ModelPath};
use crate::progress::Progress;

/// What to run, and how.
pub struct RunRequest<'a> {
    /// The model.
    pub model: &'a ModelPath,
    /// The device's name (`cpu:0`, `wgpu:0`).
    pub device: &'a str,
    /// The `--input`s.
    pub inputs: &'a [FeedSpec],
    /// The outputs to fetch (empty: all).
    pub outputs: &'a [String],
    /// A SavedModel's signature.
    pub signature: &'a str,
    /// The size of unknown dims of random feeds.
    pub batch: usize,
    /// The seed of random feeds.
    pub seed: u64,
    /// The session's mixed-precision pass (`GraphOptimizations::bf16_weights`).
    pub bf16: bool,
}

/// A model loaded and fed.
pub struct Prepared {
    /// The loaded model.
    pub loaded: Loaded,
    /// The feeds, in the model's input order.
    pub feeds: Vec<Tensor>,
    /// The device it runs on.
    pub device: Arc<dyn Device>,
}

/// Load the model and make its feeds.
pub fn prepare(request: &RunRequest) -> CliResult<Prepared> {
    let device = polytensor::device(request.device)?;
    let loaded = Loaded::load(
        request.model,
        &LoadOptions {
            device: &device,
            signature: request.signature,
            outputs: request.outputs,
            bf16: request.bf16,
        },
    )?;
    let feeds = feeds::assemble(
        &loaded.inputs,
        request.inputs,
        request.batch,
        request.seed,
        &device,
    )?;
    eprintln!("{}", loaded.description);
    for (input, feed) in loaded.inputs.iter().zip(&feeds) {
        eprintln!(
            "  input {} fed {} {}",
            input.name,
            feed.dtype(),
            feed.shape()
        );
    }
    Ok(Prepared {
        loaded,
        feeds,
        device,
    })
}

impl Prepared {
    /// One run, waited for.
    pub fn run_once(&self, options: &RunOptions) -> CliResult<Vec<(String, Tensor)>> {
        let values = self
            .loaded
            .run(options, &self.feeds)
            .context("running the model")?;
        self.device.synchronize()?;
        Ok(values)
    }

    /// `repeat` timed runs after the first (kernels compiled, constants moved, plans
    /// made), which is timed apart.
    pub fn timed(&self, repeat: usize, options: &RunOptions) -> CliResult<Timed> {
        let start = Instant::now();
        let mut values = self.run_once(&RunOptions::default())?;
        let first = start.elapsed().as_secs_f64() * 1e3;
        let mut times = Vec::with_capacity(repeat);
        if repeat > 0 {
            let mut progress = Progress::start(format!("{repeat} runs"), repeat as u64);
            for i in 0..repeat {
                let start = Instant::now();
                values = self.run_once(options)?;
                times.push(start.elapsed().as_secs_f64() * 1e3);
                progress.set(i as u64 + 1);
            }
            progress.finish(&format!("{repeat} runs"));
        }
        times.sort_by(f64::total_cmp);
        Ok(Timed {
            first,
            times,
            values,
        })
    }
}

/// What [`Prepared::timed`] measured.
pub struct Timed {
    /// The first run, in ms.
    pub first: f64,
    /// The other runs, in ms, sorted.
    pub times: Vec<f64>,
    /// The last run's outputs.
    pub values: Vec<(String, Tensor)>,
}

/// The latency line of sorted times (ms): percentiles as load tests report them.
pub fn latency(first: f64, times: &[f64]) -> String {
    if times.is_empty() {
        return format!("first run {first:.3} ms");
    }
    let at = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize];
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    format!(
        "first run {first:.3} ms; {} runs: min {:.3} ms, p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} \
         ms, max {:.3} ms, mean {mean:.3} ms",
        times.len(),
        times[0],
        at(0.5),
        at(0.9),
        at(0.99),
        times[times.len() - 1]
    )
}

/// Print the outputs as TensorFlow eager prints tensors, or save them: `save` a `.npz` or
/// `.safetensors` file (every output, by name), or a directory (one `.npy` per output).
pub fn deliver(values: &[(String, Tensor)], save: Option<&Path>) -> CliResult<()> {
    let cpu = polytensor::device("cpu:0")?;
    let host: Vec<(String, Tensor)> = values
        .iter()
        .map(|(name, value)| Ok((name.clone(), value.to_device(&cpu)?)))
        .collect::<CliResult<_>>()?;
    let Some(save) = save else {
        for (name, value) in &host {
            println!("{name}: {value}");
        }
        return Ok(());
    };
    let named: Vec<(&str, &Tensor)> = host.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let writing = format!("writing {}", save.display());
    match save.extension().and_then(|e| e.to_str()) {
        Some("npz") => polytensor::npy::save_npz(&named, save).context(&writing)?,
        Some("safetensors") => polytensor::safetensors::save(&named, save).context(&writing)?,
        _ => {
            std::fs::create_dir_all(save)
                .map_err(|e| polytensor::Error::io(&writing, e))
                .context(&writing)?;
            for (name, value) in &named {
                let path = save.join(format!("{}.npy", file_name(name)));
                polytensor::npy::save(value, &path).context(&writing)?;
            }
        }
    }
    for (name, value) in &host {
        eprintln!("saved {name} {} {}", value.dtype(), value.shape());
    }
    eprintln!("outputs written to {}", save.display());
    Ok(())
}

/// An output's name as a file name: `dense/BiasAdd:0` -> `dense_BiasAdd_0`.
fn file_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `polytensor profile`: the per-node timing of `runs` runs (after a first, untimed one),
/// top op types and nodes, and the Chrome trace at `trace`.
pub fn profile(
    prepared: &Prepared,
    runs: usize,
    top: usize,
    trace: Option<&PathBuf>,
) -> CliResult<()> {
    let recorder = Trace::new();
    let options = RunOptions {
        trace: Some(recorder.clone()),
        ..RunOptions::default()
    };
    let timed = prepared.timed(runs.max(1), &options)?;
    // (The first run was not traced: the trace holds the timed runs.)
    let stats = recorder.take();
    println!("{}", latency(timed.first, &timed.times));
    println!(
        "profile of the timed runs (each step waits for its device):\n{}",
        stats.summary(top.max(1))
    );
    if let Some(path) = trace {
        std::fs::write(path, stats.chrome_trace())
            .map_err(|e| polytensor::Error::io(&format!("writing {}", path.display()), e))?;
        println!(
            "wrote the trace to {} (open it in https://ui.perfetto.dev or chrome://tracing)",
            path.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let times: Vec<f64> = (1..=100).map(f64::from).collect();
        let line = latency(5.0, &times);
        assert!(
            line.contains("p50 51.000 ms") && line.contains("p99 99.000 ms"),
            "{line}"
        );
        assert_eq!(latency(2.0, &[]), "first run 2.000 ms");
        assert_eq!(file_name("dense/BiasAdd:0"), "dense_BiasAdd_0");
    }
}
