//! The conformance suite on the first wgpu adapter (lavapipe in CI): one test per op
//! family. Cases the device declares unsupported are reported, never failures; everything
//! it runs must match the suite's reference, and `bytes_in_use` must return to its start.

use std::sync::Arc;

use backend_wgpu::WgpuDevice;
use tensor_core::conformance::{run, Family, Filter};
use tensor_core::Device;

fn check(family: Family) {
    let device: Arc<dyn Device> = match WgpuDevice::open(0) {
        Ok(device) => device,
        Err(e) => {
            assert!(
                !std::env::var("POLYTENSOR_REQUIRE")
                    .unwrap_or_default()
                    .split(',')
                    .any(|b| b.trim() == "wgpu"),
                "POLYTENSOR_REQUIRE names wgpu, but: {e}"
            );
            eprintln!("skipped: {e}");
            return;
        }
    };
    let report = run(&device, &Filter::family(family));
    let (passed, failed, unsupported) = report.counts();
    println!(
        "{family:?} on {}: {passed} passed, {failed} failed, {unsupported} unsupported",
        report.device
    );
    assert!(
        failed == 0 && report.leak_free(),
        "\n{}",
        report.failure_summary()
    );
}

tensor_core::conformance_family_tests!(check);
