//! `SparseTensor` ops on every device, checked against a naive reference computed here on
//! the host from the same COO components: to_dense (ranks 1 to 5, empty, large), reorder,
//! sparse x dense matmul (every adjoint, unordered and repeated indices), reductions over
//! each axis, segment sums and means, and sparse + dense; and the structures TensorFlow
//! rejects (repeated, unordered and out-of-range indices) must give its errors.
//!
//! Tolerances: gathers and maxima are exact; sums, means and products are accumulations
//! ([`Tolerance::Accumulated`] over the terms folded).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use polytensor_core::sparse::{segment_reduce, Combiner, SparseReduce};
use polytensor_core::{DataType, Device, Error, Result, Scalar, SparseTensor, Tensor};

use crate::data::Rng;
use crate::layers::exact;
use crate::reference::Expected;
use crate::tolerance::Tolerance;
use crate::{compare_elements as compare, Outcome};

/// How a case's indices are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Structure {
    /// Row-major order, no repeats.
    Canonical,
    /// Shuffled, no repeats.
    Unordered,
    /// Row-major order, some repeated.
    Repeated,
    /// Shuffled, some repeated.
    Scrambled,
    /// Canonical, then one index past the end of a dim.
    OutOfRange,
}

/// What a sparse case runs.
#[derive(Debug, Clone, PartialEq)]
pub enum SparseOp {
    /// `to_dense` (zero default).
    ToDense,
    /// `reorder`.
    Reorder,
    /// `sparse_dense_matmul` by a dense `[k, n]` (or `[n, k]` for `adjoint_b`).
    Matmul {
        /// Columns of the dense operand.
        n: usize,
        /// Transpose the sparse operand.
        adjoint_a: bool,
        /// Transpose the dense operand.
        adjoint_b: bool,
    },
    /// `reduce` over one axis into a dense tensor.
    Reduce(SparseReduce, i64),
    /// `segment_reduce` of a dense `[rows, width]` tensor by `count` entries.
    Segment(Combiner, usize, usize),
    /// `add_dense`.
    AddDense,
}

impl SparseOp {
    /// The report's row.
    pub fn name(&self) -> &'static str {
        match self {
            SparseOp::ToDense => "sparse_to_dense",
            SparseOp::Reorder => "sparse_reorder",
            SparseOp::Matmul { .. } => "sparse_dense_matmul",
            SparseOp::Reduce(SparseReduce::Sum, _) => "sparse_reduce_sum",
            SparseOp::Reduce(SparseReduce::Max, _) => "sparse_reduce_max",
            SparseOp::Segment(Combiner::Sum, ..) => "sparse_segment_sum",
            SparseOp::Segment(Combiner::Mean, ..) => "sparse_segment_mean",
            SparseOp::Segment(Combiner::SqrtN, ..) => "sparse_segment_sqrt_n",
            SparseOp::AddDense => "sparse_add_dense",
        }
    }
}

/// One sparse case.
#[derive(Debug, Clone)]
pub struct SparseCase {
    /// Unique; seeds the components.
    pub name: String,
    /// The values' dtype.
    pub dtype: DataType,
    /// The dense shape.
    pub shape: Vec<usize>,
    /// Stored elements.
    pub nnz: usize,
    /// How the indices are laid out.
    pub structure: Structure,
    /// What runs.
    pub op: SparseOp,
}

/// Dtypes values are gathered in (moved as bits): one of each element size, and each
/// way a GPU language stores them (packed 8- and 16-bit, words, pairs and quads of words).
const MOVED: [DataType; 8] = [
    DataType::Float,
    DataType::Half,
    DataType::Int16,
    DataType::Int64,
    DataType::Bool,
    DataType::UInt8,
    DataType::Complex64,
    DataType::Complex128,
];

/// Dtypes values are summed in (packed signed integers and bf16 among them).
const SUMMED: [DataType; 7] = [
    DataType::Float,
    DataType::Double,
    DataType::Half,
    DataType::BFloat16,
    DataType::Int8,
    DataType::Int32,
    DataType::Int64,
];

