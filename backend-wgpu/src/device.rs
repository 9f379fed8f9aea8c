//! [`WgpuDevice`]: one wgpu adapter as a polytensor [`Device`].

use std::fmt;
use std::sync::{Arc, Weak};

use polytensor_core::plan::segment::{SegmentOp, Segments};
use polytensor_core::plan::window::WindowGeometry;
use polytensor_core::{
    Allocator, AllocatorInfo, BinaryOp, CachingAllocator, DataType, Device, DeviceKind, Epilogue,
    Error, Op, OutView, ReduceOp, Result, Scalar, TensorBuffer, TensorView, UnaryOp,
};

use polytensor_core::device::{checks, Capabilities};
use polytensor_core::dlpack::{DLDevice, DLDeviceType};

use crate::buffer::{storage, wgpu_buffer, WgpuBuffer};
use crate::kernels::key::MapKey;
use crate::kernels::Pipelines;
use crate::launch::Operand;
use crate::memory::{self, BufferAllocator};
use crate::ops;
use crate::table::{map_key, renders};
use polytensor_gpu_kit::wgsl::Storage;

/// The bytes of freed storage buffers a wgpu device keeps for reuse by default.
pub const DEFAULT_CACHE_BYTES: usize = 1 << 30;

/// A wgpu adapter opened as a device with the adapter's own limits and its f16/f64
/// shader features, storage buffers from a [`CachingAllocator`], and WGSL kernels.
pub struct WgpuDevice {
    pub(crate) name: String,
    /// The adapter's index (DLPack's `device_id`).
    pub(crate) index: usize,
    pub(crate) info: wgpu::AdapterInfo,
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) allocator: Arc<CachingAllocator<BufferAllocator>>,
    pub(crate) pipelines: Pipelines,
    /// What the device runs, computed when it opened ([`runs`]: 64-bit dtypes only with
    /// `SHADER_F64` and `SHADER_INT64`).
    capabilities: Capabilities,
    /// Asynchronous errors the driver reported since the last synchronising call.
    pub(crate) failures: Arc<std::sync::Mutex<Vec<String>>>,
    pub(crate) me: Weak<WgpuDevice>,
}

impl fmt::Debug for WgpuDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WgpuDevice")
            .field("name", &self.name)
            .field("adapter", &self.info.name)
            .field("backend", &self.info.backend)
            .finish()
    }
}

impl WgpuDevice {
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
        let failures = Arc::new(std::sync::Mutex::new(Vec::new()));
        let store = failures.clone();
        device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
            store
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(error.to_string());
        }));
        let buffers = BufferAllocator::new(name.clone(), device.clone());
        let shader_f64 = device.features().contains(wgpu::Features::SHADER_F64);
        let shader_int64 = device.features().contains(wgpu::Features::SHADER_INT64);
        Ok(Arc::new_cyclic(|me| WgpuDevice {
            name,
            index,
            info: adapter.get_info(),
            capabilities: Capabilities::compute(|op, dtype| {
                runs(op, dtype, shader_f64, shader_int64)
            }),
            device,
            queue,
            allocator: Arc::new(CachingAllocator::new(buffers, DEFAULT_CACHE_BYTES)),
            pipelines: Pipelines::default(),
            failures,
            me: me.clone(),
        }))
    }

    /// The adapter's name, backend and type, as wgpu reports them.
    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.info
    }

    fn handle(&self) -> Arc<dyn Device> {
        self.me
            .upgrade()
            .expect("a WgpuDevice is only reachable through its Arc")
    }

    /// `Err` with the asynchronous errors reported since the last call (which it clears),
    /// or `Ok`.
    fn take_failures(&self) -> Result<()> {
        let failures =
            std::mem::take(&mut *self.failures.lock().unwrap_or_else(|e| e.into_inner()));
        if failures.is_empty() {
            return Ok(());
        }
        Err(Error::Backend {
            device: self.name.clone(),
            message: format!("the device reported: {}", failures.join("; ")),
        })
    }

    /// The key of the elementwise kernel of `op` on `dtype` where this device runs it (its
    /// capabilities, decided once when it opened), else `Unsupported`.
    fn map_key(&self, op: Op, dtype: DataType) -> Result<MapKey> {
        map_key(op, dtype)
            .filter(|_| self.supports(op, dtype))
            .ok_or_else(|| self.unsupported(op, dtype))
    }

    /// A driver failure reported by a helper, named after this device.
    pub(crate) fn relabel(&self, error: Error) -> Error {
        match error {
            Error::Backend { message, .. } => Error::Backend {
                device: self.name.clone(),
                message,
            },
            other => other,
        }
    }
}

