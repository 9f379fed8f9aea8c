//! TensorFlow's checks and prints (`Assert`, `CheckNumerics`, `CheckNumericsV2`, `Print`,
//! `PrintV2`, `StringFormat`), as `tf.debugging.assert_*`, `tf.debugging.check_numerics`
//! and `tf.print` write them, inside loops and functions as anywhere: a failed check is
//! `InvalidArgument` with TensorFlow's message, and tensors are summarised as TensorFlow's
//! `Tensor::SummarizeValue` does (its 1.x form for `Assert` and `Print`, its 2.x form for
//! `StringFormat`). The values are read on the host, whatever the device.

use polytensor_core::{DataType, Error, PartialTensorShape, Result, Scalar, Tensor};

use super::kernels::{Outputs, RunCtx};
use super::{InferCtx, Source, Value};
use crate::graph::Typed;

/// A check or print op.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Debug {
    /// `Assert`: a scalar condition, then the data to report when it is false.
    Assert,
    /// `CheckNumerics` (`v2`: `CheckNumericsV2`, which tells -Inf from +Inf): the input,
    /// unless it holds a NaN or an infinity.
    CheckNumerics { v2: bool },
    /// `Print`: the input, printing `message` and the data to stderr.
    Print,
    /// `PrintV2`: prints a string scalar to `output_stream`.
    PrintV2,
    /// `StringFormat`: the inputs put into `template` at its placeholders.
    StringFormat,
}

/// Check and print op types by TensorFlow's name.
pub(crate) const OPS: &[(&str, Debug)] = &[
    ("Assert", Debug::Assert),
    ("CheckNumerics", Debug::CheckNumerics { v2: false }),
    ("CheckNumericsV2", Debug::CheckNumerics { v2: true }),
    ("Print", Debug::Print),
    ("PrintV2", Debug::PrintV2),
    ("StringFormat", Debug::StringFormat),
];

impl Debug {
    /// The type attributes tied to the inputs.
    pub(crate) fn typed(self) -> &'static [(&'static str, Source)] {
        match self {
            Debug::CheckNumerics { .. } | Debug::Print => &[("T", Source::Input(0))],
            Debug::StringFormat => &[("T", Source::InputTypes)],
            Debug::Assert | Debug::PrintV2 => &[],
        }
    }
}

/// The static outputs of `op`.
pub(crate) fn infer(op: Debug, cx: &InferCtx<'_>) -> Result<Vec<Typed>> {
    let input = |i: usize| {
        cx.inputs
            .get(i)
            .cloned()
            .ok_or_else(|| cx.error(format!("input {i} is missing")))
    };
    match op {
        Debug::Assert => {
            if input(0)?.0 != DataType::Bool {
                return Err(cx.type_mismatch(0, DataType::Bool));
            }
            Ok(Vec::new())
        }
        Debug::CheckNumerics { .. } => {
            cx.exactly(1)?;
            let (dtype, shape) = input(0)?;
            if !dtype.is_float() {
                return Err(Error::invalid(format!(
                    "Value for attr 'T' of {} is not in the list of allowed values: bfloat16, \
                     half, float, double",
                    super::cpp_dtype_name(dtype)
                )));
            }
            Ok(vec![(dtype, shape)])
        }
        Debug::Print => Ok(vec![input(0)?]),
        Debug::PrintV2 => {
            cx.exactly(1)?;
            if input(0)?.0 != DataType::String {
                return Err(cx.type_mismatch(0, DataType::String));
            }
            cx.with_rank(0, 0)?;
            Ok(Vec::new())
        }
        Debug::StringFormat => {
            let attrs = cx.attrs();
            let template = attrs.string_or("template", "%s")?;
            let placeholder = attrs.string_or("placeholder", "%s")?;
            check_placeholders(&template, &placeholder, cx.inputs.len())?;
            Ok(vec![(DataType::String, PartialTensorShape::new(&[])?)])
        }
    }
}

/// `StringFormat`'s rule: as many placeholders in the template as inputs.
fn check_placeholders(template: &str, placeholder: &str, inputs: usize) -> Result<()> {
    let count = if placeholder.is_empty() {
        0
    } else {
        template.matches(placeholder).count()
    };
    if count != inputs {
        return Err(Error::invalid(format!(
            "num placeholders in template and num inputs must match: {count} vs. {inputs}"
        )));
    }
    Ok(())
}

