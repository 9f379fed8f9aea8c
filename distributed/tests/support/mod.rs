//! What the MPI and NCCL tests share: running this test binary again under `mpirun`
//! (each rank prints a line when its checks passed; the parent asserts every rank did
//! within a time limit), the ranks' values and their expected reductions, and the
//! collectives both communicators run alike, checked the same way.
// Each test binary uses its own part of this module.
#![allow(dead_code)]

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use polytensor_core::collective::Collectives;
use polytensor_core::{DataType, Device, Result, Tensor};
use polytensor_distributed::{Communicator, Mpi, Reduction};

/// How long one `mpirun` may take before it counts as hung.
pub const LIMIT: Duration = Duration::from_secs(240);

/// Whether this process is a rank of a test's `mpirun`.
pub fn child() -> bool {
    std::env::var_os("POLYTENSOR_MPI_CHILD").is_some()
}

/// The backends `POLYTENSOR_REQUIRE` names.
pub fn required(name: &str) -> bool {
    std::env::var("POLYTENSOR_REQUIRE")
        .unwrap_or_default()
        .split(',')
        .any(|b| b.trim() == name)
}

/// How a test's ranks are expected to end.
#[derive(PartialEq)]
pub enum Ending {
    /// Every rank passes and mpirun succeeds.
    Clean,
    /// The ranks in `0..survivors` pass; the others die on purpose, so mpirun fails.
    Survivors(usize),
}

/// Run test `name` of this binary on `np` ranks (with `extra` mpirun arguments) and assert
/// that its ranks passed as `ending` says.
pub fn mpirun(np: usize, name: &str, extra: &[&str], ending: Ending) {
    mpirun_with(np, name, extra, &[], ending)
}

