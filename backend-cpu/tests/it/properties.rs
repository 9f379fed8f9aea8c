//! Property tests on the CPU device: random shapes, dtypes and chains of views (slices,
//! narrows, transposes, permutes, broadcasts, reshapes, squeezes, bitcasts, offsets) read
//! exactly what an independent dense model says, and ops on such views match the
//! conformance suite's reference within its tolerances.

use std::sync::Arc;

use conformance::cases::{binary_domains, unary_domain};
use conformance::check;
use conformance::data::{self, Domain, Rng};
use conformance::reference::{self, Expected};
use conformance::tolerance::tolerance;
use polytensor_core::{BinaryOp, DataType, Device, Op, ReduceOp, Scalar, Tensor, UnaryOp};
use polytensor_cpu::CpuDevice;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

fn cpu() -> Arc<dyn Device> {
    CpuDevice::shared()
}

fn computable() -> Vec<DataType> {
    DataType::ALL
        .iter()
        .copied()
        .filter(|d| d.is_computable())
        .collect()
}

/// Logical elements in row-major order (each element's bytes, so NaN payloads survive
/// bitcasts), with their dims: what a view chain must read.
#[derive(Debug, Clone)]
struct Model {
    dtype: DataType,
    dims: Vec<usize>,
    bytes: Vec<u8>,
}

/// The row-major multi-index of flat position `flat` in `dims`.
fn unflatten(dims: &[usize], mut flat: usize) -> Vec<usize> {
    let mut index = vec![0; dims.len()];
    for (slot, &d) in index.iter_mut().zip(dims).rev() {
        *slot = flat % d;
        flat /= d;
    }
    index
}

impl Model {
    fn random(dtype: DataType, dims: Vec<usize>, domain: Domain, seed: u64) -> Self {
        let n = dims.iter().product();
        let values = data::values(dtype, n, domain, &mut Rng::for_case(&seed.to_string()));
        Model {
            dtype,
            dims,
            bytes: data::to_bytes(dtype, &values),
        }
    }

    /// A dense tensor of the model's elements (the plain `from_bytes` path).
    fn tensor(&self) -> Tensor {
        Tensor::from_bytes(&self.bytes, self.dims.as_slice(), self.dtype, &cpu()).unwrap()
    }

    /// The elements as scalars, for the reference.
    fn values(&self) -> Vec<Scalar> {
        self.tensor().to_scalars().unwrap()
    }

    /// The row-major position of `index`.
    fn flat(&self, index: &[usize]) -> usize {
        index
            .iter()
            .zip(&self.dims)
            .fold(0, |acc, (&i, &d)| acc * d + i)
    }

    /// A model of `dims` whose element at each index is this model's at `source(index)`.
    fn gather(&self, dims: Vec<usize>, source: impl Fn(&[usize]) -> Vec<usize>) -> Model {
        let n: usize = dims.iter().product();
        let size = self.dtype.size();
        let mut bytes = Vec::with_capacity(n * size);
        for flat in 0..n {
            let from = self.flat(&source(&unflatten(&dims, flat))) * size;
            bytes.extend_from_slice(&self.bytes[from..from + size]);
        }
        Model {
            dtype: self.dtype,
            dims,
            bytes,
        }
    }
}

/// One view operation, as raw numbers read against the current shape (so every generated
/// chain is meaningful whatever the shapes before it).
#[derive(Debug, Clone, Copy)]
struct ViewStep {
    kind: u8,
    a: u8,
    b: u8,
    c: u8,
}

/// The step kinds that change the dtype, and that copy.
const BITCAST: u8 = 8;
const CONTIGUOUS: u8 = 9;

/// Up to 6 steps; with `bitcasts` false, none changes the dtype (the op tests pick their op
/// and its input values for the dtype they start with).
fn view_steps(bitcasts: bool) -> impl Strategy<Value = Vec<ViewStep>> {
    prop::collection::vec(
        (0u8..10, any::<u8>(), any::<u8>(), any::<u8>()).prop_map(move |(kind, a, b, c)| {
            let kind = if kind == BITCAST && !bitcasts {
                CONTIGUOUS
            } else {
                kind
            };
            ViewStep { kind, a, b, c }
        }),
        0..6,
    )
}

