//! The command's errors: one readable message with what was being done (the cause chain,
//! outermost first), never a `Debug` struct, and an exit code that tells the kind of
//! failure apart, for scripts.

use std::fmt;
use std::process::ExitCode;

use polytensor::Error;

/// What kind of failure an error is: its exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// A check failed (a conformance case, `--compare-tf` beyond the tolerance): 1.
    Check,
    /// Bad input: a usage error, a missing or malformed file, a model that contradicts
    /// itself, a feed of the wrong shape or dtype: 2 (as clap's usage errors).
    BadInput,
    /// The model needs an op (or an op a dtype) that polytensor or the device lacks: 3.
    Unsupported,
    /// The device failed: absent, out of memory, its driver's error: 4.
    Device,
}

impl Failure {
    /// The process's exit code.
    pub fn code(self) -> u8 {
        match self {
            Failure::Check => 1,
            Failure::BadInput => 2,
            Failure::Unsupported => 3,
            Failure::Device => 4,
        }
    }

    /// The kind of a polytensor error.
    fn of(error: &Error) -> Failure {
        match error {
            Error::Unsupported { .. } => Failure::Unsupported,
            // (TensorFlow's NOT_FOUND "Op type not registered", raised at import.)
            Error::InvalidArgument(message) if message.contains("Op type not registered") => {
                Failure::Unsupported
            }
            Error::OutOfMemory { .. }
            | Error::ExceedsDeviceLimit { .. }
            | Error::DeviceUnavailable { .. }
            | Error::Backend { .. } => Failure::Device,
            _ => Failure::BadInput,
        }
    }
}

/// An error of the command: what was being done (outermost first), the cause, its kind.
#[derive(Debug)]
pub struct CliError {
    context: Vec<String>,
    cause: String,
    failure: Failure,
}

/// The command's result.
pub type CliResult<T> = std::result::Result<T, CliError>;

impl CliError {
    /// An error of kind `failure` with message `cause`.
    pub fn new(failure: Failure, cause: impl Into<String>) -> Self {
        CliError {
            context: Vec::new(),
            cause: cause.into(),
            failure,
        }
    }

    /// Bad input: `cause`.
    pub fn bad_input(cause: impl Into<String>) -> Self {
        Self::new(Failure::BadInput, cause)
    }

    /// The exit code.
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(self.failure.code())
    }

    /// The kind.
    pub fn failure(&self) -> Failure {
        self.failure
    }
}

impl From<Error> for CliError {
    fn from(error: Error) -> Self {
        CliError::new(Failure::of(&error), error.to_string())
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.context.split_first() {
            None => write!(f, "{}", self.cause),
            Some((first, rest)) => {
                write!(f, "{first}")?;
                for what in rest {
                    write!(f, "\n  while {what}")?;
                }
                write!(f, "\n  caused by: {}", self.cause)
            }
        }
    }
}

/// `.context("reading model.pb")` on results: what was being done when the error came.
pub trait Context<T> {
    /// Adds `what` (outermost context first, so call it from the inside out).
    fn context(self, what: impl fmt::Display) -> CliResult<T>;
}

impl<T, E: Into<CliError>> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl fmt::Display) -> CliResult<T> {
        self.map_err(|e| {
            let mut error = e.into();
            error.context.insert(0, what.to_string());
            error
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use polytensor::DataType;

    #[test]
    fn kinds_and_codes() {
        let unsupported = Error::Unsupported {
            op: "cast".into(),
            dtype: DataType::Float8E4M3FN,
            device: "wgpu:0".into(),
        };
        assert_eq!(CliError::from(unsupported).failure().code(), 3);
        let unregistered = Error::invalid("Op type not registered 'Frob' in binary (node 'f')");
        assert_eq!(CliError::from(unregistered).failure(), Failure::Unsupported);
        let gone = Error::DeviceUnavailable {
            device: "cuda:0".into(),
            why: "no driver".into(),
        };
        assert_eq!(CliError::from(gone).failure().code(), 4);
        assert_eq!(CliError::from(Error::invalid("x")).failure().code(), 2);
    }

    #[test]
    fn the_chain_reads_outermost_first() {
        let failed: std::result::Result<(), Error> = Err(Error::NotFound("m.pb: gone".into()));
        let error = failed
            .context("reading the GraphDef")
            .context("loading m.pb")
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "loading m.pb\n  while reading the GraphDef\n  caused by: not found: m.pb: gone"
        );
        assert_eq!(
            CliError::bad_input("no model").to_string(),
            "no model",
            "an error without context is its cause"
        );
    }
}
