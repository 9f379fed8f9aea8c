//! NumPy's `.npy` and `.npz` files (feature `npy`): every dtype NumPy shares round-trips on
//! every device here, hostile files are errors, and files go both ways with NumPy itself
//! (`tests/python/npy_numpy.py` under the NumPy venv in `target/pyenv`; without it that
//! test says why and skips, unless `POLYTENSOR_REQUIRE_NUMPY` is set, as in CI).
#![cfg(feature = "npy")]

use crate::common;

use polytensor::{npy, DataType, Tensor};

#[test]
fn numpy_dtypes_round_trip_on_every_device() {
    let dtypes = [
        DataType::Bool,
        DataType::Int8,
        DataType::Int16,
        DataType::Int32,
        DataType::Int64,
        DataType::UInt8,
        DataType::UInt16,
        DataType::UInt32,
        DataType::UInt64,
        DataType::Half,
        DataType::Float,
        DataType::Double,
        DataType::Complex64,
        DataType::Complex128,
    ];
    for entry in polytensor::devices() {
        let Some(device) = entry.device() else {
            continue;
        };
        for dtype in dtypes {
            let bytes: Vec<u8> = (0..6 * dtype.size())
                .map(|i| {
                    if dtype == DataType::Bool {
                        (i % 2) as u8
                    } else {
                        (i * 29 % 253) as u8
                    }
                })
                .collect();
            let t = Tensor::from_bytes(&bytes, [2, 3], dtype, device).unwrap();
            let back = npy::from_bytes(&npy::to_bytes(&t).unwrap(), device).unwrap();
            assert_eq!((back.dtype(), back.dims()), (dtype, vec![2, 3]), "{dtype}");
            assert_eq!(
                back.to_bytes().unwrap(),
                bytes,
                "{dtype} on {}",
                device.name()
            );
        }
    }
}

#[test]
fn views_archives_and_bad_input() {
    let cpu = polytensor::device("cpu:0").unwrap();
    let t = Tensor::from_slice(&[1i32, 2, 3, 4, 5, 6], [2, 3], &cpu).unwrap();
    let back = npy::from_bytes(&npy::to_bytes(&t.t().unwrap()).unwrap(), &cpu).unwrap();
    assert_eq!(back.to_vec::<i32>().unwrap(), [1, 4, 2, 5, 3, 6]);
    let ones = Tensor::ones([2], DataType::Float, &cpu).unwrap();
    let archive = npy::to_npz_bytes(&[("t", &t), ("ones", &ones)]).unwrap();
    let read = npy::from_npz_bytes(&archive, &cpu).unwrap();
    assert_eq!(read[0].0, "ones");
    assert_eq!(read[1].1.to_vec::<i32>().unwrap(), [1, 2, 3, 4, 5, 6]);

    let bf16 = t.cast(DataType::BFloat16).unwrap();
    assert!(npy::to_bytes(&bf16)
        .unwrap_err()
        .to_string()
        .contains("NumPy has no dtype"));
    for hostile in [
        &b""[..],
        &b"\x93NUMPY\x01\x00\x02\x00{}"[..],
        &[0u8; 64][..],
    ] {
        assert!(npy::from_bytes(hostile, &cpu).is_err(), "{hostile:?}");
        assert!(npy::from_npz_bytes(hostile, &cpu).is_err(), "{hostile:?}");
    }
    // Truncated data and a bool byte that is neither 0 nor 1.
    let mut file = npy::to_bytes(&t).unwrap();
    file.truncate(file.len() - 3);
    assert!(npy::from_bytes(&file, &cpu).is_err());
    let mask = Tensor::from_slice(&[true, false], [2], &cpu).unwrap();
    let mut file = npy::to_bytes(&mask).unwrap();
    let last = file.len() - 1;
    file[last] = 9;
    assert!(npy::from_bytes(&file, &cpu).is_err());
}

#[test]
fn files_go_both_ways_with_numpy() {
    let Some(python) = common::NUMPY.python("numpy") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("polytensor-npy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = |mode: &str| {
        common::run_script(&python, "npy_numpy.py", &[mode.as_ref(), dir.as_os_str()]);
    };
    run("write");
    let cpu = polytensor::device("cpu:0").unwrap();
    let fortran = npy::load(dir.join("fortran.npy"), &cpu).unwrap();
    let want: Vec<i32> = (0..24).collect();
    assert_eq!(fortran.dims(), [2, 3, 4]);
    assert_eq!(
        fortran.to_vec::<i32>().unwrap(),
        want,
        "Fortran order read as a view"
    );
    let big = npy::load(dir.join("big_endian.npy"), &cpu).unwrap();
    assert_eq!(big.to_vec::<f64>().unwrap(), [1.5, -2.25]);
    let plain = npy::load_npz(dir.join("plain.npz"), &cpu).unwrap();
    let compressed = npy::load_npz(dir.join("compressed.npz"), &cpu).unwrap();
    assert_eq!(plain.len(), 11);
    for ((name, a), (_, b)) in plain.iter().zip(&compressed) {
        assert_eq!(a.to_bytes().unwrap(), b.to_bytes().unwrap(), "{name}");
        npy::save(a, dir.join(format!("{name}.npy"))).unwrap();
    }
    let named: Vec<(&str, &Tensor)> = plain.iter().map(|(n, t)| (n.as_str(), t)).collect();
    npy::save_npz(&named, dir.join("ours.npz")).unwrap();
    run("check");
    std::fs::remove_dir_all(&dir).ok();
}