/// Apply `step` to the tensor and the model alike; `Ok(None)` when the step does not apply
/// (and the tensor agreed by refusing it, or the step was not tried).
fn apply(step: ViewStep, t: &Tensor, m: &Model) -> Result<Option<(Tensor, Model)>, TestCaseError> {
    let rank = m.dims.len();
    let pick = |seed: u8, n: usize| usize::from(seed) % n.max(1);
    let dims = m.dims.clone();
    Ok(Some(match step.kind {
        // narrow(dim, start, len): offsets into the buffer.
        0 if rank > 0 => {
            let dim = pick(step.a, rank);
            let size = dims[dim];
            let start = pick(step.b, size + 1);
            let len = pick(step.c, size - start + 1);
            let mut new = dims.clone();
            new[dim] = len;
            let view = t.narrow(dim as isize, start, len).unwrap();
            let model = m.gather(new, |i| {
                let mut s = i.to_vec();
                s[dim] += start;
                s
            });
            (view, model)
        }
        // transpose(a, b)
        1 if rank > 0 => {
            let (x, y) = (pick(step.a, rank), pick(step.b, rank));
            let mut new = dims.clone();
            new.swap(x, y);
            let view = t.transpose(x as isize, y as isize).unwrap();
            (
                view,
                m.gather(new, |i| {
                    let mut s = i.to_vec();
                    s.swap(x, y);
                    s
                }),
            )
        }
        // permute: a rotation
        2 if rank > 0 => {
            let r = pick(step.a, rank);
            let perm: Vec<usize> = (0..rank).map(|i| (i + r) % rank).collect();
            let new: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
            let view = t.permute(&perm).unwrap();
            (
                view,
                m.gather(new, |i| {
                    let mut s = vec![0; rank];
                    for (k, &p) in perm.iter().enumerate() {
                        s[p] = i[k];
                    }
                    s
                }),
            )
        }
        // broadcast: a new leading dim, and size-1 dims expanded
        3 => {
            let mut new = vec![1 + pick(step.a, 3)];
            new.extend(
                dims.iter()
                    .map(|&d| if d == 1 { 1 + pick(step.b, 3) } else { d }),
            );
            let view = t.broadcast_to(new.clone()).unwrap();
            (
                view,
                m.gather(new, |i| {
                    i[1..]
                        .iter()
                        .zip(&dims)
                        .map(|(&x, &d)| if d == 1 { 0 } else { x })
                        .collect()
                }),
            )
        }
        // reshape: split the count into two factors, or flatten
        4 => {
            let n: usize = dims.iter().product();
            let new = if n == 0 || step.a.is_multiple_of(3) {
                vec![n]
            } else {
                let divisors: Vec<usize> = (1..=n).filter(|&d| n.is_multiple_of(d)).collect();
                let d = divisors[pick(step.b, divisors.len())];
                vec![d, n / d]
            };
            let view = t.reshape(new.clone()).unwrap();
            let model = Model {
                dims: new,
                ..m.clone()
            };
            (view, model)
        }
        // unsqueeze
        5 => {
            let at = pick(step.a, rank + 1);
            let mut new = dims.clone();
            new.insert(at, 1);
            let view = t.unsqueeze(at as isize).unwrap();
            (
                view,
                m.gather(new, |i| {
                    let mut s = i.to_vec();
                    s.remove(at);
                    s
                }),
            )
        }
        // squeeze a size-1 dim (or expect the refusal)
        6 if rank > 0 => {
            let at = pick(step.a, rank);
            if dims[at] != 1 {
                prop_assert!(t.squeeze(at as isize).is_err());
                return Ok(None);
            }
            let mut new = dims.clone();
            new.remove(at);
            let view = t.squeeze(at as isize).unwrap();
            (
                view,
                m.gather(new, |i| {
                    let mut s = i.to_vec();
                    s.insert(at, 0);
                    s
                }),
            )
        }
        // sub_slice(i)
        7 if rank > 0 && dims[0] > 0 => {
            let at = pick(step.a, dims[0]);
            let view = t.sub_slice(at).unwrap();
            (
                view,
                m.gather(dims[1..].to_vec(), |i| {
                    let mut s = vec![at];
                    s.extend_from_slice(i);
                    s
                }),
            )
        }
        BITCAST => return bitcast(step, t, m),
        CONTIGUOUS => (t.contiguous().unwrap(), m.clone()),
        _ => return Ok(None),
    }))
}

/// A bitcast of the tensor and of the model: the model's bytes, row-major, regrouped.
fn bitcast(
    step: ViewStep,
    t: &Tensor,
    m: &Model,
) -> Result<Option<(Tensor, Model)>, TestCaseError> {
    let dtypes = computable();
    let to = dtypes[usize::from(step.a) % dtypes.len()];
    let (old, new) = (m.dtype.size(), to.size());
    let mut dims = m.dims.clone();
    if old > new {
        dims.push(old / new);
    } else if old < new {
        if dims.last() != Some(&(new / old)) {
            prop_assert!(
                t.bitcast(to).is_err(),
                "{} to {to} of {:?}",
                m.dtype,
                m.dims
            );
            return Ok(None);
        }
        dims.pop();
    }
    if !m.bytes.iter().all(|&b| to.is_valid_byte(b)) {
        prop_assert!(t.bitcast(to).is_err(), "invalid {to} bytes were accepted");
        return Ok(None);
    }
    let view = t
        .bitcast(to)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let bytes = m.bytes.clone();
    Ok(Some((
        view,
        Model {
            dtype: to,
            dims,
            bytes,
        },
    )))
}

