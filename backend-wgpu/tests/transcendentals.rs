//! The WGSL exp, log, sin, cos, tanh and sigmoid against f64 references over every f32
//! exponent (random bit patterns) and a dense sweep of [0.5, 20.5]: within the
//! conformance suite's bounds, which the suite's own inputs probe less densely.

use std::sync::Arc;

use tensor_core::conformance::tolerance::ulp;
use tensor_core::{BinaryOp, DataType, Device, Tensor, UnaryOp};

fn inputs() -> Vec<f32> {
    let mut xs: Vec<f32> = (0..200_000).map(|i| 0.5 + i as f32 * 1e-4).collect();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    while xs.len() < 500_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let v = f32::from_bits((state >> 32) as u32);
        if v.is_finite() {
            xs.push(v);
        }
    }
    xs
}

fn reference(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tanh => x.tanh(),
        _ if x < 0.0 => x.exp() / (1.0 + x.exp()),
        _ => 1.0 / (1.0 + (-x).exp()),
    }
}

#[test]
fn transcendentals_stay_within_their_ulp_bounds() {
    let device: Arc<dyn Device> = match backend_wgpu::WgpuDevice::open(0) {
        Ok(device) => device,
        Err(e) => {
            eprintln!("skipped: {e}");
            return;
        }
    };
    let xs = inputs();
    let x = Tensor::from_slice(&xs, [xs.len()], &device).unwrap();
    for (op, bound) in [
        (UnaryOp::Exp, 2.0),
        (UnaryOp::Log, 2.0),
        (UnaryOp::Sin, 2.0),
        (UnaryOp::Cos, 2.0),
        (UnaryOp::Tanh, 4.0),
        (UnaryOp::Sigmoid, 4.0),
    ] {
        let got = x.unary(op).unwrap().to_vec::<f32>().unwrap();
        let mut worst = (0.0f64, 0.0f32);
        for (&v, &g) in xs.iter().zip(&got) {
            let want = reference(op, f64::from(v));
            let rounded = want as f32;
            if rounded.is_nan() || rounded.is_infinite() || g.is_nan() || g.is_infinite() {
                assert!(
                    g.to_bits() == rounded.to_bits() || (g.is_nan() && rounded.is_nan()),
                    "{op}({v}) = {g}, expected {rounded}"
                );
                continue;
            }
            let error = (f64::from(g) - want).abs() / ulp(DataType::Float, want.abs());
            if error > worst.0 {
                worst = (error, v);
            }
        }
        println!("{op}: worst {:.3} ulp at {}", worst.0, worst.1);
        assert!(worst.0 <= bound, "{op}: {:.3} ulp at {}", worst.0, worst.1);
    }
}

#[test]
fn pow_stays_within_four_ulp() {
    let device: Arc<dyn Device> = match backend_wgpu::WgpuDevice::open(0) {
        Ok(device) => device,
        Err(e) => {
            eprintln!("skipped: {e}");
            return;
        }
    };
    if !device.supports(tensor_core::Op::Binary(BinaryOp::Pow), DataType::Float) {
        eprintln!(
            "skipped: {} computes no float pow (no SHADER_F64)",
            device.name()
        );
        return;
    }
    // Bases over every exponent and near 1, exponents small, large and integer, so that
    // y ln x spans the whole range from underflow to overflow.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
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
    let got = x
        .binary(BinaryOp::Pow, &y)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let mut worst = (0.0f64, 0.0f32, 0.0f32);
    for ((&a, &b), &g) in xs.iter().zip(&ys).zip(&got) {
        let want = f64::from(a).powf(f64::from(b));
        let rounded = want as f32;
        if !rounded.is_finite() || !g.is_finite() {
            assert!(
                g.to_bits() == rounded.to_bits() || (g.is_nan() && rounded.is_nan()),
                "pow({a}, {b}) = {g}, expected {rounded}"
            );
            continue;
        }
        let error = (f64::from(g) - want).abs() / ulp(DataType::Float, want.abs());
        if error > worst.0 {
            worst = (error, a, b);
        }
    }
    println!(
        "pow: worst {:.3} ulp at pow({}, {})",
        worst.0, worst.1, worst.2
    );
    assert!(
        worst.0 <= 4.0,
        "pow: {:.3} ulp at pow({}, {})",
        worst.0,
        worst.1,
        worst.2
    );
}

#[test]
fn f64_functions_stay_within_their_ulp_bounds() {
    let device: Arc<dyn Device> = match backend_wgpu::WgpuDevice::open(0) {
        Ok(device) => device,
        Err(e) => {
            eprintln!("skipped: {e}");
            return;
        }
    };
    if !device.supports(tensor_core::Op::Unary(UnaryOp::Exp), DataType::Double) {
        eprintln!("skipped: {} computes no f64", device.name());
        return;
    }
    let mut xs: Vec<f64> = (0..100_000).map(|i| -50.0 + f64::from(i) * 1e-3).collect();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    while xs.len() < 300_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let v = f64::from_bits(state);
        if v.is_finite() {
            xs.push(v);
        }
    }
    let x = Tensor::from_slice(&xs, [xs.len()], &device).unwrap();
    for (op, bound) in [
        (UnaryOp::Exp, 2.0),
        (UnaryOp::Log, 2.0),
        (UnaryOp::Tanh, 4.0),
        (UnaryOp::Sigmoid, 4.0),
    ] {
        let got = x.unary(op).unwrap().to_vec::<f64>().unwrap();
        let mut worst = (0.0f64, 0.0f64);
        for (&v, &g) in xs.iter().zip(&got) {
            let want = reference(op, v);
            if !want.is_finite() || !g.is_finite() {
                assert!(
                    g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                    "{op}({v}) = {g}, expected {want}"
                );
                continue;
            }
            // (`ulp` gives 0 below f64's normals, where the spacing is the least subnormal.)
            let spacing = ulp(DataType::Double, want.abs()).max(f64::from_bits(1));
            let error = (g - want).abs() / spacing;
            if error > worst.0 {
                worst = (error, v);
            }
        }
        println!("{op} f64: worst {:.3} ulp at {}", worst.0, worst.1);
        assert!(
            worst.0 <= bound,
            "{op} f64: {:.3} ulp at {}",
            worst.0,
            worst.1
        );
    }
}
