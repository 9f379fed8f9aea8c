//! `polytensor conformance` (`cargo xtask conformance` in the repository): the suite on
//! every device, with `POLYTENSOR_REQUIRE`, its table printed and its reports written.

use std::io::Write;
use std::path::PathBuf;

use conformance::{run_with_progress, Filter};
use polytensor::{DataType, DeviceStatus};

use crate::progress::Progress;
use report::{Column, Report};

mod report;

/// `polytensor conformance` (and `cargo xtask conformance`): which devices, which cases,
/// where the reports go.
#[derive(clap::Args, Debug)]
pub struct Options {
    /// Run on this device or backend only (`cpu:0`, `wgpu`); repeatable. Default: all.
    #[arg(long = "backend", value_name = "NAME")]
    backends: Vec<String>,
    /// Only the cases of this op (`add`, `conv2d`, a layer's name).
    #[arg(long)]
    op: Option<String>,
    /// Only the cases of this dtype (`float32`, `bfloat16`).
    #[arg(long)]
    dtype: Option<DataType>,
    /// Where the JSON report goes.
    #[arg(long, default_value = "target/conformance/report.json")]
    json: PathBuf,
    /// Where the Markdown report goes.
    #[arg(long, default_value = "target/conformance/report.md")]
    markdown: PathBuf,
}

impl Options {
    fn filter(&self) -> Filter {
        let mut filter = Filter::all();
        filter.op = self.op.clone();
        filter.dtype = self.dtype;
        filter
    }

    fn wants(&self, name: &str, kind: &str) -> bool {
        self.backends.is_empty() || self.backends.iter().any(|b| b == name || b == kind)
    }
}

/// What `POLYTENSOR_REQUIRE` may name besides backends: checks that tests run (`cuda-ptx`,
/// the PTX check of every CUDA kernel), not devices this task runs the suite on.
const REQUIRED_CHECKS: &[&str] = &["cuda-ptx"];

/// The backends `POLYTENSOR_REQUIRE` names (`cpu,opencl,wgpu`).
fn required() -> Vec<String> {
    std::env::var("POLYTENSOR_REQUIRE")
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty() && !REQUIRED_CHECKS.contains(&s.as_str()))
        .collect()
}

/// Run the suite; `Ok(true)` when everything required passed.
pub fn run(options: &Options) -> Result<bool, String> {
    let mut columns = Vec::new();
    for entry in polytensor::devices() {
        let kind = entry.kind.name();
        if !options.wants(&entry.name, kind) {
            continue;
        }
        match &entry.status {
            DeviceStatus::Available(device) => {
                let filter = options.filter();
                let mut progress: Option<Progress> = None;
                let result = run_with_progress(device, &filter, |done, total| {
                    progress
                        .get_or_insert_with(|| {
                            let what = format!(
                                "conformance on {} ({})",
                                device.name(),
                                device.description()
                            );
                            Progress::start(what, total as u64)
                        })
                        .set(done as u64);
                });
                if let Some(progress) = progress {
                    progress.finish(&format!("conformance on {}", device.name()));
                }
                columns.push(Column::Ran {
                    kind: kind.to_string(),
                    report: result,
                });
            }
            DeviceStatus::Unavailable(why) => {
                eprintln!("skipped {}: {why}", entry.name);
                columns.push(Column::Skipped {
                    name: entry.name.clone(),
                    kind: kind.to_string(),
                    why: why.clone(),
                });
            }
        }
    }
    let report = Report::new(columns);
    println!("{}", report.table());
    let mut ok = report.all_passed();
    for backend in required() {
        if !report.ran(&backend) {
            println!(
                "REQUIRED backend {backend} did not run (POLYTENSOR_REQUIRE): {}",
                report.skip_reason(&backend)
            );
            ok = false;
        }
    }
    write(&options.json, &report.json())?;
    write(&options.markdown, &report.markdown())?;
    println!(
        "reports: {} and {}",
        options.json.display(),
        options.markdown.display()
    );
    println!(
        "{}",
        if ok {
            "conformance: PASS"
        } else {
            "conformance: FAIL"
        }
    );
    Ok(ok)
}

fn write(path: &PathBuf, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let mut file =
        std::fs::File::create(path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    file.write_all(text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    /// The `[features]` table of a Cargo manifest, as `name = [values]` lines.
    fn features(manifest: &str) -> Vec<(String, String)> {
        manifest
            .split("[features]")
            .nth(1)
            .expect("a [features] table")
            .lines()
            .skip(1)
            .take_while(|line| !line.starts_with('['))
            .filter_map(|line| line.split_once('='))
            .map(|(name, value)| (name.trim().to_string(), value.trim().to_string()))
            .collect()
    }

    /// Every backend feature of the facade has a feature of the same name here that turns
    /// it on, in the default set, so `polytensor conformance` (and `cargo xtask
    /// conformance`) runs every backend; and every backend compiled in has an entry in
    /// `devices()` (present, or absent with why).
    #[test]
    fn every_backend_of_the_facade_reaches_the_conformance_task() {
        let facade = features(include_str!("../../../Cargo.toml"));
        let own = features(include_str!("../../Cargo.toml"));
        let defaults = &own
            .iter()
            .find(|(n, _)| n == "default")
            .expect("defaults")
            .1;
        let backends: Vec<_> = facade
            .iter()
            .filter(|(n, v)| v.contains(&format!("dep:polytensor-{n}\"")))
            .collect();
        assert_eq!(backends.len(), 4, "cpu, cuda, opencl, wgpu in {facade:?}");
        for (name, value) in backends {
            let ours = own.iter().find(|(n, _)| n == name);
            assert!(
                ours.is_some_and(|(_, v)| v.contains(&format!("polytensor/{name}"))),
                "the facade's backend feature {name} ({value}) has no feature here turning it on"
            );
            assert!(
                defaults.contains(&format!("\"{name}\"")),
                "the default features miss the backend {name}"
            );
        }
        let kinds: Vec<&str> = polytensor::devices()
            .iter()
            .map(|e| e.kind.name())
            .collect();
        for name in ["cpu", "cuda", "opencl", "wgpu"] {
            let compiled = match name {
                "cpu" => cfg!(feature = "cpu"),
                "cuda" => cfg!(feature = "cuda"),
                "opencl" => cfg!(feature = "opencl"),
                _ => cfg!(feature = "wgpu"),
            };
            assert_eq!(kinds.contains(&name), compiled, "{name} in {kinds:?}");
        }
    }
}
