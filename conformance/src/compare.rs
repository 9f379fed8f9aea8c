//! Comparing a device's results with the reference, element by element, within each op's
//! tolerance ([`crate::tolerance`]).

use polytensor_core::device::FloatSemantics;
use polytensor_core::dtype::DataType;
use polytensor_core::element::Scalar;

use crate::cases::Case;
use crate::data;
use crate::reference::Expected;
use crate::report::fail;
use crate::report::Outcome;
use crate::tolerance::{self, Tolerance};

/// Compare results with the reference, within the tolerance of the case's op on a device
/// of `semantics`; the outcome names the first bad element.
pub(crate) fn compare(
    case: &Case,
    out_dtype: DataType,
    got: &[Scalar],
    want: &[Expected],
    semantics: FloatSemantics,
) -> Outcome {
    compare_elements(
        out_dtype,
        tolerance::declared(case.op, case.dtype, semantics),
        got,
        want,
    )
}

/// [`check`] of every element of `got` (of dtype `out_dtype`) against `want` under `tol`;
/// the outcome names the first bad element.
pub(crate) fn compare_elements(
    out_dtype: DataType,
    tol: Tolerance,
    got: &[Scalar],
    want: &[Expected],
) -> Outcome {
    if got.len() != want.len() {
        return fail(&format!("{} elements, expected {}", got.len(), want.len()));
    }
    let mut max_error = 0.0f64;
    for (i, (&g, w)) in got.iter().zip(want).enumerate() {
        let (ok, error) = check(out_dtype, tol, g, w);
        max_error = max_error.max(error);
        if !ok {
            return Outcome::Fail {
                max_error: error,
                message: if out_dtype.is_float() || out_dtype.is_complex() {
                    format!("element {i}: got {}, expected {} (error {error:.3} ulp, tolerance {tol:?})", show(g), show(w.value))
                } else {
                    format!("element {i}: got {}, expected {}", show(g), show(w.value))
                },
            };
        }
    }
    Outcome::Pass { max_error }
}

fn show(value: Scalar) -> String {
    match value {
        Scalar::F64(v) => format!("{v:e}"),
        Scalar::C64(c) => format!("{:e}{:+e}i", c.re, c.im),
        Scalar::I64(v) => v.to_string(),
        Scalar::U64(v) => v.to_string(),
        Scalar::Bool(b) => b.to_string(),
    }
}

/// Whether `got` (an element of dtype `dtype`) matches the reference `want` under `tol`, and
/// the error (in ulps for floats, as a distance for integers): the one element check of the
/// suite, also used by property tests that compare random op chains with the reference.
pub fn check(dtype: DataType, tol: Tolerance, got: Scalar, want: &Expected) -> (bool, f64) {
    match (got, want.value) {
        (Scalar::C64(g), Scalar::C64(w)) => {
            let part = dtype.real_dtype();
            let scale = want.scale.max(w.norm());
            let (ok_re, e_re) = check_float(part, tol, g.re, w.re, scale, want.terms);
            let (ok_im, e_im) = check_float(part, tol, g.im, w.im, scale, want.terms);
            (ok_re && ok_im, e_re.max(e_im))
        }
        (Scalar::F64(g), Scalar::F64(w)) => {
            check_float(dtype, tol, g, w, want.scale.max(w.abs()), want.terms)
        }
        (g, w) => {
            let same = g == w;
            (
                same,
                if same {
                    0.0
                } else {
                    (data::int_of(g) - data::int_of(w)).unsigned_abs() as f64
                },
            )
        }
    }
}

fn check_float(
    dtype: DataType,
    tol: Tolerance,
    g: f64,
    w: f64,
    scale: f64,
    terms: usize,
) -> (bool, f64) {
    if w.is_nan() || g.is_nan() {
        return if w.is_nan() && g.is_nan() {
            (true, 0.0)
        } else {
            (false, f64::INFINITY)
        };
    }
    if w.is_infinite() || g.is_infinite() {
        return if g == w {
            (true, 0.0)
        } else {
            (false, f64::INFINITY)
        };
    }
    let diff = (g - w).abs();
    let error = diff / tolerance::ulp(dtype, w.abs());
    let ok = match tol {
        Tolerance::Exact => g == w && (w != 0.0 || g.is_sign_negative() == w.is_sign_negative()),
        Tolerance::Ulps(n) => diff <= n * tolerance::ulp(dtype, scale),
        Tolerance::Accumulated => {
            diff <= tolerance::ulp(dtype, w.abs())
                + terms as f64 * tolerance::accumulator_roundoff(dtype) * scale
        }
        Tolerance::Epilogue => {
            diff <= tolerance::ulp(dtype, w.abs())
                + terms as f64 * tolerance::accumulator_roundoff(dtype) * scale
                + 3.0 * tolerance::ulp(dtype, scale)
        }
    };
    (ok, error)
}
