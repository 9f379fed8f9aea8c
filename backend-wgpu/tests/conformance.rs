//! The conformance suite on the first wgpu adapter (lavapipe in CI): one test per op
//! family. Cases the device declares unsupported are reported, never failures; everything
//! it runs must match the suite's reference, and `bytes_in_use` must return to its start.

use tensor_core::conformance::{run, Family, Filter};

mod common;

fn check(family: Family) {
    let Some(device) = common::device_or_skip() else {
        return;
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
