//! wgpu benchmarks next to the CPU backend: add, matmul, a reduction, and the cost of one
//! kernel dispatch.
//!
//! On lavapipe (Mesa's Vulkan CPU driver, what CI and this machine have) these measure the
//! backend's overhead (encoding, submission, synchronisation, the driver's own thread
//! pool), not GPU speed; `docs/PERFORMANCE.md` records them as such. Every wgpu case waits
//! for the device (`synchronize`) so that the time is the work's, not the submission's.
//! With no wgpu adapter, the benchmarks print why and measure nothing.

use std::hint::black_box;

use benches::{cpu_and, finished, tensor};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use polytensor::{DataType, ReduceOp};

/// One kernel on tiny tensors: the fixed cost of a dispatch (and of the read back).
fn dispatch(c: &mut Criterion) {
    let Some([cpu, wgpu]) = cpu_and("wgpu") else {
        return;
    };
    let mut group = c.benchmark_group("wgpu_dispatch");
    for device in [&cpu, &wgpu] {
        let (a, b) = (
            tensor(&[1], DataType::Float, 1, device),
            tensor(&[1], DataType::Float, 2, device),
        );
        let backend = device.name().split(':').next().unwrap_or("?").to_string();
        group.bench_function(BenchmarkId::new(&backend, "add_1_element"), |bench| {
            bench.iter(|| black_box(finished(device, || a.add(&b).unwrap())))
        });
        group.bench_function(BenchmarkId::new(&backend, "add_then_to_vec"), |bench| {
            bench.iter(|| black_box(a.add(&b).unwrap().to_vec::<f32>().unwrap()))
        });
    }
    group.finish();
}

/// `a + b` on 1M f32 and a [1024,1024] + [1024] broadcast.
fn add(c: &mut Criterion) {
    let Some([cpu, wgpu]) = cpu_and("wgpu") else {
        return;
    };
    let n = 1 << 20;
    let mut group = c.benchmark_group("wgpu_add_f32");
    group.throughput(Throughput::Bytes((3 * n * 4) as u64));
    for device in [&cpu, &wgpu] {
        let backend = device.name().split(':').next().unwrap_or("?").to_string();
        let (a, b) = (
            tensor(&[1024, 1024], DataType::Float, 1, device),
            tensor(&[1024, 1024], DataType::Float, 2, device),
        );
        let row = tensor(&[1024], DataType::Float, 3, device);
        group.bench_function(BenchmarkId::new(&backend, "1M"), |bench| {
            bench.iter(|| black_box(finished(device, || a.add(&b).unwrap())))
        });
        group.bench_function(BenchmarkId::new(&backend, "broadcast_1M"), |bench| {
            bench.iter(|| black_box(finished(device, || a.add(&row).unwrap())))
        });
        // f16: the packed store, two elements per word.
        let (h, k) = (
            a.cast(DataType::Half).unwrap(),
            b.cast(DataType::Half).unwrap(),
        );
        group.bench_function(BenchmarkId::new(&backend, "f16_1M"), |bench| {
            bench.iter(|| black_box(finished(device, || h.add(&k).unwrap())))
        });
    }
    group.finish();
}

/// Square f32 matmul and a batch of small ones.
fn matmul(c: &mut Criterion) {
    let Some([cpu, wgpu]) = cpu_and("wgpu") else {
        return;
    };
    let mut group = c.benchmark_group("wgpu_matmul_f32");
    for (name, dims_a, dims_b) in [
        ("256", vec![256, 256], vec![256, 256]),
        ("512", vec![512, 512], vec![512, 512]),
        ("batch_16x64", vec![16, 64, 64], vec![16, 64, 64]),
    ] {
        let flops = 2 * dims_a.iter().product::<usize>() * dims_b[dims_b.len() - 1];
        group.throughput(Throughput::Elements(flops as u64));
        for device in [&cpu, &wgpu] {
            let backend = device.name().split(':').next().unwrap_or("?").to_string();
            let (a, b) = (
                tensor(&dims_a, DataType::Float, 1, device),
                tensor(&dims_b, DataType::Float, 2, device),
            );
            group.bench_function(BenchmarkId::new(&backend, name), |bench| {
                bench.iter(|| black_box(finished(device, || a.matmul(&b).unwrap())))
            });
        }
    }
    group.finish();
}

/// Sum of 4M f32, whole and by rows.
fn reduction(c: &mut Criterion) {
    let Some([cpu, wgpu]) = cpu_and("wgpu") else {
        return;
    };
    let mut group = c.benchmark_group("wgpu_sum_f32");
    group.throughput(Throughput::Bytes((4 << 22) as u64));
    for device in [&cpu, &wgpu] {
        let backend = device.name().split(':').next().unwrap_or("?").to_string();
        let x = tensor(&[2048, 2048], DataType::Float, 4, device);
        group.bench_function(BenchmarkId::new(&backend, "all_4M"), |bench| {
            bench.iter(|| black_box(finished(device, || x.reduce_all(ReduceOp::Sum).unwrap())))
        });
        group.bench_function(BenchmarkId::new(&backend, "rows_2048x2048"), |bench| {
            bench.iter(|| black_box(finished(device, || x.sum(&[1], false).unwrap())))
        });
    }
    group.finish();
}

criterion_group! {
    name = wgpu_benches;
    config = benches::criterion_config();
    targets = dispatch, add, matmul, reduction
}
criterion_main!(wgpu_benches);
