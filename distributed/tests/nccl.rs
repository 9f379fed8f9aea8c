//! NCCL under a real MPI (Open MPI), run as `tests/mpirun.rs` runs its tests: this binary
//! again under `mpirun`, each rank printing a line when its checks passed.
//!
//! - With no GPU (CI), NCCL itself still runs: its version, and the bootstrap (rank 0's
//!   unique id, broadcast over MPI to every rank). A rank that cannot join a communicator
//!   (a device that is not a CUDA device) makes joining an `Err` on every rank, and MPI
//!   stays usable.
//! - With GPUs, every collective runs on CUDA tensors through NCCL, on as many ranks as
//!   there are GPUs (NCCL takes one GPU per rank), checked against the ranks' values as
//!   the MPI collectives are.
//!
//! NCCL is found by the name `libnccl.so`, else as the `libnccl.so.2` of NVIDIA's PyPI wheel
//! (`nvidia-nccl-cu12`) in the workspace's `target/cuda-venv` (where CI installs it), which
//! the ranks then load through a `libnccl.so` link on their `LD_LIBRARY_PATH`. Without
//! either, the tests say why and skip, unless `POLYTENSOR_REQUIRE` names `nccl`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use polytensor_core::{DataType, Device, Tensor};
use polytensor_cuda::loader::Toolkit;
use polytensor_distributed::nccl::{self, NcclCommunicator};
use polytensor_distributed::Reduction;

mod support;

use support::*;

/// The variables the ranks need to load NCCL: none where it loads by name, else
/// `LD_LIBRARY_PATH` with a directory linking `libnccl.so` to the wheel's library (made
/// once per process: the tests run in parallel); `None` (after saying why) where there is
/// no NCCL.
fn nccl_env() -> Option<Vec<(&'static str, String)>> {
    if Command::new("mpirun").arg("--version").output().is_err() {
        return Some(Vec::new()); // `mpirun_with` says why it skips.
    }
    static ENV: OnceLock<Result<Vec<(&'static str, String)>, String>> = OnceLock::new();
    match ENV.get_or_init(library_path) {
        Ok(env) => Some(env.clone()),
        Err(why) => {
            assert!(!required("nccl"), "POLYTENSOR_REQUIRE names nccl: {why}");
            eprintln!("skipped: {why}");
            None
        }
    }
}

/// [`nccl_env`]'s variables, or why there is no NCCL.
fn library_path() -> Result<Vec<(&'static str, String)>, String> {
    let Some(why) = nccl::unavailable() else {
        return Ok(Vec::new());
    };
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let wheel = Toolkit::find(&workspace.join("target/cuda-venv"))
        .map(|toolkit| toolkit.root.join("nccl/lib/libnccl.so.2"))
        .filter(|path| path.is_file());
    let Some(wheel) = wheel else {
        return Err(why);
    };
    let links = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("nccl-link");
    std::fs::create_dir_all(&links).unwrap();
    let link = links.join("libnccl.so");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&wheel, &link).unwrap();
    let mut path = links.display().to_string();
    if let Ok(inherited) = std::env::var("LD_LIBRARY_PATH") {
        path = format!("{path}:{inherited}");
    }
    Ok(vec![("LD_LIBRARY_PATH", path)])
}

/// Run test `name` on `np` ranks with NCCL loadable, if there is an NCCL.
fn mpirun_nccl(np: usize, name: &str) {
    if let Some(env) = nccl_env() {
        mpirun_with(np, name, &["-x", "LD_LIBRARY_PATH"], &env, Ending::Clean);
    }
}

/// Every rank gets rank 0's unique id, a new one each time, from the NCCL library itself.
#[test]
fn nccl_is_bootstrapped_over_mpi() {
    if child() {
        as_rank(|world| {
            let version = nccl::version().unwrap();
            println!("rank {}: NCCL {version}", world.rank());
            assert!(version.starts_with("2."), "{version}");
            let first = nccl::unique_id(world, &cpu()).unwrap();
            let second = nccl::unique_id(world, &cpu()).unwrap();
            assert_ne!(first, second, "each bootstrap makes a new id");
            for id in [first, second] {
                assert!(id.as_bytes().iter().any(|&b| b != 0), "{id:?}");
                let mine = Tensor::from_slice(id.as_bytes(), [1, 128], &cpu()).unwrap();
                let all = world.all_gather(&mine).unwrap().to_vec::<u8>().unwrap();
                for (rank, theirs) in all.chunks(128).enumerate() {
                    assert_eq!(theirs, id.as_bytes(), "rank {rank} holds another id");
                }
            }
        });
    } else {
        mpirun_nccl(3, "nccl_is_bootstrapped_over_mpi");
    }
}

