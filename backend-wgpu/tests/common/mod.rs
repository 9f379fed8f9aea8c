//! What the wgpu integration tests share: the device, or the reason there is none.

use std::sync::Arc;

use backend_wgpu::WgpuDevice;
use tensor_core::Device;

/// The first wgpu adapter as a device, or `None` after printing why it is skipped. A skip is a
/// failure when `POLYTENSOR_REQUIRE` names wgpu (CI sets it).
pub fn device_or_skip() -> Option<Arc<dyn Device>> {
    match WgpuDevice::open(0) {
        Ok(device) => Some(device),
        Err(e) => {
            assert!(
                !std::env::var("POLYTENSOR_REQUIRE")
                    .unwrap_or_default()
                    .split(',')
                    .any(|b| b.trim() == "wgpu"),
                "POLYTENSOR_REQUIRE names wgpu, but: {e}"
            );
            eprintln!("skipped: {e}");
            None
        }
    }
}
