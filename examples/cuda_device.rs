//! A matmul and a reduction on the first cuda device, checked against cpu:0 and timed
//! (`cargo run --example cuda_device --features cuda`).

mod common;

fn main() -> polytensor::Result<()> {
    common::run_on("cuda")
}
