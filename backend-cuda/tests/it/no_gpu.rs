//! Without a GPU (or without a driver) the backend says why, and nothing panics: cudarc's
//! calls into a library it cannot load would panic, so every library is checked first.

use polytensor_cuda::loader;

#[test]
fn without_a_gpu_the_backend_says_why() {
    match polytensor_cuda::open_all() {
        Ok(devices) => {
            let names: Vec<String> = devices
                .iter()
                .map(|d| format!("{}: {}", d.name(), d.description()))
                .collect();
            println!("skipped: this machine has CUDA devices: {names:?}");
            assert!(!devices.is_empty());
        }
        Err(why) => {
            println!("cuda: unavailable ({why})");
            // No driver at all, or the driver's own reason (CUDA_ERROR_NO_DEVICE, ...).
            assert!(
                why.contains("libcuda") || why.contains("CUDA_ERROR") || why.contains("NVRTC"),
                "{why}"
            );
            let opened = polytensor_cuda::first().unwrap_err().to_string();
            assert!(opened.contains("cuda"), "{opened}");
            let unavailable = loader::driver_unavailable().or_else(loader::nvrtc_unavailable);
            assert!(unavailable.is_some());
        }
    }
}

#[test]
fn a_gpu_that_is_not_there_is_an_err() {
    let err = polytensor_cuda::open(1 << 20).unwrap_err().to_string();
    assert!(err.contains("cuda:1048576"), "{err}");
}

#[test]
fn library_presence_is_reported_without_panicking() {
    // Either answer is fine; asking must not panic with or without the libraries.
    let nvrtc = loader::nvrtc_unavailable();
    let cublas = loader::cublas_unavailable();
    let cudnn = loader::cudnn_unavailable();
    println!("nvrtc: {nvrtc:?}\ncublas: {cublas:?}\ncudnn: {cudnn:?}");
    if let Some(why) = cublas {
        assert!(why.contains("cuBLAS"), "{why}");
    }
    if let Some(why) = cudnn {
        assert!(why.contains("cuDNN"), "{why}");
    }
}