/// Run `steps` on the tensor and the model, checking after each that they agree.
fn chain(steps: &[ViewStep], model: Model) -> Result<(Tensor, Model), TestCaseError> {
    let (mut t, mut m) = (model.tensor(), model);
    for &step in steps {
        if let Some((next_t, next_m)) = apply(step, &t, &m)? {
            (t, m) = (next_t, next_m);
        }
        prop_assert_eq!(t.dims(), m.dims.clone(), "after {:?}", step);
        prop_assert_eq!(t.dtype(), m.dtype);
        prop_assert_eq!(t.to_bytes().unwrap(), m.bytes.clone(), "after {:?}", step);
    }
    Ok((t, m))
}

/// Each got element is within the suite's tolerance of the reference.
fn matches(op: Op, dtype: DataType, got: &Tensor, want: &[Expected]) -> Result<(), TestCaseError> {
    let got_values = got.to_scalars().unwrap();
    prop_assert_eq!(got_values.len(), want.len());
    let tol = tolerance(op, dtype);
    for (i, (&g, w)) in got_values.iter().zip(want).enumerate() {
        let (ok, error) = check(got.dtype(), tol, g, w);
        prop_assert!(
            ok,
            "{op} on {dtype}, element {i}: got {g:?}, want {:?} ({error})",
            w.value
        );
    }
    Ok(())
}

/// The op of a family (`all`, made an [`Op`] by `op`) that `seed` picks among those defined
/// for `dtype`, if any is.
fn pick_defined<T: Copy>(all: &[T], op: fn(T) -> Op, dtype: DataType, seed: u8) -> Option<T> {
    let defined: Vec<T> = all
        .iter()
        .copied()
        .filter(|&o| op(o).is_defined_for(dtype))
        .collect();
    defined
        .get(usize::from(seed) % defined.len().max(1))
        .copied()
}

