//! The collectives under a real MPI (Open MPI): each test runs this test binary again under
//! `mpirun -np N --oversubscribe` on loopback, with `POLYTENSOR_MPI_CHILD` set; every rank
//! runs the test's checks and prints a line when they passed, and the parent asserts that
//! every rank printed it within a time limit (a hang is a failure, never a stuck CI).
//!
//! Without `mpirun` the tests say why and skip, unless `POLYTENSOR_REQUIRE` names `mpi`
//! (as CI does): then they fail.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use polytensor_core::{BinaryOp, DataType, Device, Tensor};
use polytensor_distributed::{Communicator, Mpi, Reduction};

/// How long one `mpirun` may take before it counts as hung.
const LIMIT: Duration = Duration::from_secs(240);

/// Whether this process is a rank of a test's `mpirun`.
fn child() -> bool {
    std::env::var_os("POLYTENSOR_MPI_CHILD").is_some()
}

/// The backends `POLYTENSOR_REQUIRE` names.
fn required(name: &str) -> bool {
    std::env::var("POLYTENSOR_REQUIRE")
        .unwrap_or_default()
        .split(',')
        .any(|b| b.trim() == name)
}

/// How a test's ranks are expected to end.
#[derive(PartialEq)]
enum Ending {
    /// Every rank passes and mpirun succeeds.
    Clean,
    /// The ranks in `0..survivors` pass; the others die on purpose, so mpirun fails.
    Survivors(usize),
}

/// Run test `name` of this binary on `np` ranks (with `extra` mpirun arguments) and assert
/// that its ranks passed as `ending` says.
fn mpirun(np: usize, name: &str, extra: &[&str], ending: Ending) {
    mpirun_with(np, name, extra, &[], ending)
}

