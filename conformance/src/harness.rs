//! The test harness every backend's `tests/it/conformance.rs` is built from: one test per op
//! family ([`crate::conformance_backend_tests`]), skipped with the reason where the backend
//! has no device unless CI requires it ([`required`]).

use std::sync::Arc;

use polytensor_core::device::Device;

use crate::cases::Family;
use crate::report::Filter;
use crate::run::run;

/// One `#[test]` per op family, each calling `$check(Family::...)`, so a failure names
/// what broke. For each backend's `tests/it/conformance.rs`:
///
/// ```ignore
/// fn check(family: Family) { /* run the family on the device, assert */ }
/// conformance::conformance_family_tests!(check);
/// ```
#[macro_export]
macro_rules! conformance_family_tests {
    ($check:path) => {
        $crate::conformance_family_tests!(@each $check;
            unary => Unary; binary => Binary; compare => Compare; logical => Logical;
            where_select => Where; cast => Cast; matmul => Matmul; reduce => Reduce;
            fill => Fill; copy => Copy; layers => Layers; sparse => Sparse;
        );
    };
    (@each $check:path; $($name:ident => $family:ident;)*) => {$(
        #[test]
        fn $name() {
            $check($crate::Family::$family);
        }
    )*};
}

/// Whether `POLYTENSOR_REQUIRE` (a comma-separated list of backend names, set by CI) names
/// `backend`: a missing device of that backend is then a failure, never a skip.
pub fn required(backend: &str) -> bool {
    std::env::var("POLYTENSOR_REQUIRE")
        .unwrap_or_default()
        .split(',')
        .any(|b| b.trim() == backend)
}

/// `open()`'s device, or `None` after printing why the test skips; a panic instead when
/// [`required`] names `backend`, so that CI cannot pass by skipping it.
pub fn device_or_skip<E: std::fmt::Display>(
    backend: &str,
    open: impl FnOnce() -> std::result::Result<Arc<dyn Device>, E>,
) -> Option<Arc<dyn Device>> {
    match open() {
        Ok(device) => Some(device),
        Err(e) => {
            assert!(
                !required(backend),
                "POLYTENSOR_REQUIRE names {backend}, but: {e}"
            );
            eprintln!("skipped: no {backend} device: {e}");
            None
        }
    }
}

/// Run `family` on `device` and assert that nothing failed and no memory leaked (cases
/// the device declares unsupported are counted, not failures): the body of every
/// backend's conformance tests.
pub fn assert_family(device: &Arc<dyn Device>, family: Family) {
    let report = run(device, &Filter::family(family));
    let (passed, failed, unsupported) = report.counts();
    println!(
        "{family:?} on {}: {passed} passed, {failed} failed, {unsupported} unsupported",
        report.device
    );
    assert!(passed > 0, "no {family:?} case ran on {}", report.device);
    assert!(
        failed == 0 && report.leak_free(),
        "\n{}",
        report.failure_summary()
    );
}

/// A backend's whole conformance test file: one `#[test]` per op family on the device
/// that `$open` (a `fn() -> Result<Arc<dyn Device>, impl Display>`) opens, skipped with
/// the reason when there is none, unless `POLYTENSOR_REQUIRE` names `$backend`.
///
/// ```ignore
/// conformance::conformance_backend_tests!("opencl", || polytensor_opencl::first()
///     .map(|d| d as std::sync::Arc<dyn polytensor_core::Device>));
/// ```
#[macro_export]
macro_rules! conformance_backend_tests {
    ($backend:literal, $open:expr) => {
        fn check(family: $crate::Family) {
            if let Some(device) = $crate::device_or_skip($backend, $open) {
                $crate::assert_family(&device, family);
            }
        }
        $crate::conformance_family_tests!(check);

        #[test]
        fn freed_memory_is_reused() {
            if let Some(device) = $crate::device_or_skip($backend, $open) {
                $crate::assert_memory_reused(&device);
            }
        }
    };
}

/// A buffer freed and asked for again (a tensor's result, every call of an op) comes from
/// the device's cache: the allocator reserves nothing new the second time. A device that
/// went to its driver for each buffer would pay an allocation and, on CUDA, a
/// device-synchronising free on every op.
pub fn assert_memory_reused(device: &Arc<dyn Device>) {
    for bytes in [4, 1000, 1 << 20, 3 << 22] {
        drop(device.allocate(bytes).expect("allocate"));
        let reserved = device.allocator().stats().bytes_reserved;
        drop(device.allocate(bytes).expect("allocate again"));
        assert_eq!(
            device.allocator().stats().bytes_reserved,
            reserved,
            "{}: a freed {bytes}-byte buffer was not reused",
            device.name()
        );
    }
}
