//! Finding adapters: every usable one in a stable order, `WGPU_BACKEND` and
//! `WGPU_ADAPTER_NAME` honoured, and a reason when there is none.

use std::sync::{Mutex, OnceLock};

/// The backends to look on: `WGPU_BACKEND` (a comma list: `vulkan`, `metal`, `dx12`,
/// `gl`), or Vulkan, Metal and DX12. GL is opt-in: its EGL contexts fail when two threads
/// use them at once, which a parallel test harness does.
pub fn backends() -> wgpu::Backends {
    wgpu::Backends::from_env().unwrap_or(wgpu::Backends::PRIMARY)
}

/// One process-wide wgpu instance on [`backends`].
pub fn instance() -> &'static wgpu::Instance {
    static INSTANCE: OnceLock<wgpu::Instance> = OnceLock::new();
    INSTANCE.get_or_init(|| {
        let mut descriptor = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
        descriptor.backends = backends();
        wgpu::Instance::new(descriptor)
    })
}

/// How much a device type is preferred as the default: discrete GPUs first, CPUs last.
fn preference(kind: wgpu::DeviceType) -> u8 {
    match kind {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    }
}

/// Whether an adapter can run compute kernels (GL ES adapters without compute cannot).
fn runs_compute(adapter: &wgpu::Adapter) -> bool {
    adapter
        .get_downlevel_capabilities()
        .flags
        .contains(wgpu::DownlevelFlags::COMPUTE_SHADERS)
}

/// Every adapter that runs compute kernels: those whose name contains `WGPU_ADAPTER_NAME`
/// (case-insensitive) first, then by device type (discrete, integrated, virtual, other, CPU),
/// then in wgpu's order. `wgpu:0` is the first. An empty list when there is no driver.
pub fn adapters() -> Vec<wgpu::Adapter> {
    // Drivers differ in how well they take concurrent enumeration; one at a time.
    static ENUMERATING: Mutex<()> = Mutex::new(());
    let mut found: Vec<wgpu::Adapter> = {
        let _one = ENUMERATING.lock().unwrap_or_else(|p| p.into_inner());
        pollster::block_on(instance().enumerate_adapters(backends()))
    }
    .into_iter()
    .filter(runs_compute)
    .collect();
    let wanted = std::env::var("WGPU_ADAPTER_NAME")
        .ok()
        .map(|name| name.to_lowercase());
    found.sort_by_key(|adapter| {
        let info = adapter.get_info();
        let named = wanted
            .as_deref()
            .is_some_and(|name| info.name.to_lowercase().contains(name));
        (!named, preference(info.device_type))
    });
    found
}

/// Why there is no adapter, in words, for `devices()` and skipped tests.
pub fn absence_reason() -> String {
    let backends = backends();
    format!(
        "no wgpu adapter that runs compute shaders (backends tried: {backends:?}; on Linux \
         install a Vulkan driver, e.g. Mesa's lavapipe: apt-get install mesa-vulkan-drivers \
         libvulkan1)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adapters_are_listed_in_preference_order() {
        let found = adapters();
        if found.is_empty() {
            eprintln!("skipped: {}", absence_reason());
            return;
        }
        let kinds: Vec<u8> = found
            .iter()
            .map(|a| preference(a.get_info().device_type))
            .collect();
        if std::env::var_os("WGPU_ADAPTER_NAME").is_none() {
            assert!(kinds.windows(2).all(|w| w[0] <= w[1]), "{kinds:?}");
        }
        for adapter in &found {
            let info = adapter.get_info();
            eprintln!("{} ({:?}, {:?})", info.name, info.backend, info.device_type);
            assert!(runs_compute(adapter));
        }
    }
}
