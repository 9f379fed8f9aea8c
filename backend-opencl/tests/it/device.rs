//! The OpenCL device beyond the conformance suite: views, caching of programs and buffers,
//! errors, threads.

use std::sync::Arc;

use opencl3::memory::ClMem;
use polytensor_core::{DataType, Device, Error, Op, ReduceOp, Tensor};
use polytensor_opencl::OpenClDevice;

fn device() -> Option<Arc<OpenClDevice>> {
    conformance::device_or_skip("opencl", || {
        polytensor_opencl::first().map(|d| d as Arc<dyn Device>)
    })?;
    polytensor_opencl::first().ok()
}

#[test]
fn views_are_offsets_not_copies() {
    let Some(cl) = device() else { return };
    let d: Arc<dyn Device> = cl.clone();
    let values: Vec<f32> = (0..24).map(|i| i as f32).collect();
    let t = Tensor::from_slice(&values, [2, 3, 4], &d).unwrap();
    let view = t.narrow(2, 1, 2).unwrap().sub_slice(1).unwrap();
    assert!(view.shares_buffer_with(&t));
    assert_eq!(
        view.to_vec::<f32>().unwrap(),
        vec![13.0, 14.0, 17.0, 18.0, 21.0, 22.0]
    );
    let doubled = view.add(&view).unwrap();
    assert_eq!(
        doubled.to_vec::<f32>().unwrap(),
        vec![26.0, 28.0, 34.0, 36.0, 42.0, 44.0]
    );
    // Column sums of the [4, 6] matrix, through its transpose: 4j + 36.
    let col_sums = t
        .reshape([4, 6])
        .unwrap()
        .t()
        .unwrap()
        .sum(&[1], false)
        .unwrap();
    let want: Vec<f32> = (0..6).map(|j| 4.0 * j as f32 + 36.0).collect();
    assert_eq!(col_sums.to_vec::<f32>().unwrap(), want);
}

#[test]
fn buffers_name_their_cl_mem() {
    let Some(cl) = device() else { return };
    let d: Arc<dyn Device> = cl.clone();
    let t = Tensor::zeros([4], DataType::Float, &d).unwrap();
    let buffer = t.buffer();
    let mem = buffer
        .downcast_ref::<polytensor_opencl::ClBuffer>()
        .unwrap()
        .handle()
        .get();
    assert_eq!(buffer.device_address(), Some(mem as usize));
    assert!(buffer.host_ptr().is_none());
}

#[test]
fn each_family_and_dtype_builds_one_program() {
    let Some(cl) = device() else { return };
    let d: Arc<dyn Device> = cl.clone();
    let a = Tensor::from_slice(&[1i32, -2, 3], [3], &d).unwrap();
    a.neg().unwrap();
    let built = cl.programs_built();
    // Another unary op of the same dtype, in both variants: the same program.
    a.abs().unwrap().to_vec::<i32>().unwrap();
    a.reshape([3, 1])
        .unwrap()
        .t()
        .unwrap()
        .t()
        .unwrap()
        .sign()
        .unwrap();
    assert_eq!(cl.programs_built(), built);
    a.add(&a).unwrap();
    assert_eq!(cl.programs_built(), built + 1);
    a.reduce(ReduceOp::Max, &[0], false).unwrap();
    a.reduce(ReduceOp::ArgMin, &[0], false).unwrap();
    assert_eq!(cl.programs_built(), built + 2);
}

#[test]
fn buffers_return_to_the_cache_and_oversized_requests_fail() {
    let Some(cl) = device() else { return };
    let d: Arc<dyn Device> = cl.clone();
    let before = d.allocator().stats().bytes_in_use;
    let t = Tensor::zeros([1000], DataType::Float, &d).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![0.0; 1000]);
    drop(t);
    assert_eq!(d.allocator().stats().bytes_in_use, before);
    // A freed block is handed out again (no other test asks for this size class).
    let first = Tensor::zeros([777_777], DataType::Float, &d).unwrap();
    let address = first.buffer().device_address();
    drop(first);
    let second = Tensor::zeros([777_777], DataType::Float, &d).unwrap();
    assert!(address.is_some());
    assert_eq!(
        second.buffer().device_address(),
        address,
        "the cached cl_mem"
    );
    let err = d.allocate(usize::MAX / 2).unwrap_err();
    assert!(matches!(err, Error::OutOfMemory { .. }), "{err}");
}

