//! The `Tensor` API on the CPU device: constructors, views sharing buffers, host access,
//! strings, display, errors and memory accounting.

use std::sync::Arc;

use half::{bf16, f16};
use num_complex::Complex;
use polytensor_core::{
    same_device, DataType, Device, EmbeddedBuffer, Error, HostAllocator, InlineBuffer, ReduceOp,
    Scalar, Tensor, TensorShape, TensorSlice, EMBEDDED_BUFFER_BYTES,
};
use polytensor_cpu::CpuDevice;

fn cpu() -> Arc<dyn Device> {
    CpuDevice::shared()
}

fn iota(dims: &[usize]) -> Tensor {
    let n: usize = dims.iter().product();
    let values: Vec<f32> = (0..n).map(|i| i as f32).collect();
    Tensor::from_slice(&values, dims, &cpu()).unwrap()
}

#[test]
fn constructors() {
    let cpu = cpu();
    let t = Tensor::from_slice(&[1i32, 2, 3, 4, 5, 6], [2, 3], &cpu).unwrap();
    assert_eq!(
        (t.dtype(), t.dims(), t.rank(), t.num_elements()),
        (DataType::Int32, vec![2, 3], 2, 6)
    );
    assert!(Tensor::from_slice(&[1.0f32, 2.0], [3], &cpu).is_err());
    assert_eq!(
        Tensor::zeros([2, 2], DataType::BFloat16, &cpu)
            .unwrap()
            .to_vec::<bf16>()
            .unwrap(),
        vec![bf16::ZERO; 4]
    );
    assert_eq!(
        Tensor::ones([3], DataType::Bool, &cpu)
            .unwrap()
            .to_vec::<bool>()
            .unwrap(),
        vec![true; 3]
    );
    let full = Tensor::full([2], Scalar::F64(-2.7), DataType::Int8, &cpu).unwrap();
    assert_eq!(full.to_vec::<i8>().unwrap(), vec![-2, -2]);
    let range = Tensor::arange(0i64, 10i64, 3i64, DataType::Int64, &cpu).unwrap();
    assert_eq!(range.to_vec::<i64>().unwrap(), vec![0, 3, 6, 9]);
    let down = Tensor::arange(5i64, 0i64, -2i64, DataType::Float, &cpu).unwrap();
    assert_eq!(down.to_vec::<f32>().unwrap(), vec![5.0, 3.0, 1.0]);
    let floats = Tensor::arange(0.0, 1.0, 0.25, DataType::Half, &cpu).unwrap();
    assert_eq!(
        floats.to_vec::<f16>().unwrap(),
        [0.0, 0.25, 0.5, 0.75].map(f16::from_f32).to_vec()
    );
    assert!(Tensor::arange(0i64, 5i64, 0i64, DataType::Int32, &cpu).is_err());
    assert!(Tensor::arange(0.0, f64::INFINITY, 1.0, DataType::Float, &cpu).is_err());
    assert_eq!(
        Tensor::arange(3i64, 3i64, 1i64, DataType::Int32, &cpu)
            .unwrap()
            .num_elements(),
        0
    );
    let c = Tensor::scalar(Complex::new(1.0f64, -2.0), &cpu).unwrap();
    assert_eq!(c.item::<Complex<f64>>().unwrap(), Complex::new(1.0, -2.0));
    assert_eq!(
        Tensor::from_vec(vec![1u64, 2], &cpu).unwrap().dims(),
        vec![2]
    );
    // SAFETY: every element is written (copy_from_slice below) before any is read.
    let mut raw = unsafe { Tensor::uninit([3], DataType::UInt16, &cpu) }.unwrap();
    raw.as_slice_mut::<u16>()
        .unwrap()
        .copy_from_slice(&[7, 8, 9]);
    assert_eq!(raw.to_vec::<u16>().unwrap(), vec![7, 8, 9]);
    let bytes = Tensor::from_bytes(&[1, 0, 0, 0, 2, 0, 0, 0], [2], DataType::UInt32, &cpu).unwrap();
    assert_eq!(bytes.to_vec::<u32>().unwrap(), vec![1, 2]);
    assert!(Tensor::from_bytes(&[0, 2], [2], DataType::Bool, &cpu).is_err());
    assert!(Tensor::from_bytes(&[0, 1, 2], [2], DataType::UInt8, &cpu).is_err());
    let f8 = Tensor::from_bytes(&[0x38, 0xc0], [2], DataType::Float8E4M3FN, &cpu).unwrap();
    assert_eq!(f8.to_bytes().unwrap(), vec![0x38, 0xc0]);
    assert!(f8.add(&f8).is_err(), "float8 is storage-only");
}

