//! CUDA benchmarks for the targets of the CUDA backend, next to their peers in the same run:
//! `a + b` on 16M f32 against the device's own copy bandwidth (a device-to-device copy of
//! the same bytes), matmul at 4096^2 in f16, bf16, f32 and f64 against cuBLAS called
//! directly (cudarc, same handle settings, same values), a reduction, and one dispatch plus its wait.
//! Every case waits for the stream. With no GPU (CI, this project's build machine) the
//! benchmarks print why and measure nothing.

use std::hint::black_box;
use std::sync::Arc;

use benches::{finished, tensor};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DeviceRepr, ValidAsZeroBits};
use polytensor::{DataType, Device, ReduceOp, Tensor};

/// The first CUDA device, or `None` after printing why not.
fn gpu() -> Option<Arc<dyn Device>> {
    match polytensor::device("cuda:0") {
        Ok(device) => Some(device),
        Err(e) => {
            eprintln!("cuda benchmarks skipped: {e}");
            None
        }
    }
}

/// One kernel on one element, waited for: the fixed cost of a dispatch.
fn dispatch(c: &mut Criterion) {
    let Some(device) = gpu() else { return };
    let mut group = c.benchmark_group("cuda_dispatch");
    let (a, b) = (
        tensor(&[1], DataType::Float, 1, &device),
        tensor(&[1], DataType::Float, 2, &device),
    );
    group.bench_function("add_1_element", |bench| {
        bench.iter(|| black_box(finished(&device, || a.add(&b).unwrap())))
    });
    group.finish();
}

/// `a + b` on 16M f32 (three 64 MiB streams of traffic) and, as the bandwidth peer, a
/// device-to-device copy with the same traffic (96 MiB read, 96 MiB written).
fn add(c: &mut Criterion) {
    let Some(device) = gpu() else { return };
    let n = 1 << 24;
    let mut group = c.benchmark_group("cuda_add_f32");
    group.throughput(Throughput::Bytes((3 * n * 4) as u64));
    let (a, b) = (
        tensor(&[n], DataType::Float, 1, &device),
        tensor(&[n], DataType::Float, 2, &device),
    );
    group.bench_function(BenchmarkId::new("polytensor", "16M"), |bench| {
        bench.iter(|| black_box(finished(&device, || a.add(&b).unwrap())))
    });
    let context = CudaContext::new(0).expect("context");
    let stream = context.new_stream().expect("stream");
    let bytes = 3 * n * 4 / 2;
    let src: CudaSlice<u8> = stream.alloc_zeros(bytes).expect("alloc");
    let mut dst: CudaSlice<u8> = stream.alloc_zeros(bytes).expect("alloc");
    group.bench_function(BenchmarkId::new("device_copy", "16M"), |bench| {
        bench.iter(|| {
            stream.memcpy_dtod(&src, &mut dst).expect("copy");
            stream.synchronize().expect("sync");
        })
    });
    group.finish();
}

/// Matmul `n x n x n` through cuBLAS directly on cudarc buffers holding the same values as
/// polytensor's operands `a` and `b` (a GPU's matmul speed depends on the values: zeros
/// run faster): the peer of polytensor's.
fn cublas_direct<'a, T>(
    stream: &Arc<CudaStream>,
    blas: &'a CudaBlas,
    [a, b]: [&Tensor; 2],
    one: T,
    zero: T,
) -> impl FnMut() + 'a
where
    T: DeviceRepr + ValidAsZeroBits + Copy + polytensor::Element + 'a,
    CudaBlas: Gemm<T>,
{
    let n = a.dims()[0];
    let upload = |t: &Tensor| {
        stream
            .clone_htod(&t.to_vec::<T>().expect("values"))
            .expect("upload")
    };
    let (a, b) = (upload(a), upload(b));
    let mut out: CudaSlice<T> = stream.alloc_zeros(n * n).expect("alloc");
    let stream = stream.clone();
    let config = GemmConfig {
        transa: cublasOperation_t::CUBLAS_OP_N,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: n as i32,
        n: n as i32,
        k: n as i32,
        alpha: one,
        lda: n as i32,
        ldb: n as i32,
        beta: zero,
        ldc: n as i32,
    };
    move || {
        // SAFETY: the three buffers hold n x n elements each, as the config says.
        unsafe { blas.gemm(config, &b, &a, &mut out) }.expect("gemm");
        stream.synchronize().expect("sync");
    }
}

/// Matmul 4096^3 in each float dtype, polytensor against cuBLAS called directly.
fn matmul(c: &mut Criterion) {
    let Some(device) = gpu() else { return };
    let n = 4096;
    let context = CudaContext::new(0).expect("context");
    let stream = context.new_stream().expect("stream");
    let blas = CudaBlas::new(stream.clone()).expect("cuBLAS");
    let mut group = c.benchmark_group("cuda_matmul");
    group.throughput(Throughput::Elements((2 * n * n * n) as u64));
    group.sample_size(20);
    for dtype in [
        DataType::Half,
        DataType::BFloat16,
        DataType::Float,
        DataType::Double,
    ] {
        let (a, b) = (
            tensor(&[n, n], dtype, 1, &device),
            tensor(&[n, n], dtype, 2, &device),
        );
        group.bench_function(BenchmarkId::new("polytensor", dtype), |bench| {
            bench.iter(|| black_box(finished(&device, || a.matmul(&b).unwrap())))
        });
        let mut direct: Box<dyn FnMut() + '_> = match dtype {
            DataType::Half => Box::new(cublas_direct(
                &stream,
                &blas,
                [&a, &b],
                half::f16::ONE,
                half::f16::ZERO,
            )),
            DataType::BFloat16 => Box::new(cublas_direct(
                &stream,
                &blas,
                [&a, &b],
                half::bf16::ONE,
                half::bf16::ZERO,
            )),
            DataType::Float => Box::new(cublas_direct(&stream, &blas, [&a, &b], 1f32, 0f32)),
            _ => Box::new(cublas_direct(&stream, &blas, [&a, &b], 1f64, 0f64)),
        };
        group.bench_function(BenchmarkId::new("cublas_direct", dtype), |bench| {
            bench.iter(&mut direct)
        });
    }
    group.finish();
}

/// Sum of 16M f32, whole and by rows.
fn reduction(c: &mut Criterion) {
    let Some(device) = gpu() else { return };
    let mut group = c.benchmark_group("cuda_sum_f32");
    group.throughput(Throughput::Bytes((4 << 24) as u64));
    let x = tensor(&[4096, 4096], DataType::Float, 4, &device);
    group.bench_function("all_16M", |bench| {
        bench.iter(|| black_box(finished(&device, || x.reduce_all(ReduceOp::Sum).unwrap())))
    });
    group.bench_function("rows_4096x4096", |bench| {
        bench.iter(|| black_box(finished(&device, || x.sum(&[1], false).unwrap())))
    });
    group.finish();
}

criterion_group! {
    name = cuda_benches;
    config = benches::criterion_config();
    targets = dispatch, add, matmul, reduction
}
criterion_main!(cuda_benches);
