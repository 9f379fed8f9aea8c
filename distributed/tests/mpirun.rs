//! The collectives under a real MPI (Open MPI): each test runs this test binary again under
//! `mpirun -np N --oversubscribe` on loopback, with `POLYTENSOR_MPI_CHILD` set; every rank
//! runs the test's checks and prints a line when they passed, and the parent asserts that
//! every rank printed it within a time limit (a hang is a failure, never a stuck CI).
//!
//! Without `mpirun` the tests say why and skip, unless `POLYTENSOR_REQUIRE` names `mpi`
//! (as CI does): then they fail.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use polytensor_core::{BinaryOp, DataType, Device, Tensor};
use polytensor_distributed::{Communicator, Mpi, Reduction};

mod support;

use support::*;

/// The devices to run on: the CPU, and OpenCL and wgpu where present (required where
/// `POLYTENSOR_REQUIRE` names them).
fn devices() -> Vec<Arc<dyn Device>> {
    polytensor::devices()
        .iter()
        .filter_map(|entry| {
            if entry.device().is_none() {
                assert!(!required(&entry.name), "POLYTENSOR_REQUIRE names {entry}");
            }
            entry.device().cloned()
        })
        .filter(|d| !d.name().starts_with("cuda"))
        .collect()
}

/// Every collective, on `device`, for every dtype: those NCCL runs too (sizes 0, 1, 7 and
/// 4096), then all-reduce into a caller's tensor and send/recv around a ring.
fn every_collective(world: &Communicator, device: &Arc<dyn Device>, dtypes: &[DataType]) {
    let (rank, size) = (world.rank(), world.size());
    for &dtype in dtypes {
        shared_collectives(world, device, dtype);
        // Into a tensor the caller owns, reused: MPI writes into it (or its staging).
        let x = local(rank, dtype, 9, device);
        let mut out = Tensor::zeros([9], dtype, device).unwrap();
        for reduction in [Reduction::Sum, Reduction::Max, Reduction::Mean] {
            if reduction == Reduction::Mean && !dtype.is_float() {
                continue;
            }
            out = world.all_reduce_into(&x, out, reduction).unwrap();
            assert_eq!(out.device().name(), device.name());
            check_reduced(
                &out,
                reduction,
                size,
                0,
                &format!("all_reduce_into of {dtype}"),
            );
        }
        // Send and receive around a ring; the receiver learns dtype and shape.
        let x = local(rank, dtype, 4, device).reshape([2, 2]).unwrap();
        let next = (rank + 1) % size;
        let prev = (rank + size - 1) % size;
        let sending = world.start_send(&x, next, 7).unwrap();
        let got = world.recv(prev, 7, device).unwrap();
        sending.wait().unwrap();
        assert_eq!(
            (got.dtype(), got.dims().as_slice()),
            (dtype, &[2usize, 2][..])
        );
        let want: Vec<f64> = (0..4).map(|i| value(prev, i)).collect();
        assert_eq!(as_f64(&got), want, "send/recv of {dtype}");
    }
}

