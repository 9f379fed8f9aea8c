//! Shared pieces of polytensor's benchmarks: input data, and (feature `peers`) the peers'
//! entry points.
//!
//! Every benchmark measures polytensor and its peers in the same run, so the ratios hold
//! whatever the machine's noise; `docs/PERFORMANCE.md` records them. The CPU peers
//! (OpenBLAS, linked from the system, ndarray and candle) are the feature `peers`, which
//! `cargo xtask bench` turns on: `cargo test --workspace` neither builds nor links them.

use polytensor::{DataType, Device, Tensor};
use std::sync::Arc;

#[cfg(feature = "peers")]
pub mod peers;
pub mod tensorflow;
pub mod training;

/// Deterministic values in [-1, 1).
pub fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// A polytensor tensor of `dims` with deterministic values, as `dtype`.
pub fn tensor(dims: &[usize], dtype: DataType, seed: u64, device: &Arc<dyn Device>) -> Tensor {
    let n = dims.iter().product();
    Tensor::from_slice(&values(n, seed), dims, device)
        .and_then(|t| t.cast(dtype))
        .expect("bench input")
}

/// A tensor from a `{dtype, shape, data_hex | values_b64}` JSON spec (what the test
/// scripts write), on `device` (strings on the CPU).
pub fn tensor_from_json(spec: &serde_json::Value, device: &Arc<dyn Device>) -> Tensor {
    let dims: Vec<usize> = spec["shape"]
        .as_array()
        .expect("shape")
        .iter()
        .map(|d| d.as_u64().expect("dim") as usize)
        .collect();
    if spec["dtype"] == "string" {
        let values: Vec<Vec<u8>> = spec["values_b64"]
            .as_array()
            .expect("values_b64")
            .iter()
            .map(|v| {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD
                    .decode(v.as_str().expect("base64"))
                    .expect("base64")
            })
            .collect();
        let cpu = polytensor::device("cpu:0").expect("the CPU device");
        return Tensor::from_strings(values, dims, &cpu).expect("strings");
    }
    let hex = spec["data_hex"].as_str().expect("data_hex");
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect();
    let dtype: DataType = spec["dtype"]
        .as_str()
        .expect("dtype")
        .parse()
        .expect("a dtype");
    Tensor::from_bytes(&bytes, dims, dtype, device).expect("tensor")
}

/// The CPU device and the first device of backend `backend` (`cpu:0`, `opencl:0`), for
/// benchmarks that measure a backend next to its peer; `None` after printing why not.
pub fn cpu_and(backend: &str) -> Option<[Arc<dyn Device>; 2]> {
    let cpu = polytensor::device("cpu:0").expect("the CPU device");
    match polytensor::device(&format!("{backend}:0")) {
        Ok(device) => Some([cpu, device]),
        Err(e) => {
            eprintln!("{backend} benchmarks skipped: {e}");
            None
        }
    }
}

/// Run `op` and wait for its device to finish.
pub fn finished(device: &Arc<dyn Device>, op: impl Fn() -> Tensor) -> Tensor {
    let result = op();
    device.synchronize().expect("synchronize");
    result
}

/// Loop trips of one [`fma_burst`] call.
pub const FMA_BURST_TRIPS: u64 = 1 << 20;

/// Floating-point operations of one [`fma_burst`] call: 12 independent 512-bit FMAs per
/// trip, 2 operations per lane.
pub fn fma_burst_flops(double: bool) -> u64 {
    let lanes = if double { 8 } else { 16 };
    FMA_BURST_TRIPS * 12 * lanes * 2
}

/// The machine's FMA peak on one core: [`FMA_BURST_TRIPS`] trips of 12 independent AVX-512
/// FMAs (f32 or f64), enough to cover FMA latency on every current core. Returns `false`
/// without running where the CPU has no AVX-512.
pub fn fma_burst(double: bool) -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        macro_rules! burst {
            ($fma:literal) => {
                // SAFETY: AVX-512F is present (checked above); the asm touches only the
                // registers it names, all caller-saved and declared clobbered by
                // `clobber_abi("C")`, and no memory.
                unsafe {
                    std::arch::asm!(
                        "vpxord zmm0, zmm0, zmm0", "vpxord zmm1, zmm1, zmm1",
                        "vpxord zmm2, zmm2, zmm2", "vpxord zmm3, zmm3, zmm3",
                        "vpxord zmm4, zmm4, zmm4", "vpxord zmm5, zmm5, zmm5",
                        "vpxord zmm6, zmm6, zmm6", "vpxord zmm7, zmm7, zmm7",
                        "vpxord zmm8, zmm8, zmm8", "vpxord zmm9, zmm9, zmm9",
                        "vpxord zmm10, zmm10, zmm10", "vpxord zmm11, zmm11, zmm11",
                        "vpxord zmm12, zmm12, zmm12", "vpxord zmm13, zmm13, zmm13",
                        "2:",
                        concat!($fma, " zmm0, zmm12, zmm13"), concat!($fma, " zmm1, zmm12, zmm13"),
                        concat!($fma, " zmm2, zmm12, zmm13"), concat!($fma, " zmm3, zmm12, zmm13"),
                        concat!($fma, " zmm4, zmm12, zmm13"), concat!($fma, " zmm5, zmm12, zmm13"),
                        concat!($fma, " zmm6, zmm12, zmm13"), concat!($fma, " zmm7, zmm12, zmm13"),
                        concat!($fma, " zmm8, zmm12, zmm13"), concat!($fma, " zmm9, zmm12, zmm13"),
                        concat!($fma, " zmm10, zmm12, zmm13"), concat!($fma, " zmm11, zmm12, zmm13"),
                        "dec rcx",
                        "jnz 2b",
                        "vzeroupper",
                        inout("rcx") FMA_BURST_TRIPS => _,
                        clobber_abi("C"),
                        options(nostack, nomem),
                    )
                }
            };
        }
        if double {
            burst!("vfmadd231pd");
        } else {
            burst!("vfmadd231ps");
        }
        return true;
    }
    let _ = double;
    false
}

/// The criterion settings of every benchmark here: 10 samples after a short warm-up, so the
/// whole suite stays within minutes on a 2-core machine.
pub fn criterion_config() -> criterion::Criterion {
    criterion::Criterion::default()
        .sample_size(10)
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(2))
}
