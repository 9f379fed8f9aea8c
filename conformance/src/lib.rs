//! The cross-backend conformance suite: the one suite of cases every backend's tests and
//! `cargo xtask conformance` run (kept apart from `polytensor-core`, as burn keeps
//! `burn-backend-tests`, so the core holds only the core).
//!
//! One catalogue of cases ([`all_cases`]: every op of the [`Device`] kernel surface x every
//! dtype it is defined for x shapes from scalars and empty tensors to over 2^20 elements and
//! rank 6, with broadcasting and strided, transposed, offset and stride-0 inputs; and
//! [`layers::layer_cases`]: the inference layers and shape ops built from those kernels;
//! [`sparse::sparse_cases`]: the `SparseTensor` ops), checked
//! against a naive reference written here ([`mod@reference`]) with the tolerances of
//! [`mod@tolerance`]. Inputs are seeded by case name, so every failure reproduces by name.
//!
//! ```
//! # #[cfg(any())]
//! # {
//! let report = conformance::run(&device, &Filter::all());
//! assert!(report.failures().is_empty(), "{}", report.failure_summary());
//! # }
//! ```

pub mod cases;
pub mod data;
pub mod layers;
pub mod reference;
pub mod sparse;
pub mod tolerance;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

pub use cases::{all_cases, family_cases, Case, Family, InputSpec, Kind, Variant};
use data::Rng;
use reference::Expected;
use tolerance::Tolerance;