fn collectives(world: &Communicator) {
    let size = world.size();
    every_collective(world, &cpu(), &DTYPES);
    // A scalar gathers into a vector; bools move as bytes.
    let flag = Tensor::scalar(world.rank().is_multiple_of(2), &cpu()).unwrap();
    assert_eq!(world.all_gather(&flag).unwrap().dims().as_slice(), &[size]);
    // In place, and non-blocking: two started, waited for in the other order.
    let mut x = local(world.rank(), DataType::Float, 7, &cpu());
    world.all_reduce_in_place(&mut x, Reduction::Max).unwrap();
    check_reduced(&x, Reduction::Max, size, 0, "in place");
    let a = local(world.rank(), DataType::Int32, 9, &cpu());
    let first = world.start_all_reduce(&a, Reduction::Sum).unwrap();
    let second = world.start_all_gather(&a).unwrap();
    let gathered = second.wait().unwrap();
    assert_eq!(gathered.dims().as_slice(), &[9 * size]);
    check_reduced(&first.wait().unwrap(), Reduction::Sum, size, 0, "started");
    // Sub-communicators: even and odd ranks reduce apart.
    let parity = (world.rank() % 2) as u32;
    let half = world.split(Some(parity), 0).unwrap().unwrap();
    assert_eq!(
        half.size(),
        size.div_ceil(2) - (parity as usize) * (size % 2)
    );
    let sum = half
        .all_reduce(
            &Tensor::scalar(world.rank() as i64, &cpu()).unwrap(),
            Reduction::Sum,
        )
        .unwrap()
        .item::<i64>()
        .unwrap();
    let want: i64 = (0..size as i64)
        .filter(|r| r % 2 == i64::from(parity))
        .sum();
    assert_eq!(sum, want, "the sum over ranks of parity {parity}");
    assert!(world.split(None, 0).unwrap().is_none());
    world.barrier().unwrap();
    // 64 MiB of f32, summed.
    let big = Tensor::full([16 << 20], 1.0f32, DataType::Float, &cpu()).unwrap();
    let sum = world.all_reduce(&big, Reduction::Sum).unwrap();
    assert!(sum
        .as_slice::<f32>()
        .unwrap()
        .iter()
        .all(|&v| v == size as f32));
}

#[test]
fn collectives_on_2_ranks() {
    if child() {
        as_rank(collectives);
    } else {
        mpirun(2, "collectives_on_2_ranks", &[], Ending::Clean);
    }
}

#[test]
fn collectives_on_4_ranks() {
    if child() {
        as_rank(collectives);
    } else {
        mpirun(4, "collectives_on_4_ranks", &[], Ending::Clean);
    }
}

/// Every collective on OpenCL and wgpu tensors (staged through host memory).
#[test]
fn collectives_on_device_tensors() {
    if child() {
        as_rank(|world| {
            for device in devices().iter().filter(|d| !d.name().starts_with("cpu")) {
                println!("rank {}: collectives on {}", world.rank(), device.name());
                every_collective(
                    world,
                    device,
                    &[DataType::Float, DataType::Int32, DataType::Half],
                );
            }
        });
    } else {
        mpirun(2, "collectives_on_device_tensors", &[], Ending::Clean);
    }
}

#[test]
fn mismatched_calls_fail_on_every_rank() {
    if child() {
        as_rank(|world| {
            let device = cpu();
            let rank = world.rank();
            // Rank 0 passes 2 elements, the others 3: every rank gets the error.
            let count = if rank == 0 { 2 } else { 3 };
            let message = world
                .all_reduce(
                    &local(rank, DataType::Float, count, &device),
                    Reduction::Sum,
                )
                .unwrap_err()
                .to_string();
            assert!(
                message.contains("rank 1 passed all_reduce(0) of float32 [3]"),
                "{message}"
            );
            // Another dtype on one rank.
            let dtype = if rank == 1 {
                DataType::Double
            } else {
                DataType::Float
            };
            let message = world
                .broadcast(&local(rank, dtype, 4, &device), 0)
                .unwrap_err()
                .to_string();
            assert!(message.contains("broadcast"), "{message}");
            // Calls every rank refuses alike, after agreeing on them.
            let strings = Tensor::from_strings(vec![b"a".to_vec()], [1], &device).unwrap();
            assert!(world.all_gather(&strings).is_err());
            let x = local(rank, DataType::Float, 1, &device);
            assert!(world.broadcast(&x, world.size()).is_err());
            assert!(world.reduce_scatter(&x, Reduction::Sum).is_err());
            assert!(world.all_to_all(&x).is_err());
            // Two senders, or none.
            let two = if rank < 2 {
                world.broadcast_send(&x)
            } else {
                world.broadcast_recv(x.shape(), x.dtype(), &device)
            };
            assert!(two.unwrap_err().to_string().contains("all sent"));
            let none = world.broadcast_recv(x.shape(), x.dtype(), &device);
            assert!(none.unwrap_err().to_string().contains("no rank"));
            // An output of the wrong shape, or shared, on one rank: every rank fails, that
            // one with its own reason.
            let x = local(rank, DataType::Float, 4, &device);
            let out =
                Tensor::zeros([if rank == 1 { 5 } else { 4 }], DataType::Float, &device).unwrap();
            let message = world
                .all_reduce_into(&x, out, Reduction::Sum)
                .unwrap_err()
                .to_string();
            if rank == 1 {
                assert!(message.contains("the output is float32 [5]"), "{message}");
            } else {
                assert!(
                    message.contains("rank 1 passed a call it refused"),
                    "{message}"
                );
            }
            let out = Tensor::zeros([4], DataType::Float, &device).unwrap();
            let shared = out.clone();
            let message = world
                .all_reduce_into(&x, out, Reduction::Sum)
                .unwrap_err()
                .to_string();
            assert!(
                message.contains("shares") || message.contains("refused"),
                "{message}"
            );
            drop(shared);
            let x = local(rank, DataType::Float, 1, &device);
            // Bad peers and tags are refused before anything moves.
            assert!(world.send(&x, 99, 0).is_err());
            assert!(world
                .send(&x, 0, polytensor_distributed::MAX_TAG + 1)
                .is_err());
            // And the communicator still works after them.
            let ok = world
                .all_reduce(&local(rank, DataType::Int32, 3, &device), Reduction::Max)
                .unwrap();
            assert_eq!(ok.dims().as_slice(), &[3]);
        });
    } else {
        mpirun(3, "mismatched_calls_fail_on_every_rank", &[], Ending::Clean);
    }
}

