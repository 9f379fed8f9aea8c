//! f16 matmul against candle's f16, polytensor's own f32 and OpenBLAS's f32, measured in
//! rounds.
//!
//! On a machine whose speed drifts between runs (a shared VM), ratios of benchmarks taken
//! one after another in a criterion run move with the drift. This interleaves the four
//! products (3 calls of each in turn, `rounds` times) and reports the median of the
//! per-round ratios, with the best throughput of each (OpenBLAS one matrix after another):
//!
//! ```text
//! cargo run --release -p benches --features peers --example paired_matmul -- 1 1024 1024 1024 25
//! ```
//!
//! Arguments: batch, m, k, n, rounds.

use std::hint::black_box;
use std::time::Instant;

use benches::peers::Peer;
use polytensor::DataType;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|s| s.parse().expect("arguments are sizes: batch m k n rounds"))
        .collect();
    let [batch, m, k, n, rounds] = args[..] else {
        panic!("usage: paired_matmul BATCH M K N ROUNDS");
    };
    let dims = |rows: usize, cols: usize| match batch {
        1 => vec![rows, cols],
        _ => vec![batch, rows, cols],
    };
    let device = polytensor::device("cpu:0").expect("the CPU device");
    let operands = |dtype| {
        let a = benches::tensor(&dims(m, k), dtype, 1, &device);
        (a, benches::tensor(&dims(k, n), dtype, 2, &device))
    };
    let ((a16, b16), (a32, b32)) = (operands(DataType::Half), operands(DataType::Float));
    let candle = |rows, cols, seed| {
        let values = benches::values(batch * rows * cols, seed);
        candle_core::Tensor::from_vec(values, dims(rows, cols), &candle_core::Device::Cpu)
            .and_then(|t| t.to_dtype(candle_core::DType::F16))
            .expect("candle tensor")
    };
    let (ca, cb) = (candle(m, k, 1), candle(k, n, 2));
    let (va, vb) = (
        benches::values(batch * m * k, 1),
        benches::values(batch * k * n, 2),
    );
    let openblas = || {
        let mut c = vec![0f32; batch * m * n];
        for i in 0..batch {
            let (a, b) = (&va[i * m * k..], &vb[i * k * n..]);
            f32::openblas(m, n, k, a, b, &mut c[i * m * n..]);
        }
        c
    };

    let seconds = |product: &dyn Fn()| {
        product();
        let start = Instant::now();
        (0..3).for_each(|_| product());
        start.elapsed().as_secs_f64() / 3.0
    };
    let flops = 2.0 * (batch * m * n * k) as f64;
    let (mut to_candle, mut to_f32, mut to_openblas) = (vec![], vec![], vec![]);
    let mut best = [0f64; 4];
    for _ in 0..rounds {
        let times = [
            seconds(&|| drop(black_box(a16.matmul(&b16).unwrap()))),
            seconds(&|| drop(black_box(ca.matmul(&cb).unwrap()))),
            seconds(&|| drop(black_box(a32.matmul(&b32).unwrap()))),
            seconds(&|| drop(black_box(openblas()))),
        ];
        to_candle.push(times[1] / times[0]);
        to_f32.push(times[2] / times[0]);
        to_openblas.push(times[3] / times[0]);
        for (best, time) in best.iter_mut().zip(times) {
            *best = best.max(flops / time / 1e9);
        }
    }
    let median = |mut ratios: Vec<f64>| {
        ratios.sort_by(f64::total_cmp);
        ratios[ratios.len() / 2]
    };
    println!(
        "{batch} x {m}x{k}x{n}: polytensor f16 / candle f16 {:.2}x, / polytensor f32 {:.2}x, \
         / OpenBLAS f32 {:.2}x (medians of {rounds}); best GFLOP/s: f16 {:.1}, candle f16 \
         {:.1}, f32 {:.1}, OpenBLAS f32 {:.1}",
        median(to_candle),
        median(to_f32),
        median(to_openblas),
        best[0],
        best[1],
        best[2],
        best[3]
    );
}
