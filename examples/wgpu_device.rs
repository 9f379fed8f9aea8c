//! A matmul and a reduction on the first wgpu device, checked against cpu:0 and timed
//! (`cargo run --example wgpu_device --features wgpu`).

mod common;

fn main() -> polytensor::Result<()> {
    common::run_on("wgpu")
}