/// A rank that never makes the call: the others' call is an `Err` once their timeout
/// passes, and so is every later call (MPI's state is unknown).
#[test]
fn a_missing_rank_is_an_error_within_the_timeout() {
    if child() {
        let mpi = Mpi::init().unwrap();
        let mut world = mpi.world().unwrap();
        world.set_timeout(Duration::from_secs(3));
        if world.rank() == 2 {
            println!("{}", passed(2));
            return;
        }
        let start = Instant::now();
        let x = local(world.rank(), DataType::Float, 4, &cpu());
        let message = world
            .all_reduce(&x, Reduction::Sum)
            .unwrap_err()
            .to_string();
        assert!(message.contains("did not complete within 3s"), "{message}");
        assert!(start.elapsed() < Duration::from_secs(30));
        let later = world.barrier().unwrap_err().to_string();
        assert!(later.contains("broken"), "{later}");
        println!("{}", passed(world.rank()));
    } else {
        mpirun(
            3,
            "a_missing_rank_is_an_error_within_the_timeout",
            &[],
            Ending::Survivors(3),
        );
    }
}

/// A rank that dies mid-run: with `--enable-recovery` mpirun lets the others run on, and
/// their collective is an `Err` within their timeout (without it, mpirun ends the job).
#[test]
fn a_dead_rank_is_an_error_on_the_others() {
    if child() {
        let mpi = Mpi::init().unwrap();
        let mut world = mpi.world().unwrap();
        world.set_timeout(Duration::from_secs(3));
        let x = local(world.rank(), DataType::Float, 1 << 16, &cpu());
        world.all_reduce(&x, Reduction::Sum).unwrap();
        if world.rank() == 2 {
            std::process::exit(3);
        }
        std::thread::sleep(Duration::from_millis(500));
        let start = Instant::now();
        let message = world
            .all_reduce(&x, Reduction::Sum)
            .unwrap_err()
            .to_string();
        assert!(start.elapsed() < Duration::from_secs(30), "{message}");
        println!("{}", passed(world.rank()));
    } else {
        mpirun(
            3,
            "a_dead_rank_is_an_error_on_the_others",
            &["--enable-recovery"],
            Ending::Survivors(2),
        );
    }
}

