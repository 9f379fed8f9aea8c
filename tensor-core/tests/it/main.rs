//! polytensor-core's integration tests.
//!
//! One binary with a module per subject (each test binary links the whole stack, so fewer
//! binaries build and link faster): `cargo test --test it -- MODULE::` runs one module.

mod counting;

mod dlpack;
mod hardening;
mod heap_free_shapes;
mod layers_input;
mod properties;
mod proto_mutation;
mod proto_validation;
mod sparse;
mod tensor_api;
mod tf_golden;