/// Every sparse case.
pub fn sparse_cases() -> Vec<SparseCase> {
    let mut cases = Vec::new();
    let mut add = |dtype: DataType, shape: &[usize], nnz, structure, op: SparseOp| {
        cases.push(SparseCase {
            name: format!("{}_{dtype}_{shape:?}_{nnz}_{structure:?}", op.name()),
            dtype,
            shape: shape.to_vec(),
            nnz,
            structure,
            op,
        });
    };
    let shapes: [&[usize]; 6] = [
        &[7],
        &[4, 5],
        &[3, 4, 2],
        &[2, 3, 2, 3],
        &[2, 2, 3, 2, 2],
        &[4, 0],
    ];
    for dtype in MOVED {
        for shape in shapes {
            let cells: usize = shape.iter().product();
            add(
                dtype,
                shape,
                cells / 3,
                Structure::Canonical,
                SparseOp::ToDense,
            );
        }
        add(dtype, &[3, 4], 0, Structure::Canonical, SparseOp::ToDense);
        add(dtype, &[5, 6], 12, Structure::Unordered, SparseOp::Reorder);
    }
    add(
        DataType::Float,
        &[300, 700],
        21000,
        Structure::Canonical,
        SparseOp::ToDense,
    );
    for (structure, nnz) in [
        (Structure::Repeated, 8),
        (Structure::Unordered, 8),
        (Structure::OutOfRange, 8),
    ] {
        add(DataType::Float, &[4, 5], nnz, structure, SparseOp::ToDense);
    }
    for dtype in SUMMED {
        for (adjoint_a, adjoint_b) in [(false, false), (true, false), (false, true), (true, true)] {
            let op = SparseOp::Matmul {
                n: 5,
                adjoint_a,
                adjoint_b,
            };
            add(dtype, &[6, 7], 14, Structure::Scrambled, op);
        }
        for axis in [0, 1, -1] {
            add(
                dtype,
                &[3, 4, 5],
                20,
                Structure::Scrambled,
                SparseOp::Reduce(SparseReduce::Sum, axis),
            );
            add(
                dtype,
                &[3, 4, 5],
                20,
                Structure::Unordered,
                SparseOp::Reduce(SparseReduce::Max, axis),
            );
        }
        add(
            dtype,
            &[1],
            9,
            Structure::Canonical,
            SparseOp::Segment(Combiner::Sum, 6, 3),
        );
        add(dtype, &[6, 5], 12, Structure::Scrambled, SparseOp::AddDense);
    }
    for combiner in [Combiner::Mean, Combiner::SqrtN] {
        for dtype in [DataType::Float, DataType::Double, DataType::Half] {
            add(
                dtype,
                &[1],
                9,
                Structure::Canonical,
                SparseOp::Segment(combiner, 6, 3),
            );
        }
    }
    let large = SparseOp::Matmul {
        n: 33,
        adjoint_a: false,
        adjoint_b: false,
    };
    add(
        DataType::Float,
        &[256, 512],
        13000,
        Structure::Unordered,
        large,
    );
    add(
        DataType::Float,
        &[1],
        20000,
        Structure::Canonical,
        SparseOp::Segment(Combiner::Sum, 900, 16),
    );
    add(
        DataType::Float,
        &[0, 3],
        0,
        Structure::Canonical,
        SparseOp::Matmul {
            n: 2,
            adjoint_a: false,
            adjoint_b: false,
        },
    );
    cases
}

/// Run one sparse case on `device`.
pub fn run_sparse(device: &Arc<dyn Device>, case: &SparseCase) -> Outcome {
    match catch_unwind(AssertUnwindSafe(|| execute(device, case))) {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(Error::Unsupported { .. })) => Outcome::Unsupported,
        Ok(Err(e)) => crate::fail(&format!("returned an error: {e}")),
        Err(_) => crate::fail("panicked"),
    }
}

/// The components of a case, as the host sees them.
struct Components {
    indices: Vec<Vec<usize>>,
    values: Vec<Scalar>,
    sparse: SparseTensor,
}