#[test]
fn wrong_dtypes_and_foreign_buffers_are_errors() {
    let Some(cl) = device() else { return };
    let d: Arc<dyn Device> = cl.clone();
    let f = Tensor::from_slice(&[1.0f32, 2.0], [2], &d).unwrap();
    let i = Tensor::from_slice(&[1i32, 2], [2], &d).unwrap();
    assert!(matches!(f.add(&i), Err(Error::DTypeMismatch { .. })));
    let strings = Tensor::from_strings(["a", "b"], [2], &d);
    assert!(strings.is_err() || strings.unwrap().add(&f).is_err());
}

#[test]
fn threads_share_one_device() {
    let Some(cl) = device() else { return };
    let d: Arc<dyn Device> = cl.clone();
    let handles: Vec<_> = (0..4)
        .map(|k| {
            let d = d.clone();
            std::thread::spawn(move || {
                for round in 0..20 {
                    let v: Vec<i64> = (0..257).map(|i| i * k + round).collect();
                    let t = Tensor::from_slice(&v, [257], &d).unwrap();
                    let sum = t.sum(&[0], false).unwrap().to_vec::<i64>().unwrap();
                    assert_eq!(sum, vec![v.iter().sum::<i64>()]);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn long_reductions_split_across_work_groups() {
    let Some(cl) = device() else { return };
    let d: Arc<dyn Device> = cl.clone();
    let start = d.allocator().stats().bytes_in_use;
    // 2 outputs of 100_000 elements: each split across work-groups, then gathered.
    let n = 100_000;
    let mut values: Vec<i32> = (0..2 * n as i32).map(|i| (i * 7919) % 1000 - 500).collect();
    values[n + 77_777] = 10_000;
    let x = Tensor::from_slice(&values, [2, n], &d).unwrap();
    let sums: Vec<i32> = values.chunks(n).map(|c| c.iter().sum()).collect();
    assert_eq!(x.sum(&[1], false).unwrap().to_vec::<i32>().unwrap(), sums);
    let first_max = values[..n]
        .iter()
        .enumerate()
        .max_by_key(|(i, v)| (**v, -(*i as i64)))
        .unwrap()
        .0 as i64;
    let arg = x.reduce(ReduceOp::ArgMax, &[1], false).unwrap();
    assert_eq!(arg.to_vec::<i64>().unwrap(), vec![first_max, 77_777]);
    // Means of i64 sum exactly beyond the dtype, across the split.
    let big = Tensor::from_slice(&vec![i64::MAX; 50_000], [50_000], &d).unwrap();
    let mean = big.reduce(ReduceOp::Mean, &[0], false).unwrap();
    assert_eq!(mean.to_vec::<i64>().unwrap(), vec![i64::MAX]);
    // The scratch partials went back to the cache, as the tensors do.
    drop((x, arg, big, mean));
    assert_eq!(d.allocator().stats().bytes_in_use, start);
}

/// The first device opened again with `options`, or `None` (printed) without one.
fn reopened(options: polytensor_opencl::OpenOptions) -> Option<Arc<dyn Device>> {
    device()?;
    let found = polytensor_opencl::platform::devices()
        .expect("a device was found above")
        .remove(0);
    Some(polytensor_opencl::open_with(0, found, options).expect("open") as Arc<dyn Device>)
}

/// The tiled matmul (work-groups sharing tiles through local memory, for accelerators) on
/// the CPU device too, where the device's kind would pick the blocked one: both schedules
/// of the kit's kernel pass the suite's matmul cases here, not only on a GPU.
#[test]
fn the_tiled_matmul_passes_on_any_device() {
    let Some(tiled) = reopened(polytensor_opencl::OpenOptions {
        schedule: Some(polytensor_gpu_kit::matmul::Schedule::Tiled),
        ..Default::default()
    }) else {
        return;
    };
    conformance::assert_family(&tiled, conformance::Family::Matmul);
}

/// The reductions of a device without f64 (f32 accumulators, scaled products, integer
/// means in 32-bit words) are what WGSL runs; on OpenCL they run on any device opened
/// without it.
#[test]
fn reductions_without_f64_pass_on_any_device() {
    let Some(narrow) = reopened(polytensor_opencl::OpenOptions {
        without_fp64: true,
        ..Default::default()
    }) else {
        return;
    };
    assert!(!narrow.supports(Op::Reduce(ReduceOp::Sum), DataType::Double));
    conformance::assert_family(&narrow, conformance::Family::Reduce);
}