use polytensor_core::device::Device;
use polytensor_core::dtype::DataType;
use polytensor_core::element::Scalar;
use polytensor_core::error::Result;
use polytensor_core::ops::{broadcast_shapes, Op};
use polytensor_core::tensor::Tensor;

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

    fn accepts(&self, case: &Case) -> bool {
        self.takes(Family::of(case.op), &case.op.to_string(), case.dtype)
    }

    fn accepts_layer(&self, case: &layers::LayerCase) -> bool {
        self.takes(Family::Layers, case.layer.name(), case.dtype)
    }

    fn accepts_sparse(&self, case: &sparse::SparseCase) -> bool {
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

/// One `#[test]` per op family, each calling `$check(Family::...)`, so a failure names
/// what broke. For each backend's `tests/conformance.rs`:
///
/// ```ignore
/// fn check(family: Family) { /* run the family on the device, assert */ }
/// conformance::conformance_family_tests!(check);
/// ```
#[macro_export]
macro_rules! conformance_family_tests {
    ($check:path) => {
        $crate::conformance_family_tests!(@each $check;
            unary => Unary; binary => Binary; compare => Compare; logical => Logical;
            where_select => Where; cast => Cast; matmul => Matmul; reduce => Reduce;
            fill => Fill; copy => Copy; layers => Layers; sparse => Sparse;
        );
    };
    (@each $check:path; $($name:ident => $family:ident;)*) => {$(
        #[test]
        fn $name() {
            $check($crate::Family::$family);
        }
    )*};
}

/// Whether `POLYTENSOR_REQUIRE` (a comma-separated list of backend names, set by CI) names
/// `backend`: a missing device of that backend is then a failure, never a skip.
pub fn required(backend: &str) -> bool {
    std::env::var("POLYTENSOR_REQUIRE")
        .unwrap_or_default()
        .split(',')
        .any(|b| b.trim() == backend)
}

/// `open()`'s device, or `None` after printing why the test skips; a panic instead when
/// [`required`] names `backend`, so that CI cannot pass by skipping it.
pub fn device_or_skip<E: std::fmt::Display>(
    backend: &str,
    open: impl FnOnce() -> std::result::Result<Arc<dyn Device>, E>,
) -> Option<Arc<dyn Device>> {
    match open() {
        Ok(device) => Some(device),
        Err(e) => {
            assert!(
                !required(backend),
                "POLYTENSOR_REQUIRE names {backend}, but: {e}"
            );
            eprintln!("skipped: no {backend} device: {e}");
            None
        }
    }
}

/// Run `family` on `device` and assert that nothing failed and no memory leaked (cases
/// the device declares unsupported are counted, not failures): the body of every
/// backend's conformance tests.
pub fn assert_family(device: &Arc<dyn Device>, family: Family) {
    let report = run(device, &Filter::family(family));
    let (passed, failed, unsupported) = report.counts();
    println!(
        "{family:?} on {}: {passed} passed, {failed} failed, {unsupported} unsupported",
        report.device
    );
    assert!(passed > 0, "no {family:?} case ran on {}", report.device);
    assert!(
        failed == 0 && report.leak_free(),
        "\n{}",
        report.failure_summary()
    );
}

/// A backend's whole conformance test file: one `#[test]` per op family on the device
/// that `$open` (a `fn() -> Result<Arc<dyn Device>, impl Display>`) opens, skipped with
/// the reason when there is none, unless `POLYTENSOR_REQUIRE` names `$backend`.
///
/// ```ignore
/// conformance::conformance_backend_tests!("opencl", || polytensor_opencl::first()
///     .map(|d| d as std::sync::Arc<dyn polytensor_core::Device>));
/// ```
#[macro_export]
macro_rules! conformance_backend_tests {
    ($backend:literal, $open:expr) => {
        fn check(family: $crate::Family) {
            if let Some(device) = $crate::device_or_skip($backend, $open) {
                $crate::assert_family(&device, family);
            }
        }
        $crate::conformance_family_tests!(check);

        #[test]
        fn freed_memory_is_reused() {
            if let Some(device) = $crate::device_or_skip($backend, $open) {
                $crate::assert_memory_reused(&device);
            }
        }
    };
}

/// A buffer freed and asked for again (a tensor's result, every call of an op) comes from
/// the device's cache: the allocator reserves nothing new the second time. A device that
/// went to its driver for each buffer would pay an allocation and, on CUDA, a
/// device-synchronising free on every op.
pub fn assert_memory_reused(device: &Arc<dyn Device>) {
    for bytes in [4, 1000, 1 << 20, 3 << 22] {
        drop(device.allocate(bytes).expect("allocate"));
        let reserved = device.allocator().stats().bytes_reserved;
        drop(device.allocate(bytes).expect("allocate again"));
        assert_eq!(
            device.allocator().stats().bytes_reserved,
            reserved,
            "{}: a freed {bytes}-byte buffer was not reused",
            device.name()
        );
    }
}

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

/// An input's logical values, in row-major order.
struct Values {
    dims: Vec<usize>,
    values: Vec<Scalar>,
}

impl Values {
    /// The value at `index` of the broadcast output shape (trailing dims aligned; dims of
    /// size 1 repeat).
    fn at(&self, index: &[usize]) -> Scalar {
        let lead = index.len() - self.dims.len();
        let flat = self.dims.iter().enumerate().fold(0, |acc, (i, &d)| {
            acc * d + if d == 1 { 0 } else { index[lead + i] }
        });
        self.values[flat]
    }
}

/// Draw an input's values (seeded by case name and input position) and apply its variant's
/// effect on the logical values (a broadcast repeats row 0).
fn materialize(spec: &InputSpec, case: &str, position: usize) -> Values {
    let n: usize = spec.dims.iter().product();
    let mut values = match &spec.values {
        Some(values) => values.clone(),
        None => data::values(
            spec.dtype,
            n,
            spec.domain,
            &mut Rng::for_case(&format!("{case}#{position}")),
        ),
    };
    if spec.variant == Variant::Broadcast && spec.dims.first().is_some_and(|&d| d > 1) {
        let row = n / spec.dims[0];
        for i in row..n {
            values[i] = values[i % row];
        }
    }
    Values {
        dims: spec.dims.clone(),
        values,
    }
}

/// A value that fills the gaps of padded layouts (valid for every dtype, bool included).
fn filler(dtype: DataType) -> Scalar {
    if dtype == DataType::Bool {
        Scalar::Bool(true)
    } else {
        Scalar::I64(0x5a)
    }
}

/// Make a device tensor with `input`'s logical values in `variant`'s layout.
fn build(
    device: &Arc<dyn Device>,
    dtype: DataType,
    input: &Values,
    variant: Variant,
) -> Result<Tensor> {
    let dims = &input.dims;
    let n = input.values.len();
    let dense = |values: &[Scalar], dims: &[usize]| {
        Tensor::from_bytes(&data::to_bytes(dtype, values), dims, dtype, device)
    };
    match variant {
        Variant::Contiguous => dense(&input.values, dims),
        Variant::Offset => {
            let pad = 3;
            let mut padded = vec![filler(dtype); pad];
            padded.extend_from_slice(&input.values);
            padded.push(filler(dtype));
            dense(&padded, &[n + pad + 1])?
                .narrow(0, pad, n)?
                .reshape(dims.as_slice())
        }
        Variant::Transposed if dims.len() >= 2 => {
            let (r, c) = (dims[dims.len() - 2], dims[dims.len() - 1]);
            let batch = n / (r * c).max(1);
            let mut stored = Vec::with_capacity(n);
            for b in 0..batch {
                for j in 0..c {
                    for i in 0..r {
                        stored.push(input.values[b * r * c + i * c + j]);
                    }
                }
            }
            let mut stored_dims = dims.clone();
            let rank = dims.len();
            stored_dims.swap(rank - 2, rank - 1);
            dense(&stored, &stored_dims)?.t()
        }
        Variant::Strided => {
            let mut stored = Vec::with_capacity(2 * n);
            for &v in &input.values {
                stored.extend([v, filler(dtype)]);
            }
            let mut stored_dims = dims.clone();
            stored_dims.push(2);
            dense(&stored, &stored_dims)?.narrow(-1, 0, 1)?.squeeze(-1)
        }
        Variant::Broadcast if dims.first().is_some_and(|&d| d > 1) => {
            let row = n / dims[0];
            let mut row_dims = dims.clone();
            row_dims[0] = 1;
            dense(&input.values[..row], &row_dims)?.broadcast_to(dims.as_slice())
        }
        _ => dense(&input.values, dims),
    }
}

/// Row-major multi-indices of `dims`.
fn indices(dims: &[usize]) -> impl Iterator<Item = Vec<usize>> + '_ {
    let n: usize = dims.iter().product();
    (0..n).map(move |mut flat| {
        let mut index = vec![0; dims.len()];
        for (slot, &d) in index.iter_mut().zip(dims).rev() {
            *slot = flat % d;
            flat /= d;
        }
        index
    })
}

