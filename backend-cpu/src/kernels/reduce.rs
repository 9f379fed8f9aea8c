//! Reductions over any set of axes. Float sums accumulate in f64, integer sums in i128
//! (wrapped to the dtype at the end, as wrapping addition would give), complex in f64 parts.

use num_complex::Complex;
use polytensor_core::plan::ReducedAxes;
use polytensor_core::{Element, OutView, ReduceOp, Result, Scalar, StridedRows, TensorView};

use super::{by_class, unsupported};
use crate::scalar::{maximum, minimum, FloatElem, IntElem, Real};
use crate::strided::{input, output};

/// The values of one reduced block, in row-major order over the reduced axes.
pub(crate) struct BlockValues<'a, T> {
    data: &'a [T],
    rows: StridedRows<1>,
    len: usize,
    step: isize,
    cursor: isize,
    left: usize,
}

impl<'a, T> BlockValues<'a, T> {
    fn new(data: &'a [T], dims: &[usize], strides: &[isize], base: isize) -> Self {
        let rows = StridedRows::new(dims, [strides], [base]);
        let (len, [step]) = (rows.row_len(), rows.inner_strides());
        Self {
            data,
            rows,
            len,
            step,
            cursor: 0,
            left: 0,
        }
    }
}

impl<T: Copy> Iterator for BlockValues<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        while self.left == 0 {
            let [start] = self.rows.next()?;
            self.cursor = start;
            self.left = self.len;
        }
        let value = self.data[self.cursor as usize];
        self.cursor += self.step;
        self.left -= 1;
        Some(value)
    }
}

/// Call `f` on each reduced block, in the row-major order of the kept dims, and store the
/// results in `out`.
fn reduce_blocks<T: Element, O: Element>(
    x: &TensorView<'_>,
    axes: &[usize],
    out: &mut OutView<'_>,
    mut f: impl FnMut(BlockValues<'_, T>) -> O,
) -> Result<()> {
    let layout = x.layout();
    let ReducedAxes {
        kept,
        kept_strides,
        reduced: red,
        reduced_strides: red_strides,
    } = ReducedAxes::split(layout, axes, out.layout().num_elements())?;
    let data = input::<T>(x)?;
    let dst = output::<O>(out)?;
    let outer = StridedRows::new(&kept, [&kept_strides], [layout.offset() as isize]);
    let (len, [step]) = (outer.row_len(), outer.inner_strides());
    let mut slots = dst.iter_mut();
    for [start] in outer {
        for i in 0..len {
            let block = BlockValues::new(data, &red, &red_strides, start + i as isize * step);
            if let Some(slot) = slots.next() {
                *slot = f(block);
            }
        }
    }
    Ok(())
}

pub(crate) fn reduce(
    op: ReduceOp,
    x: &TensorView<'_>,
    axes: &[usize],
    out: &mut OutView<'_>,
) -> Result<()> {
    by_class!(x.dtype(),
        float F => float_reduce::<F>(op, x, axes, out),
        int I => int_reduce::<I>(op, x, axes, out),
        complex R => complex_reduce::<R>(op, x, axes, out),
        bool => Err(unsupported(op, x)),
        else => Err(unsupported(op, x)),
    )
}

/// Index of the first extreme value (`better(candidate, best)`); a NaN wins at once.
fn arg_extreme<T: PartialOrd + Copy>(
    values: impl Iterator<Item = T>,
    better: impl Fn(&T, &T) -> bool,
) -> i64 {
    let mut best: Option<(usize, T)> = None;
    for (i, v) in values.enumerate() {
        #[allow(clippy::eq_op)]
        if v != v {
            return i as i64;
        }
        match best {
            Some((_, b)) if !better(&v, &b) => {}
            _ => best = Some((i, v)),
        }
    }
    best.map_or(0, |(i, _)| i as i64)
}

fn arg_reduce<T: Element + PartialOrd>(
    op: ReduceOp,
    x: &TensorView<'_>,
    axes: &[usize],
    out: &mut OutView<'_>,
) -> Result<()> {
    match op {
        ReduceOp::ArgMax => reduce_blocks(x, axes, out, |v: BlockValues<'_, T>| {
            arg_extreme(v, |a, b| a > b)
        }),
        ReduceOp::ArgMin => reduce_blocks(x, axes, out, |v: BlockValues<'_, T>| {
            arg_extreme(v, |a, b| a < b)
        }),
        _ => Err(unsupported(op, x)),
    }
}

