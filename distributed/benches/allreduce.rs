//! All-reduce bus bandwidth under `mpirun`, polytensor against its limit and its peer in the
//! same run: `MPI_Allreduce` on a raw `f32` buffer (rsmpi), polytensor's
//! `Communicator::all_reduce_into` of a cpu tensor into a reused output (and `all_reduce`,
//! which allocates its output each call), and mpi4py's `Allreduce` of a NumPy array
//! (`benches/python/mpi4py_allreduce.py`, in `POLYTENSOR_PYTHON` or `target/pyenv`, where
//! it imports mpi4py), for 1 KiB to 256 MiB of f32 on 2 ranks (`POLYTENSOR_MPI_RANKS`).
//!
//! `cargo bench -p polytensor-distributed --features mpi --bench allreduce` starts the
//! `mpirun`s itself, prints the table and writes it to `target/bench/allreduce.md`. Bus
//! bandwidth is NCCL's: `2 (n - 1) / n` times the bytes, over the time of one all-reduce.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::CommunicatorCollectives;
use polytensor_core::{DataType, Tensor};
use polytensor_distributed::{Mpi, Reduction};

/// The sizes measured, in bytes: 1 KiB to 256 MiB by fours.
fn sizes() -> Vec<usize> {
    (0..10).map(|k| 1024usize << (2 * k)).collect()
}

/// Repetitions of a size: enough for about a tenth of a second at each size, at least 3.
fn repetitions(bytes: usize) -> usize {
    (100_000_000 / bytes.max(1)).clamp(3, 2000)
}

/// Seconds per call of `calls` calls of `f`, started together on every rank, agreed as the
/// slowest rank's.
fn time_once(world: &SimpleCommunicator, calls: usize, f: &mut dyn FnMut()) -> f64 {
    world.barrier();
    let start = Instant::now();
    for _ in 0..calls {
        f();
    }
    let mine = start.elapsed().as_secs_f64() / calls as f64;
    let mut slowest = 0.0f64;
    world.all_reduce_into(&mine, &mut slowest, SystemOperation::max());
    slowest
}

/// The best of five timings of each of `contenders`, taken in turns (so that a slow moment
/// of the machine does not fall on one contender).
fn best_of_five(
    world: &SimpleCommunicator,
    calls: usize,
    contenders: &mut [&mut dyn FnMut()],
) -> Vec<f64> {
    let mut best = vec![f64::INFINITY; contenders.len()];
    for f in contenders.iter_mut() {
        f();
    }
    for _ in 0..5 {
        for (f, best) in contenders.iter_mut().zip(&mut best) {
            *best = best.min(time_once(world, calls, *f));
        }
    }
    best
}

/// As a rank: time raw MPI and polytensor at every size; rank 0 prints one JSON line
/// `{"raw": {bytes: seconds}, "into": {...}, "fresh": {...}}`.
fn rank() {
    let mpi = Mpi::init().expect("MPI starts");
    let world = mpi.world().expect("the world communicator");
    let raw = SimpleCommunicator::world();
    let cpu = polytensor_cpu::CpuDevice::shared();
    let mut results: BTreeMap<&str, BTreeMap<usize, f64>> = BTreeMap::new();
    for bytes in sizes() {
        let n = bytes / 4;
        let send = vec![1.0f32; n];
        let mut recv = vec![0.0f32; n];
        let tensor = Tensor::full([n], 1.0f32, DataType::Float, &cpu).expect("a tensor");
        let mut out = Some(Tensor::zeros([n], DataType::Float, &cpu).expect("a tensor"));
        let mut limit = || raw.all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum());
        let mut into = || {
            let given = out.take().expect("the output");
            out = Some(
                world
                    .all_reduce_into(&tensor, given, Reduction::Sum)
                    .expect("all_reduce_into"),
            );
        };
        let mut fresh = || {
            let sum = world
                .all_reduce(&tensor, Reduction::Sum)
                .expect("all_reduce");
            std::hint::black_box(sum);
        };
        let times = best_of_five(
            &raw,
            repetitions(bytes),
            &mut [&mut limit, &mut into, &mut fresh],
        );
        assert!(recv.iter().all(|&v| v == world.size() as f32));
        for (name, seconds) in ["raw", "into", "fresh"].into_iter().zip(times) {
            results.entry(name).or_default().insert(bytes, seconds);
        }
    }
    if world.rank() == 0 {
        println!("RESULTS {}", serde_json::to_string(&results).expect("json"));
    }
}

