//! The one-pass hard swish gives the bits of the four ops it replaces.

use std::sync::Arc;

use polytensor_core::{DataType, Device, Scalar, Tensor, UnaryOp};
use polytensor_cpu::CpuDevice;

/// `x * (relu6(x + 3) / 6)` (and `* (1/6)`) in one pass and as the ops, on values around
/// the clamp's corners, extremes, NaN and infinities, past the size where it splits across
/// threads.
#[test]
fn hard_swish_has_the_bits_of_its_four_ops() {
    let device: Arc<dyn Device> = CpuDevice::shared();
    let special = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -3.0,
        3.0,
        -0.0,
        f32::MAX,
        f32::MIN_POSITIVE,
        -2.999_999_8,
    ];
    let values: Vec<f32> = special
        .into_iter()
        .chain((0..100_003).map(|i| (i as f32 - 50_000.0) * 1.37e-4))
        .collect();
    let x = Tensor::from_slice(&values, [values.len()], &device).unwrap();
    let scalar = |v: f64| Tensor::full([0usize; 0], Scalar::F64(v), DataType::Float, &device);
    let clamped = x
        .add(&scalar(3.0).unwrap())
        .unwrap()
        .unary(UnaryOp::Relu6)
        .unwrap();
    for divide in [true, false] {
        let gate = if divide {
            clamped.div(&scalar(6.0).unwrap()).unwrap()
        } else {
            clamped.mul(&scalar(1.0 / 6.0).unwrap()).unwrap()
        };
        let want = x.mul(&gate).unwrap().to_vec::<f32>().unwrap();
        let got = x.hard_swish(divide).unwrap().to_vec::<f32>().unwrap();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "divide {divide}, x = {}",
                values[i]
            );
        }
    }
}
