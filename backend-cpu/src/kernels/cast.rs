//! Casts between every pair of computable dtypes, with the semantics of
//! [`polytensor_core::Element::cast_from`]. There are hundreds of pairs, so each is only its
//! contiguous loop, run by the small driver `map1_runs`.

use polytensor_core::{dispatch_dtype, Element, OutView, Result, TensorView};

use super::unsupported;
use crate::strided::map1_runs;

pub(crate) fn cast(x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
    let to = out.dtype();
    dispatch_dtype!(x.dtype(),
        A => dispatch_dtype!(to,
            O => map1_runs(x, out, &|xs: &[A], os: &mut [O]| {
                os.iter_mut().zip(xs).for_each(|(o, &v)| *o = O::cast_from(v))
            }),
            _ => Err(super::unsupported_dtype("cast", to, x.buffer().device().name()))),
        _ => Err(unsupported("cast", x)))
}