/// One data-parallel step: each rank's gradient, all-reduced to the mean, updates one copy
/// of the weights per rank; the copies stay identical.
#[test]
fn a_data_parallel_step_keeps_the_ranks_identical() {
    if child() {
        as_rank(|world| {
            let device = cpu();
            let weights = Tensor::from_slice(&[0.5f32, -1.0, 2.0, 0.25], [4], &device).unwrap();
            let gradient = local(world.rank(), DataType::Float, 4, &device);
            let mean = world.all_reduce(&gradient, Reduction::Mean).unwrap();
            let step = Tensor::scalar(0.1f32, &device).unwrap();
            let updated = weights
                .binary(BinaryOp::Sub, &mean.binary(BinaryOp::Mul, &step).unwrap())
                .unwrap();
            let everyone = world.all_gather(&updated).unwrap().to_vec::<f32>().unwrap();
            let mine = updated.to_vec::<f32>().unwrap();
            for (r, copy) in everyone.chunks(4).enumerate() {
                assert_eq!(
                    copy,
                    mine.as_slice(),
                    "rank {r}'s weights differ from rank {}'s",
                    world.rank()
                );
            }
        });
    } else {
        mpirun(
            4,
            "a_data_parallel_step_keeps_the_ranks_identical",
            &[],
            Ending::Clean,
        );
    }
}

