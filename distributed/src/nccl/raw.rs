//! NCCL's C API through cudarc (`cudarc::nccl`, loaded at run time): every unsafe call of
//! the NCCL path is here. cudarc panics on a call into a library it cannot load, or into a
//! function the loaded NCCL lacks, so the library is checked first ([`unavailable`]) and
//! its version before any call newer than NCCL 2.10 ([`MIN_VERSION`]).

use std::ffi::{c_void, CStr};
use std::mem::MaybeUninit;

use cudarc::driver::sys::CUstream;
use cudarc::nccl::result::NcclError;
use cudarc::nccl::sys;
use polytensor_core::collective::Reduction;
use polytensor_core::{DataType, Error, Result};

/// Bytes of an NCCL unique id (`NCCL_UNIQUE_ID_BYTES`).
pub(crate) const ID_BYTES: usize = 128;

/// The oldest NCCL this runs on, as NCCL numbers versions: 2.10 brought `ncclAvg` and
/// bfloat16.
pub(crate) const MIN_VERSION: i32 = 2_10_00;

/// Why NCCL cannot be loaded, if it cannot. cudarc loads it by the name `libnccl.so` (and
/// not `libnccl.so.2`, the only name NVIDIA's PyPI wheel has), so the reason says how to
/// link a wheel's library where it is found.
pub(crate) fn unavailable() -> Option<String> {
    // SAFETY: only tries to open the library; calls nothing in it.
    if unsafe { sys::is_culib_present() } {
        return None;
    }
    let mut why = "no NCCL (libnccl.so) could be loaded: install NVIDIA's NCCL (libnccl2 and \
                   libnccl-dev), or link libnccl.so to the libnccl.so.2 of the PyPI wheel \
                   nvidia-nccl-cu12 in a directory on LD_LIBRARY_PATH"
        .to_string();
    let wheel = polytensor_cuda::loader::Toolkit::from_env()
        .map(|toolkit| toolkit.root.join("nccl/lib/libnccl.so.2"))
        .filter(|path| path.is_file());
    if let Some(wheel) = wheel {
        why += &format!(
            " ({} is there, but is not found by that name: `ln -s {} <dir>/libnccl.so` and \
             start the program with <dir> on LD_LIBRARY_PATH)",
            wheel.display(),
            wheel.display()
        );
    }
    Some(why)
}

/// The loaded NCCL's version number (`2_32_03` for 2.32.3), once [`unavailable`] said it
/// loads.
pub(crate) fn version_code() -> Result<i32> {
    cudarc::nccl::result::get_nccl_version().map_err(|e| failed("ncclGetVersion", e, None))
}

/// A version number as `major.minor.patch` (numbered `major*1000 + minor*100 + patch`
/// before NCCL 2.9).
pub(crate) fn version_name(code: i32) -> String {
    if code >= 2_09_00 {
        format!("{}.{}.{}", code / 10000, code / 100 % 100, code % 100)
    } else {
        format!("{}.{}.{}", code / 1000, code / 100 % 10, code % 100)
    }
}

/// An `Err` unless NCCL loads and is at least [`MIN_VERSION`].
pub(crate) fn check_usable() -> Result<()> {
    if let Some(why) = unavailable() {
        return Err(Error::DeviceUnavailable {
            device: "nccl".into(),
            why,
        });
    }
    let code = version_code()?;
    if code < MIN_VERSION {
        return Err(Error::DeviceUnavailable {
            device: "nccl".into(),
            why: format!(
                "NCCL {} is loaded; polytensor needs NCCL {} or later",
                version_name(code),
                version_name(MIN_VERSION)
            ),
        });
    }
    Ok(())
}

/// A new unique id (`ncclGetUniqueId`: the address rank 0 listens on for the others to
/// join), once [`check_usable`] passed.
pub(crate) fn unique_id() -> Result<[u8; ID_BYTES]> {
    let id =
        cudarc::nccl::result::get_uniqueid().map_err(|e| failed("ncclGetUniqueId", e, None))?;
    Ok(id.internal.map(|c| c as u8))
}

/// NCCL's error `e` of call `what` as an `Err`, with NCCL's last message for `comm`.
pub(crate) fn failed(what: &str, e: NcclError, comm: Option<&Comm>) -> Error {
    // SAFETY: ncclGetErrorString returns a static string for any result code.
    let text = unsafe { CStr::from_ptr(sys::ncclGetErrorString(e.0)) };
    let mut message = format!("{what}: {:?} ({})", e.0, text.to_string_lossy());
    // NCCL's last message came with NCCL 2.13; older ones are not asked for it.
    let has_last_error = || cudarc::nccl::result::get_nccl_version().is_ok_and(|v| v >= 2_13_00);
    if let Some(comm) = comm.filter(|c| !c.0.is_null() && has_last_error()) {
        // SAFETY: `comm` is a live communicator; the string NCCL returns lives until its
        // next call on it, and is copied at once.
        let last = unsafe { CStr::from_ptr(sys::ncclGetLastError(comm.0)) };
        let last = last.to_string_lossy();
        if !last.is_empty() {
            message += &format!(": {last}");
        }
    }
    Error::Backend {
        device: "nccl".into(),
        message,
    }
}