fn execute(device: &Arc<dyn Device>, case: &Case) -> Result<Outcome> {
    let input = |spec: &InputSpec, position: usize| -> Result<(Values, Tensor)> {
        let values = materialize(spec, &case.name, position);
        let tensor = build(device, spec.dtype, &values, spec.variant)?;
        Ok((values, tensor))
    };
    let (out, expected, tol) = match &case.kind {
        Kind::Unary(op, spec) => {
            let (x, tx) = input(spec, 0)?;
            let want = x
                .values
                .iter()
                .map(|&v| reference::unary(*op, case.dtype, v))
                .collect();
            (
                tx.unary(*op)?,
                want,
                (x.dims.clone(), op.output_dtype(case.dtype)),
            )
        }
        Kind::Binary(op, sa, sb) => {
            let ((a, ta), (b, tb)) = (input(sa, 0)?, input(sb, 1)?);
            let dims = broadcast_shapes(
                &polytensor_core::TensorShape::new(&a.dims)?,
                &polytensor_core::TensorShape::new(&b.dims)?,
            )?
            .dims()
            .to_vec();
            let want = indices(&dims)
                .map(|i| reference::binary(*op, case.dtype, a.at(&i), b.at(&i)))
                .collect();
            (
                ta.binary(*op, &tb)?,
                want,
                (dims, op.output_dtype(case.dtype)),
            )
        }
        Kind::Where(sc, sa, sb) => {
            let ((c, tc), (a, ta), (b, tb)) = (input(sc, 0)?, input(sa, 1)?, input(sb, 2)?);
            let shape = |d: &[usize]| polytensor_core::TensorShape::new(d);
            let dims = broadcast_shapes(
                &broadcast_shapes(&shape(&c.dims)?, &shape(&a.dims)?)?,
                &shape(&b.dims)?,
            )?
            .dims()
            .to_vec();
            let want = indices(&dims)
                .map(|i| Expected {
                    value: if c.at(&i) == Scalar::Bool(true) {
                        a.at(&i)
                    } else {
                        b.at(&i)
                    },
                    scale: 0.0,
                    terms: 1,
                })
                .collect();
            (tc.where_(&ta, &tb)?, want, (dims, case.dtype))
        }
        Kind::Cast(to, spec) => {
            let (x, tx) = input(spec, 0)?;
            let want = x.values.iter().map(|&v| reference::cast(v, *to)).collect();
            (tx.cast(*to)?, want, (x.dims.clone(), *to))
        }
        Kind::Matmul(sa, sb, transpose_a, transpose_b) => {
            let ((a, ta), (b, tb)) = (input(sa, 0)?, input(sb, 1)?);
            let (want, dims) = reference_matmul(case.dtype, &a, &b, *transpose_a, *transpose_b)?;
            (
                ta.matmul_t(&tb, *transpose_a, *transpose_b)?,
                want,
                (dims, case.dtype),
            )
        }
        Kind::Reduce(op, spec, axes, keep) => {
            let (x, tx) = input(spec, 0)?;
            let (want, dims) = reference_reduce(*op, case.dtype, &x, axes, *keep)?;
            (
                tx.reduce(*op, axes, *keep)?,
                want,
                (dims, op.output_dtype(case.dtype)),
            )
        }
        Kind::Fill(dims, value) => {
            let n: usize = dims.iter().product();
            let want = vec![
                Expected {
                    value: data::round_to(case.dtype, *value),
                    scale: 0.0,
                    terms: 1
                };
                n
            ];
            (
                Tensor::full(dims.as_slice(), *value, case.dtype, device)?,
                want,
                (dims.clone(), case.dtype),
            )
        }
        Kind::Arange(start, stop, step) => {
            let t = Tensor::arange(*start, *stop, *step, case.dtype, device)?;
            let want: Vec<Expected> = (0..t.num_elements())
                .map(|i| {
                    let v = match (start, step) {
                        (Scalar::I64(a), Scalar::I64(s)) => Scalar::I64(a + i as i64 * s),
                        _ => Scalar::F64(start.to_f64() + i as f64 * step.to_f64()),
                    };
                    Expected {
                        value: data::round_to(case.dtype, v),
                        scale: 0.0,
                        terms: 1,
                    }
                })
                .collect();
            let len = want.len();
            (t, want, (vec![len], case.dtype))
        }
        Kind::Copy(spec) => {
            let (x, tx) = input(spec, 0)?;
            let want = x
                .values
                .iter()
                .map(|&v| Expected {
                    value: v,
                    scale: 0.0,
                    terms: 1,
                })
                .collect();
            let copied = tx.contiguous()?;
            if !copied.is_contiguous() {
                return Ok(fail("contiguous() returned a non-contiguous tensor"));
            }
            (copied, want, (x.dims.clone(), case.dtype))
        }
    };
    let (dims, out_dtype) = tol;
    if out.dims() != dims || out.dtype() != out_dtype {
        return Ok(fail(&format!(
            "result has shape {} and dtype {}, expected [{}] and {out_dtype}",
            out.shape(),
            out.dtype(),
            dims.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(",")
        )));
    }
    let got = out.to_scalars()?;
    Ok(compare(case, out_dtype, &got, &expected))
}

