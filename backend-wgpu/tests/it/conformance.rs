//! The conformance suite on the first wgpu adapter (lavapipe in CI): one test per op
//! family. Cases the device declares unsupported are reported, never failures; everything
//! it runs must match the suite's reference, and `bytes_in_use` must return to its start.

conformance::conformance_backend_tests!("wgpu", || polytensor_wgpu::open(0)
    .map(|d| d as std::sync::Arc<dyn polytensor_core::Device>));
