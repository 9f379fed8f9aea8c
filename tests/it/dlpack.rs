//! The facade's DLPack: Python's `__dlpack__` semantics (versioned or legacy, copies only
//! when asked or needed, streams, devices) on every backend this build has, and imports
//! that find their device.

use std::sync::Arc;

use polytensor::dlpack::{
    self, live_exports, Capsule, DLDevice, DLDeviceType, DlpackRequest,
    DLPACK_FLAG_BITMASK_IS_COPIED,
};
use polytensor::prelude::*;

/// The device of a backend, or `None` (saying why) if it is absent and not required.
#[allow(dead_code)]
fn backend(family: &str) -> Option<Arc<dyn Device>> {
    match polytensor::device(family) {
        Ok(device) => Some(device),
        Err(e) => {
            let required = std::env::var("POLYTENSOR_REQUIRE").unwrap_or_default();
            assert!(
                !required.split(',').any(|r| r.trim() == family),
                "POLYTENSOR_REQUIRE names {family}, but: {e}"
            );
            eprintln!("skipped on {family}: {e}");
            None
        }
    }
}

/// `live_exports` is process-wide: the tests of this file, which export, take turns.
static EXPORTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    EXPORTS.lock().unwrap_or_else(|e| e.into_inner())
}

fn versioned(request: DlpackRequest) -> DlpackRequest {
    DlpackRequest {
        max_version: Some((1, 1)),
        ..request
    }
}

#[test]
fn host_tensors_follow_the_python_protocol() {
    let _turn = turn();
    let cpu = polytensor::device("cpu").unwrap();
    let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3], &cpu).unwrap();
    assert_eq!(dlpack::dlpack_device(&t).unwrap(), DLDevice::CPU);
    let address = t.buffer().host_ptr().unwrap() as usize;

    // max_version picks the struct; neither copies.
    let new = dlpack::dlpack(&t, versioned(DlpackRequest::default())).unwrap();
    assert_eq!((new.name(), new.flags()), ("dltensor_versioned", 0));
    let old = dlpack::dlpack(&t, DlpackRequest::default()).unwrap();
    assert_eq!(old.name(), "dltensor");
    let Capsule::Versioned(handle) = new else {
        panic!("versioned")
    };
    assert_eq!(handle.dl_tensor().unwrap().data as usize, address);

    // copy=True: a private host copy, flagged.
    let copy = dlpack::dlpack(
        &t,
        versioned(DlpackRequest {
            copy: Some(true),
            ..Default::default()
        }),
    )
    .unwrap();
    assert_eq!(copy.flags(), DLPACK_FLAG_BITMASK_IS_COPIED);
    let Capsule::Versioned(copy) = copy else {
        panic!("versioned")
    };
    assert_ne!(copy.dl_tensor().unwrap().data as usize, address);
    let back = dlpack::import(copy).unwrap();
    assert_eq!(back.to_vec::<f32>().unwrap(), t.to_vec::<f32>().unwrap());

    // Refusals: a stream for host memory, a device polytensor cannot copy to, copy=False
    // where a copy is needed (read-only memory as a legacy struct).
    let stream = DlpackRequest {
        stream: Some(7),
        ..Default::default()
    };
    assert!(dlpack::dlpack(&t, stream)
        .unwrap_err()
        .to_string()
        .contains("stream"));
    let cuda = DlpackRequest {
        dl_device: Some(DLDevice::new(DLDeviceType::CUDA, 0)),
        ..Default::default()
    };
    assert!(dlpack::dlpack(&t, cuda)
        .unwrap_err()
        .to_string()
        .contains("kDLCUDA:0"));
    let proto = t.as_proto_tensor_content().unwrap();
    let shared = Tensor::from_proto(&proto, &cpu).unwrap();
    if shared.buffer().is_read_only() {
        let no_copy = DlpackRequest {
            copy: Some(false),
            ..Default::default()
        };
        assert!(dlpack::dlpack(&shared, no_copy)
            .unwrap_err()
            .to_string()
            .contains("read-only"));
        let copied = dlpack::dlpack(&shared, DlpackRequest::default()).unwrap();
        assert_eq!(copied.name(), "dltensor");
    }
    drop((handle, old, back));
}

#[test]
fn raw_pointers_round_trip_through_the_facade() {
    let _turn = turn();
    let cpu = polytensor::device("cpu").unwrap();
    let before = live_exports();
    let t = Tensor::arange(0i64, 12i64, 1i64, DataType::Int64, &cpu)
        .unwrap()
        .reshape([3, 4])
        .unwrap()
        .t()
        .unwrap();
    let raw = t.to_dlpack_versioned().unwrap().into_raw();
    // SAFETY: our own live export, handed over once.
    let back = unsafe { dlpack::from_dlpack_versioned(raw) }.unwrap();
    assert_eq!(back.to_vec::<i64>().unwrap(), t.to_vec::<i64>().unwrap());
    let raw = t.to_dlpack().unwrap().into_raw();
    // SAFETY: as above.
    let legacy = unsafe { dlpack::from_dlpack(raw) }.unwrap();
    assert_eq!(legacy.dims(), vec![4, 3]);
    drop((back, legacy));
    assert_eq!(live_exports(), before);
}

