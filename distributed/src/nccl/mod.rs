//! NCCL for CUDA tensors (the `nccl` feature, on with the facade's `cuda` and `mpi`): an
//! [`NcclCommunicator`] over the ranks of an MPI [`Communicator`], each with its own GPU.
//!
//! MPI starts it and checks every call; NCCL moves the bytes, GPU to GPU:
//!
//! - **Bootstrap:** rank 0 makes NCCL's unique id, and MPI broadcasts it
//!   ([`unique_id`]); every rank then joins with it (`ncclCommInitRank`). A rank that
//!   cannot join (no NCCL, a device that is not a CUDA device) says so first, so every rank
//!   gets an `Err` instead of waiting for it.
//! - **Every call** is agreed over MPI first, as the MPI collectives are (the same header
//!   rows): a rank whose call, dtype or shape differs makes it an `Err` on every rank. Then
//!   the NCCL operation is queued on the device's stream, ordered with its kernels.
//! - **Bounded waits:** each call waits until its operation completed on the GPU, at most
//!   the communicator's timeout. Past it, or on an error NCCL reports (a peer gone), the
//!   NCCL communicator is aborted (`ncclCommAbort`), and that call and every later one is an
//!   `Err`.
//!
//! NCCL is loaded at run time, by the name `libnccl.so` (see [`unavailable`]). NCCL 2.10
//! or later is needed.
//!
//! ```no_run
//! # fn main() -> polytensor_core::Result<()> {
//! use polytensor_distributed::nccl::NcclCommunicator;
//! use polytensor_distributed::{Mpi, Reduction};
//! # let gpus: Vec<std::sync::Arc<dyn polytensor_core::Device>> = unimplemented!();
//! let mpi = Mpi::init()?;
//! let world = mpi.world()?;
//! let gpu = &gpus[world.rank() % gpus.len()]; // one GPU per rank
//! let nccl = NcclCommunicator::new(&world, gpu)?;
//! let gradient = polytensor_core::Tensor::full([1024], 1.0, polytensor_core::DataType::Float, gpu)?;
//! let sum = nccl.all_reduce(&gradient, Reduction::Sum)?; // on the GPU, on every rank
//! # Ok(())
//! # }
//! ```

mod collectives;
mod raw;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use polytensor_core::{DataType, Device, Error, Result, Tensor, TensorShape};
use polytensor_cuda::loader::describe;
use polytensor_cuda::CudaDevice;

use crate::header::Kind;
use crate::Communicator;

/// Why NCCL cannot be used here, if it cannot: no library loadable as `libnccl.so` (with
/// how to link the `libnccl.so.2` of NVIDIA's PyPI wheel where `POLYTENSOR_CUDA_TOOLKIT`
/// names it), or one older than NCCL 2.10.
pub fn unavailable() -> Option<String> {
    raw::check_usable().err().map(|e| e.to_string())
}

/// The loaded NCCL's version (`2.32.3`), or why NCCL cannot be used.
pub fn version() -> Result<String> {
    raw::check_usable()?;
    raw::version_code().map(raw::version_name)
}

/// An NCCL unique id: the address rank 0 listens on while the others join.
#[derive(Clone, PartialEq, Eq)]
pub struct UniqueId([u8; raw::ID_BYTES]);

impl UniqueId {
    /// Its bytes (`ncclUniqueId`).
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let head: String = self.0[..8].iter().map(|b| format!("{b:02x}")).collect();
        write!(f, "UniqueId({head}..)")
    }
}

/// Rank 0's new NCCL unique id on every rank of `mpi`: made by `ncclGetUniqueId` on rank
/// 0 and broadcast over MPI, through a tensor on `staging` (any device). Every rank calls
/// it; an `Err` on every rank if NCCL cannot be used on one.
pub fn unique_id(mpi: &Communicator, staging: &Arc<dyn Device>) -> Result<UniqueId> {
    share_id(mpi, staging, raw::check_usable().err())
}

