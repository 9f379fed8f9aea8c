//! The gradients of the math ops, as TensorFlow's `math_grad.py` writes them: elementwise
//! ops (each operand's gradient summed over the axes it was broadcast along), `Select`,
//! `MatMul`, `BatchMatMulV2`, `Sum`, `Mean`, `Max`, `Min`, `AddN`, `Cast`.

use polytensor_core::{DataType, Result};

use super::{Forward, GradFn};
use crate::attr::AttrValue;
use crate::graph::{Graph, Output};

/// The gradient function of a math op type (`Some(None)`: it has none).
pub(super) fn registered(op_type: &str) -> Option<Option<GradFn>> {
    let function: GradFn = match op_type {
        "Add" | "AddV2" => add,
        "Sub" => sub,
        "Mul" => mul,
        "RealDiv" | "Div" => real_div,
        "Maximum" | "Minimum" => max_min,
        "SquaredDifference" => squared_difference,
        "Neg" => neg,
        "Square" => square,
        "Exp" => exp,
        "Log" => log,
        "Abs" => abs,
        "Sqrt" | "Rsqrt" | "Reciprocal" | "Tanh" | "Sigmoid" => by_output,
        "Erf" | "Erfc" => erf,
        "Sin" => sin,
        "Cos" => cos,
        "Pow" => pow,
        "SelectV2" | "Select" => select,
        "MatMul" => matmul,
        "BatchMatMulV2" | "BatchMatMul" => batch_matmul,
        "Max" | "Min" => max_min_reduction,
        "Sum" => sum,
        "Mean" => mean,
        "AddN" => add_n,
        "Cast" => cast,
        "Shape"
        | "ShapeN"
        | "Size"
        | "Rank"
        | "ZerosLike"
        | "OnesLike"
        | "Equal"
        | "NotEqual"
        | "Less"
        | "LessEqual"
        | "Greater"
        | "GreaterEqual"
        | "LogicalAnd"
        | "LogicalOr"
        | "LogicalNot"
        | "ArgMax"
        | "ArgMin"
        | "Floor"
        | "Ceil"
        | "Round"
        | "Sign"
        | "FloorDiv"
        | "FloorMod"
        | "TruncateDiv"
        | "BroadcastGradientArgs"
        | "Range" => return Some(None),
        _ => return None,
    };
    Some(Some(function))
}

/// Output `i`'s gradient, or an error for an op that needs it and got none.
pub(super) fn dy<'a>(forward: &Forward, dys: &'a [Option<Output>], i: usize) -> Result<&'a Output> {
    dys.get(i).and_then(Option::as_ref).ok_or_else(|| {
        polytensor_core::Error::invalid(format!(
            "no gradient reached output {i} of '{}'",
            forward.op.name()
        ))
    })
}

/// `a op b` for a binary op type.
fn binary(g: &mut Graph, op_type: &str, a: &Output, b: &Output) -> Result<Output> {
    g.apply(op_type, &[a, b], Vec::new())
}

/// The gradients `gx` and `gy` of a broadcasting op's operands, each summed over the axes
/// its operand was broadcast along and reshaped to it (`BroadcastGradientArgs`, `Sum`,
/// `Reshape`), unless both shapes are known and equal.
fn unbroadcast(
    g: &mut Graph,
    forward: &Forward,
    gx: Output,
    gy: Output,
) -> Result<Vec<Option<Output>>> {
    let (x, y) = (&forward.inputs[0], &forward.inputs[1]);
    if known_dims(x).is_some() && known_dims(x) == known_dims(y) {
        return Ok(vec![Some(gx), Some(gy)]);
    }
    let (sx, sy) = (g.shape_of(x)?, g.shape_of(y)?);
    let [gx, gy] = summed_to(g, [gx, gy], [sx.clone(), sy.clone()], [&sx, &sy])?;
    Ok(vec![Some(gx), Some(gy)])
}

/// `o`'s dims where every one is known statically.
pub(super) fn known_dims(o: &Output) -> Option<Vec<usize>> {
    o.shape()
        .dims()
        .filter(|d| d.iter().all(Option::is_some))
        .map(|d| d.iter().flatten().copied().collect())
}

