//! The MPI calls polytensor makes itself, through rsmpi's `ffi`: each one non-blocking (so
//! every wait has a deadline), each return code an `Err` (communicators return errors
//! rather than abort, `MPI_ERRORS_RETURN`), and each made under one process-wide lock, as
//! MPI runs at `MPI_THREAD_SERIALIZED`. Every `unsafe` of the crate is here.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use mpi::ffi;
use polytensor_core::{DataType, Error, Result};

use polytensor_core::collective::Reduction;

/// The lock every MPI call is made under (`MPI_THREAD_SERIALIZED`: one call at a time).
static TURN: Mutex<()> = Mutex::new(());

fn turn() -> MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Set once a call was abandoned (timed out or failed) with MPI operations possibly
/// still in flight: MPI's state in this process is then unknown.
static BROKEN: AtomicBool = AtomicBool::new(false);

/// Mark MPI in this process broken: every later call is an `Err`, and MPI is not
/// finalized (finalizing could wait forever on a dead rank).
pub(crate) fn mark_broken() {
    BROKEN.store(true, Ordering::SeqCst);
}

/// Whether a call was abandoned in this process.
pub(crate) fn is_broken() -> bool {
    BROKEN.load(Ordering::SeqCst)
}

/// An MPI communicator handle.
#[derive(Clone, Copy)]
pub(crate) struct Comm(ffi::MPI_Comm);

// SAFETY: an `MPI_Comm` is a handle into the MPI library of this process, valid in every
// thread; the calls made with it are serialised by `TURN`, as MPI_THREAD_SERIALIZED asks.
unsafe impl Send for Comm {}
// SAFETY: as for `Send`: the handle is only read, and every call through it holds `TURN`.
unsafe impl Sync for Comm {}

/// An operation in flight (`MPI_Request`), completed by [`test`].
pub(crate) struct Request(ffi::MPI_Request);

// SAFETY: as for `Comm`: a request handle is process-wide and tested under `TURN`.
unsafe impl Send for Request {}

/// An MPI datatype: which of MPI's predefined types describes elements.
#[derive(Clone, Copy)]
pub(crate) struct Type {
    handle: ffi::MPI_Datatype,
    /// Bytes of one element of this type.
    pub(crate) size: usize,
}

// SAFETY: predefined datatype handles are constants of the MPI library, valid in every
// thread.
unsafe impl Send for Type {}
// SAFETY: as for `Send`.
unsafe impl Sync for Type {}

/// An `Err` for return code `code` of `call` (MPI's own text for it).
fn check(code: c_int, call: &str) -> Result<()> {
    if code == ffi::MPI_SUCCESS as c_int {
        return Ok(());
    }
    let mut text = [0 as std::ffi::c_char; ffi::MPI_MAX_ERROR_STRING as usize];
    let mut len: c_int = 0;
    // SAFETY: `text` holds MPI_MAX_ERROR_STRING characters, as MPI_Error_string writes at
    // most; `len` is a valid out-parameter.
    let described = unsafe { ffi::MPI_Error_string(code, text.as_mut_ptr(), &mut len) };
    let message = if described == ffi::MPI_SUCCESS as c_int {
        let bytes: Vec<u8> = text[..len.clamp(0, text.len() as c_int) as usize]
            .iter()
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    } else {
        format!("error code {code}")
    };
    Err(Error::invalid(format!("{call} failed in MPI: {message}")))
}

/// Start MPI at `MPI_THREAD_SERIALIZED` through rsmpi, or `None` if it was started before.
pub(crate) fn initialize() -> Result<Option<mpi::environment::Universe>> {
    let _turn = turn();
    let Some((universe, provided)) = mpi::initialize_with_threading(mpi::Threading::Serialized)
    else {
        return Ok(None);
    };
    if provided < mpi::Threading::Serialized {
        return Err(Error::invalid(format!(
            "this MPI provides {provided:?} threading; polytensor needs MPI_THREAD_SERIALIZED"
        )));
    }
    Ok(Some(universe))
}

/// `MPI_COMM_WORLD`, set to return errors rather than abort.
pub(crate) fn world() -> Result<Comm> {
    // SAFETY: reading MPI's predefined world handle after MPI_Init.
    let comm = Comm(unsafe { ffi::RSMPI_COMM_WORLD });
    errors_return(comm)?;
    Ok(comm)
}

/// Have MPI return error codes on `comm` rather than abort the job.
fn errors_return(comm: Comm) -> Result<()> {
    let _turn = turn();
    // SAFETY: `comm` is a live communicator; ERRORS_RETURN is a predefined handler.
    check(
        unsafe { ffi::MPI_Comm_set_errhandler(comm.0, ffi::RSMPI_ERRORS_RETURN) },
        "MPI_Comm_set_errhandler",
    )
}

/// `comm`'s rank of this process and its size.
pub(crate) fn rank_and_size(comm: Comm) -> Result<(usize, usize)> {
    let _turn = turn();
    let (mut rank, mut size): (c_int, c_int) = (0, 0);
    // SAFETY: `comm` is a live communicator; both out-parameters are valid.
    unsafe {
        check(ffi::MPI_Comm_rank(comm.0, &mut rank), "MPI_Comm_rank")?;
        check(ffi::MPI_Comm_size(comm.0, &mut size), "MPI_Comm_size")?;
    }
    Ok((rank as usize, size as usize))
}