/// [`unique_id`], refused by this rank with `refusal` (so on every rank) if given.
fn share_id(
    mpi: &Communicator,
    staging: &Arc<dyn Device>,
    mut refusal: Option<Error>,
) -> Result<UniqueId> {
    // Rank 0 makes the id before the ranks agree, so that failing to is its refusal.
    let mut id = [0u8; raw::ID_BYTES];
    if mpi.rank() == 0 && refusal.is_none() {
        match raw::unique_id() {
            Ok(made) => id = made,
            Err(e) => refusal = Some(e),
        }
    }
    let shape = TensorShape::new(&[raw::ID_BYTES])?;
    mpi.agree(refusal, Kind::Join, 0, DataType::UInt8, &shape)?;
    let shared = mpi.broadcast(&Tensor::from_slice(&id, shape, staging)?, 0)?;
    let bytes = shared.to_vec::<u8>()?;
    id.copy_from_slice(&bytes);
    Ok(UniqueId(id))
}

/// A group of processes, each with its own CUDA device, that run collectives on CUDA
/// tensors through NCCL (the ranks of an MPI communicator, which checks every call). The
/// calls are [`Communicator`]'s: every rank makes the same ones in the same order, on
/// tensors of its device; each waits until its operation completed, at most
/// [`NcclCommunicator::timeout`].
pub struct NcclCommunicator {
    /// The NCCL handle, one call at a time (agreed, queued, waited for). Declared first:
    /// it is destroyed before the device (its context) can go.
    comm: Mutex<raw::Comm>,
    mpi: Communicator,
    device: Arc<dyn Device>,
    cuda: Arc<CudaDevice>,
    timeout: Duration,
}

impl std::fmt::Debug for NcclCommunicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NcclCommunicator")
            .field("rank", &self.rank())
            .field("size", &self.size())
            .field("device", &self.device.name())
            .finish()
    }
}

impl NcclCommunicator {
    /// Every rank of `mpi` joins one NCCL communicator on its CUDA `device` (each rank a
    /// different GPU, as NCCL requires). Every rank calls it; an `Err` on every rank if one
    /// cannot join (NCCL missing or too old, or `device` not a CUDA device).
    pub fn new(mpi: &Communicator, device: &Arc<dyn Device>) -> Result<NcclCommunicator> {
        let cuda = device.clone().downcast::<CudaDevice>();
        let refusal = match &cuda {
            None => Some(Error::invalid(format!(
                "NCCL runs on CUDA devices; {} is not one",
                device.name()
            ))),
            Some(_) => raw::check_usable().err(),
        };
        let id = share_id(mpi, device, refusal)?;
        let cuda = cuda.ok_or_else(|| Error::invalid("joined NCCL without a CUDA device"))?;
        let backend = |message: String| Error::Backend {
            device: device.name().to_string(),
            message,
        };
        cuda.context()
            .bind_to_thread()
            .map_err(|e| backend(format!("binding the context: {}", describe(e))))?;
        let comm = raw::Comm::init(mpi.size(), &id.0, mpi.rank())?;
        Ok(NcclCommunicator {
            comm: Mutex::new(comm),
            mpi: mpi.clone(),
            device: device.clone(),
            cuda,
            timeout: mpi.timeout(),
        })
    }

    /// This process's rank, `0..size` (its MPI rank).
    pub fn rank(&self) -> usize {
        self.mpi.rank()
    }

    /// The number of processes.
    pub fn size(&self) -> usize {
        self.mpi.size()
    }

    /// This rank's device: every tensor of its calls is on it.
    pub fn device(&self) -> &Arc<dyn Device> {
        &self.device
    }

    /// The MPI communicator that checks every call.
    pub fn mpi(&self) -> &Communicator {
        &self.mpi
    }