/// Random values of `dtype` (small integers, quarters for floats, both signs) on `device`,
/// and the values as the tensor holds them.
fn draw(
    dtype: DataType,
    count: usize,
    rng: &mut Rng,
    device: &Arc<dyn Device>,
) -> Result<(Tensor, Vec<Scalar>)> {
    let raw: Vec<f64> = (0..count).map(|_| rng.int(-12, 12) as f64 / 4.0).collect();
    let raw: Vec<f64> = if dtype.is_integer() || dtype == DataType::Bool {
        raw.iter().map(|v| (v * 4.0).abs()).collect()
    } else {
        raw
    };
    let tensor = Tensor::from_slice(&raw, [count], device)?.cast(dtype)?;
    let scalars = if dtype.is_complex() || dtype == DataType::Bool || dtype.is_computable() {
        tensor.to_scalars()?
    } else {
        vec![]
    };
    Ok((tensor, scalars))
}

/// The case's sparse tensor and its components.
fn components(case: &SparseCase, rng: &mut Rng, device: &Arc<dyn Device>) -> Result<Components> {
    let cells: usize = case.shape.iter().product();
    let mut flat: Vec<usize> = Vec::with_capacity(case.nnz);
    if cells > 0 {
        // Distinct cells in order: a stride through the cells from a random start.
        let step = (cells / case.nnz.max(1)).max(1);
        let mut at = rng.int(0, step as i128 - 1) as usize;
        while flat.len() < case.nnz.min(cells) {
            flat.push(at % cells);
            at += step;
        }
        flat.sort_unstable();
        flat.dedup();
    }
    if matches!(case.structure, Structure::Unordered | Structure::Scrambled) {
        for i in (1..flat.len()).rev() {
            flat.swap(i, rng.int(0, i as i128) as usize);
        }
    }
    if matches!(case.structure, Structure::Repeated | Structure::Scrambled) && flat.len() > 2 {
        let n = flat.len();
        flat[n - 1] = flat[0];
        flat[n / 2] = flat[1];
        if case.structure == Structure::Repeated {
            flat.sort_unstable();
        }
    }
    let mut indices: Vec<Vec<usize>> = flat.iter().map(|&f| unravel(f, &case.shape)).collect();
    if case.structure == Structure::OutOfRange {
        if let Some(last) = indices.last_mut() {
            last[0] = case.shape[0];
        }
    }
    let (values, scalars) = draw(case.dtype, indices.len(), rng, device)?;
    let rank = case.shape.len();
    let flat_indices: Vec<i64> = indices.iter().flatten().map(|&i| i as i64).collect();
    let dims: Vec<i64> = case.shape.iter().map(|&d| d as i64).collect();
    let sparse = SparseTensor::new(
        Tensor::from_slice(&flat_indices, [indices.len(), rank], device)?,
        values,
        Tensor::from_slice(&dims, [rank], device)?,
    )?;
    Ok(Components {
        indices,
        values: scalars,
        sparse,
    })
}

fn unravel(mut flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut index = vec![0; dims.len()];
    for (d, &size) in dims.iter().enumerate().rev() {
        index[d] = flat % size;
        flat /= size;
    }
    index
}

fn ravel(index: &[usize], dims: &[usize]) -> usize {
    index
        .iter()
        .zip(dims)
        .fold(0, |flat, (&i, &d)| flat * d + i)
}

/// A sum's reference: its exact value in the dtype's kind, its scale and terms.
struct Sum {
    value: f64,
    scale: f64,
    terms: usize,
    int: i128,
}

impl Sum {
    fn new() -> Self {
        Sum {
            value: 0.0,
            scale: 0.0,
            terms: 0,
            int: 0,
        }
    }

    fn add(&mut self, term: Scalar) {
        let v = term.to_f64();
        self.value += v;
        self.scale += v.abs();
        self.terms += 1;
        self.int += crate::data::int_of(term);
    }

    fn expected(&self, dtype: DataType) -> Expected {
        Expected {
            // Integer sums wrap in the dtype, as every backend's arithmetic does.
            value: if dtype.is_integer() {
                crate::data::wrap(dtype, self.int)
            } else {
                Scalar::F64(self.value)
            },
            scale: self.scale,
            terms: self.terms.max(1),
        }
    }
}

