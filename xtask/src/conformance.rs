//! `cargo xtask conformance`: the suite on every device, with `POLYTENSOR_REQUIRE`.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use conformance::{run_with_progress, Filter};
use polytensor::DeviceStatus;
use polytensor_core::DataType;

use crate::report::{Column, Report};

/// Parsed command-line options.
pub struct Options {
    backends: Vec<String>,
    filter: Filter,
    json: PathBuf,
    markdown: PathBuf,
}

impl Options {
    pub fn parse(args: &[String]) -> Result<Self, String> {
        let mut options = Options {
            backends: Vec::new(),
            filter: Filter::all(),
            json: PathBuf::from("target/conformance/report.json"),
            markdown: PathBuf::from("target/conformance/report.md"),
        };
        let mut args = args.iter();
        while let Some(flag) = args.next() {
            let mut value = || {
                args.next()
                    .cloned()
                    .ok_or_else(|| format!("{flag} needs a value"))
            };
            match flag.as_str() {
                "--backend" => options.backends.push(value()?),
                "--op" => options.filter.op = Some(value()?),
                "--dtype" => {
                    options.filter.dtype =
                        Some(value()?.parse::<DataType>().map_err(|e| e.to_string())?)
                }
                "--json" => options.json = PathBuf::from(value()?),
                "--markdown" => options.markdown = PathBuf::from(value()?),
                other => return Err(format!("unknown option {other:?}\n{}", crate::USAGE)),
            }
        }
        Ok(options)
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
                eprintln!(
                    "conformance on {} ({})",
                    device.name(),
                    device.description()
                );
                let started = Instant::now();
                let mut last = Instant::now();
                let result = run_with_progress(device, &options.filter, |done, total| {
                    if done == total || last.elapsed().as_secs_f64() > 2.0 {
                        eprintln!(
                            "  {}: {done}/{total} cases, {:.1} s",
                            device.name(),
                            started.elapsed().as_secs_f64()
                        );
                        last = Instant::now();
                    }
                });
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
    use super::*;

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
    /// it on, in the default set, so `cargo xtask conformance` runs every backend; and
    /// every backend compiled in has an entry in `devices()` (present, or absent with why).
    #[test]
    fn every_backend_of_the_facade_reaches_the_conformance_task() {
        let facade = features(include_str!("../../Cargo.toml"));
        let xtask = features(include_str!("../Cargo.toml"));
        let defaults = &xtask
            .iter()
            .find(|(n, _)| n == "default")
            .expect("defaults")
            .1;
        for (name, value) in facade.iter().filter(|(_, v)| v.contains("dep:backend-")) {
            let own = xtask.iter().find(|(n, _)| n == name);
            assert!(
                own.is_some_and(|(_, v)| v.contains(&format!("polytensor/{name}"))),
                "the facade's backend feature {name} ({value}) has no xtask feature turning it on"
            );
            assert!(
                defaults.contains(&format!("\"{name}\"")),
                "xtask's default features miss the backend {name}"
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

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn options_parse() {
        let o = Options::parse(&args(
            "--backend cpu --backend wgpu --op add --dtype bfloat16 --json a.json --markdown b.md",
        ))
        .unwrap();
        assert_eq!(o.backends, vec!["cpu", "wgpu"]);
        assert_eq!(o.filter.op.as_deref(), Some("add"));
        assert_eq!(o.filter.dtype, Some(DataType::BFloat16));
        assert_eq!(
            (&o.json, &o.markdown),
            (&PathBuf::from("a.json"), &PathBuf::from("b.md"))
        );
        assert!(
            o.wants("cpu:0", "cpu")
                && !Options::parse(&args("--backend wgpu"))
                    .unwrap()
                    .wants("cpu:0", "cpu")
        );
        assert!(Options::parse(&args("--op")).is_err());
        assert!(Options::parse(&args("--dtype float33")).is_err());
        assert!(Options::parse(&args("--frobnicate")).is_err());
    }
}
