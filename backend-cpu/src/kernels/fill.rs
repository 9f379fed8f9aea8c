//! `fill` and `arange`.

use tensor_core::{dispatch_dtype, Element, OutView, Result, Scalar};

use super::unsupported_dtype;
use crate::strided::generate;

pub(crate) fn fill(value: Scalar, out: &mut OutView<'_>) -> Result<()> {
    let dtype = out.dtype();
    dispatch_dtype!(dtype,
        T => {
            let value = T::from_scalar(value);
            generate(out, |_| value)
        },
        _ => Err(unsupported_dtype("fill", dtype, "cpu")))
}

/// Element `i` of `arange(start, .., step)`: exact (i128) for integer arguments.
pub(crate) fn arange_value(start: Scalar, step: Scalar, i: usize) -> Scalar {
    let int = |s: Scalar| match s {
        Scalar::I64(v) => Some(i128::from(v)),
        Scalar::U64(v) => Some(i128::from(v)),
        _ => None,
    };
    match (int(start), int(step)) {
        (Some(a), Some(s)) => {
            let v = a.wrapping_add((i as i128).wrapping_mul(s));
            match (i64::try_from(v), u64::try_from(v)) {
                (Ok(v), _) => Scalar::I64(v),
                (_, Ok(v)) => Scalar::U64(v),
                _ => Scalar::I64(v as i64),
            }
        }
        _ => Scalar::F64(start.to_f64() + i as f64 * step.to_f64()),
    }
}

pub(crate) fn arange(start: Scalar, step: Scalar, out: &mut OutView<'_>) -> Result<()> {
    let dtype = out.dtype();
    dispatch_dtype!(dtype,
        T => generate(out, |i| T::from_scalar(arange_value(start, step, i))),
        _ => Err(unsupported_dtype("arange", dtype, "cpu")))
}
