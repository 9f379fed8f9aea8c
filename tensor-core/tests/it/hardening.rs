//! Regression tests for defects an adversarial review found: each failed (or aborted the
//! process) before its fix. Numbers follow the hardening issue's list.

use std::sync::Arc;

use polytensor_core::{
    AllocatorStats, DataType, Device, Error, Extent, HostAllocator, Tensor, TensorShape,
    TensorSlice,
};
use polytensor_cpu::CpuDevice;

fn cpu() -> Arc<dyn Device> {
    CpuDevice::shared()
}

fn bytes(values: &[u8]) -> Tensor {
    Tensor::from_slice(values, [values.len()], &cpu()).unwrap()
}

/// 1. A bitcast of a view whose byte offset is not a multiple of the new element size
///    recursed until the stack overflowed. It now copies the view once.
#[test]
fn bitcast_of_a_misaligned_view_copies_once() {
    let raw: Vec<u8> = (1..=8).collect();
    let view = bytes(&raw).slice(1..5).unwrap();
    let floats = view.bitcast(DataType::Float).unwrap();
    assert_eq!(floats.dims(), Vec::<usize>::new());
    assert_eq!(floats.to_bytes().unwrap(), raw[1..5]);
    assert!(!floats.shares_buffer_with(&view), "a copy, made once");
    // Aligned views still share the buffer (16 bytes: above the size of embedded values,
    // which are copied with their tensors).
    let aligned = bytes(&(1..=16).collect::<Vec<u8>>())
        .reshape([4, 4])
        .unwrap();
    let shared = aligned
        .slice(1..2)
        .unwrap()
        .bitcast(DataType::Int32)
        .unwrap();
    assert!(shared.shares_buffer_with(&aligned));
    assert_eq!(
        shared.to_vec::<i32>().unwrap(),
        vec![i32::from_le_bytes([5, 6, 7, 8])]
    );
    // Strided views whose inner stride is not 1, and transposes, copy too.
    let m = bytes(&(0..16).collect::<Vec<u8>>())
        .reshape([4, 4])
        .unwrap();
    let t = m.t().unwrap().bitcast(DataType::UInt32).unwrap();
    assert_eq!(
        t.to_vec::<u32>().unwrap(),
        [
            [0u8, 4, 8, 12],
            [1, 5, 9, 13],
            [2, 6, 10, 14],
            [3, 7, 11, 15]
        ]
        .map(u32::from_le_bytes)
    );
    // A shape that cannot be bitcast is an Err, not a loop.
    assert!(bytes(&raw)
        .slice(1..4)
        .unwrap()
        .bitcast(DataType::Float)
        .is_err());
}

/// 3. Slices and shapes built from extreme numbers are an `Err`, never a panic or a wrap.
#[test]
fn extreme_extents_and_dims_are_errors() {
    let overflowing = Extent::Range {
        start: i64::MAX,
        length: 1,
    };
    assert!(TensorSlice::new(vec![overflowing]).is_err());
    let shape = TensorShape::new(&[4]).unwrap();
    let edge: TensorSlice = "9223372036854775806,1".parse().unwrap();
    assert!(edge.slice_tensor_shape(&shape).is_err());
    let t = Tensor::zeros([4], DataType::Float, &cpu()).unwrap();
    assert!(t.slice_by(&edge).is_err());
    assert!(t.narrow(0, usize::MAX, 2).is_err());
    assert!(t.slice(usize::MAX - 1..usize::MAX).is_err());
}

