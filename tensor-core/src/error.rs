//! The one error type of polytensor.

use crate::dtype::{DTypeError, DataType};
use crate::stats::AllocatorStats;

/// Everything that can go wrong in polytensor. Bad input from a user or a file is
/// always one of these, never a panic.
///
/// `Debug` prints the same readable message as `Display` (as `std::io::Error` and `anyhow`
/// do), so `fn main() -> polytensor::Result<()>` reports a failure in words; match on the
/// variants for the structured fields.
#[derive(Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Two shapes that had to agree did not.
    #[error("shape mismatch in {op}: {message}")]
    ShapeMismatch {
        /// The operation that checked the shapes.
        op: &'static str,
        /// What disagreed, with the shapes.
        message: String,
    },
    /// A dtype that had to agree with another, or be of a class, was not.
    #[error("dtype mismatch in {op}: expected {expected}, found {found}")]
    DTypeMismatch {
        /// The operation that checked the dtype.
        op: &'static str,
        /// What was expected (a dtype or a class such as "bool").
        expected: String,
        /// The dtype that was given.
        found: DataType,
    },
    /// The device cannot run this operation for this dtype.
    #[error("{op} is not supported for dtype {dtype} on device {device}")]
    Unsupported {
        /// The operation.
        op: String,
        /// The dtype it was asked for.
        dtype: DataType,
        /// The device that refused it.
        device: String,
    },
    /// An allocation failed: the byte limit was reached or the device is out of memory.
    #[error("out of memory on {device}: requested {requested} bytes ({stats})")]
    OutOfMemory {
        /// Bytes requested.
        requested: usize,
        /// The device (or allocator) that refused.
        device: String,
        /// The allocator's statistics at the moment of failure.
        stats: AllocatorStats,
    },
    /// A shape is invalid: a negative dim, rank over 254, or an element count that overflows.
    #[error("invalid shape: {0}")]
    InvalidShape(String),
    /// An axis index is outside `-rank..rank`.
    #[error("axis {axis} is out of range for a tensor of rank {rank}")]
    AxisOutOfRange {
        /// The axis as given (negative counts from the end).
        axis: isize,
        /// The rank of the tensor.
        rank: usize,
    },
    /// A request exceeds a fixed limit of the device (not its free memory): retrying after
    /// freeing memory cannot help.
    #[error("{requested} bytes requested on {device} exceed {limit} ({value} bytes)")]
    ExceedsDeviceLimit {
        /// Bytes requested.
        requested: usize,
        /// The device that refused.
        device: String,
        /// The limit, in words (`the adapter's max storage binding size`).
        limit: String,
        /// The limit's value in bytes.
        value: u64,
    },
    /// A malformed `TensorSlice` string or an invalid slice.
    #[error("invalid slice: {0}")]
    InvalidSlice(String),
    /// A malformed or invalid `TensorProto` (or shape / slice proto).
    #[error("invalid proto: {0}")]
    InvalidProto(String),
    /// An argument is invalid for a reason not covered above.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Tensors on different devices were combined.
    #[error("device mismatch in {op}: {lhs} vs {rhs}; move one with to_device")]
    DeviceMismatch {
        /// The operation.
        op: &'static str,
        /// Device of the first operand.
        lhs: String,
        /// Device of the second operand.
        rhs: String,
    },
    /// A device is absent or could not be opened.
    #[error("device {device} unavailable: {why}")]
    DeviceUnavailable {
        /// The device or backend name.
        device: String,
        /// Why it is unavailable.
        why: String,
    },
    /// A run was cancelled through its cancellation handle (TensorFlow's `CANCELLED`).
    #[error("cancelled: {0}")]
    Cancelled(String),
    /// A run went past its deadline (TensorFlow's `DEADLINE_EXCEEDED`).
    #[error("deadline exceeded: {0}")]
    DeadlineExceeded(String),
    /// Something asked for does not exist: a file, or a key in a checkpoint (TensorFlow's
    /// `NOT_FOUND`).
    #[error("not found: {0}")]
    NotFound(String),
    /// Stored data is corrupt: a checksum that does not match, a truncated or malformed
    /// file (TensorFlow's `DATA_LOSS`).
    #[error("data loss: {0}")]
    DataLoss(String),
    /// Reading or writing a file failed for a reason other than its absence.
    #[error("I/O error: {0}")]
    Io(String),
    /// A backend (driver, runtime, compiler) reported an error.
    #[error("backend error on {device}: {message}")]
    Backend {
        /// The device.
        device: String,
        /// The backend's message.
        message: String,
    },
}

/// `Result` with polytensor's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A [`Error::ShapeMismatch`] with a formatted message.
    pub fn shape(op: &'static str, message: impl Into<String>) -> Self {
        Error::ShapeMismatch {
            op,
            message: message.into(),
        }
    }

    /// An [`Error::InvalidArgument`] with a formatted message.
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidArgument(message.into())
    }

    /// A failed file operation on `what` (a path): [`Error::NotFound`] for a missing
    /// file, else [`Error::Io`].
    pub fn io(what: &str, error: std::io::Error) -> Self {
        match error.kind() {
            std::io::ErrorKind::NotFound => Error::NotFound(format!("{what}: {error}")),
            _ => Error::Io(format!("{what}: {error}")),
        }
    }
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl From<DTypeError> for Error {
    fn from(e: DTypeError) -> Self {
        Error::invalid(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_prints_the_readable_message() {
        let error = Error::Unsupported {
            op: "cast".into(),
            dtype: DataType::Float8E4M3FN,
            device: "cpu:0".into(),
        };
        assert_eq!(format!("{error:?}"), error.to_string());
        assert_eq!(
            format!("{error:?}"),
            "cast is not supported for dtype float8_e4m3fn on device cpu:0"
        );
        // `fn main() -> Result<()>` prints `Error: {:?}` of the error, and a `Result` shows it
        // inside `Err(..)`.
        let failed: Result<()> = Err(Error::invalid("bad"));
        assert_eq!(format!("{failed:?}"), "Err(invalid argument: bad)");
    }
}
