//! The collectives of an [`NcclCommunicator`], with the MPI communicator's semantics:
//! all-reduce (out of place and in place), reduce-scatter, broadcast (from a rank, or from
//! whichever rank sends), all-gather and all-to-all, on tensors of the communicator's CUDA
//! device.

use std::sync::Arc;

use polytensor_core::collective::Reduction;
use polytensor_core::{DataType, Device, Error, Result, Tensor, TensorShape};

use super::raw::{self, Call};
use super::{address, NcclCommunicator};
use crate::header::{sender, Kind, Row};
use crate::rules::{check_pod, check_root, chunk_shape, gathered_shape};

/// How NCCL reduces a dtype: the dtype the tensor is cast to first (int16 and uint16 widen
/// to 32 bits), NCCL's element type, and NCCL elements per tensor element (complex numbers
/// are pairs of floats).
struct Work {
    dtype: DataType,
    element: cudarc::nccl::sys::ncclDataType_t,
    per_element: usize,
}

/// How NCCL runs `reduction` on `dtype`, or an `Err` where it is not defined: floats
/// (f16 and bf16 in their own precision, as NCCL reduces them) and integers; `Mean` for
/// floats; complex numbers for `Sum` and `Mean`.
fn work(dtype: DataType, reduction: Reduction, name: &str) -> Result<Work> {
    let undefined = || {
        Error::invalid(format!(
            "{name}({}) is not defined for {dtype} on NCCL",
            reduction.name()
        ))
    };
    let (cast, scalar, per_element) = match dtype {
        DataType::Int16 => (DataType::Int32, DataType::Int32, 1),
        DataType::UInt16 => (DataType::UInt32, DataType::UInt32, 1),
        DataType::Complex64 => (dtype, DataType::Float, 2),
        DataType::Complex128 => (dtype, DataType::Double, 2),
        _ => (dtype, dtype, 1),
    };
    let pairs_ok = !dtype.is_complex() || matches!(reduction, Reduction::Sum | Reduction::Mean);
    let mean_ok = reduction != Reduction::Mean || scalar.is_float();
    match raw::element_type(scalar) {
        Some(element) if pairs_ok && mean_ok => Ok(Work {
            dtype: cast,
            element,
            per_element,
        }),
        _ => Err(undefined()),
    }
}

impl NcclCommunicator {
    /// The elementwise `reduction` of every rank's `tensor` (one dtype and shape on every
    /// rank), on the device (`ncclAllReduce`; `Mean` is `ncclAvg`). Floats and integers;
    /// complex numbers for sum and mean.
    pub fn all_reduce(&self, tensor: &Tensor, reduction: Reduction) -> Result<Tensor> {
        self.reduce(Kind::AllReduce, tensor, reduction, false)
    }

    /// [`all_reduce`](Self::all_reduce), with the result replacing `tensor`: NCCL reduces
    /// in place (no new memory) when `tensor` is contiguous, writable and shared by no
    /// other tensor, and its dtype is reduced as is.
    pub fn all_reduce_in_place(&self, tensor: &mut Tensor, reduction: Reduction) -> Result<()> {
        let writable =
            tensor.is_contiguous() && tensor.ref_count_is_one() && !tensor.buffer().is_read_only();
        *tensor = self.reduce(Kind::AllReduce, tensor, reduction, writable)?;
        Ok(())
    }

    /// The elementwise `reduction` of every rank's `tensor`, scattered: rank `r` gets the
    /// `r`-th of `size` equal chunks along the first dim (`ncclReduceScatter`). The first
    /// dim must split evenly.
    pub fn reduce_scatter(&self, tensor: &Tensor, reduction: Reduction) -> Result<Tensor> {
        self.reduce(Kind::ReduceScatter, tensor, reduction, false)
    }

