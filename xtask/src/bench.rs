//! `cargo xtask bench [--quick] [FILTER]`: run the criterion benchmarks and summarise them
//! as Markdown tables (polytensor, each peer, and polytensor's ratio to the best peer).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One measured benchmark.
struct Measured {
    function: String,
    parameter: String,
    /// Median time per iteration, in nanoseconds.
    nanos: f64,
    /// Units per iteration: FLOP (`Elements`) or bytes (`Bytes`).
    throughput: Option<(String, f64)>,
}

/// Run the benchmarks (all, or those matching `filter`), then print and write the summary.
pub fn run(args: &[String]) -> Result<bool, String> {
    let quick = args.iter().any(|a| a == "--quick");
    let filter: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let mut command = Command::new(env!("CARGO"));
    // `peers`: OpenBLAS, ndarray and candle, measured next to polytensor in the same run.
    command.args([
        "bench",
        "-p",
        "benches",
        "--benches",
        "--features",
        "peers",
        "--",
    ]);
    if quick {
        command.arg("--quick");
    }
    command.args(filter);
    let status = command
        .status()
        .map_err(|e| format!("cannot run cargo bench: {e}"))?;
    if !status.success() {
        return Ok(false);
    }
    let summary = summarise(Path::new("target/criterion"))?;
    let path = PathBuf::from("target/bench/summary.md");
    std::fs::create_dir_all("target/bench").map_err(|e| e.to_string())?;
    std::fs::write(&path, &summary).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!("{summary}\nsummary: {}", path.display());
    Ok(true)
}

fn read_json(path: &Path) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Every benchmark criterion has results for, by group.
fn collect(root: &Path) -> BTreeMap<String, Vec<Measured>> {
    let mut groups: BTreeMap<String, Vec<Measured>> = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n == "new") {
                    if let (Some(bench), Some(estimates)) = (
                        read_json(&path.join("benchmark.json")),
                        read_json(&path.join("estimates.json")),
                    ) {
                        let throughput = bench["throughput"].as_object().and_then(|t| {
                            t.iter()
                                .next()
                                .and_then(|(unit, value)| value.as_f64().map(|v| (unit.clone(), v)))
                        });
                        let measured = Measured {
                            function: bench["function_id"].as_str().unwrap_or("").to_string(),
                            parameter: bench["value_str"].as_str().unwrap_or("").to_string(),
                            nanos: estimates["median"]["point_estimate"]
                                .as_f64()
                                .unwrap_or(f64::NAN),
                            throughput,
                        };
                        groups
                            .entry(bench["group_id"].as_str().unwrap_or("").to_string())
                            .or_default()
                            .push(measured);
                    }
                } else {
                    stack.push(path);
                }
            }
        }
    }
    groups
}

fn rate(m: &Measured) -> String {
    match &m.throughput {
        Some((unit, amount)) if unit == "Elements" => format!("{:.1} GFLOP/s", amount / m.nanos),
        Some((_, amount)) => format!("{:.1} GB/s", amount / m.nanos),
        None if m.nanos < 1e4 => format!("{:.0} ns", m.nanos),
        None => format!("{:.3} ms", m.nanos / 1e6),
    }
}

/// Speed relative to another measurement (higher is faster).
fn speedup(ours: &Measured, theirs: &Measured) -> f64 {
    theirs.nanos / ours.nanos
}

/// The Markdown summary of every group under `root`.
pub fn summarise(root: &Path) -> Result<String, String> {
    let groups = collect(root);
    if groups.is_empty() {
        return Err(format!("no criterion results under {}", root.display()));
    }
    let mut out = String::new();
    for (group, measured) in &groups {
        let mut functions: Vec<&str> = measured.iter().map(|m| m.function.as_str()).collect();
        functions.sort_by_key(|f| (*f != "polytensor", f.to_string()));
        functions.dedup();
        let mut parameters: Vec<&str> = measured.iter().map(|m| m.parameter.as_str()).collect();
        parameters.sort_by_key(|p| (p.parse::<f64>().unwrap_or(f64::MAX) as u64, p.to_string()));
        parameters.dedup();
        out.push_str(&format!(
            "### {group}\n\n| case | {} | polytensor / best other |\n|---|{}---|\n",
            functions.join(" | "),
            "---|".repeat(functions.len())
        ));
        for parameter in parameters {
            let find = |f: &str| {
                measured
                    .iter()
                    .find(|m| m.function == f && m.parameter == parameter)
            };
            let cells: Vec<String> = functions
                .iter()
                .map(|f| find(f).map_or("-".into(), rate))
                .collect();
            let ratio = find("polytensor").and_then(|ours| {
                functions
                    .iter()
                    .filter(|f| **f != "polytensor")
                    .filter_map(|f| find(f))
                    .map(|theirs| speedup(ours, theirs))
                    .reduce(f64::min)
            });
            let ratio = ratio.map_or("-".into(), |r| format!("{r:.2}x"));
            let case = if parameter.is_empty() { "-" } else { parameter };
            out.push_str(&format!("| {case} | {} | {ratio} |\n", cells.join(" | ")));
        }
        out.push('\n');
    }
    Ok(out)
}

/// `cargo xtask python-bench`: run `python/benches/bench.py` with the venv's Python, which
/// prints its table (and writes `target/bench/python.md`); fails where its target is missed.
pub fn python() -> Result<bool, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("xtask has no parent folder")?;
    let python = match std::env::var_os("POLYTENSOR_PACKAGE_PYTHON") {
        Some(python) => PathBuf::from(python),
        None => root.join("target/tf-venv/bin/python"),
    };
    if !python.exists() {
        return Err(format!(
            "no Python at {}: make the venv and install the package first (README, \"Python\"), \
             or set POLYTENSOR_PACKAGE_PYTHON",
            python.display()
        ));
    }
    let status = Command::new(&python)
        .arg(root.join("python/benches/bench.py"))
        .status()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    Ok(status.success())
}
