//! What a conformance run reports: each case's [`Outcome`], the [`Filter`] of the cases to
//! run, and the [`Report`] of a device.

use polytensor_core::dtype::DataType;

use crate::cases::{Case, Family};
use crate::{layers, sparse};

/// The result of one case.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Every element within tolerance; the largest error seen (ulps for floats, 0 for exact).
    Pass {
        /// Largest error, in ulps of the dtype (0 for exact matches).
        max_error: f64,
    },
    /// A wrong result, an unexpected error, or a panic.
    Fail {
        /// Largest error seen, in ulps (infinite for wrong shapes, errors and panics).
        max_error: f64,
        /// What went wrong, naming the first bad element.
        message: String,
    },
    /// The device declares the op unsupported for this dtype.
    Unsupported,
}

/// One case's outcome, with what it tested.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseResult {
    /// The op's name (`add`, `cast`; a layer's, `conv2d`): the report's row.
    pub op: String,
    /// The dtype.
    pub dtype: DataType,
    /// The case name.
    pub name: String,
    /// The outcome.
    pub outcome: Outcome,
}

/// Which cases to run.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only these families (all if empty).
    pub families: Vec<Family>,
    /// Only ops with this name (`add`, `reduce_sum`, `cast`, ...).
    pub op: Option<String>,
    /// Only this dtype.
    pub dtype: Option<DataType>,
}

impl Filter {
    /// Every case.
    pub fn all() -> Self {
        Self::default()
    }

    /// The cases of one family.
    pub fn family(family: Family) -> Self {
        Self {
            families: vec![family],
            ..Self::default()
        }
    }

    pub(crate) fn accepts(&self, case: &Case) -> bool {
        self.takes(Family::of(case.op), &case.op.to_string(), case.dtype)
    }

    pub(crate) fn accepts_layer(&self, case: &layers::LayerCase) -> bool {
        self.takes(Family::Layers, case.layer.name(), case.dtype)
    }

    pub(crate) fn accepts_sparse(&self, case: &sparse::SparseCase) -> bool {
        self.takes(Family::Sparse, case.op.name(), case.dtype)
    }

    fn takes(&self, family: Family, op: &str, dtype: DataType) -> bool {
        (self.families.is_empty() || self.families.contains(&family))
            && self.op.as_ref().is_none_or(|name| op == name)
            && self.dtype.is_none_or(|d| dtype == d)
    }
}

/// The results of a run on one device.
#[derive(Debug, Clone)]
pub struct Report {
    /// The device name.
    pub device: String,
    /// Every case's result, in catalogue order.
    pub results: Vec<CaseResult>,
    /// The allocator's `bytes_in_use` before the run.
    pub bytes_in_use_before: u64,
    /// The allocator's `bytes_in_use` after the run (equal to before when nothing leaked).
    pub bytes_in_use_after: u64,
}

impl Report {
    /// The failed cases.
    pub fn failures(&self) -> Vec<&CaseResult> {
        self.results
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Fail { .. }))
            .collect()
    }

    /// Whether memory was returned: `bytes_in_use` is back at its starting value.
    pub fn leak_free(&self) -> bool {
        self.bytes_in_use_after == self.bytes_in_use_before
    }

    /// A readable list of the failures (empty when all passed).
    pub fn failure_summary(&self) -> String {
        let mut text = String::new();
        for r in self.failures() {
            if let Outcome::Fail { message, .. } = &r.outcome {
                text.push_str(&format!("FAIL {} on {}: {message}\n", r.name, self.device));
            }
        }
        if !self.leak_free() {
            text.push_str(&format!(
                "LEAK on {}: bytes_in_use {} before the run, {} after\n",
                self.device, self.bytes_in_use_before, self.bytes_in_use_after
            ));
        }
        text
    }

    /// Counts of `(passed, failed, unsupported)` cases.
    pub fn counts(&self) -> (usize, usize, usize) {
        self.results
            .iter()
            .fold((0, 0, 0), |(p, f, u), r| match r.outcome {
                Outcome::Pass { .. } => (p + 1, f, u),
                Outcome::Fail { .. } => (p, f + 1, u),
                Outcome::Unsupported => (p, f, u + 1),
            })
    }
}

/// A failure with `message` and no measured error.
pub(crate) fn fail(message: &str) -> Outcome {
    Outcome::Fail {
        max_error: f64::INFINITY,
        message: message.to_string(),
    }
}
