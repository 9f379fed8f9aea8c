//! Runs that stop: a run's deadline ([`RunOptions::timeout`], or the session's
//! [`SessionOptions::operation_timeout`](super::SessionOptions::operation_timeout)) and its
//! cancellation handle ([`CancellationManager`]), checked before every kernel, at every
//! iteration of a loop and at every function call, the calls a run makes included.
//!
//! A kernel already running finishes its work (as in TensorFlow, which does not interrupt a
//! `MatMul`); the run stops before the next one and drops every value it made, so the
//! session is as before the run and takes the next one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use polytensor_core::{Error, Result};

use super::Trace;

/// What stops the runs given it, from any thread: TensorFlow's `CancellationManager`.
/// Clones share one state; once cancelled it stays cancelled, and a run given it later
/// fails at its first step.
///
/// ```
/// use polytensor_graph::{CancellationManager, RunOptions};
/// let cancel = CancellationManager::new();
/// let options = RunOptions { cancellation: Some(cancel.clone()), ..RunOptions::default() };
/// // Another thread may call `cancel.start_cancel()` while a run with `options` goes on.
/// cancel.start_cancel();
/// assert!(options.cancellation.unwrap().is_cancelled());
/// ```
#[derive(Clone, Debug, Default)]
pub struct CancellationManager {
    cancelled: Arc<AtomicBool>,
}

impl CancellationManager {
    /// A handle not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancel every run given this handle (those running stop before their next step).
    pub fn start_cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
    }

    /// Whether [`start_cancel`](Self::start_cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }
}

/// How one run may stop early: the parts of TensorFlow's `RunOptions` that apply.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// TensorFlow's `timeout_in_ms`: the run is a `DeadlineExceeded` error once it has run
    /// this long. `None` takes the session's
    /// [`operation_timeout`](super::SessionOptions::operation_timeout).
    pub timeout: Option<Duration>,
    /// A handle whose [`start_cancel`](CancellationManager::start_cancel) makes the run a
    /// `Cancelled` error.
    pub cancellation: Option<CancellationManager>,
    /// TensorFlow's `trace_level` with its `RunMetadata`: where the run records the time,
    /// device and outputs of every step it runs (`None`, the default: nothing is recorded).
    pub trace: Option<Trace>,
}

/// A timeout in milliseconds as TensorFlow reads `timeout_in_ms` and
/// `operation_timeout_in_ms`: none where it is 0 or less (the C and Python APIs take it so).
pub fn timeout_from_millis(milliseconds: i64) -> Option<Duration> {
    u64::try_from(milliseconds)
        .ok()
        .filter(|&ms| ms > 0)
        .map(Duration::from_millis)
}

/// When the run in progress must stop, checked by [`Stop::check`].
#[derive(Debug, Default)]
pub(crate) struct Stop {
    deadline: Option<Instant>,
    cancellation: Option<CancellationManager>,
    /// Where the run's steps are recorded, with the names of the calling nodes (each
    /// followed by `/`) to put before a function's node names.
    pub(crate) trace: Option<(Trace, String)>,
}

impl Stop {
    /// The stop of a run starting now with `options`, or the session's `default_timeout`
    /// where they name none.
    pub(crate) fn starting(options: &RunOptions, default_timeout: Option<Duration>) -> Stop {
        let timeout = options.timeout.or(default_timeout);
        Stop {
            // A timeout too long to add to now never comes.
            deadline: timeout.and_then(|t| Instant::now().checked_add(t)),
            cancellation: options.cancellation.clone(),
            trace: options.trace.clone().map(|t| (t, String::new())),
        }
    }

    /// The stop of the calls node `node` makes: the same deadline and cancellation, and
    /// the trace with `node/` before the names of the function's nodes.
    pub(crate) fn within(&self, node: &str) -> Stop {
        Stop {
            deadline: self.deadline,
            cancellation: self.cancellation.clone(),
            trace: self
                .trace
                .as_ref()
                .map(|(t, scope)| (t.clone(), format!("{scope}{node}/"))),
        }
    }

    /// `Err` with TensorFlow's code and message where the run was cancelled or went past
    /// its deadline.
    #[inline]
    pub(crate) fn check(&self) -> Result<()> {
        if self.cancellation.as_ref().is_some_and(|c| c.is_cancelled()) {
            return Err(Error::Cancelled("Run call was cancelled".into()));
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(Error::DeadlineExceeded(
                "Timed out waiting for notification".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_fails_once_cancelled_or_past_its_deadline() {
        assert!(Stop::default().check().is_ok());
        let cancel = CancellationManager::new();
        let options = RunOptions {
            timeout: Some(Duration::from_secs(3600)),
            cancellation: Some(cancel.clone()),
            ..RunOptions::default()
        };
        let stop = Stop::starting(&options, None);
        assert!(stop.check().is_ok());
        cancel.start_cancel();
        assert!(matches!(stop.check(), Err(Error::Cancelled(_))));
        let late = Stop::starting(&RunOptions::default(), Some(Duration::ZERO));
        assert_eq!(
            late.check().unwrap_err().to_string(),
            "deadline exceeded: Timed out waiting for notification"
        );
        // A run's own timeout comes before the session's; one too long never comes.
        let own = RunOptions {
            timeout: Some(Duration::MAX),
            ..RunOptions::default()
        };
        assert!(Stop::starting(&own, Some(Duration::ZERO)).check().is_ok());
    }
}
