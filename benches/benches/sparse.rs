//! `SparseTensor` on cpu:0: `to_dense` and `from_dense` of a 512x512 float32 tensor at 1%
//! and 10% density; and the sparse x dense matmul (`SparseTensorDenseMatMul`) of a 512x512
//! sparse matrix at 1%, 10%, 25% and 50% density by a dense 512x64 one, beside the dense
//! matmul of the same operands and TensorFlow's CPU kernel (the peer, from `target/tf-venv`)
//! in the same run: where the dense matmul overtakes the sparse one is the crossover
//! density PERFORMANCE.md records. And `SparseSegmentSum` of an embedding-sized table
//! (16384 rows of 64 f32, 65536 lookups into 4096 segments) on every device present: the
//! segment fold kernel of each backend (the kit's IR kernel on OpenCL, CUDA and wgpu).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use polytensor::sparse::{segment_reduce, Combiner};
use polytensor::{DataType, SparseTensor, Tensor};

fn conversions(c: &mut Criterion) {
    let cpu = polytensor::device("cpu:0").expect("the CPU device");
    let mut group = c.benchmark_group("sparse");
    let side = 512usize;
    for (label, every) in [("1%", 100usize), ("10%", 10)] {
        let values: Vec<f32> = (0..side * side)
            .map(|i| if i % every == 0 { 1.0 + i as f32 } else { 0.0 })
            .collect();
        let dense = Tensor::from_slice(&values, [side, side], &cpu).expect("a tensor");
        let sparse = SparseTensor::from_dense(&dense).expect("sparse");
        group.bench_with_input(
            BenchmarkId::new("to_dense_512x512", label),
            &sparse,
            |b, s| b.iter(|| black_box(s.to_dense(None).expect("dense"))),
        );
        group.bench_with_input(
            BenchmarkId::new("from_dense_512x512", label),
            &dense,
            |b, d| b.iter(|| black_box(SparseTensor::from_dense(d).expect("sparse"))),
        );
    }
    group.finish();
}

fn sparse_dense_matmul(c: &mut Criterion) {
    let cpu = polytensor::device("cpu:0").expect("the CPU device");
    let (m, k, n) = (512usize, 512usize, 64usize);
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let mut tf = benches::tensorflow::TensorFlow::start();
    let b: Vec<f32> = (0..k * n).map(|i| ((i * 7919) % 13) as f32 - 6.0).collect();
    let b = Tensor::from_slice(&b, [k, n], &cpu).expect("b");
    let mut group = c.benchmark_group("sparse_dense_matmul_512x512x64");
    for (label, every) in [("1%", 100usize), ("10%", 10), ("25%", 4), ("50%", 2)] {
        let values: Vec<f32> = (0..m * k)
            .map(|i| if i % every == 0 { 1.0 + i as f32 } else { 0.0 })
            .collect();
        let dense = Tensor::from_slice(&values, [m, k], &cpu).expect("a tensor");
        let sparse = SparseTensor::from_dense(&dense).expect("sparse");
        group.bench_with_input(
            BenchmarkId::new("polytensor_sparse", label),
            &sparse,
            |bench, s| {
                bench.iter(|| black_box(s.sparse_dense_matmul(&b, false, false).expect("product")))
            },
        );
        if every == 100 {
            group.bench_function("polytensor_dense_matmul", |bench| {
                bench.iter(|| black_box(dense.matmul(&b).expect("product")))
            });
        }
        if let Some(tf) = tf.as_mut() {
            tf.load_spmm([m, k, n, every], threads);
            group.bench_function(BenchmarkId::new("tensorflow_sparse", label), |bench| {
                bench.iter_custom(|iters| tf.time(iters))
            });
        }
    }
    group.finish();
}

/// `SparseSegmentSum` of 65536 rows of a 16384 x 64 f32 table into 4096 segments of 16, on
/// `cpu:0` and the first OpenCL, CUDA and wgpu devices where present (each waited for).
fn segment_sum(c: &mut Criterion) {
    let (table, lookups, width, per_segment) = (16384usize, 65536usize, 64usize, 16usize);
    let cpu = polytensor::device("cpu:0").expect("the CPU device");
    let rows: Vec<i32> = (0..lookups).map(|i| ((i * 7919) % table) as i32).collect();
    let ids: Vec<i32> = (0..lookups).map(|i| (i / per_segment) as i32).collect();
    let rows = Tensor::from_slice(&rows, [lookups], &cpu).expect("rows");
    let ids = Tensor::from_slice(&ids, [lookups], &cpu).expect("segment ids");
    let mut group = c.benchmark_group("segment_sum_f32_16384x64_by_65536");
    group.throughput(Throughput::Bytes((lookups * width * 4) as u64));
    let devices = std::iter::once(cpu).chain(
        ["opencl:0", "cuda:0", "wgpu:0"]
            .into_iter()
            .filter_map(|name| polytensor::device(name).ok()),
    );
    for device in devices {
        let data = benches::tensor(&[table, width], DataType::Float, 3, &device);
        group.bench_function(device.name(), |bench| {
            bench.iter(|| {
                black_box(benches::finished(&device, || {
                    segment_reduce(Combiner::Sum, &data, &rows, &ids, None).expect("segment sum")
                }))
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = benches::criterion_config();
    targets = conversions, sparse_dense_matmul, segment_sum
}
criterion_main!(benches);
