//! Casts between every pair of computable dtypes, with the semantics of
//! [`tensor_core::Element::cast_from`].

use tensor_core::{dispatch_dtype, Element, OutView, Result, TensorView};

use super::unsupported;
use crate::strided::map1;

pub(crate) fn cast(x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
    let to = out.dtype();
    dispatch_dtype!(x.dtype(),
        A => dispatch_dtype!(to,
            O => map1(x, out, |v: A| O::cast_from(v)),
            _ => Err(super::unsupported_dtype("cast", to, x.buffer().device().name()))),
        _ => Err(unsupported("cast", x)))
}
