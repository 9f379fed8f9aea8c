//! A matmul and a reduction on the first cpu device, checked against cpu:0 and timed
//! (`cargo run --example cpu_device`).

mod common;

fn main() -> polytensor::Result<()> {
    common::run_on("cpu")
}
