//! Materialising strided layouts (byte-generic, so every fixed-size dtype works) and host copies.

use polytensor_core::{Error, OutView, Result, TensorView};

use rayon::prelude::*;

use crate::strided::{
    check_shapes, for_each_row, rows_beside_output, SharedOut, PARALLEL_MIN_ELEMENTS,
};

fn host_bytes<'a>(view: &TensorView<'a>) -> Result<&'a [u8]> {
    view.host_bytes().ok_or_else(|| {
        Error::invalid(format!(
            "the CPU device cannot read {:?}: not host memory",
            view.buffer()
        ))
    })
}

/// The bytes of a contiguous view's elements.
fn element_bytes<'a>(view: &TensorView<'a>) -> Result<&'a [u8]> {
    let size = view.dtype().size();
    let start = view.layout().offset() * size;
    let len = view.layout().num_elements() * size;
    host_bytes(view)?
        .get(start..start + len)
        .ok_or_else(|| Error::invalid("a view's elements lie outside its buffer"))
}

fn out_bytes<'o>(out: &'o mut OutView<'_>) -> Result<&'o mut [u8]> {
    out.host_bytes_mut()
        .ok_or_else(|| Error::invalid("the CPU device cannot write an output outside host memory"))
}

/// Copy `x` (any layout) into contiguous `out`.
pub(crate) fn copy(x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
    if x.dtype() != out.dtype() {
        return Err(Error::DTypeMismatch {
            op: "copy",
            expected: out.dtype().to_string(),
            found: x.dtype(),
        });
    }
    check_shapes("copy", &[x.layout()], out.layout())?;
    let size = x.dtype().size();
    let (src, rows) = (host_bytes(x)?, rows_beside_output(x.layout(), out.layout()));
    let [sx, so] = rows.inner_strides();
    let dst = SharedOut::new(out_bytes(out)?);
    for_each_row(&rows, |[px, po], len| {
        if sx == 1 && so == 1 {
            let (px, po) = (px as usize * size, po as usize * size);
            // SAFETY: each work item owns its output run (see `for_each_row`).
            unsafe { dst.run(po, len * size) }.copy_from_slice(&src[px..px + len * size]);
        } else {
            for i in 0..len as isize {
                let (from, to) = ((px + i * sx) as usize * size, (po + i * so) as usize * size);
                // SAFETY: each work item owns its output elements (see `for_each_row`).
                unsafe { dst.run(to, size) }.copy_from_slice(&src[from..from + size]);
            }
        }
    });
    Ok(())
}

