//! One case on a device: its inputs drawn and laid out as the case asks (broadcast,
//! strided, transposed, offset), the op run, and the result compared with the reference.

use std::sync::Arc;

use polytensor_core::device::Device;
use polytensor_core::dtype::DataType;
use polytensor_core::element::Scalar;
use polytensor_core::error::Result;
use polytensor_core::ops::broadcast_shapes;
use polytensor_core::tensor::Tensor;

use crate::cases::{Case, InputSpec, Kind, Variant};
use crate::compare::compare;
use crate::data::{self, Rng};
use crate::reference::{self, Expected};
use crate::report::fail;
use crate::report::Outcome;

/// An input's logical values, in row-major order.
pub(crate) struct Values {
    pub(crate) dims: Vec<usize>,
    pub(crate) values: Vec<Scalar>,
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
pub(crate) fn build(
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
pub(crate) fn indices(dims: &[usize]) -> impl Iterator<Item = Vec<usize>> + '_ {
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

pub(crate) fn execute(device: &Arc<dyn Device>, case: &Case) -> Result<Outcome> {
    let outcome = execute_with(device, case, false)?;
    // A device that declares flushing f32 subnormals (WGSL allows it) passes where its
    // result is the reference of the inputs flushed, flushed itself.
    let flushes = device.float_semantics().flushes_subnormals
        && matches!(case.dtype, DataType::Float | DataType::BFloat16);
    if flushes && matches!(outcome, Outcome::Fail { .. }) {
        let flushed = execute_with(device, case, true)?;
        if matches!(flushed, Outcome::Pass { .. }) {
            return Ok(flushed);
        }
    }
    Ok(outcome)
}

/// [`execute`], the reference computed from inputs whose subnormals are flushed to zero
/// and its subnormal results flushed too where `flush` is set.
fn execute_with(device: &Arc<dyn Device>, case: &Case, flush: bool) -> Result<Outcome> {
    let input = |spec: &InputSpec, position: usize| -> Result<(Values, Tensor)> {
        let mut values = materialize(spec, &case.name, position);
        let tensor = build(device, spec.dtype, &values, spec.variant)?;
        if flush {
            values.values.iter_mut().for_each(|v| *v = flushed(*v));
        }
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
    let mut expected = expected;
    if flush {
        expected.iter_mut().for_each(|e| e.value = flushed(e.value));
    }
    Ok(compare(
        case,
        out_dtype,
        &got,
        &expected,
        device.float_semantics(),
    ))
}

/// `value` with an f32 subnormal (below f32's smallest normal) flushed to a zero of its
/// sign.
fn flushed(value: Scalar) -> Scalar {
    match value {
        Scalar::F64(v) if v != 0.0 && v.abs() < f64::from(f32::MIN_POSITIVE) => {
            Scalar::F64(0.0f64.copysign(v))
        }
        other => other,
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
