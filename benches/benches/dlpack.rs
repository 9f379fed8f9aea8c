//! DLPack export and import: O(1) and copy-free, so a 1 GiB tensor takes as long as a 1 KiB
//! one. `Tensor::clone` (an `Arc` clone) is measured beside it as the floor.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use polytensor::{DataType, Tensor};

fn round_trip(c: &mut Criterion) {
    let cpu = polytensor::device("cpu:0").expect("the CPU device");
    let mut group = c.benchmark_group("dlpack");
    for (label, bytes) in [("1KiB", 1usize << 10), ("1GiB", 1 << 30)] {
        let t = Tensor::zeros([bytes / 4], DataType::Float, &cpu).expect("a tensor");
        group.bench_with_input(BenchmarkId::new("export+import", label), &t, |b, t| {
            b.iter(|| {
                let exported = t.to_dlpack_versioned().expect("export");
                let raw = black_box(exported.into_raw());
                // SAFETY: our own live export, handed over once.
                let back = unsafe { Tensor::from_dlpack_versioned(raw, &cpu) }.expect("import");
                black_box(back)
            })
        });
        group.bench_with_input(BenchmarkId::new("clone", label), &t, |b, t| {
            b.iter(|| black_box(t.clone()))
        });
    }
    group.finish();
}

criterion_group!(benches, round_trip);
criterion_main!(benches);
