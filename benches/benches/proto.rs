//! TensorProto encode and decode of 64 MiB tensors, next to a memcpy of the same size into
//! an existing buffer and into a fresh one (the physical limits).
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

criterion_group! {
    name = proto_benches;
    config = benches::criterion_config();
    targets = proto
}
criterion_main!(proto_benches);