    /// How long a call waits for its operation before the communicator is aborted and the
    /// call is an `Err` (the MPI communicator's timeout when made).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Set how long calls wait (for the MPI agreement and for the GPU) before they are an
    /// `Err`.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
        self.mpi.set_timeout(timeout);
    }

    /// The NCCL handle for one call on a tensor of `device`, and this rank's refusal of
    /// the call, if any (for every rank to see when they agree on it): a tensor of another
    /// device, or a communicator an earlier call aborted.
    fn begin(
        &self,
        device: &Arc<dyn Device>,
        name: &str,
    ) -> (MutexGuard<'_, raw::Comm>, Option<Error>) {
        let comm = self.comm.lock().unwrap_or_else(|e| e.into_inner());
        let refusal = if comm.is_aborted() {
            Some(Error::invalid(format!(
                "{name}: this NCCL communicator was aborted after an earlier call failed or \
                 timed out; make a new one"
            )))
        } else if !polytensor_core::same_device(device, &self.device) {
            Some(Error::invalid(format!(
                "{name}: the tensor is on {}, but this NCCL communicator runs on {}",
                device.name(),
                self.device.name()
            )))
        } else {
            None
        };
        (comm, refusal)
    }

    /// Queue `call` on the device's stream, ordered with its kernels, and wait until it
    /// completed. Past the timeout, or on an error NCCL or the device reports, the
    /// communicator is aborted and the call is an `Err`.
    fn run(&self, comm: &mut raw::Comm, what: &str, call: raw::Call) -> Result<()> {
        let backend = |message: String| Error::Backend {
            device: self.device.name().to_string(),
            message: format!("{what}: {message}"),
        };
        self.cuda
            .context()
            .bind_to_thread()
            .map_err(|e| backend(describe(e)))?;
        let stream = self.cuda.stream();
        // SAFETY: the call's addresses are the memory of tensors of this device that the
        // caller holds until this returns, and this returns once the operation completed
        // or the communicator was aborted (which stops it); the context is current.
        let queued = unsafe { call.enqueue(comm, stream.cu_stream()) };
        // What NCCL holds after a failed (or partly queued) call is unknown: abort.
        let done = queued.and_then(|()| {
            stream
                .record_event(None)
                .map_err(|e| backend(format!("recording its end: {}", describe(e))))
        });
        let done = match done {
            Ok(event) => event,
            Err(error) => {
                comm.abort();
                return Err(error);
            }
        };
        let deadline = Instant::now() + self.timeout;
        let mut polls = 0u32;
        loop {
            let failure = match done.try_is_complete() {
                Ok(true) => return Ok(()),
                Ok(false) => comm.async_error().err(),
                Err(e) => Some(backend(describe(e))),
            };
            let failure = failure.or_else(|| {
                (Instant::now() >= deadline).then(|| {
                    backend(format!(
                        "not complete after {:?}: a rank may have died or stopped calling; \
                         the NCCL communicator is aborted",
                        self.timeout
                    ))
                })
            });
            if let Some(error) = failure {
                comm.abort();
                return Err(error);
            }
            // Spin briefly (small collectives finish in microseconds), then sleep.
            polls += 1;
            if polls < 2000 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }
}

impl Drop for NcclCommunicator {
    fn drop(&mut self) {
        // The NCCL handle (dropped after this) frees its memory in the device's context.
        let _ = self.cuda.context().bind_to_thread();
    }
}

/// The device address of `tensor`'s first element (a contiguous tensor of this
/// communicator's device).
fn address(tensor: &Tensor) -> Result<u64> {
    let base = tensor
        .buffer()
        .device_address()
        .ok_or_else(|| Error::invalid("a CUDA tensor without a device address"))?;
    tensor
        .layout()
        .offset()
        .checked_mul(tensor.dtype().size())
        .and_then(|offset| base.checked_add(offset))
        .map(|at| at as u64)
        .ok_or_else(|| Error::invalid("the tensor's address overflows"))
}
