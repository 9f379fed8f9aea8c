//! Kernels: each op run with polytensor's eager tensor API on the device it is placed on.
//! Where TensorFlow's semantics differ from the kernel surface (floor division, integer
//! division by zero, integer powers), the kernel follows TensorFlow.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use smallvec::{smallvec, SmallVec};

use polytensor_core::collective::Collectives;
use polytensor_core::ops::{BinaryOp, ReduceOp, UnaryOp};
use polytensor_core::{DataType, Device, Error, Result, Scalar, Tensor};

use super::{ComplexPart, Division, Flow, Kind, Value};
use crate::attr::Attrs;
use crate::graph::Node;

/// A session's resources by name: variable values (what the struct dereferences to) and
/// lookup tables.
#[derive(Default)]
pub(crate) struct Variables {
    values: HashMap<Arc<str>, Tensor>,
    /// The lookup tables filled so far ([`super::table`]).
    pub(crate) tables: HashMap<Arc<str>, Arc<super::table::LookupTable>>,
}

impl Variables {
    pub(crate) fn new() -> Self {
        Self::default()
    }
}

impl std::ops::Deref for Variables {
    type Target = HashMap<Arc<str>, Tensor>;
    fn deref(&self) -> &Self::Target {
        &self.values
    }
}

impl std::ops::DerefMut for Variables {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.values
    }
}

/// What a kernel sees: its node, the device, the session's variables and its inputs.
pub(crate) struct RunCtx<'a, 'v> {
    pub(crate) node: &'a Node,
    pub(crate) device: &'a Arc<dyn Device>,
    /// The session's variables, held for this step (or an empty stand-in for a step that
    /// uses none).
    pub(crate) variables: &'v mut Variables,
    pub(crate) inputs: SmallVec<[&'a Value; 4]>,
    /// The nodes a fused step runs before `node` (see `crate::fusion`).
    pub(crate) chain: SmallVec<[&'a Node; 2]>,
    /// The session's communicator, for collective ops.
    pub(crate) collectives: Option<&'a dyn Collectives>,
    /// The step's filter (input 1) as the plan packed it for the device
    /// ([`polytensor_core::PackedFilter`]), where it did.
    pub(crate) packed: Option<&'v polytensor_core::PackedFilter>,
}

/// A kernel's outputs (most ops have one).
pub(crate) type Outputs = SmallVec<[Value; 1]>;

impl RunCtx<'_, '_> {
    pub(crate) fn attrs(&self) -> Attrs<'_> {
        Attrs {
            node: &self.node.name,
            attrs: &self.node.attrs,
        }
    }

    /// `t` on this step's device: itself, or a copy (a variable that lives on another).
    fn here<'t>(&self, t: &'t Tensor) -> Result<Cow<'t, Tensor>> {
        if polytensor_core::device::same_device(t.device(), self.device) {
            Ok(Cow::Borrowed(t))
        } else {
            t.to_device(self.device).map(Cow::Owned)
        }
    }

    /// Input `i` as a tensor (a reference variable reads its value).
    pub(crate) fn tensor(&self, i: usize) -> Result<Cow<'_, Tensor>> {
        match self.inputs[i] {
            Value::Tensor(t) => Ok(Cow::Borrowed(t)),
            Value::Ref(name) => {
                let value = self.variables.get(name).ok_or_else(|| {
                    Error::invalid(format!("Attempting to use uninitialized value {name}"))
                })?;
                self.here(value)
            }
            Value::Resource(_) => Err(Error::invalid(format!(
                "input {i} of '{}' is a resource handle, not a tensor",
                self.node.name
            ))),
            Value::List(_) => Err(Error::invalid(format!(
                "input {i} of '{}' is a TensorList, not a tensor",
                self.node.name
            ))),
        }
    }

    /// Input `i` as it is passed on unchanged (`Identity`): a tensor (a reference variable
    /// read), or a handle or list as it is.
    fn passed_on(&self, i: usize) -> Result<Value> {
        match self.inputs[i] {
            Value::Ref(_) => Ok(Value::Tensor(self.tensor(i)?.into_owned())),
            other => Ok(other.clone()),
        }
    }

    /// Input `i` as a variable name (a resource handle or a reference).
    pub(crate) fn variable(&self, i: usize) -> Result<Arc<str>> {
        match self.inputs[i] {
            Value::Resource(name) | Value::Ref(name) => Ok(name.clone()),
            Value::Tensor(_) | Value::List(_) => Err(Error::invalid(format!(
                "input {i} of '{}' is not a variable",
                self.node.name
            ))),
        }
    }

    /// Input `i`'s elements as integers (axes, dims, perms), read on the host.
    pub(crate) fn ints(&self, i: usize) -> Result<Vec<i64>> {
        self.tensor(i)?
            .to_scalars()?
            .into_iter()
            .map(|s| match s {
                Scalar::I64(v) => Ok(v),
                Scalar::U64(v) => i64::try_from(v).map_err(|_| Error::invalid("index overflow")),
                _ => Err(Error::invalid(format!(
                    "input {i} of '{}' must be integers",
                    self.node.name
                ))),
            })
            .collect()
    }

    /// `Err` with `message` (given input `i`'s shape, `[1,2]`) where input `i` is not of
    /// rank `rank`: TensorFlow's kernels' check on shape inputs and scalar operands.
    pub(crate) fn require_rank(
        &self,
        i: usize,
        rank: usize,
        message: impl FnOnce(String) -> String,
    ) -> Result<()> {
        let t = self.tensor(i)?;
        if t.rank() != rank {
            return Err(Error::invalid(message(t.shape().to_string())));
        }
        Ok(())
    }

    fn zero(&self, dtype: DataType) -> Result<Tensor> {
        Tensor::zeros([0usize; 0], dtype, self.device)
    }

    /// Whether any element of `t` satisfies `op` against zero.
    fn any_vs_zero(&self, t: &Tensor, op: BinaryOp) -> Result<bool> {
        let hits = t
            .binary(op, &self.zero(t.dtype())?)?
            .cast(DataType::Int32)?;
        Ok(hits.num_elements() > 0 && hits.reduce_all(ReduceOp::Max)?.item::<i32>()? > 0)
    }

    /// The current value of variable `name`, or TensorFlow's error for a missing one.
    pub(crate) fn read_variable(&self, name: &str) -> Result<Tensor> {
        let value = self.variables.get(name).ok_or_else(|| {
            let status = if self.variables.is_empty() {
                "Container localhost does not exist.".to_string()
            } else {
                format!("Resource localhost/{name}/N10tensorflow3VarE does not exist.")
            };
            Error::invalid(format!(
                "Could not find variable {name}. This could mean that the variable has been \
                 deleted. In TF1, it can also mean the variable is uninitialized. Debug info: \
                 container=localhost, status error message={status} (Could not find resource: \
                 localhost/{name})"
            ))
        })?;
        Ok(self.here(value)?.into_owned())
    }

    fn check_dtype(&self, value: &Tensor, want: DataType) -> Result<()> {
        if value.dtype() == want {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "Trying to assign variable with wrong dtype. Expected {} got {}",
                super::cpp_dtype_name(want),
                super::cpp_dtype_name(value.dtype())
            )))
        }
    }

    /// The variable's name: `shared_name`, or the node's own name.
    fn variable_name(&self) -> Result<Arc<str>> {
        variable_name(self.node)
    }
}

