//! exp, log, sin, cos, tanh and sigmoid of f32 in WGSL, within the conformance bounds
//! (2 ulp; 4 for tanh and sigmoid) on every device: WGSL only promises `exp` to `3 + 2|x|`
//! ulp, `log` to an absolute 2^-21 and `sin`/`cos` to an absolute 2^-11 on [-pi, pi], so
//! the builtins are not used. These are the CPU backend's polynomials (Cephes) in plain
//! multiply-adds, with specials (NaN, infinities, zeros, subnormals) decided on the bits.
//! sin and cos reduce every |x| > pi/4 by Payne-Hanek (x times 2/pi in 64-bit fixed point,
//! from `u32` arithmetic, then products exact in f32), since a three-part pi/4
//! (Cody-Waite) would need a fused multiply-add, which WGSL does not guarantee. f16 and
//! bf16 use them through f32. `pow` of those is computed in f64 ([`POW_F32`]).
//! `tests/transcendentals.rs` checks the bounds over every exponent.

/// The WGSL functions `exp_f32`, `log_f32`, `sin_cos_f32`, `tanh_f32`, `sigmoid_f32` and `erf_f32`
/// (they need the float helpers' `is_nan` and `pow2`).
pub(crate) const TRANSCENDENTALS: &str = include_str!("wgsl/transcendental_f32.wgsl");

/// `pow_f32(x, y)`: f32 (and f16, bf16) powers within 4 ulp, computed in f64 and rounded
/// once: ln(x) to about 2^-50 by the atanh series, times y, and exp by a Taylor series
/// after reducing by ln 2, so even large `y ln x` keep f32's precision. IEEE 754's special
/// cases (as Rust's `powf`) are decided first. Only for adapters with SHADER_F64.
pub(crate) const POW_F32: &str = include_str!("wgsl/pow_f32.wgsl");

/// exp, log, tanh and sigmoid of f64 (fdlibm's exp and log, Cephes' tanh), for templates
/// on adapters with SHADER_F64 and SHADER_INT64; they need the f64 `is_nan`.
pub(crate) const TRANSCENDENTALS_F64: &str = include_str!("wgsl/transcendental_f64.wgsl");
