//! [`Pending`]: a collective or transfer in flight, the handle the non-blocking forms
//! return. Each runs in two phases: the header (every rank's row, all-gathered, or the
//! sender's row, received), checked before any tensor byte moves, then the transfer of the
//! tensor itself. Waiting has a deadline, so a rank that died, stopped or called something
//! else makes this rank's call an `Err` rather than a hang.

use std::time::{Duration, Instant};

use polytensor_core::{Error, Result, Tensor};

use super::memory::{Incoming, Outgoing};
use super::raw::{self, Request};
use super::Communicator;

/// The tensor bytes of a collective in flight: its MPI requests, the memory they read and
/// write, and what makes the result once they complete.
pub(crate) struct Transfer<T> {
    /// The operations to start, once the transfer is owned by its [`Pending`].
    starts: Vec<raw::Start>,
    requests: Vec<Request>,
    outgoing: Vec<Outgoing>,
    incoming: Option<Incoming>,
    finish: Box<dyn FnOnce(Option<Tensor>) -> Result<T> + Send>,
}

impl<T> Transfer<T> {
    /// A transfer over `outgoing` and `incoming` memory, whose result `finish` makes from
    /// the received tensor; [`Transfer::with_start`] adds its operations.
    pub(crate) fn new(
        outgoing: Vec<Outgoing>,
        incoming: Option<Incoming>,
        finish: impl FnOnce(Option<Tensor>) -> Result<T> + Send + 'static,
    ) -> Self {
        Transfer {
            starts: Vec::new(),
            requests: Vec::new(),
            outgoing,
            incoming,
            finish: Box::new(finish),
        }
    }

    /// A transfer that moves nothing (empty tensors) and gives `result`.
    pub(crate) fn done(result: Result<T>) -> Self
    where
        T: Send + 'static,
    {
        Transfer::new(Vec::new(), None, move |_| result)
    }

    /// The transfer, with `start` to be started (by the [`Pending`] that owns it) as one
    /// more of its requests.
    ///
    /// # Safety
    ///
    /// `start`'s buffers lie in this transfer's memory, as [`raw::Start::on`] requires.
    pub(crate) unsafe fn with_start(mut self, start: raw::Start) -> Self {
        self.starts.push(start);
        self
    }
}

/// What comes after the header: the transfer, started from the rows the header phase
/// brought (every rank's, or the sender's).
pub(crate) type Then<T> = Box<dyn FnOnce(&[i64]) -> Result<Transfer<T>> + Send>;

enum Phase<T> {
    /// The header rows in flight.
    Header {
        request: Request,
        /// This rank's row (sent), held until the request completes.
        _mine: Box<[i64]>,
        /// The rows received.
        rows: Box<[i64]>,
        then: Then<T>,
    },
    /// The tensor bytes in flight.
    Moving(Transfer<T>),
    /// Finished: the result, until `wait` takes it.
    Finished(Option<Result<T>>),
}

/// A collective or transfer in flight (the non-blocking forms' handle, MPI's request):
/// [`Pending::wait`] gives its result, [`Pending::test`] says whether it is ready. Dropped
/// unfinished, it is waited for (memory MPI may still write is never freed early).
#[must_use = "a collective in flight completes only when waited for"]
pub struct Pending<'c, T = Tensor> {
    comm: &'c Communicator,
    /// Whether the transfer runs MPI's blocking calls (the blocking forms' choice).
    blocking: bool,
    /// The call, for messages: `all_reduce(sum) of float32 [4]`.
    what: String,
    phase: Phase<T>,
}

impl<'c, T> Pending<'c, T> {
    /// A call whose header phase is `request`, exchanging `mine` into `rows`.
    pub(crate) fn new(
        comm: &'c Communicator,
        what: String,
        request: Request,
        mine: Box<[i64]>,
        rows: Box<[i64]>,
        then: Then<T>,
    ) -> Self {
        Pending {
            comm,
            blocking: false,
            what,
            phase: Phase::Header {
                request,
                _mine: mine,
                rows,
                then,
            },
        }
    }

    /// A call with no header phase: its transfer, started.
    pub(crate) fn moving(
        comm: &'c Communicator,
        what: String,
        transfer: Transfer<T>,
    ) -> Result<Self> {
        let mut pending = Pending {
            comm,
            blocking: false,
            what,
            phase: Phase::Finished(None),
        };
        pending.launch(transfer)?;
        Ok(pending)
    }

