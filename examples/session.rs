//! The seed's first program in graph mode: `total = a + b` is a symbolic tensor until a
//! session runs it.
//!
//! ```python
//! a = tf.constant(3.0); b = tf.constant(4.0); total = a + b
//! print(total)                                        # Tensor("add:0", shape=(), dtype=float32)
//! with tf.Session() as sess: print(sess.run(total))   # 7.0
//! ```
//!
//! Run with `cargo run --example session`.

use polytensor::graph::{Graph, Session};
use polytensor::prelude::*;

fn main() -> Result<()> {
    let mut graph = Graph::new();
    let a = graph.constant(3.0f32)?;
    let b = graph.constant(4.0f32)?;
    let total = graph.add(&a, &b)?;
    println!("{total}");
    let session = Session::new(&graph, default_device()?);
    let values = session.run(&[], &[&total], &[])?;
    println!("{:?}", values[0].item::<f32>()?);
    Ok(())
}