/// A tensor's elements as the reference compares them.
fn got(t: &Tensor) -> Result<Vec<Scalar>> {
    t.to_scalars()
}

fn execute(device: &Arc<dyn Device>, case: &SparseCase) -> Result<Outcome> {
    let mut rng = Rng::for_case(&case.name);
    let c = components(case, &mut rng, device)?;
    let dtype = case.dtype;
    let zero = Tensor::zeros([1], dtype, device)?.to_scalars().ok();
    let cells: usize = case.shape.iter().product();
    Ok(match &case.op {
        SparseOp::ToDense => {
            let result = c.sparse.to_dense(None);
            let expected_error = match case.structure {
                Structure::Canonical => None,
                Structure::Repeated => Some("is repeated"),
                Structure::Scrambled => Some("is out of order"),
                Structure::Unordered => Some("is out of order"),
                Structure::OutOfRange => Some("is out of bounds"),
            };
            match (result, expected_error) {
                (Err(e), Some(want)) if e.to_string().contains(want) => {
                    Outcome::Pass { max_error: 0.0 }
                }
                (Err(e), _) => return Err(e),
                (Ok(_), Some(want)) => {
                    crate::fail(&format!("no error, expected one saying {want:?}"))
                }
                (Ok(dense), None) => {
                    if c.values.is_empty() && c.sparse.nnz() > 0 {
                        return Ok(Outcome::Unsupported);
                    }
                    let fill = zero.map_or(Scalar::I64(0), |z| z[0]);
                    let mut want = vec![exact(fill); cells];
                    for (index, &value) in c.indices.iter().zip(&c.values) {
                        want[ravel(index, &case.shape)] = exact(value);
                    }
                    compare(dtype, Tolerance::Exact, &got(&dense)?, &want)
                }
            }
        }
        SparseOp::Reorder => {
            let reordered = c.sparse.reorder()?;
            let mut order: Vec<usize> = (0..c.indices.len()).collect();
            order.sort_by(|&a, &b| c.indices[a].cmp(&c.indices[b]));
            let want_indices: Vec<i64> = order
                .iter()
                .flat_map(|&i| c.indices[i].iter().map(|&x| x as i64))
                .collect();
            if reordered.indices().to_vec::<i64>()? != want_indices {
                return Ok(crate::fail("indices are not in row-major order"));
            }
            let want: Vec<Expected> = order.iter().map(|&i| exact(c.values[i])).collect();
            compare(dtype, Tolerance::Exact, &got(reordered.values())?, &want)
        }
        SparseOp::Matmul {
            n,
            adjoint_a,
            adjoint_b,
        } => {
            let (rows, cols) = (case.shape[0], case.shape[1]);
            let (m, k) = if *adjoint_a {
                (cols, rows)
            } else {
                (rows, cols)
            };
            let (b, b_values) = draw(dtype, k * n, &mut rng, device)?;
            let b = b.reshape([k, *n])?;
            let b_operand = if *adjoint_b {
                b.transpose(0, 1)?.contiguous()?
            } else {
                b.clone()
            };
            let product = c
                .sparse
                .sparse_dense_matmul(&b_operand, *adjoint_a, *adjoint_b)?;
            let mut sums: Vec<Sum> = (0..m * n).map(|_| Sum::new()).collect();
            for (index, &value) in c.indices.iter().zip(&c.values) {
                let (row, inner) = if *adjoint_a {
                    (index[1], index[0])
                } else {
                    (index[0], index[1])
                };
                for j in 0..*n {
                    let term = multiply(value, b_values[inner * n + j]);
                    sums[row * n + j].add(term);
                }
            }
            let want: Vec<Expected> = sums.iter().map(|s| s.expected(dtype)).collect();
            compare(dtype, Tolerance::Accumulated, &got(&product)?, &want)
        }
        SparseOp::Reduce(op, axis) => {
            let reduced = c.sparse.reduce(*op, &[*axis], false)?;
            let rank = case.shape.len();
            let axis = axis.rem_euclid(rank as i64) as usize;
            let mut kept = case.shape.clone();
            kept.remove(axis);
            let outputs: usize = kept.iter().product();
            let mut sums: Vec<Sum> = (0..outputs).map(|_| Sum::new()).collect();
            let mut maxima: Vec<Option<Scalar>> = vec![None; outputs];
            for (index, &value) in c.indices.iter().zip(&c.values) {
                let mut cell = index.clone();
                cell.remove(axis);
                let at = ravel(&cell, &kept);
                sums[at].add(value);
                // TensorFlow's fold `acc > x ? acc : x`: the new value unless the kept one is larger.
                let larger = maxima[at].is_none_or(|m| {
                    m.to_f64().partial_cmp(&value.to_f64()) != Some(std::cmp::Ordering::Greater)
                });
                if larger {
                    maxima[at] = Some(value);
                }
            }
            let want: Vec<Expected> = match op {
                SparseReduce::Sum => sums.iter().map(|s| s.expected(dtype)).collect(),
                SparseReduce::Max => maxima
                    .iter()
                    .map(|m| {
                        exact(m.unwrap_or_else(|| zero.as_ref().map_or(Scalar::I64(0), |z| z[0])))
                    })
                    .collect(),
            };
            let tol = if *op == SparseReduce::Sum {
                Tolerance::Accumulated
            } else {
                Tolerance::Exact
            };
            compare(dtype, tol, &got(&reduced)?, &want)
        }
        SparseOp::Segment(combiner, rows, width) => {
            let (data, data_values) = draw(dtype, rows * width, &mut rng, device)?;
            let data = data.reshape([*rows, *width])?;
            let count = case.nnz;
            let picks: Vec<i32> = (0..count)
                .map(|_| rng.int(0, *rows as i128 - 1) as i32)
                .collect();
            let mut ids: Vec<i32> = (0..count)
                .map(|_| rng.int(0, count as i128 / 2) as i32)
                .collect();
            ids.sort_unstable();
            let segments = ids.last().map_or(0, |&l| l as usize + 1);
            let result = segment_reduce(
                *combiner,
                &data,
                &Tensor::from_slice(&picks, [count], device)?,
                &Tensor::from_slice(&ids, [count], device)?,
                None,
            )?;
            let mut sums: Vec<Sum> = (0..segments * width).map(|_| Sum::new()).collect();
            for (&row, &id) in picks.iter().zip(&ids) {
                for k in 0..*width {
                    sums[id as usize * width + k].add(data_values[row as usize * width + k]);
                }
            }
            let want: Vec<Expected> = sums
                .iter()
                .map(|s| {
                    let mut e = s.expected(dtype);
                    let divisor = match combiner {
                        Combiner::Sum => 1.0,
                        Combiner::Mean => s.terms.max(1) as f64,
                        Combiner::SqrtN => (s.terms.max(1) as f64).sqrt(),
                    };
                    if let Scalar::F64(v) = e.value {
                        e.value = Scalar::F64(v / divisor);
                        e.scale /= divisor;
                        e.terms += 1;
                    }
                    e
                })
                .collect();
            compare(dtype, Tolerance::Accumulated, &got(&result)?, &want)
        }
        SparseOp::AddDense => {
            let (dense, dense_values) = draw(dtype, cells, &mut rng, device)?;
            let dense = dense.reshape(case.shape.clone())?;
            let sum = c.sparse.add_dense(&dense)?;
            let mut sums: Vec<Sum> = dense_values
                .iter()
                .map(|&v| {
                    let mut s = Sum::new();
                    s.add(v);
                    s
                })
                .collect();
            for (index, &value) in c.indices.iter().zip(&c.values) {
                sums[ravel(index, &case.shape)].add(value);
            }
            let want: Vec<Expected> = sums.iter().map(|s| s.expected(dtype)).collect();
            compare(dtype, Tolerance::Accumulated, &got(&sum)?, &want)
        }
    })
}

/// `a * b` of two values of one dtype, exactly (integers as i128, floats as f64).
fn multiply(a: Scalar, b: Scalar) -> Scalar {
    match (a, b) {
        (Scalar::F64(x), Scalar::F64(y)) => Scalar::F64(x * y),
        _ => Scalar::I64((crate::data::int_of(a) * crate::data::int_of(b)) as i64),
    }
}
