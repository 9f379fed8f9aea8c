//! The f32 register tile of [`super::blocked`] on AVX2 with FMA: 6 rows by 16 columns of
//! sums in twelve 8-lane registers, fed per k by two loads of a packed `b` row and six
//! broadcasts of a packed `a` column (Haswell's BLIS kernel shape: 15 of 16 registers).

/// Rows of the register tile.
pub(super) const MR: usize = 6;
/// Columns of the register tile (two 8-lane registers).
pub(super) const NR: usize = 16;

/// Whether this CPU runs the tile (AVX2 and FMA, as [`crate::vmath::detected`] finds them;
/// never off x86-64, nor under Miri, which runs only the instructions a build enables).
pub(super) fn available() -> bool {
    crate::vmath::detected() != crate::vmath::Isa::Baseline
}

/// `c[r * ldc + j] (+)= sum_p a[p * MR + r] * b[p * NR + j]` over `depth` values of `p`,
/// for `r < MR` and `j < NR`: added to what `c` holds if `accumulate`, else stored.
///
/// # Panics
///
/// If [`available`] is false, a panel is shorter than `depth` rows, or `c` does not hold
/// the tile's rows of `ldc`.
pub(super) fn tile(
    depth: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
) {
    assert!(available(), "the AVX2 tile needs AVX2 and FMA");
    assert!(a.len() >= depth * MR && b.len() >= depth * NR);
    assert!(ldc >= NR && c.len() >= (MR - 1) * ldc + NR);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the CPU has AVX2 and FMA, the panels hold `depth` rows and `c` holds the
    // tile's rows (all checked above), which is all the tile reads and writes.
    unsafe {
        tile_avx2(
            depth,
            a.as_ptr(),
            b.as_ptr(),
            c.as_mut_ptr(),
            ldc,
            accumulate,
        )
    }
}

/// # Safety
///
/// The CPU has AVX2 and FMA; `a` points at `depth * MR` and `b` at `depth * NR` readable
/// f32, `c` at `(MR - 1) * ldc + NR` writable f32 that nothing else accesses.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_avx2(
    depth: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    use std::arch::x86_64::*;
    let mut sums = [[_mm256_setzero_ps(); 2]; MR];
    for p in 0..depth {
        // SAFETY: `p < depth`, so the row of `b` and the column of `a` are inside the
        // panels (caller's contract); the loads are unaligned.
        unsafe {
            let row = b.add(p * NR);
            let (lo, hi) = (_mm256_loadu_ps(row), _mm256_loadu_ps(row.add(8)));
            let column = a.add(p * MR);
            for (r, sum) in sums.iter_mut().enumerate() {
                let x = _mm256_broadcast_ss(&*column.add(r));
                sum[0] = _mm256_fmadd_ps(x, lo, sum[0]);
                sum[1] = _mm256_fmadd_ps(x, hi, sum[1]);
            }
        }
    }
    for (r, sum) in sums.iter().enumerate() {
        for (half, &sum) in sum.iter().enumerate() {
            // SAFETY: row `r < MR` of the tile holds 16 f32 from `c + r * ldc` (caller's
            // contract); unaligned loads and stores.
            unsafe {
                let at = c.add(r * ldc + half * 8);
                let sum = if accumulate {
                    _mm256_add_ps(_mm256_loadu_ps(at), sum)
                } else {
                    sum
                };
                _mm256_storeu_ps(at, sum);
            }
        }
    }
}
