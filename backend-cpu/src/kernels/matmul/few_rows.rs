//! A GEMM of a few rows times a large matrix (a late layer of a small image at batch 1: a
//! 1x1 convolution of 2x2 pixels is 4 rows times a filter of a megabyte). Each element of
//! `b` is used `m` times only, so the product is bound by reading `b` from memory, and a
//! packed GEMM's register tile (16 or more rows) is mostly empty: `gemm` ran such products
//! at a quarter to a half of the memory's bandwidth. Here each thread reads its part of `b`
//! once, in memory order (a range of whole rows, or whole strips of a packed filter), four
//! rows of it at a time, into sums of `m` rows held in L1.

use num_traits::Float;
use rayon::prelude::*;

use super::{spans, GemmElem, Operands};
use crate::vmath::{widest, widest_fuses, Vectorised};

/// The most rows [`multiply`] takes: at 8 rows, each element of `b` read feeds 8
/// multiply-adds, and the sums' loads and stores from L1 catch up with the memory (a
/// packed GEMM is faster from 16 rows).
pub(crate) const FEW_ROWS: usize = 8;

/// Below this many elements of `b` (512 KiB of f32), [`multiply`] runs on the calling
/// thread: the product is bound by reading `b`, which one thread does in less time than
/// waking the others takes.
const PARALLEL_ELEMENTS: usize = 1 << 17;

/// `out = a x b` for `m` ([`FEW_ROWS`] at most) rows of `a` (`k` values each, `a_rows`
/// elements apart) and `b` in strips of `width` columns (`[ceil(n / width), k, width]`, the
/// last padded; rows `width >= n` apart are one strip), `out` row-major `m x n`, on the
/// pool's threads. Each thread reads its part of `b` as one run of memory: strips, or
/// of rows, a range of whole rows whose partial sums are then added (a thread reading
/// a few columns of every row would start a new page each row, which the prefetchers
/// follow at a third of the bandwidth).
pub(crate) fn multiply<T: GemmElem + Float + Send + Sync>(
    (m, n, k): (usize, usize, usize),
    (a, a_rows): (&[T], usize),
    (b, width): (&[T], usize),
    out: &mut [T],
) {
    let strips = n.div_ceil(width.max(1));
    // The elements of `b` read: whole strips, or of one, `n` columns of each row.
    let extent = match strips {
        1 => spans(k, width, n),
        _ => strips.saturating_mul(k).saturating_mul(width),
    };
    assert!(
        m <= FEW_ROWS
            && width > 0
            && spans(m, a_rows, k) <= a.len()
            && b.len() >= extent
            && out.len() >= m * n,
        "few_rows operands"
    );
    let out = &mut out[..m * n];
    if m == 0 || n == 0 {
        return;
    }
    let threads = match n * k {
        elements if elements < PARALLEL_ELEMENTS => 1,
        _ => rayon::current_num_threads().max(1),
    };
    if strips == 1 {
        by_rows((m, n, k), (a, a_rows), (b, width), threads, out);
    } else {
        by_strips((m, n, k), (a, a_rows), (b, width), threads, out);
    }
}

/// [`multiply`] of `b`'s rows (`k x n`, `b_rows >= n` apart): the threads take ranges of
/// whole rows, each summing into its own `m x n`, and the sums are added.
fn by_rows<T: GemmElem + Float + Send + Sync>(
    (m, n, k): (usize, usize, usize),
    (a, a_rows): (&[T], usize),
    (b, b_rows): (&[T], usize),
    threads: usize,
    out: &mut [T],
) {
    let rows = k.div_ceil(threads).next_multiple_of(4).max(4);
    let partial = |range: usize| {
        let first = range * rows;
        let mut sums = vec![T::zero(); m * n];
        product(Part {
            rows: (m, rows.min(k - first)),
            a: (&a[first..], a_rows),
            b: &b[first * b_rows..],
            b_rows,
            sums: &mut sums,
        });
        sums
    };
    let add = |mut total: Vec<T>, part: Vec<T>| {
        total.iter_mut().zip(&part).for_each(|(t, &p)| *t = *t + p);
        total
    };
    let ranges = 0..k.div_ceil(rows);
    let total = if threads > 1 {
        ranges.into_par_iter().map(partial).reduce_with(add)
    } else {
        ranges.map(partial).reduce(add)
    };
    match total {
        Some(total) => out.copy_from_slice(&total),
        None => out.fill(T::zero()),
    }
}

