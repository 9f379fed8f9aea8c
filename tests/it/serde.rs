//! `serde` for tensors (feature `serde`): a tensor serializes as `TensorData`, which
//! deserializes and is placed on a device; what does not fit is an error.
#![cfg(feature = "serde")]

use polytensor::data::TensorData;
use polytensor::{DataType, Tensor};

#[test]
fn tensors_round_trip_through_json_on_every_device() {
    for entry in polytensor::devices() {
        let Some(device) = entry.device() else {
            continue;
        };
        let t = Tensor::from_slice(&[1.5f32, -2.0, 0.25, 8.0], [2, 2], device).unwrap();
        for tensor in [
            t.clone(),
            t.t().unwrap(),
            t.cast(DataType::BFloat16).unwrap(),
            Tensor::from_slice(&[true, false], [2], device).unwrap(),
        ] {
            let json = serde_json::to_string(&tensor).unwrap();
            let data: TensorData = serde_json::from_str(&json).unwrap();
            let back = data.to_tensor(device).unwrap();
            assert_eq!(back.dtype(), tensor.dtype(), "{json}");
            assert_eq!(back.dims(), tensor.dims());
            assert_eq!(
                back.to_bytes().unwrap(),
                tensor.to_bytes().unwrap(),
                "{json}"
            );
        }
    }
    let cpu = polytensor::device("cpu:0").unwrap();
    let strings = Tensor::from_strings(["a", "bc"], [2], &cpu).unwrap();
    let json = serde_json::to_string(&strings).unwrap();
    assert!(json.contains("\"strings\""), "{json}");
    let data: TensorData = serde_json::from_str(&json).unwrap();
    assert_eq!(
        data.to_tensor(&cpu).unwrap().to_strings().unwrap(),
        [b"a".to_vec(), b"bc".to_vec()]
    );
}

#[test]
fn data_that_does_not_fit_is_an_error() {
    let cpu = polytensor::device("cpu:0").unwrap();
    let short: TensorData =
        serde_json::from_str(r#"{"dtype":"float32","shape":[2],"bytes":[0,0,0,0]}"#).unwrap();
    assert!(short.to_tensor(&cpu).is_err());
    let bad_bool: TensorData =
        serde_json::from_str(r#"{"dtype":"bool","shape":[1],"bytes":[7]}"#).unwrap();
    assert!(bad_bool.to_tensor(&cpu).is_err());
    let huge: TensorData =
        serde_json::from_str(r#"{"dtype":"float32","shape":[4294967296,4294967296],"bytes":[]}"#)
            .unwrap();
    assert!(huge.to_tensor(&cpu).is_err());
    let unknown =
        serde_json::from_str::<TensorData>(r#"{"dtype":"float33","shape":[],"bytes":[]}"#);
    assert!(unknown.is_err());
}