/// Each of `grads` summed over the axes `BroadcastGradientArgs` gives for the two
/// `broadcast` shapes, and reshaped to `shapes`.
fn summed_to(
    g: &mut Graph,
    grads: [Output; 2],
    broadcast: [Output; 2],
    shapes: [&Output; 2],
) -> Result<[Output; 2]> {
    let args = g
        .op("BroadcastGradientArgs")
        .input(&broadcast[0])
        .input(&broadcast[1])
        .build()?;
    let axes = [g.output(&args, 0)?, g.output(&args, 1)?];
    let mut reduced = |i: usize| -> Result<Output> {
        let summed = g.apply(
            "Sum",
            &[&grads[i], &axes[i]],
            vec![("keep_dims".into(), false.into())],
        )?;
        binary(g, "Reshape", &summed, shapes[i])
    };
    Ok([reduced(0)?, reduced(1)?])
}

fn add(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = dy(f, dys, 0)?.clone();
    unbroadcast(g, f, dy.clone(), dy)
}

fn sub(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = dy(f, dys, 0)?;
    let negated = g.unary("Neg", dy)?;
    unbroadcast(g, f, dy.clone(), negated)
}

fn mul(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = dy(f, dys, 0)?;
    let gx = binary(g, "Mul", dy, &f.inputs[1])?;
    let gy = binary(g, "Mul", &f.inputs[0], dy)?;
    unbroadcast(g, f, gx, gy)
}

/// `gx = dy / y`, `gy = dy * ((-x / y) / y)`.
fn real_div(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let (dy, x, y) = (dy(f, dys, 0)?, &f.inputs[0], &f.inputs[1]);
    let gx = binary(g, "RealDiv", dy, y)?;
    let negated = g.unary("Neg", x)?;
    let once = binary(g, "RealDiv", &negated, y)?;
    let twice = binary(g, "RealDiv", &once, y)?;
    let gy = binary(g, "Mul", dy, &twice)?;
    unbroadcast(g, f, gx, gy)
}

/// The gradient goes to `x` where it is the result (`x >= y` for `Maximum`, `x <= y` for
/// `Minimum`), else to `y`.
fn max_min(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let (dy, x, y) = (dy(f, dys, 0)?, &f.inputs[0], &f.inputs[1]);
    let compare = match f.op.op_type() {
        "Maximum" => "GreaterEqual",
        _ => "LessEqual",
    };
    let to_x = binary(g, compare, x, y)?;
    let zeros = g.unary("ZerosLike", dy)?;
    let gx = g.apply("SelectV2", &[&to_x, dy, &zeros], Vec::new())?;
    let gy = g.apply("SelectV2", &[&to_x, &zeros, dy], Vec::new())?;
    unbroadcast(g, f, gx, gy)
}

/// `gx = (2 * dy) * (x - y)`, `gy = -gx`.
fn squared_difference(
    g: &mut Graph,
    f: &Forward,
    dys: &[Option<Output>],
) -> Result<Vec<Option<Output>>> {
    let (dy, x, y) = (dy(f, dys, 0)?, &f.inputs[0], &f.inputs[1]);
    let two = g.constant_of(2.0, dy.dtype())?;
    let doubled = binary(g, "Mul", &two, dy)?;
    let difference = binary(g, "Sub", x, y)?;
    let gx = binary(g, "Mul", &doubled, &difference)?;
    let gy = g.unary("Neg", &gx)?;
    unbroadcast(g, f, gx, gy)
}

fn neg(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    Ok(vec![Some(g.unary("Neg", dy(f, dys, 0)?)?)])
}

/// `dy * (2 * x)`.
fn square(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = dy(f, dys, 0)?;
    let two = g.constant_of(2.0, dy.dtype())?;
    let doubled = binary(g, "Mul", &two, &f.inputs[0])?;
    Ok(vec![Some(binary(g, "Mul", dy, &doubled)?)])
}

/// `dy * y`.
fn exp(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    Ok(vec![Some(binary(g, "Mul", dy(f, dys, 0)?, &f.outputs[0])?)])
}

/// `dy * Reciprocal(x)`.
fn log(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let inverse = g.unary("Reciprocal", &f.inputs[0])?;
    Ok(vec![Some(binary(g, "Mul", dy(f, dys, 0)?, &inverse)?)])
}

