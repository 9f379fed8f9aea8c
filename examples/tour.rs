//! The README's tour of the API (kept compiling: `cargo run --example tour`).

use polytensor::prelude::*;

fn main() -> polytensor::Result<()> {
    let cpu = polytensor::device("cpu:0")?; // or <dyn Device>::by_name("cpu:0")
    for entry in polytensor::devices() {
        // present devices, and absent backends with the reason
        println!("{entry}");
    }

    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3], &cpu)?;
    let b = Tensor::from_slice(&[10.0f32, 20.0, 30.0], [3], &cpu)?;
    let c = (&a + &b)?; // NumPy broadcasting; operators return Result
    let m = a.matmul_t(&a, false, true)?; // [2,3] x [2,3]^T -> [2,2]
    let s = c.sum(&[1], false)?; // reductions over any axes
    println!("{c}\n{m}\n{s}"); // tf.Tensor([...], shape=(2, 3), dtype=float32)

    let t = a.t()?; // zero-copy views share the buffer
    assert!(t.shares_buffer_with(&a) && !t.is_contiguous());
    let row = a.sub_slice(1)?; // TensorFlow's SubSlice
    let part = a.slice_by(&"0,1:1,2".parse()?)?; // TensorFlow's TensorSlice strings
    let bytes = a.bitcast(DataType::UInt8)?; // tf.bitcast: [2,3] f32 -> [2,3,4] u8
    println!("{row} {part} {}", bytes.shape());

    let h = a.cast(DataType::BFloat16)?.sqrt()?; // f16, bf16, complex, all integer types
    assert_eq!(h.dtype(), DataType::BFloat16);
    assert!(a.add(&h).is_err()); // dtypes must agree (cast explicitly)
    Ok(())
}