/// The name of the variable a `VarHandleOp` or `VariableV2` node makes: its `shared_name`,
/// or the node's own name.
pub(crate) fn variable_name(node: &Node) -> Result<Arc<str>> {
    let shared = Attrs {
        node: &node.name,
        attrs: &node.attrs,
    }
    .string_or("shared_name", "")?;
    Ok(if shared.is_empty() {
        node.name.clone()
    } else {
        shared.into()
    })
}

/// A `Const`'s value on the step's device: the graph's host copy where the step runs on
/// the CPU it was decoded for (decoded by the first CPU session, then shared), else
/// decoded from the node's `TensorProto`.
fn constant(cx: &RunCtx<'_, '_>) -> Result<Tensor> {
    let decoded = &cx.node.decoded;
    if let Some(t) = decoded.get() {
        if polytensor_core::device::same_device(t.device(), cx.device) {
            return Ok(t.clone());
        }
    }
    let t = Tensor::from_proto(cx.attrs().tensor("value")?, cx.device)?;
    if cx.device.kind() == polytensor_core::DeviceKind::CPU && decoded.get().is_none() {
        decoded.keep(&t);
    }
    Ok(t)
}

/// Run a node of `kind`.
pub(crate) fn run(kind: Kind, cx: &mut RunCtx<'_, '_>) -> Result<Outputs> {
    let one = |t: Tensor| Ok(smallvec![Value::Tensor(t)]);
    match kind {
        Kind::Const => one(constant(cx)?),
        Kind::Placeholder => {
            let attrs = cx.attrs();
            Err(Error::invalid(format!(
                "You must feed a value for placeholder tensor '{}' with dtype {} and shape {}",
                cx.node.name,
                super::cpp_dtype_name(attrs.dtype("dtype")?),
                attrs.shape_or_unknown("shape")?
            )))
        }
        Kind::Identity => Ok(smallvec![cx.passed_on(0)?]),
        Kind::IdentityN => (0..cx.inputs.len()).map(|i| cx.passed_on(i)).collect(),
        Kind::NoOp => Ok(Outputs::new()),
        Kind::Flow(Flow::Switch | Flow::Merge) | Kind::Call(_) => Err(Error::invalid(format!(
            "{} '{}' is run by the session's executor, not as a kernel",
            cx.node.op_type, cx.node.name
        ))),
        // `Enter`, `Exit`, `NextIteration`, `LoopCond`: the value (a tensor or a handle)
        // unchanged; moving it between frames and iterations is the executor's part.
        Kind::Flow(_) => Ok(smallvec![cx.inputs[0].clone()]),
        Kind::Binary(op) => {
            let (a, b) = (cx.tensor(0)?, cx.tensor(1)?);
            if op == BinaryOp::Pow && b.dtype().is_integer() && cx.any_vs_zero(&b, BinaryOp::Lt)? {
                return Err(Error::invalid(
                    "Integers to negative integer powers are not allowed",
                ));
            }
            one(a.binary(op, &b)?)
        }
        Kind::Compare(op) => one(cx.tensor(0)?.binary(op, &*cx.tensor(1)?)?),
        Kind::Division(division) => one(divide(cx, division)?),
        Kind::Unary(op) => one(cx.tensor(0)?.unary(op)?),
        Kind::Cast => one(cx.tensor(0)?.cast(cx.attrs().dtype("DstT")?)?),
        Kind::MakeComplex => one(Tensor::complex(&*cx.tensor(0)?, &*cx.tensor(1)?)?),
        Kind::ComplexPart(part) => {
            let z = cx.tensor(0)?;
            one(match part {
                ComplexPart::Real => z.real()?,
                ComplexPart::Imag => z.imag()?,
                ComplexPart::Abs => z.complex_abs()?,
                ComplexPart::Angle => z.angle()?,
            })
        }
        Kind::Conj => one(cx.tensor(0)?.conj()?),
        Kind::Nn(op) => super::nn::run(op, cx),
        Kind::FusedConv(fused) => super::nn::run_fused(fused, cx),
        Kind::ChannelAffine { activation } => super::nn::run_channel_affine(activation, cx),
        Kind::Swish => super::nn::run_swish(cx),
        Kind::Gelu => super::nn::run_gelu(cx),
        Kind::HardSwish { divide } => super::nn::run_hard_swish(cx, divide),
        Kind::LayerNorm {
            epsilon,
            gamma,
            beta,
        } => super::nn::run_layer_norm(cx, epsilon, gamma, beta),
        Kind::Array(op) => super::array::run(op, cx),
        Kind::Sparse(op) => super::sparse::run(op, cx),
        Kind::Collective(op) => super::collective::run(op, cx, cx.collectives),
        Kind::Debug(op) => super::debug::run(op, cx),
        Kind::Strings(op) => super::strings::run(op, cx),
        Kind::Table(op) => super::table::run(op, cx),
        Kind::Saver(op) => super::saver::run(op, cx),
        Kind::List(op) => super::list::run(op, cx),
        Kind::Generate(op) => super::generate::run(op, cx),
        Kind::Grad(op) => super::grad::run(op, cx),
        Kind::Apply(rule) => super::optimizer::run(rule, cx),
        Kind::Select { v1 } => one(select(cx, v1)?),
        Kind::MatMul | Kind::BatchMatMul => {
            let attrs = cx.attrs();
            let (ta, tb) = if kind == Kind::MatMul {
                (
                    attrs.bool_or("transpose_a", false)?,
                    attrs.bool_or("transpose_b", false)?,
                )
            } else {
                (
                    attrs.bool_or("adj_x", false)?,
                    attrs.bool_or("adj_y", false)?,
                )
            };
            let (a, b) = (cx.tensor(0)?, cx.tensor(1)?);
            if kind == Kind::BatchMatMul && (ta || tb) && a.dtype().is_complex() {
                return Err(Error::invalid(
                    "BatchMatMulV2 with adj_x/adj_y on complex tensors (conjugation) is not \
                     supported",
                ));
            }
            one(a.matmul_t(&b, ta, tb)?)
        }
        Kind::Reduce(op) => {
            let x = cx.tensor(0)?;
            let axes: Vec<isize> = cx.ints(1)?.iter().map(|&a| a as isize).collect();
            if axes.is_empty() {
                return one(x.into_owned());
            }
            one(x.reduce(op, &axes, cx.attrs().bool_or("keep_dims", false)?)?)
        }
        Kind::Einsum => {
            let operands = (0..cx.inputs.len())
                .map(|i| cx.tensor(i))
                .collect::<Result<Vec<_>>>()?;
            let operands: Vec<&Tensor> = operands.iter().map(|t| &**t).collect();
            let equation = cx.attrs().string_or("equation", "")?;
            one(Tensor::einsum(&equation, &operands)?)
        }
        Kind::Logical { any } => {
            let x = cx.tensor(0)?.into_owned();
            let axes: Vec<isize> = cx.ints(1)?.iter().map(|&a| a as isize).collect();
            if axes.is_empty() {
                return one(x);
            }
            // `All` is the minimum of the values as int32 (true over no elements); `Any` is
            // not `All` of not (false over no elements).
            let flip = |t: Tensor| if any { t.unary(UnaryOp::Not) } else { Ok(t) };
            let keep = cx.attrs().bool_or("keep_dims", false)?;
            let all = flip(x)?
                .cast(DataType::Int32)?
                .reduce(ReduceOp::Min, &axes, keep)?
                .cast(DataType::Bool)?;
            one(flip(all)?)
        }
        Kind::Arg(op) => {
            let axis = match cx.ints(1)?[..] {
                [axis] => axis as isize,
                _ => {
                    return Err(Error::invalid(
                        "the dimension of ArgMax/ArgMin must be a scalar",
                    ))
                }
            };
            let out = cx.attrs().dtype_or("output_type", DataType::Int64)?;
            one(cx.tensor(0)?.reduce(op, &[axis], false)?.cast(out)?)
        }
        Kind::Reshape => {
            cx.require_rank(1, 1, |s| format!("sizes input must be 1-D, not {s}"))?;
            let x = cx.tensor(0)?;
            one(x.reshape_infer(&cx.ints(1)?)?)
        }
        Kind::Transpose => {
            let perm = cx.ints(1)?;
            let perm: Vec<usize> = perm
                .iter()
                .map(|&p| usize::try_from(p).map_err(|_| Error::invalid("negative perm entry")))
                .collect::<Result<_>>()?;
            one(cx.tensor(0)?.permute(&perm)?)
        }
        Kind::ExpandDims => match cx.ints(1)?[..] {
            [dim] => one(cx.tensor(0)?.unsqueeze(dim as isize)?),
            _ => Err(Error::invalid("ExpandDims takes one dim")),
        },
        Kind::Squeeze => {
            let x = cx.tensor(0)?;
            let named = cx.attrs().ints("squeeze_dims")?;
            let rank = x.rank() as i64;
            let mut dims: Vec<i64> = if named.is_empty() {
                (0..rank).filter(|&i| x.dims()[i as usize] == 1).collect()
            } else {
                named
                    .iter()
                    .map(|&d| if d < 0 { d + rank } else { d })
                    .collect()
            };
            dims.sort_unstable();
            dims.dedup();
            let mut out = x.into_owned();
            for &d in dims.iter().rev() {
                out = out.squeeze(d as isize)?;
            }
            one(out)
        }
        Kind::Shape => {
            let dims: Vec<i64> = cx.tensor(0)?.dims().iter().map(|&d| d as i64).collect();
            let out = cx.attrs().dtype_or("out_type", DataType::Int32)?;
            one(Tensor::from_vec(dims, cx.device)?.cast(out)?)
        }
        Kind::Fill => {
            cx.require_rank(0, 1, |s| {
                format!("dims must represent a vector, got shape {s}")
            })?;
            cx.require_rank(1, 0, |s| {
                format!("value must represent a scalar, got shape {s}")
            })?;
            let dims: Vec<usize> = cx
                .ints(0)?
                .iter()
                .map(|&d| usize::try_from(d).map_err(|_| Error::invalid("negative dim in Fill")))
                .collect::<Result<_>>()?;
            one(cx.tensor(1)?.broadcast_to(dims)?.contiguous()?)
        }
        Kind::Range => {
            for (i, bound) in ["start", "limit", "delta"].into_iter().enumerate() {
                cx.require_rank(i, 0, |s| format!("{bound} must be a scalar, not shape {s}"))?;
            }
            let scalar = |i: usize| -> Result<Scalar> {
                let values = cx.tensor(i)?.to_scalars()?;
                values
                    .first()
                    .copied()
                    .ok_or_else(|| Error::invalid("Range takes scalars"))
            };
            let dtype = cx.tensor(0)?.dtype();
            let out = cx.attrs().dtype_or("Tidx", dtype)?;
            let bounds = [scalar(0)?, scalar(1)?, scalar(2)?];
            super::infer::range_direction(bounds).map_err(Error::invalid)?;
            let [start, limit, delta] = bounds;
            one(Tensor::arange(start, limit, delta, out, cx.device)?)
        }
        Kind::AddN if matches!(cx.inputs.first(), Some(Value::List(_))) => {
            super::list::add_lists(cx)
        }
        Kind::AddN => {
            let mut sum = cx.tensor(0)?.into_owned();
            for i in 1..cx.inputs.len() {
                sum = sum.binary(BinaryOp::Add, &*cx.tensor(i)?)?;
            }
            one(sum)
        }
        Kind::VarHandle => Ok(smallvec![Value::Resource(cx.variable_name()?)]),
        Kind::RefVariable => Ok(smallvec![Value::Ref(cx.variable_name()?)]),
        Kind::ReadVariable => {
            let value = cx.read_variable(&cx.variable(0)?)?;
            let want = cx.attrs().dtype("dtype")?;
            if value.dtype() != want {
                return Err(Error::invalid(format!(
                    "Trying to read variable with wrong dtype. Expected {} got {}",
                    super::cpp_dtype_name(value.dtype()),
                    super::cpp_dtype_name(want)
                )));
            }
            one(value)
        }
        Kind::DisableCopyOnRead => {
            cx.variable(0)?;
            Ok(Outputs::new())
        }
        Kind::ResourceGather => {
            let value = cx.read_variable(&cx.variable(0)?)?;
            cx.check_dtype(&value, cx.attrs().dtype("dtype")?)?;
            let batch_dims = cx.attrs().int_or("batch_dims", 0)?;
            one(value.gather(&*cx.tensor(1)?, batch_dims, batch_dims)?)
        }
        Kind::AssignVariable => {
            let (name, value) = (cx.variable(0)?, cx.tensor(1)?.into_owned());
            cx.check_dtype(&value, cx.attrs().dtype("dtype")?)?;
            cx.variables.insert(name, value);
            Ok(Outputs::new())
        }
        Kind::AssignByVariable(op) => {
            let name = cx.variable(0)?;
            let value = cx.read_variable(&name)?;
            let update = cx.tensor(1)?;
            if update.dims() != value.dims() {
                return Err(Error::invalid(format!(
                    "Cannot update variable with shape {} using a Tensor with shape {}, shapes \
                     must be equal.",
                    value.shape(),
                    update.shape()
                )));
            }
            let combined = value.binary(op, &update)?;
            cx.variables.insert(name, combined);
            Ok(Outputs::new())
        }
        Kind::ResourceScatter(op) => {
            let name = cx.variable(0)?;
            let value = cx.read_variable(&name)?;
            let scattered = value.scatter(op, &*cx.tensor(1)?, &*cx.tensor(2)?)?;
            cx.variables.insert(name, scattered);
            Ok(Outputs::new())
        }
        Kind::VariableShape => {
            let dims: Vec<i64> = cx
                .read_variable(&cx.variable(0)?)?
                .dims()
                .iter()
                .map(|&d| d as i64)
                .collect();
            let out = cx.attrs().dtype_or("out_type", DataType::Int32)?;
            one(Tensor::from_vec(dims, cx.device)?.cast(out)?)
        }
        Kind::VarIsInitialized => {
            let name = cx.variable(0)?;
            one(Tensor::scalar(cx.variables.contains_key(&name), cx.device)?)
        }
        Kind::RefAssign => {
            let (name, value) = (cx.variable(0)?, cx.tensor(1)?.into_owned());
            if let Some(old) = cx.variables.get(&name) {
                cx.check_dtype(&value, old.dtype())?;
            }
            cx.variables.insert(name.clone(), value);
            Ok(smallvec![Value::Ref(name)])
        }
        Kind::RefAssignAdd => {
            let name = cx.variable(0)?;
            let sum = cx.tensor(0)?.binary(BinaryOp::Add, &*cx.tensor(1)?)?;
            cx.variables.insert(name.clone(), sum);
            Ok(smallvec![Value::Ref(name)])
        }
    }
}

