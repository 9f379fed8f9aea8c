//! `SparseTensor` on cpu:0: `to_dense` and `from_dense` of a 512x512 float32 tensor at 1%
//! and 10% density; and the sparse x dense matmul (`SparseTensorDenseMatMul`) of a 512x512
//! sparse matrix at 1%, 10%, 25% and 50% density by a dense 512x64 one, beside the dense
//! matmul of the same operands and TensorFlow's CPU kernel (the peer, from `target/tf-venv`)
//! in the same run: where the dense matmul overtakes the sparse one is the crossover
//! density PERFORMANCE.md records.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use polytensor::{SparseTensor, Tensor};

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

criterion_group! {
    name = benches;
    config = benches::criterion_config();
    targets = conversions, sparse_dense_matmul
}
criterion_main!(benches);
