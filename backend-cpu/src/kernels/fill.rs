//! `fill` and `arange`.

use polytensor_core::{dispatch_dtype, Element, Error, OutView, Result, Scalar};

use crate::strided::generate;

pub(crate) fn fill(value: Scalar, out: &mut OutView<'_>) -> Result<()> {
    let dtype = out.dtype();
    dispatch_dtype!(dtype,
        T => {
            let value = T::from_scalar(value);
            generate(out, |_| value)
        },
        _ => Err(Error::unsupported("fill", dtype, "cpu")))
}

pub(crate) fn arange(start: Scalar, step: Scalar, out: &mut OutView<'_>) -> Result<()> {
    let dtype = out.dtype();
    dispatch_dtype!(dtype,
        T => generate(out, |i| T::from_scalar(polytensor_core::ops::arange_value(start, step, i))),
        _ => Err(Error::unsupported("arange", dtype, "cpu")))
}
