//! TensorFlow's checkpoints (tensor bundles) through `polytensor::checkpoint`: the golden
//! checkpoints of `shared/tf-golden/checkpoints` read byte for byte on every device, new
//! ones TensorFlow writes in this run read back, ours read by TensorFlow (and restored by a
//! TF1 `Saver` into partitioned variables), and corrupt files refused with `DataLoss`.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use polytensor::checkpoint::{merge, Reader, Writer};
use polytensor::{DataType, Device, Error, Tensor, TensorShape, TensorSlice};
use serde_json::{json, Value as Json};

use common::golden;

fn cpu() -> Arc<dyn Device> {
    polytensor::device("cpu:0").unwrap()
}

/// A fresh directory under the target dir.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Check `got` against a golden `{dtype, shape, data_hex | values_b64}`, byte for byte.
fn assert_tensor(got: &Tensor, want: &Json, what: &str) {
    let cpu = cpu();
    let want = golden::tensor(want, &cpu);
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    let got = got.to_device(&cpu).unwrap();
    if got.dtype() == DataType::String {
        assert_eq!(
            got.to_strings().unwrap(),
            want.to_strings().unwrap(),
            "{what}"
        );
    } else {
        assert!(
            got.to_bytes().unwrap() == want.to_bytes().unwrap(),
            "{what}: bytes differ"
        );
    }
}

/// Every tensor of `tensors` (golden JSON by key) read from `reader` onto each device
/// (strings on the CPU: they live on host devices).
fn assert_reads(
    reader: &Reader,
    tensors: &serde_json::Map<String, Json>,
    devices: &[Arc<dyn Device>],
) {
    let keys: Vec<&str> = reader.entries().map(|(k, _)| k).collect();
    let want_keys: Vec<&str> = tensors.keys().map(String::as_str).collect();
    assert_eq!(keys, want_keys, "{}", reader.prefix().display());
    for (key, want) in tensors {
        let entry = reader.entry(key).unwrap();
        assert_eq!(entry.dtype().to_string(), want["dtype"].as_str().unwrap());
        for device in devices {
            if entry.dtype() == DataType::String && device.name() != "cpu:0" {
                continue;
            }
            let got = reader.read(key, device).unwrap();
            assert_eq!(got.device().name(), device.name());
            assert_tensor(&got, want, &format!("{key} on {}", device.name()));
        }
    }
}

/// A golden `"7 5 0,3:0,5"` spec: the full shape and the slice.
fn parse_spec(spec: &str) -> (Vec<usize>, TensorSlice) {
    let mut parts: Vec<&str> = spec.split(' ').collect();
    let slice = parts.pop().unwrap().parse().unwrap();
    (parts.iter().map(|d| d.parse().unwrap()).collect(), slice)
}

#[test]
fn golden_checkpoints_read_byte_for_byte_on_every_device() {
    let Some(dir) = golden::dir("checkpoints") else {
        return;
    };
    let devices = golden::devices();
    let index: Json = golden::json(dir.join("index.json"));
    let cases = index["cases"].as_array().unwrap();
    assert!(cases.len() >= 4);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let golden: Json = golden::json(dir.join(format!("{name}.json")));
        let reader = Reader::open(dir.join(golden["prefix"].as_str().unwrap())).unwrap();
        assert_reads(&reader, golden["tensors"].as_object().unwrap(), &devices);
        for (key, sliced) in golden["slices"].as_object().into_iter().flatten() {
            let entry = reader.entry(key).unwrap();
            let specs: Vec<String> = entry.slices().iter().map(|s| s.to_string()).collect();
            assert_eq!(
                specs.len(),
                sliced["parts"].as_array().unwrap().len(),
                "{key}"
            );
            for part in sliced["parts"].as_array().unwrap() {
                let (full, slice) = parse_spec(part["spec"].as_str().unwrap());
                assert_eq!(entry.shape().dims().as_slice(), full.as_slice());
                for device in &devices {
                    let got = reader.read_slice(key, &slice, device).unwrap();
                    assert_tensor(
                        &got,
                        &part["tensor"],
                        &format!("{key}[{slice}] on {}", device.name()),
                    );
                }
            }
        }
        println!(
            "{name}: {} keys read on {} devices",
            reader.entries().count(),
            devices.len()
        );
    }
}

