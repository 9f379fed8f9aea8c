//! Casts to and from the five float8 dtypes against `ml_dtypes` (the package TensorFlow,
//! JAX and NumPy share for them), run in TensorFlow's venv (`target/tf-venv`, which has
//! it): every byte of every format decoded, 65,536 f32 values (every f16, widened, plus
//! values past each format's range) and their f64 widenings encoded, and every byte cast
//! to every other format. Devices without float8 casts (the GPU backends) must say so.

use crate::common;

use polytensor::{DataType, Error, Tensor};
use serde_json::Value;

const FORMATS: [(DataType, &str); 5] = [
    (DataType::Float8E5M2, "float8_e5m2"),
    (DataType::Float8E4M3FN, "float8_e4m3fn"),
    (DataType::Float8E4M3FNUZ, "float8_e4m3fnuz"),
    (DataType::Float8E4M3B11FNUZ, "float8_e4m3b11fnuz"),
    (DataType::Float8E5M2FNUZ, "float8_e5m2fnuz"),
];

/// Every f16 value as f32 (ties and subnormals of every float8 format among them), and
/// some f32 values no f16 holds.
fn inputs() -> Vec<f32> {
    let mut values: Vec<f32> = (0..=u16::MAX)
        .map(|bits| polytensor::half::f16::from_bits(bits).to_f32())
        .collect();
    values.extend([
        1e-30, -1e-30, 1e30, -1e30, 448.0001, 239.99, 30.5, 57343.9, 3.4e38,
    ]);
    values
}

fn bytes(value: &Value) -> Vec<u8> {
    let list = value.as_array().expect("a list");
    list.iter().map(|v| v.as_u64().unwrap() as u8).collect()
}

/// `t`'s bytes (float8 tensors are read as their storage).
fn raw(t: &Tensor) -> Vec<u8> {
    t.to_bytes().expect("bytes")
}

#[test]
fn casts_match_ml_dtypes_on_the_cpu() {
    let Some(python) = common::TENSORFLOW.python("ml_dtypes, numpy") else {
        return;
    };
    let values = inputs();
    let dir = std::env::temp_dir().join(format!("polytensor-float8-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("values.f32");
    let le: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&path, le).unwrap();
    let stdout = common::run_script(&python, "float8_ml_dtypes.py", &[path.as_os_str()]);
    std::fs::remove_dir_all(&dir).ok();
    let want: Value = serde_json::from_str(&stdout).unwrap();

    let cpu = polytensor::device("cpu:0").unwrap();
    let f32s = Tensor::from_slice(&values, [values.len()], &cpu).unwrap();
    let f64s = f32s.cast(DataType::Double).unwrap();
    for (dtype, name) in FORMATS {
        let want = &want[name];
        let every_byte: Vec<u8> = (0..=255).collect();
        let stored = Tensor::from_slice(&every_byte, [256], &cpu)
            .unwrap()
            .bitcast(dtype)
            .unwrap();
        let decoded: Vec<u32> = stored
            .cast(DataType::Float)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect();
        let want_decoded: Vec<u32> = want["decode"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        for (byte, (got, expected)) in decoded.iter().zip(&want_decoded).enumerate() {
            let (g, e) = (f32::from_bits(*got), f32::from_bits(*expected));
            assert!(
                got == expected || (g.is_nan() && e.is_nan()),
                "{name}: byte {byte:#04x} decodes to {g}, ml_dtypes says {e}"
            );
        }
        for (source, key) in [(&f32s, "from_f32"), (&f64s, "from_f64")] {
            let got = raw(&source.cast(dtype).unwrap());
            let expected = bytes(&want[key]);
            for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
                assert_eq!(
                    g, e,
                    "{name} {key}: {} encodes to {g:#04x}, ml_dtypes gives {e:#04x}",
                    values[i]
                );
            }
        }
        for (other, other_name) in FORMATS {
            let got = raw(&stored.cast(other).unwrap());
            let expected = bytes(&want["to"][other_name]);
            assert_eq!(got, expected, "{name} -> {other_name}");
        }
    }
}

#[test]
fn float8_casts_compose_with_views_and_other_dtypes() {
    let cpu = polytensor::device("cpu:0").unwrap();
    let x = Tensor::from_slice(&[0.5f32, -1.75, 3.0, 448.0, 1e-3, 100.0], [2, 3], &cpu).unwrap();
    let f8 = x.t().unwrap().cast(DataType::Float8E4M3FN).unwrap();
    assert_eq!(f8.dims(), vec![3, 2]);
    let back = f8
        .cast(DataType::BFloat16)
        .unwrap()
        .cast(DataType::Float)
        .unwrap();
    assert_eq!(
        back.to_vec::<f32>().unwrap(),
        // 1e-3 rounds to the smallest subnormal, 2^-9; 100 to 96 (3 mantissa bits).
        [0.5, 448.0, -1.75, 0.001953125, 3.0, 96.0]
    );
    let ints = f8.cast(DataType::Int32).unwrap().to_vec::<i32>().unwrap();
    assert_eq!(ints, [0, 448, -1, 0, 3, 96]);
}

#[test]
fn devices_without_float8_casts_say_so() {
    for entry in polytensor::devices() {
        let Some(device) = entry.device() else {
            continue;
        };
        let x = Tensor::from_slice(&[1.0f32, 2.0], [2], device).unwrap();
        match x.cast(DataType::Float8E5M2) {
            Ok(f8) => assert_eq!(
                f8.cast(DataType::Float).unwrap().to_vec::<f32>().unwrap(),
                [1.0, 2.0],
                "{}",
                device.name()
            ),
            Err(e) => assert!(
                matches!(e, Error::Unsupported { .. }) && e.to_string().contains("float8_e5m2"),
                "{}: {e}",
                device.name()
            ),
        }
    }
}
