//! The kit's programs as wgpu compiles them: a program ([`ProgramKey`]) is its kernels' IR,
//! each rendered as WGSL and compiled into a pipeline of its own the first time it is
//! launched (a WGSL module has one entry point per pipeline, and most kernels of a program
//! are never launched).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use polytensor_core::{Error, Result};
use polytensor_gpu_kit::ir::{Kernel, KernelName};
use polytensor_gpu_kit::render;
use polytensor_gpu_kit::table::ProgramKey;

/// The kernels of one program, and the pipelines compiled from them so far.
pub struct WgslProgram {
    key: ProgramKey,
    kernels: HashMap<KernelName, Kernel>,
    pipelines: Mutex<HashMap<KernelName, Arc<wgpu::ComputePipeline>>>,
}

impl WgslProgram {
    /// The program of `key` holding `kernels`.
    pub(crate) fn new(key: ProgramKey, kernels: Vec<Kernel>) -> Self {
        Self {
            key,
            kernels: kernels.into_iter().map(|k| (k.name, k)).collect(),
            pipelines: Mutex::default(),
        }
    }

    /// The kernel `name`, if the program has it.
    pub(crate) fn kernel(&self, name: KernelName) -> Option<&Kernel> {
        self.kernels.get(&name)
    }

    /// The pipeline of kernel `name`, compiled on first use; a kernel the program lacks,
    /// one WGSL cannot hold, or a shader the device rejects is an `Err` naming it.
    pub(crate) fn pipeline(
        &self,
        device: &wgpu::Device,
        device_name: &str,
        name: KernelName,
    ) -> Result<Arc<wgpu::ComputePipeline>> {
        let mut pipelines = self.pipelines.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pipeline) = pipelines.get(&name) {
            return Ok(pipeline.clone());
        }
        let backend = |message: String| Error::Backend {
            device: device_name.to_string(),
            message,
        };
        let kernel = self
            .kernels
            .get(&name)
            .ok_or_else(|| backend(format!("no kernel {name} in its program {:?}", self.key)))?;
        let text = render::wgsl_kernel(kernel)
            .ok_or_else(|| backend(format!("kernel {name} has no WGSL rendering")))?;
        let label = format!("{name}.{:?}", self.key);
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(&label),
            source: wgpu::ShaderSource::Wgsl(text.into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(&label),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        if let Some(error) = pollster::block_on(scope.pop()) {
            return Err(backend(format!(
                "the wgpu kernel {label} did not compile: {error}"
            )));
        }
        let pipeline = Arc::new(pipeline);
        pipelines.insert(name, pipeline.clone());
        Ok(pipeline)
    }
}

/// The programs of one device, by key, made on first use.
#[derive(Default)]
pub(crate) struct Programs {
    cache: Mutex<HashMap<ProgramKey, Arc<WgslProgram>>>,
}

impl Programs {
    /// The program of `key`, its kernels from `kernels()` (`None`: the table has none) on
    /// first use.
    pub(crate) fn get(
        &self,
        key: ProgramKey,
        kernels: impl FnOnce() -> Option<Vec<Kernel>>,
    ) -> Option<Arc<WgslProgram>> {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(program) = cache.get(&key) {
            return Some(program.clone());
        }
        let program = Arc::new(WgslProgram::new(key, kernels()?));
        cache.insert(key, program.clone());
        Some(program)
    }
}
