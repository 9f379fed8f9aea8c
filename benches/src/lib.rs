//! Shared pieces of polytensor's benchmarks: the peers' entry points and input data.
//!
//! Every benchmark measures polytensor and its peers in the same run, so the ratios hold
//! whatever the machine's noise; `docs/PERFORMANCE.md` records them.

use polytensor::{DataType, Device, Tensor};
use std::sync::Arc;

/// OpenBLAS's CBLAS entry points (the system library, linked by `build.rs`).
pub mod openblas {
    const ROW_MAJOR: i32 = 101;
    const NO_TRANS: i32 = 111;

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

    /// `c = a x b` for row-major `a: m x k`, `b: k x n`, `c: m x n` in f32.
    pub fn sgemm(m: usize, n: usize, k: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
        assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
        // SAFETY: the slices hold the row-major matrices of the dimensions passed (asserted).
        unsafe {
            cblas_sgemm(
                ROW_MAJOR,
                NO_TRANS,
                NO_TRANS,
                m as i32,
                n as i32,
                k as i32,
                1.0,
                a.as_ptr(),
                k as i32,
                b.as_ptr(),
                n as i32,
                0.0,
                c.as_mut_ptr(),
                n as i32,
            )
        }
    }

    /// `c = a x b` for row-major `a: m x k`, `b: k x n`, `c: m x n` in f64.
    pub fn dgemm(m: usize, n: usize, k: usize, a: &[f64], b: &[f64], c: &mut [f64]) {
        assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
        // SAFETY: the slices hold the row-major matrices of the dimensions passed (asserted).
        unsafe {
            cblas_dgemm(
                ROW_MAJOR,
                NO_TRANS,
                NO_TRANS,
                m as i32,
                n as i32,
                k as i32,
                1.0,
                a.as_ptr(),
                k as i32,
                b.as_ptr(),
                n as i32,
                0.0,
                c.as_mut_ptr(),
                n as i32,
            )
        }
    }
}

/// `c = a x b` with the `gemm` crate (row-major, all threads).
pub fn gemm_f32(m: usize, n: usize, k: usize, a: &[f32], b: &[f32], c: &mut [f32], threads: usize) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
    let parallelism = if threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: the slices hold the row-major matrices of the dimensions passed (asserted).
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
            0.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        )
    }
}

/// `c = a x b` with the `gemm` crate in f64.
pub fn gemm_f64(m: usize, n: usize, k: usize, a: &[f64], b: &[f64], c: &mut [f64], threads: usize) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
    let parallelism = if threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: the slices hold the row-major matrices of the dimensions passed (asserted).
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
            0.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        )
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