/// [`mpirun`] with variables `env` set for the ranks.
fn mpirun_with(np: usize, name: &str, extra: &[&str], env: &[(&str, String)], ending: Ending) {
    if Command::new("mpirun").arg("--version").output().is_err() {
        assert!(
            !required("mpi"),
            "POLYTENSOR_REQUIRE names mpi, but there is no mpirun"
        );
        eprintln!("skipped: no mpirun (Debian: apt install openmpi-bin libopenmpi-dev)");
        return;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let mut run = Command::new("mpirun")
        .args(["--oversubscribe", "--mca", "btl", "self,tcp"])
        .args(extra)
        .arg("-np")
        .arg(np.to_string())
        .arg(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env("POLYTENSOR_MPI_CHILD", "1")
        // Open MPI refuses root unless told (CI containers run as root).
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::piped())
        .spawn()
        .expect("mpirun starts");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = run.try_wait().expect("mpirun's status") {
            break status;
        }
        if start.elapsed() > LIMIT {
            let _ = run.kill();
            panic!("{name} under mpirun -np {np} did not finish in {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut run.stdout.take().expect("piped"), &mut stdout)
        .expect("mpirun's output");
    print!("{stdout}");
    let passing = match ending {
        Ending::Clean => {
            assert!(status.success(), "{name} under mpirun -np {np}: {status}");
            np
        }
        Ending::Survivors(n) => n,
    };
    for rank in 0..passing {
        assert!(
            stdout.contains(&passed(rank)),
            "rank {rank} of {name} did not pass under mpirun -np {np}"
        );
    }
}

/// The line rank `rank` prints when its checks passed.
fn passed(rank: usize) -> String {
    format!("polytensor-mpi: rank {rank} passed")
}

/// Run `checks` as a rank and say that it passed.
fn as_rank(checks: impl FnOnce(&Communicator)) {
    let mpi = Mpi::init().unwrap();
    let world = mpi.world().unwrap();
    checks(&world);
    println!("{}", passed(world.rank()));
}

fn cpu() -> Arc<dyn Device> {
    polytensor::device("cpu:0").unwrap()
}

/// The devices to run on: the CPU, and OpenCL and wgpu where present (required where
/// `POLYTENSOR_REQUIRE` names them).
fn devices() -> Vec<Arc<dyn Device>> {
    polytensor::devices()
        .iter()
        .filter_map(|entry| {
            if entry.device().is_none() {
                assert!(!required(&entry.name), "POLYTENSOR_REQUIRE names {entry}");
            }
            entry.device().cloned()
        })
        .filter(|d| !d.name().starts_with("cuda"))
        .collect()
}

/// Element `i` of rank `rank`'s tensor: small integers, so every sum is exact.
fn value(rank: usize, i: usize) -> f64 {
    ((rank * 7 + i * 3) % 11) as f64 - 5.0
}

fn local(rank: usize, dtype: DataType, count: usize, device: &Arc<dyn Device>) -> Tensor {
    let values: Vec<f64> = (0..count).map(|i| value(rank, i)).collect();
    Tensor::from_slice(&values, [count], &cpu())
        .unwrap()
        .cast(dtype)
        .unwrap()
        .to_device(device)
        .unwrap()
}

fn as_f64(t: &Tensor) -> Vec<f64> {
    t.cast(DataType::Double).unwrap().to_vec::<f64>().unwrap()
}

/// What `reduction` gives for element `i` over every rank's values.
fn expected(reduction: Reduction, size: usize, i: usize) -> f64 {
    let all = (0..size).map(|r| value(r, i));
    match reduction {
        Reduction::Sum => all.sum(),
        Reduction::Prod => all.product(),
        Reduction::Min => all.fold(f64::INFINITY, f64::min),
        Reduction::Max => all.fold(f64::NEG_INFINITY, f64::max),
        Reduction::Mean => all.sum::<f64>() / size as f64,
    }
}

/// Check `got` against `reduction` of the ranks' values at `offset + i`.
fn check_reduced(got: &Tensor, reduction: Reduction, size: usize, offset: usize, at: &str) {
    let dtype = got.dtype();
    // Products of four small integers stay exact in every dtype but int8 (which wraps)
    // and the 16-bit floats (which round); means divide.
    if reduction == Reduction::Prod
        && matches!(dtype, DataType::Int8 | DataType::Half | DataType::BFloat16)
    {
        return;
    }
    for (i, g) in as_f64(got).into_iter().enumerate() {
        let want = expected(reduction, size, offset + i);
        let tolerance = if dtype.is_float() {
            1e-2 * want.abs().max(1.0)
        } else {
            0.0
        };
        assert!((g - want).abs() <= tolerance, "{at}[{i}]: {g} vs {want}");
    }
}

const DTYPES: [DataType; 7] = [
    DataType::Float,
    DataType::Double,
    DataType::Half,
    DataType::BFloat16,
    DataType::Int32,
    DataType::Int64,
    DataType::Int8,
];

/// Every collective, on `device`, for every dtype and sizes 0, 1, 7 and 4096.
fn every_collective(world: &Communicator, device: &Arc<dyn Device>, dtypes: &[DataType]) {
    let (rank, size) = (world.rank(), world.size());
    for &dtype in dtypes {
        for count in [0usize, 1, 7, 1 << 12] {
            let x = local(rank, dtype, count, device);
            for reduction in Reduction::ALL {
                let at = format!(
                    "all_reduce({}) of {count} {dtype} on {}",
                    reduction.name(),
                    device.name()
                );
                let result = world.all_reduce(&x, reduction);
                if reduction == Reduction::Mean && !dtype.is_float() {
                    assert!(result.is_err(), "{at}");
                    continue;
                }
                let got = result.unwrap();
                assert_eq!(got.device().name(), device.name(), "{at}");
                assert_eq!((got.dtype(), got.dims()), (dtype, x.dims()), "{at}");
                check_reduced(&got, reduction, size, 0, &at);
            }
            // Reduce-scatter: rank r gets chunk r of the sum.
            let scattered = local(rank, dtype, count * size, device);
            let got = world.reduce_scatter(&scattered, Reduction::Sum).unwrap();
            assert_eq!(got.dims().as_slice(), &[count]);
            check_reduced(&got, Reduction::Sum, size, rank * count, "reduce_scatter");
        }
        // Into a tensor the caller owns, reused: MPI writes into it (or its staging).
        let x = local(rank, dtype, 9, device);
        let mut out = Tensor::zeros([9], dtype, device).unwrap();
        for reduction in [Reduction::Sum, Reduction::Max, Reduction::Mean] {
            if reduction == Reduction::Mean && !dtype.is_float() {
                continue;
            }
            out = world.all_reduce_into(&x, out, reduction).unwrap();
            assert_eq!(out.device().name(), device.name());
            check_reduced(
                &out,
                reduction,
                size,
                0,
                &format!("all_reduce_into of {dtype}"),
            );
        }
        // Broadcast from the last rank: every rank gets its tensor.
        let x = local(rank, dtype, 5, device);
        let from_last = world.broadcast(&x, size - 1).unwrap();
        let want: Vec<f64> = (0..5).map(|i| value(size - 1, i)).collect();
        assert_eq!(as_f64(&from_last), want, "broadcast of {dtype}");
        // The same as TensorFlow's send/recv pair: rank 1 sends, the others receive.
        let got = if rank == 1 {
            world.broadcast_send(&x).unwrap()
        } else {
            world.broadcast_recv(x.shape(), dtype, device).unwrap()
        };
        let want: Vec<f64> = (0..5).map(|i| value(1, i)).collect();
        assert_eq!(as_f64(&got), want, "broadcast_send/recv of {dtype}");
        // All-gather along the first dim, in rank order.
        let x = local(rank, dtype, 6, device).reshape([3, 2]).unwrap();
        let gathered = world.all_gather(&x).unwrap();
        assert_eq!(gathered.dims().as_slice(), &[3 * size, 2]);
        let want: Vec<f64> = (0..size)
            .flat_map(|r| (0..6).map(move |i| value(r, i)))
            .collect();
        assert_eq!(as_f64(&gathered), want, "all_gather of {dtype}");
        // All-to-all: chunk j of rank r lands as chunk r on rank j.
        let x = local(rank, dtype, 2 * size, device)
            .reshape([size, 2])
            .unwrap();
        let exchanged = world.all_to_all(&x).unwrap();
        let want: Vec<f64> = (0..size)
            .flat_map(|r| (0..2).map(move |i| value(r, rank * 2 + i)))
            .collect();
        assert_eq!(as_f64(&exchanged), want, "all_to_all of {dtype}");
        // Send and receive around a ring; the receiver learns dtype and shape.
        let x = local(rank, dtype, 4, device).reshape([2, 2]).unwrap();
        let next = (rank + 1) % size;
        let prev = (rank + size - 1) % size;
        let sending = world.start_send(&x, next, 7).unwrap();
        let got = world.recv(prev, 7, device).unwrap();
        sending.wait().unwrap();
        assert_eq!(
            (got.dtype(), got.dims().as_slice()),
            (dtype, &[2usize, 2][..])
        );
        let want: Vec<f64> = (0..4).map(|i| value(prev, i)).collect();
        assert_eq!(as_f64(&got), want, "send/recv of {dtype}");
    }
}

fn collectives(world: &Communicator) {
    let size = world.size();
    every_collective(world, &cpu(), &DTYPES);
    // A scalar gathers into a vector; bools move as bytes.
    let flag = Tensor::scalar(world.rank().is_multiple_of(2), &cpu()).unwrap();
    assert_eq!(world.all_gather(&flag).unwrap().dims().as_slice(), &[size]);
    // In place, and non-blocking: two started, waited for in the other order.
    let mut x = local(world.rank(), DataType::Float, 7, &cpu());
    world.all_reduce_in_place(&mut x, Reduction::Max).unwrap();
    check_reduced(&x, Reduction::Max, size, 0, "in place");
    let a = local(world.rank(), DataType::Int32, 9, &cpu());
    let first = world.start_all_reduce(&a, Reduction::Sum).unwrap();
    let second = world.start_all_gather(&a).unwrap();
    let gathered = second.wait().unwrap();
    assert_eq!(gathered.dims().as_slice(), &[9 * size]);
    check_reduced(&first.wait().unwrap(), Reduction::Sum, size, 0, "started");
    // Sub-communicators: even and odd ranks reduce apart.
    let parity = (world.rank() % 2) as u32;
    let half = world.split(Some(parity), 0).unwrap().unwrap();
    assert_eq!(
        half.size(),
        size.div_ceil(2) - (parity as usize) * (size % 2)
    );
    let sum = half
        .all_reduce(
            &Tensor::scalar(world.rank() as i64, &cpu()).unwrap(),
            Reduction::Sum,
        )
        .unwrap()
        .item::<i64>()
        .unwrap();
    let want: i64 = (0..size as i64)
        .filter(|r| r % 2 == i64::from(parity))
        .sum();
    assert_eq!(sum, want, "the sum over ranks of parity {parity}");
    assert!(world.split(None, 0).unwrap().is_none());
    world.barrier().unwrap();
    // 64 MiB of f32, summed.
    let big = Tensor::full([16 << 20], 1.0f32, DataType::Float, &cpu()).unwrap();
    let sum = world.all_reduce(&big, Reduction::Sum).unwrap();
    assert!(sum
        .as_slice::<f32>()
        .unwrap()
        .iter()
        .all(|&v| v == size as f32));
}

#[test]
fn collectives_on_2_ranks() {
    if child() {
        as_rank(collectives);
    } else {
        mpirun(2, "collectives_on_2_ranks", &[], Ending::Clean);
    }
}

#[test]
fn collectives_on_4_ranks() {
    if child() {
        as_rank(collectives);
    } else {
        mpirun(4, "collectives_on_4_ranks", &[], Ending::Clean);
    }
}

/// Every collective on OpenCL and wgpu tensors (staged through host memory).
#[test]
fn collectives_on_device_tensors() {
    if child() {
        as_rank(|world| {
            for device in devices().iter().filter(|d| !d.name().starts_with("cpu")) {
                println!("rank {}: collectives on {}", world.rank(), device.name());
                every_collective(
                    world,
                    device,
                    &[DataType::Float, DataType::Int32, DataType::Half],
                );
            }
        });
    } else {
        mpirun(2, "collectives_on_device_tensors", &[], Ending::Clean);
    }
}

#[test]
fn mismatched_calls_fail_on_every_rank() {
    if child() {
        as_rank(|world| {
            let device = cpu();
            let rank = world.rank();
            // Rank 0 passes 2 elements, the others 3: every rank gets the error.
            let count = if rank == 0 { 2 } else { 3 };
            let message = world
                .all_reduce(
                    &local(rank, DataType::Float, count, &device),
                    Reduction::Sum,
                )
                .unwrap_err()
                .to_string();
            assert!(
                message.contains("rank 1 passed all_reduce(0) of float32 [3]"),
                "{message}"
            );
            // Another dtype on one rank.
            let dtype = if rank == 1 {
                DataType::Double
            } else {
                DataType::Float
            };
            let message = world
                .broadcast(&local(rank, dtype, 4, &device), 0)
                .unwrap_err()
                .to_string();
            assert!(message.contains("broadcast"), "{message}");
            // Calls every rank refuses alike, after agreeing on them.
            let strings = Tensor::from_strings(vec![b"a".to_vec()], [1], &device).unwrap();
            assert!(world.all_gather(&strings).is_err());
            let x = local(rank, DataType::Float, 1, &device);
            assert!(world.broadcast(&x, world.size()).is_err());
            assert!(world.reduce_scatter(&x, Reduction::Sum).is_err());
            assert!(world.all_to_all(&x).is_err());
            // Two senders, or none.
            let two = if rank < 2 {
                world.broadcast_send(&x)
            } else {
                world.broadcast_recv(x.shape(), x.dtype(), &device)
            };
            assert!(two.unwrap_err().to_string().contains("all sent"));
            let none = world.broadcast_recv(x.shape(), x.dtype(), &device);
            assert!(none.unwrap_err().to_string().contains("no rank"));
            // An output of the wrong shape, or shared, on one rank: every rank fails, that
            // one with its own reason.
            let x = local(rank, DataType::Float, 4, &device);
            let out =
                Tensor::zeros([if rank == 1 { 5 } else { 4 }], DataType::Float, &device).unwrap();
            let message = world
                .all_reduce_into(&x, out, Reduction::Sum)
                .unwrap_err()
                .to_string();
            if rank == 1 {
                assert!(message.contains("the output is float32 [5]"), "{message}");
            } else {
                assert!(
                    message.contains("rank 1 passed a call it refused"),
                    "{message}"
                );
            }
            let out = Tensor::zeros([4], DataType::Float, &device).unwrap();
            let shared = out.clone();
            let message = world
                .all_reduce_into(&x, out, Reduction::Sum)
                .unwrap_err()
                .to_string();
            assert!(
                message.contains("shares") || message.contains("refused"),
                "{message}"
            );
            drop(shared);
            let x = local(rank, DataType::Float, 1, &device);
            // Bad peers and tags are refused before anything moves.
            assert!(world.send(&x, 99, 0).is_err());
            assert!(world
                .send(&x, 0, polytensor_distributed::MAX_TAG + 1)
                .is_err());
            // And the communicator still works after them.
            let ok = world
                .all_reduce(&local(rank, DataType::Int32, 3, &device), Reduction::Max)
                .unwrap();
            assert_eq!(ok.dims().as_slice(), &[3]);
        });
    } else {
        mpirun(3, "mismatched_calls_fail_on_every_rank", &[], Ending::Clean);
    }
}

/// A rank that never makes the call: the others' call is an `Err` once their timeout
/// passes, and so is every later call (MPI's state is unknown).
#[test]
fn a_missing_rank_is_an_error_within_the_timeout() {
    if child() {
        let mpi = Mpi::init().unwrap();
        let mut world = mpi.world().unwrap();
        world.set_timeout(Duration::from_secs(3));
        if world.rank() == 2 {
            println!("{}", passed(2));
            return;
        }
        let start = Instant::now();
        let x = local(world.rank(), DataType::Float, 4, &cpu());
        let message = world
            .all_reduce(&x, Reduction::Sum)
            .unwrap_err()
            .to_string();
        assert!(message.contains("did not complete within 3s"), "{message}");
        assert!(start.elapsed() < Duration::from_secs(30));
        let later = world.barrier().unwrap_err().to_string();
        assert!(later.contains("broken"), "{later}");
        println!("{}", passed(world.rank()));
    } else {
        mpirun(
            3,
            "a_missing_rank_is_an_error_within_the_timeout",
            &[],
            Ending::Survivors(3),
        );
    }
}

/// A rank that dies mid-run: with `--enable-recovery` mpirun lets the others run on, and
/// their collective is an `Err` within their timeout (without it, mpirun ends the job).
#[test]
fn a_dead_rank_is_an_error_on_the_others() {
    if child() {
        let mpi = Mpi::init().unwrap();
        let mut world = mpi.world().unwrap();
        world.set_timeout(Duration::from_secs(3));
        let x = local(world.rank(), DataType::Float, 1 << 16, &cpu());
        world.all_reduce(&x, Reduction::Sum).unwrap();
        if world.rank() == 2 {
            std::process::exit(3);
        }
        std::thread::sleep(Duration::from_millis(500));
        let start = Instant::now();
        let message = world
            .all_reduce(&x, Reduction::Sum)
            .unwrap_err()
            .to_string();
        assert!(start.elapsed() < Duration::from_secs(30), "{message}");
        println!("{}", passed(world.rank()));
    } else {
        mpirun(
            3,
            "a_dead_rank_is_an_error_on_the_others",
            &["--enable-recovery"],
            Ending::Survivors(2),
        );
    }
}

/// One data-parallel step: each rank's gradient, all-reduced to the mean, updates one copy
/// of the weights per rank; the copies stay identical.
#[test]
fn a_data_parallel_step_keeps_the_ranks_identical() {
    if child() {
        as_rank(|world| {
            let device = cpu();
            let weights = Tensor::from_slice(&[0.5f32, -1.0, 2.0, 0.25], [4], &device).unwrap();
            let gradient = local(world.rank(), DataType::Float, 4, &device);
            let mean = world.all_reduce(&gradient, Reduction::Mean).unwrap();
            let step = Tensor::scalar(0.1f32, &device).unwrap();
            let updated = weights
                .binary(BinaryOp::Sub, &mean.binary(BinaryOp::Mul, &step).unwrap())
                .unwrap();
            let everyone = world.all_gather(&updated).unwrap().to_vec::<f32>().unwrap();
            let mine = updated.to_vec::<f32>().unwrap();
            for (r, copy) in everyone.chunks(4).enumerate() {
                assert_eq!(
                    copy,
                    mine.as_slice(),
                    "rank {r}'s weights differ from rank {}'s",
                    world.rank()
                );
            }
        });
    } else {
        mpirun(
            4,
            "a_data_parallel_step_keeps_the_ranks_identical",
            &[],
            Ending::Clean,
        );
    }
}

/// TensorFlow's Python (`POLYTENSOR_TF_PYTHON`, else the workspace's `target/tf-venv`), if
/// it imports tensorflow; else `None` after saying why, or a panic where
/// `POLYTENSOR_REQUIRE_TENSORFLOW` is set.
fn tensorflow() -> Option<std::path::PathBuf> {
    let python = std::env::var_os("POLYTENSOR_TF_PYTHON").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tf-venv/bin/python"),
        std::path::PathBuf::from,
    );
    let imports = Command::new(&python)
        .args(["-c", "import tensorflow"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !imports {
        assert!(
            std::env::var_os("POLYTENSOR_REQUIRE_TENSORFLOW").is_none(),
            "POLYTENSOR_REQUIRE_TENSORFLOW is set, but {} cannot import tensorflow",
            python.display()
        );
        eprintln!("skipped: {} cannot import tensorflow", python.display());
        return None;
    }
    Some(python)
}

/// The GraphDef TensorFlow wrote with its collective ops (`tests/python/tf_collective_graph.py`
/// of the workspace), run by every rank through the world communicator: the reductions and
/// the gather span the ranks, and rank 0's `CollectiveBcastSendV2` reaches the others'
/// `CollectiveBcastRecvV2`.
#[test]
fn a_tensorflow_graph_with_collective_ops_spans_the_ranks() {
    use polytensor::graph::{Graph, Session};
    const GRAPH: &str = "POLYTENSOR_COLLECTIVE_GRAPH";
    if child() {
        as_rank(|world| {
            let path = std::env::var(GRAPH).unwrap();
            let graph = Graph::from_graph_def_bytes(&std::fs::read(path).unwrap()).unwrap();
            let (rank, size) = (world.rank(), world.size());
            for device in devices() {
                let session =
                    Session::new(&graph, device.clone()).with_collectives(Arc::new(world.clone()));
                let x_value = local(rank, DataType::Float, 6, &device)
                    .reshape([2, 3])
                    .unwrap();
                let group_size = Tensor::scalar(size as i32, &device).unwrap();
                let feeds = [
                    (graph.tensor("x").unwrap(), &x_value),
                    (graph.tensor("group_size").unwrap(), &group_size),
                ];
                let feeds: Vec<_> = feeds.iter().map(|(o, t)| (o, *t)).collect();
                let run = |name: &str| {
                    let fetch = graph.tensor(name).unwrap();
                    let got = session.run(&feeds, &[&fetch], &[]).unwrap();
                    assert_eq!(got[0].device().name(), device.name(), "{name}");
                    as_f64(&got[0])
                };
                for (name, reduction) in [
                    ("sum", Reduction::Sum),
                    ("mean", Reduction::Mean),
                    ("max", Reduction::Max),
                ] {
                    // float32's rounding of the exact value.
                    let want: Vec<f64> = (0..6)
                        .map(|i| expected(reduction, size, i) as f32 as f64)
                        .collect();
                    assert_eq!(run(name), want, "{name} on {}", device.name());
                }
                let want: Vec<f64> = (0..size)
                    .flat_map(|r| (0..6).map(move |i| value(r, i)))
                    .collect();
                assert_eq!(run("gathered"), want, "gathered on {}", device.name());
                // Rank 0 sends 2x, the others receive it.
                let got = run(if rank == 0 { "sent" } else { "received" });
                let want: Vec<f64> = (0..6).map(|i| 2.0 * value(0, i)).collect();
                assert_eq!(got, want, "broadcast on {}", device.name());
            }
        });
    } else {
        let Some(python) = tensorflow() else {
            return;
        };
        let dir = std::env::temp_dir().join(format!("polytensor-mpi-graph-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("collective.pb");
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/python/tf_collective_graph.py");
        let made = Command::new(python)
            .arg(script)
            .arg(&path)
            .env("TF_CPP_MIN_LOG_LEVEL", "2")
            .output()
            .unwrap();
        assert!(
            made.status.success(),
            "{}",
            String::from_utf8_lossy(&made.stderr)
        );
        mpirun_with(
            3,
            "a_tensorflow_graph_with_collective_ops_spans_the_ranks",
            &[],
            &[(GRAPH, path.display().to_string())],
            Ending::Clean,
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
