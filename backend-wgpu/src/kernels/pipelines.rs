//! Compute pipelines compiled once per generated source and kept for the device's life.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use polytensor_core::{Error, Result};

use super::key::PipelineKey;

/// A compiled pipeline and how many elements of its output each invocation of a map
/// writes ([`polytensor_gpu_kit::render::wgsl_lanes`]; 1 for other kernels).
pub(crate) struct Pipeline {
    compute: wgpu::ComputePipeline,
    pub(crate) lanes: usize,
}

impl std::ops::Deref for Pipeline {
    type Target = wgpu::ComputePipeline;

    fn deref(&self) -> &wgpu::ComputePipeline {
        &self.compute
    }
}

/// Pipelines by the key of their WGSL source (op, dtype, variant).
#[derive(Default)]
pub(crate) struct Pipelines {
    cache: Mutex<HashMap<PipelineKey, Arc<Pipeline>>>,
}

impl Pipelines {
    /// The pipeline named `key`, compiling `source()` (entry point `main`, and the
    /// pipeline's lanes) on first use only; a source that cannot be written, or a shader
    /// the device rejects, is an `Err` naming the key and the reason.
    pub(crate) fn get(
        &self,
        device: &wgpu::Device,
        key: PipelineKey,
        source: impl FnOnce() -> Result<(String, usize)>,
    ) -> Result<Arc<Pipeline>> {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pipeline) = cache.get(&key) {
            return Ok(pipeline.clone());
        }
        let label = key.to_string();
        let (text, lanes) = source()?;
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(&label),
            source: wgpu::ShaderSource::Wgsl(text.into()),
        });
        let compute = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(&label),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        let pipeline = Arc::new(Pipeline { compute, lanes });
        if let Some(error) = pollster::block_on(scope.pop()) {
            return Err(Error::Backend {
                device: "wgpu".into(),
                message: format!("the wgpu kernel {key} did not compile: {error}"),
            });
        }
        cache.insert(key, pipeline.clone());
        Ok(pipeline)
    }
}
