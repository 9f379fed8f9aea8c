//! WGSL kernels, generated per dtype from one template per op family, compiled once per
//! (kernel, dtype, variant) and cached by the [`Pipelines`] cache.

pub(crate) mod elementwise;
mod pipelines;

pub(crate) use pipelines::Pipelines;
