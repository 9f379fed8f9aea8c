//! WGSL kernels, generated per dtype from one template per op family, compiled once per
//! (kernel, dtype, variant) and cached by the [`Pipelines`] cache.

pub(crate) mod key;
pub(crate) mod matmul;
mod pipelines;
pub(crate) mod reduce;

pub(crate) use pipelines::{Pipeline, Pipelines};
