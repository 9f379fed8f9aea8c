//! Complex arithmetic in WGSL: complex64 and complex128 are `vec2` of their part type (the
//! host's layout, real part first), added and negated as vectors, multiplied, divided and
//! measured by these helpers (the bodies that call them are rendered by the kit,
//! `polytensor_kernels_c::render::wgsl`).

use polytensor_kernels_c::wgsl::instantiate;
use polytensor_kernels_c::wgsl::Scalar;

/// The helpers `cmul`, `cdiv` (Smith's, which neither overflows nor underflows where the
/// quotient does not), `cabs` (scaled, likewise) and `csqrt` on `vec2<f>`.
pub(crate) fn helpers(f: Scalar) -> String {
    let (top, one) = if f.is_wide() { (63, "1lu") } else { (31, "1u") };
    instantiate(
        include_str!("wgsl/complex.wgsl"),
        &[("F", &f), ("BITS", &f.bits()), ("TOP", &top), ("ONE", &one)],
    )
}

/// complex64 exp, log, sin, cos and tanh from the f32 functions of
/// `super::transcendental` (which a template must carry too): accurate relative to each
/// function's condition, `|f(z)| + |z f'(z)|`, as the conformance suite measures them.
pub(crate) const TRANSCENDENTALS: &str = include_str!("wgsl/complex_transcendental.wgsl");