/// TensorFlow's Python (`POLYTENSOR_TF_PYTHON`, else the workspace's `target/tf-venv`), if
/// it imports tensorflow; else `None` after saying why, or a panic where
/// `POLYTENSOR_REQUIRE_TENSORFLOW` is set.
fn tensorflow() -> Option<std::path::PathBuf> {
    let python = std::env::var_os("POLYTENSOR_TF_PYTHON").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tf-venv/bin/python"),
        std::path::PathBuf::from,
    );
    let imports = Command::new(&python)
        .args(["-c", "import tensorflow"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !imports {
        assert!(
            std::env::var_os("POLYTENSOR_REQUIRE_TENSORFLOW").is_none(),
            "POLYTENSOR_REQUIRE_TENSORFLOW is set, but {} cannot import tensorflow",
            python.display()
        );
        eprintln!("skipped: {} cannot import tensorflow", python.display());
        return None;
    }
    Some(python)
}

/// The GraphDef TensorFlow wrote with its collective ops (`tests/python/tf_collective_graph.py`
/// of the workspace), run by every rank through the world communicator: the reductions and
/// the gather span the ranks, and rank 0's `CollectiveBcastSendV2` reaches the others'
/// `CollectiveBcastRecvV2`.
#[test]
fn a_tensorflow_graph_with_collective_ops_spans_the_ranks() {
    use polytensor::graph::{Graph, Session};
    const GRAPH: &str = "POLYTENSOR_COLLECTIVE_GRAPH";
    if child() {
        as_rank(|world| {
            let path = std::env::var(GRAPH).unwrap();
            let graph = Graph::from_graph_def_bytes(&std::fs::read(path).unwrap()).unwrap();
            let (rank, size) = (world.rank(), world.size());
            for device in devices() {
                let session =
                    Session::new(&graph, device.clone()).with_collectives(Arc::new(world.clone()));
                let x_value = local(rank, DataType::Float, 6, &device)
                    .reshape([2, 3])
                    .unwrap();
                let group_size = Tensor::scalar(size as i32, &device).unwrap();
                let feeds = [
                    (graph.tensor("x").unwrap(), &x_value),
                    (graph.tensor("group_size").unwrap(), &group_size),
                ];
                let feeds: Vec<_> = feeds.iter().map(|(o, t)| (o, *t)).collect();
                let run = |name: &str| {
                    let fetch = graph.tensor(name).unwrap();
                    let got = session.run(&feeds, &[&fetch], &[]).unwrap();
                    assert_eq!(got[0].device().name(), device.name(), "{name}");
                    as_f64(&got[0])
                };
                for (name, reduction) in [
                    ("sum", Reduction::Sum),
                    ("mean", Reduction::Mean),
                    ("max", Reduction::Max),
                ] {
                    // float32's rounding of the exact value.
                    let want: Vec<f64> = (0..6)
                        .map(|i| expected(reduction, size, i) as f32 as f64)
                        .collect();
                    assert_eq!(run(name), want, "{name} on {}", device.name());
                }
                let want: Vec<f64> = (0..size)
                    .flat_map(|r| (0..6).map(move |i| value(r, i)))
                    .collect();
                assert_eq!(run("gathered"), want, "gathered on {}", device.name());
                // Rank 0 sends 2x, the others receive it.
                let got = run(if rank == 0 { "sent" } else { "received" });
                let want: Vec<f64> = (0..6).map(|i| 2.0 * value(0, i)).collect();
                assert_eq!(got, want, "broadcast on {}", device.name());
            }
        });
    } else {
        let Some(python) = tensorflow() else {
            return;
        };
        let dir = std::env::temp_dir().join(format!("polytensor-mpi-graph-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("collective.pb");
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/python/tf_collective_graph.py");
        let made = Command::new(python)
            .arg(script)
            .arg(&path)
            .env("TF_CPP_MIN_LOG_LEVEL", "2")
            .output()
            .unwrap();
        assert!(
            made.status.success(),
            "{}",
            String::from_utf8_lossy(&made.stderr)
        );
        mpirun_with(
            3,
            "a_tensorflow_graph_with_collective_ops_spans_the_ranks",
            &[],
            &[(GRAPH, path.display().to_string())],
            Ending::Clean,
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// An MLP (6 features, 8 hidden with ReLU, 3 classes, mean sparse softmax cross entropy)
/// whose Adam step takes its gradients as fed placeholders (`Graph::apply_gradients`):
/// the graph, the features and labels, the gradients (`Graph::gradients`), their
/// placeholders, the step, the initializers and the weights' reads.
struct Mlp {
    graph: polytensor::graph::Graph,
    x: polytensor::graph::Output,
    y: polytensor::graph::Output,
    gradients: Vec<polytensor::graph::Output>,
    fed: Vec<polytensor::graph::Output>,
    step: polytensor::graph::Operation,
    init: Vec<polytensor::graph::Operation>,
    reads: Vec<polytensor::graph::Output>,
}

fn mlp() -> Mlp {
    use polytensor::graph::{Graph, Optimizer};
    use polytensor::PartialTensorShape;
    let mut g = Graph::new();
    let x = g
        .placeholder_named(
            "x",
            DataType::Float,
            &PartialTensorShape::new(&[None, Some(6)]).unwrap(),
        )
        .unwrap();
    let y = g
        .placeholder_named(
            "y",
            DataType::Int32,
            &PartialTensorShape::new(&[None]).unwrap(),
        )
        .unwrap();
    let (mut weights, mut init, mut reads) = (Vec::new(), Vec::new(), Vec::new());
    for (i, dims) in [vec![6, 8], vec![8], vec![8, 3], vec![3]]
        .into_iter()
        .enumerate()
    {
        let count: usize = dims.iter().product();
        let values: Vec<f32> = (0..count)
            .map(|j| ((i * 31 + j * 7) % 13) as f32 / 13.0 - 0.45)
            .collect();
        let initial = g.constant_values(&values, &dims).unwrap();
        let variable = g.resource_variable(&format!("w{i}"), &initial).unwrap();
        init.push(variable.initializer);
        reads.push(variable.value);
        weights.push(variable.handle);
    }
    let hidden = g.matmul(&x, &reads[0]).unwrap();
    let hidden = g
        .op("BiasAdd")
        .input(&hidden)
        .input(&reads[1])
        .build_output()
        .unwrap();
    let hidden = g.unary("Relu", &hidden).unwrap();
    let logits = g.matmul(&hidden, &reads[2]).unwrap();
    let logits = g
        .op("BiasAdd")
        .input(&logits)
        .input(&reads[3])
        .build_output()
        .unwrap();
    let losses = g
        .op("SparseSoftmaxCrossEntropyWithLogits")
        .input(&logits)
        .input(&y)
        .build_output()
        .unwrap();
    let axis = g.constant_values(&[0i32], &[1]).unwrap();
    let loss = g
        .op("Mean")
        .input(&losses)
        .input(&axis)
        .build_output()
        .unwrap();
    let gradients: Vec<_> = g
        .gradients(&[loss], &weights, None)
        .unwrap()
        .into_iter()
        .map(Option::unwrap)
        .collect();
    let fed: Vec<_> = gradients
        .iter()
        .enumerate()
        .map(|(i, grad)| {
            g.placeholder_named(&format!("grad{i}"), DataType::Float, grad.shape())
                .unwrap()
        })
        .collect();
    let adam = Optimizer::Adam {
        learning_rate: 0.05,
        beta1: 0.9,
        beta2: 0.999,
        epsilon: 1e-3,
    };
    let training = g.apply_gradients(&fed, &weights, &adam).unwrap();
    init.push(training.init);
    Mlp {
        graph: g,
        x,
        y,
        gradients,
        fed,
        step: training.step,
        init,
        reads,
    }
}

/// Batch `step` of 8 examples, rows `rows` of it: features and labels.
fn batch(step: usize, rows: std::ops::Range<usize>, device: &Arc<dyn Device>) -> (Tensor, Tensor) {
    let features: Vec<f32> = rows
        .clone()
        .flat_map(|r| (0..6).map(move |j| ((step * 8 + r) as f32 * 0.37 + j as f32 * 1.3).sin()))
        .collect();
    let labels: Vec<i32> = rows.clone().map(|r| ((step + r) % 3) as i32).collect();
    (
        Tensor::from_slice(&features, [rows.len(), 6], device).unwrap(),
        Tensor::from_slice(&labels, [rows.len()], device).unwrap(),
    )
}

/// Train `model` for 10 steps: each step's gradients from `gradients_of(step)`, then Adam.
fn train(
    model: &Mlp,
    session: &polytensor::graph::Session,
    mut gradients_of: impl FnMut(usize) -> Vec<Tensor>,
) -> Vec<Vec<f32>> {
    let init: Vec<_> = model.init.iter().collect();
    session.run(&[], &[], &init).unwrap();
    for step in 0..10 {
        let grads = gradients_of(step);
        let feeds: Vec<_> = model.fed.iter().zip(&grads).collect();
        session.run(&feeds, &[], &[&model.step]).unwrap();
    }
    let reads: Vec<_> = model.reads.iter().collect();
    let weights = session.run(&[], &reads, &[]).unwrap();
    weights.iter().map(|w| w.to_vec::<f32>().unwrap()).collect()
}

/// Data-parallel training under `mpirun -np 2`: each rank takes its half of every batch,
/// its gradients all-reduced over MPI to their mean, and applies Adam; after 10 steps
/// every rank holds the weights one process reaches training on the whole batches.
#[test]
fn data_parallel_training_matches_one_process_on_the_whole_batch() {
    if child() {
        as_rank(|world| {
            use polytensor::graph::Session;
            let device = cpu();
            let model = mlp();
            let (rank, size) = (world.rank(), world.size());
            let whole = Session::new(&model.graph, device.clone());
            let alone = train(&model, &whole, |step| {
                let (x, y) = batch(step, 0..8, &device);
                let fetches: Vec<_> = model.gradients.iter().collect();
                whole
                    .run(&[(&model.x, &x), (&model.y, &y)], &fetches, &[])
                    .unwrap()
            });
            let parallel = Session::new(&model.graph, device.clone());
            let share = 8 / size;
            let together = train(&model, &parallel, |step| {
                let (x, y) = batch(step, rank * share..(rank + 1) * share, &device);
                let fetches: Vec<_> = model.gradients.iter().collect();
                let local = parallel
                    .run(&[(&model.x, &x), (&model.y, &y)], &fetches, &[])
                    .unwrap();
                local
                    .iter()
                    .map(|g| world.all_reduce(g, Reduction::Mean).unwrap())
                    .collect()
            });
            for (i, (a, b)) in alone.iter().zip(&together).enumerate() {
                for (x, y) in a.iter().zip(b) {
                    assert!(
                        (x - y).abs() <= 1e-5 * x.abs().max(1.0),
                        "rank {rank}: weight {i}: {a:?} alone, {b:?} data-parallel"
                    );
                }
            }
            // Every rank holds the same weights.
            for weight in &together {
                let mine = Tensor::from_slice(weight, [weight.len()], &device).unwrap();
                let everyone = world.all_gather(&mine).unwrap().to_vec::<f32>().unwrap();
                for copy in everyone.chunks(weight.len()) {
                    assert_eq!(copy, weight.as_slice(), "rank {rank}'s copy differs");
                }
            }
        });
    } else {
        mpirun(
            2,
            "data_parallel_training_matches_one_process_on_the_whole_batch",
            &[],
            Ending::Clean,
        );
    }
}
