//! The cross-backend conformance suite: the one suite of cases every backend's tests and
//! `cargo xtask conformance` run (kept apart from `polytensor-core`, as burn keeps
//! `burn-backend-tests`, so the core holds only the core).
//!
//! One catalogue of cases ([`all_cases`]: every op of the
//! [`Device`](polytensor_core::device::Device) kernel surface x every dtype it is defined
//! for x shapes from scalars and empty tensors to over 2^20 elements and rank 6, with
//! broadcasting and strided, transposed, offset and stride-0 inputs; and
//! [`layers::layer_cases`]: the inference layers and shape ops built from those kernels;
//! [`sparse::sparse_cases`]: the `SparseTensor` ops), checked
//! against a naive reference written here ([`mod@reference`]) with the tolerances of
//! [`mod@tolerance`]. Inputs are seeded by case name, so every failure reproduces by name.
//!
//! ```
//! # #[cfg(any())]
//! # {
//! let report = conformance::run(&device, &Filter::all());
//! assert!(report.failures().is_empty(), "{}", report.failure_summary());
//! # }
//! ```

pub mod cases;
mod compare;
pub mod data;
mod execute;
mod harness;
pub mod layers;
pub mod reference;
mod report;
mod run;
pub mod sparse;
pub mod tolerance;

pub use cases::{all_cases, family_cases, Case, Family, InputSpec, Kind, Variant};
pub use compare::check;
pub use harness::{assert_family, assert_memory_reused, device_or_skip, required};
pub use report::{CaseResult, Filter, Outcome, Report};
pub use run::{run, run_case, run_with_progress};

pub(crate) use compare::compare_elements;
pub(crate) use execute::{build, indices, Values};
pub(crate) use report::fail;