    /// The call, with its transfer run by MPI's blocking calls (the header phase stays
    /// non-blocking, with its deadline).
    pub(crate) fn blocking(mut self) -> Self {
        self.blocking = true;
        self
    }

    /// Start `transfer`'s operations, now that the Pending owns it: the phase becomes
    /// `Moving`, or the error if a start failed (the transfer leaked and MPI marked broken
    /// if others had started, as they may still use its memory).
    fn launch(&mut self, mut transfer: Transfer<T>) -> Result<()> {
        let comm = self.comm.handle.comm;
        for start in std::mem::take(&mut transfer.starts) {
            // SAFETY: `with_start`'s caller promised the buffers lie in the transfer's
            // memory, which this Pending holds until the requests complete.
            match unsafe { start.on(comm, self.blocking) } {
                Ok(request) => transfer.requests.push(request),
                Err(e) => {
                    if !transfer.requests.is_empty() {
                        raw::mark_broken();
                        std::mem::forget(transfer);
                    }
                    return Err(e);
                }
            }
        }
        self.phase = Phase::Moving(transfer);
        Ok(())
    }

    /// Advance as far as MPI allows without blocking: `Ok(true)` once the result is
    /// ready (then [`Pending::wait`] returns at once).
    pub fn test(&mut self) -> Result<bool> {
        loop {
            match &mut self.phase {
                Phase::Finished(_) => return Ok(true),
                Phase::Header { request, .. } => {
                    if !self.comm.tested(request, &self.what)? {
                        return Ok(false);
                    }
                    let Phase::Header { rows, then, .. } =
                        std::mem::replace(&mut self.phase, Phase::Finished(None))
                    else {
                        unreachable!("the phase was Header")
                    };
                    if let Err(e) = then(&rows).and_then(|transfer| self.launch(transfer)) {
                        self.phase = Phase::Finished(Some(Err(e)));
                    }
                }
                Phase::Moving(transfer) => {
                    for request in &mut transfer.requests {
                        if !self.comm.tested(request, &self.what)? {
                            return Ok(false);
                        }
                    }
                    let Phase::Moving(transfer) =
                        std::mem::replace(&mut self.phase, Phase::Finished(None))
                    else {
                        unreachable!("the phase was Moving")
                    };
                    drop(transfer.outgoing);
                    let received = transfer.incoming.map(Incoming::into_tensor).transpose();
                    let result = received.and_then(|tensor| (transfer.finish)(tensor));
                    self.phase = Phase::Finished(Some(result));
                }
            }
        }
    }

    /// Block until the result is ready, at most the communicator's timeout
    /// ([`Communicator::set_timeout`]); after that, an `Err`, and MPI in this process is
    /// marked broken (every later call is an `Err`).
    pub fn wait(mut self) -> Result<T> {
        let timeout = self.comm.timeout();
        self.wait_for(timeout)
    }

    fn wait_for(&mut self, timeout: Duration) -> Result<T> {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            match self.test() {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => {
                    self.abandon();
                    return Err(e);
                }
            }
            if start.elapsed() > timeout {
                self.abandon();
                return Err(Error::invalid(format!(
                    "{} did not complete within {timeout:?} on rank {} of {}: another rank \
                     died, stopped or made a different call (Collective has timed out \
                     waiting for other workers); MPI in this process is now broken",
                    self.what,
                    self.comm.rank(),
                    self.comm.size()
                )));
            }
            // Spin first (MPI progresses inside MPI_Test), then let other threads and
            // ranks run: the machine may have fewer cores than ranks.
            spins = spins.saturating_add(1);
            if spins > 64 {
                std::thread::yield_now();
            }
        }
        match std::mem::replace(&mut self.phase, Phase::Finished(None)) {
            Phase::Finished(Some(result)) => result,
            _ => Err(Error::invalid(format!(
                "{}: the result was already taken",
                self.what
            ))),
        }
    }

    /// Give up on the call: MPI may still write its memory, so it is leaked rather than
    /// freed, and MPI in this process is marked broken.
    fn abandon(&mut self) {
        let phase = std::mem::replace(&mut self.phase, Phase::Finished(None));
        if !matches!(phase, Phase::Finished(_)) {
            std::mem::forget(phase);
            raw::mark_broken();
        }
    }
}

impl<T> Drop for Pending<'_, T> {
    fn drop(&mut self) {
        if !matches!(self.phase, Phase::Finished(_)) {
            let timeout = self.comm.timeout();
            let _ = self.wait_for(timeout);
        }
    }
}