/// One rank's handle of an NCCL communicator; aborted on drop (`ncclCommAbort` is local,
/// where `ncclCommDestroy` finalizes with the peers and waits forever for one that exited,
/// which is why PyTorch and cudarc abort too; no operation is in flight then, as every
/// call waits for its own).
pub(crate) struct Comm(sys::ncclComm_t);

// SAFETY: an NCCL communicator may be used from any thread, one call at a time; its owner
// keeps it behind a mutex.
unsafe impl Send for Comm {}

impl Comm {
    /// Join the communicator of `id` as rank `rank` of `size` (`ncclCommInitRank`: blocks
    /// until every rank has joined), on the CUDA device whose context is current on this
    /// thread.
    pub(crate) fn init(size: usize, id: &[u8; ID_BYTES], rank: usize) -> Result<Comm> {
        let (Ok(size), Ok(rank)) = (i32::try_from(size), i32::try_from(rank)) else {
            return Err(Error::invalid(format!(
                "{size} ranks are past NCCL's limits"
            )));
        };
        let id = sys::ncclUniqueId {
            internal: id.map(|b| b as std::ffi::c_char),
        };
        let mut comm = MaybeUninit::<sys::ncclComm_t>::uninit();
        // SAFETY: `comm` is written by a successful call, and read only then.
        unsafe {
            cudarc::nccl::result::comm_init_rank(comm.as_mut_ptr(), size, id, rank)
                .map_err(|e| failed("ncclCommInitRank", e, None))?;
            Ok(Comm(comm.assume_init()))
        }
    }

    /// Whether the communicator was aborted.
    pub(crate) fn is_aborted(&self) -> bool {
        self.0.is_null()
    }

    /// An `Err` if NCCL reports an asynchronous error on this communicator (a peer gone, a
    /// network failure).
    pub(crate) fn async_error(&self) -> Result<()> {
        let mut state = MaybeUninit::<sys::ncclResult_t>::uninit();
        // SAFETY: a live communicator (callers check `is_aborted`); `state` is written.
        let code = unsafe { sys::ncclCommGetAsyncError(self.0, state.as_mut_ptr()) };
        code.result()
            .map_err(|e| failed("ncclCommGetAsyncError", e, Some(self)))?;
        // SAFETY: written by the successful call.
        let state = unsafe { state.assume_init() };
        match state {
            sys::ncclResult_t::ncclSuccess | sys::ncclResult_t::ncclInProgress => Ok(()),
            error => Err(failed("the communicator", NcclError(error), Some(self))),
        }
    }

    /// Abort the communicator (`ncclCommAbort`): its operations in flight stop, and it
    /// cannot be used again.
    pub(crate) fn abort(&mut self) {
        if !self.0.is_null() {
            // SAFETY: a live communicator, not used after this (the handle is cleared).
            let _ = unsafe { cudarc::nccl::result::comm_abort(self.0) };
            self.0 = std::ptr::null_mut();
        }
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        self.abort();
    }
}

/// The NCCL type of `dtype`'s elements for a reduction, if NCCL has one.
pub(crate) fn element_type(dtype: DataType) -> Option<sys::ncclDataType_t> {
    use sys::ncclDataType_t as T;
    Some(match dtype {
        DataType::Int8 => T::ncclInt8,
        DataType::UInt8 => T::ncclUint8,
        DataType::Int32 => T::ncclInt32,
        DataType::UInt32 => T::ncclUint32,
        DataType::Int64 => T::ncclInt64,
        DataType::UInt64 => T::ncclUint64,
        DataType::Half => T::ncclFloat16,
        DataType::BFloat16 => T::ncclBfloat16,
        DataType::Float => T::ncclFloat32,
        DataType::Double => T::ncclFloat64,
        _ => return None,
    })
}

/// NCCL's operator for `reduction` (`Mean` is `ncclAvg`).
pub(crate) fn operator(reduction: Reduction) -> sys::ncclRedOp_t {
    use sys::ncclRedOp_t as Op;
    match reduction {
        Reduction::Sum => Op::ncclSum,
        Reduction::Prod => Op::ncclProd,
        Reduction::Min => Op::ncclMin,
        Reduction::Max => Op::ncclMax,
        Reduction::Mean => Op::ncclAvg,
    }
}

