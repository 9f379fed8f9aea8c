//! TensorProto encode and decode of a 64 MiB f32 tensor, next to a memcpy of the same size
//! into an existing buffer and into a fresh one (the physical limits).

use std::hint::black_box;

use benches::tensor;
use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
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
    for (name, aligned) in [
        ("decode_aligned_shared", true),
        ("decode_misaligned_copied", false),
    ] {
        let input = placed(&message, aligned);
        group.bench_function(name, |b| {
            b.iter(|| black_box(Tensor::decode_proto(input.clone(), &device).unwrap()))
        });
    }
    group.bench_function("decode_prost_message_only", |b| {
        let input = placed(&message, false);
        b.iter(|| black_box(TensorProto::decode(input.clone()).unwrap()))
    });

    let source = t.to_bytes().unwrap();
    let mut existing = vec![0u8; BYTES];
    group.bench_function("memcpy_into_existing", |b| {
        b.iter(|| {
            existing.copy_from_slice(&source);
            black_box(&existing);
        })
    });
    group.bench_function("memcpy_into_fresh", |b| {
        b.iter(|| black_box(source.to_vec()))
    });
    group.finish();
}

criterion_group! {
    name = proto_benches;
    config = benches::criterion_config();
    targets = proto
}
criterion_main!(proto_benches);
