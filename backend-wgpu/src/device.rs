//! [`WgpuDevice`]: one wgpu adapter as the kit's device over a [`WgpuQueue`], and the
//! rule of what it runs.

use std::sync::{Arc, Mutex};

use polytensor_core::device::Capabilities;
use polytensor_core::dlpack::{DLDevice, DLDeviceType};
use polytensor_core::{BinaryOp, DataType, Device, Error, Op, Result};
use polytensor_gpu_kit::launch::{Identity, KitDevice};
use polytensor_gpu_kit::table;
use polytensor_gpu_kit::wgsl::Storage;

use crate::memory::{BufferAllocator, BufferSource};
use crate::programs::Programs;
use crate::queue::WgpuQueue;

/// The bytes of freed storage buffers a wgpu device keeps for reuse by default.
pub const DEFAULT_CACHE_BYTES: usize = 1 << 30;

/// A wgpu adapter opened as a device with the adapter's own limits and its f16/f64
/// shader features: the kit's device over a [`WgpuQueue`] (storage buffers from the kit's
/// block cache, the kit's kernels rendered as WGSL). The queue's own methods
/// (`adapter_info`, `wgpu_queue`) are reached through `Deref`.
pub type WgpuDevice = KitDevice<WgpuQueue>;

/// Open adapter `index` of [`crate::adapters::adapters`] as `wgpu:<index>` (a further
/// device opened on the same adapter is `wgpu:<index>.1`, ...: each has its own memory).
pub fn open(index: usize) -> Result<Arc<WgpuDevice>> {
    let adapter = crate::adapters::adapters()
        .into_iter()
        .nth(index)
        .ok_or_else(|| {
            Error::invalid(format!(
                "no wgpu adapter {index}: {}",
                crate::adapters::absence_reason()
            ))
        })?;
    let wanted =
        wgpu::Features::SHADER_F16 | wgpu::Features::SHADER_F64 | wgpu::Features::SHADER_INT64;
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("polytensor"),
        required_features: adapter.features() & wanted,
        required_limits: adapter.limits(),
        ..Default::default()
    }))
    .map_err(|e| Error::Backend {
        device: format!("wgpu:{index}"),
        message: format!("opening the adapter failed: {e}"),
    })?;
    let name = polytensor_core::device::instance_name(&format!("wgpu:{index}"));
    // wgpu's default for an error nobody caught (validation, out of memory, a lost
    // device) is a panic. Such errors arrive asynchronously: they are stored, and the
    // next `synchronize` or `copy_to_host` returns them as `Err`.
    let failures = Arc::new(Mutex::new(Vec::new()));
    let store = failures.clone();
    device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
        store
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(error.to_string());
    }));
    let shader_f64 = device.features().contains(wgpu::Features::SHADER_F64);
    let shader_int64 = device.features().contains(wgpu::Features::SHADER_INT64);
    let info = adapter.get_info();
    let identity = Identity {
        name: name.clone(),
        kind: crate::KIND,
        description: format!("{} ({:?}, {:?})", info.name, info.backend, info.device_type),
        accelerator: matches!(
            info.device_type,
            wgpu::DeviceType::DiscreteGpu
                | wgpu::DeviceType::IntegratedGpu
                | wgpu::DeviceType::VirtualGpu
        ),
        // `kDLWebGPU`: where the memory is, though wgpu gives no address to share it by
        // (DLPack export copies it to the host, when asked to).
        dlpack: i32::try_from(index)
            .ok()
            .map(|id| DLDevice::new(DLDeviceType::WEBGPU, id)),
    };
    let memory = BufferAllocator::new(name.clone(), BufferSource::new(device.clone()));
    let max_groups = device.limits().max_compute_workgroups_per_dimension as usize;
    let queue = WgpuQueue {
        name,
        info,
        device,
        queue,
        programs: Programs::default(),
        capabilities: Capabilities::compute(|op, dtype| runs(op, dtype, shader_f64, shader_int64)),
        fp64: shader_f64 && shader_int64,
        failures,
        max_groups,
        semantics: std::sync::OnceLock::new(),
    };
    let device = KitDevice::new(identity, memory, DEFAULT_CACHE_BYTES, queue);
    let semantics = crate::semantics::probe(&(device.clone() as Arc<dyn Device>))?;
    let _ = device.semantics.set(semantics);
    Ok(device)
}