    /// All-reduce or reduce-scatter (`kind`); with `in_place`, into `tensor`'s own memory
    /// where its dtype is reduced as is.
    fn reduce(
        &self,
        kind: Kind,
        tensor: &Tensor,
        reduction: Reduction,
        in_place: bool,
    ) -> Result<Tensor> {
        let name = kind.name();
        let (mut comm, refusal) = self.begin(tensor.device(), name);
        let (dtype, shape) = (tensor.dtype(), tensor.shape());
        self.mpi
            .agree(refusal, kind, reduction as i64, dtype, shape)?;
        let work = work(dtype, reduction, name)?;
        let out_shape = match kind {
            Kind::ReduceScatter => chunk_shape(shape, self.size(), name)?,
            _ => shape.clone(),
        };
        let input = tensor.cast(work.dtype)?.contiguous()?;
        let out = if in_place && work.dtype == dtype {
            input.clone()
        } else {
            // SAFETY: NCCL writes every element before the tensor is returned.
            unsafe { Tensor::uninit(out_shape, work.dtype, &self.device)? }
        };
        let count = out.num_elements() * work.per_element;
        if count > 0 {
            let (send, recv) = (address(&input)?, address(&out)?);
            let (dtype, op) = (work.element, raw::operator(reduction));
            let call = match kind {
                Kind::ReduceScatter => Call::ReduceScatter {
                    send,
                    recv,
                    count_per_rank: count,
                    dtype,
                    op,
                },
                _ => Call::AllReduce {
                    send,
                    recv,
                    count,
                    dtype,
                    op,
                },
            };
            self.run(&mut comm, name, call)?;
        }
        out.cast(dtype)
    }

    /// Rank `root`'s `tensor` on every rank (`ncclBroadcast`): each rank passes a tensor of
    /// the same dtype and shape, which the root's replaces. Any fixed-size dtype.
    pub fn broadcast(&self, tensor: &Tensor, root: usize) -> Result<Tensor> {
        let size = self.size();
        let sent = (self.rank() == root).then_some(tensor);
        let (dtype, shape, device) = (tensor.dtype(), tensor.shape(), tensor.device());
        self.bcast(
            Kind::Broadcast,
            root as i64,
            dtype,
            shape,
            device,
            sent,
            |_| check_root(root, size),
        )
    }

    /// Send `tensor` to every other rank, each of which calls
    /// [`broadcast_recv`](Self::broadcast_recv) (TensorFlow's `CollectiveBcastSendV2`).
    /// Returns `tensor`.
    pub fn broadcast_send(&self, tensor: &Tensor) -> Result<Tensor> {
        let (dtype, shape, device) = (tensor.dtype(), tensor.shape(), tensor.device());
        self.bcast(
            Kind::BroadcastByRole,
            1,
            dtype,
            shape,
            device,
            Some(tensor),
            sender,
        )
    }

    /// The tensor of `shape` and `dtype` that the one rank calling
    /// [`broadcast_send`](Self::broadcast_send) sends, on `device` (this communicator's).
    pub fn broadcast_recv(
        &self,
        shape: &TensorShape,
        dtype: DataType,
        device: &Arc<dyn Device>,
    ) -> Result<Tensor> {
        self.bcast(Kind::BroadcastByRole, 0, dtype, shape, device, None, sender)
    }

    /// A broadcast of a tensor of `dtype` and `shape` on `device`, whose root `root_of`
    /// finds in the agreed rows; `sent` is this rank's tensor if it is the root.
    #[allow(clippy::too_many_arguments)]
    fn bcast(
        &self,
        kind: Kind,
        argument: i64,
        dtype: DataType,
        shape: &TensorShape,
        device: &Arc<dyn Device>,
        sent: Option<&Tensor>,
        root_of: impl FnOnce(&[Row]) -> Result<usize>,
    ) -> Result<Tensor> {
        let name = kind.name();
        let (mut comm, refusal) = self.begin(device, name);
        let rows = self.mpi.agree(refusal, kind, argument, dtype, shape)?;
        let root = root_of(&rows)?;
        check_pod(dtype, name)?;
        let (buffer, result) = match sent.filter(|_| self.rank() == root) {
            Some(sent) => (sent.contiguous()?, sent.clone()),
            None => {
                // SAFETY: NCCL writes every byte before the tensor is returned.
                let out = unsafe { Tensor::uninit(shape.clone(), dtype, &self.device)? };
                (out.clone(), out)
            }
        };
        let bytes = buffer.total_bytes();
        if bytes > 0 {
            let buffer = address(&buffer)?;
            self.run(
                &mut comm,
                name,
                Call::Broadcast {
                    buffer,
                    bytes,
                    root,
                },
            )?;
        }
        Ok(result)
    }

