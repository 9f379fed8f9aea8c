//! The collectives under a real MPI (Open MPI): each test runs this test binary again under
//! `mpirun -np N --oversubscribe` on loopback, with `POLYTENSOR_MPI_CHILD` set; every rank
//! runs the test's checks, and the parent asserts that every rank passed within a time
//! limit (a hang is a failure, never a stuck CI).
//!
//! Without `mpirun` the tests say why and skip, unless `POLYTENSOR_REQUIRE` names `mpi`
//! (as CI does): then they fail.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use polytensor_core::{DataType, Device, Tensor};
use polytensor_distributed::{Communicator, Mpi, Reduction};

/// How long one `mpirun` may take before it counts as hung.
const LIMIT: Duration = Duration::from_secs(180);

/// Whether this process is a rank of a test's `mpirun`.
fn child() -> bool {
    std::env::var_os("POLYTENSOR_MPI_CHILD").is_some()
}

/// Run test `name` of this binary on `np` ranks and assert that all of them passed.
fn mpirun(np: usize, name: &str) {
    let required = std::env::var("POLYTENSOR_REQUIRE")
        .unwrap_or_default()
        .split(',')
        .any(|b| b.trim() == "mpi");
    if Command::new("mpirun").arg("--version").output().is_err() {
        assert!(
            !required,
            "POLYTENSOR_REQUIRE names mpi, but there is no mpirun"
        );
        eprintln!("skipped: no mpirun (Debian: apt install openmpi-bin libopenmpi-dev)");
        return;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let mut run = Command::new("mpirun")
        .args(["--oversubscribe", "--mca", "btl", "self,tcp", "-np"])
        .arg(np.to_string())
        .arg(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env("POLYTENSOR_MPI_CHILD", "1")
        // Open MPI refuses root unless told (CI containers run as root).
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .spawn()
        .expect("mpirun starts");
    let start = Instant::now();
    loop {
        if let Some(status) = run.try_wait().expect("mpirun's status") {
            assert!(status.success(), "{name} under mpirun -np {np}: {status}");
            return;
        }
        if start.elapsed() > LIMIT {
            let _ = run.kill();
            panic!("{name} under mpirun -np {np} did not finish in {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn device() -> Arc<dyn Device> {
    polytensor_cpu::CpuDevice::shared()
}

/// Element `i` of rank `rank`'s tensor: small integers, so every sum is exact.
fn value(rank: usize, i: usize) -> f64 {
    ((rank * 7 + i * 3) % 11) as f64 - 5.0
}

fn local(world: &Communicator, dtype: DataType, count: usize) -> Tensor {
    let values: Vec<f64> = (0..count).map(|i| value(world.rank(), i)).collect();
    Tensor::from_slice(&values, [count], &device())
        .unwrap()
        .cast(dtype)
        .unwrap()
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

fn collectives() {
    let mpi = Mpi::init().unwrap();
    let world = mpi.world();
    let size = world.size();
    for dtype in [
        DataType::Float,
        DataType::Double,
        DataType::Half,
        DataType::BFloat16,
        DataType::Int32,
        DataType::Int64,
        DataType::Int8,
    ] {
        for count in [0usize, 1, 7, 1 << 12] {
            let x = local(&world, dtype, count);
            for reduction in Reduction::ALL {
                let at = format!("all_reduce({}) of {count} {dtype}", reduction.name());
                let result = world.all_reduce(&x, reduction);
                if reduction == Reduction::Mean && !dtype.is_float() {
                    assert!(result.is_err(), "{at}");
                    continue;
                }
                let got = result.unwrap().cast(DataType::Double).unwrap();
                let got = got.to_vec::<f64>().unwrap();
                for (i, &g) in got.iter().enumerate() {
                    let want = expected(reduction, size, i);
                    // Products of four small integers stay exact in every dtype but int8
                    // (which wraps) and the 16-bit floats (which round); means divide.
                    let exact = !(reduction == Reduction::Prod
                        && matches!(dtype, DataType::Int8 | DataType::Half | DataType::BFloat16));
                    if exact {
                        let tolerance = if dtype.is_float() {
                            1e-2 * want.abs().max(1.0)
                        } else {
                            0.0
                        };
                        assert!((g - want).abs() <= tolerance, "{at}[{i}]: {g} vs {want}");
                    }
                }
            }
        }
        // Broadcast from the last rank: every rank gets its tensor.
        let x = local(&world, dtype, 5);
        let from_last = world.broadcast(&x, size - 1).unwrap();
        let want: Vec<f64> = (0..5).map(|i| value(size - 1, i)).collect();
        let got = from_last
            .cast(DataType::Double)
            .unwrap()
            .to_vec::<f64>()
            .unwrap();
        assert_eq!(got, want, "broadcast of {dtype}");
        // All-gather along the first dim, in rank order.
        let x = local(&world, dtype, 6).reshape([3, 2]).unwrap();
        let gathered = world.all_gather(&x).unwrap();
        assert_eq!(gathered.dims().as_slice(), &[3 * size, 2]);
        let got = gathered
            .cast(DataType::Double)
            .unwrap()
            .to_vec::<f64>()
            .unwrap();
        let want: Vec<f64> = (0..size)
            .flat_map(|r| (0..6).map(move |i| value(r, i)))
            .collect();
        assert_eq!(got, want, "all_gather of {dtype}");
    }
    // A scalar gathers into a vector; bools and complex numbers move as bytes.
    let flag = Tensor::scalar(world.rank().is_multiple_of(2), &device()).unwrap();
    assert_eq!(world.all_gather(&flag).unwrap().dims().as_slice(), &[size]);
    // 64 MiB of f32, summed.
    let big = Tensor::full([16 << 20], 1.0f32, DataType::Float, &device()).unwrap();
    let sum = world
        .all_reduce(&big, Reduction::Sum)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert!(sum.iter().all(|&v| v == size as f32));
}

fn mismatches_are_errors_on_every_rank() {
    let mpi = Mpi::init().unwrap();
    let world = mpi.world();
    // Rank 0 passes 2 elements, the others 3: every rank gets the error, none hangs.
    let count = if world.rank() == 0 { 2 } else { 3 };
    let x = local(&world, DataType::Float, count);
    let message = world
        .all_reduce(&x, Reduction::Sum)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("rank 1 passed all_reduce(0) of float32 [3]"),
        "{message}"
    );
    // Another dtype on one rank.
    let dtype = if world.rank() == 1 {
        DataType::Double
    } else {
        DataType::Float
    };
    let message = world
        .broadcast(&local(&world, dtype, 4), 0)
        .unwrap_err()
        .to_string();
    assert!(message.contains("broadcast"), "{message}");
    // A call every rank refuses alike, after agreeing on it.
    let strings = Tensor::from_strings(vec![b"a".to_vec()], [1], &device()).unwrap();
    assert!(world.all_gather(&strings).is_err());
    assert!(world
        .broadcast(&local(&world, DataType::Float, 1), world.size())
        .is_err());
    // And the communicator still works after them.
    let ok = world
        .all_reduce(&local(&world, DataType::Int32, 3), Reduction::Max)
        .unwrap();
    assert_eq!(ok.dims().as_slice(), &[3]);
}

/// One data-parallel step: each rank's gradient, all-reduced to the mean, updates one copy
/// of the weights per rank; the copies stay identical.
fn data_parallel_step() {
    let mpi = Mpi::init().unwrap();
    let world = mpi.world();
    let weights = Tensor::from_slice(&[0.5f32, -1.0, 2.0, 0.25], [4], &device()).unwrap();
    let gradient = local(&world, DataType::Float, 4);
    let mean = world.all_reduce(&gradient, Reduction::Mean).unwrap();
    let step = Tensor::scalar(0.1f32, &device()).unwrap();
    let updated = weights
        .binary(
            polytensor_core::BinaryOp::Sub,
            &mean.binary(polytensor_core::BinaryOp::Mul, &step).unwrap(),
        )
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
}

#[test]
fn collectives_on_2_ranks() {
    if child() {
        collectives();
    } else {
        mpirun(2, "collectives_on_2_ranks");
    }
}

#[test]
fn collectives_on_4_ranks() {
    if child() {
        collectives();
    } else {
        mpirun(4, "collectives_on_4_ranks");
    }
}

#[test]
fn mismatched_calls_fail_on_every_rank() {
    if child() {
        mismatches_are_errors_on_every_rank();
    } else {
        mpirun(3, "mismatched_calls_fail_on_every_rank");
    }
}

#[test]
fn a_data_parallel_step_keeps_the_ranks_identical() {
    if child() {
        data_parallel_step();
    } else {
        mpirun(4, "a_data_parallel_step_keeps_the_ranks_identical");
    }
}
