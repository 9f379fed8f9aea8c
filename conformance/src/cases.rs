//! The case catalogue: every op x every dtype it is defined for x shapes and layouts.

use std::fmt;

use super::data::{int_range, Domain};
use polytensor_core::dtype::DataType;
use polytensor_core::element::Scalar;
use polytensor_core::ops::{BinaryOp, Op, ReduceOp, UnaryOp};

/// A group of ops tested together (one test per family in each backend).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// Unary math ops.
    Unary,
    /// Arithmetic binary ops with broadcasting.
    Binary,
    /// Comparisons giving bool.
    Compare,
    /// Logical and, or, xor, not.
    Logical,
    /// `where(cond, a, b)`.
    Where,
    /// Casts between every pair of dtypes.
    Cast,
    /// Batched matmul.
    Matmul,
    /// Reductions.
    Reduce,
    /// `full` and `arange`.
    Fill,
    /// Materialising strided layouts.
    Copy,
    /// The inference layers and shape ops built from the kernels ([`crate::layers`]).
    Layers,
    /// `SparseTensor` ops ([`crate::sparse`]).
    Sparse,
}

impl Family {
    /// Every family.
    pub const ALL: [Family; 12] = [
        Family::Unary,
        Family::Binary,
        Family::Compare,
        Family::Logical,
        Family::Where,
        Family::Cast,
        Family::Matmul,
        Family::Reduce,
        Family::Fill,
        Family::Copy,
        Family::Layers,
        Family::Sparse,
    ];

    /// The family an op belongs to.
    pub fn of(op: Op) -> Family {
        match op {
            Op::Unary(UnaryOp::Not) | Op::Binary(BinaryOp::And | BinaryOp::Or | BinaryOp::Xor) => {
                Family::Logical
            }
            Op::Unary(_) => Family::Unary,
            Op::Binary(b) if b.is_comparison() => Family::Compare,
            Op::Binary(_) => Family::Binary,
            Op::Where => Family::Where,
            Op::Cast => Family::Cast,
            Op::Matmul => Family::Matmul,
            Op::Reduce(_) => Family::Reduce,
            Op::Fill | Op::Arange => Family::Fill,
            Op::Copy => Family::Copy,
        }
    }
}

/// How an input tensor is laid out on the device (its logical values are the reference's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Row-major from offset 0.
    Contiguous,
    /// Row-major from a non-zero offset into a larger buffer.
    Offset,
    /// The last two dims are a transposed view of a row-major buffer.
    Transposed,
    /// Every stride doubled (a view of every other element).
    Strided,
    /// Dim 0 is a stride-0 broadcast of row 0.
    Broadcast,
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Variant::Contiguous => "contiguous",
            Variant::Offset => "offset",
            Variant::Transposed => "transposed",
            Variant::Strided => "strided",
            Variant::Broadcast => "broadcast",
        })
    }
}

/// An input: dtype, dims, the domain its values come from, and its layout.
#[derive(Debug, Clone, PartialEq)]
pub struct InputSpec {
    /// The dtype.
    pub dtype: DataType,
    /// The logical dims.
    pub dims: Vec<usize>,
    /// Where values are drawn from.
    pub domain: Domain,
    /// How the tensor is laid out.
    pub variant: Variant,
    /// Explicit values (edge-value cross products), used instead of drawing.
    pub values: Option<Vec<Scalar>>,
}

impl InputSpec {
    fn new(dtype: DataType, dims: &[usize], domain: Domain, variant: Variant) -> Self {
        Self {
            dtype,
            dims: dims.to_vec(),
            domain,
            variant,
            values: None,
        }
    }
}

/// What a case does.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// `op(x)`.
    Unary(UnaryOp, InputSpec),
    /// `op(a, b)` with broadcasting.
    Binary(BinaryOp, InputSpec, InputSpec),
    /// `where(cond, a, b)`.
    Where(InputSpec, InputSpec, InputSpec),
    /// `cast(x, to)`.
    Cast(DataType, InputSpec),
    /// `matmul_t(a, b, ta, tb)` (inputs given before transposition).
    Matmul(InputSpec, InputSpec, bool, bool),
    /// `reduce(op, x, axes, keep_dims)`.
    Reduce(ReduceOp, InputSpec, Vec<isize>, bool),
    /// `full(dims, value)`.
    Fill(Vec<usize>, Scalar),
    /// `arange(start, stop, step)`.
    Arange(Scalar, Scalar, Scalar),
    /// `contiguous(x)`.
    Copy(InputSpec),
}

