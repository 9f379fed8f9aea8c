//! A graph placed across devices, shared by `tests/placement.rs` (which runs it on every
//! device present) and `tests/graph_tensorflow.rs` (which runs it in TensorFlow).

use polytensor::graph::{Graph, Output};
use polytensor::{DataType, PartialTensorShape};

/// The graph: `x @ w` on `/device:GPU:0`, its row sums on `/device:GPU:1`, plus a bias on
/// the default device. Returns the graph, the placeholder and the three fetches.
pub fn across_devices() -> (Graph, Output, [Output; 3]) {
    let mut g = Graph::new();
    let shape = PartialTensorShape::new(&[Some(2), Some(3)]).unwrap();
    let x = g.placeholder_named("x", DataType::Float, &shape).unwrap();
    let w = g
        .constant_named(
            "w",
            &[
                0.5f32, -1.0, 2.0, 0.25, 1.5, 3.0, -0.5, 1.0, 0.75, 2.5, -2.0, 0.125,
            ],
            &[3, 4],
        )
        .unwrap();
    let y = g.device_scope("/job:localhost/replica:0/task:0/device:GPU:0", |g| {
        g.matmul(&x, &w).unwrap()
    });
    let axes = g.constant_named("axes", &[1i32], &[1]).unwrap();
    let s = g
        .op("Sum")
        .name("rows")
        .inputs(&[y.clone(), axes])
        .attr("keep_dims", false)
        .device("/device:GPU:1")
        .build_output()
        .unwrap();
    let bias = g.constant_named("bias", &[100.0f32, 200.0], &[2]).unwrap();
    let z = g.add(&s, &bias).unwrap();
    (g, x, [y, s, z])
}
