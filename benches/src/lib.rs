//! Shared pieces of polytensor's benchmarks: the peers' entry points and input data.
//!
//! Every benchmark measures polytensor and its peers in the same run, so the ratios hold
//! whatever the machine's noise; `docs/PERFORMANCE.md` records them.

use polytensor::{DataType, Device, Tensor};
use std::sync::Arc;

const CBLAS_ROW_MAJOR: i32 = 101;
const CBLAS_NO_TRANS: i32 = 111;

extern "C" {
    fn cblas_sgemm(
        order: i32,
        ta: i32,
        tb: i32,
        m: i32,
        n: i32,
        k: i32,
        alpha: f32,
        a: *const f32,
        lda: i32,
        b: *const f32,
        ldb: i32,
        beta: f32,
        c: *mut f32,
        ldc: i32,
    );
    fn cblas_dgemm(
        order: i32,
        ta: i32,
        tb: i32,
        m: i32,
        n: i32,
        k: i32,
        alpha: f64,
        a: *const f64,
        lda: i32,
        b: *const f64,
        ldb: i32,
        beta: f64,
        c: *mut f64,
        ldc: i32,
    );
}

/// A CBLAS `?gemm` routine: order, transposes, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc.
pub type CblasGemm<T> = unsafe extern "C" fn(
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    T,
    *const T,
    i32,
    *const T,
    i32,
    T,
    *mut T,
    i32,
);

/// A float type the matmul peers multiply: OpenBLAS (the system library, linked by
/// `build.rs`) and the `gemm` crate, on row-major `a: m x k`, `b: k x n`, `c: m x n`.
pub trait Peer: Copy + Default + Send + Sync + 'static {
    /// The OpenBLAS CBLAS routine for this type.
    const CBLAS_GEMM: CblasGemm<Self>;
    /// This type's zero and one.
    const ZERO_ONE: (Self, Self);
    /// An input value converted from f32.
    fn from_f32(v: f32) -> Self;

    /// `c = a x b` with OpenBLAS.
    fn openblas(m: usize, n: usize, k: usize, a: &[Self], b: &[Self], c: &mut [Self]) {
        assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
        let (zero, one) = Self::ZERO_ONE;
        // SAFETY: the slices hold the row-major matrices of the dimensions passed (asserted).
        unsafe {
            (Self::CBLAS_GEMM)(
                CBLAS_ROW_MAJOR,
                CBLAS_NO_TRANS,
                CBLAS_NO_TRANS,
                m as i32,
                n as i32,
                k as i32,
                one,
                a.as_ptr(),
                k as i32,
                b.as_ptr(),
                n as i32,
                zero,
                c.as_mut_ptr(),
                n as i32,
            )
        }
    }

    /// `c = a x b` with the `gemm` crate on `threads` threads.
    fn gemm(m: usize, n: usize, k: usize, a: &[Self], b: &[Self], c: &mut [Self], threads: usize) {
        assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
        let parallelism = if threads > 1 {
            gemm::Parallelism::Rayon(threads)
        } else {
            gemm::Parallelism::None
        };
        let (zero, one) = Self::ZERO_ONE;
        // SAFETY: the slices hold the row-major matrices of the dimensions passed (asserted);
        // gemm dispatches on the type, which is f32 or f64 here.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                c.as_mut_ptr(),
                1,
                n as isize,
                false,
                a.as_ptr(),
                1,
                k as isize,
                b.as_ptr(),
                1,
                n as isize,
                zero,
                one,
                false,
                false,
                false,
                parallelism,
            )
        }
    }
}

impl Peer for f32 {
    const CBLAS_GEMM: CblasGemm<f32> = cblas_sgemm;
    const ZERO_ONE: (f32, f32) = (0.0, 1.0);
    fn from_f32(v: f32) -> Self {
        v
    }
}

impl Peer for f64 {
    const CBLAS_GEMM: CblasGemm<f64> = cblas_dgemm;
    const ZERO_ONE: (f64, f64) = (0.0, 1.0);
    fn from_f32(v: f32) -> Self {
        f64::from(v)
    }
}

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