fn shapes() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0usize..5, 0..4)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every view chain reads exactly the model's elements, for every computable dtype.
    #[test]
    fn view_chains_read_what_the_model_says(
        dtype in prop::sample::select(computable()),
        dims in shapes(),
        steps in view_steps(true),
        seed in any::<u64>(),
    ) {
        chain(&steps, Model::random(dtype, dims, Domain::General, seed))?;
    }

    /// A unary and a binary op on a view (the second operand broadcast from a suffix of the
    /// shape, or transposed) match the reference.
    #[test]
    fn elementwise_ops_on_views_match_the_reference(
        dtype in prop::sample::select(computable()),
        dims in shapes(),
        steps in view_steps(false),
        seeds in any::<(u64, u64, u8, u8, u8)>(),
    ) {
        let (seed_a, seed_b, unary_pick, binary_pick, suffix) = seeds;
        if let Some(op) = pick_defined(UnaryOp::ALL, Op::Unary, dtype, unary_pick) {
            let (t, m) = chain(&steps, Model::random(dtype, dims.clone(), unary_domain(op), seed_a))?;
            let want: Vec<Expected> = m.values().iter().map(|&v| reference::unary(op, dtype, v)).collect();
            matches(Op::Unary(op), dtype, &t.unary(op).unwrap(), &want)?;
        }
        let Some(op) = pick_defined(BinaryOp::ALL, Op::Binary, dtype, binary_pick) else {
            return Ok(());
        };
        let (domain_a, domain_b) = binary_domains(op);
        let (a, ma) = chain(&steps, Model::random(dtype, dims, domain_a, seed_a))?;
        // The second operand: a suffix of a's shape (broadcast by the op), stored transposed.
        let keep = usize::from(suffix) % (ma.dims.len() + 1);
        let b_dims = ma.dims[ma.dims.len() - keep..].to_vec();
        let mb = Model::random(dtype, b_dims.clone(), domain_b, seed_b);
        let b = if keep >= 2 {
            let transposed = mb.gather(
                { let mut d = b_dims.clone(); d.swap(keep - 2, keep - 1); d },
                |i| { let mut s = i.to_vec(); s.swap(keep - 2, keep - 1); s },
            );
            transposed.tensor().t().unwrap()
        } else {
            mb.tensor()
        };
        let lead = ma.dims.len() - keep;
        let (a_values, b_values) = (ma.values(), mb.values());
        let want: Vec<Expected> = (0..a_values.len())
            .map(|flat| {
                let index = unflatten(&ma.dims, flat);
                reference::binary(op, dtype, a_values[flat], b_values[mb.flat(&index[lead..])])
            })
            .collect();
        matches(Op::Binary(op), dtype, &a.binary(op, &b).unwrap(), &want)?;
    }

    /// A reduction over one axis of a view, and a view times its own transpose, match the
    /// reference.
    #[test]
    fn reductions_and_matmul_on_views_match_the_reference(
        dtype in prop::sample::select(computable()),
        dims in shapes(),
        steps in view_steps(false),
        seed in any::<u64>(),
        picks in any::<(u8, u8)>(),
    ) {
        let (t, m) = chain(&steps, Model::random(dtype, dims, Domain::Finite, seed))?;
        let values = m.values();
        let rank = m.dims.len();
        if let (Some(op), true) = (pick_defined(ReduceOp::ALL, Op::Reduce, dtype, picks.0), rank > 0) {
            let axis = usize::from(picks.1) % rank;
            let mut kept = m.dims.clone();
            kept.remove(axis);
            let n: usize = kept.iter().product();
            // An index of nothing is an error (when there is an output to hold it).
            let no_index = m.dims[axis] == 0 && n > 0
                && matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin);
            let got = t.reduce(op, &[axis as isize], false);
            if no_index {
                prop_assert!(got.is_err(), "{op} over an empty axis");
            } else {
                let want: Vec<Expected> = (0..n).map(|flat| {
                    let mut index = unflatten(&kept, flat);
                    index.insert(axis, 0);
                    let line: Vec<Scalar> = (0..m.dims[axis]).map(|k| { index[axis] = k; values[m.flat(&index)] }).collect();
                    reference::reduce(op, dtype, &line)
                }).collect();
                matches(Op::Reduce(op), dtype, &got.unwrap(), &want)?;
            }
        }
        if rank >= 2 && Op::Matmul.is_defined_for(dtype) {
            let got = t.matmul(&t.t().unwrap()).unwrap();
            let (rows, inner) = (m.dims[rank - 2], m.dims[rank - 1]);
            let batch: usize = m.dims[..rank - 2].iter().product();
            let mut want = Vec::with_capacity(batch * rows * rows);
            for b in 0..batch {
                let row = |r: usize| -> Vec<Scalar> {
                    (0..inner).map(|k| values[(b * rows + r) * inner + k]).collect()
                };
                for i in 0..rows {
                    for j in 0..rows {
                        want.push(reference::dot(dtype, &row(i), &row(j)));
                    }
                }
            }
            matches(Op::Matmul, dtype, &got, &want)?;
        }
    }
}

/// A per-channel row of a few elements beside a contiguous image (`[n, h, w, c] - [c]`,
/// either operand repeated, offsets into larger buffers, below and above the parallel size)
/// gives each element `f(image, row[channel])`: the joined-rows path of the binary driver.
#[test]
fn a_short_repeated_row_beside_a_contiguous_operand() {
    for &(n, c) in &[(2usize, 3usize), (16, 3), (3, 1), (16, 5), (1, 63), (40, 7)] {
        let len = n * 32 * 32 * c;
        let image: Vec<f32> = (0..len + 5).map(|i| (i % 97) as f32 * 0.5 - 7.0).collect();
        let row: Vec<f32> = (0..c + 2).map(|i| i as f32 * 1.25 + 0.5).collect();
        let image_t = Tensor::from_slice(&image, [len + 5], &cpu()).unwrap();
        let image_t = image_t.slice(5..len + 5).unwrap();
        let image_t = image_t.reshape([n, 32, 32, c]).unwrap();
        let row_t = Tensor::from_slice(&row, [c + 2], &cpu()).unwrap();
        let row_t = row_t
            .slice(2..c + 2)
            .unwrap()
            .reshape([1, 1, 1, c])
            .unwrap();
        for op in [BinaryOp::Sub, BinaryOp::Div] {
            let f = |x: f32, y: f32| if op == BinaryOp::Sub { x - y } else { x / y };
            let got: Vec<f32> = image_t.binary(op, &row_t).unwrap().to_vec().unwrap();
            let want: Vec<f32> = (0..len).map(|i| f(image[i + 5], row[2 + i % c])).collect();
            assert_eq!(got, want, "[{n},32,32,{c}] {op:?} [{c}]");
            let got: Vec<f32> = row_t.binary(op, &image_t).unwrap().to_vec().unwrap();
            let want: Vec<f32> = (0..len).map(|i| f(row[2 + i % c], image[i + 5])).collect();
            assert_eq!(got, want, "[{c}] {op:?} [{n},32,32,{c}]");
        }
    }
}
