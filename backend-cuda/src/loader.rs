//! Finding the CUDA libraries. Every one is loaded at run time (cudarc's
//! `dynamic-loading`), and cudarc panics on the first call into a library it cannot load,
//! so each is checked here before any call: a missing driver, NVRTC or cuBLAS is a reason
//! in words, never a panic.
//!
//! A toolkit outside the loader's search path (NVIDIA's PyPI wheels in a venv, a CUDA
//! install that is not in `LD_LIBRARY_PATH`) is named by `POLYTENSOR_CUDA_TOOLKIT`:
//! [`preload_toolkit`] loads its NVRTC (and cuBLAS, if there) by path, after which
//! cudarc's own load by name finds the library already in the process.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cudarc::driver::{result, sys, DriverError};

/// The environment variable naming a CUDA toolkit directory: a CUDA install prefix (with
/// `lib64/` and `bin/`) or the `nvidia/` directory of the PyPI wheels in a venv's
/// `site-packages`.
pub const TOOLKIT_ENV: &str = "POLYTENSOR_CUDA_TOOLKIT";

/// The library files a toolkit directory may hold, under the sub-directories where the
/// PyPI wheels and a CUDA install put them.
const TOOLKIT_LIBRARIES: &[&str] = &[
    "cuda_nvrtc/lib/libnvrtc.so.12",
    "cublas/lib/libcublas.so.12",
    "cudnn/lib/libcudnn.so.9",
    "lib64/libnvrtc.so",
    "lib64/libcublas.so",
];

/// The executables of a toolkit directory (`ptxas`), under the same layouts.
const TOOLKIT_BINARIES: &[&str] = &["cuda_nvcc/bin", "bin"];

/// A CUDA toolkit directory found on disk.
#[derive(Debug, Clone)]
pub struct Toolkit {
    /// The directory.
    pub root: PathBuf,
}

impl Toolkit {
    /// The toolkit `POLYTENSOR_CUDA_TOOLKIT` names, if it is set.
    pub fn from_env() -> Option<Toolkit> {
        std::env::var_os(TOOLKIT_ENV).map(|root| Toolkit { root: root.into() })
    }

    /// The toolkit at `POLYTENSOR_CUDA_TOOLKIT`, else the `nvidia/` directory of the PyPI
    /// wheels in the venv at `venv` (CI installs them in `target/cuda-venv`).
    pub fn find(venv: &Path) -> Option<Toolkit> {
        if let Some(toolkit) = Self::from_env() {
            return Some(toolkit);
        }
        let lib = std::fs::read_dir(venv.join("lib")).ok()?;
        lib.flatten()
            .map(|python| python.path().join("site-packages/nvidia"))
            .find(|root| root.is_dir())
            .map(|root| Toolkit { root })
    }

    /// The path of the executable `name` (`ptxas`) in this toolkit, if it has one.
    pub fn binary(&self, name: &str) -> Option<PathBuf> {
        TOOLKIT_BINARIES
            .iter()
            .map(|dir| self.root.join(dir).join(name))
            .find(|path| path.is_file())
    }

    /// Load this toolkit's NVRTC, cuBLAS and cuDNN (those it has) into the process, so that
    /// cudarc's loads by name find them. `Err` if it has no NVRTC.
    pub fn preload(&self) -> Result<(), String> {
        let mut nvrtc = false;
        for relative in TOOLKIT_LIBRARIES {
            let path = self.root.join(relative);
            if !path.is_file() {
                continue;
            }
            // SAFETY: loading a CUDA library runs only its initialisers, which have no
            // preconditions; the handle is leaked so the library stays loaded for the
            // process, as cudarc's own handles do.
            let library = unsafe { libloading::Library::new(&path) }
                .map_err(|e| format!("cannot load {}: {e}", path.display()))?;
            std::mem::forget(library);
            nvrtc |= relative.contains("nvrtc");
        }
        if nvrtc {
            Ok(())
        } else {
            Err(format!("{} holds no NVRTC library", self.root.display()))
        }
    }
}

/// Load the toolkit `POLYTENSOR_CUDA_TOOLKIT` names, once per process; the reason if it
/// cannot be loaded. Nothing to do (and `Ok`) when the variable is not set.
pub fn preload_toolkit() -> Result<(), String> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| Toolkit::from_env().map_or(Ok(()), |t| t.preload()))
        .clone()
}

/// Why the CUDA driver cannot be used, if it cannot: no `libcuda`, or the driver's own
/// error (`CUDA_ERROR_NO_DEVICE` on a machine with a driver and no GPU).
pub fn driver_unavailable() -> Option<String> {
    // SAFETY: only tries to open the library; calls nothing in it.
    if !unsafe { sys::is_culib_present() } {
        return Some(
            "no CUDA driver (libcuda.so) could be loaded; install NVIDIA's driver on a \
             machine with an NVIDIA GPU"
                .into(),
        );
    }
    match result::init().and_then(|()| result::device::get_count()) {
        Err(e) => Some(describe(e)),
        Ok(0) => Some("the CUDA driver reports no device".into()),
        Ok(_) => None,
    }
}

/// How many CUDA devices the driver reports, or why there are none.
pub fn device_count() -> Result<usize, String> {
    if let Some(why) = driver_unavailable() {
        return Err(why);
    }
    result::device::get_count()
        .map(|n| n.max(0) as usize)
        .map_err(describe)
}

/// Why NVRTC (which compiles every kernel) cannot be used, if it cannot.
pub fn nvrtc_unavailable() -> Option<String> {
    if let Err(why) = preload_toolkit() {
        return Some(why);
    }
    // SAFETY: only tries to open the library; calls nothing in it.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        None
    } else {
        Some(format!(
            "no NVRTC (libnvrtc.so.12) could be loaded; install the CUDA toolkit, or the \
             PyPI wheel nvidia-cuda-nvrtc-cu12 and point {TOOLKIT_ENV} at its nvidia/ \
             directory"
        ))
    }
}

/// `why`, unless `present` (a library found by its `is_culib_present`).
fn missing(present: bool, why: &str) -> Option<String> {
    (!present).then(|| why.to_string())
}

/// Why cuBLAS (floating-point matmul) cannot be used, if it cannot.
pub fn cublas_unavailable() -> Option<String> {
    // SAFETY: only tries to open the library; calls nothing in it.
    let present = unsafe { cudarc::cublas::sys::is_culib_present() };
    missing(
        present,
        "no cuBLAS (libcublas.so.12) could be loaded; install the CUDA toolkit or the PyPI \
         wheel nvidia-cublas-cu12",
    )
}

/// Why cuDNN (convolutions; without it they run the kit's kernels) cannot be used, if it
/// cannot.
pub fn cudnn_unavailable() -> Option<String> {
    // SAFETY: only tries to open the library; calls nothing in it.
    let present = unsafe { cudarc::cudnn::sys::is_culib_present() };
    missing(
        present,
        "no cuDNN (libcudnn.so.9) could be loaded; install cuDNN or the PyPI wheel \
         nvidia-cudnn-cu12",
    )
}

/// A driver error in words: its name and the driver's description
/// (`CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected`).
pub fn describe(error: DriverError) -> String {
    let name = error
        .error_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", error.0));
    match error.error_string() {
        Ok(text) => format!("{name}: {}", text.to_string_lossy()),
        Err(_) => name,
    }
}
