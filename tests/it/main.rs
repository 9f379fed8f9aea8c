//! The facade's integration tests: the public API against TensorFlow's files, TensorFlow
//! itself and NumPy.
//!
//! One binary with a module per subject (each test binary links the whole stack, so fewer
//! binaries build and link faster): `cargo test --test it -- MODULE::` runs one module.

mod common;

mod checkpoints;
mod collective_graph_tensorflow;
mod complex;
mod control_flow;
mod dlpack;
mod float8;
mod graph_golden;
mod graph_tensorflow;
mod models;
mod npy;
mod placement;
mod registry;
mod safetensors;
mod saved_models;
mod serde;
mod sparse_graph_tensorflow;
mod sparse_ops_tensorflow;
mod sparse_tensorflow;
mod training;
