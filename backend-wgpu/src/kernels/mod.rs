//! WGSL kernels, generated per dtype from one template per op family, compiled once per
//! (kernel, dtype, variant) and cached by the [`Pipelines`] cache.

pub(crate) mod complex;
pub(crate) mod elementwise;
pub(crate) mod key;
pub(crate) mod matmul;
mod pipelines;
pub(crate) mod reduce;
mod transcendental;

pub(crate) use pipelines::Pipelines;