/// One conformance case.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// The op (the report's row).
    pub op: Op,
    /// The dtype (the report's row; the source dtype for casts).
    pub dtype: DataType,
    /// A unique name: op, dtype, shapes and layout; it seeds the input data.
    pub name: String,
    /// What to run.
    pub kind: Kind,
}

fn dims_text(dims: &[usize]) -> String {
    format!(
        "[{}]",
        dims.iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(",")
    )
}

/// A large size: over 2^20 elements.
pub const LARGE: usize = (1 << 20) + 7;

const SHAPES: &[&[usize]] = &[
    &[],
    &[0],
    &[1],
    &[7],
    &[33],
    &[1023],
    &[2, 0, 3],
    &[3, 5, 7],
    &[2, 1, 3, 1, 2, 3],
];
/// A matrix larger than a backend's transpose tile (64 on the CPU) in both dims, with
/// partial tiles at both edges: transposed walks take the tiled paths.
const TILED: &[usize] = &[67, 130];

/// A matrix of over 2^16 elements with many rows and columns: reductions over either axis
/// take a backend's parallel paths.
const PARALLEL_MATRIX: &[usize] = &[601, 131];

const VARIANTS: [Variant; 4] = [
    Variant::Offset,
    Variant::Transposed,
    Variant::Strided,
    Variant::Broadcast,
];
const PAIRS: &[(&[usize], &[usize])] = &[
    (&[], &[]),
    (&[0], &[0]),
    (&[1], &[1]),
    (&[7], &[7]),
    (&[1023], &[1023]),
    (&[7, 33], &[33]),
    (&[33], &[7, 33]),
    (&[4, 1, 3], &[5, 1]),
    (&[5, 1], &[4, 1, 3]),
    (&[2, 3], &[]),
    (&[], &[2, 3]),
    (&[0, 4], &[1]),
    (&[2, 1, 3, 1, 2, 3], &[1, 2, 1, 3, 1, 1]),
];

fn computable() -> impl Iterator<Item = DataType> {
    DataType::ALL.iter().copied().filter(|d| d.is_computable())
}

/// The values the suite draws `op`'s input from.
pub fn unary_domain(op: UnaryOp) -> Domain {
    match op {
        UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt => Domain::Positive,
        UnaryOp::Exp | UnaryOp::Sin | UnaryOp::Cos | UnaryOp::Tanh | UnaryOp::Sigmoid => {
            Domain::Small
        }
        _ => Domain::General,
    }
}

/// The values the suite draws `op`'s two inputs from.
pub fn binary_domains(op: BinaryOp) -> (Domain, Domain) {
    match op {
        BinaryOp::Pow => (Domain::Positive, Domain::Small),
        _ => (Domain::General, Domain::General),
    }
}

/// Two inputs holding every pair of `dtype`'s edge values (a cross product).
fn edge_pairs(dtype: DataType) -> (InputSpec, InputSpec) {
    let edges: Vec<Scalar> = super::data::values(
        dtype,
        0,
        Domain::Boundaries,
        &mut super::data::Rng::for_case("edges"),
    )
    .into_iter()
    .chain(edge_list(dtype))
    .collect();
    let n = edges.len();
    let a: Vec<Scalar> = (0..n * n).map(|i| edges[i / n]).collect();
    let b: Vec<Scalar> = (0..n * n).map(|i| edges[i % n]).collect();
    let spec = |values| InputSpec {
        dtype,
        dims: vec![n * n],
        domain: Domain::Boundaries,
        variant: Variant::Contiguous,
        values: Some(values),
    };
    (spec(a), spec(b))
}

