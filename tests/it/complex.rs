//! TensorFlow's complex ops as eager `Tensor` methods (`complex`, `real`, `imag`, `conj`,
//! `angle`, `complex_abs`) on every device here, against values computed on the host with
//! Rust's own float math. Devices that do not run an op for a dtype (wgpu's complex128
//! transcendentals) must say so with `Err(Unsupported)`.

use std::sync::Arc;

use polytensor::{DataType, Device, Error, Tensor};

/// Real and imaginary parts with signed zeros, both signs of every quadrant, and a NaN.
const RE: [f32; 8] = [1.5, -2.0, 0.0, -0.0, 3.0, -1.0, f32::NAN, 0.0];
const IM: [f32; 8] = [0.5, -0.0, 4.0, 0.0, -3.0, -1.0, 1.0, -0.0];

fn close(got: f32, want: f32) -> bool {
    (got.is_nan() && want.is_nan()) || (got - want).abs() <= 1e-6 * want.abs().max(1.0)
}

fn check(device: &Arc<dyn Device>) -> Result<(), Error> {
    let re = Tensor::from_slice(&RE, [2, 4], device)?;
    let im = Tensor::from_slice(&IM, [2, 4], device)?;
    let z = Tensor::complex(&re, &im)?;
    assert_eq!((z.dtype(), z.dims()), (DataType::Complex64, vec![2, 4]));
    let bits = |t: &Tensor| -> Vec<u32> {
        t.to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect()
    };
    let want_bits = |values: &[f32]| -> Vec<u32> { values.iter().map(|v| v.to_bits()).collect() };
    // The parts come back bit for bit, signed zeros and NaN included.
    assert_eq!(bits(&z.real()?), want_bits(&RE), "{} real", device.name());
    assert_eq!(bits(&z.imag()?), want_bits(&IM), "{} imag", device.name());
    let conj = z.conj()?;
    assert_eq!(
        bits(&conj.real()?),
        want_bits(&RE),
        "{} conj re",
        device.name()
    );
    let negated: Vec<f32> = IM.iter().map(|v| -v).collect();
    assert_eq!(
        bits(&conj.imag()?),
        want_bits(&negated),
        "{} conj im",
        device.name()
    );
    for (name, got, want) in [
        (
            "angle",
            z.angle()?,
            RE.iter()
                .zip(IM)
                .map(|(r, i)| i.atan2(*r))
                .collect::<Vec<_>>(),
        ),
        (
            "abs",
            z.complex_abs()?,
            RE.iter().zip(IM).map(|(r, i)| r.hypot(i)).collect(),
        ),
    ] {
        assert_eq!(got.dtype(), DataType::Float);
        for (k, (g, w)) in got.to_vec::<f32>()?.into_iter().zip(want).enumerate() {
            assert!(close(g, w), "{} {name}[{k}]: {g} vs {w}", device.name());
        }
    }
    // Broadcasting parts, and float64 parts make complex128.
    let row = Tensor::from_slice(&[2.0f64, -3.0], [2], device)?;
    let column = Tensor::from_slice(&[1.0f64, 0.5, -0.25], [3, 1], device)?;
    let w = Tensor::complex(&column, &row)?;
    assert_eq!((w.dtype(), w.dims()), (DataType::Complex128, vec![3, 2]));
    assert_eq!(
        w.real()?.to_vec::<f64>()?,
        [1.0, 1.0, 0.5, 0.5, -0.25, -0.25]
    );
    assert_eq!(
        w.imag()?.to_vec::<f64>()?,
        [2.0, -3.0, 2.0, -3.0, 2.0, -3.0]
    );
    // Parts of a strided view (a transposed complex tensor).
    let t = z.t()?;
    assert_eq!(
        bits(&t.real()?.contiguous()?),
        bits(&z.real()?.t()?.contiguous()?)
    );
    match w.angle() {
        Ok(angle) => {
            let got = angle.to_vec::<f64>()?;
            assert!((got[1] - (-3.0f64).atan2(1.0)).abs() < 1e-12, "{got:?}");
        }
        Err(Error::Unsupported { .. }) => {
            eprintln!("{}: complex128 angle unsupported", device.name())
        }
        Err(e) => return Err(e),
    }
    Ok(())
}

#[test]
fn complex_ops_agree_with_the_host_on_every_device() {
    for entry in polytensor::devices() {
        let Some(device) = entry.device() else {
            eprintln!("{entry}");
            continue;
        };
        if !device.supports(polytensor::Op::Where, DataType::Float) {
            continue;
        }
        check(device).unwrap_or_else(|e| panic!("{}: {e}", device.name()));
    }
}

#[test]
fn complex_ops_refuse_what_tensorflow_refuses() {
    let cpu = polytensor::device("cpu:0").unwrap();
    let ints = Tensor::from_slice(&[1i32, 2], [2], &cpu).unwrap();
    assert!(Tensor::complex(&ints, &ints).is_err());
    let float = Tensor::from_slice(&[1.0f32, -2.0], [2], &cpu).unwrap();
    let double = float.cast(DataType::Double).unwrap();
    let mixed = Tensor::complex(&float, &double).unwrap_err().to_string();
    assert!(mixed.contains("float64"), "{mixed}");
    assert!(float.angle().unwrap_err().to_string().contains("complex64"));
    // As tf.math.real/imag/conj do, a real tensor is its own real part and conjugate.
    assert_eq!(float.real().unwrap().to_vec::<f32>().unwrap(), [1.0, -2.0]);
    assert_eq!(float.imag().unwrap().to_vec::<f32>().unwrap(), [0.0, 0.0]);
    assert_eq!(float.conj().unwrap().to_vec::<f32>().unwrap(), [1.0, -2.0]);
    let wide = Tensor::from_slice(&[1.0f32; 6], [2, 3], &cpu).unwrap();
    assert!(
        Tensor::complex(&wide, &float).is_err(),
        "[2,3] and [2] do not broadcast"
    );
}