#[test]
fn a_slice_across_saved_parts_reads_only_what_overlaps() {
    let Some(dir) = golden::dir("checkpoints") else {
        return;
    };
    let cpu = cpu();
    let reader = Reader::open(dir.join("tf1_partitioned/ckpt")).unwrap();
    let whole = reader.read("emb", &cpu).unwrap().to_vec::<f32>().unwrap();
    // Rows 2..6 of [7, 5], columns 1..4: across all three saved parts (rows 0-2, 3-4, 5-6).
    let got = reader
        .read_slice("emb", &"2,4:1,3".parse().unwrap(), &cpu)
        .unwrap();
    assert_eq!(got.shape().dims().as_slice(), [4, 3]);
    let want: Vec<f32> = (2..6)
        .flat_map(|r| (1..4).map(move |c| (r, c)))
        .map(|(r, c)| whole[r * 5 + c])
        .collect();
    assert_eq!(got.to_vec::<f32>().unwrap(), want);
    // A slice of a tensor saved whole, and a full extent.
    let bias = reader
        .read_slice("bias", &"1,2".parse().unwrap(), &cpu)
        .unwrap();
    assert_eq!(bias.to_vec::<f32>().unwrap(), [2.0, 3.0]);
    let proj = reader
        .read_slice("proj", &"1,1:-".parse().unwrap(), &cpu)
        .unwrap();
    assert_eq!(proj.to_vec::<i64>().unwrap(), (-3..3).collect::<Vec<i64>>());
    // Slices that do not fit.
    for bad in ["0,8:-", "-", "0,1:5,2"] {
        let error = reader
            .read_slice("emb", &bad.parse().unwrap(), &cpu)
            .unwrap_err();
        assert!(matches!(error, Error::InvalidSlice(_)), "{bad}: {error}");
    }
}

/// Tensors of every dtype a checkpoint holds, with edge values, on `device`.
fn every_dtype(device: &Arc<dyn Device>) -> Vec<(String, Tensor)> {
    let mut tensors = vec![
        (
            "f32".into(),
            Tensor::from_slice(
                &[
                    0.0f32,
                    -0.0,
                    1.5,
                    f32::MAX,
                    f32::MIN_POSITIVE,
                    f32::INFINITY,
                    f32::NAN,
                ],
                [7],
                device,
            )
            .unwrap(),
        ),
        (
            "f64/nested".into(),
            Tensor::from_slice(
                &[std::f64::consts::PI, -1e308, 5e-324, f64::NEG_INFINITY],
                [2, 2],
                device,
            )
            .unwrap(),
        ),
        (
            "i8".into(),
            Tensor::from_slice(&[i8::MIN, i8::MAX, 0], [3], device).unwrap(),
        ),
        (
            "i16".into(),
            Tensor::from_slice(&[i16::MIN, i16::MAX], [2], device).unwrap(),
        ),
        (
            "i32".into(),
            Tensor::from_slice(&[i32::MIN, -1, i32::MAX], [3, 1], device).unwrap(),
        ),
        ("i64".into(), Tensor::scalar(i64::MIN, device).unwrap()),
        (
            "u8".into(),
            Tensor::from_slice(&[0u8, 255, 7], [3], device).unwrap(),
        ),
        (
            "u16".into(),
            Tensor::from_slice(&[u16::MAX, 1], [2], device).unwrap(),
        ),
        (
            "u32".into(),
            Tensor::from_slice(&[u32::MAX, 2], [1, 2], device).unwrap(),
        ),
        (
            "u64".into(),
            Tensor::from_slice(&[u64::MAX, 3], [2], device).unwrap(),
        ),
        (
            "bool".into(),
            Tensor::from_slice(&[true, false, true], [3], device).unwrap(),
        ),
        (
            "empty".into(),
            Tensor::from_slice::<f32>(&[], [0, 3], device).unwrap(),
        ),
    ];
    for (name, dtype, bytes) in [
        (
            "f16",
            DataType::Half,
            vec![0x00, 0x3c, 0xff, 0x7b, 0x00, 0x7c],
        ),
        ("bf16", DataType::BFloat16, vec![0x80, 0x3f, 0xc0, 0x7f]),
        (
            "c64",
            DataType::Complex64,
            [1.0f32, -2.0]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        ),
        (
            "c128",
            DataType::Complex128,
            [f64::INFINITY, 0.5]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        ),
    ] {
        let count = bytes.len() / dtype.size();
        tensors.push((
            name.into(),
            Tensor::from_bytes(&bytes, [count], dtype, device).unwrap(),
        ));
    }
    tensors
}

