//! Collectives across processes, as a graph's collective ops call them: the
//! [`Collectives`] trait a communicator implements (polytensor-distributed's MPI one), so
//! that neither tensor-core nor the graph crate depends on MPI, as [`crate::Device`] keeps
//! them free of any backend.

use std::sync::Arc;

use crate::{DataType, Device, Result, Tensor, TensorShape};

/// How an all-reduce combines the ranks' tensors, elementwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reduction {
    /// The sum.
    Sum,
    /// The product.
    Prod,
    /// The smallest.
    Min,
    /// The largest.
    Max,
    /// The sum divided by the number of ranks (floats only).
    Mean,
}

impl Reduction {
    /// Every reduction.
    pub const ALL: [Reduction; 5] = [
        Reduction::Sum,
        Reduction::Prod,
        Reduction::Min,
        Reduction::Max,
        Reduction::Mean,
    ];

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Reduction::Sum => "sum",
            Reduction::Prod => "prod",
            Reduction::Min => "min",
            Reduction::Max => "max",
            Reduction::Mean => "mean",
        }
    }
}

/// A group of processes that run collectives together, as TensorFlow's collective ops see
/// their group (`group_size` members, this process one of them). Every member calls the
/// same collectives in the same order; a call one member makes differently is an `Err`.
pub trait Collectives: Send + Sync {
    /// This process's rank in the group, `0..size`.
    fn rank(&self) -> usize;

    /// The number of processes in the group.
    fn size(&self) -> usize;

    /// The elementwise `reduction` of every member's `tensor` (one dtype and shape on
    /// every member), on `tensor`'s device (`CollectiveReduceV2`).
    fn all_reduce(&self, tensor: &Tensor, reduction: Reduction) -> Result<Tensor>;

    /// Every member's `tensor` concatenated along the first dim in rank order
    /// (`CollectiveGatherV2`).
    fn all_gather(&self, tensor: &Tensor) -> Result<Tensor>;

    /// Send `tensor` to every other member, which call [`Collectives::broadcast_recv`];
    /// returns `tensor` (`CollectiveBcastSendV2`).
    fn broadcast_send(&self, tensor: &Tensor) -> Result<Tensor>;

    /// The tensor of `shape` and `dtype` that the one sending member broadcasts, on
    /// `device` (`CollectiveBcastRecvV2`).
    fn broadcast_recv(
        &self,
        shape: &TensorShape,
        dtype: DataType,
        device: &Arc<dyn Device>,
    ) -> Result<Tensor>;
}
