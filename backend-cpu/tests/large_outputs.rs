//! Outputs past the streaming-store threshold (32 MiB) hold the same values as a plain
//! loop gives, for contiguous and broadcast operands.

use std::sync::Arc;

use backend_cpu::CpuDevice;
use tensor_core::{Device, Tensor};

#[test]
fn streamed_results_match_a_plain_loop() {
    let device: Arc<dyn Device> = CpuDevice::shared();
    let (rows, cols) = (9, 1 << 20); // 36 MiB of f32
    let a: Vec<f32> = (0..rows * cols).map(|i| (i % 1001) as f32).collect();
    let b: Vec<f32> = (0..cols).map(|i| (i % 7) as f32 * 0.5).collect();
    let ta = Tensor::from_slice(&a, [rows, cols], &device).unwrap();
    let tb = Tensor::from_slice(&b, [cols], &device).unwrap();
    let sum = ta.add(&ta).unwrap().to_vec::<f32>().unwrap();
    assert!(sum.iter().zip(&a).all(|(s, x)| *s == x + x));
    let broadcast = ta.add(&tb).unwrap().to_vec::<f32>().unwrap();
    let expected = a.iter().enumerate().map(|(i, x)| x + b[i % cols]);
    assert!(broadcast.iter().zip(expected).all(|(s, e)| *s == e));
}
