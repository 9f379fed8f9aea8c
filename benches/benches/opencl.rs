//! OpenCL benchmarks next to the CPU backend, for the targets of the OpenCL backend: `a + b`
//! on 16M f32 (bandwidth), f32 matmul 1024^3 (FLOP/s), and one dispatch plus its wait.
//!
//! On PoCL (a CPU OpenCL device, what CI and this machine have) the kernels are compiled to
//! vectorised native code, so the comparison with cpu:0 tells whether the generated kernels
//! are reasonable. Every OpenCL case waits for the queue (`synchronize`). Programs are built
//! before measuring (the first call of each case). With no OpenCL device, the benchmarks
//! print why and measure nothing.

use std::hint::black_box;
use std::sync::Arc;

use benches::{cpu_and, finished, tensor};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use polytensor::{DataType, Device, ReduceOp};

/// The backend name of a device (`cpu`, `opencl`).
fn backend(device: &Arc<dyn Device>) -> String {
    device.name().split(':').next().unwrap_or("?").to_string()
}

/// One kernel on one element, waited for: the fixed cost of a dispatch.
fn dispatch(c: &mut Criterion) {
    let Some(devices) = cpu_and("opencl") else {
        return;
    };
    let mut group = c.benchmark_group("opencl_dispatch");
    for device in &devices {
        let (a, b) = (
            tensor(&[1], DataType::Float, 1, device),
            tensor(&[1], DataType::Float, 2, device),
        );
        group.bench_function(
            BenchmarkId::new(backend(device), "add_1_element"),
            |bench| bench.iter(|| black_box(finished(device, || a.add(&b).unwrap()))),
        );
    }
    group.finish();
}

/// `a + b` on 16M f32 (three 64 MiB streams).
fn add(c: &mut Criterion) {
    let Some(devices) = cpu_and("opencl") else {
        return;
    };
    let n = 1 << 24;
    let mut group = c.benchmark_group("opencl_add_f32");
    group.throughput(Throughput::Bytes((3 * n * 4) as u64));
    for device in &devices {
        let (a, b) = (
            tensor(&[n], DataType::Float, 1, device),
            tensor(&[n], DataType::Float, 2, device),
        );
        group.bench_function(BenchmarkId::new(backend(device), "16M"), |bench| {
            bench.iter(|| black_box(finished(device, || a.add(&b).unwrap())))
        });
    }
    group.finish();
}

/// f32 matmul 1024^3 and a batch of small ones.
fn matmul(c: &mut Criterion) {
    let Some(devices) = cpu_and("opencl") else {
        return;
    };
    let mut group = c.benchmark_group("opencl_matmul_f32");
    for (name, dims_a, dims_b) in [
        ("1024", vec![1024, 1024], vec![1024, 1024]),
        ("batch_16x64", vec![16, 64, 64], vec![16, 64, 64]),
    ] {
        let flops = 2 * dims_a.iter().product::<usize>() * dims_b[dims_b.len() - 1];
        group.throughput(Throughput::Elements(flops as u64));
        for device in &devices {
            let (a, b) = (
                tensor(&dims_a, DataType::Float, 1, device),
                tensor(&dims_b, DataType::Float, 2, device),
            );
            group.bench_function(BenchmarkId::new(backend(device), name), |bench| {
                bench.iter(|| black_box(finished(device, || a.matmul(&b).unwrap())))
            });
        }
    }
    group.finish();
}

/// Sum of 4M f32, whole and by rows.
fn reduction(c: &mut Criterion) {
    let Some(devices) = cpu_and("opencl") else {
        return;
    };
    let mut group = c.benchmark_group("opencl_sum_f32");
    group.throughput(Throughput::Bytes((4 << 22) as u64));
    for device in &devices {
        let x = tensor(&[2048, 2048], DataType::Float, 4, device);
        group.bench_function(BenchmarkId::new(backend(device), "all_4M"), |bench| {
            bench.iter(|| black_box(finished(device, || x.reduce_all(ReduceOp::Sum).unwrap())))
        });
        group.bench_function(
            BenchmarkId::new(backend(device), "rows_2048x2048"),
            |bench| bench.iter(|| black_box(finished(device, || x.sum(&[1], false).unwrap()))),
        );
    }
    group.finish();
}

criterion_group! {
    name = opencl_benches;
    config = benches::criterion_config();
    targets = dispatch, add, matmul, reduction
}
criterion_main!(opencl_benches);
