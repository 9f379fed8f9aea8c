//! The CPU device's shortcut for embedded tensors (the scalars and tiny tensors of `cpu:0`,
//! see `Device::embedded_binary`) computes what the general way computes: every binary op
//! on every dtype whose tensors embed, bit for bit against the same op on a CPU device of
//! its own (whose tensors are never embedded), with the same errors where the op is not
//! defined.

use std::sync::Arc;

use conformance::data::{self, Domain, Rng};
use num_complex::Complex;
use polytensor_core::{BinaryOp, DataType, Device, EmbeddedBuffer, Op, Tensor};
use polytensor_cpu::CpuDevice;

fn embedded(t: &Tensor) -> bool {
    t.buffer().downcast_ref::<EmbeddedBuffer>().is_some()
}

/// `n` values of `dtype` for `op`'s operand `which` (0 or 1), edge values first, on both
/// devices.
fn operands(
    op: BinaryOp,
    dtype: DataType,
    n: usize,
    which: usize,
    devices: [&Arc<dyn Device>; 2],
) -> [Tensor; 2] {
    let domains = conformance::cases::binary_domains(op);
    let domain = [domains.0, domains.1][which];
    let mut rng = Rng::for_case(&format!("embedded/{op}/{dtype}/{which}"));
    let mut values = data::values(dtype, 0, Domain::Boundaries, &mut rng);
    let half = which * values.len() / 2;
    values.rotate_left(half);
    values.truncate(n / 2);
    let more = data::values(dtype, n - values.len(), domain, &mut rng);
    values.extend(more);
    let bytes = data::to_bytes(dtype, &values);
    devices.map(|device| Tensor::from_bytes(&bytes, [n], dtype, device).unwrap())
}

/// Whether two results hold the same elements: the same bytes, or, under Miri (which picks
/// the sign and payload of each NaN an operation makes at random, as Rust allows), NaN
/// wherever the other has NaN and the same bits elsewhere.
fn same_values(a: &Tensor, b: &Tensor) -> bool {
    if a.to_bytes().unwrap() == b.to_bytes().unwrap() {
        return true;
    }
    if !cfg!(miri) || !(a.dtype().is_float() || a.dtype().is_complex()) {
        return false;
    }
    let parts = |t: &Tensor| {
        t.cast(DataType::Complex128)
            .unwrap()
            .to_vec::<Complex<f64>>()
            .unwrap()
    };
    let same = |x: f64, y: f64| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan());
    parts(a)
        .iter()
        .zip(parts(b))
        .all(|(x, y)| same(x.re, y.re) && same(x.im, y.im))
}

#[test]
fn every_binary_op_on_embedded_tensors_matches_the_general_way() {
    let shared = CpuDevice::shared();
    let own: Arc<dyn Device> = CpuDevice::new();
    let mut checked = 0;
    for &dtype in DataType::ALL
        .iter()
        .filter(|d| d.is_computable() && d.size() <= polytensor_core::EMBEDDED_BUFFER_BYTES)
    {
        let n = polytensor_core::EMBEDDED_BUFFER_BYTES / dtype.size();
        for &op in BinaryOp::ALL {
            if cfg!(miri) && op == BinaryOp::Pow && (dtype.is_float() || dtype.is_complex()) {
                // Miri perturbs `powf` on purpose (each call differs in its last bits).
                continue;
            }
            let [a, a_own] = operands(op, dtype, n, 0, [&shared, &own]);
            let [b, b_own] = operands(op, dtype, n, 1, [&shared, &own]);
            assert!(embedded(&a) && embedded(&b) && !embedded(&a_own));
            let (fast, general) = (a.binary(op, &b), a_own.binary(op, &b_own));
            match (fast, general) {
                (Ok(fast), Ok(general)) => {
                    assert!(embedded(&fast), "{op} {dtype}: the result embeds too");
                    assert_eq!(fast.dtype(), general.dtype(), "{op} {dtype}");
                    assert_eq!(fast.layout(), general.layout(), "{op} {dtype}");
                    assert!(
                        same_values(&fast, &general),
                        "{op} {dtype} on {:?} and {:?}: {:?} but {:?}",
                        a.to_bytes().unwrap(),
                        b.to_bytes().unwrap(),
                        fast.to_bytes().unwrap(),
                        general.to_bytes().unwrap()
                    );
                    checked += 1;
                }
                (Err(fast), Err(general)) => {
                    assert!(
                        !Op::Binary(op).is_defined_for(dtype),
                        "{op} {dtype}: {fast}"
                    );
                    let cpu0 = |e: String| e.replace(own.name(), shared.name());
                    assert_eq!(fast.to_string(), cpu0(general.to_string()));
                }
                (fast, general) => panic!("{op} {dtype}: {fast:?} but {general:?}"),
            }
        }
    }
    assert!(checked > 140, "only {checked} op and dtype pairs ran");
}

#[test]
fn embedded_operands_the_shortcut_does_not_take_go_the_general_way() {
    let cpu = CpuDevice::shared();
    let pair = Tensor::from_slice(&[1.5f32, -2.0], [2], &cpu).unwrap();
    let x = Tensor::scalar(4.0f32, &cpu).unwrap();
    // Broadcast, an offset view, a reshaped view and mixed dtypes.
    assert_eq!(pair.add(&x).unwrap().to_vec::<f32>().unwrap(), [5.5, 2.0]);
    let second = pair.slice(1..2).unwrap();
    let one = Tensor::from_slice(&[1.0f32], [1], &cpu).unwrap();
    assert_eq!(second.mul(&one).unwrap().to_vec::<f32>().unwrap(), [-2.0]);
    let column = pair.reshape([2, 1]).unwrap();
    let sum = column.add(&column).unwrap();
    assert_eq!(sum.dims(), [2, 1]);
    assert_eq!(sum.layout().strides(), [1, 1]);
    assert_eq!(sum.to_vec::<f32>().unwrap(), [3.0, -4.0]);
    let err = x.add(&Tensor::scalar(1i32, &cpu).unwrap()).unwrap_err();
    assert!(err.to_string().contains("int32"), "{err}");
    let err = x.logical_and(&x).unwrap_err();
    assert!(err.to_string().contains("not supported"), "{err}");
}