/// `dy * Sign(x)`.
fn abs(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let sign = g.unary("Sign", &f.inputs[0])?;
    Ok(vec![Some(binary(g, "Mul", dy(f, dys, 0)?, &sign)?)])
}

/// `SqrtGrad(y, dy)` and the other gradient ops of an activation's output.
fn by_output(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let op_type = format!("{}Grad", f.op.op_type());
    Ok(vec![Some(binary(
        g,
        &op_type,
        &f.outputs[0],
        dy(f, dys, 0)?,
    )?)])
}

/// `dy * (2 / sqrt(pi)) * Exp(-Square(x))`, negated for `Erfc`.
fn erf(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = dy(f, dys, 0)?;
    let sign = if f.op.op_type() == "Erfc" { -1.0 } else { 1.0 };
    let scale = g.constant_of(sign * std::f64::consts::FRAC_2_SQRT_PI, dy.dtype())?;
    let squared = g.unary("Square", &f.inputs[0])?;
    let negated = g.unary("Neg", &squared)?;
    let bell = g.unary("Exp", &negated)?;
    let scaled = binary(g, "Mul", &scale, &bell)?;
    Ok(vec![Some(binary(g, "Mul", dy, &scaled)?)])
}

/// `dy * Cos(x)`.
fn sin(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let cos = g.unary("Cos", &f.inputs[0])?;
    Ok(vec![Some(binary(g, "Mul", dy(f, dys, 0)?, &cos)?)])
}

/// `-dy * Sin(x)`.
fn cos(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let sin = g.unary("Sin", &f.inputs[0])?;
    let negated = g.unary("Neg", dy(f, dys, 0)?)?;
    Ok(vec![Some(binary(g, "Mul", &negated, &sin)?)])
}

/// `gx = dy * y * Pow(x, y - 1)`; `gy = dy * z * Log(x)` where `x > 0`, else 0.
fn pow(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let (dy, x, y, z) = (dy(f, dys, 0)?, &f.inputs[0], &f.inputs[1], &f.outputs[0]);
    let one = g.constant_of(1.0, y.dtype())?;
    let lowered = binary(g, "Sub", y, &one)?;
    let power = binary(g, "Pow", x, &lowered)?;
    let slope = binary(g, "Mul", y, &power)?;
    let gx = binary(g, "Mul", dy, &slope)?;
    let zero = g.unary("ZerosLike", x)?;
    let positive = binary(g, "Greater", x, &zero)?;
    let ones = g.unary("OnesLike", x)?;
    let safe = g.apply("SelectV2", &[&positive, x, &ones], Vec::new())?;
    let logged = g.unary("Log", &safe)?;
    let log = g.apply("SelectV2", &[&positive, &logged, &zero], Vec::new())?;
    let rate = binary(g, "Mul", z, &log)?;
    let gy = binary(g, "Mul", dy, &rate)?;
    unbroadcast(g, f, gx, gy)
}

/// None to the condition; `dy` where it holds to `x`, where it does not to `y`, each
/// summed over the axes it was broadcast along (`SelectV2`).
fn select(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let (dy, condition) = (dy(f, dys, 0)?, &f.inputs[0]);
    let zeros = g.unary("ZerosLike", dy)?;
    let op_type = f.op.op_type().to_string();
    let gx = g.apply(&op_type, &[condition, dy, &zeros], Vec::new())?;
    let gy = g.apply(&op_type, &[condition, &zeros, dy], Vec::new())?;
    let (x, y, out) = (&f.inputs[1], &f.inputs[2], &f.outputs[0]);
    let same = |t: &Output| known_dims(t).is_some() && known_dims(t) == known_dims(out);
    if op_type == "Select" || (same(x) && same(y)) {
        return Ok(vec![None, Some(gx), Some(gy)]);
    }
    let (sx, sy, so) = (g.shape_of(x)?, g.shape_of(y)?, g.shape_of(out)?);
    let [gx, _] = summed_to(g, [gx, dy.clone()], [sx.clone(), so.clone()], [&sx, &so])?;
    let [gy, _] = summed_to(g, [gy, dy.clone()], [sy.clone(), so.clone()], [&sy, &so])?;
    Ok(vec![None, Some(gx), Some(gy)])
}

