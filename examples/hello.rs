//! The seed's first program: `a = 3.0`, `b = 4.0`, `total = a + b`.
//!
//! Run with `cargo run --example hello`.

use polytensor::prelude::*;

fn main() -> Result<()> {
    let cpu = <dyn Device>::by_name("cpu:0")?;
    let a = Tensor::scalar(3.0f32, &cpu)?;
    let b = Tensor::scalar(4.0f32, &cpu)?;
    let total = (&a + &b)?;
    println!("a = {a}");
    println!("b = {b}");
    println!("total = {total}");
    println!("{}", total.item::<f32>()?);
    Ok(())
}
