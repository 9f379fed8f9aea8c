//! polytensor's collectives across processes and nodes, on MPI: the engine that moves the
//! bytes is an existing one (Open MPI, through the `mpi` crate, rsmpi), never a transport
//! of polytensor's own.
//!
//! With the `mpi` feature, [`Mpi::init`] starts MPI once per process (under `mpirun`), and
//! [`Mpi::world`] gives the [`Communicator`] of every process: its rank and size, a
//! barrier, and the collectives on tensors of any device: [`Communicator::all_reduce`]
//! (sum, product, minimum, maximum, mean), [`Communicator::broadcast`] and
//! [`Communicator::all_gather`] (along the first dim, as TensorFlow's
//! `CollectiveGatherV2`).
//!
//! Every collective first agrees on what it is about to move: each rank contributes its
//! op, dtype and shape to a small all-gather, and a rank whose call differs makes the
//! collective an `Err` on every rank (naming the ranks and what they passed) instead of a
//! hang or a mismatched transfer. Tensors on an accelerator are staged through host memory
//! (MPI builds here are not device-aware).
//!
//! With the `nccl` feature, `nccl::NcclCommunicator` runs the same collectives on CUDA
//! tensors through NVIDIA's NCCL, GPU to GPU, bootstrapped and checked over MPI.
//!
//! ```no_run
//! # #[cfg(feature = "mpi")]
//! # fn main() -> polytensor_core::Result<()> {
//! use polytensor_core::{Device, Tensor};
//! use polytensor_distributed::{Mpi, Reduction};
//! # let device: std::sync::Arc<dyn Device> = unimplemented!();
//! let mpi = Mpi::init()?;
//! let world = mpi.world()?;
//! let gradient = Tensor::from_slice(&[world.rank() as f32; 4], [4], &device)?;
//! let mean = world.all_reduce(&gradient, Reduction::Mean)?; // the same on every rank
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "mpi"))]
//! # fn main() {}
//! ```

/// `Collectives` for a communicator type through its own methods of the same names.
#[cfg(feature = "mpi")]
macro_rules! collectives_by_own_methods {
    ($communicator:ty) => {
        impl polytensor_core::collective::Collectives for $communicator {
            fn rank(&self) -> usize {
                <$communicator>::rank(self)
            }

            fn size(&self) -> usize {
                <$communicator>::size(self)
            }

            fn all_reduce(
                &self,
                tensor: &polytensor_core::Tensor,
                reduction: polytensor_core::collective::Reduction,
            ) -> polytensor_core::Result<polytensor_core::Tensor> {
                <$communicator>::all_reduce(self, tensor, reduction)
            }

            fn all_gather(
                &self,
                tensor: &polytensor_core::Tensor,
            ) -> polytensor_core::Result<polytensor_core::Tensor> {
                <$communicator>::all_gather(self, tensor)
            }

            fn broadcast_send(
                &self,
                tensor: &polytensor_core::Tensor,
            ) -> polytensor_core::Result<polytensor_core::Tensor> {
                <$communicator>::broadcast_send(self, tensor)
            }

            fn broadcast_recv(
                &self,
                shape: &polytensor_core::TensorShape,
                dtype: polytensor_core::DataType,
                device: &std::sync::Arc<dyn polytensor_core::Device>,
            ) -> polytensor_core::Result<polytensor_core::Tensor> {
                <$communicator>::broadcast_recv(self, shape, dtype, device)
            }
        }
    };
}
#[cfg(feature = "mpi")]
pub(crate) use collectives_by_own_methods;

#[cfg(feature = "mpi")]
mod comm;
#[cfg(feature = "mpi")]
mod header;
#[cfg(feature = "nccl")]
pub mod nccl;
#[cfg(feature = "mpi")]
mod rules;

#[cfg(feature = "mpi")]
pub use comm::{Communicator, Mpi, Pending, MAX_TAG};
pub use polytensor_core::collective::{Collectives, Reduction};

/// Whether this build has MPI (the `mpi` feature).
pub const fn has_mpi() -> bool {
    cfg!(feature = "mpi")
}
