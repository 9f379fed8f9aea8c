//! The facade: device discovery, lookup by name, and the prelude.

use polytensor::prelude::*;
use polytensor::{DeviceKind, DeviceStatus};

#[test]
fn the_cpu_is_always_listed_and_available() {
    let entries = polytensor::devices();
    let cpu = entries
        .iter()
        .find(|e| e.name == "cpu:0")
        .expect("cpu:0 listed");
    assert_eq!(cpu.kind, DeviceKind::CPU);
    assert!(matches!(cpu.status, DeviceStatus::Available(_)));
    assert!(cpu.to_string().starts_with("cpu:0: host CPU"), "{cpu}");
}

#[test]
fn lookup_by_name() {
    let by_name = <dyn Device>::by_name("cpu:0").unwrap();
    let by_family = polytensor::device("cpu").unwrap();
    assert!(polytensor::same_device(&by_name, &by_family));
    assert!(polytensor::same_device(
        &by_name,
        &polytensor::default_device().unwrap()
    ));
    let missing = polytensor::device("cpu:7").unwrap_err().to_string();
    assert!(
        missing.contains("cpu:7") && missing.contains("cpu:0"),
        "{missing}"
    );
    let unknown = polytensor::device("tpu:0").unwrap_err().to_string();
    assert!(unknown.contains("feature"), "{unknown}");
}

#[test]
fn tensors_through_the_facade() {
    let cpu = polytensor::device("cpu:0").unwrap();
    let a = Tensor::scalar(3.0f32, &cpu).unwrap();
    let b = Tensor::scalar(4.0f32, &cpu).unwrap();
    let total = (&a + &b).unwrap();
    assert_eq!(total.item::<f32>().unwrap(), 7.0);
    assert_eq!(total.to_string(), "tf.Tensor(7.0, shape=(), dtype=float32)");
    let caps = cpu.capabilities();
    assert!(caps
        .iter()
        .any(|(op, dtypes)| op.to_string() == "matmul" && dtypes.contains(DataType::BFloat16)));
}

#[test]
fn default_device_is_the_cpu_and_best_device_prefers_a_real_gpu() {
    let default = polytensor::default_device().unwrap();
    assert_eq!(default.name(), "cpu:0", "the documented default");
    let available: Vec<_> = polytensor::devices()
        .iter()
        .filter_map(|e| e.device().cloned())
        .collect();
    for device in &available {
        // Drivers that run on the host CPU (lavapipe, PoCL's CPU device) are no accelerators.
        let description = device.description();
        if description.contains("Cpu)") || description.contains(", CPU,") {
            assert!(!device.is_accelerator(), "{description}");
        }
        eprintln!("{}: accelerator {}", device.name(), device.is_accelerator());
    }
    let best = polytensor::best_device().unwrap();
    match available.iter().find(|d| d.is_accelerator()) {
        Some(first) => assert!(polytensor::same_device(&best, first)),
        None => assert!(polytensor::same_device(&best, &default)),
    }
}
