//! DLPack export and import on the CPU device: zero copy, every layout, flags, and the
//! deleter called exactly once on every path (including refusals and other threads).

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use polytensor_core::dlpack::ffi::code;
use polytensor_core::dlpack::{
    live_exports, DLDataType, DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned,
    DLPackVersion, DLTensor, DlpackTensor, ManagedTensor, DLPACK_FLAG_BITMASK_IS_COPIED,
    DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, DLPACK_FLAG_BITMASK_READ_ONLY,
};
use polytensor_core::{DataType, Device, Tensor};
use polytensor_cpu::CpuDevice;

fn cpu() -> Arc<dyn Device> {
    CpuDevice::shared()
}

/// `live_exports` is process-wide: the tests of this file, which export, take turns.
static EXPORTS: Mutex<()> = Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    EXPORTS.lock().unwrap_or_else(|e| e.into_inner())
}

fn iota(n: usize, dims: &[usize]) -> Tensor {
    let values: Vec<f32> = (0..n).map(|i| i as f32).collect();
    Tensor::from_slice(&values, dims, &cpu()).unwrap()
}

#[test]
fn export_shares_memory_and_fills_shape_and_strides() {
    let _turn = turn();
    let before = live_exports();
    let a = iota(24, &[2, 3, 4]);
    let exported = a.to_dlpack_versioned().unwrap();
    assert_eq!(live_exports(), before + 1);
    let t = exported.dl_tensor().unwrap();
    assert_eq!(
        exported.version(),
        Some(DLPackVersion { major: 1, minor: 1 })
    );
    assert_eq!(exported.flags(), 0);
    assert_eq!(t.device, DLDevice::CPU);
    assert_eq!(t.dtype, DLDataType::scalar(code::FLOAT, 32));
    assert_eq!(t.ndim, 3);
    assert_eq!(t.data as usize, a.buffer().host_ptr().unwrap() as usize);
    assert_eq!(t.byte_offset, 0);
    assert_eq!(exported.shape().unwrap(), &[2, 3, 4]);
    assert_eq!(exported.strides().unwrap(), &[12, 4, 1]);

    // Views go as they are: offset, transposed and broadcast strides.
    let view = a.sub_slice(1).unwrap().transpose(0, 1).unwrap();
    let exported_view = view.to_dlpack_versioned().unwrap();
    let v = exported_view.dl_tensor().unwrap();
    assert_eq!(exported_view.shape().unwrap(), &[4, 3]);
    assert_eq!(exported_view.strides().unwrap(), &[1, 4]);
    assert_eq!((v.data, v.byte_offset), (t.data, 12 * 4));
    let wide = iota(3, &[3, 1]).broadcast_to([3, 5]).unwrap();
    let exported_wide = wide.to_dlpack().unwrap();
    assert_eq!(exported_wide.strides().unwrap(), &[1, 0]);
    assert_eq!(live_exports(), before + 3);

    // The handle keeps the buffer alive after every tensor is gone.
    drop((a, view, wide));
    let back = Tensor::import_dlpack(exported_view, &cpu()).unwrap();
    assert_eq!(
        back.to_vec::<f32>().unwrap(),
        vec![12.0, 16.0, 20.0, 13.0, 17.0, 21.0, 14.0, 18.0, 22.0, 15.0, 19.0, 23.0]
    );
    drop((exported, exported_wide));
    assert_eq!(live_exports(), before + 1);
    drop(back);
    assert_eq!(live_exports(), before);
}

