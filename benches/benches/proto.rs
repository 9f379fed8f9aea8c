//! TensorProto encode and decode of 64 MiB tensors, next to a memcpy of the same size into
//! an existing buffer and into a fresh one (the physical limits); and a 1 GiB checkpoint
//! read and written, next to `cat` of its data file to `/dev/null`.
//!
//! `proto_decode_64MiB` has one row per decode path, polytensor beside both memcpys, so that
//! `cargo xtask bench` prints the ratio a regression moves: the copying decode of f32 runs
//! at a memcpy's speed (ratio about 1), the aligned decode shares the bytes (a ratio in the
//! thousands), and bool and int4 content is validated at memory speed. (A validity check
//! run on every byte of every dtype once made the f32 decodes 6x and 75000x slower.)
//! `f32_shared_then_written` writes to the shared decode: one copy on write, no more.

use std::hint::black_box;

use benches::tensor;
use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use polytensor::proto::{Message, TensorProto};
use polytensor::{DataType, Tensor};

const ELEMENTS: usize = 16 << 20;
const BYTES: usize = ELEMENTS * 4;

/// The encoded message in a buffer placed so that its `tensor_content` starts on a
/// 64-byte boundary (`aligned`) or one byte past it.
fn placed(message: &[u8], aligned: bool) -> Bytes {
    let header = message.len() - BYTES;
    let mut buffer = Vec::with_capacity(message.len() + 128);
    let misalignment = (buffer.as_ptr() as usize + header) % 64;
    let pad = (64 - misalignment) % 64 + usize::from(!aligned);
    buffer.resize(pad, 0);
    buffer.extend_from_slice(message);
    Bytes::from(buffer).slice(pad..)
}

fn proto(c: &mut Criterion) {
    let device = polytensor::default_device().expect("the CPU device");
    let t = tensor(&[4096, 4096], DataType::Float, 7, &device);
    let message = t.encode_proto().unwrap();
    let mut group = c.benchmark_group("proto_64MiB_f32");
    group.throughput(Throughput::Bytes(BYTES as u64));

    group.bench_function("encode_proto", |b| {
        b.iter(|| black_box(t.encode_proto().unwrap()))
    });
    let mut reused = Vec::with_capacity(message.len());
    group.bench_function("encode_proto_into_existing", |b| {
        b.iter(|| {
            reused.clear();
            t.encode_proto_into(&mut reused).unwrap();
            black_box(&reused);
        })
    });
    let prebuilt = t.to_proto().unwrap();
    group.bench_function("prost_encode_to_vec_of_prebuilt_proto", |b| {
        b.iter(|| black_box(prebuilt.encode_to_vec()))
    });
    group.bench_function("decode_prost_message_only", |b| {
        let input = placed(&message, false);
        b.iter(|| black_box(TensorProto::decode(input.clone()).unwrap()))
    });
    group.finish();
    decode(c, &device);
}

/// Decoding 64 MiB of `tensor_content` by every path, each row beside both memcpys.
fn decode(c: &mut Criterion, device: &std::sync::Arc<dyn polytensor::Device>) {
    let mut group = c.benchmark_group("proto_decode_64MiB");
    group.throughput(Throughput::Bytes(BYTES as u64));
    let source = vec![1u8; BYTES];
    let mut existing = vec![0u8; BYTES];
    let rows = [
        // Misaligned content: one copy into the device's memory.
        ("f32_copied", DataType::Float, false),
        // Aligned content on the host: shared, not copied or read.
        ("f32_shared", DataType::Float, true),
        // Bool and int4 have invalid bytes: shared after one validating read.
        ("bool_shared_validated", DataType::Bool, true),
        ("int4_shared_validated", DataType::Int4, true),
    ];
    for (row, dtype, aligned) in rows {
        let t = match dtype {
            // Every int4 in both forms: 0..=15 is -8..=7 in the low bits.
            DataType::Int4 => {
                let bytes: Vec<u8> = (0..BYTES).map(|i| (i % 16) as u8).collect();
                Tensor::from_bytes(&bytes, [BYTES], dtype, device).unwrap()
            }
            _ => tensor(&[BYTES / dtype.size()], dtype, 7, device),
        };
        // `as_proto_tensor_content`: bool and int4 would otherwise take their typed field.
        let input = placed(
            &t.as_proto_tensor_content().unwrap().encode_to_vec(),
            aligned,
        );
        group.bench_function(BenchmarkId::new("polytensor", row), |b| {
            b.iter(|| black_box(Tensor::decode_proto(input.clone(), device).unwrap()))
        });
        if row == "f32_shared" {
            // The shared decode, then a write: copy on write makes the tensor's own buffer
            // (one copy of 64 MiB; a second copy here would double the row).
            group.bench_function(
                BenchmarkId::new("polytensor", "f32_shared_then_written"),
                |b| {
                    b.iter(|| {
                        let mut t = Tensor::decode_proto(input.clone(), device).unwrap();
                        t.as_slice_mut::<f32>().unwrap()[0] = 1.0;
                        black_box(t)
                    })
                },
            );
        }
        group.bench_function(BenchmarkId::new("memcpy_into_existing", row), |b| {
            b.iter(|| {
                existing.copy_from_slice(&source);
                black_box(&existing);
            })
        });
        group.bench_function(BenchmarkId::new("memcpy_into_fresh", row), |b| {
            b.iter(|| black_box(source.to_vec()))
        });
    }
    group.finish();
}

