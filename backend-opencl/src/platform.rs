//! Finding OpenCL devices. Every call that creates or queries platform objects runs
//! under one process-wide lock: PoCL crashes when several threads create contexts at once.

use std::sync::{Mutex, MutexGuard};

use opencl3::device::{Device, CL_DEVICE_TYPE_ALL};
use opencl3::error_codes::ClError;

/// The process-wide lock around platform, device, context and program creation.
static DRIVER_LOCK: Mutex<()> = Mutex::new(());

/// Hold the process-wide driver lock (a panic elsewhere does not poison it for good).
pub(crate) fn driver_lock() -> MutexGuard<'static, ()> {
    DRIVER_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// One OpenCL device and the platform it belongs to.
#[derive(Debug, Clone)]
pub struct Found {
    /// The device.
    pub device: Device,
    /// The platform's name (`Portable Computing Language`, ...).
    pub platform: String,
}

/// The words for an OpenCL error code from the loader or a platform.
pub(crate) fn describe(error: ClError) -> String {
    match error.0 {
        // cl3's code for a libOpenCL that could not be loaded.
        opencl3::error_codes::DLOPEN_RUNTIME_LOAD_FAILED => {
            "no OpenCL loader (libOpenCL.so.1) could be loaded; install one, e.g. Debian's \
             ocl-icd-libopencl1 and a driver such as pocl-opencl-icd"
                .into()
        }
        // CL_PLATFORM_NOT_FOUND_KHR, from the ICD loader.
        -1001 => "the OpenCL loader found no platform (no ICD installed, e.g. Debian's \
                  pocl-opencl-icd; or OCL_ICD_VENDORS points at an empty directory)"
            .into(),
        _ => error.to_string(),
    }
}

/// Every device of every platform, in platform order, or why none can be listed.
pub fn devices() -> Result<Vec<Found>, String> {
    let _lock = driver_lock();
    let platforms = opencl3::platform::get_platforms().map_err(describe)?;
    let mut found = Vec::new();
    for platform in platforms {
        let name = platform
            .name()
            .unwrap_or_else(|e| format!("(unnamed: {e})"));
        // A platform without devices reports CL_DEVICE_NOT_FOUND: nothing to add.
        let Ok(ids) = platform.get_devices(CL_DEVICE_TYPE_ALL) else {
            continue;
        };
        found.extend(ids.into_iter().map(|id| Found {
            device: Device::new(id),
            platform: name.clone(),
        }));
    }
    if found.is_empty() {
        return Err("the OpenCL platforms have no device".into());
    }
    Ok(found)
}
