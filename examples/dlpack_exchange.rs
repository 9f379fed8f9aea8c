//! DLPack, the bridge to NumPy, PyTorch, TensorFlow and C: a transposed view exported as a
//! `DLManagedTensorVersioned` (the pointer a consumer takes) and imported back, with no copy
//! either way (`cargo run --example dlpack_exchange`).

use polytensor::dlpack;
use polytensor::prelude::*;

fn main() -> polytensor::Result<()> {
    let cpu = polytensor::device("cpu:0")?;
    let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3], &cpu)?;
    let view = t.t()?; // [3, 2], strides [1, 3]: DLPack carries strides as they are
    let exported = view.to_dlpack_versioned()?;
    println!("live exports: {}", dlpack::live_exports());
    // What a C consumer (or a Python capsule) is handed.
    let raw = exported.into_raw();
    // SAFETY: `raw` came from `into_raw` just above, is live, and passes to the import,
    // which calls its deleter exactly once.
    let back = unsafe { dlpack::from_dlpack_versioned(raw) }?;
    println!("{back}");
    let address = |x: &Tensor| x.view().host_bytes().map(<[u8]>::as_ptr);
    println!(
        "same memory as the original: {}; shape {:?}; strides {:?}",
        address(&back) == address(&t),
        back.dims(),
        back.layout().strides()
    );
    drop(back);
    println!(
        "live exports after the import dropped: {}",
        dlpack::live_exports()
    );
    Ok(())
}