/// TensorFlow's division ops on top of the kernel surface's truncating `Div` and `Rem`.
fn divide(cx: &RunCtx<'_, '_>, division: Division) -> Result<Tensor> {
    let (a, b) = (cx.tensor(0)?, cx.tensor(1)?);
    let dtype = a.dtype();
    if dtype.is_integer() && cx.any_vs_zero(&b, BinaryOp::Eq)? {
        return Err(Error::invalid("Integer division by zero"));
    }
    let quotient = || a.binary(BinaryOp::Div, &b);
    let remainder = || a.binary(BinaryOp::Rem, &b);
    // Where the truncated remainder is non-zero and its sign differs from the divisor's,
    // flooring moves the quotient down by one and the remainder up by the divisor.
    let floor_adjust = |r: &Tensor| -> Result<Tensor> {
        let zero = cx.zero(dtype)?;
        let nonzero = r.binary(BinaryOp::Ne, &zero)?;
        let signs_differ = r
            .binary(BinaryOp::Lt, &zero)?
            .binary(BinaryOp::Xor, &b.binary(BinaryOp::Lt, &zero)?)?;
        nonzero.binary(BinaryOp::And, &signs_differ)?.cast(dtype)
    };
    match division {
        Division::Real => quotient(),
        Division::Truncate if dtype.is_integer() => quotient(),
        Division::Truncate => {
            let q = quotient()?;
            let negative = q.binary(BinaryOp::Lt, &cx.zero(dtype)?)?;
            negative.where_(&q.unary(UnaryOp::Ceil)?, &q.unary(UnaryOp::Floor)?)
        }
        Division::TruncateMod => remainder(),
        Division::Floor if dtype.is_integer() => {
            quotient()?.binary(BinaryOp::Sub, &floor_adjust(&remainder()?)?)
        }
        Division::Floor => quotient()?.unary(UnaryOp::Floor),
        Division::FloorMod => {
            let r = remainder()?;
            r.binary(BinaryOp::Add, &floor_adjust(&r)?.binary(BinaryOp::Mul, &b)?)
        }
    }
}