fn strings(cpu: &Arc<dyn Device>) -> Vec<(String, Tensor)> {
    vec![
        (
            "str".into(),
            Tensor::from_strings(
                [&b""[..], b"nul\0in", b"\xff\xfe not utf-8", &[b'x'; 300]],
                [2, 2],
                cpu,
            )
            .unwrap(),
        ),
        (
            "str_scalar".into(),
            Tensor::from_strings([&b"one"[..]], [], cpu).unwrap(),
        ),
        (
            "str_empty".into(),
            Tensor::from_strings(Vec::<Vec<u8>>::new(), [0], cpu).unwrap(),
        ),
    ]
}

#[test]
fn tensorflow_reads_what_polytensor_writes() {
    let Some(python) = common::TENSORFLOW.python("tensorflow") else {
        return;
    };
    let cpu = cpu();
    let dir = scratch("checkpoints-written");
    let devices = golden::devices();

    // Every dtype, written from each device (the bytes come back from device memory).
    let mut prefixes = Vec::new();
    let mut expected = Vec::new();
    for device in &devices {
        let prefix = dir.join(device.name().replace(':', "_")).join("ckpt");
        let mut writer = Writer::new(&prefix).unwrap();
        let mut tensors = every_dtype(device);
        tensors.extend(strings(&cpu));
        for (key, tensor) in &tensors {
            writer.add(key, tensor).unwrap();
        }
        writer.finish().unwrap();
        prefixes.push(prefix);
        expected.push(tensors);
    }

    // A partitioned variable in three slices, and a plain one, merged from two writers
    // into one sharded checkpoint.
    let emb: Vec<f32> = (0..35).map(|i| i as f32 * 0.5 - 3.0).collect();
    let full = TensorShape::new(&[7, 5]).unwrap();
    let part = |rows: std::ops::Range<usize>| {
        Tensor::from_slice(&emb[rows.start * 5..rows.end * 5], [rows.len(), 5], &cpu).unwrap()
    };
    let shard_prefixes = [
        dir.join("parts/part-00000-of-00002"),
        dir.join("parts/part-00001-of-00002"),
    ];
    let mut first = Writer::new(&shard_prefixes[0]).unwrap();
    first
        .add_slice("emb", &full, &"0,3:-".parse().unwrap(), &part(0..3))
        .unwrap();
    first
        .add_slice("emb", &full, &"3,2:-".parse().unwrap(), &part(3..5))
        .unwrap();
    first.finish().unwrap();
    let mut second = Writer::new(&shard_prefixes[1]).unwrap();
    second
        .add_slice("emb", &full, &"5,2:-".parse().unwrap(), &part(5..7))
        .unwrap();
    second
        .add(
            "bias",
            &Tensor::from_slice(&[1.0f32, 2.0, 3.0], [3], &cpu).unwrap(),
        )
        .unwrap();
    second.finish().unwrap();
    let sharded = dir.join("sharded/ckpt");
    merge(&shard_prefixes, &sharded, true).unwrap();
    assert!(
        !dir.join("parts").exists(),
        "merge removes the emptied parts directory"
    );
    let reader = Reader::open(&sharded).unwrap();
    assert_eq!(reader.num_shards(), 2);
    assert_eq!(
        reader.read("emb", &cpu).unwrap().to_vec::<f32>().unwrap(),
        emb
    );

    let mut args: Vec<std::ffi::OsString> = vec!["read".into()];
    args.extend(prefixes.iter().map(|p| p.as_os_str().to_owned()));
    args.push(sharded.as_os_str().to_owned());
    let arg_refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let read: Json =
        serde_json::from_str(&common::run_script(&python, "tf_checkpoints.py", &arg_refs)).unwrap();
    for (prefix, tensors) in prefixes.iter().zip(&expected) {
        let got = &read[prefix.to_str().unwrap()];
        assert_eq!(got.as_object().unwrap().len(), tensors.len());
        for (key, tensor) in tensors {
            let on_cpu = tensor.to_device(&cpu).unwrap();
            let tf_read = &got[key];
            assert_tensor(
                &on_cpu,
                tf_read,
                &format!("TensorFlow's read of {key} in {}", prefix.display()),
            );
        }
    }
    let tf_sharded = &read[sharded.to_str().unwrap()];
    assert_tensor(
        &Tensor::from_slice(&emb, [7, 5], &cpu).unwrap(),
        &tf_sharded["emb"],
        "emb",
    );

    // A TF1 Saver restores the partitioned variable into its own partitioning (4 parts
    // along rows, not the 3 saved).
    let spec = json!({"emb": {"shape": [7, 5], "dtype": "float32", "parts": 4, "axis": 0}});
    let restored: Json = serde_json::from_str(&common::run_script(
        &python,
        "tf_checkpoints.py",
        &[
            "restore".as_ref(),
            sharded.as_os_str(),
            spec.to_string().as_ref(),
        ],
    ))
    .unwrap();
    assert_tensor(
        &Tensor::from_slice(&emb, [7, 5], &cpu).unwrap(),
        &restored["emb"],
        "Saver.restore of emb",
    );
}

