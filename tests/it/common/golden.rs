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

/// The JSON document in the file at `path`.
pub fn json(path: impl AsRef<Path>) -> Json {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Bytes from hex digits.
pub fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

/// The dims of a golden tensor's `shape`.
pub fn dims(spec: &Json) -> Vec<usize> {
    spec["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect()
}

/// A tensor from a golden `{"dtype", "shape", "data_hex"}`, or `{"dtype": "string",
/// "shape", "values_b64"}` (placed on the CPU, where strings live).
pub fn tensor(spec: &Json, device: &Arc<dyn Device>) -> Tensor {
    if spec["dtype"] == "string" {
        use base64::Engine;
        let values: Vec<Vec<u8>> = spec["values_b64"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                base64::engine::general_purpose::STANDARD
                    .decode(v.as_str().unwrap())
                    .unwrap()
            })
            .collect();
        let cpu = polytensor::device("cpu:0").unwrap();
        return Tensor::from_strings(values, dims(spec), &cpu).unwrap();
    }
    let dtype: DataType = spec["dtype"].as_str().unwrap().parse().unwrap();
    Tensor::from_bytes(
        &hex(spec["data_hex"].as_str().unwrap()),
        dims(spec),
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
