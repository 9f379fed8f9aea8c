//! `.safetensors` files (feature `safetensors`): every dtype the format names round-trips on
//! every device here, hostile files are errors, and files go both ways between polytensor
//! and Hugging Face's own Python package (`tests/python/safetensors_numpy.py`, under the
//! NumPy venv in `target/pyenv` with `safetensors` installed; without it that test says why
//! and skips, unless `POLYTENSOR_REQUIRE_NUMPY` is set, as in CI).
#![cfg(feature = "safetensors")]

use crate::common;

use std::path::Path;

use polytensor::{safetensors, DataType, Tensor};

fn bytes_of(dtype: DataType, n: usize) -> Vec<u8> {
    (0..n * dtype.size())
        .map(|i| match dtype {
            DataType::Bool => (i % 2) as u8,
            _ => (i * 37 % 251) as u8,
        })
        .collect()
}

#[test]
fn every_format_dtype_round_trips_on_every_device() {
    let dtypes = [
        DataType::Bool,
        DataType::UInt8,
        DataType::Int8,
        DataType::UInt16,
        DataType::Int16,
        DataType::UInt32,
        DataType::Int32,
        DataType::UInt64,
        DataType::Int64,
        DataType::Half,
        DataType::BFloat16,
        DataType::Float,
        DataType::Double,
        DataType::Complex64,
        DataType::Float8E5M2,
        DataType::Float8E4M3FN,
        DataType::Float8E4M3FNUZ,
        DataType::Float8E5M2FNUZ,
    ];
    for entry in polytensor::devices() {
        let Some(device) = entry.device() else {
            continue;
        };
        let tensors: Vec<(String, Tensor)> = dtypes
            .iter()
            .map(|&d| {
                let t = Tensor::from_bytes(&bytes_of(d, 6), [2, 3], d, device).unwrap();
                (d.name().to_string(), t)
            })
            .collect();
        let named: Vec<(&str, &Tensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let file = safetensors::to_bytes(&named).unwrap();
        let back = safetensors::from_bytes(&file, device).unwrap();
        assert_eq!(back.len(), dtypes.len());
        for (name, tensor) in &back {
            let original = &tensors.iter().find(|(n, _)| n == name).unwrap().1;
            assert_eq!(tensor.dtype(), original.dtype(), "{name}");
            assert_eq!(tensor.dims(), [2, 3], "{name}");
            assert_eq!(
                tensor.to_bytes().unwrap(),
                original.to_bytes().unwrap(),
                "{name} on {}",
                device.name()
            );
        }
    }
}

#[test]
fn views_are_written_as_their_elements_and_bad_input_is_an_error() {
    let cpu = polytensor::device("cpu:0").unwrap();
    let t = Tensor::from_slice(&[1i32, 2, 3, 4, 5, 6], [2, 3], &cpu).unwrap();
    let transposed = t.t().unwrap();
    let file = safetensors::to_bytes(&[("t", &transposed)]).unwrap();
    let back = safetensors::from_bytes(&file, &cpu).unwrap();
    assert_eq!(back[0].1.dims(), [3, 2]);
    assert_eq!(back[0].1.to_vec::<i32>().unwrap(), [1, 4, 2, 5, 3, 6]);

    let twice = safetensors::to_bytes(&[("t", &t), ("t", &t)])
        .unwrap_err()
        .to_string();
    assert!(twice.contains("given twice"), "{twice}");
    let strings = Tensor::from_strings(["a"], [1], &cpu).unwrap();
    assert!(safetensors::to_bytes(&[("s", &strings)]).is_err());
    for hostile in [
        &b""[..],
        &[0xff; 8][..],
        &[8, 0, 0, 0, 0, 0, 0, 0, b'{', b'}'][..],
    ] {
        assert!(
            safetensors::from_bytes(hostile, &cpu).is_err(),
            "{hostile:?}"
        );
    }
    // A header that declares more bytes than the file has.
    let mut truncated = file.clone();
    truncated.truncate(file.len() - 4);
    assert!(safetensors::from_bytes(&truncated, &cpu).is_err());
    // Bool bytes other than 0 and 1 are refused, as everywhere bytes enter a tensor.
    let mask = Tensor::from_slice(&[true, false], [2], &cpu).unwrap();
    let mut file = safetensors::to_bytes(&[("m", &mask)]).unwrap();
    let last = file.len() - 1;
    file[last] = 7;
    let message = safetensors::from_bytes(&file, &cpu)
        .unwrap_err()
        .to_string();
    assert!(message.contains("not a valid bool"), "{message}");
    let missing = safetensors::load("/nonexistent/file.safetensors", &cpu).unwrap_err();
    assert!(missing.to_string().contains("cannot read"), "{missing}");
}

#[test]
fn files_go_both_ways_with_huggingface_safetensors() {
    let Some(python) = common::NUMPY.python("numpy, safetensors") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("polytensor-safetensors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (theirs, ours) = (dir.join("theirs.safetensors"), dir.join("ours.safetensors"));
    let run = |mode: &str, path: &Path| {
        common::run_script(
            &python,
            "safetensors_numpy.py",
            &[mode.as_ref(), path.as_os_str()],
        );
    };
    run("write", &theirs);
    let cpu = polytensor::device("cpu:0").unwrap();
    let read = safetensors::load(&theirs, &cpu).unwrap();
    let find = |name: &str| &read.iter().find(|(n, _)| n == name).unwrap().1;
    assert_eq!(find("f32").to_vec::<f32>().unwrap()[3], f32::INFINITY);
    assert_eq!(find("mask").dtype(), DataType::Bool);
    assert_eq!(find("scalar").dims(), Vec::<usize>::new());
    assert_eq!(find("empty").dims(), [0, 4]);
    assert_eq!(find("c64").dtype(), DataType::Complex64);
    // Written back by polytensor, read and compared by their package.
    let named: Vec<(&str, &Tensor)> = read.iter().map(|(n, t)| (n.as_str(), t)).collect();
    safetensors::save(&named, &ours).unwrap();
    run("check", &ours);
    std::fs::remove_dir_all(&dir).ok();
}