/// [`mpirun`] with variables `env` set for the ranks.
pub fn mpirun_with(np: usize, name: &str, extra: &[&str], env: &[(&str, String)], ending: Ending) {
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
pub fn passed(rank: usize) -> String {
    format!("polytensor-mpi: rank {rank} passed")
}

/// Run `checks` as a rank and say that it passed.
pub fn as_rank(checks: impl FnOnce(&Communicator)) {
    let mpi = Mpi::init().unwrap();
    let world = mpi.world().unwrap();
    checks(&world);
    println!("{}", passed(world.rank()));
}

/// The CPU device.
pub fn cpu() -> Arc<dyn Device> {
    polytensor::device("cpu:0").unwrap()
}

/// Element `i` of rank `rank`'s tensor: small integers, so every sum is exact.
pub fn value(rank: usize, i: usize) -> f64 {
    ((rank * 7 + i * 3) % 11) as f64 - 5.0
}

/// Rank `rank`'s vector of `count` values, as `dtype` on `device`.
pub fn local(rank: usize, dtype: DataType, count: usize, device: &Arc<dyn Device>) -> Tensor {
    let values: Vec<f64> = (0..count).map(|i| value(rank, i)).collect();
    Tensor::from_slice(&values, [count], &cpu())
        .unwrap()
        .cast(dtype)
        .unwrap()
        .to_device(device)
        .unwrap()
}

/// `t`'s elements as f64 (a complex number's real part).
pub fn as_f64(t: &Tensor) -> Vec<f64> {
    t.cast(DataType::Double).unwrap().to_vec::<f64>().unwrap()
}

/// What `reduction` gives for element `i` over every rank's values.
pub fn expected(reduction: Reduction, size: usize, i: usize) -> f64 {
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
pub fn check_reduced(got: &Tensor, reduction: Reduction, size: usize, offset: usize, at: &str) {
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

/// The dtypes every collective is tested on.
pub const DTYPES: [DataType; 7] = [
    DataType::Float,
    DataType::Double,
    DataType::Half,
    DataType::BFloat16,
    DataType::Int32,
    DataType::Int64,
    DataType::Int8,
];

/// The collectives an MPI and an NCCL communicator both run, beyond [`Collectives`].
pub trait Group: Collectives {
    /// `reduce_scatter`.
    fn reduce_scatter(&self, tensor: &Tensor, reduction: Reduction) -> Result<Tensor>;
    /// `broadcast` from `root`.
    fn broadcast(&self, tensor: &Tensor, root: usize) -> Result<Tensor>;
    /// `all_to_all`.
    fn all_to_all(&self, tensor: &Tensor) -> Result<Tensor>;
}

/// [`Group`] for a communicator type with those methods of its own.
macro_rules! group {
    ($communicator:ty) => {
        impl Group for $communicator {
            fn reduce_scatter(&self, tensor: &Tensor, reduction: Reduction) -> Result<Tensor> {
                <$communicator>::reduce_scatter(self, tensor, reduction)
            }
            fn broadcast(&self, tensor: &Tensor, root: usize) -> Result<Tensor> {
                <$communicator>::broadcast(self, tensor, root)
            }
            fn all_to_all(&self, tensor: &Tensor) -> Result<Tensor> {
                <$communicator>::all_to_all(self, tensor)
            }
        }
    };
}

group!(Communicator);
#[cfg(feature = "nccl")]
group!(polytensor_distributed::nccl::NcclCommunicator);

/// The collectives every communicator runs, on `device`, for `dtype`: all-reduce by every
/// reduction and reduce-scatter at sizes 0, 1, 7 and 4096, broadcast from a rank and by
/// role, all-gather and all-to-all, each checked against the ranks' values.
pub fn shared_collectives(group: &impl Group, device: &Arc<dyn Device>, dtype: DataType) {
    let (rank, size) = (group.rank(), group.size());
    for count in [0usize, 1, 7, 1 << 12] {
        let x = local(rank, dtype, count, device);
        for reduction in Reduction::ALL {
            let at = format!(
                "all_reduce({}) of {count} {dtype} on {}",
                reduction.name(),
                device.name()
            );
            let result = group.all_reduce(&x, reduction);
            if reduction == Reduction::Mean && !dtype.is_float() && !dtype.is_complex() {
                assert!(result.is_err(), "{at}");
                continue;
            }
            if dtype.is_complex() && !matches!(reduction, Reduction::Sum | Reduction::Mean) {
                continue;
            }
            let got = result.unwrap();
            assert_eq!(got.device().name(), device.name(), "{at}");
            assert_eq!((got.dtype(), got.dims()), (dtype, x.dims()), "{at}");
            check_reduced(&got, reduction, size, 0, &at);
        }
        // Reduce-scatter: rank r gets chunk r of the sum.
        let scattered = local(rank, dtype, count * size, device);
        let got = group.reduce_scatter(&scattered, Reduction::Sum).unwrap();
        assert_eq!(got.dims().as_slice(), &[count]);
        check_reduced(&got, Reduction::Sum, size, rank * count, "reduce_scatter");
    }
    // Broadcast from the last rank: every rank gets its tensor.
    let x = local(rank, dtype, 5, device);
    let from_last = group.broadcast(&x, size - 1).unwrap();
    let want: Vec<f64> = (0..5).map(|i| value(size - 1, i)).collect();
    assert_eq!(as_f64(&from_last), want, "broadcast of {dtype}");
    // The same as TensorFlow's send/recv pair: the last rank sends, the others receive.
    let got = if rank == size - 1 {
        group.broadcast_send(&x).unwrap()
    } else {
        group.broadcast_recv(x.shape(), dtype, device).unwrap()
    };
    assert_eq!(as_f64(&got), want, "broadcast_send/recv of {dtype}");
    // All-gather along the first dim, in rank order.
    let x = local(rank, dtype, 6, device).reshape([3, 2]).unwrap();
    let gathered = group.all_gather(&x).unwrap();
    assert_eq!(gathered.dims().as_slice(), &[3 * size, 2]);
    let want: Vec<f64> = (0..size)
        .flat_map(|r| (0..6).map(move |i| value(r, i)))
        .collect();
    assert_eq!(as_f64(&gathered), want, "all_gather of {dtype}");
    // All-to-all: chunk j of rank r lands as chunk r on rank j.
    let x = local(rank, dtype, 2 * size, device)
        .reshape([size, 2])
        .unwrap();
    let exchanged = group.all_to_all(&x).unwrap();
    let want: Vec<f64> = (0..size)
        .flat_map(|r| (0..2).map(move |i| value(r, rank * 2 + i)))
        .collect();
    assert_eq!(as_f64(&exchanged), want, "all_to_all of {dtype}");
}
