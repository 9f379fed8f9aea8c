//! A matmul and a reduction on the first opencl device, checked against cpu:0 and timed
//! (`cargo run --example opencl_device --features opencl`).

mod common;

fn main() -> polytensor::Result<()> {
    common::run_on("opencl")
}
