//! The programs this backend compiles: the shared kernel table in the CUDA dialect, less
//! the floating-point matmuls that cuBLAS runs; and the PTX check, which compiles every
//! one of them with NVRTC and assembles it with `ptxas`, on any machine, GPU or not.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use polytensor_core::{DTypeClass, DataType, Op};
use polytensor_gpu_kit::matmul::Schedule;
use polytensor_gpu_kit::table::{self, ProgramKey, ProgramSource};
use polytensor_gpu_kit::Dialect;

use crate::compile::{compile, Arch};

/// The architectures the PTX check compiles for: Ampere (`sm_80`) and Hopper (`sm_90`).
pub const CHECKED_ARCHS: [Arch; 2] = [Arch(80), Arch(90)];

/// Whether cuBLAS runs matmul of `dtype`: every float and complex dtype matmul is defined
/// for (the integers use the generated tiled kernel).
pub fn uses_cublas(dtype: DataType) -> bool {
    Op::Matmul.is_defined_for(dtype)
        && matches!(dtype.class(), DTypeClass::Float | DTypeClass::Complex)
}

/// Every program this backend can launch.
pub fn programs() -> Vec<ProgramKey> {
    table::all_programs(true)
        .into_iter()
        .filter(|key| !matches!(key, ProgramKey::Matmul(dtype) if uses_cublas(*dtype)))
        .collect()
}

/// The CUDA text and kernel names of the program of `key`.
pub fn source(key: ProgramKey) -> Option<ProgramSource> {
    table::program_source(Dialect::Cuda, key, true, Schedule::Tiled)
}

/// What the PTX check compiled.
#[derive(Debug, Clone)]
pub struct CheckReport {
    /// Programs compiled (each for every architecture).
    pub programs: usize,
    /// Kernels in them.
    pub kernels: usize,
    /// The architectures.
    pub archs: Vec<Arch>,
    /// Wall time of the whole check, in seconds.
    pub seconds: f64,
}

/// Compile every program of [`programs`] with NVRTC for each of `archs` and assemble the
/// PTX with the `ptxas` at `ptxas`, on `threads` threads. `Err` lists every program that
/// failed, with NVRTC's or ptxas's words. NVRTC must be loadable (see [`crate::loader`]).
pub fn check_ptx(ptxas: &Path, archs: &[Arch], threads: usize) -> Result<CheckReport, String> {
    if let Some(why) = crate::loader::nvrtc_unavailable() {
        return Err(why);
    }
    let started = Instant::now();
    let keys = programs();
    let sources: Vec<(ProgramKey, ProgramSource)> = keys
        .iter()
        .map(|&key| {
            source(key)
                .map(|s| (key, s))
                .ok_or_else(|| format!("no source for {key:?}"))
        })
        .collect::<Result<_, _>>()?;
    let work: Vec<(usize, Arch)> = (0..sources.len())
        .flat_map(|i| archs.iter().map(move |&a| (i, a)))
        .collect();
    let scratch = std::env::temp_dir().join(format!("polytensor-ptx-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                while let Some(&(index, arch)) = work.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let (key, program) = &sources[index];
                    let file = scratch.join(format!("{index}-{}.ptx", arch.0));
                    if let Err(why) = compile_and_assemble(&program.text, arch, ptxas, &file) {
                        let mut failures = failures.lock().unwrap_or_else(|e| e.into_inner());
                        failures.push(format!("{key:?} on {}: {why}", arch.real_name()));
                    }
                }
            });
        }
    });
    let _ = std::fs::remove_dir_all(&scratch);
    let failures = failures.into_inner().unwrap_or_else(|e| e.into_inner());
    if !failures.is_empty() {
        return Err(format!(
            "{} of {} compilations failed:\n{}",
            failures.len(),
            work.len(),
            failures.join("\n")
        ));
    }
    Ok(CheckReport {
        programs: sources.len(),
        kernels: sources.iter().map(|(_, s)| s.kernels.len()).sum(),
        archs: archs.to_vec(),
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// NVRTC to PTX at `file`, then `ptxas` on it for the real architecture.
fn compile_and_assemble(source: &str, arch: Arch, ptxas: &Path, file: &Path) -> Result<(), String> {
    let ptx = compile(source, arch)?;
    std::fs::write(file, &ptx).map_err(|e| format!("{}: {e}", file.display()))?;
    let output = Command::new(ptxas)
        .arg(format!("-arch={}", arch.real_name()))
        .arg("--opt-level=0")
        .arg("-o")
        .arg(file.with_extension("cubin"))
        .arg(file)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", ptxas.display()))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ptxas -arch={} failed:\n{}",
            arch.real_name(),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_supported_kernel_is_in_a_checked_program() {
        let keys = programs();
        for &dtype in DataType::ALL {
            let matmul = table::has_kernel(Op::Matmul, dtype, true) && !uses_cublas(dtype);
            assert_eq!(keys.contains(&ProgramKey::Matmul(dtype)), matmul, "{dtype}");
            if table::has_kernel(Op::Unary(polytensor_core::UnaryOp::Neg), dtype, true) {
                assert!(keys.contains(&ProgramKey::Unary(dtype)), "{dtype}");
            }
            if table::has_kernel(Op::Reduce(polytensor_core::ReduceOp::Sum), dtype, true) {
                assert!(keys.contains(&ProgramKey::Reduce(dtype)), "{dtype}");
            }
        }
        for key in keys {
            assert!(
                source(key).is_some_and(|s| !s.kernels.is_empty()),
                "{key:?}"
            );
        }
    }
}
