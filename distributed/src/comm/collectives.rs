//! The collectives on tensors: all-reduce, reduce-scatter, broadcast (from a rank, or from
//! whichever rank sends), all-gather and all-to-all, each as a non-blocking `start_*`
//! returning a [`Pending`] and a blocking form that waits for it.

use std::ffi::c_void;
use std::sync::Arc;

use polytensor_core::collective::Reduction;
use polytensor_core::{BinaryOp, DataType, Device, Error, Result, Tensor, TensorShape};

use super::memory::{outgoing, Incoming};
use super::pending::Transfer;
use super::raw::{self, Start};
use super::{Communicator, Pending};
use crate::header::{self, Kind, Row};
use crate::rules::{check_pod, check_root, chunk_shape, gathered_shape};

/// The dtype `reduction` runs in for `dtype` (f16 and bf16 widen to f32), or an `Err`
/// where it is not defined.
fn reduced_dtype(dtype: DataType, reduction: Reduction, name: &str) -> Result<DataType> {
    let undefined = || {
        Error::invalid(format!(
            "{name}({}) is not defined for {dtype}",
            reduction.name()
        ))
    };
    match dtype {
        DataType::Half | DataType::BFloat16 => Ok(DataType::Float),
        DataType::Float | DataType::Double => Ok(dtype),
        _ if raw::element_type(dtype).is_some() && reduction != Reduction::Mean => Ok(dtype),
        _ => Err(undefined()),
    }
}

/// A tensor's bytes as whole words: the MPI type and how many of them.
pub(super) fn words(num_elements: usize, dtype: DataType, name: &str) -> Result<(raw::Type, i32)> {
    let word = raw::word_type(dtype.size());
    let count = num_elements
        .checked_mul(dtype.size() / word.size)
        .ok_or_else(|| Error::invalid(format!("{name}: too many elements")))?;
    Ok((word, raw::count(count, name)?))
}

/// `result`'s elements written into `target` (same dtype and shape, not shared), which is
/// returned.
fn copy_into(result: &Tensor, mut target: Tensor) -> Result<Tensor> {
    let bytes = result.to_bytes()?;
    if !bytes.is_empty() {
        let device = target.device().clone();
        device.copy_from_host(&bytes, &mut target.try_out_view()?)?;
    }
    Ok(target)
}

/// A transfer that receives a new tensor of `shape` and `dtype` on `device` by the
/// operation `start` makes for the memory it is given (none for an empty tensor).
///
/// # Safety
///
/// That operation writes at most the tensor's bytes.
pub(super) unsafe fn receiving(
    shape: TensorShape,
    dtype: DataType,
    device: &Arc<dyn Device>,
    start: impl FnOnce(*mut c_void) -> Start,
) -> Result<Transfer<Tensor>> {
    if shape.num_elements() == 0 {
        return Ok(Transfer::done(Tensor::zeros(shape, dtype, device)));
    }
    let incoming = Incoming::new(shape, dtype, device)?;
    let start = start(incoming.ptr);
    let transfer = Transfer::new(Vec::new(), Some(incoming), received);
    // SAFETY: the transfer has room for the whole tensor, all that `start` writes (the
    // caller's promise).
    Ok(unsafe { transfer.with_start(start) })
}

/// The received tensor, as the result of a transfer that receives one.
pub(super) fn received(tensor: Option<Tensor>) -> Result<Tensor> {
    tensor.ok_or_else(|| Error::invalid("the transfer received no tensor"))
}

impl Communicator {
    /// The elementwise `reduction` of every rank's `tensor` (one dtype and shape on every
    /// rank), on `tensor`'s device on every rank (`MPI_Allreduce`). Integers and floats;
    /// f16 and bf16 are reduced in f32 and rounded once; `Mean` is for floats.
    pub fn all_reduce(&self, tensor: &Tensor, reduction: Reduction) -> Result<Tensor> {
        self.start_all_reduce(tensor, reduction)?.blocking().wait()
    }

    /// [`all_reduce`](Self::all_reduce), with the result replacing `tensor` (its old
    /// buffer is released once no other tensor shares it).
    pub fn all_reduce_in_place(&self, tensor: &mut Tensor, reduction: Reduction) -> Result<()> {
        *tensor = self.all_reduce(tensor, reduction)?;
        Ok(())
    }