/// The edge values of a dtype for binary ops: limits, zero, one, minus one, NaN, infinities.
fn edge_list(dtype: DataType) -> Vec<Scalar> {
    use polytensor_core::dtype::DTypeClass as C;
    match dtype.class() {
        C::Signed | C::Unsigned => {
            let (lo, hi) = int_range(dtype);
            let mut v = vec![lo, hi, 0, 1, 2, 7];
            if dtype.is_signed_integer() {
                v.extend([-1, -2, -7]);
            }
            v.into_iter().map(|x| super::data::wrap(dtype, x)).collect()
        }
        C::Bool => vec![Scalar::Bool(false), Scalar::Bool(true)],
        C::Complex => [0.0, -0.0, 1.0, -1.5, 2.0]
            .iter()
            .flat_map(|&re| {
                [0.0, 1.0, -0.5].map(|im| Scalar::C64(num_complex::Complex::new(re, im)))
            })
            .collect(),
        _ => [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            2.0,
            -2.5,
            3.0,
            1e-3,
        ]
        .map(|x| super::data::round_to(dtype, Scalar::F64(x)))
        .to_vec(),
    }
}

fn unary_cases(out: &mut Vec<Case>) {
    for &op in UnaryOp::ALL {
        for dtype in computable().filter(|&d| Op::Unary(op).is_defined_for(d)) {
            let domain = unary_domain(op);
            let mut add = |dims: &[usize], variant: Variant| {
                out.push(Case {
                    op: Op::Unary(op),
                    dtype,
                    name: format!("{op}/{dtype}/{}/{variant}", dims_text(dims)),
                    kind: Kind::Unary(op, InputSpec::new(dtype, dims, domain, variant)),
                });
            };
            SHAPES
                .iter()
                .for_each(|dims| add(dims, Variant::Contiguous));
            VARIANTS.iter().for_each(|&v| add(&[7, 33], v));
            add(TILED, Variant::Transposed);
            if matches!(dtype, DataType::Float | DataType::Int32 | DataType::Bool) {
                add(&[LARGE], Variant::Contiguous);
            }
        }
    }
}

fn binary_cases(out: &mut Vec<Case>, family: Family) {
    for &op in BinaryOp::ALL
        .iter()
        .filter(|&&op| Family::of(Op::Binary(op)) == family)
    {
        for dtype in computable().filter(|&d| Op::Binary(op).is_defined_for(d)) {
            let (da, db) = binary_domains(op);
            let mut add = |a: &[usize], b: &[usize], va: Variant, vb: Variant| {
                out.push(Case {
                    op: Op::Binary(op),
                    dtype,
                    name: format!("{op}/{dtype}/{}x{}/{va},{vb}", dims_text(a), dims_text(b)),
                    kind: Kind::Binary(
                        op,
                        InputSpec::new(dtype, a, da, va),
                        InputSpec::new(dtype, b, db, vb),
                    ),
                });
            };
            PAIRS
                .iter()
                .for_each(|(a, b)| add(a, b, Variant::Contiguous, Variant::Contiguous));
            for (i, &va) in VARIANTS.iter().enumerate() {
                add(&[7, 33], &[7, 33], va, VARIANTS[(i + 1) % VARIANTS.len()]);
            }
            add(&[3, 7, 33], &[33], Variant::Transposed, Variant::Strided);
            add(TILED, TILED, Variant::Transposed, Variant::Contiguous);
            add(TILED, TILED, Variant::Strided, Variant::Transposed);
            if matches!(
                op,
                BinaryOp::Add | BinaryOp::Max | BinaryOp::Lt | BinaryOp::And
            ) && matches!(dtype, DataType::Float | DataType::Int32 | DataType::Bool)
            {
                add(&[LARGE], &[LARGE], Variant::Contiguous, Variant::Contiguous);
            }
            let (a, b) = edge_pairs(dtype);
            out.push(Case {
                op: Op::Binary(op),
                dtype,
                name: format!("{op}/{dtype}/edges{}", dims_text(&a.dims)),
                kind: Kind::Binary(op, a, b),
            });
        }
    }
}