/// `Device::concat`: each piece's outer rows copied to their places in `out`, rows split
/// across threads when the output is large. `false` where a piece is not contiguous.
pub(crate) fn concat(
    pieces: &[TensorView<'_>],
    axis: usize,
    out: &mut OutView<'_>,
) -> Result<bool> {
    if pieces.iter().any(|p| !p.layout().is_contiguous()) {
        return Ok(false);
    }
    let size = out.dtype().size();
    let dims = out.layout().shape().dims();
    let outer: usize = dims[..axis].iter().product();
    // Each piece's bytes per outer row, and where its bytes start.
    let mut runs = Vec::with_capacity(pieces.len());
    for piece in pieces {
        if piece.dtype() != out.dtype() {
            return Err(Error::DTypeMismatch {
                op: "concat",
                expected: out.dtype().to_string(),
                found: piece.dtype(),
            });
        }
        let src = element_bytes(piece)?;
        runs.push((src, src.len() / outer.max(1)));
    }
    let row: usize = runs.iter().map(|&(_, run)| run).sum();
    let dst = out_bytes(out)?;
    if row == 0 || outer == 0 {
        return Ok(true);
    }
    if dst.len() != outer * row {
        return Err(Error::invalid(format!(
            "concat: pieces of {} bytes for an output of {} bytes",
            outer * row,
            dst.len()
        )));
    }
    let copy_rows = |first: usize, rows: &mut [u8]| {
        for (i, out_row) in rows.chunks_exact_mut(row).enumerate() {
            let r = first + i;
            let mut at = 0;
            for &(src, run) in &runs {
                out_row[at..at + run].copy_from_slice(&src[r * run..(r + 1) * run]);
                at += run;
            }
        }
    };
    // About 256 KiB per task: enough to pay for the dispatch.
    let rows_per_task = ((256 << 10) / row).max(1);
    if dst.len() / size >= PARALLEL_MIN_ELEMENTS && outer > rows_per_task {
        dst.par_chunks_mut(rows_per_task * row)
            .enumerate()
            .for_each(|(t, rows)| copy_rows(t * rows_per_task, rows));
    } else {
        copy_rows(0, dst);
    }
    Ok(true)
}

/// `Device::gather_rows`: each picked row's bytes copied to its place, outer blocks (or,
/// with one, the rows) split across threads when the output is large. `false` where
/// `params` is not contiguous.
pub(crate) fn gather_rows(
    params: &TensorView<'_>,
    outer: usize,
    rows: &[usize],
    out: &mut OutView<'_>,
) -> Result<bool> {
    let pod = params.dtype() != polytensor_core::DataType::String;
    if !pod || !params.layout().is_contiguous() || params.dtype() != out.dtype() {
        return Ok(false);
    }
    let size = params.dtype().size();
    let src = element_bytes(params)?;
    let total = src.len();
    let dst = out_bytes(out)?;
    if dst.is_empty() || outer == 0 || rows.is_empty() {
        return Ok(true);
    }
    // The bytes of one outer block of params, and of one row.
    let block = total / outer;
    let run = dst.len() / (outer * rows.len());
    let limit = block.checked_div(run).unwrap_or(0);
    if dst.len() != outer * rows.len() * run || rows.iter().any(|&r| r >= limit) {
        return Err(Error::invalid(format!(
            "gather: {} rows of {run} bytes into {} bytes from blocks of {block}",
            rows.len(),
            dst.len()
        )));
    }
    let copy_rows = |from: &[u8], rows: &[usize], out: &mut [u8]| {
        for (&r, piece) in rows.iter().zip(out.chunks_exact_mut(run)) {
            piece.copy_from_slice(&from[r * run..(r + 1) * run]);
        }
    };
    let out_block = rows.len() * run;
    if dst.len() / size < PARALLEL_MIN_ELEMENTS {
        for (o, out) in dst.chunks_exact_mut(out_block).enumerate() {
            copy_rows(&src[o * block..(o + 1) * block], rows, out);
        }
    } else if outer > 1 {
        dst.par_chunks_mut(out_block)
            .enumerate()
            .for_each(|(o, out)| copy_rows(&src[o * block..(o + 1) * block], rows, out));
    } else {
        // One block (an embedding lookup): its rows split across threads.
        let per_task = ((64 << 10) / run).max(1);
        dst.par_chunks_mut(per_task * run)
            .zip(rows.par_chunks(per_task))
            .for_each(|(out, rows)| copy_rows(src, rows, out));
    }
    Ok(true)
}

/// Copy host bytes into `out`.
pub(crate) fn copy_from_host(src: &[u8], out: &mut OutView<'_>) -> Result<()> {
    let dst = out_bytes(out)?;
    if dst.len() != src.len() {
        return Err(Error::invalid(format!(
            "copy_from_host of {} bytes into {} bytes",
            src.len(),
            dst.len()
        )));
    }
    dst.copy_from_slice(src);
    Ok(())
}

/// Copy the elements of contiguous `src` into host bytes.
pub(crate) fn copy_to_host(src: &TensorView<'_>, dst: &mut [u8]) -> Result<()> {
    let range = src.host_copy_range(dst.len())?;
    if range.is_empty() {
        return Ok(());
    }
    dst.copy_from_slice(&host_bytes(src)?[range]);
    Ok(())
}
