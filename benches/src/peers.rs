//! The CPU matmul peers' entry points: OpenBLAS (the system library, linked by `build.rs`
//! when the feature `peers` is on) and the `gemm` crate.

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
