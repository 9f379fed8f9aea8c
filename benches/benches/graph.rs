//! The per-`run` overhead of a graph: 100 small elementwise ops on 16-element f32 tensors,
//! run by a `Session` with its plan cached, next to the same 100 ops called eagerly.
//! Target (issue 18): the session under 2x the eager calls.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use polytensor::graph::{Graph, Session};
use polytensor::ops::BinaryOp;
use polytensor::Tensor;

const OPS: usize = 100;
const LEN: usize = 16;

/// The op of step `i`: a repeating mix of the cheap binary ops, with its TensorFlow name.
fn step(i: usize) -> (BinaryOp, &'static str) {
    [
        (BinaryOp::Mul, "Mul"),
        (BinaryOp::Add, "AddV2"),
        (BinaryOp::Max, "Maximum"),
        (BinaryOp::Sub, "Sub"),
    ][i % 4]
}

fn graph_overhead(c: &mut Criterion) {
    let device = polytensor::default_device().expect("the CPU device");
    let values: Vec<f32> = (0..LEN).map(|i| i as f32 * 0.25).collect();
    let (x, k) = (
        Tensor::from_slice(&values, [LEN], &device).unwrap(),
        Tensor::from_slice(&[0.5f32; LEN], [LEN], &device).unwrap(),
    );

    let mut graph = Graph::new();
    let gx = graph.constant_tensor(&x).unwrap();
    let gk = graph.constant_tensor(&k).unwrap();
    let mut last = gx;
    for i in 0..OPS {
        let (_, op_type) = step(i);
        last = graph.binary(op_type, op_type, &last, &gk).unwrap();
    }
    let mut session = Session::new(&graph, device.clone());
    session.run(&[], &[&last], &[]).unwrap();

    let mut group = c.benchmark_group("graph_100_small_ops");
    group.bench_function("session_run_cached_plan", |b| {
        b.iter(|| black_box(session.run(&[], &[&last], &[]).unwrap()))
    });
    group.bench_function("eager_same_ops", |b| {
        b.iter(|| {
            let mut y = x.clone();
            for i in 0..OPS {
                y = y.binary(step(i).0, &k).unwrap();
            }
            black_box(y)
        })
    });
    group.finish();
}

criterion_group! {
    name = graph_benches;
    config = benches::criterion_config();
    targets = graph_overhead
}
criterion_main!(graph_benches);