fn fail(message: &str) -> Outcome {
    Outcome::Fail {
        max_error: f64::INFINITY,
        message: message.to_string(),
    }
}

fn reference_matmul(
    dtype: DataType,
    a: &Values,
    b: &Values,
    ta: bool,
    tb: bool,
) -> Result<(Vec<Expected>, Vec<usize>)> {
    let matrix = |v: &Values, t: bool| -> (Vec<usize>, usize, usize) {
        let r = v.dims.len();
        let (rows, cols) = (v.dims[r - 2], v.dims[r - 1]);
        let (m, k) = if t { (cols, rows) } else { (rows, cols) };
        (v.dims[..r - 2].to_vec(), m, k)
    };
    let ((batch_a, m, k), (batch_b, _, n)) = (matrix(a, ta), matrix(b, tb));
    let batch = broadcast_shapes(
        &polytensor_core::TensorShape::new(&batch_a)?,
        &polytensor_core::TensorShape::new(&batch_b)?,
    )?
    .dims()
    .to_vec();
    let element = |v: &Values, batch_index: &[usize], i: usize, j: usize, t: bool| {
        let (row, col) = if t { (j, i) } else { (i, j) };
        let mut index = batch_index.to_vec();
        index.extend([row, col]);
        v.at(&index)
    };
    let mut want = Vec::new();
    for bi in indices(&batch) {
        for i in 0..m {
            for j in 0..n {
                let row: Vec<Scalar> = (0..k).map(|p| element(a, &bi, i, p, ta)).collect();
                let col: Vec<Scalar> = (0..k).map(|p| element(b, &bi, p, j, tb)).collect();
                want.push(reference::dot(dtype, &row, &col));
            }
        }
    }
    let mut dims = batch;
    dims.extend([m, n]);
    Ok((want, dims))
}

fn reference_reduce(
    op: polytensor_core::ops::ReduceOp,
    dtype: DataType,
    x: &Values,
    axes: &[isize],
    keep: bool,
) -> Result<(Vec<Expected>, Vec<usize>)> {
    let axes = polytensor_core::ops::normalize_axes(axes, x.dims.len())?;
    let kept: Vec<usize> = (0..x.dims.len()).filter(|a| !axes.contains(a)).collect();
    let kept_dims: Vec<usize> = kept.iter().map(|&a| x.dims[a]).collect();
    let red_dims: Vec<usize> = axes.iter().map(|&a| x.dims[a]).collect();
    let mut want = Vec::new();
    for ki in indices(&kept_dims) {
        let block: Vec<Scalar> = indices(&red_dims)
            .map(|ri| {
                let mut index = vec![0; x.dims.len()];
                kept.iter().zip(&ki).for_each(|(&a, &i)| index[a] = i);
                axes.iter().zip(&ri).for_each(|(&a, &i)| index[a] = i);
                x.at(&index)
            })
            .collect();
        want.push(reference::reduce(op, dtype, &block));
    }
    let dims = (0..x.dims.len())
        .filter_map(|a| {
            if axes.contains(&a) {
                keep.then_some(1)
            } else {
                Some(x.dims[a])
            }
        })
        .collect();
    Ok((want, dims))
}

