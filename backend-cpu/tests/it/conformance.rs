//! The conformance suite on the CPU device: one test per op family, so a failure names
//! what broke. Each checks every case of its family against the suite's naive reference
//! and that the allocator's `bytes_in_use` returns to its starting value.

use conformance::{run, Family, Filter};
use polytensor_core::Device;
use polytensor_cpu::CpuDevice;

fn check(family: Family) {
    let device: std::sync::Arc<dyn Device> = CpuDevice::new();
    let report = run(&device, &Filter::family(family));
    let (passed, failed, unsupported) = report.counts();
    println!(
        "{family:?} on {}: {passed} passed, {failed} failed, {unsupported} unsupported",
        report.device
    );
    assert!(passed > 0, "no {family:?} case ran");
    assert_eq!(unsupported, 0, "the CPU device supports every defined op");
    assert!(
        failed == 0 && report.leak_free(),
        "\n{}",
        report.failure_summary()
    );
}

conformance::conformance_family_tests!(check);

#[test]
fn freed_memory_is_reused() {
    let device: std::sync::Arc<dyn Device> = CpuDevice::new();
    conformance::assert_memory_reused(&device);
}

/// A device handed around as `dyn Device` gives back its backend's own type (NCCL finds a
/// CUDA device's stream this way; `polytensor-distributed`'s NCCL test checks that a CPU
/// device is not taken for a CUDA one).
#[test]
fn a_device_downcasts_to_its_backend_type() {
    let device: std::sync::Arc<dyn Device> = CpuDevice::new();
    let cpu = device.clone().downcast::<CpuDevice>().expect("a CpuDevice");
    assert!(std::ptr::addr_eq(
        std::sync::Arc::as_ptr(&device),
        std::sync::Arc::as_ptr(&cpu)
    ));
}