#[test]
fn export_flags_and_refusals() {
    let _turn = turn();
    let before = live_exports();
    // A decoded proto's bytes are shared read-only: READ_ONLY, and no legacy export.
    let mut proto = iota(64, &[64]).as_proto_tensor_content().unwrap();
    // Bytes 4-aligned for f32 (decoding shares only aligned bytes; a Vec<u8>'s alignment,
    // under Miri above all, is left to chance).
    let content: Vec<u32> = proto
        .tensor_content
        .chunks(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    proto.tensor_content = bytes::Bytes::from_owner(AlignedWords(content));
    let decoded = Tensor::from_proto(&proto, &cpu()).unwrap();
    assert!(decoded.buffer().is_read_only());
    let read_only = decoded.to_dlpack_versioned().unwrap();
    assert_eq!(read_only.flags(), DLPACK_FLAG_BITMASK_READ_ONLY);
    assert!(decoded
        .to_dlpack()
        .unwrap_err()
        .to_string()
        .contains("read-only"));
    // A tiny tensor's elements live in the tensor value: the export holds its own copy.
    let scalar = Tensor::scalar(7.5f32, &cpu()).unwrap();
    let copied = scalar.to_dlpack_versioned().unwrap();
    assert_eq!(copied.flags(), DLPACK_FLAG_BITMASK_IS_COPIED);
    assert_eq!(copied.dl_tensor().unwrap().ndim, 0);
    assert_eq!(copied.shape().unwrap(), &[] as &[i64]);
    let round = Tensor::import_dlpack(copied, &cpu()).unwrap();
    assert_eq!(round.item::<f32>().unwrap(), 7.5);
    // Sub-byte integers: one per byte, which only the versioned struct can say.
    let bytes = [1, 0xF9, 7, 0, 0xF8, 3, 2, 1, 0, 0xFF, 4, 5];
    let int4 = Tensor::from_bytes(&bytes, [12], DataType::Int4, &cpu()).unwrap();
    let padded = int4.to_dlpack_versioned().unwrap();
    assert_eq!(padded.flags(), DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);
    assert_eq!(
        padded.dl_tensor().unwrap().dtype,
        DLDataType::scalar(code::INT, 4)
    );
    assert!(int4.to_dlpack().is_err());
    let int4_back = Tensor::import_dlpack(padded, &cpu()).unwrap();
    assert_eq!(int4_back.dtype(), DataType::Int4);
    assert_eq!(int4_back.to_bytes().unwrap(), int4.to_bytes().unwrap());
    // No DLPack type: strings and quantized integers.
    let strings = Tensor::from_strings(["a", "b"], [2], &cpu()).unwrap();
    assert!(strings
        .to_dlpack_versioned()
        .unwrap_err()
        .to_string()
        .contains("DLPack has no type for string"));
    let q = Tensor::zeros([2], DataType::QInt8, &cpu()).unwrap();
    assert!(q.to_dlpack().is_err());
    // Empty tensors carry a NULL data pointer.
    let empty = Tensor::zeros([0, 3], DataType::Float, &cpu()).unwrap();
    let exported_empty = empty.to_dlpack_versioned().unwrap();
    assert!(exported_empty.dl_tensor().unwrap().data.is_null());
    assert_eq!(exported_empty.shape().unwrap(), &[0, 3]);
    drop((read_only, round, int4_back, exported_empty));
    assert_eq!(live_exports(), before);
}

#[test]
fn every_dlpack_dtype_round_trips() {
    let _turn = turn();
    let before = live_exports();
    for &dtype in DataType::ALL {
        if !dtype.is_pod() || dtype.class() == polytensor_core::DTypeClass::Quantized {
            continue;
        }
        // Twelve elements: more than fit in the tensor value, so the buffer is shared.
        let t = Tensor::zeros([4, 3], dtype, &cpu())
            .unwrap()
            .transpose(0, 1)
            .unwrap();
        let back = Tensor::import_dlpack(t.to_dlpack_versioned().unwrap(), &cpu()).unwrap();
        assert_eq!(back.dtype(), dtype);
        assert_eq!(back.buffer().host_ptr(), t.buffer().host_ptr(), "{dtype}");
        assert_eq!(back.to_bytes().unwrap(), t.to_bytes().unwrap(), "{dtype}");
    }
    assert_eq!(live_exports(), before);
}

/// A DLPack producer in the style of a C library: a managed struct, the memory it
/// describes and its shape arrays in one box, and a deleter that counts its calls.
#[repr(C)]
struct Produced<M> {
    managed: M,
    memory: Vec<u64>,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    deleted: Arc<AtomicUsize>,
}

unsafe extern "C" fn delete_produced<M: ManagedTensor>(managed: *mut M) {
    // SAFETY: `managed` is the first field of a boxed `Produced<M>` made by `produce`.
    let produced = unsafe { Box::from_raw(managed.cast::<Produced<M>>()) };
    produced.deleted.fetch_add(1, Ordering::SeqCst);
}

/// Describe: the dtype, the memory's bytes, the shape, strides and byte offset.
struct Spec {
    dtype: DLDataType,
    bytes: Vec<u8>,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    byte_offset: u64,
    flags: u64,
    device: DLDevice,
}

impl Spec {
    fn f32s(values: &[f32], shape: &[i64], strides: Option<&[i64]>) -> Self {
        Spec {
            dtype: DLDataType::scalar(code::FLOAT, 32),
            bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            shape: shape.to_vec(),
            strides: strides.map(<[i64]>::to_vec),
            byte_offset: 0,
            flags: 0,
            device: DLDevice::CPU,
        }
    }
}

/// A producer's managed tensor for `spec`, and its deleter count.
fn produce<M: ManagedTensor>(spec: Spec) -> (*mut M, Arc<AtomicUsize>) {
    let deleted = Arc::new(AtomicUsize::new(0));
    let mut memory = vec![0u64; spec.bytes.len().div_ceil(8)];
    // SAFETY: `memory` has at least `bytes.len()` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(
            spec.bytes.as_ptr(),
            memory.as_mut_ptr().cast::<u8>(),
            spec.bytes.len(),
        )
    };
    let mut produced = Box::new(Produced {
        managed: M::assemble(
            DLTensor {
                data: std::ptr::null_mut(),
                device: spec.device,
                ndim: spec.shape.len() as i32,
                dtype: spec.dtype,
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: spec.byte_offset,
            },
            spec.flags,
            std::ptr::null_mut(),
            delete_produced::<M>,
        ),
        memory,
        shape: spec.shape,
        strides: spec.strides,
        deleted: deleted.clone(),
    });
    let data = if spec.bytes.is_empty() {
        std::ptr::null_mut()
    } else {
        produced.memory.as_mut_ptr().cast::<c_void>()
    };
    let shape = produced.shape.as_mut_ptr();
    let strides = produced
        .strides
        .as_mut()
        .map_or(std::ptr::null_mut(), |s| s.as_mut_ptr());
    let t = produced.managed.dl_tensor_mut();
    (t.data, t.shape, t.strides) = (data, shape, strides);
    (Box::into_raw(produced).cast(), deleted)
}