fn float_reduce<T: FloatElem>(
    op: ReduceOp,
    x: &TensorView<'_>,
    axes: &[usize],
    out: &mut OutView<'_>,
) -> Result<()> {
    if let Some(done) = super::reduce_fast::try_sum::<T>(op, x, axes, out) {
        return done;
    }
    if let Some(done) = super::reduce_fast::try_extreme_f32(op, x, axes, out) {
        return done;
    }
    let wide = |v: T| v.widen().to_f64();
    let narrow = |v: f64| T::from_scalar(Scalar::F64(v));
    match op {
        ReduceOp::Sum => reduce_blocks(x, axes, out, |v: BlockValues<'_, T>| {
            narrow(v.map(wide).sum())
        }),
        ReduceOp::Prod => reduce_blocks(x, axes, out, |v: BlockValues<'_, T>| {
            narrow(v.map(wide).product())
        }),
        ReduceOp::Mean => reduce_blocks(x, axes, out, |v: BlockValues<'_, T>| {
            let (sum, count) = v.fold((0.0, 0usize), |(s, n), x| (s + wide(x), n + 1));
            narrow(sum / count as f64)
        }),
        ReduceOp::Max => reduce_blocks(x, axes, out, |v: BlockValues<'_, T>| {
            narrow(v.map(wide).fold(f64::NEG_INFINITY, maximum))
        }),
        ReduceOp::Min => reduce_blocks(x, axes, out, |v: BlockValues<'_, T>| {
            narrow(v.map(wide).fold(f64::INFINITY, minimum))
        }),
        ReduceOp::ArgMax | ReduceOp::ArgMin => arg_reduce::<T>(op, x, axes, out),
    }
}

fn int_reduce<T: IntElem>(
    op: ReduceOp,
    x: &TensorView<'_>,
    axes: &[usize],
    out: &mut OutView<'_>,
) -> Result<()> {
    let sum = |v: BlockValues<'_, T>| {
        v.fold((0i128, 0usize), |(s, n), x| {
            (s.wrapping_add(x.to_i128()), n + 1)
        })
    };
    match op {
        ReduceOp::Sum => reduce_blocks(x, axes, out, |v: BlockValues<'_, T>| {
            T::from_i128_wrapping(sum(v).0)
        }),
        ReduceOp::Prod => reduce_blocks(x, axes, out, |v: BlockValues<'_, T>| {
            T::from_i128_wrapping(v.fold(1i128, |p, x| p.wrapping_mul(x.to_i128())))
        }),
        ReduceOp::Mean => reduce_blocks(x, axes, out, |v: BlockValues<'_, T>| match sum(v) {
            (_, 0) => T::ZERO,
            (s, n) => T::from_i128_wrapping(s / n as i128),
        }),
        ReduceOp::Max => reduce_blocks(x, axes, out, |v: BlockValues<'_, T>| {
            v.fold(T::MIN, Ord::max)
        }),
        ReduceOp::Min => reduce_blocks(x, axes, out, |v: BlockValues<'_, T>| {
            v.fold(T::from_scalar(Scalar::F64(f64::INFINITY)), Ord::min)
        }),
        ReduceOp::ArgMax | ReduceOp::ArgMin => arg_reduce::<T>(op, x, axes, out),
    }
}

fn complex_reduce<R>(
    op: ReduceOp,
    x: &TensorView<'_>,
    axes: &[usize],
    out: &mut OutView<'_>,
) -> Result<()>
where
    R: Element + Real,
    Complex<R>: Element,
{
    let wide = |z: Complex<R>| Complex::new(z.re.to_f64(), z.im.to_f64());
    let narrow = |z: Complex<f64>| Complex::new(R::from_f64(z.re), R::from_f64(z.im));
    match op {
        ReduceOp::Sum => reduce_blocks(x, axes, out, |v: BlockValues<'_, Complex<R>>| {
            narrow(v.map(wide).sum())
        }),
        ReduceOp::Prod => reduce_blocks(x, axes, out, |v: BlockValues<'_, Complex<R>>| {
            narrow(v.map(wide).product())
        }),
        ReduceOp::Mean => reduce_blocks(x, axes, out, |v: BlockValues<'_, Complex<R>>| {
            let (sum, count) = v.fold((Complex::new(0.0, 0.0), 0usize), |(s, n), z| {
                (s + wide(z), n + 1)
            });
            narrow(sum / count as f64)
        }),
        _ => Err(unsupported(op, x)),
    }
}
