//! Floating-point matmul through cuBLAS (`cublasGemmStridedBatchedEx`), for f16, bf16, f32,
//! f64, complex64 and complex128. Row-major `out = a x b` is column-major
//! `outᵀ = bᵀ x aᵀ`, so each operand is passed as it lies in memory: a matrix with unit
//! column stride as is (`N`), one with unit row stride transposed (`T`), the other stride
//! as its leading dimension. Operands cuBLAS cannot take that way (zero, negative or
//! non-unit strides in both dims) are made contiguous first by the caller.
//!
//! f16 and bf16 products are accumulated in f32 and rounded once, as the shared semantics
//! say; f32 is computed in f32, not TF32, unless [`crate::CudaQueue::set_tf32`] allows it.

use std::ffi::c_void;
use std::sync::Mutex;

use cudarc::cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t, cublasOperation_t, cudaDataType};
use cudarc::cublas::{result as blas, CudaBlas};
use polytensor_core::plan::MatmulPlan;
use polytensor_core::{DataType, Error, Result};

/// One operand as cuBLAS takes it: transposed or not, and its leading dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Operand {
    pub transpose: bool,
    pub ld: usize,
}

impl Operand {
    /// How cuBLAS takes a row-major `rows x cols` operand with element strides
    /// `[row, col]`, as the column-major `cols x rows` matrix it is; `None` if it cannot
    /// (then the caller makes it contiguous, which this accepts).
    pub(crate) fn of(rows: usize, cols: usize, [row, col]: [isize; 2]) -> Option<Operand> {
        let stride = |s: isize| usize::try_from(s).ok();
        // Unit column stride: column-major `cols x rows`, leading dimension the row stride.
        if cols <= 1 || col == 1 {
            let ld = if rows <= 1 { cols.max(1) } else { stride(row)? };
            if ld >= cols.max(1) {
                return Some(Operand {
                    transpose: false,
                    ld,
                });
            }
        }
        // Unit row stride: column-major `rows x cols`, transposed.
        if rows <= 1 || row == 1 {
            let ld = if cols <= 1 { rows.max(1) } else { stride(col)? };
            if ld >= rows.max(1) {
                return Some(Operand {
                    transpose: true,
                    ld,
                });
            }
        }
        None
    }

    fn op(self) -> cublasOperation_t {
        if self.transpose {
            cublasOperation_t::CUBLAS_OP_T
        } else {
            cublasOperation_t::CUBLAS_OP_N
        }
    }
}

/// cuBLAS's element type and compute type for `dtype` (`None` if cuBLAS does not run it).
fn types(dtype: DataType, tf32: bool) -> Option<(cudaDataType, cublasComputeType_t)> {
    use cublasComputeType_t::*;
    use cudaDataType::*;
    let f32_compute = if tf32 {
        CUBLAS_COMPUTE_32F_FAST_TF32
    } else {
        CUBLAS_COMPUTE_32F
    };
    Some(match dtype {
        DataType::Half => (CUDA_R_16F, CUBLAS_COMPUTE_32F),
        DataType::BFloat16 => (CUDA_R_16BF, CUBLAS_COMPUTE_32F),
        DataType::Float => (CUDA_R_32F, f32_compute),
        DataType::Double => (CUDA_R_64F, CUBLAS_COMPUTE_64F),
        DataType::Complex64 => (CUDA_C_32F, f32_compute),
        DataType::Complex128 => (CUDA_C_64F, CUBLAS_COMPUTE_64F),
        _ => return None,
    })
}

/// `alpha = 1, beta = 0` in the scalar type of a compute type (f32, f64, or their complex
/// pairs), as bytes.
fn one_and_zero(dtype: DataType) -> ([u8; 16], [u8; 16]) {
    let (mut one, zero) = ([0u8; 16], [0u8; 16]);
    match dtype {
        DataType::Double | DataType::Complex128 => one[..8].copy_from_slice(&1f64.to_le_bytes()),
        _ => one[..4].copy_from_slice(&1f32.to_le_bytes()),
    }
    (one, zero)
}

/// A cuBLAS handle on the device's stream (a handle serves one call at a time).
pub(crate) struct Blas {
    handle: Mutex<CudaBlas>,
}

/// The device addresses of a matmul's operands, their first elements (offsets applied).
pub(crate) struct Addresses {
    pub a: u64,
    pub b: u64,
    pub out: u64,
}

impl Blas {
    /// A handle on `stream`.
    pub(crate) fn new(stream: std::sync::Arc<cudarc::driver::CudaStream>) -> Result<Self> {
        let handle = CudaBlas::new(stream)
            .map_err(|e| Error::invalid(format!("creating a cuBLAS handle: {e:?}")))?;
        Ok(Self {
            handle: Mutex::new(handle),
        })
    }

