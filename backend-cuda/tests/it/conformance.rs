//! The conformance suite on the first CUDA GPU: one test per op family. Skipped, with the
//! reason, on a machine without one (CI's), unless `POLYTENSOR_REQUIRE` names cuda.

conformance::conformance_backend_tests!("cuda", || polytensor_cuda::first()
    .map(|d| d as std::sync::Arc<dyn polytensor_core::Device>));