fn logical_unary_cases(out: &mut Vec<Case>) {
    for dims in [&[][..], &[7], &[3, 5, 7]] {
        out.push(Case {
            op: Op::Unary(UnaryOp::Not),
            dtype: DataType::Bool,
            name: format!("not/bool/{}/contiguous", dims_text(dims)),
            kind: Kind::Unary(
                UnaryOp::Not,
                InputSpec::new(DataType::Bool, dims, Domain::General, Variant::Contiguous),
            ),
        });
    }
    for v in VARIANTS {
        out.push(Case {
            op: Op::Unary(UnaryOp::Not),
            dtype: DataType::Bool,
            name: format!("not/bool/[7,33]/{v}"),
            kind: Kind::Unary(
                UnaryOp::Not,
                InputSpec::new(DataType::Bool, &[7, 33], Domain::General, v),
            ),
        });
    }
}

fn where_cases(out: &mut Vec<Case>) {
    let shapes: &[(&[usize], &[usize], &[usize])] = &[
        (&[], &[], &[]),
        (&[0], &[0], &[0]),
        (&[7, 33], &[7, 33], &[7, 33]),
        (&[7, 1], &[33], &[]),
        (&[33], &[7, 1], &[1, 33]),
        (&[2, 1, 3, 1, 2, 3], &[1, 2, 3, 1, 1, 1], &[3]),
    ];
    for dtype in computable().filter(|&d| Op::Where.is_defined_for(d)) {
        for (i, (c, a, b)) in shapes.iter().enumerate() {
            let variant = VARIANTS[i % VARIANTS.len()];
            let (va, vb) = if a.len() >= 2 {
                (variant, Variant::Contiguous)
            } else {
                (Variant::Contiguous, Variant::Contiguous)
            };
            out.push(Case {
                op: Op::Where,
                dtype,
                name: format!(
                    "where/{dtype}/{}x{}x{}/{va}",
                    dims_text(c),
                    dims_text(a),
                    dims_text(b)
                ),
                kind: Kind::Where(
                    InputSpec::new(DataType::Bool, c, Domain::General, Variant::Contiguous),
                    InputSpec::new(dtype, a, Domain::General, va),
                    InputSpec::new(dtype, b, Domain::General, vb),
                ),
            });
        }
    }
}

fn cast_cases(out: &mut Vec<Case>) {
    for from in computable() {
        for to in computable().filter(|&t| t != from) {
            out.push(Case {
                op: Op::Cast,
                dtype: from,
                name: format!("cast/{from}->{to}/[160]/boundaries"),
                kind: Kind::Cast(
                    to,
                    InputSpec::new(from, &[160], Domain::Boundaries, Variant::Contiguous),
                ),
            });
            out.push(Case {
                op: Op::Cast,
                dtype: from,
                name: format!("cast/{from}->{to}/[7,33]/transposed"),
                kind: Kind::Cast(
                    to,
                    InputSpec::new(from, &[7, 33], Domain::General, Variant::Transposed),
                ),
            });
        }
        out.push(Case {
            op: Op::Cast,
            dtype: from,
            name: format!("cast/{from}->float32/[]/contiguous"),
            kind: Kind::Cast(
                DataType::Float,
                InputSpec::new(from, &[], Domain::General, Variant::Contiguous),
            ),
        });
    }
}

/// (a dims, b dims, transpose_a, transpose_b, variant of a): dims as stored, before transposes.
type MatmulShape = (&'static [usize], &'static [usize], bool, bool, Variant);

