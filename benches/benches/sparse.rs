//! `SparseTensor`'s conversions on cpu:0: `to_dense` and `from_dense` of a 512x512 float32
//! tensor at 1% and 10% density (the regression rows for issue 32's first conversions;
//! the sparse x dense matmul and its peers come with the device kernels).

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

criterion_group!(benches, conversions);
criterion_main!(benches);