/// `BatchMatMulV2`'s: `MatMul`'s per batch (adjoints for transposes), each operand's
/// summed over the batch dims it was broadcast along.
fn batch_matmul(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let (dy, a, b) = (dy(f, dys, 0)?, &f.inputs[0], &f.inputs[1]);
    let op_type = f.op.op_type().to_string();
    let [ga, gb] = product_grads(g, f, dy, ["adj_x", "adj_y"])?;
    let batch = |o: &Output| known_dims(o).map(|d| d[..d.len().saturating_sub(2)].to_vec());
    if op_type == "BatchMatMul" || (batch(a).is_some() && batch(a) == batch(b)) {
        return Ok(vec![Some(ga), Some(gb)]);
    }
    // The batch dims: each shape but its last two.
    let (sa, sb) = (g.shape_of(a)?, g.shape_of(b)?);
    let mut leading = |shape: &Output| -> Result<Output> {
        let (begin, end, strides) = (
            g.constant_values(&[0i32], &[1])?,
            g.constant_values(&[-2i32], &[1])?,
            g.constant_values(&[1i32], &[1])?,
        );
        g.apply(
            "StridedSlice",
            &[shape, &begin, &end, &strides],
            vec![("begin_mask".into(), 1i64.into())],
        )
    };
    let batches = [leading(&sa)?, leading(&sb)?];
    let [ga, gb] = summed_to(g, [ga, gb], batches, [&sa, &sb])?;
    Ok(vec![Some(ga), Some(gb)])
}

/// `Max`'s and `Min`'s: the gradient shared evenly by the elements equal to the result.
fn max_min_reduction(
    g: &mut Graph,
    f: &Forward,
    dys: &[Option<Output>],
) -> Result<Vec<Option<Output>>> {
    let dy = dy(f, dys, 0)?;
    let x = &f.inputs[0];
    let y = spread(g, f, &f.outputs[0])?;
    let chosen = binary(g, "Equal", &y, x)?;
    let indicators = g.apply("Cast", &[&chosen], vec![("DstT".into(), dy.dtype().into())])?;
    let counts = g.apply(
        "Sum",
        &[&indicators, &f.inputs[1]],
        vec![("keep_dims".into(), false.into())],
    )?;
    let counts = spread(g, f, &counts)?;
    let share = binary(g, "RealDiv", &indicators, &counts)?;
    let spread_dy = spread(g, f, dy)?;
    Ok(vec![Some(binary(g, "Mul", &share, &spread_dy)?), None])
}

/// `MatMul`'s: each operand's gradient another `MatMul` of the gradient and the other
/// operand, transposed as the forward's flags ask.
fn matmul(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let [ga, gb] = product_grads(g, f, dy(f, dys, 0)?, ["transpose_a", "transpose_b"])?;
    Ok(vec![Some(ga), Some(gb)])
}

/// The gradients of a product's operands (`MatMul`, `BatchMatMulV2`): each the forward's
/// op type on the gradient and the other operand, transposed as the forward's `flags`
/// (`transpose_a`/`transpose_b` or `adj_x`/`adj_y`) ask.
fn product_grads(g: &mut Graph, f: &Forward, dy: &Output, flags: [&str; 2]) -> Result<[Output; 2]> {
    let (a, b) = (&f.inputs[0], &f.inputs[1]);
    let op_type = f.op.op_type().to_string();
    let mut product = |x: &Output, y: &Output, ta: bool, tb: bool| {
        g.apply(
            &op_type,
            &[x, y],
            vec![(flags[0].into(), ta.into()), (flags[1].into(), tb.into())],
        )
    };
    Ok(match (f.flag(flags[0])?, f.flag(flags[1])?) {
        (false, false) => [product(dy, b, false, true)?, product(a, dy, true, false)?],
        (false, true) => [product(dy, b, false, false)?, product(dy, a, true, false)?],
        (true, false) => [product(b, dy, false, true)?, product(a, dy, false, false)?],
        (true, true) => [product(b, dy, true, true)?, product(dy, a, true, true)?],
    })
}