/// One NCCL operation on device memory, by address (the tensors' own memory on the
/// communicator's device).
pub(crate) enum Call {
    /// `ncclAllReduce` of `count` elements (`send == recv` is in place).
    AllReduce {
        send: u64,
        recv: u64,
        count: usize,
        dtype: sys::ncclDataType_t,
        op: sys::ncclRedOp_t,
    },
    /// `ncclReduceScatter`: `count_per_rank` elements to each rank.
    ReduceScatter {
        send: u64,
        recv: u64,
        count_per_rank: usize,
        dtype: sys::ncclDataType_t,
        op: sys::ncclRedOp_t,
    },
    /// `ncclBroadcast` of `bytes` from `root` (in place: `buffer` is read on the root and
    /// written elsewhere).
    Broadcast {
        buffer: u64,
        bytes: usize,
        root: usize,
    },
    /// `ncclAllGather` of `bytes_per_rank` from each rank.
    AllGather {
        send: u64,
        recv: u64,
        bytes_per_rank: usize,
    },
    /// Chunk `j` of `send` to rank `j`, and rank `j`'s chunk into chunk `j` of `recv`
    /// (`ncclSend`/`ncclRecv` to every rank in one group).
    AllToAll {
        send: u64,
        recv: u64,
        bytes_per_rank: usize,
        size: usize,
    },
}

impl Call {
    /// Queue the operation on `stream` through `comm`.
    ///
    /// # Safety
    ///
    /// The addresses are device memory of `comm`'s device that holds every byte the call
    /// reads and writes, alive and not otherwise in use until the operation completes on
    /// `stream` (a stream of that device), and the device's context is current.
    pub(crate) unsafe fn enqueue(&self, comm: &Comm, stream: CUstream) -> Result<()> {
        use cudarc::nccl::result as nccl;
        let stream = stream as sys::cudaStream_t;
        let at = |address: u64| address as *mut c_void;
        let c = comm.0;
        let peer = |rank: usize| rank as i32;
        // SAFETY: the addresses hold what each call reads and writes (the caller's
        // contract), `c` is a live communicator, and the group is always ended.
        let (what, result) = unsafe {
            match *self {
                Call::AllReduce {
                    send,
                    recv,
                    count,
                    dtype,
                    op,
                } => (
                    "ncclAllReduce",
                    nccl::all_reduce(at(send), at(recv), count, dtype, op, c, stream),
                ),
                Call::ReduceScatter {
                    send,
                    recv,
                    count_per_rank,
                    dtype,
                    op,
                } => (
                    "ncclReduceScatter",
                    nccl::reduce_scatter(at(send), at(recv), count_per_rank, dtype, op, c, stream),
                ),
                Call::Broadcast {
                    buffer,
                    bytes,
                    root,
                } => (
                    "ncclBroadcast",
                    nccl::broadcast(
                        at(buffer),
                        at(buffer),
                        bytes,
                        sys::ncclDataType_t::ncclUint8,
                        peer(root),
                        c,
                        stream,
                    ),
                ),
                Call::AllGather {
                    send,
                    recv,
                    bytes_per_rank,
                } => (
                    "ncclAllGather",
                    nccl::all_gather(
                        at(send),
                        at(recv),
                        bytes_per_rank,
                        sys::ncclDataType_t::ncclUint8,
                        c,
                        stream,
                    ),
                ),
                Call::AllToAll {
                    send,
                    recv,
                    bytes_per_rank,
                    size,
                } => ("ncclSend/ncclRecv", {
                    let byte = sys::ncclDataType_t::ncclUint8;
                    let chunk = |base: u64, j: usize| at(base + (j * bytes_per_rank) as u64);
                    nccl::group_start().and_then(|_| {
                        let queued = (0..size).try_for_each(|j| {
                            nccl::send(chunk(send, j), bytes_per_rank, byte, peer(j), c, stream)?;
                            nccl::recv(chunk(recv, j), bytes_per_rank, byte, peer(j), c, stream)
                                .map(drop)
                        });
                        // The group ends even after a failed call, which it then reports.
                        let ended = nccl::group_end();
                        queued.and(ended)
                    })
                }),
            }
        };
        result.map(drop).map_err(|e| failed(what, e, Some(comm)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_read_as_nccl_numbers_them() {
        assert_eq!(version_name(2_32_03), "2.32.3");
        assert_eq!(version_name(MIN_VERSION), "2.10.0");
        // Before 2.9: major * 1000 + minor * 100 + patch.
        assert_eq!(version_name(2804), "2.8.4");
    }

    #[test]
    fn reductions_have_nccl_types_where_nccl_has_them() {
        assert!(element_type(DataType::BFloat16).is_some());
        assert!(element_type(DataType::Int16).is_none());
        assert!(element_type(DataType::Complex64).is_none());
        assert_eq!(
            operator(Reduction::Mean) as u32,
            sys::ncclRedOp_t::ncclAvg as u32
        );
    }
}
