//! wgpu's pipelines: the kit's kernels (rendered as WGSL by `polytensor_gpu_kit`),
//! compiled once per (kernel, dtype, variant) and cached by the [`Pipelines`] cache.

pub(crate) mod key;
mod pipelines;

pub(crate) use pipelines::{Pipeline, Pipelines};