/// `Select` / `SelectV2`. Strings (on the host) take whole branches for a scalar condition
/// and elements for one of their shape; `Select`'s vector condition picks rows.
fn select(cx: &RunCtx<'_, '_>, v1: bool) -> Result<Tensor> {
    let (condition, x, y) = (cx.tensor(0)?, cx.tensor(1)?, cx.tensor(2)?);
    if v1 && x.shape() != y.shape() {
        return Err(Error::invalid(format!(
            "'then' and 'else' must have the same size.  but received: {} vs. {}",
            x.shape(),
            y.shape()
        )));
    }
    let rows = v1 && condition.rank() == 1 && x.rank() > 1;
    if x.dtype() == DataType::String {
        let pick = condition.to_vec::<bool>()?;
        if pick.len() == 1 && condition.rank() == 0 {
            return Ok(if pick[0] {
                x.into_owned()
            } else {
                y.into_owned()
            });
        }
        if condition.shape() != x.shape() || x.shape() != y.shape() {
            return Err(Error::invalid(format!(
                "{} of strings takes a scalar condition or one of the branches' shape, got {} \
                 for {}",
                cx.node.op_type,
                condition.shape(),
                x.shape()
            )));
        }
        let (xs, ys) = (x.to_strings()?, y.to_strings()?);
        let picked: Vec<Vec<u8>> = pick
            .iter()
            .zip(xs.into_iter().zip(ys))
            .map(|(&p, (a, b))| if p { a } else { b })
            .collect();
        return Tensor::from_strings(picked, x.shape().clone(), cx.device);
    }
    if rows {
        let mut dims = vec![condition.num_elements()];
        dims.resize(x.rank(), 1);
        if condition.num_elements() != x.shape().dims()[0] {
            return Err(Error::invalid(format!(
                "Number of batches of 'then' must match size of 'cond', but saw: {} vs. {}",
                x.shape().dims()[0],
                condition.num_elements()
            )));
        }
        return condition.reshape(dims)?.where_(&x, &y);
    }
    condition.where_(&x, &y)
}
