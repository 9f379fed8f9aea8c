//! NVRTC: kernel text to PTX for one architecture, with the options every polytensor
//! kernel is compiled with, and an on-disk cache keyed by source, options and architecture
//! so that a second process does not compile again.

use std::path::PathBuf;

use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions};
use sha2::{Digest, Sha256};

/// A virtual architecture NVRTC compiles for (`compute_80`), as its two-digit number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Arch(pub u32);

impl Arch {
    /// The architecture of a device of compute capability `major.minor`.
    pub fn of(major: i32, minor: i32) -> Arch {
        Arch((major.max(0) * 10 + minor.max(0)) as u32)
    }

    /// NVRTC's name for it: `compute_80`.
    pub fn virtual_name(self) -> String {
        format!("compute_{}", self.0)
    }

    /// ptxas's name for the real architecture: `sm_80`.
    pub fn real_name(self) -> String {
        format!("sm_{}", self.0)
    }
}

/// The options of every kernel: IEEE division and square root (the shared semantics round
/// once), no fused multiply-add contraction (as the OpenCL dialect's `FP_CONTRACT OFF`),
/// no flush to zero.
fn options(arch: Arch) -> CompileOptions {
    CompileOptions {
        ftz: Some(false),
        prec_sqrt: Some(true),
        prec_div: Some(true),
        fmad: Some(false),
        options: vec![format!("--gpu-architecture={}", arch.virtual_name())],
        ..Default::default()
    }
}

/// Compile `source` to PTX for `arch`; an `Err` carrying NVRTC's log.
pub fn compile(source: &str, arch: Arch) -> Result<String, String> {
    if source.contains('\0') {
        return Err("kernel source holds a NUL byte".into());
    }
    match compile_ptx_with_opts(source, options(arch)) {
        Ok(ptx) => Ok(ptx.to_src()),
        Err(CompileError::CompileError { nvrtc, log, .. }) => Err(format!(
            "NVRTC failed for {} ({nvrtc:?}):\n{}",
            arch.virtual_name(),
            log.to_string_lossy()
        )),
        Err(e) => Err(format!("NVRTC failed for {}: {e}", arch.virtual_name())),
    }
}

/// The directory of compiled PTX: `POLYTENSOR_CACHE_DIR/cuda`, else
/// `$XDG_CACHE_HOME/polytensor/cuda`, else `~/.cache/polytensor/cuda`; `None` (no disk
/// cache) when none can be named.
fn cache_dir() -> Option<PathBuf> {
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let base = env("POLYTENSOR_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| env("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("polytensor")))
        .or_else(|| env("HOME").map(|d| PathBuf::from(d).join(".cache/polytensor")))?;
    Some(base.join("cuda"))
}

/// The disk cache's name for the PTX of `source` on `arch`.
fn cache_key(source: &str, arch: Arch) -> String {
    let mut hash = Sha256::new();
    hash.update(source.as_bytes());
    hash.update(format!("{:?}", options(arch).options).as_bytes());
    let digest = hash.finalize();
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("{hex}-{}.ptx", arch.virtual_name())
}

/// The PTX of `source` for `arch`: from the disk cache if it holds it, else compiled and
/// stored there (a cache that cannot be written is only slower).
pub fn compile_cached(source: &str, arch: Arch) -> Result<String, String> {
    let path = cache_dir().map(|dir| dir.join(cache_key(source, arch)));
    if let Some(ptx) = path.as_ref().and_then(|p| std::fs::read_to_string(p).ok()) {
        // A damaged file is compiled again (writers rename whole files into place).
        if ptx.contains(".entry") && !ptx.contains('\0') {
            return Ok(ptx);
        }
    }
    let ptx = compile(source, arch)?;
    if let Some(path) = path {
        store(&path, &ptx);
    }
    Ok(ptx)
}

/// Write `ptx` to `path` through a temporary file, so that a reader never sees half of it.
fn store(path: &std::path::Path, ptx: &str) {
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let temporary = path.with_extension(format!("{}.tmp", std::process::id()));
    if std::fs::write(&temporary, ptx).is_ok() && std::fs::rename(&temporary, path).is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architectures_are_named_as_nvrtc_and_ptxas_name_them() {
        assert_eq!(Arch::of(8, 0).virtual_name(), "compute_80");
        assert_eq!(Arch::of(9, 0).real_name(), "sm_90");
        assert_eq!(Arch::of(8, 6), Arch(86));
    }

    #[test]
    fn cache_keys_follow_source_and_architecture() {
        let a = cache_key("x", Arch(80));
        assert_ne!(a, cache_key("y", Arch(80)));
        assert_ne!(a, cache_key("x", Arch(90)));
        assert!(a.ends_with("-compute_80.ptx"));
    }
}