/// Run `op`.
pub(crate) fn run(op: Debug, cx: &RunCtx<'_, '_>) -> Result<Outputs> {
    let attrs = cx.attrs();
    let summarize = |default: i64| -> Result<Option<usize>> {
        // A negative `summarize` prints every element.
        Ok(usize::try_from(attrs.int_or("summarize", default)?).ok())
    };
    match op {
        Debug::Assert => {
            let condition = cx.tensor(0)?;
            if condition.rank() != 0 {
                return Err(Error::invalid(format!(
                    "In[0] should be a scalar: {}",
                    condition.shape()
                )));
            }
            if condition.to_scalars()?[0] == Scalar::Bool(true) {
                return Ok(Outputs::new());
            }
            let limit = summarize(3)?;
            let mut parts = Vec::with_capacity(cx.inputs.len() - 1);
            for i in 1..cx.inputs.len() {
                parts.push(format!("[{}]", summary(&*cx.tensor(i)?, limit, false)?));
            }
            Err(Error::invalid(format!(
                "assertion failed: {}",
                parts.join(" ")
            )))
        }
        Debug::CheckNumerics { v2 } => {
            let x = cx.tensor(0)?;
            check_numerics(&x, &attrs.string_or("message", "")?, v2)?;
            Ok(std::iter::once(Value::Tensor(x.into_owned())).collect())
        }
        Debug::Print => {
            let limit = summarize(3)?;
            let mut text = attrs.string_or("message", "")?;
            for i in 1..cx.inputs.len() {
                text.push_str(&format!("[{}]", summary(&*cx.tensor(i)?, limit, false)?));
            }
            eprintln!("{text}");
            Ok(std::iter::once(Value::Tensor(cx.tensor(0)?.into_owned())).collect())
        }
        Debug::PrintV2 => {
            let text = cx.tensor(0)?.to_strings()?;
            let text = String::from_utf8_lossy(text.first().map_or(&[][..], Vec::as_slice));
            let end = attrs.string_or("end", "\n")?;
            match attrs.string_or("output_stream", "stderr")?.as_str() {
                "stdout" => print!("{text}{end}"),
                _ => eprint!("{text}{end}"),
            }
            Ok(Outputs::new())
        }
        Debug::StringFormat => {
            let template = attrs.string_or("template", "%s")?;
            let placeholder = attrs.string_or("placeholder", "%s")?;
            check_placeholders(&template, &placeholder, cx.inputs.len())?;
            let limit = summarize(3)?;
            let mut pieces = template.split(placeholder.as_str());
            let mut text = pieces.next().unwrap_or_default().to_string();
            for (i, piece) in pieces.enumerate() {
                text.push_str(&summary(&*cx.tensor(i)?, limit, true)?);
                text.push_str(piece);
            }
            let out = Tensor::from_strings(vec![text], [], cx.device)?;
            Ok(std::iter::once(Value::Tensor(out)).collect())
        }
    }
}

/// TensorFlow's `CheckNumerics` message where `x` holds a NaN or an infinity.
fn check_numerics(x: &Tensor, message: &str, v2: bool) -> Result<()> {
    let (mut nan, mut negative, mut positive) = (false, false, false);
    for value in x.to_scalars()? {
        let v = value.to_f64();
        nan |= v.is_nan();
        negative |= v == f64::NEG_INFINITY;
        positive |= v == f64::INFINITY;
    }
    let found: Vec<&str> = if v2 {
        [(negative, "-Inf"), (positive, "+Inf"), (nan, "NaN")]
            .into_iter()
            .filter_map(|(seen, name)| seen.then_some(name))
            .collect()
    } else {
        [(negative || positive, "Inf"), (nan, "NaN")]
            .into_iter()
            .filter_map(|(seen, name)| seen.then_some(name))
            .collect()
    };
    let anomalies = match found.as_slice() {
        [] => return Ok(()),
        [one] => one.to_string(),
        [a, b] => format!("{a} and {b}"),
        [a, b, c] => format!("{a}, {b}, and {c}"),
        _ => unreachable!("at most three kinds"),
    };
    Err(Error::invalid(format!(
        "{message} : Tensor had {anomalies} values"
    )))
}

/// TensorFlow's `Tensor::SummarizeValue(limit, print_v2)`: at most `limit` elements (all
/// for `None`); the 1.x form nests brackets without spaces and cuts after `limit`
/// elements in order, the 2.x form (`print_v2`) prints each dim's first and last
/// `limit` entries around `...`, rows on lines of their own.
pub(crate) fn summary(t: &Tensor, limit: Option<usize>, v2: bool) -> Result<String> {
    let elements = element_texts(t, v2)?;
    let dims = t.dims().to_vec();
    let limit = limit.unwrap_or(elements.len());
    let mut out = String::new();
    if v2 {
        one_dim_v2(&dims, 0, &elements, 0, limit, &mut out);
        return Ok(out);
    }
    let shown = limit.min(elements.len());
    if dims.is_empty() {
        out.push_str(&elements[..shown].join(" "));
    } else {
        let mut at = 0;
        one_dim_v1(&dims, 0, &elements, &mut at, shown, &mut out);
    }
    if elements.len() > shown {
        out.push_str("...");
    }
    Ok(out)
}

