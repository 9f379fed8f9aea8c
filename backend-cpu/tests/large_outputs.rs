//! Outputs past the streaming-store threshold (32 MiB) hold the same values as a plain
//! loop gives, for contiguous and broadcast operands.

use std::sync::Arc;

use polytensor_core::{Device, Tensor};
use polytensor_cpu::CpuDevice;

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

    // A transposed operand takes the tiled path, streamed too.
    let n = 3001; // 36 MiB of f32, partial tiles at the edges
    let square: Vec<f32> = (0..n * n).map(|i| (i % 997) as f32).collect();
    let m = Tensor::from_slice(&square, [n, n], &device).unwrap();
    let sum = m.t().unwrap().add(&m).unwrap().to_vec::<f32>().unwrap();
    for (k, s) in sum.iter().enumerate() {
        let (r, c) = (k / n, k % n);
        assert_eq!(
            *s,
            square[c * n + r] + square[r * n + c],
            "element ({r}, {c})"
        );
    }
}
