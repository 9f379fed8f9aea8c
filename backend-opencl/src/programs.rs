//! The compiled-kernel cache: one program per typed key ([`ProgramKey`]), compiled from
//! the generator's text on first use, under the process-wide driver lock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use opencl3::context::Context;
use opencl3::kernel::Kernel;
use opencl3::program::Program;
use opencl3::types::cl_device_id;
use polytensor_core::{Error, Result};

use crate::platform::driver_lock;
use polytensor_gpu_kit::ir::KernelName;
use polytensor_gpu_kit::table::ProgramKey;

/// A compiled program's kernels by name (what [`OpenClDevice`](crate::OpenClDevice)
/// launches through the kit's `Queue`). Setting arguments and enqueueing must not
/// interleave between threads, so each kernel sits behind a lock held across both.
pub struct Compiled {
    kernels: Vec<(KernelName, Mutex<Kernel>)>,
}

impl Compiled {
    /// The kernel named `name`.
    pub(crate) fn kernel(&self, name: KernelName) -> Option<&Mutex<Kernel>> {
        self.kernels
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, k)| k)
    }
}

/// The programs of one device.
#[derive(Default)]
pub(crate) struct Programs {
    cache: Mutex<HashMap<ProgramKey, Arc<Compiled>>>,
}

impl Programs {
    /// The program of `key`, built from `source()` (its text and kernel names) with
    /// `options` on first use; a build failure is an `Err` carrying the build log.
    pub(crate) fn get(
        &self,
        context: &Context,
        device: cl_device_id,
        device_name: &str,
        options: &str,
        key: ProgramKey,
        source: impl FnOnce() -> Result<(String, Vec<KernelName>)>,
    ) -> Result<Arc<Compiled>> {
        if let Some(hit) = self.lock().get(&key) {
            return Ok(hit.clone());
        }
        let (source, names) = source()?;
        let backend = |message: String| Error::Backend {
            device: device_name.to_string(),
            message,
        };
        let compiled = {
            let _driver = driver_lock();
            let mut program = Program::create_from_source(context, &source)
                .map_err(|e| backend(format!("creating a program for {key:?}: {e}")))?;
            if let Err(e) = program.build(&[device], options) {
                let log = program.get_build_log(device).unwrap_or_default();
                return Err(backend(format!(
                    "building the kernel for {key:?} failed ({e}):\n{log}"
                )));
            }
            let kernels = names
                .into_iter()
                .map(|name| {
                    Kernel::create(&program, &name.to_string())
                        .map(|k| (name, Mutex::new(k)))
                        .map_err(|e| backend(format!("kernel {name} of {key:?}: {e}")))
                })
                .collect::<Result<Vec<_>>>()?;
            Arc::new(Compiled { kernels })
        };
        Ok(self.lock().entry(key).or_insert(compiled).clone())
    }

    /// How many programs have been built.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ProgramKey, Arc<Compiled>>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}
