//! The per-`run` overhead of a graph: 100 small elementwise ops on 16-element f32 tensors,
//! run by a `Session` with its plan cached, next to the same 100 ops called eagerly.
//! Target (issue 18): the session under 2x the eager calls.
//!
//! `placement_256_matmul_sum_f32`: what crossing devices costs. A 256x256 matmul and its
//! row sums, fed from and fetched to cpu:0: all on cpu:0, then with the matmul placed on
//! each other device present (the feed and the weights copied there, the product back),
//! next to the same work all on that device.
//!
//! `while_loop_1000_steps`: what a loop costs per iteration. TensorFlow writes a
//! `tf.compat.v1.while_loop` of 1000 steps carrying a counter and a 16-element f32 vector
//! (`x * 0.999 + 0.5`), with 1.x control flow (`v1`: Switch, Merge, Enter, Exit,
//! NextIteration; polytensor's frame executor) and with `StatelessWhile` (`v2`: the
//! library's functions); polytensor runs each GraphDef on cpu:0 and TensorFlow runs it in
//! the same run, next to the same 2000 ops called eagerly. Without TensorFlow
//! (`target/tf-venv`) the group is skipped: TensorFlow writes its graphs.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use polytensor::graph::{Graph, Session, SessionOptions};
use polytensor::ops::BinaryOp;
use polytensor::{DataType, PartialTensorShape, Tensor};

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
    let session = Session::new(&graph, device.clone());
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

fn placement(c: &mut Criterion) {
    const N: usize = 256;
    let cpu = polytensor::default_device().expect("the CPU device");
    let mut graph = Graph::new();
    let shape = PartialTensorShape::new(&[Some(N), Some(N)]).unwrap();
    let x = graph
        .placeholder_named("x", DataType::Float, &shape)
        .unwrap();
    let w = benches::tensor(&[N, N], DataType::Float, 7, &cpu);
    let w = graph.constant_tensor(&w).unwrap();
    let product = graph.device_scope("/device:GPU:0", |g| g.matmul(&x, &w).unwrap());
    let axes = graph.constant_values(&[1i32], &[1]).unwrap();
    let sums = graph
        .op("Sum")
        .inputs(&[product, axes])
        .device("/device:CPU:0")
        .build_output()
        .unwrap();
    let feed = benches::tensor(&[N, N], DataType::Float, 8, &cpu);
    let mut group = c.benchmark_group("placement_256_matmul_sum_f32");
    let mut run = |name: String, devices: Vec<std::sync::Arc<dyn polytensor::Device>>| {
        let first = devices[0].clone();
        let mut options = SessionOptions::new(devices);
        options.allow_soft_placement = true;
        let session = Session::with_options(&graph, options).unwrap();
        let feed = feed.to_device(&first).unwrap();
        group.bench_function(name, |b| {
            b.iter(|| {
                let out = session.run(&[(&x, &feed)], &[&sums], &[]).unwrap();
                black_box(out[0].to_vec::<f32>().unwrap())
            })
        });
    };
    run("cpu:0".into(), vec![cpu.clone()]);
    for entry in polytensor::devices() {
        let Some(device) = entry.device().filter(|d| !polytensor::same_device(d, &cpu)) else {
            continue;
        };
        // The matmul on the device, the rest on cpu:0: four copies a run.
        run(
            format!("matmul_on_{}", device.name()),
            vec![cpu.clone(), device.clone()],
        );
        // Everything on the device (soft placement moves the CPU request there).
        run(format!("all_on_{}", device.name()), vec![device.clone()]);
    }
    group.finish();
}

fn while_loop(c: &mut Criterion) {
    const STEPS: usize = 1000;
    let Some(mut tf) = benches::tensorflow::TensorFlow::start() else {
        eprintln!("while_loop_1000_steps skipped: TensorFlow writes its graphs");
        return;
    };
    let cpu = polytensor::default_device().expect("the CPU device");
    let mut group = c.benchmark_group("while_loop_1000_steps");
    for version in ["v1", "v2"] {
        let path = std::env::temp_dir().join(format!(
            "polytensor-bench-while-{version}-{}.pb",
            std::process::id()
        ));
        tf.load_while(&path, STEPS, version, 1);
        let graph = Graph::from_graph_def_bytes(&std::fs::read(&path).unwrap()).unwrap();
        std::fs::remove_file(&path).unwrap();
        let session = Session::new(&graph, cpu.clone());
        let out = session.run_by_name(&[], &["out:0"], &[]).unwrap();
        assert_eq!(out[0].dims(), &[16]);
        group.bench_function(format!("polytensor_{version}"), |b| {
            b.iter(|| black_box(session.run_by_name(&[], &["out:0"], &[]).unwrap()))
        });
        group.bench_function(format!("tensorflow_{version}"), |b| {
            b.iter_custom(|iters| tf.time(iters))
        });
    }
    let x: Vec<f32> = (0..16).map(|i| i as f32).collect();
    let x = Tensor::from_slice(&x, [16], &cpu).unwrap();
    let (scale, shift) = (
        Tensor::scalar(0.999f32, &cpu).unwrap(),
        Tensor::scalar(0.5f32, &cpu).unwrap(),
    );
    group.bench_function("eager_same_ops", |b| {
        b.iter(|| {
            let mut y = x.clone();
            for _ in 0..STEPS {
                y = y.binary(BinaryOp::Mul, &scale).unwrap();
                y = y.binary(BinaryOp::Add, &shift).unwrap();
            }
            black_box(y)
        })
    });
    group.finish();
}

criterion_group! {
    name = graph_benches;
    config = benches::criterion_config();
    targets = graph_overhead, placement, while_loop
}
criterion_main!(graph_benches);