#[test]
fn polytensor_reads_what_tensorflow_writes_in_this_run() {
    let Some(python) = common::TENSORFLOW.python("tensorflow") else {
        return;
    };
    let dir = scratch("checkpoints-tensorflow");
    let devices = golden::devices();
    let written: Json = serde_json::from_str(&common::run_script(
        &python,
        "tf_checkpoints.py",
        &["write".as_ref(), dir.as_os_str(), "7".as_ref()],
    ))
    .unwrap();
    for (name, checkpoint) in written["checkpoints"].as_object().unwrap() {
        let reader = Reader::open(checkpoint["prefix"].as_str().unwrap()).unwrap();
        assert_reads(
            &reader,
            checkpoint["tensors"].as_object().unwrap(),
            &devices,
        );
        println!(
            "{name}: {} keys in {} shards",
            reader.entries().count(),
            reader.num_shards()
        );
    }
}

#[test]
fn corrupt_and_missing_checkpoints_are_refused_with_tensorflow_codes() {
    let cpu = cpu();
    let dir = scratch("checkpoints-corrupt");
    let prefix = dir.join("ckpt");
    let mut writer = Writer::new(&prefix).unwrap();
    let values: Vec<f32> = (0..1000).map(|i| i as f32).collect();
    writer
        .add("w", &Tensor::from_slice(&values, [1000], &cpu).unwrap())
        .unwrap();
    writer
        .add(
            "s",
            &Tensor::from_strings([&b"abc"[..], b"de"], [2], &cpu).unwrap(),
        )
        .unwrap();
    assert!(matches!(
        writer.add("w", &Tensor::scalar(1.0f32, &cpu).unwrap()),
        Err(Error::InvalidArgument(_))
    ));
    writer.finish().unwrap();

    let reader = Reader::open(&prefix).unwrap();
    let error = reader.read("missing", &cpu).unwrap_err();
    assert_eq!(
        error,
        Error::NotFound("Key missing not found in checkpoint".into())
    );
    assert!(matches!(
        Reader::open(dir.join("nothing")),
        Err(Error::NotFound(_))
    ));

    // A flipped bit in the data: the read of that key fails, naming file and key.
    let data = polytensor::checkpoint::data_path(&prefix, 0, 1);
    let original = std::fs::read(&data).unwrap();
    for (at, key) in [(100, "w"), (4005, "s"), (original.len() - 1, "s")] {
        let mut broken = original.clone();
        broken[at] ^= 0x10;
        std::fs::write(&data, &broken).unwrap();
        match Reader::open(&prefix).unwrap().read(key, &cpu) {
            Err(Error::DataLoss(message)) => {
                assert!(
                    message.contains(key) && message.contains("ckpt.data-00000-of-00001"),
                    "{message}"
                );
            }
            other => panic!("byte {at}: {other:?}"),
        }
    }
    // A truncated data file.
    std::fs::write(&data, &original[..2000]).unwrap();
    assert!(matches!(
        Reader::open(&prefix).unwrap().read("w", &cpu),
        Err(Error::DataLoss(_))
    ));
    std::fs::write(&data, &original).unwrap();

    // Every flipped byte of the index is refused or changes nothing read.
    let index = polytensor::checkpoint::index_path(&prefix);
    let original_index = std::fs::read(&index).unwrap();
    for at in 0..original_index.len() {
        let mut broken = original_index.clone();
        broken[at] ^= 0x01;
        std::fs::write(&index, &broken).unwrap();
        match Reader::open(&prefix) {
            Err(Error::DataLoss(message)) => assert!(message.contains("ckpt.index"), "{message}"),
            Err(other) => panic!("byte {at}: {other}"),
            Ok(reader) => {
                if let Ok(w) = reader.read("w", &cpu) {
                    assert_eq!(w.to_vec::<f32>().unwrap(), values, "byte {at}");
                }
            }
        }
    }
    std::fs::write(&index, &original_index[..30]).unwrap();
    assert!(matches!(Reader::open(&prefix), Err(Error::DataLoss(_))));
}

