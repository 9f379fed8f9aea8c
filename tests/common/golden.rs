//! Reading the data TensorFlow wrote in `shared/tf-golden`: the folder (absent: skip, unless
//! `POLYTENSOR_REQUIRE_GOLDEN` is set), tensors given as `{"dtype", "shape", "data_hex"}`,
//! and the devices to run on.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use polytensor::{DataType, Device, Tensor};
use serde_json::Value as Json;

/// `shared/tf-golden/<part>` beside the repository, or `None` after saying why not (a
/// panic when `POLYTENSOR_REQUIRE_GOLDEN` is set, as in CI).
pub fn dir(part: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/tf-golden")
        .join(part);
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("POLYTENSOR_REQUIRE_GOLDEN").is_none(),
        "POLYTENSOR_REQUIRE_GOLDEN is set but {} is missing",
        dir.display()
    );
    eprintln!("skipped: no TensorFlow golden data at {}", dir.display());
    None
}

/// Bytes from hex digits.
pub fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

/// A tensor from a golden `{"dtype", "shape", "data_hex"}`.
pub fn tensor(spec: &Json, device: &Arc<dyn Device>) -> Tensor {
    let dtype: DataType = spec["dtype"].as_str().unwrap().parse().unwrap();
    let dims: Vec<usize> = spec["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    Tensor::from_bytes(
        &hex(spec["data_hex"].as_str().unwrap()),
        dims,
        dtype,
        device,
    )
    .unwrap()
}

/// Every device this build can open (saying which it skips, and failing for one that
/// `POLYTENSOR_REQUIRE` names).
pub fn devices() -> Vec<Arc<dyn Device>> {
    let required = std::env::var("POLYTENSOR_REQUIRE").unwrap_or_default();
    polytensor::devices()
        .iter()
        .filter_map(|entry| match entry.device() {
            Some(device) => Some(device.clone()),
            None => {
                assert!(
                    !required.split(',').any(|r| r.trim() == entry.name),
                    "POLYTENSOR_REQUIRE names it, but {entry}"
                );
                eprintln!("golden data skips {entry}");
                None
            }
        })
        .collect()
}