/// 4. A device's byte limit holds for every buffer, the small ones kept inline too.
#[test]
fn the_byte_limit_holds_for_small_buffers() {
    // 1 MiB of 64-byte tensors (4 KiB under Miri, which runs them 16384 times slower).
    let limit = if cfg!(miri) { 4096 } else { 1 << 20 };
    let device: Arc<dyn Device> = CpuDevice::with_allocator(HostAllocator::with_limit(limit));
    let mut held = Vec::new();
    let err = loop {
        match Tensor::zeros([16], DataType::Float, &device) {
            Ok(t) => held.push(t),
            Err(e) => break e,
        }
        assert!(held.len() <= 100_000, "the limit never refused");
    };
    assert!(matches!(err, Error::OutOfMemory { .. }), "{err}");
    let stats = device.allocator().stats();
    assert!(stats.bytes_in_use <= limit, "{stats}");
    assert_eq!(held.len() as u64 * 64, stats.bytes_in_use);
    drop(held);
    assert_eq!(device.allocator().stats().bytes_in_use, 0);

    let none: Arc<dyn Device> = CpuDevice::with_allocator(HostAllocator::with_limit(0));
    assert!(matches!(
        Tensor::scalar(1.0f32, &none),
        Err(Error::OutOfMemory { .. })
    ));
    assert!(
        Tensor::zeros([0], DataType::Float, &none).is_ok(),
        "no bytes fit any limit"
    );
}

/// 5. Display reads only what it prints: a zero-copy broadcast of 2^30 elements prints from
///    a few hundred elements, with a bounded output.
#[test]
fn display_touches_only_what_it_prints() {
    let device: Arc<dyn Device> = CpuDevice::new();
    let one = Tensor::from_slice(&[1.5f32, 2.5], [2], &device).unwrap();
    let huge = one.broadcast_to(vec![2; 30]).unwrap();
    assert_eq!(huge.num_elements(), 1 << 30);
    let before = device.allocator().stats().num_allocs;
    let text = huge.to_string();
    let stats = device.allocator().stats();
    assert!(
        stats.peak_bytes_in_use <= 64 * 1024,
        "printing allocated {} bytes",
        stats.peak_bytes_in_use
    );
    assert!(stats.num_allocs - before <= 2, "{stats}");
    assert!(text.len() < 64 * 1024, "{} characters", text.len());
    assert!(
        text.starts_with("tf.Tensor(\n[[[[") && text.contains("..."),
        "{text}"
    );
    assert!(text.contains("[1.5 2.5]"), "{text}");
    assert!(text.ends_with("shape=(2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2), dtype=float32)"));

    // NumPy's summary is unchanged where it prints at most 1000 elements.
    let long = Tensor::arange(0i64, 2000i64, 1i64, DataType::Int32, &device).unwrap();
    assert_eq!(
        long.reshape([2, 1000]).unwrap().to_string(),
        "tf.Tensor(\n[[   0    1    2 ...  997  998  999]\n [1000 1001 1002 ... 1997 1998 1999]], shape=(2, 1000), dtype=int32)"
    );
    let strided = long.reshape([40, 50]).unwrap().t().unwrap();
    let text = strided.to_string();
    assert!(
        text.starts_with("tf.Tensor(\n[[   0   50  100 ... 1850 1900 1950]"),
        "{text}"
    );
    assert!(
        text.contains(" [  49   99  149 ... 1899 1949 1999]]"),
        "{text}"
    );
}

/// 6. Bytes outside a sub-byte dtype's range are refused where they enter, not truncated on
///    the way to the wire.
#[test]
fn sub_byte_values_out_of_range_are_refused_on_entry() {
    let err = Tensor::from_bytes(&[0, 15, 16, 255], [4], DataType::UInt4, &cpu()).unwrap_err();
    assert!(
        err.to_string().contains("element 2 is the byte 0x10"),
        "{err}"
    );
    for (dtype, good, bad) in [
        (DataType::Int4, [0xf8u8, 0x07], 0x10u8),
        (DataType::Int4, [0x08, 0x0f], 0xf7),
        (DataType::UInt4, [0, 15], 16),
        (DataType::Int2, [0xfe, 0x01], 0x04),
        (DataType::Int2, [0x02, 0x03], 0xfd),
        (DataType::UInt2, [0, 3], 4),
        (DataType::Bool, [0, 1], 2),
    ] {
        let t = Tensor::from_bytes(&good, [2], dtype, &cpu()).unwrap();
        let back = Tensor::decode_proto(t.encode_proto().unwrap(), &cpu()).unwrap();
        let canonical = good.map(|b| dtype.canonical_byte(b));
        assert_eq!(back.to_bytes().unwrap(), canonical, "{dtype} round-trips");
        assert!(
            Tensor::from_bytes(&[bad], [1], dtype, &cpu()).is_err(),
            "{dtype}"
        );
        assert!(bytes(&[bad]).bitcast(dtype).is_err(), "bitcast to {dtype}");
        assert!(bytes(&good).bitcast(dtype).is_ok(), "bitcast to {dtype}");
    }
}

