//! TensorFlow's graph layer on polytensor: a [`Graph`] of [`Operation`]s whose outputs are
//! symbolic tensors ([`Output`], printed as TensorFlow prints them:
//! `Tensor("add:0", shape=(), dtype=float32)`), a [`Session`] that runs the part of a
//! graph that fetches need on any polytensor device, and TensorFlow's `GraphDef` on the
//! wire ([`proto`]), so that a frozen TensorFlow graph runs on any device and a graph built
//! here runs in TensorFlow.
//!
//! The crate depends on `polytensor-core` only; devices come from the backends.

mod attr;
mod builders;
mod frames;
mod function;
mod function_def;
mod fusion;
mod gradients;
mod graph;
mod graph_def;
mod library;
mod ops;
mod optimizer;
pub mod placer;
pub mod proto;
pub mod saved_model;
mod session;
mod sparse;
mod tape;

pub use attr::{int_list, type_list, AttrKind, AttrValue, ListValue};
pub use builders::Variable;
pub use gradients::{Gradient, IndexedSlices};
pub use graph::{python_shape, Graph, OpBuilder, Operation, Output};
pub use graph_def::{ImportOptions, Imported};
pub use ops::op_types;
pub use optimizer::{Optimizer, Training};
pub use placer::DeviceSpec;
pub use saved_model::SavedModel;
pub use session::{
    timeout_from_millis, CancellationManager, GraphOptimizations, NodeStats, OpTypeStats,
    OutputStats, PlacedOp, Placement, RunOptions, Session, SessionOptions, StepStats, Trace,
    Transfer, PLAN_CACHE_CAPACITY,
};
pub use sparse::{Endpoint, SessionValue, SparseOutput};
pub use tape::{GradientTape, Taped};

/// The `VersionDef.producer` polytensor writes: the GraphDef version of TensorFlow 2.21,
/// whose op semantics the kernels follow.
pub const PRODUCER: i32 = 2474;