#[test]
fn host_access_checks_dtype_and_uniqueness() {
    let t = iota(&[2, 3]);
    assert!(matches!(
        t.to_vec::<f64>(),
        Err(Error::DTypeMismatch { .. })
    ));
    assert_eq!(
        t.as_slice::<f32>().unwrap(),
        &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    );
    assert!(
        t.t().unwrap().as_slice::<f32>().is_err(),
        "as_slice needs contiguous"
    );
    let mut unique = t.contiguous().unwrap();
    let shared = unique.clone();
    assert!(
        unique.as_slice_mut::<f32>().is_err(),
        "writes need a unique buffer"
    );
    drop(shared);
    drop(t);
    unique.as_slice_mut::<f32>().unwrap()[0] = 42.0;
    assert_eq!(unique.to_vec::<f32>().unwrap()[0], 42.0);
    let view = unique.t().unwrap();
    let host = view.view_as::<f32>().unwrap();
    assert_eq!(host.get(&[2, 1]).unwrap(), 5.0);
    assert!(host.get(&[3, 0]).is_err());
    assert_eq!(
        host.iter().collect::<Vec<_>>(),
        vec![42.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    );
    assert!(iota(&[2]).item::<f32>().is_err());
}

#[test]
fn views_share_the_buffer() {
    let t = iota(&[4, 3]);
    let rows = t.slice(1..3).unwrap();
    assert!(rows.shares_buffer_with(&t));
    assert_eq!(
        rows.to_vec::<f32>().unwrap(),
        vec![3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    );
    let row = t.sub_slice(2).unwrap();
    assert_eq!(
        (row.dims(), row.to_vec::<f32>().unwrap()),
        (vec![3], vec![6.0, 7.0, 8.0])
    );
    assert!(t.slice(3..5).is_err());
    assert!(t.sub_slice(4).is_err());
    assert!(
        row.sub_slice(0).unwrap().sub_slice(0).is_err(),
        "sub_slice of a scalar"
    );
    let slice: TensorSlice = "1,2:0,2".parse().unwrap();
    let part = t.slice_by(&slice).unwrap();
    assert_eq!(part.to_vec::<f32>().unwrap(), vec![3.0, 4.0, 6.0, 7.0]);
    assert!(t.slice_by(&"0,5:-".parse().unwrap()).is_err());
    let tt = t.t().unwrap();
    assert!(tt.shares_buffer_with(&t) && !tt.is_contiguous());
    assert_eq!(
        tt.to_vec::<f32>().unwrap(),
        vec![0.0, 3.0, 6.0, 9.0, 1.0, 4.0, 7.0, 10.0, 2.0, 5.0, 8.0, 11.0]
    );
    let reshaped = t.reshape([2, 6]).unwrap();
    assert!(reshaped.shares_buffer_with(&t));
    let copied = tt.reshape([12]).unwrap();
    assert!(!copied.shares_buffer_with(&t));
    assert_eq!(copied.to_vec::<f32>().unwrap(), tt.to_vec::<f32>().unwrap());
    assert!(t.reshape([5]).is_err());
    let b = Tensor::from_slice(&[1.0f32, 2.0, 3.0], [3], &cpu())
        .unwrap()
        .broadcast_to([2, 3])
        .unwrap();
    assert_eq!(
        b.to_vec::<f32>().unwrap(),
        vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0]
    );
    assert!(t.broadcast_to([4, 4]).is_err());
    let p = iota(&[2, 3, 4]).permute(&[2, 0, 1]).unwrap();
    assert_eq!(p.dims(), vec![4, 2, 3]);
    assert_eq!(p.view_as::<f32>().unwrap().get(&[3, 1, 2]).unwrap(), 23.0);
    let u = t.unsqueeze(0).unwrap();
    assert_eq!(u.dims(), vec![1, 4, 3]);
    assert_eq!(u.squeeze(0).unwrap().dims(), vec![4, 3]);
    assert!(t.squeeze(0).is_err());
    assert_eq!(
        t.narrow(-1, 1, 2).unwrap().to_vec::<f32>().unwrap(),
        vec![1.0, 2.0, 4.0, 5.0, 7.0, 8.0, 10.0, 11.0]
    );
}

#[test]
fn bitcasts() {
    let cpu = cpu();
    // Three elements: more than an embedded buffer holds, so views share one buffer.
    let t = Tensor::from_slice(&[1.0f32, -2.0, 0.5], [3], &cpu).unwrap();
    let bits = t.bitcast(DataType::UInt32).unwrap();
    assert!(bits.shares_buffer_with(&t));
    assert_eq!(
        bits.to_vec::<u32>().unwrap(),
        vec![1.0f32.to_bits(), (-2.0f32).to_bits(), 0.5f32.to_bits()]
    );
    let bytes = t.bitcast(DataType::UInt8).unwrap();
    assert_eq!(bytes.dims(), vec![3, 4]);
    assert_eq!(
        bytes.to_vec::<u8>().unwrap(),
        [
            1.0f32.to_le_bytes(),
            (-2.0f32).to_le_bytes(),
            0.5f32.to_le_bytes()
        ]
        .concat()
    );
    let back = bytes.bitcast(DataType::Float).unwrap();
    assert_eq!(
        (back.dims(), back.to_vec::<f32>().unwrap()),
        (vec![3], vec![1.0, -2.0, 0.5])
    );
    assert!(
        bytes
            .narrow(1, 0, 2)
            .unwrap()
            .bitcast(DataType::Float)
            .is_err(),
        "innermost dim must be 4"
    );
    let strided = bytes.t().unwrap().t().unwrap().slice(1..2).unwrap();
    assert_eq!(
        strided
            .bitcast(DataType::Float)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        vec![-2.0]
    );
    let odd = Tensor::from_slice(&[1u16, 2, 3, 4, 5, 6], [3, 2], &cpu)
        .unwrap()
        .t()
        .unwrap();
    assert!(odd
        .bitcast(DataType::UInt32)
        .unwrap_err()
        .to_string()
        .contains("innermost"));
    let pairs = Tensor::from_slice(&[1u16, 2, 3, 4], [2, 2], &cpu)
        .unwrap()
        .t()
        .unwrap();
    let widened = pairs.bitcast(DataType::UInt32).unwrap();
    assert_eq!(
        widened.to_vec::<u32>().unwrap(),
        vec![1 | (3 << 16), 2 | (4 << 16)]
    );
    let flags = Tensor::from_slice(&[0u8, 1, 1], [3], &cpu).unwrap();
    assert_eq!(
        flags
            .bitcast(DataType::Bool)
            .unwrap()
            .to_vec::<bool>()
            .unwrap(),
        vec![false, true, true]
    );
    assert!(Tensor::from_slice(&[2u8], [1], &cpu)
        .unwrap()
        .bitcast(DataType::Bool)
        .is_err());
    let s = Tensor::from_strings(["a"], [1], &cpu).unwrap();
    assert!(s.bitcast(DataType::UInt8).is_err());
}

#[test]
fn refcounts_and_byte_counts() {
    let t = iota(&[4, 4]);
    assert!(t.ref_count_is_one());
    let view = t.slice(0..1).unwrap();
    assert!(!t.ref_count_is_one());
    assert_eq!((view.total_bytes(), view.allocated_bytes()), (16, 64));
    drop(view);
    assert!(t.ref_count_is_one());
    assert!(!t.shares_buffer_with(&iota(&[4, 4])));
}

#[test]
fn memory_is_returned_and_limits_are_errors() {
    let device: Arc<dyn Device> = CpuDevice::with_allocator(HostAllocator::with_limit(1 << 20));
    let a = Tensor::zeros([1024], DataType::Float, &device).unwrap();
    let b = a.add(&a).unwrap();
    assert_eq!(device.allocator().stats().bytes_in_use, 8192);
    let err = Tensor::zeros([1 << 20], DataType::Float, &device).unwrap_err();
    assert!(
        matches!(
            err,
            Error::OutOfMemory {
                requested: 4194304,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("out of memory"), "{err}");
    let view = b.t();
    assert!(view.is_err(), "t() of rank 1 is an error");
    drop((a, b));
    assert_eq!(device.allocator().stats().bytes_in_use, 0);
    assert!(device.allocator().stats().peak_bytes_in_use >= 8192);
    let huge = Tensor::zeros([1 << 40, 1 << 20], DataType::Double, &cpu());
    assert!(
        matches!(
            huge,
            Err(Error::InvalidShape(_)) | Err(Error::OutOfMemory { .. })
        ),
        "{huge:?}"
    );
}

#[test]
fn tiny_tensors_on_the_shared_device_are_embedded_values() {
    let cpu = cpu();
    let embedded = |t: &Tensor| t.buffer().downcast_ref::<EmbeddedBuffer>().is_some();
    let x = Tensor::scalar(3.0f32, &cpu).unwrap();
    let pair = Tensor::from_slice(&[1.0f32, -2.0], [2], &cpu).unwrap();
    let z = Tensor::scalar(Complex::new(1.0f32, 2.0), &cpu).unwrap();
    let wide = Tensor::scalar(Complex::new(1.0f64, 2.0), &cpu).unwrap();
    let three = Tensor::zeros([3], DataType::Float, &cpu).unwrap();
    assert!(embedded(&x) && embedded(&pair) && embedded(&z));
    assert!(
        !embedded(&wide) && !embedded(&three),
        "over 8 bytes: a buffer"
    );
    assert!(same_device(x.device(), &cpu));
    assert_eq!(x.allocated_bytes(), EMBEDDED_BUFFER_BYTES);

    // A value: clones and views copy the bytes, so writes are never seen elsewhere.
    let mut y = x.clone();
    assert!(!y.shares_buffer_with(&x) && x.ref_count_is_one() && y.ref_count_is_one());
    y.as_slice_mut::<f32>().unwrap()[0] = 5.0;
    assert_eq!(
        (x.item::<f32>().unwrap(), y.item::<f32>().unwrap()),
        (3.0, 5.0)
    );

    // Ops, views and broadcasts read it like any buffer.
    assert_eq!(x.add(&y).unwrap().item::<f32>().unwrap(), 8.0);
    assert_eq!(
        pair.mul(&x).unwrap().to_vec::<f32>().unwrap(),
        vec![3.0, -6.0]
    );
    assert_eq!(
        x.broadcast_to([2, 2]).unwrap().to_vec::<f32>().unwrap(),
        vec![3.0; 4]
    );
    assert_eq!(
        pair.slice(1..2).unwrap().to_vec::<f32>().unwrap(),
        vec![-2.0]
    );
    assert_eq!(
        pair.reshape([2, 1])
            .unwrap()
            .transpose(0, 1)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        vec![1.0, -2.0]
    );
    assert_eq!(
        pair.bitcast(DataType::UInt32)
            .unwrap()
            .to_vec::<u32>()
            .unwrap(),
        vec![1.0f32.to_bits(), (-2.0f32).to_bits()]
    );
    // |1 + 2i| through hypot, whose precision Rust does not promise: the suite's 4 ulp.
    let modulus = z.abs().unwrap().item::<f32>().unwrap();
    assert!(
        (modulus - 5f32.sqrt()).abs() <= 4.0 * f32::EPSILON * 2.0,
        "{modulus}"
    );
    let bad_bools = Tensor::from_slice(&[1u8, 2], [2], &cpu).unwrap();
    assert!(
        bad_bools.bitcast(DataType::Bool).is_err(),
        "2 is not a bool"
    );

    // The bytes move with the tensor, across threads too.
    let moved = std::thread::spawn(move || y.add(&pair.sum(&[0], false).unwrap()).unwrap())
        .join()
        .unwrap();
    assert_eq!(moved.item::<f32>().unwrap(), 4.0);
}

#[test]
fn tiny_tensors_live_inline_and_are_still_counted() {
    let device: Arc<dyn Device> = CpuDevice::new();
    let stats = || device.allocator().stats();
    let x = Tensor::from_slice(&[1.5f64, -2.0], [2], &device).unwrap();
    let y = Tensor::zeros([16], DataType::Float, &device).unwrap();
    let big = Tensor::zeros([17], DataType::Float, &device).unwrap();
    assert!(x.buffer().downcast_ref::<InlineBuffer>().is_some());
    assert!(y.buffer().downcast_ref::<InlineBuffer>().is_some());
    assert!(big.buffer().downcast_ref::<InlineBuffer>().is_none());
    for t in [&x, &y] {
        let ptr = t.buffer().host_ptr().unwrap();
        assert_eq!(ptr as usize % 64, 0, "inline bytes start on a cache line");
    }
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![0.0; 16]);
    let sum = x.add(&x).unwrap();
    assert_eq!(sum.to_vec::<f64>().unwrap(), vec![3.0, -4.0]);
    assert_eq!(stats().bytes_in_use, 16 + 64 + 68 + 16);
    assert_eq!(stats().num_allocs, 4);
    drop((x, y, big, sum));
    assert_eq!(stats().bytes_in_use, 0);
    assert_eq!(
        stats().bytes_reserved,
        128,
        "only the 68-byte tensor took a block (of the 128-byte class, now cached)"
    );
}

#[test]
fn strings() {
    let cpu = cpu();
    let s = Tensor::from_strings(
        [b"ab".to_vec(), vec![0xff, 0x00], b"it's".to_vec(), vec![]],
        [2, 2],
        &cpu,
    )
    .unwrap();
    assert_eq!(s.dtype(), DataType::String);
    assert_eq!(s.total_bytes(), 8);
    assert_eq!(s.t().unwrap().to_strings().unwrap()[1], b"it's".to_vec());
    assert_eq!(
        s.sub_slice(1).unwrap().to_strings().unwrap(),
        vec![b"it's".to_vec(), vec![]]
    );
    assert_eq!(
        s.to_string(),
        "tf.Tensor(\n[[b'ab' b'\\xff\\x00']\n [b\"it's\" b'']], shape=(2, 2), dtype=string)"
    );
    assert!(s.to_vec::<u8>().is_err());
    assert!(s.add(&s).is_err());
    assert_eq!(s.reshape([4]).unwrap().to_strings().unwrap().len(), 4);
    assert!(s.to_device(&cpu).unwrap().shares_buffer_with(&s));
    assert!(Tensor::from_strings(["x"], [2], &cpu).is_err());
}

#[test]
fn display_like_tensorflow() {
    let cpu = cpu();
    let show = |t: Tensor| t.to_string();
    assert_eq!(
        show(Tensor::scalar(7.0f32, &cpu).unwrap()),
        "tf.Tensor(7.0, shape=(), dtype=float32)"
    );
    assert_eq!(
        show(Tensor::scalar(7i32, &cpu).unwrap()),
        "tf.Tensor(7, shape=(), dtype=int32)"
    );
    assert_eq!(
        show(Tensor::scalar(true, &cpu).unwrap()),
        "tf.Tensor(True, shape=(), dtype=bool)"
    );
    assert_eq!(
        show(Tensor::from_slice(&[1.0f32, 2.5, -3.0], [3], &cpu).unwrap()),
        "tf.Tensor([ 1.   2.5 -3. ], shape=(3,), dtype=float32)"
    );
    assert_eq!(
        show(iota(&[2, 2])),
        "tf.Tensor(\n[[0. 1.]\n [2. 3.]], shape=(2, 2), dtype=float32)"
    );
    assert_eq!(
        show(Tensor::from_slice(&[1i64, -20, 300], [3], &cpu).unwrap()),
        "tf.Tensor([  1 -20 300], shape=(3,), dtype=int64)"
    );
    assert_eq!(
        show(Tensor::from_slice(&[true, false], [2], &cpu).unwrap()),
        "tf.Tensor([ True False], shape=(2,), dtype=bool)"
    );
    assert_eq!(
        show(Tensor::from_slice(&[true, true], [2], &cpu).unwrap()),
        "tf.Tensor([ True  True], shape=(2,), dtype=bool)"
    );
    assert_eq!(
        show(Tensor::zeros([0, 3], DataType::Float, &cpu).unwrap()),
        "tf.Tensor([], shape=(0, 3), dtype=float32)"
    );
    // Float8 prints the values its bytes encode, not the bytes.
    assert_eq!(
        show(
            Tensor::from_slice(&[1.5f32, -2.0], [2], &cpu)
                .unwrap()
                .cast(DataType::Float8E4M3FN)
                .unwrap()
        ),
        "tf.Tensor([ 1.5 -2. ], shape=(2,), dtype=float8_e4m3fn)"
    );
    let big = Tensor::arange(0i64, 2000i64, 1i64, DataType::Int32, &cpu).unwrap();
    assert_eq!(
        show(big),
        "tf.Tensor([   0    1    2 ... 1997 1998 1999], shape=(2000,), dtype=int32)"
    );
    let grid = Tensor::arange(0i64, 1200i64, 1i64, DataType::Int32, &cpu)
        .unwrap()
        .reshape([3, 400])
        .unwrap();
    assert_eq!(
        show(grid),
        "tf.Tensor(\n[[   0    1    2 ...  397  398  399]\n [ 400  401  402 ...  797  798  799]\n [ 800  801  802 ... 1197 1198 1199]], shape=(3, 400), dtype=int32)"
    );
    let cube = Tensor::arange(0i64, 8i64, 1i64, DataType::UInt8, &cpu)
        .unwrap()
        .reshape([2, 2, 2])
        .unwrap();
    assert_eq!(
        show(cube),
        "tf.Tensor(\n[[[0 1]\n  [2 3]]\n\n [[4 5]\n  [6 7]]], shape=(2, 2, 2), dtype=uint8)"
    );
    let complex = Tensor::from_slice(
        &[Complex::new(1.0f32, 2.0), Complex::new(-0.5, -1.0)],
        [2],
        &cpu,
    )
    .unwrap();
    assert_eq!(
        show(complex),
        "tf.Tensor([ 1. +2.j -0.5-1.j], shape=(2,), dtype=complex64)"
    );
    let half = Tensor::from_slice(&[f16::from_f32(0.1), f16::from_f32(1.0)], [2], &cpu).unwrap();
    assert_eq!(
        show(half),
        "tf.Tensor([0.1 1. ], shape=(2,), dtype=float16)"
    );
    let debug = format!("{:?}", iota(&[2, 3]).t().unwrap());
    assert!(
        debug.contains("cpu:0") && debug.contains("strides: [1, 3]"),
        "{debug}"
    );
}

#[test]
fn operator_and_op_errors_are_results() {
    let cpu = cpu();
    let a = iota(&[2, 3]);
    let b = Tensor::from_slice(&[10.0f32, 20.0, 30.0], [3], &cpu).unwrap();
    assert_eq!(
        (&a + &b).unwrap().to_vec::<f32>().unwrap(),
        vec![10.0, 21.0, 32.0, 13.0, 24.0, 35.0]
    );
    assert_eq!((a.clone() - b.clone()).unwrap().dims(), vec![2, 3]);
    assert!((-&a).is_ok());
    let err = (&a + &iota(&[2])).unwrap_err().to_string();
    assert!(err.contains("[2,3]") && err.contains("[2]"), "{err}");
    let ints = Tensor::from_slice(&[1i32, 2, 3], [3], &cpu).unwrap();
    assert!(matches!(a.add(&ints), Err(Error::DTypeMismatch { .. })));
    assert!(matches!(ints.sqrt(), Err(Error::Unsupported { .. })));
    assert!(matches!(ints.logical_not(), Err(Error::Unsupported { .. })));
    let u = Tensor::from_slice(&[1u8], [1], &cpu).unwrap();
    assert!(matches!(u.neg(), Err(Error::Unsupported { .. })));
    assert!(a.matmul(&a).unwrap_err().to_string().contains("inner dims"));
    assert_eq!(a.matmul_t(&a, false, true).unwrap().dims(), vec![2, 2]);
    assert!(b.matmul(&b).is_err(), "rank 1 matmul");
    assert!(matches!(
        a.sum(&[2], false),
        Err(Error::AxisOutOfRange { axis: 2, rank: 2 })
    ));
    assert!(a.sum(&[0, -2], false).is_err(), "duplicate axes");
    let empty = Tensor::zeros([0, 3], DataType::Float, &cpu).unwrap();
    assert!(empty.argmax(&[0], false).is_err());
    assert_eq!(empty.argmax(&[1], false).unwrap().dims(), vec![0]);
    assert_eq!(
        empty.sum(&[0], false).unwrap().to_vec::<f32>().unwrap(),
        vec![0.0; 3]
    );
    assert!(a.where_(&a, &a).is_err(), "condition must be bool");
    let cond = a.gt(&b).unwrap();
    assert!(cond
        .where_(
            &a,
            &ints
                .cast(DataType::Float)
                .unwrap()
                .cast(DataType::Double)
                .unwrap()
        )
        .is_err());
    let other: Arc<dyn Device> = CpuDevice::new();
    let elsewhere = a.to_device(&other).unwrap();
    assert!(!elsewhere.shares_buffer_with(&a));
    assert!(matches!(
        a.add(&elsewhere),
        Err(Error::DeviceMismatch { .. })
    ));
    assert_eq!(
        elsewhere.to_vec::<f32>().unwrap(),
        a.to_vec::<f32>().unwrap()
    );
    assert_eq!(
        a.reduce_all(ReduceOp::Sum).unwrap().item::<f32>().unwrap(),
        15.0
    );
    assert!(a.cast(DataType::Float).unwrap().shares_buffer_with(&a));
    let shape = TensorShape::new(&[2, 3]).unwrap();
    assert_eq!(
        Tensor::zeros(&shape, DataType::Int16, &cpu)
            .unwrap()
            .shape(),
        &shape
    );
}

/// Host memory names itself by its host pointer, for DLPack's `data`.
#[test]
fn host_buffers_give_their_pointer_as_device_address() {
    let cpu = polytensor_cpu::CpuDevice::shared();
    let t = Tensor::from_slice(&[1.0f32; 32], [32], &cpu).unwrap();
    let buffer = t.buffer();
    assert_eq!(
        buffer.device_address(),
        buffer.host_ptr().map(|p| p as usize)
    );
    assert!(buffer.device_address().is_some());
}

/// Operators take tensors owned or borrowed on either side, and numbers on either side in
/// the tensor's dtype; a number the dtype cannot hold is an `Err`.
#[test]
fn operators_with_numbers_and_owned_operands() {
    let cpu = cpu();
    let a = Tensor::from_slice(&[1.0f32, 2.0, 4.0], [3], &cpu).unwrap();
    let values = |t: Result<Tensor, Error>| t.unwrap().to_vec::<f32>().unwrap();
    assert_eq!(values(&a + 1.0), [2.0, 3.0, 5.0]);
    assert_eq!(values(2.0 * &a), [2.0, 4.0, 8.0]);
    assert_eq!(values(1.0 - &a), [0.0, -1.0, -3.0]);
    assert_eq!(values(8 / a.clone()), [8.0, 4.0, 2.0]);
    assert_eq!(values(a.clone() - &a), [0.0, 0.0, 0.0]);
    assert_eq!(values(&a * a.clone()), [1.0, 4.0, 16.0]);
    // A chain: each step is a Result, so `?` (here unwrap) per step, or methods.
    let chained = a
        .mul(&a)
        .unwrap()
        .sub(&a)
        .unwrap()
        .add(&(&a * 0.5).unwrap());
    assert_eq!(values(chained), [0.5, 3.0, 14.0]);
    // The number takes the tensor's dtype.
    let h = a.cast(DataType::Half).unwrap();
    assert_eq!((&h * 0.5).unwrap().dtype(), DataType::Half);
    let ints = Tensor::from_slice(&[1i32, -2], [2], &cpu).unwrap();
    assert_eq!((&ints + 2).unwrap().to_vec::<i32>().unwrap(), [3, 0]);
    assert_eq!((&ints * 3.0).unwrap().to_vec::<i32>().unwrap(), [3, -6]);
    let message = (&ints + 1.5).unwrap_err().to_string();
    assert!(
        message.contains("Cannot convert 1.5 to a tensor of dtype int32"),
        "{message}"
    );
    let bytes = Tensor::from_slice(&[1u8], [1], &cpu).unwrap();
    assert!((&bytes + 300).is_err(), "300 is no uint8");
    assert!((&ints + f64::NAN).is_err());
}

#[test]
fn reductions_over_every_axis_and_reshape_with_a_wildcard() {
    let t = iota(&[2, 3]);
    assert_eq!(t.sum_all().unwrap().item::<f32>().unwrap(), 15.0);
    assert_eq!(t.max_all().unwrap().item::<f32>().unwrap(), 5.0);
    assert_eq!(t.min_all().unwrap().item::<f32>().unwrap(), 0.0);
    assert_eq!(t.mean_all().unwrap().item::<f32>().unwrap(), 2.5);
    assert_eq!(t.prod_all().unwrap().item::<f32>().unwrap(), 0.0);
    // TensorFlow's meaning of an empty axis list: nothing is reduced.
    assert_eq!(t.sum(&[], false).unwrap().dims(), vec![2, 3]);
    let r = t.reshape_infer(&[-1, 2]).unwrap();
    assert_eq!(r.dims(), vec![3, 2]);
    assert!(r.shares_buffer_with(&t));
    assert_eq!(
        t.t()
            .unwrap()
            .reshape_infer(&[6])
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    );
    let message = t.reshape_infer(&[4, -1]).unwrap_err().to_string();
    assert!(
        message.contains("Input to reshape is a tensor with 6 values"),
        "{message}"
    );
    assert!(t.reshape_infer(&[-1, -1]).is_err());
}
