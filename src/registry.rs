//! The device registry: which devices this machine has, for each compiled-in backend.

use std::fmt;
use std::sync::{Arc, OnceLock};

use polytensor_core::{Device, DeviceKind, Error, Result};

/// Whether a device (or a whole backend) can be used here.
#[derive(Clone)]
pub enum DeviceStatus {
    /// The device is present and opened.
    Available(Arc<dyn Device>),
    /// The backend is compiled in but has no usable device here, and why (no driver, ...).
    Unavailable(String),
}

/// One entry of [`devices()`]: a device, or a compiled-in backend without one.
#[derive(Clone)]
pub struct DeviceEntry {
    /// The device name (`cpu:0`), or the backend name (`wgpu`) when it has no device.
    pub name: String,
    /// The backend family.
    pub kind: DeviceKind,
    /// Present, or absent with the reason.
    pub status: DeviceStatus,
}

impl DeviceEntry {
    /// The device, if available.
    pub fn device(&self) -> Option<&Arc<dyn Device>> {
        match &self.status {
            DeviceStatus::Available(device) => Some(device),
            DeviceStatus::Unavailable(_) => None,
        }
    }
}

impl fmt::Debug for DeviceEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for DeviceEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.status {
            DeviceStatus::Available(device) => write!(f, "{}: {}", self.name, device.description()),
            DeviceStatus::Unavailable(why) => write!(f, "{}: unavailable ({why})", self.name),
        }
    }
}

/// How a backend finds its devices: the devices, or why there are none.
type Probe = fn() -> std::result::Result<Vec<Arc<dyn Device>>, String>;

/// A compiled-in backend: its family and how to find its devices.
struct Backend {
    kind: DeviceKind,
    probe: Probe,
}

/// The backends compiled into this build: [`default_device`] is the first device found (the
/// CPU's, when compiled in), [`best_device`] the first accelerator in this order.
const BACKENDS: &[Backend] = &[
    #[cfg(feature = "cpu")]
    Backend {
        kind: DeviceKind::CPU,
        probe: || Ok(vec![polytensor_cpu::CpuDevice::shared()]),
    },
    #[cfg(feature = "cuda")]
    Backend {
        kind: polytensor_cuda::KIND,
        probe: polytensor_cuda::open_all,
    },
    #[cfg(feature = "opencl")]
    Backend {
        kind: polytensor_opencl::KIND,
        probe: polytensor_opencl::open_all,
    },
    #[cfg(feature = "wgpu")]
    Backend {
        kind: polytensor_wgpu::KIND,
        probe: polytensor_wgpu::open_all,
    },
];

/// Every device this machine has, and every compiled-in backend that has none (with the
/// reason). Backends are probed once per process.
///
/// ```
/// for entry in polytensor::devices() {
///     println!("{entry}");
/// }
/// ```
pub fn devices() -> Vec<DeviceEntry> {
    static DEVICES: OnceLock<Vec<DeviceEntry>> = OnceLock::new();
    DEVICES
        .get_or_init(|| {
            BACKENDS
                .iter()
                .flat_map(|backend| match (backend.probe)() {
                    Ok(found) if !found.is_empty() => found
                        .into_iter()
                        .map(|device| DeviceEntry {
                            name: device.name().to_string(),
                            kind: backend.kind,
                            status: DeviceStatus::Available(device),
                        })
                        .collect(),
                    Ok(_) => vec![unavailable(backend.kind, "no device found".into())],
                    Err(why) => vec![unavailable(backend.kind, why)],
                })
                .collect()
        })
        .clone()
}

fn unavailable(kind: DeviceKind, why: String) -> DeviceEntry {
    DeviceEntry {
        name: kind.name().to_string(),
        kind,
        status: DeviceStatus::Unavailable(why),
    }
}

/// The device named `name` (`cpu:0`; a bare family name such as `cpu` means its first
/// device). An `Err` naming the reason if it is absent or unknown.
///
/// ```
/// let cpu = polytensor::device("cpu:0")?;
/// assert_eq!(cpu.name(), "cpu:0");
/// assert!(polytensor::device("tpu:3").is_err());
/// # Ok::<(), polytensor::Error>(())
/// ```
pub fn device(name: &str) -> Result<Arc<dyn Device>> {
    let entries = devices();
    let family = name.split(':').next().unwrap_or(name);
    let wanted =
        |e: &&DeviceEntry| e.name == name || (!name.contains(':') && e.kind.name() == family);
    if let Some(device) = entries.iter().filter(wanted).find_map(DeviceEntry::device) {
        return Ok(device.clone());
    }
    let why = match entries.iter().find(|e| e.kind.name() == family) {
        Some(DeviceEntry { status: DeviceStatus::Unavailable(why), .. }) => why.clone(),
        Some(_) => format!("no such device; this machine has {}", names(&entries)),
        None => format!(
            "no compiled-in backend is called {family:?} (enable its cargo feature); this machine has {}",
            names(&entries)
        ),
    };
    Err(Error::DeviceUnavailable {
        device: name.to_string(),
        why,
    })
}

fn names(entries: &[DeviceEntry]) -> String {
    let names: Vec<&str> = entries
        .iter()
        .filter(|e| e.device().is_some())
        .map(|e| e.name.as_str())
        .collect();
    if names.is_empty() {
        "no devices".into()
    } else {
        names.join(", ")
    }
}

/// The first available device of the backend table: `cpu:0` whenever the `cpu` feature is
/// on (the default), on every machine, so that a program behaves the same everywhere. For
/// a GPU when the machine has one, ask for [`best_device`].
pub fn default_device() -> Result<Arc<dyn Device>> {
    devices()
        .iter()
        .find_map(|e| e.device().cloned())
        .ok_or_else(|| Error::DeviceUnavailable {
            device: "default".into(),
            why: "no backend found a device; enable the `cpu` feature".into(),
        })
}

/// The fastest kind of device this machine has, as candle's and burn's defaults pick it:
/// the first accelerator (a real GPU: [`Device::is_accelerator`]) among CUDA, OpenCL and
/// wgpu devices, in that order; the [`default_device`] (the CPU) when there is none.
/// Drivers that run on the CPU (Mesa's lavapipe, PoCL's CPU device) are not accelerators.
///
/// ```
/// let device = polytensor::best_device()?;
/// assert!(device.is_accelerator() || device.name() == "cpu:0");
/// # Ok::<(), polytensor::Error>(())
/// ```
pub fn best_device() -> Result<Arc<dyn Device>> {
    let entries = devices();
    match entries
        .iter()
        .filter_map(DeviceEntry::device)
        .find(|device| device.is_accelerator())
    {
        Some(device) => Ok(device.clone()),
        None => default_device(),
    }
}

/// `Device::by_name` for the device trait object: `<dyn Device>::by_name("cpu:0")`
/// (Rust spells a trait's inherent functions with `dyn`). The same as [`device`].
pub trait DeviceByName {
    /// The device named `name`; see [`device`].
    fn by_name(name: &str) -> Result<Arc<dyn Device>>;
}

impl DeviceByName for dyn Device {
    fn by_name(name: &str) -> Result<Arc<dyn Device>> {
        device(name)
    }
}
