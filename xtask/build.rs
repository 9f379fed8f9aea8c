//! Nothing to build: the script exists so that `[build-dependencies]` (the features the
//! test build's proc-macros need, see Cargo.toml) are part of this crate's build.

fn main() {}
