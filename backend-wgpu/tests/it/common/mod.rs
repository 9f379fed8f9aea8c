//! What the wgpu integration tests share: the device, or the reason there is none.

use std::sync::Arc;

use polytensor_core::Device;

/// The first wgpu adapter as a device, or `None` after printing why it is skipped. A skip is a
/// failure when `POLYTENSOR_REQUIRE` names wgpu (CI sets it).
pub fn device_or_skip() -> Option<Arc<dyn Device>> {
    conformance::device_or_skip("wgpu", || {
        polytensor_wgpu::open(0).map(|d| d as Arc<dyn Device>)
    })
}