fn matmul_cases(out: &mut Vec<Case>) {
    let shapes: &[MatmulShape] = &[
        (&[1, 1], &[1, 1], false, false, Variant::Contiguous),
        (&[3, 0], &[0, 4], false, false, Variant::Contiguous),
        (&[1, 5], &[5, 7], false, false, Variant::Contiguous),
        (&[6, 5], &[5, 1], false, false, Variant::Contiguous),
        (&[7, 33], &[33, 9], false, false, Variant::Contiguous),
        (&[33, 7], &[33, 9], true, false, Variant::Contiguous),
        (&[7, 33], &[9, 33], false, true, Variant::Contiguous),
        (&[33, 7], &[9, 33], true, true, Variant::Strided),
        (&[7, 33], &[33, 9], false, false, Variant::Transposed),
        (&[7, 33], &[33, 9], false, false, Variant::Offset),
        (&[7, 33], &[33, 9], false, false, Variant::Broadcast),
        (&[2, 3, 4], &[2, 4, 5], false, false, Variant::Contiguous),
        (&[2, 1, 3, 4], &[5, 4, 6], false, false, Variant::Strided),
        (&[4, 3], &[2, 3, 4, 5], true, false, Variant::Contiguous),
        (&[64, 130], &[130, 65], false, false, Variant::Contiguous),
        // A row times a large matrix (a dense layer at batch 1: the CPU's streaming path).
        (&[1, 600], &[600, 513], false, false, Variant::Contiguous),
        (&[1, 600], &[600, 513], false, false, Variant::Strided),
    ];
    for dtype in computable().filter(|&d| Op::Matmul.is_defined_for(d)) {
        for &(a, b, ta, tb, variant) in shapes {
            out.push(Case {
                op: Op::Matmul,
                dtype,
                name: format!(
                    "matmul/{dtype}/{}{}x{}{}/{variant}",
                    dims_text(a),
                    if ta { "T" } else { "" },
                    dims_text(b),
                    if tb { "T" } else { "" }
                ),
                kind: Kind::Matmul(
                    InputSpec::new(dtype, a, Domain::Finite, variant),
                    InputSpec::new(dtype, b, Domain::Finite, Variant::Contiguous),
                    ta,
                    tb,
                ),
            });
        }
    }
}

fn reduce_cases(out: &mut Vec<Case>) {
    let subsets: Vec<Vec<isize>> = (0..8u32)
        .map(|m| (0..3).filter(|b| m & (1 << b) != 0).collect())
        .collect();
    for &op in ReduceOp::ALL {
        let arg = matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin);
        for dtype in computable().filter(|&d| Op::Reduce(op).is_defined_for(d)) {
            let mut add =
                |dims: &[usize], axes: Vec<isize>, keep: bool, domain: Domain, variant: Variant| {
                    // argmax and argmin take exactly one axis (TensorFlow's ArgMax).
                    if arg && axes.len() != 1 {
                        return;
                    }
                    out.push(Case {
                        op: Op::Reduce(op),
                        dtype,
                        name: format!(
                            "reduce_{op}/{dtype}/{}/axes{axes:?}{}/{variant}{}",
                            dims_text(dims),
                            if keep { "/keep" } else { "" },
                            if domain == Domain::General {
                                "/specials"
                            } else {
                                ""
                            }
                        ),
                        kind: Kind::Reduce(
                            op,
                            InputSpec::new(dtype, dims, domain, variant),
                            axes,
                            keep,
                        ),
                    });
                };
            add(&[], vec![], false, Domain::Finite, Variant::Contiguous);
            add(&[7], vec![0], false, Domain::Finite, Variant::Contiguous);
            add(&[1023], vec![-1], true, Domain::Finite, Variant::Contiguous);
            add(&[33], vec![0], false, Domain::General, Variant::Contiguous);
            for (i, axes) in subsets.iter().enumerate() {
                add(
                    &[3, 4, 5],
                    axes.clone(),
                    i % 2 == 1,
                    Domain::Finite,
                    Variant::Contiguous,
                );
            }
            add(
                &[3, 4, 5],
                vec![0, 2],
                false,
                Domain::Finite,
                Variant::Transposed,
            );
            // A global average pool over NHWC's H and W.
            add(
                &[2, 3, 5, 17],
                vec![1, 2],
                false,
                Domain::Finite,
                Variant::Contiguous,
            );
            add(&[7, 33], vec![0], false, Domain::Finite, Variant::Strided);
            add(&[7, 33], vec![1], true, Domain::Finite, Variant::Offset);
            add(&[7, 33], vec![0], false, Domain::Finite, Variant::Broadcast);
            // Large enough for the parallel row and column paths of a backend.
            add(
                PARALLEL_MATRIX,
                vec![0],
                false,
                Domain::Finite,
                Variant::Contiguous,
            );
            add(
                PARALLEL_MATRIX,
                vec![1],
                false,
                Domain::Finite,
                Variant::Contiguous,
            );
            add(
                &[2, 1, 3, 1, 2, 3],
                vec![0, 1, 2, 3, 4, 5],
                false,
                Domain::Finite,
                Variant::Contiguous,
            );
            add(
                &[2, 1, 3, 1, 2, 3],
                vec![1, 3, 5],
                true,
                Domain::Finite,
                Variant::Contiguous,
            );
            add(
                &[2, 0, 3],
                vec![0],
                false,
                Domain::Finite,
                Variant::Contiguous,
            );
            if !arg {
                add(&[0], vec![0], false, Domain::Finite, Variant::Contiguous);
                add(
                    &[2, 0, 3],
                    vec![1],
                    true,
                    Domain::Finite,
                    Variant::Contiguous,
                );
            }
            if matches!(dtype, DataType::Float | DataType::Int32) {
                add(
                    &[LARGE],
                    vec![0],
                    false,
                    Domain::Finite,
                    Variant::Contiguous,
                );
                add(
                    &[1024, 1025],
                    vec![0],
                    false,
                    Domain::Finite,
                    Variant::Contiguous,
                );
                add(
                    &[1024, 1025],
                    vec![1],
                    false,
                    Domain::Finite,
                    Variant::Contiguous,
                );
            }
        }
    }
}

