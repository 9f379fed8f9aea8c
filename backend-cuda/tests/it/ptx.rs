//! The PTX check: every kernel this backend can launch, compiled by NVRTC for compute_80
//! and compute_90 and assembled by ptxas for sm_80 and sm_90. It needs no GPU, only NVRTC
//! and ptxas: NVIDIA's PyPI wheels in `target/cuda-venv` (`.ci/run` installs them) or a
//! toolkit named by `POLYTENSOR_CUDA_TOOLKIT`. Without them it skips with the reason,
//! unless `POLYTENSOR_REQUIRE` names `cuda-ptx` (CI sets it).

use std::path::{Path, PathBuf};

use polytensor_cuda::compile::{compile, Arch};
use polytensor_cuda::loader::Toolkit;
use polytensor_cuda::programs::{check_ptx, CHECKED_ARCHS};

/// The toolkit and its ptxas, or `None` after printing why the test skips.
fn toolkit() -> Option<(Toolkit, PathBuf)> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/cuda-venv");
    let found = Toolkit::find(&venv)
        .ok_or_else(|| format!("no CUDA toolkit: {} has no wheels", venv.display()))
        .and_then(|toolkit| {
            toolkit.preload()?;
            let ptxas = toolkit
                .binary("ptxas")
                .ok_or_else(|| format!("{} has no ptxas", toolkit.root.display()))?;
            Ok((toolkit, ptxas))
        });
    match found {
        Ok(found) => Some(found),
        Err(why) => {
            assert!(
                !conformance::required("cuda-ptx"),
                "POLYTENSOR_REQUIRE names cuda-ptx, but: {why}"
            );
            eprintln!("skipped: {why}");
            None
        }
    }
}

#[test]
fn every_kernel_compiles_and_assembles_for_sm_80_and_sm_90() {
    let Some((toolkit, ptxas)) = toolkit() else {
        return;
    };
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let report = check_ptx(&ptxas, &CHECKED_ARCHS, threads).unwrap_or_else(|e| panic!("{e}"));
    println!(
        "PTX check ({}): {} programs, {} kernels, for {:?}, in {:.1} s on {threads} threads",
        toolkit.root.display(),
        report.programs,
        report.kernels,
        report
            .archs
            .iter()
            .map(|a| a.real_name())
            .collect::<Vec<_>>(),
        report.seconds
    );
    assert!(report.programs > 50 && report.kernels > report.programs);
}

#[test]
fn a_kernel_that_does_not_compile_is_an_err_with_the_log() {
    if toolkit().is_none() {
        return;
    }
    let err = compile(
        "extern \"C\" __global__ void broken() { undeclared = 1; }",
        Arch(80),
    )
    .unwrap_err();
    assert!(err.contains("undeclared"), "{err}");
    assert!(err.contains("compute_80"), "{err}");
}
