//! [`Mpi`] and its [`Communicator`]: the collectives on tensors, each checked across ranks
//! first ([`crate::header`]), the bytes moved by MPI from host staging copies.

use mpi::collective::SystemOperation;
use mpi::datatype::Equivalence;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator as _, CommunicatorCollectives, Root};

use polytensor_core::{DataType, Element, Error, Result, Tensor};

use crate::header::{self, Kind, WORDS};
use crate::Reduction;

/// MPI, started once per process ([`Mpi::init`]) and finalized when dropped.
pub struct Mpi {
    universe: Universe,
}

impl Mpi {
    /// Start MPI (`MPI_Init`), as every rank of an `mpirun` does first; an `Err` if this
    /// process started it already.
    pub fn init() -> Result<Mpi> {
        mpi::initialize()
            .map(|universe| Mpi { universe })
            .ok_or_else(|| Error::invalid("MPI is already initialized in this process"))
    }

    /// The communicator of every process of the run (`MPI_COMM_WORLD`).
    pub fn world(&self) -> Communicator {
        Communicator {
            comm: self.universe.world(),
        }
    }
}

/// A group of processes that run collectives together.
pub struct Communicator {
    comm: SimpleCommunicator,
}

impl Communicator {
    /// This process's rank, `0..size`.
    pub fn rank(&self) -> usize {
        self.comm.rank() as usize
    }

    /// The number of processes.
    pub fn size(&self) -> usize {
        self.comm.size() as usize
    }

    /// Wait until every rank has called it.
    pub fn barrier(&self) {
        self.comm.barrier();
    }

    /// Exchange every rank's header row for this call and check that they agree: the first
    /// step of every collective, before anything a rank could refuse on its own.
    fn agree(&self, kind: Kind, argument: i64, tensor: &Tensor) -> Result<()> {
        let row = header::row(kind, argument, tensor);
        let mut rows = vec![[0i64; WORDS]; self.size()];
        let flat: Vec<i64> = row.to_vec();
        let mut gathered = vec![0i64; WORDS * self.size()];
        self.comm.all_gather_into(&flat[..], &mut gathered[..]);
        for (r, chunk) in rows.iter_mut().zip(gathered.chunks_exact(WORDS)) {
            r.copy_from_slice(chunk);
        }
        header::agree(kind.name(), &rows, true)?;
        header::check_rank(tensor)
    }

    /// The elementwise `reduction` of every rank's `tensor` (one dtype and shape on every
    /// rank), on `tensor`'s device on every rank. Integers and floats; f16 and bf16 are
    /// reduced in f32 and rounded once; `Mean` is for floats.
    pub fn all_reduce(&self, tensor: &Tensor, reduction: Reduction) -> Result<Tensor> {
        // First agree, so that a call one rank refuses is refused by every rank.
        self.agree(Kind::AllReduce, reduction as i64, tensor)?;
        let dtype = tensor.dtype();
        let floats = matches!(
            dtype,
            DataType::Float | DataType::Double | DataType::Half | DataType::BFloat16
        );
        let integers = dtype.is_integer() && dtype.is_computable();
        let defined = floats || (integers && reduction != Reduction::Mean);
        if !defined {
            return Err(Error::invalid(format!(
                "all_reduce({}) is not defined for {dtype}",
                reduction.name()
            )));
        }
        let reduced = match dtype {
            DataType::Float => self.reduce_as::<f32>(tensor, reduction)?,
            DataType::Double => self.reduce_as::<f64>(tensor, reduction)?,
            DataType::Half | DataType::BFloat16 => self
                .reduce_as::<f32>(&tensor.cast(DataType::Float)?, reduction)?
                .cast(dtype)?,
            DataType::Int8 => self.reduce_as::<i8>(tensor, reduction)?,
            DataType::Int16 => self.reduce_as::<i16>(tensor, reduction)?,
            DataType::Int32 => self.reduce_as::<i32>(tensor, reduction)?,
            DataType::Int64 => self.reduce_as::<i64>(tensor, reduction)?,
            DataType::UInt8 => self.reduce_as::<u8>(tensor, reduction)?,
            DataType::UInt16 => self.reduce_as::<u16>(tensor, reduction)?,
            DataType::UInt32 => self.reduce_as::<u32>(tensor, reduction)?,
            DataType::UInt64 => self.reduce_as::<u64>(tensor, reduction)?,
            other => {
                return Err(Error::invalid(format!(
                    "all_reduce is not defined for {other}"
                )))
            }
        };
        Ok(reduced)
    }