/// Whether a device with (or without) `SHADER_F64` and `SHADER_INT64` has a kernel for `op`
/// on `dtype`: the rule behind its [`Capabilities`]. The kit's kernels where WGSL holds
/// the dtype and renders the op's body.
fn runs(op: Op, dtype: DataType, shader_f64: bool, shader_int64: bool) -> bool {
    // 64-bit dtypes are computed on only where the device has the shader features
    // (f64 also tests NaN on u64 bits); moves need neither.
    let computes = match dtype {
        DataType::Double | DataType::Complex128 => shader_f64 && shader_int64,
        DataType::Int64 | DataType::UInt64 => shader_int64,
        // Float powers are computed in f64.
        _ if op == Op::Binary(BinaryOp::Pow) && dtype.is_float() => shader_f64 && shader_int64,
        _ => true,
    };
    match op {
        Op::Arange | Op::Copy | Op::Fill | Op::Where => {}
        _ if !computes => return false,
        _ => {}
    }
    let held = Storage::of(dtype).is_some();
    match op {
        Op::Matmul | Op::Reduce(_) | Op::Arange => op.is_defined_for(dtype) && held,
        Op::Cast => held,
        Op::Fill => op.is_defined_for(dtype) && Storage::raw(dtype).is_some(),
        _ => table::map_spec(op, dtype).is_some_and(|(_, spec)| spec.renders_wgsl()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use polytensor_core::{Device, ReduceOp, Tensor};

    /// The first wgpu device, or `None` after printing why the test skips.
    fn first_device() -> Option<Arc<dyn Device>> {
        match open(0) {
            Ok(device) => Some(device),
            Err(e) => {
                eprintln!("skipped: {e}");
                None
            }
        }
    }

    #[test]
    fn broadcast_add_on_the_device() {
        let Some(device) = first_device() else {
            return;
        };
        let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3], &device).unwrap();
        let b = Tensor::from_slice(&[10.0f32, 20.0, 30.0], [3], &device).unwrap();
        let sum = a.add(&b).unwrap();
        assert_eq!(
            sum.to_vec::<f32>().unwrap(),
            vec![11.0, 22.0, 33.0, 14.0, 25.0, 36.0]
        );
        let t = a.t().unwrap().add(&a.t().unwrap()).unwrap();
        assert_eq!(
            t.to_vec::<f32>().unwrap(),
            vec![2.0, 8.0, 4.0, 10.0, 6.0, 12.0]
        );
        let q = Tensor::from_slice(&[7i32, -7, 5], [3], &device).unwrap();
        let z = Tensor::from_slice(&[2i32, 2, 0], [3], &device).unwrap();
        assert_eq!(q.div(&z).unwrap().to_vec::<i32>().unwrap(), vec![3, -3, -1]);
        assert_eq!(q.rem(&z).unwrap().to_vec::<i32>().unwrap(), vec![1, -1, 5]);
    }

    #[test]
    fn the_float_semantics_probe_finds_what_the_driver_does() {
        let Some(device) = first_device() else {
            return;
        };
        let semantics = device.float_semantics();
        let software = device.description().contains("llvmpipe");
        // lavapipe keeps subnormals and rounds division correctly; a GPU driver may not,
        // and the device says which (its conformance is judged by it).
        if software {
            assert_eq!(
                semantics,
                polytensor_core::device::FloatSemantics::default()
            );
        }
        let tiny = Tensor::from_slice(&[f32::from_bits(1)], [1], &device).unwrap();
        let kept = tiny.neg().unwrap().to_vec::<f32>().unwrap()[0];
        assert_eq!(kept == 0.0, semantics.flushes_subnormals, "{semantics:?}");
    }

    #[test]
    fn asynchronous_driver_errors_are_returned_by_the_next_wait() {
        let Ok(device) = open(0) else {
            eprintln!("skipped: no wgpu adapter");
            return;
        };
        let buffer = device.allocate(16).unwrap();
        // A write past the buffer's end: wgpu reports it to the uncaptured-error handler.
        let target = crate::wgpu_buffer(buffer.as_ref()).unwrap();
        device.wgpu_queue().write_buffer(target, 64, &[0u8; 16]);
        device.wgpu_queue().submit([]);
        let err = device.synchronize().unwrap_err();
        assert!(matches!(err, Error::Backend { .. }), "{err}");
        assert!(err.to_string().contains(device.name()), "{err}");
        // Returned once, then cleared.
        device.synchronize().unwrap();
    }

    #[test]
    fn long_reductions_split_across_workgroups() {
        let Some(device) = first_device() else {
            return;
        };
        // 2 outputs of 100_000 elements: several workgroups per output, then a gather.
        let n = 100_000;
        let values: Vec<i32> = (0..2 * n as i32).map(|i| (i * 7919) % 1000 - 500).collect();
        let mut with_peak = values.clone();
        with_peak[n + 77_777] = 10_000;
        let x = Tensor::from_slice(&with_peak, [2, n], &device).unwrap();
        let sums: Vec<i32> = with_peak.chunks(n).map(|c| c.iter().sum()).collect();
        assert_eq!(x.sum(&[1], false).unwrap().to_vec::<i32>().unwrap(), sums);
        let arg = x.reduce(ReduceOp::ArgMax, &[1], false).unwrap();
        let first_max = with_peak[..n]
            .iter()
            .enumerate()
            .max_by_key(|(i, v)| (**v, -(*i as i64)));
        assert_eq!(
            arg.to_vec::<i64>().unwrap(),
            vec![first_max.unwrap().0 as i64, 77_777]
        );
    }

    #[test]
    fn integer_means_sum_exactly_beyond_the_dtype() {
        let Some(device) = first_device() else {
            return;
        };
        if !device.supports(Op::Reduce(ReduceOp::Mean), DataType::Int64) {
            eprintln!("skipped: {} has no SHADER_INT64", device.name());
            return;
        }
        let signed = [i64::MAX, i64::MAX, i64::MIN + 5, i64::MIN, i64::MIN, 7];
        let exact =
            |v: &[i64]| (v.iter().map(|&x| i128::from(x)).sum::<i128>() / v.len() as i128) as i64;
        let x = Tensor::from_slice(&signed, [2, 3], &device).unwrap();
        let mean = x.reduce(ReduceOp::Mean, &[1], false).unwrap();
        assert_eq!(
            mean.to_vec::<i64>().unwrap(),
            vec![exact(&signed[..3]), exact(&signed[3..])]
        );
        let unsigned = Tensor::from_slice(&[u64::MAX; 4], [4], &device).unwrap();
        let mean = unsigned.reduce(ReduceOp::Mean, &[0], false).unwrap();
        assert_eq!(mean.to_vec::<u64>().unwrap(), vec![u64::MAX]);
    }

    #[test]
    fn products_survive_partial_overflow() {
        let Some(device) = first_device() else {
            return;
        };
        let reals = [1e30f32, 1e30, 1e30, 1e-30, 1e-30, 1e-30, 3.0, 1e-40];
        let x = Tensor::from_slice(&reals, [8], &device).unwrap();
        let product = x.reduce(ReduceOp::Prod, &[0], false).unwrap();
        let want = reals.iter().map(|&v| f64::from(v)).product::<f64>() as f32;
        assert_eq!(product.to_vec::<f32>().unwrap(), vec![want]);
        use polytensor_core::num_complex::Complex;
        let zs = [
            Complex::new(1e30f32, 0.0),
            Complex::new(0.0, 1e30),
            Complex::new(1e-30, 0.0),
            Complex::new(0.0, 1e-30),
        ];
        let z = Tensor::from_slice(&zs, [4], &device).unwrap();
        let product = z.reduce(ReduceOp::Prod, &[0], false).unwrap();
        assert_eq!(
            product.to_vec::<Complex<f32>>().unwrap(),
            vec![Complex::new(-1.0, 0.0)]
        );
    }

    #[test]
    fn tensors_round_trip_through_the_device() {
        let Some(device) = first_device() else {
            return;
        };
        let values: Vec<f32> = (0..1001).map(|i| i as f32 * 0.5 - 7.0).collect();
        let t = Tensor::from_slice(&values, [7, 143], &device).unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap(), values);
        let odd = Tensor::from_slice(&[1u8, 2, 3], [3], &device).unwrap();
        assert_eq!(odd.to_vec::<u8>().unwrap(), vec![1, 2, 3]);
        let zeros = Tensor::zeros([5], DataType::Int32, &device).unwrap();
        assert_eq!(zeros.to_vec::<i32>().unwrap(), vec![0; 5]);
        drop((t, odd, zeros));
        assert_eq!(device.allocator().stats().bytes_in_use, 0);
    }

    /// A cast's launch asks only whether the device holds both dtypes (the capability of
    /// `Op::Cast` is per dtype): every cast between dtypes with a storage must render.
    #[test]
    fn every_cast_between_held_dtypes_renders() {
        let held: Vec<DataType> = DataType::ALL
            .iter()
            .copied()
            .filter(|&d| Storage::of(d).is_some())
            .collect();
        for &from in &held {
            for &to in &held {
                let renders = table::cast_spec(from, to).is_some_and(|(_, k)| k.renders_wgsl());
                assert!(renders, "cast {from} to {to}");
            }
        }
    }
}
