//! TensorFlow's `GraphDef`, the bridge to TensorFlow's graphs: a graph built here, written
//! as the bytes `tf.Graph.as_graph_def()` would hold, read back as TensorFlow's
//! `import_graph_def` would, and run by name on a device (`cargo run --example graph_def`).

use polytensor::graph::{Graph, Session};
use polytensor::prelude::*;

fn main() -> polytensor::Result<()> {
    let mut graph = Graph::new();
    let x = graph.placeholder_named(
        "x",
        DataType::Float,
        &PartialTensorShape::new(&[None, Some(2)])?,
    )?;
    let w = graph.constant_named("w", &[1.0f32, -1.0, 0.5, 2.0], &[2, 2])?;
    let y = graph.matmul(&x, &w)?;
    println!("{y}");
    let bytes = graph.to_graph_def_bytes();
    println!("GraphDef: {} bytes, {} nodes", bytes.len(), graph.len());

    let imported = Graph::from_graph_def_bytes(&bytes)?;
    let device = polytensor::best_device()?;
    let feed = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], [2, 2], &device)?;
    let session = Session::new(&imported, device.clone());
    let out = session.run_by_name(&[("x:0", &feed)], &[&y.name()], &[])?;
    println!("{} on {}", out[0], device.name());
    Ok(())
}