/// `MPI_Comm_split`: the communicator of the ranks that passed the same `color` (ordered
/// by `key`, then rank), or `None` for a rank that passed no color.
pub(crate) fn split(comm: Comm, color: Option<u32>, key: i32) -> Result<Option<Comm>> {
    let color = match color {
        Some(c) => c_int::try_from(c)
            .map_err(|_| Error::invalid(format!("split color {c} is above {}", c_int::MAX)))?,
        // SAFETY: reading MPI's predefined MPI_UNDEFINED.
        None => unsafe { ffi::RSMPI_UNDEFINED },
    };
    let new = {
        let _turn = turn();
        // SAFETY: reading MPI's predefined null communicator.
        let mut new = unsafe { ffi::RSMPI_COMM_NULL };
        // SAFETY: `comm` is live; `new` is a valid out-parameter.
        let code = unsafe { ffi::MPI_Comm_split(comm.0, color, key, &mut new) };
        check(code, "MPI_Comm_split")?;
        new
    };
    // SAFETY: reading MPI's predefined null communicator.
    if new == unsafe { ffi::RSMPI_COMM_NULL } {
        return Ok(None);
    }
    let comm = Comm(new);
    if let Err(e) = errors_return(comm) {
        free(comm);
        return Err(e);
    }
    Ok(Some(comm))
}

/// Free a communicator `split` made (errors are ignored: it is being dropped).
pub(crate) fn free(comm: Comm) {
    let _turn = turn();
    let mut handle = comm.0;
    // SAFETY: `comm` came from MPI_Comm_split and is freed once, by its owner's drop.
    unsafe { ffi::MPI_Comm_free(&mut handle) };
}

/// Whether `request` has completed (then it is released); an `Err` if it failed.
pub(crate) fn test(request: &mut Request) -> Result<bool> {
    let _turn = turn();
    let mut done: c_int = 0;
    // SAFETY: `request` is a live request (or MPI_REQUEST_NULL, which tests complete);
    // the status is ignored.
    let code = unsafe { ffi::MPI_Test(&mut request.0, &mut done, ffi::RSMPI_STATUS_IGNORE) };
    check(code, "MPI_Test")?;
    Ok(done != 0)
}

/// The predefined type of `dtype`'s elements for reductions, or `None` where MPI has none.
pub(crate) fn element_type(dtype: DataType) -> Option<Type> {
    // SAFETY: reading MPI's predefined datatype handles.
    let handle = unsafe {
        match dtype {
            DataType::Float => ffi::RSMPI_FLOAT,
            DataType::Double => ffi::RSMPI_DOUBLE,
            DataType::Int8 => ffi::RSMPI_INT8_T,
            DataType::Int16 => ffi::RSMPI_INT16_T,
            DataType::Int32 => ffi::RSMPI_INT32_T,
            DataType::Int64 => ffi::RSMPI_INT64_T,
            DataType::UInt8 => ffi::RSMPI_UINT8_T,
            DataType::UInt16 => ffi::RSMPI_UINT16_T,
            DataType::UInt32 => ffi::RSMPI_UINT32_T,
            DataType::UInt64 => ffi::RSMPI_UINT64_T,
            _ => return None,
        }
    };
    Some(Type {
        handle,
        size: dtype.size(),
    })
}

/// The type of header rows' words (`int64_t`).
pub(crate) fn row_type() -> Type {
    Type {
        // SAFETY: reading MPI's predefined datatype handle.
        handle: unsafe { ffi::RSMPI_INT64_T },
        size: 8,
    }
}

/// The unsigned type as wide as possible (up to 8 bytes) that divides elements of
/// `bytes` bytes, to move any fixed-size element as a whole number of words.
pub(crate) fn word_type(bytes: usize) -> Type {
    // SAFETY: reading MPI's predefined datatype handles.
    let (handle, size) = unsafe {
        match bytes {
            b if b % 8 == 0 => (ffi::RSMPI_UINT64_T, 8),
            b if b % 4 == 0 => (ffi::RSMPI_UINT32_T, 4),
            b if b % 2 == 0 => (ffi::RSMPI_UINT16_T, 2),
            _ => (ffi::RSMPI_UINT8_T, 1),
        }
    };
    Type { handle, size }
}

/// MPI's predefined operation for `reduction` (`Mean` sums).
fn operation(reduction: Reduction) -> ffi::MPI_Op {
    // SAFETY: reading MPI's predefined operation handles.
    unsafe {
        match reduction {
            Reduction::Sum | Reduction::Mean => ffi::RSMPI_SUM,
            Reduction::Prod => ffi::RSMPI_PROD,
            Reduction::Min => ffi::RSMPI_MIN,
            Reduction::Max => ffi::RSMPI_MAX,
        }
    }
}