/// 7. A dim above `i64::MAX` is refused even in an empty shape.
#[test]
fn dims_above_i64_are_refused() {
    assert!(TensorShape::new(&[0, usize::MAX]).is_err());
    assert!(Tensor::zeros([0, usize::MAX], DataType::Float, &cpu()).is_err());
    let ok = TensorShape::new(&[0, i64::MAX as usize]).unwrap();
    assert_eq!(ok.dims_i64(), vec![0, i64::MAX]);
}

/// 8. A bitcast to bool checks the bytes of the view, not of the whole buffer.
#[test]
fn bool_bitcast_checks_only_the_view() {
    let buffer = bytes(&[1, 0, 5, 1, 0, 9, 9, 9, 9, 9, 9, 9]);
    let view = buffer.slice(0..2).unwrap().bitcast(DataType::Bool).unwrap();
    assert_eq!(view.to_vec::<bool>().unwrap(), vec![true, false]);
    assert!(view.shares_buffer_with(&buffer));
    let tail = buffer.slice(3..5).unwrap().bitcast(DataType::Bool).unwrap();
    assert_eq!(tail.to_vec::<bool>().unwrap(), vec![true, false]);
    let err = buffer
        .slice(1..4)
        .unwrap()
        .bitcast(DataType::Bool)
        .unwrap_err();
    assert!(
        err.to_string().contains("element 1 is the byte 0x05"),
        "{err}"
    );
    // Strided views: only the elements the view reaches.
    let strided = bytes(&[1, 9, 0, 9, 1, 9])
        .reshape([3, 2])
        .unwrap()
        .narrow(1, 0, 1)
        .unwrap();
    assert_eq!(
        strided
            .bitcast(DataType::Bool)
            .unwrap()
            .to_vec::<bool>()
            .unwrap(),
        vec![true, false, true]
    );
}

/// 9. A failed allocation changes no statistic but the failure count.
#[test]
#[cfg_attr(
    miri,
    ignore = "Miri stops at an allocation of 4 TiB instead of failing it"
)]
fn failed_allocations_leave_the_stats_alone() {
    let device: Arc<dyn Device> = CpuDevice::new();
    let kept = Tensor::zeros([1000], DataType::Float, &device).unwrap();
    let before = device.allocator().stats();
    let err = Tensor::zeros([1 << 40], DataType::Float, &device).unwrap_err();
    match &err {
        Error::OutOfMemory { stats, .. } => assert!(stats.peak_bytes_in_use < 1 << 20, "{err}"),
        other => panic!("expected OutOfMemory, got {other}"),
    }
    assert_eq!(
        device.allocator().stats(),
        AllocatorStats {
            num_failed_allocs: before.num_failed_allocs + 1,
            ..before
        }
    );
    drop(kept);
}

/// 10. Two devices are two names, so a mismatch says which is which.
#[test]
fn distinct_devices_have_distinct_names() {
    let (a, b): (Arc<dyn Device>, Arc<dyn Device>) = (CpuDevice::new(), CpuDevice::new());
    assert_ne!(a.name(), b.name());
    assert_eq!(cpu().name(), "cpu:0");
    assert!(a.name().starts_with("cpu:") && a.name() != "cpu:0");
    let x = Tensor::from_slice(&[1.0f32; 16], [16], &a).unwrap();
    let y = Tensor::from_slice(&[1.0f32; 16], [16], &b).unwrap();
    let err = x.add(&y).unwrap_err().to_string();
    assert!(err.contains(a.name()) && err.contains(b.name()), "{err}");
}
