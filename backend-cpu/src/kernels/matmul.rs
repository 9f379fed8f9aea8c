//! Batched matmul over strided operands: `[batch.., m, k] x [batch.., k, n]`.
//!
//! A straightforward i-k-j loop with a row accumulator in a wider type (f32 for f16 and
//! bf16, wrapping for integers). Correct for every layout; speed is the business of a
//! tuned GEMM.

use num_complex::Complex;
use tensor_core::layout::contiguous_strides;
use tensor_core::{Element, Error, OutView, Result, StridedRows, TensorView};

use super::unsupported;
use crate::scalar::{FloatElem, IntElem};
use crate::strided::{input, output};

/// An element type matmul runs on, with its accumulator.
pub(crate) trait MatmulElem: Element {
    type Acc: Copy + std::ops::Add<Output = Self::Acc>;
    fn zero() -> Self::Acc;
    fn product(a: Self, b: Self) -> Self::Acc;
    fn finish(acc: Self::Acc) -> Self;
}

macro_rules! float_matmul {
    ($($t:ty),*) => {$(
        impl MatmulElem for $t {
            type Acc = <$t as FloatElem>::Compute;
            fn zero() -> Self::Acc { 0.0 }
            #[inline] fn product(a: Self, b: Self) -> Self::Acc { a.widen() * b.widen() }
            #[inline] fn finish(acc: Self::Acc) -> Self { <$t>::narrow(acc) }
        }
    )*};
}
float_matmul!(f32, f64, half::f16, half::bf16);

/// Integer accumulation wraps, as integer add and mul do.
#[derive(Clone, Copy)]
pub(crate) struct Wrapping<T>(T);

impl<T: IntElem> std::ops::Add for Wrapping<T> {
    type Output = Self;
    fn add(self, other: Self) -> Self {
        Wrapping(self.0.wrapping_add(other.0))
    }
}

macro_rules! int_matmul {
    ($($t:ty),*) => {$(
        impl MatmulElem for $t {
            type Acc = Wrapping<$t>;
            fn zero() -> Self::Acc { Wrapping(0) }
            #[inline] fn product(a: Self, b: Self) -> Self::Acc { Wrapping(a.wrapping_mul(b)) }
            #[inline] fn finish(acc: Self::Acc) -> Self { acc.0 }
        }
    )*};
}
int_matmul!(i32, i64);

macro_rules! complex_matmul {
    ($($r:ty),*) => {$(
        impl MatmulElem for Complex<$r> {
            type Acc = Complex<$r>;
            fn zero() -> Self::Acc { Complex::new(0.0, 0.0) }
            #[inline] fn product(a: Self, b: Self) -> Self::Acc { a * b }
            #[inline] fn finish(acc: Self::Acc) -> Self { acc }
        }
    )*};
}
complex_matmul!(f32, f64);

pub(crate) fn matmul(a: &TensorView<'_>, b: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
    use tensor_core::DataType as D;
    match a.dtype() {
        D::Float => matmul_typed::<f32>(a, b, out),
        D::Double => matmul_typed::<f64>(a, b, out),
        D::Half => matmul_typed::<half::f16>(a, b, out),
        D::BFloat16 => matmul_typed::<half::bf16>(a, b, out),
        D::Int32 => matmul_typed::<i32>(a, b, out),
        D::Int64 => matmul_typed::<i64>(a, b, out),
        D::Complex64 => matmul_typed::<Complex<f32>>(a, b, out),
        D::Complex128 => matmul_typed::<Complex<f64>>(a, b, out),
        _ => Err(unsupported("matmul", a)),
    }
}

/// The shape `[batch.., rows, cols]` split into batch dims and the matrix dims.
fn split(shape: &[usize]) -> Result<(&[usize], usize, usize)> {
    match shape {
        [batch @ .., rows, cols] => Ok((batch, *rows, *cols)),
        _ => Err(Error::shape(
            "matmul",
            format!("operand of rank {} (needs >= 2)", shape.len()),
        )),
    }
}

fn matmul_typed<T: MatmulElem>(
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
) -> Result<()> {
    let (la, lb, lo) = (a.layout(), b.layout(), out.layout());
    let (a_dims, b_dims, o_dims) = (la.shape().dims(), lb.shape().dims(), lo.shape().dims());
    let ((batch, m, k), (b_batch, k2, n), (o_batch, m2, n2)) =
        (split(&a_dims)?, split(&b_dims)?, split(&o_dims)?);
    if batch != b_batch || batch != o_batch || k != k2 || m != m2 || n != n2 {
        return Err(Error::shape(
            "matmul",
            format!(
                "operands {} x {} for output {}",
                la.shape(),
                lb.shape(),
                lo.shape()
            ),
        ));
    }
    let (sa, sb) = (input::<T>(a)?, input::<T>(b)?);
    let o_strides = contiguous_strides(lo.shape());
    let dst = output::<T>(out)?;
    let r = batch.len();
    let (a_st, b_st) = (la.strides(), lb.strides());
    let (am, ak, bk, bn) = (a_st[r], a_st[r + 1], b_st[r], b_st[r + 1]);
    let at = |base: isize, i: usize, s: isize| (base + i as isize * s) as usize;
    let mut acc = vec![T::zero(); n];
    let batches = StridedRows::new(
        batch,
        [&a_st[..r], &b_st[..r], &o_strides[..r]],
        [la.offset() as isize, lb.offset() as isize, 0],
    );
    let (row_len, [ia, ib, io]) = (batches.row_len(), batches.inner_strides());
    for [pa, pb, po] in batches {
        for bi in 0..row_len {
            let (base_a, base_b, base_o) = (
                pa + bi as isize * ia,
                pb + bi as isize * ib,
                po + bi as isize * io,
            );
            for i in 0..m {
                acc.fill(T::zero());
                let row_a = base_a + i as isize * am;
                for p in 0..k {
                    let x = sa[at(row_a, p, ak)];
                    let row_b = base_b + p as isize * bk;
                    for (j, slot) in acc.iter_mut().enumerate() {
                        *slot = *slot + T::product(x, sb[at(row_b, j, bn)]);
                    }
                }
                let row_o = at(base_o, i, n as isize);
                for (o, &v) in dst[row_o..row_o + n].iter_mut().zip(&acc) {
                    *o = T::finish(v);
                }
            }
        }
    }
    Ok(())
}