impl Device for WgpuDevice {
    fn name(&self) -> &str {
        &self.name
    }

    /// `kDLWebGPU`: where the memory is, though wgpu gives no address to share it by
    /// (DLPack export copies it to the host, when asked to).
    fn dlpack_device(&self) -> Option<DLDevice> {
        let id = i32::try_from(self.index).ok()?;
        Some(DLDevice::new(DLDeviceType::WEBGPU, id))
    }

    fn kind(&self) -> DeviceKind {
        crate::KIND
    }

    fn description(&self) -> String {
        format!(
            "{} ({:?}, {:?})",
            self.info.name, self.info.backend, self.info.device_type
        )
    }

    fn is_accelerator(&self) -> bool {
        matches!(
            self.info.device_type,
            wgpu::DeviceType::DiscreteGpu
                | wgpu::DeviceType::IntegratedGpu
                | wgpu::DeviceType::VirtualGpu
        )
    }

    fn supports(&self, op: Op, dtype: DataType) -> bool {
        self.capabilities.supports(op, dtype)
    }

    fn allocator(&self) -> &dyn AllocatorInfo {
        self.allocator.as_ref()
    }

    fn allocate(&self, bytes: usize) -> Result<Arc<dyn TensorBuffer>> {
        let block = self.allocator.allocate(bytes, memory::WORD as usize)?;
        Ok(Arc::new(WgpuBuffer {
            block: Some(block),
            allocator: self.allocator.clone(),
            device: self.handle(),
        }))
    }

    fn allocate_zeroed(&self, bytes: usize) -> Result<Arc<dyn TensorBuffer>> {
        let buffer = self.allocate(bytes)?;
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        encoder.clear_buffer(wgpu_buffer(&buffer), 0, None);
        self.queue.submit([encoder.finish()]);
        Ok(buffer)
    }

    fn copy_from_host(&self, src: &[u8], out: &mut OutView<'_>) -> Result<()> {
        let view = out.view();
        let size = view.dtype().size();
        let (start, len) = (
            view.layout().offset() * size,
            view.layout().num_elements() * size,
        );
        if src.len() != len {
            return Err(Error::invalid(format!(
                "copy_from_host of {} bytes into {len} bytes",
                src.len()
            )));
        }
        if !(start as u64).is_multiple_of(memory::WORD) {
            return Err(Error::invalid(
                "copy_from_host into an output that does not start on a 4-byte word",
            ));
        }
        memory::upload(&self.queue, storage(&view)?, start as u64, src);
        Ok(())
    }

    fn copy_to_host(&self, src: &TensorView<'_>, dst: &mut [u8]) -> Result<()> {
        let range = src.host_copy_range(dst.len())?;
        memory::download(
            &self.device,
            &self.queue,
            storage(src)?,
            range.start as u64,
            dst,
        )
        .map_err(|e| self.relabel(e))?;
        self.take_failures()
    }