/// A checkpoint of about 1 GiB shaped like a model's: a few large tensors and many small
/// ones, written once into `target/bench-data` and kept (in the page cache, as both the
/// reader and `cat` find it).
fn checkpoint_prefix(
    device: &std::sync::Arc<dyn polytensor::Device>,
) -> (std::path::PathBuf, Vec<(String, Tensor)>) {
    let sizes: Vec<usize> = [64 << 20, 64 << 20, 32 << 20, 32 << 20, 16 << 20, 16 << 20]
        .into_iter()
        .chain((0..100).map(|i| 1024 << (i % 10)))
        .collect();
    let tensors: Vec<(String, Tensor)> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            (
                format!("layer_{i:03}/kernel"),
                tensor(&[n], DataType::Float, i as u64, device),
            )
        })
        .collect();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/bench-data/checkpoint-1GiB");
    let prefix = dir.join("ckpt");
    let bytes: u64 = sizes.iter().map(|&n| n as u64 * 4).sum();
    let data = polytensor::checkpoint::data_path(&prefix, 0, 1);
    if std::fs::metadata(&data).map(|m| m.len()).ok() != Some(bytes) {
        let mut writer = polytensor::checkpoint::Writer::new(&prefix).unwrap();
        for (key, t) in &tensors {
            writer.add(key, t).unwrap();
        }
        writer.finish().unwrap();
    }
    (prefix, tensors)
}

/// Reading every tensor of a 1 GiB checkpoint onto the CPU, checksums checked, beside `cat`
/// of the data file to `/dev/null` (the bar: at least 0.9x `cat`'s speed); and
/// writing it.
fn checkpoint(c: &mut Criterion) {
    let device = polytensor::default_device().expect("the CPU device");
    let (prefix, tensors) = checkpoint_prefix(&device);
    let data = polytensor::checkpoint::data_path(&prefix, 0, 1);
    let bytes = std::fs::metadata(&data).unwrap().len();
    let mut group = c.benchmark_group("checkpoint_1GiB");
    group.throughput(Throughput::Bytes(bytes));
    group.sample_size(10);
    group.bench_function(BenchmarkId::new("polytensor", "read_all_cpu"), |b| {
        b.iter(|| {
            let reader = polytensor::checkpoint::Reader::open(&prefix).unwrap();
            let keys: Vec<String> = reader.entries().map(|(k, _)| k.to_string()).collect();
            let read: Vec<Tensor> = keys
                .iter()
                .map(|k| reader.read(k, &device).unwrap())
                .collect();
            black_box(read)
        })
    });
    group.bench_function(BenchmarkId::new("cat_to_dev_null", "read_all_cpu"), |b| {
        b.iter(|| {
            let status = std::process::Command::new("cat")
                .arg(&data)
                .stdout(std::process::Stdio::null())
                .status()
                .unwrap();
            assert!(status.success());
        })
    });
    let scratch = prefix.with_file_name("written");
    group.bench_function(BenchmarkId::new("polytensor", "write_all"), |b| {
        b.iter(|| {
            let mut writer = polytensor::checkpoint::Writer::new(&scratch).unwrap();
            for (key, t) in &tensors {
                writer.add(key, t).unwrap();
            }
            writer.finish().unwrap();
        })
    });
    group.finish();
    let _ = std::fs::remove_file(polytensor::checkpoint::data_path(&scratch, 0, 1));
}

criterion_group! {
    name = proto_benches;
    config = benches::criterion_config();
    targets = proto, checkpoint
}
criterion_main!(proto_benches);
