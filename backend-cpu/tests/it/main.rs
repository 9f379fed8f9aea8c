//! The CPU backend's integration tests.
//!
//! One binary with a module per subject (each test binary links the whole stack, so fewer
//! binaries build and link faster): `cargo test --test it -- MODULE::` runs one module.

mod conformance;
mod embedded;
mod fused;
mod large_outputs;
mod properties;
