//! One graph across every device present (cpu:0, opencl:0 and wgpu:0 in CI): a matmul on
//! the first GPU, a reduction on the second, the rest on the CPU, with the copies between
//! them; the values are those of the same graph on cpu:0 alone. (TensorFlow runs the same
//! graph, with soft placement, in `tests/graph_tensorflow.rs`'s `placed_across_devices`.)

use crate::common;

use std::sync::Arc;

use common::placed::across_devices;
use polytensor::graph::{Output, Session, SessionOptions};
use polytensor::{same_device, DataType, Device, Tensor};

#[test]
fn one_graph_runs_across_every_device() {
    let devices: Vec<Arc<dyn Device>> = common::golden::devices();
    let (g, x, fetches) = across_devices();
    let cpu = devices[0].clone();
    let feed = Tensor::from_slice(&[1.0f32, 2.0, 3.0, -1.0, 0.5, 4.0], [2, 3], &cpu).unwrap();
    let fetch: Vec<&Output> = fetches.iter().collect();
    let everywhere = Session::with_options(&g, SessionOptions::new(devices.clone())).unwrap();
    let got = everywhere.run(&[(&x, &feed)], &fetch, &[]).unwrap();
    let want = Session::new(&g, cpu.clone())
        .run(&[(&x, &feed)], &fetch, &[])
        .unwrap();
    for (got, want) in got.iter().zip(&want) {
        let (got, want) = (got.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
        for (a, b) in got.iter().zip(&want) {
            assert!(
                (a - b).abs() <= 1e-5 * b.abs().max(1.0),
                "{got:?} != {want:?}"
            );
        }
    }
    // `GPU:0` and `GPU:1` are the first and second devices that are not the CPU; where the
    // machine has fewer, soft placement falls back to cpu:0.
    let gpu = |n: usize| devices.get(n + 1).unwrap_or(&cpu).clone();
    assert!(same_device(got[0].device(), &gpu(0)));
    assert!(same_device(got[1].device(), &gpu(1)));
    assert!(same_device(got[2].device(), &cpu));
    let placement = everywhere.placement().unwrap();
    println!("{placement}");
    let device_of = |name: &str| placement.device_of(name).unwrap().to_string();
    assert_eq!(device_of("MatMul"), gpu(0).name());
    assert_eq!(device_of("rows"), gpu(1).name());
    assert_eq!(device_of("add"), cpu.name());
    // Every edge that crosses devices is one copy: x and w to the matmul's device, its
    // product to the reduction's, the row sums back to the CPU.
    let crossings = [
        ("x:0", cpu.clone(), gpu(0)),
        ("w:0", cpu.clone(), gpu(0)),
        ("MatMul:0", gpu(0), gpu(1)),
        ("axes:0", cpu.clone(), gpu(1)),
        ("rows:0", gpu(1), cpu.clone()),
    ];
    let expected: Vec<(String, String, String)> = crossings
        .iter()
        .filter(|(_, from, to)| !same_device(from, to))
        .map(|(t, from, to)| {
            (
                t.to_string(),
                from.name().to_string(),
                to.name().to_string(),
            )
        })
        .collect();
    let mut copies: Vec<(String, String, String)> = placement
        .copies
        .iter()
        .map(|c| (c.tensor.clone(), c.from.clone(), c.to.clone()))
        .collect();
    copies.sort();
    let mut expected = expected;
    expected.sort();
    assert_eq!(copies, expected);
}

#[test]
fn the_facade_session_opens_on_every_device() {
    let (g, x, fetches) = across_devices();
    let session = polytensor::session(&g).unwrap();
    let present = polytensor::devices()
        .iter()
        .filter(|e| e.device().is_some())
        .count();
    assert_eq!(session.devices().len(), present);
    let feed = Tensor::zeros([2, 3], DataType::Float, session.device()).unwrap();
    let z = session.run(&[(&x, &feed)], &[&fetches[2]], &[]).unwrap();
    assert_eq!(z[0].to_vec::<f32>().unwrap(), [100.0, 200.0]);
}
