//! What a wgpu device's f32 arithmetic does where WGSL leaves it open, found when the
//! device opens ([`FloatSemantics`]): WGSL lets a driver flush subnormals to zero and
//! compute `/`, `sqrt` and `1/x` within 2.5 ulp. lavapipe does neither; NVIDIA's Vulkan
//! driver does both. The conformance suite judges each device by what it declares.

use std::sync::Arc;

use polytensor_core::device::FloatSemantics;
use polytensor_core::{BinaryOp, Device, Result, Tensor, UnaryOp};

/// Run the probes on `device`: subnormals through a multiplication by one, and 256
/// quotients, square roots and reciprocals against the host's correctly rounded ones.
pub(crate) fn probe(device: &Arc<dyn Device>) -> Result<FloatSemantics> {
    let tiny = [
        f32::from_bits(1),
        f32::from_bits(0x007f_ffff),
        -f32::from_bits(3),
    ];
    let kept = Tensor::from_slice(&tiny, [tiny.len()], device)?
        .binary(BinaryOp::Mul, &Tensor::scalar(1.0f32, device)?)?
        .to_vec::<f32>()?;
    let flushes_subnormals = !same_bits(&kept, &tiny);
    let (a, b): (Vec<f32>, Vec<f32>) = (1..=256)
        .map(|i| {
            let i = i as f32;
            (1.0 + i * 0.618_034, 3.0 - i * 0.007_1)
        })
        .unzip();
    let (ta, tb) = (
        Tensor::from_slice(&a, [a.len()], device)?,
        Tensor::from_slice(&b, [b.len()], device)?,
    );
    let quotients: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x / y).collect();
    let roots: Vec<f32> = a.iter().map(|x| x.sqrt()).collect();
    let reciprocals: Vec<f32> = b.iter().map(|y| 1.0 / y).collect();
    let inexact_division = !same_bits(&ta.binary(BinaryOp::Div, &tb)?.to_vec()?, &quotients)
        || !same_bits(&ta.unary(UnaryOp::Sqrt)?.to_vec()?, &roots)
        || !same_bits(&tb.unary(UnaryOp::Recip)?.to_vec()?, &reciprocals);
    Ok(FloatSemantics {
        flushes_subnormals,
        inexact_division,
    })
}

/// Whether two slices hold the same f32 bits.
fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}
