//! The WGSL exp, log, sin, cos, tanh, sigmoid and pow against f64 references, over every
//! exponent (random bit patterns) and dense sweeps: within the conformance suite's ulp
//! bounds, which the suite's own inputs probe less densely.

use std::fmt::Display;
use std::sync::Arc;

use conformance::tolerance::ulp;
use polytensor_core::{BinaryOp, DataType, Device, Op, Tensor, UnaryOp};

/// The first wgpu device if it computes `op` on `dtype`, or `None` after saying why not.
fn device_for(op: Op, dtype: DataType) -> Option<Arc<dyn Device>> {
    let device: Arc<dyn Device> = match polytensor_wgpu::open(0) {
        Ok(device) => device,
        Err(e) => {
            eprintln!("skipped: {e}");
            return None;
        }
    };
    if !device.supports(op, dtype) {
        eprintln!("skipped: {} computes no {op} on {dtype}", device.name());
        return None;
    }
    Some(device)
}

/// A xorshift stream of 64-bit words.
fn words(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// Assert every `(input, got, exact)` is within `bound` ulp of `dtype` (infinities and NaN
/// exactly), and print the worst error.
fn check_within<I: Display>(
    what: &str,
    dtype: DataType,
    bound: f64,
    results: impl Iterator<Item = (I, f64, f64)>,
) {
    let mut worst = (0.0f64, String::new());
    for (input, got, exact) in results {
        let want = if dtype == DataType::Float {
            f64::from(exact as f32)
        } else {
            exact
        };
        if !want.is_finite() || !got.is_finite() {
            assert!(
                got == want || (got.is_nan() && want.is_nan()),
                "{what}({input}) = {got}, expected {want}"
            );
            continue;
        }
        // (`ulp` gives 0 below f64's normals, where the spacing is the least subnormal.)
        let spacing = ulp(dtype, exact.abs()).max(f64::from_bits(1));
        let error = (got - exact).abs() / spacing;
        if error > worst.0 {
            worst = (error, input.to_string());
        }
    }
    println!("{what} {dtype}: worst {:.3} ulp at {}", worst.0, worst.1);
    assert!(
        worst.0 <= bound,
        "{what} {dtype}: {:.3} ulp at {}",
        worst.0,
        worst.1
    );
}

fn reference(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Erf => libm::erf(x),
        UnaryOp::Erfc => libm::erfc(x),
        _ if x < 0.0 => x.exp() / (1.0 + x.exp()),
        _ => 1.0 / (1.0 + (-x).exp()),
    }
}

/// Each op with its bound in ulp.
const BOUNDS: [(UnaryOp, f64); 8] = [
    (UnaryOp::Exp, 2.0),
    (UnaryOp::Log, 2.0),
    (UnaryOp::Sin, 2.0),
    (UnaryOp::Cos, 2.0),
    (UnaryOp::Tanh, 4.0),
    (UnaryOp::Sigmoid, 4.0),
    (UnaryOp::Erf, 2.0),
    (UnaryOp::Erfc, 4.0),
];

#[test]
fn f32_functions_stay_within_their_ulp_bounds() {
    let Some(device) = device_for(Op::Unary(UnaryOp::Exp), DataType::Float) else {
        return;
    };
    let mut next = words(0x2545_f491_4f6c_dd1d);
    let mut xs: Vec<f32> = (0..200_000).map(|i| 0.5 + i as f32 * 1e-4).collect();
    while xs.len() < 500_000 {
        let v = f32::from_bits((next() >> 32) as u32);
        if v.is_finite() {
            xs.push(v);
        }
    }
    let x = Tensor::from_slice(&xs, [xs.len()], &device).unwrap();
    for (op, bound) in BOUNDS {
        let got = x.unary(op).unwrap().to_vec::<f32>().unwrap();
        let results = xs
            .iter()
            .zip(&got)
            .map(|(&v, &g)| (v, f64::from(g), reference(op, f64::from(v))));
        check_within(op.name(), DataType::Float, bound, results);
    }
}

#[test]
fn f64_functions_stay_within_their_ulp_bounds() {
    let Some(device) = device_for(Op::Unary(UnaryOp::Exp), DataType::Double) else {
        return;
    };
    let mut next = words(0x2545_f491_4f6c_dd1d);
    let mut xs: Vec<f64> = (0..100_000).map(|i| -50.0 + f64::from(i) * 1e-3).collect();
    while xs.len() < 300_000 {
        let v = f64::from_bits(next());
        if v.is_finite() {
            xs.push(v);
        }
    }
    let x = Tensor::from_slice(&xs, [xs.len()], &device).unwrap();
    for (op, bound) in BOUNDS {
        if !device.supports(Op::Unary(op), DataType::Double) {
            continue;
        }
        let got = x.unary(op).unwrap().to_vec::<f64>().unwrap();
        let results = xs.iter().zip(&got).map(|(&v, &g)| (v, g, reference(op, v)));
        check_within(op.name(), DataType::Double, bound, results);
    }
}

#[test]
fn f32_pow_stays_within_four_ulp() {
    let Some(device) = device_for(Op::Binary(BinaryOp::Pow), DataType::Float) else {
        return;
    };
    // Bases over every exponent, near 1 and negative; exponents small, large and integer,
    // so that y ln x spans the whole range from underflow to overflow.
    let mut next = words(0x9e37_79b9_7f4a_7c15);
    let (mut xs, mut ys) = (vec![], vec![]);
    while xs.len() < 300_000 {
        let r = next();
        let x = match r % 3 {
            0 => f32::from_bits((r >> 33) as u32 & 0x7fff_ffff),
            1 => 1.0 + ((r >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 1e-3,
            _ => -((r >> 40) as f32 / 4096.0),
        };
        let s = next();
        let y = match s % 3 {
            0 => (s >> 40) as f32 / (1u64 << 20) as f32 - 8.0,
            1 => ((s >> 40) as f32 - (1u64 << 23) as f32) * 1e-2,
            _ => ((s >> 40) % 61) as f32 - 30.0,
        };
        if x.is_finite() {
            xs.push(x);
            ys.push(y);
        }
    }
    let n = xs.len();
    let x = Tensor::from_slice(&xs, [n], &device).unwrap();
    let y = Tensor::from_slice(&ys, [n], &device).unwrap();
    let got = x.binary(BinaryOp::Pow, &y).unwrap();
    let got = got.to_vec::<f32>().unwrap();
    let results = xs.iter().zip(&ys).zip(&got).map(|((&a, &b), &g)| {
        let exact = f64::from(a).powf(f64::from(b));
        (format!("{a}, {b}"), f64::from(g), exact)
    });
    check_within("pow", DataType::Float, 4.0, results);
}