/// [`multiply`] of `b` in strips of `width` columns: a strip each, on the threads.
fn by_strips<T: GemmElem + Float + Send + Sync>(
    (m, n, k): (usize, usize, usize),
    (a, a_rows): (&[T], usize),
    (b, width): (&[T], usize),
    threads: usize,
    out: &mut [T],
) {
    let outputs = Operands(a.as_ptr(), b.as_ptr(), out.as_mut_ptr());
    let strip = |sums: &mut Vec<T>, strip: usize| {
        let first = strip * width;
        let columns = width.min(n - first);
        sums.clear();
        sums.resize(m * columns, T::zero());
        product(Part {
            rows: (m, k),
            a: (a, a_rows),
            b: &b[strip * k * width..],
            b_rows: width,
            sums,
        });
        let (_, _, out) = outputs.parts();
        for (i, row) in sums.chunks_exact(columns).enumerate() {
            // SAFETY: `out` is `m x n` (sliced so by `multiply`), row `i < m` and
            // `first + columns <= n`; each strip writes only its own columns, `out` is
            // borrowed mutably for the call, and the strips are joined before it
            // returns.
            unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), out.add(i * n + first), columns) };
        }
    };
    let strips = 0..n.div_ceil(width);
    if threads > 1 {
        strips.into_par_iter().for_each_init(Vec::new, strip);
    } else {
        let mut sums = Vec::new();
        strips.for_each(|s| strip(&mut sums, s));
    }
}

/// `part` for the widest vectors, with fused multiply-adds where they are.
fn product<T: Float>(part: Part<'_, T, false>) {
    if widest_fuses() {
        let Part {
            rows,
            a,
            b,
            b_rows,
            sums,
        } = part;
        widest(Part::<T, true> {
            rows,
            a,
            b,
            b_rows,
            sums,
        });
    } else {
        widest(part);
    }
}

/// One part's product: `sums` (`m x columns`, row-major) `+= a x b` for `k` rows of `a`
/// (from `a[0]`, `a_rows` apart) and of `b` (its first `columns` from `b[0]`, rows `b_rows`
/// apart); `FUSED`: with fused multiply-adds.
struct Part<'a, T, const FUSED: bool> {
    rows: (usize, usize),
    a: (&'a [T], usize),
    b: &'a [T],
    b_rows: usize,
    sums: &'a mut [T],
}

