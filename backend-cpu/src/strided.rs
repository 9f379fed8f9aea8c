//! The strided loops every CPU kernel shares: map one, two or three strided inputs into a
//! contiguous output, row by row, with a straight-line inner loop when a row is contiguous.

use tensor_core::layout::contiguous_strides;
use tensor_core::{Element, Error, Layout, OutView, Result, StridedRows, TensorView};

/// The whole host buffer of an input, as `T`.
pub(crate) fn input<'a, T: Element>(view: &TensorView<'a>) -> Result<&'a [T]> {
    view.host_slice::<T>().ok_or_else(|| {
        Error::invalid(format!(
            "the CPU device cannot read a {} operand in {:?} (not host memory, wrong dtype, or misaligned)",
            view.dtype(),
            view.buffer()
        ))
    })
}

/// The elements of an output, as `T`.
pub(crate) fn output<'o, T: Element>(out: &'o mut OutView<'_>) -> Result<&'o mut [T]> {
    let dtype = out.dtype();
    out.host_slice_mut::<T>().ok_or_else(|| {
        Error::invalid(format!(
            "the CPU device cannot write a {dtype} output (not host memory, wrong dtype, or misaligned)"
        ))
    })
}

/// Check that every input has the output's shape (kernels receive broadcast operands).
pub(crate) fn check_shapes(op: &'static str, inputs: &[&Layout], out: &Layout) -> Result<()> {
    match inputs.iter().find(|l| l.shape() != out.shape()) {
        None => Ok(()),
        Some(l) => Err(Error::shape(
            op,
            format!(
                "operand of shape {} for an output of shape {}",
                l.shape(),
                out.shape()
            ),
        )),
    }
}

/// The output's element positions (row-major, from 0) as a layout to walk beside inputs.
fn out_walk(out: &Layout) -> (Vec<usize>, tensor_core::layout::Strides) {
    (out.shape().dims().to_vec(), contiguous_strides(out.shape()))
}

/// Rows of one strided input walked beside a contiguous output of the same shape:
/// `[input position, output position]` per row.
pub(crate) fn rows_beside_output(x: &Layout, out: &Layout) -> StridedRows<2> {
    let (dims, out_strides) = out_walk(out);
    StridedRows::new(&dims, [x.strides(), &out_strides], [x.offset() as isize, 0])
}

#[inline]
fn at(base: isize, i: usize, stride: isize) -> usize {
    (base + i as isize * stride) as usize
}

/// `out[i] = f(x[i])`.
pub(crate) fn map1<A: Element, O: Element>(
    x: &TensorView<'_>,
    out: &mut OutView<'_>,
    f: impl Fn(A) -> O,
) -> Result<()> {
    check_shapes("map", &[x.layout()], out.layout())?;
    let (src, rows) = (input::<A>(x)?, rows_beside_output(x.layout(), out.layout()));
    let dst = output::<O>(out)?;
    let (len, [sx, so]) = (rows.row_len(), rows.inner_strides());
    for [px, po] in rows {
        let (px, po) = (px as usize, po as usize);
        if sx == 1 && so == 1 {
            for (o, &a) in dst[po..po + len].iter_mut().zip(&src[px..px + len]) {
                *o = f(a);
            }
        } else {
            for i in 0..len {
                dst[at(po as isize, i, so)] = f(src[at(px as isize, i, sx)]);
            }
        }
    }
    Ok(())
}

/// `out[i] = f(a[i], b[i])`.
pub(crate) fn map2<A: Element, B: Element, O: Element>(
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    out: &mut OutView<'_>,
    f: impl Fn(A, B) -> O,
) -> Result<()> {
    check_shapes("map", &[a.layout(), b.layout()], out.layout())?;
    let (sa, sb, (dims, out_strides)) = (input::<A>(a)?, input::<B>(b)?, out_walk(out.layout()));
    let dst = output::<O>(out)?;
    let rows = StridedRows::new(
        &dims,
        [a.layout().strides(), b.layout().strides(), &out_strides],
        [
            a.layout().offset() as isize,
            b.layout().offset() as isize,
            0,
        ],
    );
    let (len, [ia, ib, io]) = (rows.row_len(), rows.inner_strides());
    for [pa, pb, po] in rows {
        if ia == 1 && ib == 1 && io == 1 {
            let (pa, pb, po) = (pa as usize, pb as usize, po as usize);
            let dst = &mut dst[po..po + len];
            for ((o, &x), &y) in dst.iter_mut().zip(&sa[pa..pa + len]).zip(&sb[pb..pb + len]) {
                *o = f(x, y);
            }
        } else if ia == 1 && ib == 0 && io == 1 {
            let (pa, po, y) = (pa as usize, po as usize, sb[pb as usize]);
            for (o, &x) in dst[po..po + len].iter_mut().zip(&sa[pa..pa + len]) {
                *o = f(x, y);
            }
        } else {
            for i in 0..len {
                dst[at(po, i, io)] = f(sa[at(pa, i, ia)], sb[at(pb, i, ib)]);
            }
        }
    }
    Ok(())
}

/// `out[i] = f(a[i], b[i], c[i])`.
pub(crate) fn map3<A: Element, B: Element, C: Element, O: Element>(
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    c: &TensorView<'_>,
    out: &mut OutView<'_>,
    f: impl Fn(A, B, C) -> O,
) -> Result<()> {
    check_shapes("map", &[a.layout(), b.layout(), c.layout()], out.layout())?;
    let (sa, sb, sc) = (input::<A>(a)?, input::<B>(b)?, input::<C>(c)?);
    let (dims, out_strides) = out_walk(out.layout());
    let dst = output::<O>(out)?;
    let rows = StridedRows::new(
        &dims,
        [
            a.layout().strides(),
            b.layout().strides(),
            c.layout().strides(),
            &out_strides,
        ],
        [
            a.layout().offset() as isize,
            b.layout().offset() as isize,
            c.layout().offset() as isize,
            0,
        ],
    );
    let (len, [ia, ib, ic, io]) = (rows.row_len(), rows.inner_strides());
    for [pa, pb, pc, po] in rows {
        for i in 0..len {
            dst[at(po, i, io)] = f(sa[at(pa, i, ia)], sb[at(pb, i, ib)], sc[at(pc, i, ic)]);
        }
    }
    Ok(())
}

/// `out[i] = f(i)` over the output's elements in row-major order.
pub(crate) fn generate<O: Element>(out: &mut OutView<'_>, f: impl Fn(usize) -> O) -> Result<()> {
    for (i, o) in output::<O>(out)?.iter_mut().enumerate() {
        *o = f(i);
    }
    Ok(())
}

/// Buffer positions of a layout's elements in row-major order.
pub(crate) fn positions(layout: &Layout) -> impl Iterator<Item = usize> {
    let rows = StridedRows::new(
        &layout.shape().dims(),
        [layout.strides()],
        [layout.offset() as isize],
    );
    let (len, [step]) = (rows.row_len(), rows.inner_strides());
    rows.flat_map(move |[start]| (0..len as isize).map(move |i| (start + i * step) as usize))
}
