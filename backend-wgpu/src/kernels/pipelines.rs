//! Compute pipelines compiled once per generated source and kept for the device's life.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Pipelines by their WGSL source's key (op, dtype, variant).
#[derive(Default)]
pub(crate) struct Pipelines {
    cache: Mutex<HashMap<String, Arc<wgpu::ComputePipeline>>>,
}

impl Pipelines {
    /// The pipeline named `key`, compiling `source()` (entry point `main`) on first use.
    pub(crate) fn get(
        &self,
        device: &wgpu::Device,
        key: &str,
        source: impl FnOnce() -> String,
    ) -> Arc<wgpu::ComputePipeline> {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pipeline) = cache.get(key) {
            return pipeline.clone();
        }
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(key),
            source: wgpu::ShaderSource::Wgsl(source().into()),
        });
        let pipeline = Arc::new(
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(key),
                layout: None,
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            }),
        );
        cache.insert(key.to_string(), pipeline.clone());
        pipeline
    }
}
