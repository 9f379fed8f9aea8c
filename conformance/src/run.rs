//! Running the suite on a device: every case a [`Filter`] accepts, each one guarded so that
//! a panic is a failure of its case, then the device's claims checked against the ops'
//! definitions.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use polytensor_core::device::Device;
use polytensor_core::dtype::DataType;
use polytensor_core::ops::Op;

use crate::cases::{all_cases, Case, Kind};
use crate::execute::execute;
use crate::report::{CaseResult, Filter, Outcome, Report};
use crate::{layers, sparse};

/// Run every case that `filter` accepts on `device`, calling `progress` after each case.
pub fn run_with_progress(
    device: &Arc<dyn Device>,
    filter: &Filter,
    mut progress: impl FnMut(usize, usize),
) -> Report {
    let cases: Vec<Case> = all_cases()
        .into_iter()
        .filter(|c| filter.accepts(c))
        .collect();
    let layer_cases: Vec<layers::LayerCase> = layers::layer_cases()
        .into_iter()
        .filter(|c| filter.accepts_layer(c))
        .collect();
    let sparse_cases: Vec<sparse::SparseCase> = sparse::sparse_cases()
        .into_iter()
        .filter(|c| filter.accepts_sparse(c))
        .collect();
    let total = cases.len() + layer_cases.len() + sparse_cases.len();
    let before = device.allocator().stats().bytes_in_use;
    let mut results = overclaims(device.as_ref());
    for (i, case) in cases.iter().enumerate() {
        results.push(CaseResult {
            op: case.op.to_string(),
            dtype: case.dtype,
            name: case.name.clone(),
            outcome: run_case(device, case),
        });
        progress(i + 1, total);
    }
    for (i, case) in layer_cases.iter().enumerate() {
        results.push(CaseResult {
            op: case.layer.name().to_string(),
            dtype: case.dtype,
            name: case.name.clone(),
            outcome: layers::run_layer(device, case),
        });
        progress(cases.len() + i + 1, total);
    }
    for (i, case) in sparse_cases.iter().enumerate() {
        results.push(CaseResult {
            op: case.op.name().to_string(),
            dtype: case.dtype,
            name: case.name.clone(),
            outcome: sparse::run_sparse(device, case),
        });
        progress(cases.len() + layer_cases.len() + i + 1, total);
    }
    let _ = device.synchronize();
    Report {
        device: device.name().to_string(),
        results,
        bytes_in_use_before: before,
        bytes_in_use_after: device.allocator().stats().bytes_in_use,
    }
}

/// Run every case that `filter` accepts on `device`.
pub fn run(device: &Arc<dyn Device>, filter: &Filter) -> Report {
    run_with_progress(device, filter, |_, _| {})
}

/// A failure for every op and dtype the device claims to support that the op is not defined
/// for: `Device::check_supports` trusts `supports` alone, so such a claim would let a kernel
/// see a dtype it was never written for.
fn overclaims(device: &dyn Device) -> Vec<CaseResult> {
    let mut failures = Vec::new();
    for op in Op::all() {
        for &dtype in DataType::ALL {
            if device.supports(op, dtype) && !op.is_defined_for(dtype) {
                failures.push(CaseResult {
                    op: op.to_string(),
                    dtype,
                    name: format!("supports {op} {dtype}"),
                    outcome: Outcome::Fail {
                        max_error: f64::INFINITY,
                        message: format!(
                            "the device claims {op} for {dtype}, which the op is not defined for"
                        ),
                    },
                });
            }
        }
    }
    failures
}

/// Whether `device` runs every op a case needs.
fn supported(device: &dyn Device, case: &Case) -> bool {
    let ok = |op: Op, dtype: DataType| device.supports(op, dtype);
    match &case.kind {
        Kind::Cast(to, _) => ok(Op::Cast, case.dtype) && ok(Op::Cast, *to),
        // Building strided inputs of non-contiguous layouts needs nothing more; `where` also
        // needs bool conditions, which every device holds.
        _ => ok(case.op, case.dtype),
    }
}

/// Run one case.
pub fn run_case(device: &Arc<dyn Device>, case: &Case) -> Outcome {
    if !supported(device.as_ref(), case) {
        return Outcome::Unsupported;
    }
    let attempt = catch_unwind(AssertUnwindSafe(|| execute(device, case)));
    match attempt {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(e)) => Outcome::Fail {
            max_error: f64::INFINITY,
            message: format!("returned an error: {e}"),
        },
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            Outcome::Fail {
                max_error: f64::INFINITY,
                message: format!("panicked: {what}"),
            }
        }
    }
}