/// `count` as MPI's `int`, or an `Err` naming the collective.
pub(crate) fn count(count: usize, what: &str) -> Result<c_int> {
    c_int::try_from(count).map_err(|_| {
        Error::invalid(format!(
            "{what} moves {count} elements in one call; MPI counts at most {}",
            c_int::MAX
        ))
    })
}

/// The non-blocking operations, one variant per MPI call, with their buffers as raw
/// pointers.
pub(crate) enum Start {
    AllReduce {
        send: *const c_void,
        recv: *mut c_void,
        count: c_int,
        dtype: Type,
        reduction: Reduction,
    },
    ReduceScatter {
        send: *const c_void,
        recv: *mut c_void,
        count_per_rank: c_int,
        dtype: Type,
        reduction: Reduction,
    },
    AllGather {
        send: *const c_void,
        recv: *mut c_void,
        count_per_rank: c_int,
        dtype: Type,
    },
    AllToAll {
        send: *const c_void,
        recv: *mut c_void,
        count_per_rank: c_int,
        dtype: Type,
    },
    Broadcast {
        buffer: *mut c_void,
        count: c_int,
        dtype: Type,
        root: c_int,
    },
    Send {
        buffer: *const c_void,
        count: c_int,
        dtype: Type,
        peer: c_int,
        tag: c_int,
    },
    Recv {
        buffer: *mut c_void,
        count: c_int,
        dtype: Type,
        peer: c_int,
        tag: c_int,
    },
    Barrier,
}

// SAFETY: the pointers of a `Start` point into memory owned by the transfer that carries
// it, which moves with it (heap memory, so moving does not move the bytes).
unsafe impl Send for Start {}

impl Start {
    /// Start the operation on `comm`: non-blocking (`MPI_I*`), or, with `blocking`, run to
    /// completion by MPI's blocking call (whose algorithms are faster than the
    /// non-blocking ones' for mid-sized reductions), giving a request already complete.
    ///
    /// # Safety
    ///
    /// Every buffer pointer must be valid for the bytes the operation reads or writes
    /// (counts times element sizes, times the communicator's size where the call says per
    /// rank), and stay valid and otherwise unaccessed until [`test`] reports the returned
    /// request complete.
    pub(crate) unsafe fn on(self, comm: Comm, blocking: bool) -> Result<Request> {
        let _turn = turn();
        // SAFETY: reading MPI's predefined null request.
        let mut request = Request(unsafe { ffi::RSMPI_REQUEST_NULL });
        // The non-blocking call's request (none for the blocking call, which completes).
        let r = (!blocking).then_some(&mut request.0 as *mut ffi::MPI_Request);
        let c = comm.0;
        // `$blocking(args)` or `$started(args, request)`: its return code and name. (The
        // blocking receive also takes a status, after the arguments.)
        macro_rules! call {
            ($blocking:ident / $started:ident ($($arg:expr),*) $(, status $status:expr)?) => {
                match r {
                    None => (ffi::$blocking($($arg,)* $($status)?), stringify!($blocking)),
                    Some(r) => (ffi::$started($($arg,)* r), stringify!($started)),
                }
            };
        }
        // SAFETY: the caller guarantees the buffers (used until the blocking call returns,
        // or until the request completes); `comm` is live; `r` is a valid out-parameter.
        let (code, call) = unsafe {
            match self {
                Start::AllReduce {
                    send,
                    recv,
                    count,
                    dtype,
                    reduction,
                } => call!(
                    MPI_Allreduce
                        / MPI_Iallreduce(send, recv, count, dtype.handle, operation(reduction), c)
                ),
                Start::ReduceScatter {
                    send,
                    recv,
                    count_per_rank,
                    dtype,
                    reduction,
                } => call!(
                    MPI_Reduce_scatter_block
                        / MPI_Ireduce_scatter_block(
                            send,
                            recv,
                            count_per_rank,
                            dtype.handle,
                            operation(reduction),
                            c
                        )
                ),
                Start::AllGather {
                    send,
                    recv,
                    count_per_rank: n,
                    dtype,
                } => call!(
                    MPI_Allgather / MPI_Iallgather(send, n, dtype.handle, recv, n, dtype.handle, c)
                ),
                Start::AllToAll {
                    send,
                    recv,
                    count_per_rank: n,
                    dtype,
                } => call!(
                    MPI_Alltoall / MPI_Ialltoall(send, n, dtype.handle, recv, n, dtype.handle, c)
                ),
                Start::Broadcast {
                    buffer,
                    count,
                    dtype,
                    root,
                } => call!(MPI_Bcast / MPI_Ibcast(buffer, count, dtype.handle, root, c)),
                Start::Send {
                    buffer,
                    count,
                    dtype,
                    peer,
                    tag,
                } => call!(MPI_Send / MPI_Isend(buffer, count, dtype.handle, peer, tag, c)),
                Start::Recv {
                    buffer,
                    count,
                    dtype,
                    peer,
                    tag,
                } => call!(
                    MPI_Recv / MPI_Irecv(buffer, count, dtype.handle, peer, tag, c),
                    status ffi::RSMPI_STATUS_IGNORE
                ),
                Start::Barrier => call!(MPI_Barrier / MPI_Ibarrier(c)),
            }
        };
        check(code, call)?;
        Ok(request)
    }
}
