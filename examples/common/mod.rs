//! What the per-backend examples (`cpu_device`, `wgpu_device`, `opencl_device`,
//! `cuda_device`) share: a few ops on one device, checked against `cpu:0` and timed.

use std::time::Instant;

use polytensor::prelude::*;

/// Run the demonstration on the first device of `family` (`wgpu`, `opencl`, ...), or say
/// why this machine has none.
pub fn run_on(family: &str) -> polytensor::Result<()> {
    let device = match polytensor::device(family) {
        Ok(device) => device,
        Err(why) => {
            println!("{why}");
            return Ok(());
        }
    };
    println!("{}: {}", device.name(), device.description());
    let cpu = polytensor::device("cpu:0")?;
    let values: Vec<f32> = (0..256 * 256)
        .map(|i| (i % 17) as f32 / 16.0 - 0.5)
        .collect();
    let a = Tensor::from_slice(&values, [256, 256], &cpu)?;
    let on_device = a.to_device(&device)?;

    let start = Instant::now();
    let product = on_device.matmul(&on_device)?;
    // GPU work is asynchronous: wait for it before reading the clock.
    device.synchronize()?;
    let elapsed = start.elapsed();

    let want = a.matmul(&a)?;
    let difference = (&product.to_device(&cpu)? - &want)?.abs()?.max_all()?;
    println!(
        "matmul 256^3 in {elapsed:?}; largest difference from cpu:0: {:e}",
        difference.item::<f32>()?
    );
    let scaled_rows = (&on_device * 2.0)?.sum(&[1], false)?;
    println!("row sums of 2a: {}", scaled_rows.narrow(0, 0, 4)?);
    Ok(())
}
