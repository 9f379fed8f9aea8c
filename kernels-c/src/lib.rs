//! polytensor's C-family kernel generator. OpenCL C and CUDA C++ both compile kernels from
//! source text at run time (the OpenCL runtime, NVRTC), and both are C underneath; so every
//! kernel is written here once, over the fixed-width type names and macros of a small
//! [`Dialect`] header (`c/opencl.h`, `c/cuda.h`), and the two backends compile the same
//! text. The OpenCL instance of a kernel runs on PoCL in CI; the CUDA instance differs only
//! by the header in front of it.
//!
//! This crate knows nothing of any driver: it turns (op, dtype, variant) into source text
//! and says how to launch it ([`elementwise::MapKernel`], [`reduce::ReduceKernel`],
//! [`matmul::MatmulKernel`]); the backend compiles, caches and launches.
//!
//! - [`Elem`]: how each dtype is stored and computed on (f16 and bf16 as their 16 bits,
//!   computed in f32 and rounded once; complex as `float2`/`double2`).
//! - [`expr`]: the C expression of every elementwise op and cast, following the shared
//!   semantics of DESIGN.md.
//! - [`Library`]: the helper headers a kernel needs (`c/scalar.h`, `c/real.h`,
//!   `c/complex.h`, `c/fp64.h`), instantiated per type.

mod dialect;
mod elem;
pub mod elementwise;
pub mod expr;
mod library;
pub mod matmul;
pub mod reduce;

pub use dialect::Dialect;
pub use elem::{Elem, Real};
pub use library::Library;
