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

/// The row gather, the joins along an inner axis and the maxima over middle axes, past the
/// size where they split across threads, hold a plain loop's values (NaN and signed zeros
/// included for the maxima and minima).
#[test]
fn threaded_gathers_joins_and_extremes_match_a_plain_loop() {
    let device: Arc<dyn Device> = CpuDevice::shared();
    // An embedding lookup: one block, its rows across threads.
    let (vocabulary, width) = (5000, 48);
    let table: Vec<f32> = (0..vocabulary * width).map(|i| i as f32).collect();
    let ids: Vec<i32> = (0..4096).map(|i| (i * 7919 % vocabulary) as i32).collect();
    let t = Tensor::from_slice(&table, [vocabulary, width], &device).unwrap();
    let idx = Tensor::from_slice(&ids, [64, 64], &device).unwrap();
    let rows = t.gather(&idx, 0, 0).unwrap();
    assert_eq!(rows.dims(), [64, 64, width]);
    for (k, v) in rows.to_vec::<f32>().unwrap().iter().enumerate() {
        let (i, c) = (k / width, k % width);
        assert_eq!(*v, table[ids[i] as usize * width + c], "row gather at {k}");
    }
    // A gather on a middle axis: outer blocks across threads.
    let blocks = t.reshape([50, 100, width]).unwrap();
    let picks: Vec<i32> = (0..90).map(|i| i * 37 % 100).collect();
    let picked = blocks
        .gather(&Tensor::from_slice(&picks, [90], &device).unwrap(), 1, 0)
        .unwrap();
    assert_eq!(picked.dims(), [50, 90, width]);
    for (k, v) in picked.to_vec::<f32>().unwrap().iter().enumerate() {
        let (o, i, c) = (k / (90 * width), k / width % 90, k % width);
        let want = table[(o * 100 + picks[i] as usize) * width + c];
        assert_eq!(*v, want, "middle gather at {k}");
    }
    // Joins along the last axis, rows across threads.
    let (n, a, b) = (3000, 40, 24);
    let left: Vec<f32> = (0..n * a).map(|i| i as f32).collect();
    let right: Vec<f32> = (0..n * b).map(|i| -(i as f32)).collect();
    let l = Tensor::from_slice(&left, [n, a], &device).unwrap();
    let r = Tensor::from_slice(&right, [n, b], &device).unwrap();
    let joined = Tensor::concat(&[&l, &r], -1)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    for (k, v) in joined.iter().enumerate() {
        let (row, c) = (k / (a + b), k % (a + b));
        let want = if c < a {
            left[row * a + c]
        } else {
            right[row * b + c - a]
        };
        assert_eq!(*v, want, "join at {k}");
    }
    // Maxima and minima over the middle axes of [outer, 30, 20, inner].
    let (outer, inner) = (40, 12);
    let count = outer * 30 * 20 * inner;
    let mut values: Vec<f32> = (0..count)
        .map(|i| ((i * 7561) % 9973) as f32 - 4986.0)
        .collect();
    values[5] = f32::NAN;
    for z in [100, 100 + inner * 3] {
        values[z] = 0.0;
    }
    values[100 + inner] = -0.0;
    let x = Tensor::from_slice(&values, [outer, 30, 20, inner], &device).unwrap();
    for max in [true, false] {
        let got = if max {
            x.max(&[1, 2], false)
        } else {
            x.min(&[1, 2], false)
        }
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
        for (k, v) in got.iter().enumerate() {
            let (o, c) = (k / inner, k % inner);
            let column = (0..600).map(|r| values[(o * 600 + r) * inner + c]);
            let want = if column.clone().any(f32::is_nan) {
                f32::NAN
            } else if max {
                column.fold(f32::NEG_INFINITY, f32::max)
            } else {
                column.fold(f32::INFINITY, f32::min)
            };
            assert!(
                (v.is_nan() && want.is_nan()) || *v == want,
                "{} at {k}: {v} vs {want}",
                if max { "max" } else { "min" }
            );
        }
    }
}