/// The 1.x nesting (`PrintOneDim`): `[1 2.5][3...]`, cut at element `limit`.
fn one_dim_v1(
    dims: &[usize],
    dim: usize,
    elements: &[String],
    at: &mut usize,
    limit: usize,
    out: &mut String,
) {
    if *at >= limit {
        return;
    }
    if dim + 1 == dims.len() {
        for i in 0..dims[dim] {
            if *at >= limit {
                if dim != 0 {
                    out.push_str("...");
                }
                return;
            }
            if i > 0 {
                out.push(' ');
            }
            out.push_str(&elements[*at]);
            *at += 1;
        }
        return;
    }
    for _ in 0..dims[dim] {
        let opened = *at < limit;
        if opened {
            out.push('[');
        }
        one_dim_v1(dims, dim + 1, elements, at, limit, out);
        if *at < limit || opened {
            out.push(']');
        }
    }
}

/// The 2.x nesting (`PrintOneDimV2`): each dim's first and last `ends` entries.
fn one_dim_v2(
    dims: &[usize],
    dim: usize,
    elements: &[String],
    start: usize,
    ends: usize,
    out: &mut String,
) {
    if dim == dims.len() {
        out.push_str(&elements[start]);
        return;
    }
    let spacing = |out: &mut String| {
        if dim + 1 == dims.len() {
            out.push(' ');
        } else {
            out.push_str(&"\n".repeat(dims.len() - dim - 1));
            out.push_str(&" ".repeat(dim + 1));
        }
    };
    out.push('[');
    let count = dims[dim];
    let per_entry: usize = dims[dim + 1..].iter().product();
    let head = ends.min(count);
    for i in 0..head {
        if i > 0 {
            spacing(out);
        }
        one_dim_v2(dims, dim + 1, elements, start + per_entry * i, ends, out);
    }
    if count > ends.saturating_mul(2) {
        spacing(out);
        out.push_str("...");
    }
    for i in ends.max(count.saturating_sub(ends))..count {
        spacing(out);
        one_dim_v2(dims, dim + 1, elements, start + per_entry * i, ends, out);
    }
    out.push(']');
}

/// Each element as TensorFlow's `PrintOneElement` writes it.
fn element_texts(t: &Tensor, v2: bool) -> Result<Vec<String>> {
    if t.dtype() == DataType::String {
        return Ok(t
            .to_strings()?
            .iter()
            .map(|s| {
                let escaped = escape(s);
                if v2 {
                    format!("\"{escaped}\"")
                } else {
                    escaped
                }
            })
            .collect());
    }
    let double = matches!(t.dtype(), DataType::Double | DataType::Complex128);
    let real = |v: f64| shortest(v, double);
    Ok(t.to_scalars()?
        .into_iter()
        .map(|value| match value {
            Scalar::Bool(b) => u8::from(b).to_string(),
            Scalar::I64(v) => v.to_string(),
            Scalar::U64(v) => v.to_string(),
            Scalar::F64(v) => real(v),
            Scalar::C64(c) => format!("({},{})", real(c.re), real(c.im)),
        })
        .collect())
}

/// A string's bytes as `absl::Utf8SafeCHexEscape` writes them.
fn escape(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '"' => out.push_str("\\\""),
                '\'' => out.push_str("\\'"),
                '\\' => out.push_str("\\\\"),
                c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                    out.push_str(&format!("\\x{:02x}", c as u32))
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// A float as TensorFlow's `FloatToBuffer`/`DoubleToBuffer` writes it: `%.6g` (`%.15g`
/// for a double) where that reads back to the same value, else `%.9g` (`%.17g`).
fn shortest(v: f64, double: bool) -> String {
    let (short, long) = if double { (15, 17) } else { (6, 9) };
    let text = format_g(v, short);
    let same = match double {
        true => text.parse::<f64>().ok() == Some(v),
        false => text.parse::<f32>().ok() == Some(v as f32),
    };
    if same || !v.is_finite() {
        text
    } else {
        format_g(v, long)
    }
}

/// C's `printf("%.{precision}g", v)`.
fn format_g(v: f64, precision: usize) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    let precision = precision.max(1);
    // The exponent after rounding to `precision` significant digits.
    let scientific = format!("{:.*e}", precision - 1, v);
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if exponent < -4 || exponent >= precision as i32 {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exponent.abs())
    } else {
        let decimals = (precision as i32 - 1 - exponent).max(0) as usize;
        trim(&format!("{v:.decimals$}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_tensorflow_prints_them() {
        for (v, double, want) in [
            (1.5, false, "1.5"),
            (1e-7, false, "1e-07"),
            (f64::from(1.0f32 / 3.0), false, "0.333333343"),
            (1e10, false, "1e+10"),
            (100000.0, false, "100000"),
            (1.0 / 3.0, true, "0.33333333333333331"),
            (-0.0, false, "-0"),
            (0.1, true, "0.1"),
            (f64::NAN, false, "nan"),
        ] {
            assert_eq!(shortest(v, double), want, "{v}");
        }
    }
}