#[test]
fn a_tensorflow_saver_graph_saves_and_restores_in_polytensor() {
    let Some(python) = common::TENSORFLOW.python("tensorflow") else {
        return;
    };
    let dir = scratch("checkpoints-saver-graph");
    let made: Json = serde_json::from_str(&common::run_script(
        &python,
        "tf_checkpoints.py",
        &["saver_graph".as_ref(), dir.as_os_str()],
    ))
    .unwrap();
    let graph = polytensor::graph::Graph::read_graph_def(made["graph"].as_str().unwrap()).unwrap();
    let reads: Vec<(&str, &str)> = made["reads"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str().unwrap()))
        .collect();
    let read_names: Vec<&str> = reads.iter().map(|r| r.1).collect();
    let cpu = cpu();
    for device in golden::devices() {
        // Variables on `device` (the saver's string ops stay on the CPU).
        let mut devices = vec![device.clone()];
        if device.name() != "cpu:0" {
            devices.push(cpu.clone());
        }
        let session = polytensor::graph::Session::with_options(
            &graph,
            polytensor::graph::SessionOptions::new(devices),
        )
        .unwrap();
        session
            .run_by_name(&[], &[], &[made["init"].as_str().unwrap()])
            .unwrap();
        let initial = session.run_by_name(&[], &read_names, &[]).unwrap();

        // polytensor saves through the graph's sharded saver; TensorFlow reads it.
        let prefix = dir.join(device.name().replace(':', "_")).join("ckpt");
        let filename = Tensor::from_strings([prefix.to_str().unwrap()], [], &cpu).unwrap();
        let saved = session
            .run_by_name(
                &[(made["filename"].as_str().unwrap(), &filename)],
                &[made["save"].as_str().unwrap()],
                &[],
            )
            .unwrap();
        assert_eq!(
            saved[0].to_strings().unwrap(),
            [prefix.to_str().unwrap().as_bytes()]
        );
        let tf_read: Json = serde_json::from_str(&common::run_script(
            &python,
            "tf_checkpoints.py",
            &["read".as_ref(), prefix.as_os_str()],
        ))
        .unwrap();
        let tf_read = &tf_read[prefix.to_str().unwrap()];
        for ((key, _), value) in reads.iter().zip(&initial) {
            let value = value.to_device(&cpu).unwrap();
            assert_tensor(
                &value,
                &tf_read[*key],
                &format!("TensorFlow's read of {key} saved from {}", device.name()),
            );
        }

        // polytensor restores what TensorFlow's session saved (other values).
        let tf_prefix =
            Tensor::from_strings([made["tf_prefix"].as_str().unwrap()], [], &cpu).unwrap();
        session
            .run_by_name(
                &[(made["filename"].as_str().unwrap(), &tf_prefix)],
                &[],
                &[made["restore"].as_str().unwrap()],
            )
            .unwrap();
        let restored = session.run_by_name(&[], &read_names, &[]).unwrap();
        for ((key, _), value) in reads.iter().zip(&restored) {
            let value = value.to_device(&cpu).unwrap();
            assert_tensor(
                &value,
                &made["tf_saved"][*key],
                &format!("{key} restored on {}", device.name()),
            );
        }
    }
}