/// Compare results with the reference; the outcome names the first bad element.
fn compare(case: &Case, out_dtype: DataType, got: &[Scalar], want: &[Expected]) -> Outcome {
    compare_elements(
        out_dtype,
        tolerance::tolerance(case.op, case.dtype),
        got,
        want,
    )
}

/// [`check`] of every element of `got` (of dtype `out_dtype`) against `want` under `tol`;
/// the outcome names the first bad element.
pub(crate) fn compare_elements(
    out_dtype: DataType,
    tol: Tolerance,
    got: &[Scalar],
    want: &[Expected],
) -> Outcome {
    if got.len() != want.len() {
        return fail(&format!("{} elements, expected {}", got.len(), want.len()));
    }
    let mut max_error = 0.0f64;
    for (i, (&g, w)) in got.iter().zip(want).enumerate() {
        let (ok, error) = check(out_dtype, tol, g, w);
        max_error = max_error.max(error);
        if !ok {
            return Outcome::Fail {
                max_error: error,
                message: if out_dtype.is_float() || out_dtype.is_complex() {
                    format!("element {i}: got {}, expected {} (error {error:.3} ulp, tolerance {tol:?})", show(g), show(w.value))
                } else {
                    format!("element {i}: got {}, expected {}", show(g), show(w.value))
                },
            };
        }
    }
    Outcome::Pass { max_error }
}

fn show(value: Scalar) -> String {
    match value {
        Scalar::F64(v) => format!("{v:e}"),
        Scalar::C64(c) => format!("{:e}{:+e}i", c.re, c.im),
        Scalar::I64(v) => v.to_string(),
        Scalar::U64(v) => v.to_string(),
        Scalar::Bool(b) => b.to_string(),
    }
}

/// Whether `got` (an element of dtype `dtype`) matches the reference `want` under `tol`, and
/// the error (in ulps for floats, as a distance for integers): the one element check of the
/// suite, also used by property tests that compare random op chains with the reference.
pub fn check(dtype: DataType, tol: Tolerance, got: Scalar, want: &Expected) -> (bool, f64) {
    match (got, want.value) {
        (Scalar::C64(g), Scalar::C64(w)) => {
            let part = dtype.real_dtype();
            let scale = want.scale.max(w.norm());
            let (ok_re, e_re) = check_float(part, tol, g.re, w.re, scale, want.terms);
            let (ok_im, e_im) = check_float(part, tol, g.im, w.im, scale, want.terms);
            (ok_re && ok_im, e_re.max(e_im))
        }
        (Scalar::F64(g), Scalar::F64(w)) => {
            check_float(dtype, tol, g, w, want.scale.max(w.abs()), want.terms)
        }
        (g, w) => {
            let same = g == w;
            (
                same,
                if same {
                    0.0
                } else {
                    (data::int_of(g) - data::int_of(w)).unsigned_abs() as f64
                },
            )
        }
    }
}

fn check_float(
    dtype: DataType,
    tol: Tolerance,
    g: f64,
    w: f64,
    scale: f64,
    terms: usize,
) -> (bool, f64) {
    if w.is_nan() || g.is_nan() {
        return if w.is_nan() && g.is_nan() {
            (true, 0.0)
        } else {
            (false, f64::INFINITY)
        };
    }
    if w.is_infinite() || g.is_infinite() {
        return if g == w {
            (true, 0.0)
        } else {
            (false, f64::INFINITY)
        };
    }
    let diff = (g - w).abs();
    let error = diff / tolerance::ulp(dtype, w.abs());
    let ok = match tol {
        Tolerance::Exact => g == w && (w != 0.0 || g.is_sign_negative() == w.is_sign_negative()),
        Tolerance::Ulps(n) => diff <= n * tolerance::ulp(dtype, scale),
        Tolerance::Accumulated => {
            diff <= tolerance::ulp(dtype, w.abs())
                + terms as f64 * tolerance::accumulator_roundoff(dtype) * scale
        }
        Tolerance::Epilogue => {
            diff <= tolerance::ulp(dtype, w.abs())
                + terms as f64 * tolerance::accumulator_roundoff(dtype) * scale
                + 3.0 * tolerance::ulp(dtype, scale)
        }
    };
    (ok, error)
}