/// Run `program` under `mpirun -np ranks`; the JSON it printed after `marker`.
fn mpirun(ranks: usize, program: &[&std::ffi::OsStr], marker: &str) -> Option<serde_json::Value> {
    let output = Command::new("mpirun")
        .args(["--oversubscribe", "-np", &ranks.to_string()])
        .args(program)
        .env("POLYTENSOR_MPI_BENCH_RANK", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .ok()?;
    if !output.status.success() {
        eprintln!(
            "{:?} failed under mpirun: {}",
            program,
            String::from_utf8_lossy(&output.stderr)
        );
        return None;
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().find_map(|l| l.strip_prefix(marker))?;
    serde_json::from_str(line).ok()
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The Python with NumPy and mpi4py, if there is one.
fn python() -> Option<PathBuf> {
    let python = std::env::var_os("POLYTENSOR_PYTHON").map_or_else(
        || workspace().join("target/pyenv/bin/python"),
        PathBuf::from,
    );
    let ok = Command::new(&python)
        .args(["-c", "import numpy, mpi4py"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Some(python)
    } else {
        eprintln!(
            "mpi4py skipped: {} cannot import numpy and mpi4py (pip install numpy mpi4py)",
            python.display()
        );
        None
    }
}

fn main() {
    if std::env::var_os("POLYTENSOR_MPI_BENCH_RANK").is_some() {
        rank();
        return;
    }
    let ranks: usize = std::env::var("POLYTENSOR_MPI_RANKS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let exe = std::env::current_exe().expect("the bench binary");
    let Some(ours) = mpirun(ranks, &[exe.as_os_str()], "RESULTS ") else {
        eprintln!(
            "skipped: no mpirun, or the ranks failed (apt install openmpi-bin libopenmpi-dev)"
        );
        return;
    };
    let script = workspace().join("benches/python/mpi4py_allreduce.py");
    let peer = python()
        .and_then(|python| mpirun(ranks, &[python.as_os_str(), script.as_os_str()], "RESULTS "));
    let factor = 2.0 * (ranks as f64 - 1.0) / ranks as f64;
    let bandwidth = |seconds: f64, bytes: usize| factor * bytes as f64 / seconds / 1e9;
    let seconds = |v: &serde_json::Value, bytes: usize| v[bytes.to_string()].as_f64();
    let mut table = format!(
        "All-reduce (sum) of f32 on {ranks} ranks, bus bandwidth in GB/s (time per call):\n\n\
         | Size | MPI_Allreduce (raw) | polytensor `all_reduce_into` | into / raw | polytensor `all_reduce` (new output) | mpi4py + NumPy |\n\
         |---|---|---|---|---|---|\n"
    );
    for bytes in sizes() {
        let (Some(raw), Some(pt), Some(fresh)) = (
            seconds(&ours["raw"], bytes),
            seconds(&ours["into"], bytes),
            seconds(&ours["fresh"], bytes),
        ) else {
            continue;
        };
        let py = peer
            .as_ref()
            .and_then(|p| seconds(p, bytes))
            .map_or("—".to_string(), |s| {
                format!("{:.2} ({:.1} µs)", bandwidth(s, bytes), s * 1e6)
            });
        let size = if bytes >= 1 << 20 {
            format!("{} MiB", bytes >> 20)
        } else {
            format!("{} KiB", bytes >> 10)
        };
        table.push_str(&format!(
            "| {size} | {:.2} ({:.1} µs) | {:.2} ({:.1} µs) | {:.2}x | {:.2} ({:.1} µs) | {py} |\n",
            bandwidth(raw, bytes),
            raw * 1e6,
            bandwidth(pt, bytes),
            pt * 1e6,
            raw / pt,
            bandwidth(fresh, bytes),
            fresh * 1e6,
        ));
    }
    println!("{table}");
    let out = workspace().join("target/bench");
    if std::fs::create_dir_all(&out).is_ok() {
        let _ = std::fs::write(out.join("allreduce.md"), &table);
        println!("written to {}", out.join("allreduce.md").display());
    }
}
