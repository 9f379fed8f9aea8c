//! Casts between every pair of computable dtypes, with the semantics of
//! [`polytensor_core::Element::cast_from`], and to and from the float8 formats (through
//! `f64` and `f32`, which hold every value exactly, so each cast rounds once). There are
//! hundreds of pairs, so each is only its contiguous loop, run by the small driver
//! `map1_runs`.

use half::slice::HalfFloatSliceExt;
use polytensor_core::float8::Float8;
use polytensor_core::Error;
use polytensor_core::{dispatch_dtype, DataType, Element, OutView, Result, TensorView};

use super::unsupported;
use crate::strided::map1_runs;

pub(crate) fn cast(x: &TensorView<'_>, out: &mut OutView<'_>) -> Result<()> {
    let to = out.dtype();
    match (Float8::of(x.dtype()), Float8::of(to)) {
        (None, None) => {}
        (Some(from), Some(to)) => {
            return map1_runs(x, out, &|xs: &[u8], os: &mut [u8]| {
                os.iter_mut()
                    .zip(xs)
                    .for_each(|(o, &v)| *o = to.encode(from.decode(v) as f64))
            })
        }
        (Some(from), None) => {
            return dispatch_dtype!(to,
                O => map1_runs(x, out, &|xs: &[u8], os: &mut [O]| {
                    os.iter_mut().zip(xs).for_each(|(o, &v)| *o = O::cast_from(from.decode(v)))
                }),
                _ => Err(Error::unsupported("cast", to, x.buffer().device().name())))
        }
        (None, Some(to)) => {
            return dispatch_dtype!(x.dtype(),
                A => map1_runs(x, out, &|xs: &[A], os: &mut [u8]| {
                    os.iter_mut().zip(xs).for_each(|(o, &v)| *o = to.encode(f64::cast_from(v)))
                }),
                _ => Err(unsupported("cast", x)))
        }
    }
    // f32 to bf16, the mixed-precision pass's rounding of weights: `half`'s slice
    // conversion, the same bits as `cast_from` (through f64, which holds every f32 exactly)
    // without the detour.
    if (x.dtype(), to) == (DataType::Float, DataType::BFloat16) {
        return map1_runs(x, out, &|xs: &[f32], os: &mut [half::bf16]| {
            os.convert_from_f32_slice(xs)
        });
    }
    dispatch_dtype!(x.dtype(),
        A => dispatch_dtype!(to,
            O => map1_runs(x, out, &|xs: &[A], os: &mut [O]| {
                os.iter_mut().zip(xs).for_each(|(o, &v)| *o = O::cast_from(v))
            }),
            _ => Err(Error::unsupported("cast", to, x.buffer().device().name()))),
        _ => Err(unsupported("cast", x)))
}