/// A rank whose device is not a CUDA device refuses to join: joining is an `Err` on every
/// rank (the others name it) instead of a hang, and MPI goes on working.
#[test]
fn a_rank_that_cannot_join_nccl_is_an_error_on_every_rank() {
    if child() {
        as_rank(|world| {
            let message = if world.rank() == 1 {
                NcclCommunicator::new(world, &cpu())
                    .unwrap_err()
                    .to_string()
            } else {
                // The others are ready (NCCL loads): they take part in the bootstrap.
                nccl::unique_id(world, &cpu()).unwrap_err().to_string()
            };
            let expected = if world.rank() == 1 {
                "NCCL runs on CUDA devices; cpu:0 is not one"
            } else {
                "rank 1 passed a call it refused"
            };
            assert!(message.contains(expected), "{message}");
            let x = local(world.rank(), DataType::Float, 3, &cpu());
            let sum = world.all_reduce(&x, Reduction::Sum).unwrap();
            check_reduced(&sum, Reduction::Sum, world.size(), 0, "after the refusal");
        });
    } else {
        mpirun_nccl(3, "a_rank_that_cannot_join_nccl_is_an_error_on_every_rank");
    }
}

/// The GPUs here, opened, or why there are none.
fn gpus() -> Result<Vec<Arc<dyn Device>>, String> {
    polytensor_cuda::loader::preload_toolkit()?;
    polytensor_cuda::open_all()
}

/// Every collective on CUDA tensors through NCCL, one GPU per rank; a tensor of another
/// device is an `Err` on every rank; a graph's collectives run through it too.
#[test]
fn nccl_collectives_on_cuda_tensors() {
    if child() {
        as_rank(|world| {
            let gpus = gpus().unwrap();
            let gpu = gpus[world.rank() % gpus.len()].clone();
            let nccl = NcclCommunicator::new(world, &gpu).unwrap();
            assert_eq!((nccl.rank(), nccl.size()), (world.rank(), world.size()));
            // NCCL also reduces int16 (widened) and complex numbers (as pairs).
            for dtype in DTYPES
                .into_iter()
                .chain([DataType::Int16, DataType::Complex64])
            {
                println!("rank {}: NCCL collectives of {dtype}", world.rank());
                shared_collectives(&nccl, &gpu, dtype);
            }
            // In place: NCCL writes into the tensor itself.
            let mut x = local(world.rank(), DataType::Float, 1 << 16, &gpu);
            nccl.all_reduce_in_place(&mut x, Reduction::Max).unwrap();
            check_reduced(&x, Reduction::Max, world.size(), 0, "in place");
            // A host tensor is refused on every rank, and the communicator goes on.
            let host = local(world.rank(), DataType::Float, 4, &cpu());
            let refused = nccl.all_reduce(&host, Reduction::Sum).unwrap_err();
            assert!(refused.to_string().contains("cpu:0"), "{refused}");
            let big = Tensor::full([16 << 20], 1.0f32, DataType::Float, &gpu).unwrap();
            let sum = nccl.all_reduce(&big, Reduction::Sum).unwrap();
            assert!(sum
                .to_vec::<f32>()
                .unwrap()
                .iter()
                .all(|&v| v == world.size() as f32));
        });
    } else {
        let count = match gpus() {
            Ok(gpus) => gpus.len(),
            Err(why) => {
                assert!(!required("cuda"), "POLYTENSOR_REQUIRE names cuda: {why}");
                eprintln!("skipped: no GPU for NCCL: {why}");
                return;
            }
        };
        mpirun_nccl(count.min(4), "nccl_collectives_on_cuda_tensors");
    }
}