/// Import `spec` through the versioned struct; the result and the deleter count.
fn import(spec: Spec) -> (polytensor_core::Result<Tensor>, Arc<AtomicUsize>) {
    let (managed, deleted) = produce::<DLManagedTensorVersioned>(spec);
    // SAFETY: a live managed tensor whose ownership passes here.
    (
        unsafe { Tensor::from_dlpack_versioned(managed, &cpu()) },
        deleted,
    )
}

#[test]
fn import_is_zero_copy_for_any_strides() {
    let _turn = turn();
    let values: Vec<f32> = (0..12).map(|i| i as f32).collect();
    // NULL strides: compact row-major.
    let (t, deleted) = import(Spec::f32s(&values, &[3, 4], None));
    let t = t.unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), values);
    assert_eq!(deleted.load(Ordering::SeqCst), 0);
    let view = t.slice(1..2).unwrap();
    drop(t);
    assert_eq!(deleted.load(Ordering::SeqCst), 0, "a view keeps the memory");
    drop(view);
    assert_eq!(deleted.load(Ordering::SeqCst), 1);

    // Fortran order, a gap, a zero stride.
    let (t, deleted) = import(Spec::f32s(&values, &[3, 2, 2], Some(&[1, 6, 0])));
    assert_eq!(
        t.unwrap().to_vec::<f32>().unwrap(),
        vec![0.0, 0.0, 6.0, 6.0, 1.0, 1.0, 7.0, 7.0, 2.0, 2.0, 8.0, 8.0]
    );
    assert_eq!(deleted.load(Ordering::SeqCst), 1);

    // Negative strides from the last element (NumPy's a[::-1, ::-1]), through byte_offset.
    let mut spec = Spec::f32s(&values, &[3, 4], Some(&[-4, -1]));
    spec.byte_offset = 11 * 4;
    let (t, deleted) = import(spec);
    let t = t.unwrap();
    let reversed: Vec<f32> = values.iter().rev().copied().collect();
    assert_eq!(t.to_vec::<f32>().unwrap(), reversed);
    assert_eq!(t.layout().strides(), &[-4, -1]);
    drop(t);
    assert_eq!(deleted.load(Ordering::SeqCst), 1);

    // Rank 0 and empty.
    let (t, deleted) = import(Spec::f32s(&[2.5], &[], None));
    assert_eq!(t.unwrap().item::<f32>().unwrap(), 2.5);
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
    let (t, deleted) = import(Spec::f32s(&[], &[0, 5], Some(&[5, 1])));
    let t = t.unwrap();
    assert_eq!((t.dims(), t.num_elements()), (vec![0, 5], 0));
    assert_eq!(
        deleted.load(Ordering::SeqCst),
        1,
        "an empty tensor needs no memory"
    );

    // Legacy struct.
    let (managed, deleted) = produce::<DLManagedTensor>(Spec::f32s(&values, &[12], None));
    // SAFETY: a live managed tensor whose ownership passes here.
    let t = unsafe { Tensor::from_dlpack(managed, &cpu()) }.unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), values);
    drop(t);
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
}

