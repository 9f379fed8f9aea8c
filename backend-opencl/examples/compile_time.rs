//! How long the OpenCL runtime takes to build generated kernels (a development probe; run
//! with POCL_KERNEL_CACHE=0 to measure cold builds).
use std::time::Instant;
use tensor_core::{DataType, Device, ReduceOp, Tensor};
fn main() {
    let device: std::sync::Arc<dyn Device> = backend_opencl::OpenClDevice::first().unwrap();
    for dtype in [
        DataType::Float,
        DataType::Int32,
        DataType::Half,
        DataType::Double,
    ] {
        let a = Tensor::ones([4, 100], dtype, &device).unwrap();
        let t = Instant::now();
        let b = a.add(&a).unwrap();
        device.synchronize().unwrap();
        println!("{dtype}: add {:?}", t.elapsed());
        let t = Instant::now();
        let _ = b.reduce(ReduceOp::Sum, &[1], false).unwrap();
        device.synchronize().unwrap();
        println!("{dtype}: sum {:?}", t.elapsed());
        let t = Instant::now();
        let _ = b.reduce(ReduceOp::Mean, &[1], false).unwrap();
        device.synchronize().unwrap();
        println!("{dtype}: mean {:?}", t.elapsed());
        let t = Instant::now();
        let _ = b.matmul(&b.t().unwrap()).unwrap();
        device.synchronize().unwrap();
        println!("{dtype}: matmul {:?}", t.elapsed());
    }
}