    fn synchronize(&self) -> Result<()> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Backend {
                device: self.name.clone(),
                message: format!("waiting for the device failed: {e}"),
            })?;
        self.take_failures()
    }

    fn unary(&self, op: UnaryOp, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
        self.map(self.map_key(Op::Unary(op), x.dtype())?, &[x], out)
    }

    fn binary(
        &self,
        op: BinaryOp,
        a: &TensorView<'_>,
        b: &TensorView<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        checks::same_dtype(op.name(), a.dtype(), &[b.dtype()])?;
        self.map(self.map_key(Op::Binary(op), a.dtype())?, &[a, b], out)
    }

    fn select(
        &self,
        cond: &TensorView<'_>,
        a: &TensorView<'_>,
        b: &TensorView<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        checks::select_dtypes(cond.dtype(), a.dtype(), b.dtype())?;
        self.map(self.map_key(Op::Where, a.dtype())?, &[cond, a, b], out)
    }

    fn cast(&self, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
        let (from, to) = (x.dtype(), out.dtype());
        for dtype in [from, to] {
            if !self.supports(Op::Cast, dtype) {
                return Err(self.unsupported("cast", dtype));
            }
        }
        self.map(MapKey::Cast(from, to), &[x], out)
    }

    fn matmul(&self, a: &TensorView<'_>, b: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
        self.run_matmul(a, b, out)
    }

    fn reduce(
        &self,
        op: ReduceOp,
        x: &TensorView<'_>,
        axes: &[usize],
        out: &mut OutView<'_>,
    ) -> Result<()> {
        self.run_reduce(op, x, axes, out)
    }

    fn fill(&self, value: Scalar, out: &mut OutView<'_>) -> Result<()> {
        let dtype = out.dtype();
        let unsupported = || self.unsupported("fill", dtype);
        let key = self.map_key(Op::Fill, dtype)?;
        let bytes = polytensor_core::element::scalar_bytes(value, dtype).ok_or_else(unsupported)?;
        // The value in a one-element buffer, read with all strides zero.
        let value = self.allocate(bytes.len())?;
        let value = wgpu_buffer(&value);
        memory::upload(&self.queue, value, 0, &bytes);
        let strides = vec![0isize; out.layout().rank()];
        let operand = Operand {
            buffer: value,
            offset: 0,
            strides: &strides,
        };
        self.run_map(key, &[operand], out)
    }

    fn arange(&self, start: Scalar, step: Scalar, out: &mut OutView<'_>) -> Result<()> {
        (self as &dyn Device).arange_from_host(start, step, out)
    }

    fn copy(&self, x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
        checks::copy_dtypes(x.dtype(), out.dtype())?;
        self.map(self.map_key(Op::Copy, x.dtype())?, &[x], out)
    }

    fn window_kernels(&self, dtype: DataType) -> bool {
        self.runs_windows(dtype)
    }

    fn conv2d(
        &self,
        x: &TensorView<'_>,
        filter: &TensorView<'_>,
        geometry: &WindowGeometry,
        depthwise: bool,
        epilogue: &Epilogue<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        self.run_window(x, Some((filter, depthwise, epilogue)), geometry, false, out)
    }

    fn pool2d(
        &self,
        x: &TensorView<'_>,
        geometry: &WindowGeometry,
        max: bool,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        self.run_window(x, None, geometry, max, out)
    }

    fn segment_reduce(
        &self,
        op: SegmentOp,
        data: &TensorView<'_>,
        segments: &Segments<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        self.run_segment(op, data, segments, out)
    }

    fn scatter_rows(
        &self,
        data: &TensorView<'_>,
        rows: &TensorView<'_>,
        fill: &TensorView<'_>,
        out: &mut OutView<'_>,
    ) -> Result<()> {
        self.run_scatter(data, rows, fill, out)
    }
}

/// Whether a device with (or without) `SHADER_F64` and `SHADER_INT64` has a kernel for `op`
/// on `dtype`: the rule behind its [`Capabilities`].
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
    match op {
        Op::Matmul => ops::matmul_storage(dtype).is_some(),
        Op::Reduce(op) => ops::reduces(op, dtype),
        Op::Cast => Storage::of(dtype).is_some(),
        Op::Arange => op.is_defined_for(dtype) && Storage::of(dtype).is_some(),
        _ => map_key(op, dtype).is_some_and(renders),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use polytensor_core::Tensor;

    /// The first wgpu device, or `None` after printing why the test skips.
    fn first_device() -> Option<Arc<dyn Device>> {
        match WgpuDevice::open(0) {
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
    fn asynchronous_driver_errors_are_returned_by_the_next_wait() {
        let Ok(device) = WgpuDevice::open(0) else {
            eprintln!("skipped: no wgpu adapter");
            return;
        };
        let buffer = device.allocate(16).unwrap();
        // A write past the buffer's end: wgpu reports it to the uncaptured-error handler.
        device
            .queue
            .write_buffer(wgpu_buffer(&buffer), 64, &[0u8; 16]);
        device.queue.submit([]);
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
}
