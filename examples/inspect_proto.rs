//! Inspect serialized `TensorProto` files: dtype, shape, where the values are, and a
//! summary of the values, as TensorFlow would print the tensor.
//!
//! ```text
//! cargo run --example inspect_proto -- FILE.pb [FILE.pb ...]
//! ```

use polytensor::prelude::*;
use polytensor::proto::{Message, TensorProto};

fn inspect(path: &str) -> Result<(), Box<dyn std::error::Error>> {
    let bytes = std::fs::read(path)?;
    let proto = TensorProto::decode(bytes.as_slice())?;
    let device = polytensor::default_device()?;
    let tensor = Tensor::from_proto(&proto, &device)?;
    println!("{path}: {} bytes", bytes.len());
    println!("  dtype:    {}", tensor.dtype());
    println!("  shape:    {}", tensor.shape());
    println!("  values:   {}", proto.values_field()?);
    println!("  elements: {}", tensor.num_elements());
    println!("  {tensor}");
    Ok(())
}

fn main() {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        eprintln!("usage: cargo run --example inspect_proto -- FILE.pb [FILE.pb ...]");
        std::process::exit(2);
    }
    let mut failed = false;
    for path in &paths {
        if let Err(e) = inspect(path) {
            eprintln!("{path}: {e}");
            failed = true;
        }
    }
    std::process::exit(i32::from(failed));
}