impl<T: Float, const FUSED: bool> Vectorised for Part<'_, T, FUSED> {
    type Output = ();

    #[inline(always)]
    fn run(self) {
        let madd = |x: T, v: T, s: T| if FUSED { x.mul_add(v, s) } else { s + x * v };
        let Part {
            rows: (m, k),
            a: (a, a_rows),
            b,
            b_rows,
            sums,
        } = self;
        let columns = sums.len() / m;
        let line = |p: usize| &b[p * b_rows..][..columns];
        // Four rows of `b` a pass over the sums: a quarter of their loads and stores.
        let quads = k / 4 * 4;
        for p in (0..quads).step_by(4) {
            let (b0, b1, b2, b3) = (line(p), line(p + 1), line(p + 2), line(p + 3));
            for (i, row) in sums.chunks_exact_mut(columns).enumerate() {
                let x = &a[i * a_rows + p..][..4];
                let (x0, x1, x2, x3) = (x[0], x[1], x[2], x[3]);
                for ((((s, &v0), &v1), &v2), &v3) in row.iter_mut().zip(b0).zip(b1).zip(b2).zip(b3)
                {
                    *s = madd(x3, v3, madd(x2, v2, madd(x1, v1, madd(x0, v0, *s))));
                }
            }
        }
        for p in quads..k {
            let v = line(p);
            for (i, row) in sums.chunks_exact_mut(columns).enumerate() {
                let x = a[i * a_rows + p];
                for (s, &v) in row.iter_mut().zip(v) {
                    *s = madd(x, v, *s);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The product by its definition, in f64.
    fn definition(m: usize, n: usize, k: usize, a: &[f32], a_rows: usize, b: &[f32]) -> Vec<f64> {
        let mut out = vec![0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                out[i * n + j] = (0..k)
                    .map(|p| f64::from(a[i * a_rows + p]) * f64::from(b[p * n + j]))
                    .sum();
            }
        }
        out
    }

    /// `b` (`k x n` rows) in strips of `width`, the last padded with NaN, which must
    /// never be read into the product.
    fn in_strips(b: &[f32], k: usize, n: usize, width: usize) -> Vec<f32> {
        let strips = n.div_ceil(width);
        let mut packed = vec![f32::NAN; strips * k * width];
        for s in 0..strips {
            for p in 0..k {
                for j in 0..width.min(n - s * width) {
                    packed[(s * k + p) * width + j] = b[p * n + s * width + j];
                }
            }
        }
        packed
    }

    #[test]
    fn few_rows_match_the_definition() {
        let value = |i: usize| ((i * 7919 % 211) as f32 - 105.0) / 64.0;
        // Rows 1 to 8; `k` with and without a remainder of four; columns in one part,
        // several, and a last part narrower than a register; rows of `a` further apart
        // than `k`; `b` as rows and in strips (one padded).
        for (m, n, k, a_rows) in [
            (1, 5, 3, 3),
            (4, 40, 9, 11),
            (3, 300, 17, 17),
            (8, 97, 64, 70),
            (2, 600, 6, 6),
        ] {
            let a: Vec<f32> = (0..(m - 1) * a_rows + k).map(value).collect();
            let b: Vec<f32> = (0..k * n).map(|i| value(i + 13)).collect();
            let want = definition(m, n, k, &a, a_rows, &b);
            for width in [n, 32, 64] {
                let packed = in_strips(&b, k, n, width);
                let mut out = vec![f32::NAN; m * n];
                multiply((m, n, k), (&a, a_rows), (&packed, width), &mut out);
                for (i, (&got, &want)) in out.iter().zip(&want).enumerate() {
                    let tolerance = 1e-5 * (1.0 + want.abs());
                    assert!(
                        (f64::from(got) - want).abs() <= tolerance,
                        "m {m} n {n} k {k} width {width}: element {i} is {got}, want {want}"
                    );
                }
            }
        }
    }

    /// A dense layer at batch 1 to 8 through `matmul` (`few_rows_times_matrix`): weights
    /// contiguous, a column slice of wider weights (rows further apart than `n`), and the
    /// input rows a slice further into their buffer.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "2.5 million multiply-adds take minutes under Miri; the kernel's unsafe copy \
                  is covered by few_rows_match_the_definition"
    )]
    fn dense_layers_of_few_rows_match_the_definition() {
        use polytensor_core::{DataType, Tensor};

        let cpu = crate::CpuDevice::shared();
        let value = |i: usize| ((i * 6151 % 199) as f32 - 99.0) / 128.0;
        let (k, n) = (600, 520);
        for m in [1, 3, 8] {
            let x: Vec<f32> = (0..(m + 1) * k).map(value).collect();
            let w: Vec<f32> = (0..k * (n + 7)).map(|i| value(i + 5)).collect();
            let x = Tensor::from_slice(&x, [m + 1, k], &cpu)
                .unwrap()
                .slice(1..m + 1)
                .unwrap();
            let wide = Tensor::from_slice(&w, [k, n + 7], &cpu).unwrap();
            let rows = Tensor::from_slice(&w[..k * n], [k, n], &cpu).unwrap();
            for (b, apart) in [(rows, n), (wide.narrow(1, 7, n).unwrap(), n + 7)] {
                let got = x.matmul(&b).unwrap().cast(DataType::Double).unwrap();
                let got = got.to_vec::<f64>().unwrap();
                let a = x.contiguous().unwrap().to_vec::<f32>().unwrap();
                let columns = if apart == n { 0 } else { 7 };
                for i in 0..m {
                    for j in 0..n {
                        let want: f64 = (0..k)
                            .map(|p| {
                                f64::from(a[i * k + p]) * f64::from(w[p * apart + columns + j])
                            })
                            .sum();
                        let got = got[i * n + j];
                        assert!(
                            (got - want).abs() <= 1e-4 * (1.0 + want.abs()),
                            "m {m}, rows {apart} apart: [{i}, {j}] is {got}, want {want}"
                        );
                    }
                }
            }
        }
    }
}