    /// [`all_reduce`](Self::all_reduce) into `out` (the input's dtype and shape, shared by
    /// no other tensor), which it returns: MPI writes straight into a host tensor's memory,
    /// so a loop that reuses `out` allocates nothing (MPI's out-of-place form with the
    /// caller's buffer). A bad `out` is an `Err` on every rank.
    pub fn all_reduce_into(
        &self,
        tensor: &Tensor,
        out: Tensor,
        reduction: Reduction,
    ) -> Result<Tensor> {
        self.start_all_reduce_into(tensor, out, reduction)?
            .blocking()
            .wait()
    }

    /// [`all_reduce_into`](Self::all_reduce_into), started.
    pub fn start_all_reduce_into(
        &self,
        tensor: &Tensor,
        out: Tensor,
        reduction: Reduction,
    ) -> Result<Pending<'_>> {
        self.start_reduction(Kind::AllReduce, tensor, Some(out), reduction)
    }

    /// [`all_reduce`](Self::all_reduce), started: the handle's
    /// [`wait`](Pending::wait) gives the result. Every rank starts its collectives in the
    /// same order.
    pub fn start_all_reduce(&self, tensor: &Tensor, reduction: Reduction) -> Result<Pending<'_>> {
        self.start_reduction(Kind::AllReduce, tensor, None, reduction)
    }

    /// The elementwise `reduction` of every rank's `tensor`, scattered: rank `r` gets the
    /// `r`-th of `size` equal chunks along the first dim (`MPI_Reduce_scatter_block`,
    /// PyTorch's `reduce_scatter_tensor`). The first dim must split evenly.
    pub fn reduce_scatter(&self, tensor: &Tensor, reduction: Reduction) -> Result<Tensor> {
        self.start_reduce_scatter(tensor, reduction)?
            .blocking()
            .wait()
    }

    /// [`reduce_scatter`](Self::reduce_scatter), started.
    pub fn start_reduce_scatter(
        &self,
        tensor: &Tensor,
        reduction: Reduction,
    ) -> Result<Pending<'_>> {
        self.start_reduction(Kind::ReduceScatter, tensor, None, reduction)
    }

    /// All-reduce or reduce-scatter (`kind`) of `tensor` by `reduction`, into `out` if
    /// given.
    fn start_reduction(
        &self,
        kind: Kind,
        tensor: &Tensor,
        out: Option<Tensor>,
        reduction: Reduction,
    ) -> Result<Pending<'_>> {
        let (size, name) = (self.size(), kind.name());
        let refusal = out.as_ref().and_then(|out| {
            if out.dtype() != tensor.dtype() || out.shape() != tensor.shape() {
                Some(Error::invalid(format!(
                    "{name}_into: the output is {} {} but the input {} {}",
                    out.dtype(),
                    out.shape(),
                    tensor.dtype(),
                    tensor.shape()
                )))
            } else if !out.ref_count_is_one() {
                Some(Error::invalid(format!(
                    "{name}_into needs an output no other tensor shares"
                )))
            } else {
                None
            }
        });
        let tensor = tensor.clone();
        self.collective(
            refusal,
            kind,
            reduction as i64,
            tensor.dtype(),
            &tensor.shape().clone(),
            move |_: &[Row]| {
                let dtype = tensor.dtype();
                let work_dtype = reduced_dtype(dtype, reduction, name)?;
                let work = tensor.cast(work_dtype)?;
                let out_shape = match kind {
                    Kind::ReduceScatter => chunk_shape(work.shape(), size, name)?,
                    _ => work.shape().clone(),
                };
                let device = work.device().clone();
                // MPI writes into `out` itself unless the result is computed after it
                // arrives (a mean, a widened dtype); then it is copied there at the end.
                let direct = work_dtype == dtype && reduction != Reduction::Mean;
                let (into, target) = match out {
                    Some(out) if direct => (Some(out), None),
                    other => (None, other),
                };
                let empty_shape = out_shape.clone();
                let finish = move |received: Option<Tensor>| -> Result<Tensor> {
                    let result = match received {
                        Some(result) => result,
                        None => Tensor::zeros(empty_shape, work_dtype, &device)?,
                    };
                    let result = if reduction == Reduction::Mean {
                        let ranks = Tensor::full([], size as f64, work_dtype, &device)?;
                        result.binary(BinaryOp::Div, &ranks)?
                    } else {
                        result
                    };
                    let result = result.cast(dtype)?;
                    match target {
                        Some(target) => copy_into(&result, target),
                        None => Ok(result),
                    }
                };
                let count = out_shape.num_elements();
                if count == 0 {
                    return Ok(Transfer::new(Vec::new(), None, move |_| finish(into)));
                }
                let element = raw::element_type(work_dtype).ok_or_else(|| {
                    Error::invalid(format!("{name} has no MPI type for {work_dtype}"))
                })?;
                let send = outgoing(&work)?;
                let incoming = match into {
                    Some(out) => Incoming::into_existing(out)?,
                    None => Incoming::new(out_shape.clone(), work_dtype, work.device())?,
                };
                let start = match kind {
                    Kind::ReduceScatter => Start::ReduceScatter {
                        send: send.ptr,
                        recv: incoming.ptr,
                        count_per_rank: raw::count(count, name)?,
                        dtype: element,
                        reduction,
                    },
                    _ => Start::AllReduce {
                        send: send.ptr,
                        recv: incoming.ptr,
                        count: raw::count(count, name)?,
                        dtype: element,
                        reduction,
                    },
                };
                let transfer = Transfer::new(vec![send], Some(incoming), finish);
                // SAFETY: the transfer holds the whole input (size times the chunk for a
                // reduce-scatter) and room for the output.
                Ok(unsafe { transfer.with_start(start) })
            },
        )
    }

    /// Rank `root`'s `tensor` on every rank (`MPI_Bcast`): each rank passes a tensor of
    /// the same dtype and shape, which the root's replaces (only the root's elements are
    /// read), on each rank's tensor's device. Any fixed-size dtype.
    pub fn broadcast(&self, tensor: &Tensor, root: usize) -> Result<Tensor> {
        self.start_broadcast(tensor, root)?.blocking().wait()
    }

    /// [`broadcast`](Self::broadcast), started.
    pub fn start_broadcast(&self, tensor: &Tensor, root: usize) -> Result<Pending<'_>> {
        let size = self.size();
        self.start_bcast(
            Kind::Broadcast,
            root as i64,
            tensor.dtype(),
            tensor.shape().clone(),
            tensor.device().clone(),
            (self.rank() == root).then(|| tensor.clone()),
            move |_: &[Row]| check_root(root, size),
        )
    }

    /// Send `tensor` to every other rank, each of which calls
    /// [`broadcast_recv`](Self::broadcast_recv) (TensorFlow's `CollectiveBcastSendV2`: the
    /// root is whichever rank sends). Returns `tensor`.
    pub fn broadcast_send(&self, tensor: &Tensor) -> Result<Tensor> {
        self.start_broadcast_by_role(
            tensor.dtype(),
            tensor.shape().clone(),
            tensor.device().clone(),
            Some(tensor.clone()),
        )?
        .blocking()
        .wait()
    }

    /// The tensor of `shape` and `dtype` that the one rank calling
    /// [`broadcast_send`](Self::broadcast_send) sends, on `device`
    /// (`CollectiveBcastRecvV2`).
    pub fn broadcast_recv(
        &self,
        shape: &TensorShape,
        dtype: DataType,
        device: &Arc<dyn Device>,
    ) -> Result<Tensor> {
        self.start_broadcast_by_role(dtype, shape.clone(), device.clone(), None)?
            .blocking()
            .wait()
    }

    /// A broadcast whose root is the rank that passes `sent`.
    fn start_broadcast_by_role(
        &self,
        dtype: DataType,
        shape: TensorShape,
        device: Arc<dyn Device>,
        sent: Option<Tensor>,
    ) -> Result<Pending<'_>> {
        let role = i64::from(sent.is_some());
        self.start_bcast(
            Kind::BroadcastByRole,
            role,
            dtype,
            shape,
            device,
            sent,
            header::sender,
        )
    }

    /// A broadcast of a tensor of `dtype` and `shape` whose root `root_of` finds in the
    /// rows; `sent` is this rank's tensor if it is the root.
    #[allow(clippy::too_many_arguments)]
    fn start_bcast(
        &self,
        kind: Kind,
        argument: i64,
        dtype: DataType,
        shape: TensorShape,
        device: Arc<dyn Device>,
        sent: Option<Tensor>,
        root_of: impl FnOnce(&[Row]) -> Result<usize> + Send + 'static,
    ) -> Result<Pending<'_>> {
        let rank = self.rank();
        let name = kind.name();
        self.collective(
            None,
            kind,
            argument,
            dtype,
            &shape.clone(),
            move |rows: &[Row]| {
                let root = root_of(rows)?;
                check_pod(dtype, name)?;
                let (word, count) = words(shape.num_elements(), dtype, name)?;
                match sent.filter(|_| rank == root) {
                    Some(tensor) => {
                        if count == 0 {
                            return Ok(Transfer::done(Ok(tensor)));
                        }
                        let send = outgoing(&tensor)?;
                        let start = Start::Broadcast {
                            buffer: send.ptr.cast_mut(),
                            count,
                            dtype: word,
                            root: root as i32,
                        };
                        let transfer = Transfer::new(vec![send], None, move |_| Ok(tensor));
                        // SAFETY: the transfer holds the root's whole tensor; MPI only reads
                        // the root's buffer.
                        Ok(unsafe { transfer.with_start(start) })
                    }
                    // SAFETY: `count` words are the whole tensor.
                    None => unsafe {
                        receiving(shape, dtype, &device, |buffer| Start::Broadcast {
                            buffer,
                            count,
                            dtype: word,
                            root: root as i32,
                        })
                    },
                }
            },
        )
    }

    /// Every rank's `tensor` (one dtype and shape on every rank) concatenated along the
    /// first dim in rank order (`MPI_Allgather`, TensorFlow's `CollectiveGatherV2`); a
    /// scalar gathers into a vector. Any fixed-size dtype.
    pub fn all_gather(&self, tensor: &Tensor) -> Result<Tensor> {
        self.start_all_gather(tensor)?.blocking().wait()
    }

    /// [`all_gather`](Self::all_gather), started.
    pub fn start_all_gather(&self, tensor: &Tensor) -> Result<Pending<'_>> {
        self.start_exchange(Kind::AllGather, tensor)
    }

    /// Rank `r`'s `j`-th chunk of `tensor` (along the first dim, split into `size` equal
    /// chunks) sent to rank `j`, which puts it `r`-th (`MPI_Alltoall`, PyTorch's
    /// `all_to_all_single`). The first dim must split evenly.
    pub fn all_to_all(&self, tensor: &Tensor) -> Result<Tensor> {
        self.start_all_to_all(tensor)?.blocking().wait()
    }

    /// [`all_to_all`](Self::all_to_all), started.
    pub fn start_all_to_all(&self, tensor: &Tensor) -> Result<Pending<'_>> {
        self.start_exchange(Kind::AllToAll, tensor)
    }

    /// All-gather or all-to-all (`kind`) of `tensor`.
    fn start_exchange(&self, kind: Kind, tensor: &Tensor) -> Result<Pending<'_>> {
        let (size, name) = (self.size(), kind.name());
        let tensor = tensor.clone();
        self.collective(
            None,
            kind,
            0,
            tensor.dtype(),
            &tensor.shape().clone(),
            move |_: &[Row]| {
                let dtype = tensor.dtype();
                check_pod(dtype, name)?;
                let (per_rank, out_shape) = match kind {
                    Kind::AllToAll => (
                        chunk_shape(tensor.shape(), size, name)?.num_elements(),
                        tensor.shape().clone(),
                    ),
                    _ => (tensor.num_elements(), gathered_shape(tensor.shape(), size)?),
                };
                let (word, count_per_rank) = words(per_rank, dtype, name)?;
                let device = tensor.device().clone();
                if out_shape.num_elements() == 0 {
                    return Ok(Transfer::done(Tensor::zeros(out_shape, dtype, &device)));
                }
                let send = outgoing(&tensor)?;
                let incoming = Incoming::new(out_shape, dtype, &device)?;
                let (send_ptr, recv) = (send.ptr, incoming.ptr);
                let start = match kind {
                    Kind::AllToAll => Start::AllToAll {
                        send: send_ptr,
                        recv,
                        count_per_rank,
                        dtype: word,
                    },
                    _ => Start::AllGather {
                        send: send_ptr,
                        recv,
                        count_per_rank,
                        dtype: word,
                    },
                };
                let transfer = Transfer::new(vec![send], Some(incoming), received);
                // SAFETY: the transfer holds this rank's tensor (size chunks for
                // all-to-all) and room for size of them.
                Ok(unsafe { transfer.with_start(start) })
            },
        )
    }
}

crate::collectives_by_own_methods!(Communicator);