    /// `out = a x b` for every batch of `plan`, with `a` and `b` taken as `ta` and `tb`.
    pub(crate) fn gemm(
        &self,
        dtype: DataType,
        plan: &MatmulPlan,
        (ta, tb): (Operand, Operand),
        at: Addresses,
        tf32: bool,
    ) -> std::result::Result<(), String> {
        let (data, compute) =
            types(dtype, tf32).ok_or_else(|| format!("cuBLAS does not run {dtype}"))?;
        let int = |v: usize, what: &str| {
            i32::try_from(v).map_err(|_| format!("{what} {v} is past cuBLAS's 32-bit sizes"))
        };
        let (m, n, k) = (int(plan.m, "m")?, int(plan.n, "n")?, int(plan.k, "k")?);
        let (lda, ldb) = (
            int(ta.ld, "a's leading dimension")?,
            int(tb.ld, "b's leading dimension")?,
        );
        let size = dtype.size() as u64;
        // The batch dims: the innermost is strided-batched, the others are looped over.
        let dims = plan.batch.dims();
        let rank = dims.len();
        let (inner, inner_strides) = match rank {
            0 => (1, [0isize; 3]),
            _ => (
                dims[rank - 1],
                [0, 1, 2].map(|o| plan.batch.strides(o)[rank - 1]),
            ),
        };
        let outer: usize = dims[..rank.saturating_sub(1)].iter().product();
        let count = int(inner, "the batch")?;
        let (one, zero) = one_and_zero(dtype);
        let handle = self.handle.lock().unwrap_or_else(|e| e.into_inner());
        for index in 0..outer {
            // The offsets of this outer batch in each operand, in elements.
            let mut rest = index;
            let mut offsets = [0i64; 3];
            for d in (0..rank.saturating_sub(1)).rev() {
                let i = (rest % dims[d]) as i64;
                rest /= dims[d];
                for (o, offset) in offsets.iter_mut().enumerate() {
                    *offset += i * plan.batch.strides(o)[d] as i64;
                }
            }
            let address =
                |base: u64, o: usize| base.wrapping_add((offsets[o] as u64).wrapping_mul(size));
            // SAFETY: the addresses are the operands' first elements of this batch on the
            // handle's stream's device; each operand's extent, as the plan's strides and the
            // leading dimensions describe it, lies within its buffer (the layouts were
            // checked against their buffers when the tensors were made); alpha and beta
            // point at scalars of the compute type.
            unsafe {
                blas::gemm_strided_batched_ex(
                    *handle.handle(),
                    tb.op(),
                    ta.op(),
                    n,
                    m,
                    k,
                    one.as_ptr() as *const c_void,
                    address(at.b, 1) as *const c_void,
                    data,
                    ldb,
                    inner_strides[1] as i64,
                    address(at.a, 0) as *const c_void,
                    data,
                    lda,
                    inner_strides[0] as i64,
                    zero.as_ptr() as *const c_void,
                    address(at.out, 2) as *mut c_void,
                    data,
                    n.max(1),
                    inner_strides[2] as i64,
                    count,
                    compute,
                    cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                )
            }
            .map_err(|e| format!("cublasGemmStridedBatchedEx: {e:?}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operands_are_taken_as_they_lie() {
        // Row-major 3x4: column-major 4x3, not transposed, ld 4.
        assert_eq!(
            Operand::of(3, 4, [4, 1]),
            Some(Operand {
                transpose: false,
                ld: 4
            })
        );
        // A transposed view of a row-major 4x3: unit row stride, ld 3.
        assert_eq!(
            Operand::of(3, 4, [1, 3]),
            Some(Operand {
                transpose: true,
                ld: 3
            })
        );
        // Rows padded to 8: ld 8.
        assert_eq!(
            Operand::of(3, 4, [8, 1]),
            Some(Operand {
                transpose: false,
                ld: 8
            })
        );
        // Broadcast (zero strides), negative or gapped in both dims: made contiguous first.
        assert_eq!(Operand::of(3, 4, [0, 1]), None);
        assert_eq!(Operand::of(3, 4, [-4, 1]), None);
        assert_eq!(Operand::of(3, 4, [8, 2]), None);
        // A single row or column takes any stride.
        assert_eq!(
            Operand::of(1, 4, [0, 1]),
            Some(Operand {
                transpose: false,
                ld: 4
            })
        );
        assert_eq!(
            Operand::of(3, 1, [5, 7]),
            Some(Operand {
                transpose: false,
                ld: 5
            })
        );
    }
}