    /// Every rank's `tensor` (one dtype and shape on every rank) concatenated along the
    /// first dim in rank order (`ncclAllGather`, TensorFlow's `CollectiveGatherV2`); a
    /// scalar gathers into a vector. Any fixed-size dtype.
    pub fn all_gather(&self, tensor: &Tensor) -> Result<Tensor> {
        self.exchange(Kind::AllGather, tensor)
    }

    /// Rank `r`'s `j`-th chunk of `tensor` (along the first dim, split into `size` equal
    /// chunks) sent to rank `j`, which puts it `r`-th (`ncclSend`/`ncclRecv` to every rank
    /// in one group). The first dim must split evenly.
    pub fn all_to_all(&self, tensor: &Tensor) -> Result<Tensor> {
        self.exchange(Kind::AllToAll, tensor)
    }

    /// All-gather or all-to-all (`kind`) of `tensor`.
    fn exchange(&self, kind: Kind, tensor: &Tensor) -> Result<Tensor> {
        let (size, name) = (self.size(), kind.name());
        let (mut comm, refusal) = self.begin(tensor.device(), name);
        let (dtype, shape) = (tensor.dtype(), tensor.shape());
        self.mpi.agree(refusal, kind, 0, dtype, shape)?;
        check_pod(dtype, name)?;
        let (per_rank, out_shape) = match kind {
            Kind::AllToAll => (
                chunk_shape(shape, size, name)?.num_elements(),
                shape.clone(),
            ),
            _ => (tensor.num_elements(), gathered_shape(shape, size)?),
        };
        let input = tensor.contiguous()?;
        // SAFETY: NCCL writes every element before the tensor is returned.
        let out = unsafe { Tensor::uninit(out_shape, dtype, &self.device)? };
        let bytes_per_rank = per_rank * dtype.size();
        if bytes_per_rank > 0 {
            let (send, recv) = (address(&input)?, address(&out)?);
            let call = match kind {
                Kind::AllToAll => Call::AllToAll {
                    send,
                    recv,
                    bytes_per_rank,
                    size,
                },
                _ => Call::AllGather {
                    send,
                    recv,
                    bytes_per_rank,
                },
            };
            self.run(&mut comm, name, call)?;
        }
        Ok(out)
    }
}

crate::collectives_by_own_methods!(NcclCommunicator);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_reduces_what_it_defines_and_refuses_the_rest() {
        let of = |dtype, reduction| work(dtype, reduction, "all_reduce");
        // int16 widens to int32; complex sums are sums of float pairs.
        let widened = of(DataType::Int16, Reduction::Prod).unwrap();
        assert_eq!((widened.dtype, widened.per_element), (DataType::Int32, 1));
        let pairs = of(DataType::Complex64, Reduction::Mean).unwrap();
        assert_eq!((pairs.dtype, pairs.per_element), (DataType::Complex64, 2));
        // No mean of integers, no order on complex numbers, no NCCL type for bool.
        let message = of(DataType::Int32, Reduction::Mean)
            .err()
            .unwrap()
            .to_string();
        assert!(
            message.contains("all_reduce(mean) is not defined for int32"),
            "{message}"
        );
        assert!(of(DataType::Complex64, Reduction::Max).is_err());
        assert!(of(DataType::Bool, Reduction::Sum).is_err());
        assert!(of(DataType::Half, Reduction::Mean).is_ok());
    }
}
