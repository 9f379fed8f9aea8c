//! polytensor-graph's integration tests.
//!
//! One binary with a module per subject (each test binary links the whole stack, so fewer
//! binaries build and link faster): `cargo test --test it -- MODULE::` runs one module.

mod control_flow;
mod graph_api;
mod import;
mod placement;
