//! The program of the README's "Use it from your crate": a small computation on the best
//! device this machine has.

use polytensor::prelude::*;

fn main() -> polytensor::Result<()> {
    let device = polytensor::best_device()?; // a GPU where the machine has one, else cpu:0
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], [2, 2], &device)?;
    let b = Tensor::from_slice(&[10.0f32, 20.0], [2], &device)?;
    let c = (&a.matmul(&a)? + &b)?; // broadcasting as NumPy does; every op returns Result
    println!("{c} on {}", device.name()); // tf.Tensor([[17. 30.] [25. 42.]], ...)
    Ok(())
}