#[test]
fn import_shares_memory_both_ways() {
    let _turn = turn();
    let (t, deleted) = import(Spec::f32s(&[1.0, 2.0, 3.0, 4.0], &[4], None));
    let mut t = t.unwrap();
    let address = t.buffer().host_ptr().unwrap();
    t.as_slice_mut::<f32>().unwrap()[0] = 10.0;
    assert_eq!(t.buffer().host_ptr().unwrap(), address, "written in place");
    // Re-exported: the same memory again.
    let again = t.to_dlpack_versioned().unwrap();
    assert_eq!(again.dl_tensor().unwrap().data.cast(), address);
    drop(t);
    assert_eq!(deleted.load(Ordering::SeqCst), 0);
    drop(again);
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
}

#[test]
fn read_only_memory_is_copied_before_a_write() {
    let _turn = turn();
    let mut spec = Spec::f32s(&[1.0, 2.0, 3.0], &[3], None);
    spec.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
    let (managed, deleted) = produce::<DLManagedTensorVersioned>(spec);
    // SAFETY: `managed` is alive until the import calls its deleter.
    let producer_memory = unsafe { (*managed).dl_tensor.data.cast::<f32>() };
    // SAFETY: a live managed tensor whose ownership passes here.
    let mut t = unsafe { Tensor::from_dlpack_versioned(managed, &cpu()) }.unwrap();
    assert!(t.buffer().is_read_only());
    assert_eq!(
        t.to_dlpack_versioned().unwrap().flags(),
        DLPACK_FLAG_BITMASK_READ_ONLY
    );
    t.as_slice_mut::<f32>().unwrap()[0] = 10.0;
    assert_eq!(
        deleted.load(Ordering::SeqCst),
        1,
        "copied, then handed back"
    );
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![10.0, 2.0, 3.0]);
    let _ = producer_memory; // freed with the producer's box; never written
}

