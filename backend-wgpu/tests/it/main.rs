//! The wgpu backend's integration tests (`no_driver` is its own binary: it hides the driver
//! from its whole process).
//!
//! One binary with a module per subject (each test binary links the whole stack, so fewer
//! binaries build and link faster): `cargo test --test it -- MODULE::` runs one module.

mod common;

mod conformance;
mod transcendentals;
mod views;