    /// [`all_reduce`](Self::all_reduce) of `tensor`'s elements as `T`.
    fn reduce_as<T: Element + Equivalence>(
        &self,
        tensor: &Tensor,
        reduction: Reduction,
    ) -> Result<Tensor> {
        let local = tensor.to_vec::<T>()?;
        let mut reduced = vec![T::default(); local.len()];
        if !local.is_empty() {
            let op = match reduction {
                Reduction::Sum | Reduction::Mean => SystemOperation::sum(),
                Reduction::Prod => SystemOperation::product(),
                Reduction::Min => SystemOperation::min(),
                Reduction::Max => SystemOperation::max(),
            };
            self.comm.all_reduce_into(&local[..], &mut reduced[..], op);
        }
        let out = Tensor::from_slice(&reduced, tensor.shape().clone(), tensor.device())?;
        if reduction == Reduction::Mean {
            let size = Tensor::full([], self.size() as f64, tensor.dtype(), tensor.device())?;
            return out.binary(polytensor_core::BinaryOp::Div, &size);
        }
        Ok(out)
    }

    /// Rank `root`'s `tensor` on every rank (each rank passes a tensor of the same dtype
    /// and shape, which the root's replaces), on each rank's tensor's device. Any
    /// fixed-size dtype.
    pub fn broadcast(&self, tensor: &Tensor, root: usize) -> Result<Tensor> {
        self.agree(Kind::Broadcast, root as i64, tensor)?;
        if root >= self.size() {
            return Err(Error::invalid(format!(
                "broadcast from rank {root} of a communicator of {} ranks",
                self.size()
            )));
        }
        self.check_pod(tensor, "broadcast")?;
        let mut bytes = tensor.to_bytes()?;
        if !bytes.is_empty() {
            self.comm
                .process_at_rank(root as i32)
                .broadcast_into(&mut bytes[..]);
        }
        Tensor::from_bytes(
            &bytes,
            tensor.shape().clone(),
            tensor.dtype(),
            tensor.device(),
        )
    }

    /// Every rank's `tensor` (one dtype and shape on every rank) concatenated along the
    /// first dim in rank order, as TensorFlow's `CollectiveGatherV2`; a scalar gathers into
    /// a vector. Any fixed-size dtype.
    pub fn all_gather(&self, tensor: &Tensor) -> Result<Tensor> {
        self.agree(Kind::AllGather, 0, tensor)?;
        self.check_pod(tensor, "all_gather")?;
        let local = tensor.to_bytes()?;
        let mut gathered = vec![0u8; local.len() * self.size()];
        if !local.is_empty() {
            self.comm.all_gather_into(&local[..], &mut gathered[..]);
        }
        let mut dims = tensor.dims().to_vec();
        match dims.first_mut() {
            Some(first) => *first *= self.size(),
            None => dims.push(self.size()),
        }
        Tensor::from_bytes(
            &gathered,
            polytensor_core::TensorShape::new(&dims)?,
            tensor.dtype(),
            tensor.device(),
        )
    }

    /// An `Err` (on this rank, before any transfer) for dtypes without fixed-size elements.
    fn check_pod(&self, tensor: &Tensor, name: &str) -> Result<()> {
        if tensor.dtype().is_pod() {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "{name} moves fixed-size elements, not {}",
                tensor.dtype()
            )))
        }
    }
}