#[test]
fn misaligned_memory_is_copied_once() {
    let _turn = turn();
    let mut spec = Spec::f32s(&[0.0, 1.0, 2.0, 3.0], &[3], None);
    spec.byte_offset = 2; // inside the first element: misaligned for f32
    let (t, deleted) = import(spec);
    let t = t.unwrap();
    assert_eq!(
        deleted.load(Ordering::SeqCst),
        1,
        "the copy needs no producer memory"
    );
    let expected: Vec<f32> = {
        let bytes: Vec<u8> = [0.0f32, 1.0, 2.0, 3.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        bytes[2..14]
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    assert_eq!(t.to_vec::<f32>().unwrap(), expected);
}

#[test]
fn refusals_still_call_the_deleter_once() {
    let _turn = turn();
    let refuse = |spec: Spec, why: &str| {
        let (t, deleted) = import(spec);
        let message = t.unwrap_err().to_string();
        assert!(message.contains(why), "{message:?} lacks {why:?}");
        assert_eq!(deleted.load(Ordering::SeqCst), 1, "{why}");
    };
    let f = |spec: fn(&mut Spec)| {
        let mut s = Spec::f32s(&[1.0, 2.0], &[2], None);
        spec(&mut s);
        s
    };
    refuse(f(|s| s.dtype = DLDataType::scalar(99, 32)), "type code 99");
    refuse(f(|s| s.dtype.lanes = 2), "2 lanes");
    refuse(
        f(|s| s.device = DLDevice::new(DLDeviceType::CUDA, 0)),
        "kDLCUDA:0 cannot be imported",
    );
    refuse(f(|s| s.shape = vec![-2]), "shape");
    refuse(f(|s| s.bytes.clear()), "NULL data");
    refuse(
        f(|s| s.dtype = DLDataType::scalar(code::INT, 4)),
        "packed 4-bit",
    );
    refuse(f(|s| s.strides = Some(vec![i64::MAX])), "address space");
    refuse(
        f(|s| {
            s.dtype = DLDataType::scalar(code::BOOL, 8);
            s.bytes = vec![1, 2];
        }),
        "not a valid bool",
    );
    // A major version this crate cannot read: only the deleter is touched.
    let (managed, deleted) = produce::<DLManagedTensorVersioned>(Spec::f32s(&[1.0], &[1], None));
    // SAFETY: the struct is alive; only its version is changed.
    unsafe { (*managed).version = DLPackVersion { major: 2, minor: 0 } };
    // SAFETY: a live managed tensor whose ownership passes here.
    let err = unsafe { Tensor::from_dlpack_versioned(managed, &cpu()) }.unwrap_err();
    assert!(err.to_string().contains("version 2.0"), "{err}");
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
    // Negative strides that reach before address 0 (or to it) wrap: refused, unread.
    let (managed, deleted) =
        produce::<DLManagedTensorVersioned>(Spec::f32s(&[1.0, 2.0], &[2], Some(&[-1])));
    // SAFETY: the struct is alive; only its data pointer is changed (and never read).
    unsafe { (*managed).dl_tensor.data = std::ptr::without_provenance_mut(4) };
    // SAFETY: a live managed tensor whose ownership passes here.
    let err = unsafe { Tensor::from_dlpack_versioned(managed, &cpu()) }.unwrap_err();
    assert!(err.to_string().contains("wraps"), "{err}");
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
    // A NULL struct is an error with nothing to delete.
    // SAFETY: NULL is allowed.
    assert!(unsafe { Tensor::from_dlpack(std::ptr::null_mut(), &cpu()) }.is_err());
}

#[test]
fn the_deleter_runs_on_whichever_thread_drops_the_last_view() {
    let _turn = turn();
    let before = live_exports();
    let (t, deleted) = import(Spec::f32s(&[1.0, 2.0], &[2], None));
    let t = t.unwrap();
    let exported = t.to_dlpack_versioned().unwrap();
    drop(t);
    std::thread::spawn(move || {
        let raw = exported.into_raw();
        // SAFETY: `raw` is a live export owned by this thread now.
        let back = unsafe { DlpackTensor::from_raw(raw) }.unwrap();
        drop(back);
    })
    .join()
    .unwrap();
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
    assert_eq!(live_exports(), before);
}

/// 32-bit words seen as their little-endian bytes: memory 4-aligned for a `Bytes`.
struct AlignedWords(Vec<u32>);

impl AsRef<[u8]> for AlignedWords {
    fn as_ref(&self) -> &[u8] {
        bytemuck::cast_slice(&self.0)
    }
}
