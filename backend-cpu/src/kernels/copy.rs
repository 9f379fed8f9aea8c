//! Materialising strided layouts (byte-generic, so every fixed-size dtype works) and host copies.

use polytensor_core::{Error, OutView, Result, TensorView};

use crate::strided::{check_shapes, for_each_row, rows_beside_output, SharedOut};

fn host_bytes<'a>(view: &TensorView<'a>) -> Result<&'a [u8]> {
    view.host_bytes().ok_or_else(|| {
        Error::invalid(format!(
            "the CPU device cannot read {:?}: not host memory",
            view.buffer()
        ))
    })
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
