//! [`Mpi`] and its [`Communicator`]s: rank, size, barrier, sub-communicators, the timeout
//! every wait has, and the header phase every collective starts with ([`crate::header`]).
//! The collectives themselves are in [`collectives`] and [`p2p`].

mod collectives;
mod memory;
mod p2p;
mod pending;
mod raw;

use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::time::Duration;

use polytensor_core::{DataType, Error, Result, TensorShape};

use crate::header::{self, Kind, Row, WORDS};
pub use p2p::MAX_TAG;
pub use pending::Pending;
use pending::{Then, Transfer};

/// How long a wait lasts by default before it is an `Err`: `POLYTENSOR_MPI_TIMEOUT`
/// seconds, else 300 (TensorFlow's collectives wait forever unless given
/// `timeout_seconds`; a bound turns a dead rank into an error).
fn default_timeout() -> Duration {
    std::env::var("POLYTENSOR_MPI_TIMEOUT")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(Duration::from_secs(300), Duration::from_secs_f64)
}

/// MPI, started once per process, finalized when the [`Mpi`] and every communicator are
/// gone (not after an abandoned call, which could make finalizing wait forever).
struct Runtime {
    universe: ManuallyDrop<mpi::environment::Universe>,
}

// SAFETY: the universe is only dropped (MPI_Finalize), once, by the last owner of the
// runtime, under the MPI lock inside rsmpi's own bookkeeping; MPI runs at
// MPI_THREAD_SERIALIZED, so the thread that finalizes does not matter.
unsafe impl Send for Runtime {}
// SAFETY: as for `Send`: nothing is reached through a shared runtime.
unsafe impl Sync for Runtime {}

impl Drop for Runtime {
    fn drop(&mut self) {
        if !raw::is_broken() {
            // SAFETY: dropped once, here; no communicator is left (each holds the runtime).
            unsafe { ManuallyDrop::drop(&mut self.universe) };
        }
    }
}

/// MPI in this process ([`Mpi::init`]); its [`Communicator`]s keep it running.
pub struct Mpi {
    runtime: Arc<Runtime>,
}

impl Mpi {
    /// Start MPI (`MPI_Init_thread` at `MPI_THREAD_SERIALIZED`), as every rank of an
    /// `mpirun` does first; an `Err` if this process started it already.
    pub fn init() -> Result<Mpi> {
        let universe = raw::initialize()?
            .ok_or_else(|| Error::invalid("MPI is already initialized in this process"))?;
        Ok(Mpi {
            runtime: Arc::new(Runtime {
                universe: ManuallyDrop::new(universe),
            }),
        })
    }

    /// The communicator of every process of the run (`MPI_COMM_WORLD`), with errors
    /// returned rather than aborting the job.
    pub fn world(&self) -> Result<Communicator> {
        Communicator::over(raw::world()?, false, self.runtime.clone())
    }
}

/// An MPI communicator handle, freed when its last [`Communicator`] goes.
struct Handle {
    comm: raw::Comm,
    /// Whether this communicator was made by a split (and is freed here).
    owned: bool,
    rank: usize,
    size: usize,
    /// Dropped after the handle is freed.
    _runtime: Arc<Runtime>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        if self.owned && !raw::is_broken() {
            raw::free(self.comm);
        }
    }
}

/// A group of processes that run collectives together (an MPI communicator). Every member
/// makes the same calls in the same order; each call is checked across the members first,
/// so one that differs is an `Err` on every member, and each wait lasts at most
/// [`Communicator::timeout`]. Cloning shares the communicator.
#[derive(Clone)]
pub struct Communicator {
    handle: Arc<Handle>,
    timeout: Duration,
}

impl Communicator {
    fn over(comm: raw::Comm, owned: bool, runtime: Arc<Runtime>) -> Result<Communicator> {
        let (rank, size) = raw::rank_and_size(comm)?;
        Ok(Communicator {
            handle: Arc::new(Handle {
                comm,
                owned,
                rank,
                size,
                _runtime: runtime,
            }),
            timeout: default_timeout(),
        })
    }

    /// This process's rank, `0..size`.
    pub fn rank(&self) -> usize {
        self.handle.rank
    }

    /// The number of processes.
    pub fn size(&self) -> usize {
        self.handle.size
    }