#[cfg(feature = "opencl")]
#[test]
fn opencl_buffers_export_their_cl_mem() {
    let _turn = turn();
    let Some(device) = backend("opencl") else {
        return;
    };
    let t = Tensor::arange(0i32, 64i32, 1i32, DataType::Int32, &device).unwrap();
    let view = t.slice(8..40).unwrap();
    let exported = view.to_dlpack_versioned().unwrap();
    let dl = exported.dl_tensor().unwrap();
    assert_eq!(dl.device.device_type, DLDeviceType::OPENCL);
    assert_eq!(dl.data as usize, t.buffer().device_address().unwrap());
    assert_eq!(dl.byte_offset, 8 * 4, "views are offsets into the cl_mem");
    // The host cannot import device memory: refused, and the deleter still runs.
    let before = live_exports();
    let host = dlpack::host_device().unwrap();
    assert!(Tensor::import_dlpack(exported, &host)
        .unwrap_err()
        .to_string()
        .contains("kDLOpenCL"));
    assert_eq!(live_exports(), before - 1);
    // Device memory goes to the device DLPack names, opencl:0 here; OpenCL does not adopt
    // foreign memory (its DLPack data is a cl_mem handle, not an address one could offset),
    // so the import is refused there, and the deleter still runs once.
    let again = view.to_dlpack_versioned().unwrap();
    let before = live_exports();
    let refused = dlpack::import(again).unwrap_err().to_string();
    assert!(
        refused.contains(device.name()) && refused.contains("did not allocate"),
        "{refused}"
    );
    assert_eq!(live_exports(), before - 1);
    // Asked for the host, the protocol copies.
    let to_host = DlpackRequest {
        dl_device: Some(DLDevice::CPU),
        max_version: Some((1, 0)),
        ..Default::default()
    };
    let Capsule::Versioned(copy) = dlpack::dlpack(&view, to_host).unwrap() else {
        panic!("versioned")
    };
    assert_eq!(copy.flags(), DLPACK_FLAG_BITMASK_IS_COPIED);
    let back = dlpack::import(copy).unwrap();
    assert_eq!(back.to_vec::<i32>().unwrap(), (8..40).collect::<Vec<i32>>());
}

#[cfg(feature = "wgpu")]
#[test]
fn wgpu_buffers_export_only_as_copies() {
    let _turn = turn();
    let Some(device) = backend("wgpu") else {
        return;
    };
    let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], [2, 2], &device).unwrap();
    assert_eq!(
        dlpack::dlpack_device(&t).unwrap().device_type,
        DLDeviceType::WEBGPU
    );
    assert!(t
        .to_dlpack_versioned()
        .unwrap_err()
        .to_string()
        .contains("no address"));
    assert!(dlpack::dlpack(&t, versioned(DlpackRequest::default()))
        .unwrap_err()
        .to_string()
        .contains("copy"));
    let copy = DlpackRequest {
        copy: Some(true),
        ..Default::default()
    };
    let Capsule::Versioned(copied) = dlpack::dlpack(&t, versioned(copy)).unwrap() else {
        panic!("versioned")
    };
    assert_eq!(copied.flags(), DLPACK_FLAG_BITMASK_IS_COPIED);
    assert_eq!(copied.dl_tensor().unwrap().device, DLDevice::CPU);
    let back = dlpack::import(copied).unwrap();
    assert_eq!(back.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
}

#[cfg(feature = "cuda")]
#[test]
fn cuda_memory_is_imported_only_onto_its_gpu() {
    let _turn = turn();
    let cpu = polytensor::device("cpu").unwrap();
    let t = Tensor::from_slice(&[1.0f32, 2.0], [2], &cpu).unwrap();
    let before = live_exports();
    let raw = t.to_dlpack_versioned().unwrap().into_raw();
    // SAFETY: `raw` is a live export; only its device field changes, to say kDLCUDA:0.
    unsafe { (*raw).dl_tensor.device = DLDevice::new(DLDeviceType::CUDA, 0) };
    // SAFETY: ownership of the live export passes to the import.
    let imported = unsafe { dlpack::from_dlpack_versioned(raw) };
    match polytensor::device("cuda:0") {
        // A GPU would adopt it: the address is not its memory, so never run that here.
        Ok(gpu) => {
            drop(imported);
            eprintln!("skipped the refusal on {}: it has a GPU", gpu.name());
        }
        Err(_) => {
            let why = imported.unwrap_err().to_string();
            assert!(why.contains("kDLCUDA:0"), "{why}");
        }
    }
    assert_eq!(live_exports(), before, "the deleter ran once");
}