/// `Sum`'s: the gradient reshaped with the summed axes kept as 1s, then broadcast to the
/// input's shape.
fn sum(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    Ok(vec![Some(spread(g, f, dy(f, dys, 0)?)?), None])
}

/// `dy` of a reduction spread back over its input: `BroadcastTo(Reshape(dy, kept), Shape(x))`
/// with `kept` the input's shape with the reduced axes 1.
fn spread(g: &mut Graph, f: &Forward, dy: &Output) -> Result<Output> {
    let x = &f.inputs[0];
    let shape = g.shape_of(x)?;
    // 1 on the reduced axes, 0 on the others.
    let reduced = match (x.shape().rank(), g.const_ints(&f.inputs[1])) {
        (Some(rank), Some(axes)) => {
            let reduced: Vec<i32> = (0..rank as i64)
                .map(|d| i32::from(axes.iter().any(|&a| a == d || a + rank as i64 == d)))
                .collect();
            g.constant_values(&reduced, &[rank])?
        }
        // The rank or the axes known only when it runs: the axes one-hot over the rank.
        _ => {
            let rank = g.shape_of(&shape)?;
            let scalar = g.constant_values::<i32>(&[], &[0])?;
            let depth = binary(g, "Reshape", &rank, &scalar)?;
            let axes = g.apply(
                "Cast",
                &[&f.inputs[1]],
                vec![("DstT".into(), DataType::Int32.into())],
            )?;
            // A scalar axis as a list of one, so the one-hot rows sum per axis.
            let list = g.constant_values(&[-1i32], &[1])?;
            let axes = binary(g, "Reshape", &axes, &list)?;
            let axes = binary(g, "FloorMod", &axes, &depth)?;
            let (on, off) = (g.constant(1i32)?, g.constant(0i32)?);
            let hot = g.apply("OneHot", &[&axes, &depth, &on, &off], Vec::new())?;
            let first = g.constant_values(&[0i32], &[1])?;
            let count = g.apply(
                "Sum",
                &[&hot, &first],
                vec![("keep_dims".into(), false.into())],
            )?;
            binary(g, "Minimum", &count, &on)?
        }
    };
    let one = g.constant(1i32)?;
    let keep = binary(g, "Sub", &one, &reduced)?;
    let masked = binary(g, "Mul", &shape, &keep)?;
    let kept = binary(g, "AddV2", &masked, &reduced)?;
    let reshaped = binary(g, "Reshape", dy, &kept)?;
    binary(g, "BroadcastTo", &reshaped, &shape)
}

/// `Mean`'s: `Sum`'s divided by the number of elements each result is the mean of.
fn mean(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = dy(f, dys, 0)?;
    let spread = spread(g, f, dy)?;
    let first = g.constant_values(&[0i32], &[1])?;
    let mut size = |t: &Output| -> Result<Output> {
        let shape = g.shape_of(t)?;
        g.apply(
            "Prod",
            &[&shape, &first],
            vec![("keep_dims".into(), false.into())],
        )
    };
    let (all, each) = (size(&f.inputs[0])?, size(&f.outputs[0])?);
    let one = g.constant(1i32)?;
    let each = binary(g, "Maximum", &each, &one)?;
    let count = binary(g, "FloorDiv", &all, &each)?;
    let count = g.apply("Cast", &[&count], vec![("DstT".into(), dy.dtype().into())])?;
    Ok(vec![Some(binary(g, "RealDiv", &spread, &count)?), None])
}

/// `AddN`'s: the gradient, to every input.
fn add_n(_: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = dy(f, dys, 0)?;
    Ok(vec![Some(dy.clone()); f.inputs.len()])
}

/// `Cast`'s: the gradient cast back, between float (or complex) types; none otherwise.
fn cast(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let source = f.inputs[0].dtype();
    let continuous = |d: DataType| d.is_float() || d.is_complex();
    if !continuous(source) || !continuous(f.outputs[0].dtype()) {
        return Ok(vec![None]);
    }
    let back = g.apply(
        "Cast",
        &[dy(f, dys, 0)?],
        vec![("DstT".into(), AttrValue::from(source))],
    )?;
    Ok(vec![Some(back)])
}