    /// How long a wait lasts before it is an `Err` (`POLYTENSOR_MPI_TIMEOUT` seconds, else
    /// 300 s).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Set how long this communicator's waits last before they are an `Err` (after which
    /// MPI in this process is broken: a collective cannot be taken back).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Wait until every rank has called it (`MPI_Ibarrier`, waited for).
    pub fn barrier(&self) -> Result<()> {
        self.check_usable()?;
        // SAFETY: a barrier has no buffers.
        let request = unsafe { raw::Start::Barrier.on(self.handle.comm, false)? };
        Pending::<()>::new(
            self,
            "barrier".into(),
            request,
            Box::new([]),
            Box::new([]),
            Box::new(|_| Ok(Transfer::done(Ok(())))),
        )
        .wait()
    }

    /// The communicator of the ranks that pass the same `color` (`MPI_Comm_split`),
    /// ranked by `key` and then by their rank here; `None` on a rank that passes no color.
    /// Every rank of this communicator calls it (it blocks until they have).
    pub fn split(&self, color: Option<u32>, key: i32) -> Result<Option<Communicator>> {
        self.check_usable()?;
        let Some(comm) = raw::split(self.handle.comm, color, key)? else {
            return Ok(None);
        };
        let mut split = Communicator::over(comm, true, self.handle._runtime.clone())?;
        split.timeout = self.timeout;
        Ok(Some(split))
    }

    /// An `Err` if an earlier call was abandoned (MPI's state is then unknown).
    fn check_usable(&self) -> Result<()> {
        if raw::is_broken() {
            return Err(Error::invalid(
                "MPI in this process is broken: an earlier collective timed out or failed; \
                 restart the run",
            ));
        }
        Ok(())
    }

    /// Whether `request` of call `what` completed, with MPI's error named after the call.
    fn tested(&self, request: &mut raw::Request, what: &str) -> Result<bool> {
        raw::test(request).map_err(|e| Error::invalid(format!("{what}: {e}")))
    }

    /// Every rank's header row for a call that moves its bytes outside MPI (NCCL's), agreed
    /// as [`Communicator::collective`] agrees them: an `Err` on every rank if one differs or
    /// refuses. Waits, within the deadline.
    #[cfg(feature = "nccl")]
    pub(crate) fn agree(
        &self,
        refusal: Option<Error>,
        kind: Kind,
        argument: i64,
        dtype: DataType,
        shape: &TensorShape,
    ) -> Result<Vec<Row>> {
        self.collective(refusal, kind, argument, dtype, shape, |rows: &[Row]| {
            Ok(Transfer::done(Ok(rows.to_vec())))
        })?
        .wait()
    }

    /// Start a collective: all-gather every rank's header row for call `kind` with
    /// `argument` on a tensor of `dtype` and `shape`; once they are here, check that they
    /// agree (the arguments may differ in a broadcast by role) and that the shape fits a
    /// row, then run `then` on them (which starts the transfer). With a `refusal`, this
    /// rank refuses the call: it still takes part in the header phase (with a refusing
    /// row), so every rank fails the call, this one with its own error.
    fn collective<T>(
        &self,
        refusal: Option<Error>,
        kind: Kind,
        argument: i64,
        dtype: DataType,
        shape: &TensorShape,
        then: impl FnOnce(&[Row]) -> Result<Transfer<T>> + Send + 'static,
    ) -> Result<Pending<'_, T>> {
        self.check_usable()?;
        let what = format!(
            "{}({argument}) of {dtype} {shape} on rank {}",
            kind.name(),
            self.rank()
        );
        let row_kind = if refusal.is_some() {
            Kind::Refused
        } else {
            kind
        };
        let mine: Box<[i64]> = header::row(row_kind, argument, dtype, shape).into();
        let mut rows = vec![0i64; WORDS * self.size()].into_boxed_slice();
        let start = raw::Start::AllGather {
            send: mine.as_ptr().cast(),
            recv: rows.as_mut_ptr().cast(),
            count_per_rank: WORDS as i32,
            dtype: raw::row_type(),
        };
        // SAFETY: `mine` holds WORDS words and `rows` WORDS per rank; both are boxed
        // (their heap memory does not move) and owned by the Pending until the request
        // completes.
        let request = unsafe { start.on(self.handle.comm, false)? };
        let checked = shape.clone();
        let then: Then<T> = Box::new(move |flat| {
            if let Some(error) = refusal {
                return Err(error);
            }
            let rows = header::split_rows(flat);
            header::agree(kind.name(), &rows, kind == Kind::BroadcastByRole)?;
            header::check_rank(&checked)?;
            then(&rows)
        });
        Ok(Pending::new(self, what, request, mine, rows, then))
    }
}
