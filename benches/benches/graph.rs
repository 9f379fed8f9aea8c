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
//!
//! `import_graph_def_50k_nodes`: importing a GraphDef of 50,000 nodes (a chain of
//! `AddV2`s), in nodes per second, next to TensorFlow's `import_graph_def` of the same bytes
//! (issue 47: import is linear in the nodes).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use polytensor::graph::proto::{GraphDef, NodeDef};
use polytensor::graph::{AttrValue, Graph, Session, SessionOptions};
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

/// A GraphDef of a `Const` and a chain of `nodes` `AddV2`s, each adding the constant to
/// the one before: one `T` attribute and two inputs a node, as most of a model's nodes.
fn chain_graph_def(nodes: usize) -> GraphDef {
    let cpu = polytensor::default_device().expect("the CPU device");
    let value = Tensor::scalar(1.0f32, &cpu).unwrap().to_proto().unwrap();
    let attr = |pairs: Vec<(&str, AttrValue)>| {
        pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    };
    let mut node = vec![NodeDef {
        name: "c".into(),
        op: "Const".into(),
        attr: attr(vec![
            ("dtype", DataType::Float.into()),
            ("value", value.into()),
        ]),
        ..Default::default()
    }];
    for i in 0..nodes {
        let previous = if i == 0 {
            "c".to_string()
        } else {
            format!("add_{}", i - 1)
        };
        node.push(NodeDef {
            name: format!("add_{i}"),
            op: "AddV2".into(),
            input: vec![previous, "c".into()],
            attr: attr(vec![("T", DataType::Float.into())]),
            ..Default::default()
        });
    }
    GraphDef {
        node,
        ..Default::default()
    }
}

/// `import_graph_def_50k_nodes`: a GraphDef of 50,000 nodes decoded and imported
/// (`Graph::from_graph_def_bytes`), next to TensorFlow's `tf.graph_util.import_graph_def`
/// of the same bytes in the same run; throughput in nodes per second.
fn import(c: &mut Criterion) {
    const NODES: usize = 50_000;
    let bytes = Graph::from_graph_def(&chain_graph_def(NODES))
        .unwrap()
        .to_graph_def_bytes();
    let mut group = c.benchmark_group("import_graph_def_50k_nodes");
    group.throughput(criterion::Throughput::Elements(NODES as u64 + 1));
    group.bench_function("polytensor", |b| {
        b.iter(|| black_box(Graph::from_graph_def_bytes(&bytes).unwrap()))
    });
    match benches::tensorflow::TensorFlow::start() {
        Some(mut tf) => {
            let path = std::env::temp_dir()
                .join(format!("polytensor-bench-import-{}.pb", std::process::id()));
            std::fs::write(&path, &bytes).unwrap();
            tf.load_import(&path);
            std::fs::remove_file(&path).unwrap();
            group.bench_function("tensorflow", |b| b.iter_custom(|iters| tf.time(iters)));
        }
        None => eprintln!("import_graph_def_50k_nodes: no TensorFlow peer"),
    }
    group.finish();
}

criterion_group! {
    name = graph_benches;
    config = benches::criterion_config();
    targets = graph_overhead, placement, while_loop, import
}
criterion_main!(graph_benches);