fn fill_cases(out: &mut Vec<Case>) {
    for dtype in computable() {
        let values = [
            Scalar::F64(1.5),
            Scalar::I64(-3),
            Scalar::Bool(true),
            Scalar::U64(u64::MAX),
            Scalar::F64(f64::NAN),
        ];
        for (i, value) in values.into_iter().enumerate() {
            let dims: &[usize] = [&[][..], &[0], &[7, 33], &[1023], &[2, 1, 3]][i];
            out.push(Case {
                op: Op::Fill,
                dtype,
                name: format!("fill/{dtype}/{}/{value:?}", dims_text(dims)),
                kind: Kind::Fill(dims.to_vec(), value),
            });
        }
        if Op::Arange.is_defined_for(dtype) {
            let ranges = [
                (Scalar::I64(0), Scalar::I64(100), Scalar::I64(1)),
                (Scalar::I64(50), Scalar::I64(-50), Scalar::I64(-3)),
                (Scalar::F64(-1.0), Scalar::F64(1.0), Scalar::F64(0.125)),
                (Scalar::I64(5), Scalar::I64(5), Scalar::I64(1)),
            ];
            for (start, stop, step) in ranges {
                out.push(Case {
                    op: Op::Arange,
                    dtype,
                    name: format!("arange/{dtype}/{start:?}..{stop:?}/{step:?}"),
                    kind: Kind::Arange(start, stop, step),
                });
            }
        }
    }
}

fn copy_cases(out: &mut Vec<Case>) {
    for dtype in computable() {
        for v in [
            Variant::Offset,
            Variant::Transposed,
            Variant::Strided,
            Variant::Broadcast,
        ] {
            for dims in [&[7, 33][..], &[2, 3, 1, 4, 5, 2], &[3, 0]] {
                out.push(Case {
                    op: Op::Copy,
                    dtype,
                    name: format!("copy/{dtype}/{}/{v}", dims_text(dims)),
                    kind: Kind::Copy(InputSpec::new(dtype, dims, Domain::General, v)),
                });
            }
        }
    }
}

/// Every case of `family`.
pub fn family_cases(family: Family) -> Vec<Case> {
    let mut out = Vec::new();
    match family {
        Family::Unary => unary_cases(&mut out),
        Family::Binary | Family::Compare => binary_cases(&mut out, family),
        Family::Logical => {
            binary_cases(&mut out, Family::Logical);
            logical_unary_cases(&mut out);
        }
        Family::Where => where_cases(&mut out),
        Family::Cast => cast_cases(&mut out),
        Family::Matmul => matmul_cases(&mut out),
        Family::Reduce => reduce_cases(&mut out),
        Family::Fill => fill_cases(&mut out),
        Family::Copy => copy_cases(&mut out),
        // Layer cases are `LayerCase`s (`crate::layers::layer_cases`).
        Family::Layers | Family::Sparse => {}
    }
    out
}

/// Every case of every family.
pub fn all_cases() -> Vec<Case> {
    Family::ALL.iter().flat_map(|&f| family_cases(f)).collect()
}
