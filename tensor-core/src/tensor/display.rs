//! `Display` like TensorFlow eager (`tf.Tensor(7.0, shape=(), dtype=float32)`), with NumPy's
//! array formatting: aligned columns, `1.` for integral floats, scientific notation when
//! magnitudes call for it, and `...` summaries past 1000 elements. Lines are not wrapped.
//!
//! Printing reads only the elements it prints: their positions form a strided view of the
//! tensor's buffer (an edge-summarised dim becomes two dims), which one small copy brings to
//! the host. At most [`SUMMARY_THRESHOLD`] elements print, however large the tensor (a
//! broadcast view of 2^30 elements prints as fast as a small one).

use std::fmt;

use super::Tensor;
use crate::dtype::DataType;
use crate::element::{Element, Scalar};
use crate::error::Result;
use crate::layout::Layout;
use crate::shape::{TensorShape, MAX_RANK};

/// NumPy's `threshold`: arrays with more elements are summarised.
const SUMMARY_THRESHOLD: usize = 1000;
/// NumPy's `edgeitems`: elements shown at each end of a summarised dim.
const EDGE_ITEMS: usize = 3;

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let body = format_values(self).unwrap_or_else(|e| format!("<unreadable: {e}>"));
        let body = if body.contains('\n') {
            format!("\n{body}")
        } else {
            body
        };
        write!(
            f,
            "tf.Tensor({body}, shape={}, dtype={})",
            python_shape(self.shape()),
            self.dtype
        )
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("device", &self.device().name())
            .field("dtype", &self.dtype)
            .field("shape", &format_args!("{}", self.shape()))
            .field("strides", &self.layout.strides())
            .field("offset", &self.layout.offset())
            .field("values", &format_args!("{self}"))
            .finish()
    }
}

/// A shape as Python prints a tuple: `(2, 3)`, `(3,)`, `()`.
fn python_shape(shape: &TensorShape) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    }
}

/// How much of one dim is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    /// Every index of a dim of this size.
    All(usize),
    /// The first and last [`EDGE_ITEMS`] with `...` between them (NumPy's summary).
    Edges,
    /// The first index, then `...` (for outer dims, when the edges alone are too many).
    First,
}

impl Shown {
    /// Elements printed along the dim.
    fn count(self) -> usize {
        match self {
            Shown::All(size) => size,
            Shown::Edges => 2 * EDGE_ITEMS,
            Shown::First => 1,
        }
    }

    /// The printed slots, in order: the index into the printed sub-tensor's dim (or dims,
    /// for edges), `None` for the `...`.
    fn slots(self) -> Vec<Option<usize>> {
        match self {
            Shown::All(size) => (0..size).map(Some).collect(),
            Shown::Edges => (0..EDGE_ITEMS)
                .map(Some)
                .chain([None])
                .chain((EDGE_ITEMS..2 * EDGE_ITEMS).map(Some))
                .collect(),
            Shown::First => vec![Some(0), None],
        }
    }
}

/// What each dim of `dims` prints: NumPy's rule (edges of dims longer than twice the edge
/// items, once the tensor has more than the threshold's elements), and then, while more
/// than [`SUMMARY_THRESHOLD`] elements would still print (many short dims), the outermost
/// dims print only their first index. So a tensor prints at most that many elements, and
/// its printed part fits in a layout of at most [`MAX_RANK`] dims.
fn plan(dims: &[usize]) -> Vec<Shown> {
    let summarize = dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .is_none_or(|n| n > SUMMARY_THRESHOLD);
    let mut plan: Vec<Shown> = dims
        .iter()
        .map(|&d| {
            if summarize && d > 2 * EDGE_ITEMS {
                Shown::Edges
            } else {
                Shown::All(d)
            }
        })
        .collect();
    let printed = |plan: &[Shown]| {
        plan.iter()
            .try_fold(1usize, |n, p| n.checked_mul(p.count()))
            .unwrap_or(usize::MAX)
    };
    let edges = |plan: &[Shown]| plan.iter().filter(|&&p| p == Shown::Edges).count();
    for i in 0..plan.len() {
        let over_count = printed(&plan) > SUMMARY_THRESHOLD;
        let over_rank = plan.len() + edges(&plan) > MAX_RANK;
        if !over_count && !over_rank {
            break;
        }
        if plan[i].count() > 1 {
            plan[i] = Shown::First;
        }
    }
    plan
}

/// The layout of the printed elements of `layout` (as a view of the same buffer): an edges
/// dim of size `d` and stride `s` becomes two dims, `[2, EDGE_ITEMS]` with strides
/// `[s * (d - EDGE_ITEMS), s]`, and a first-only dim a dim of 1.
fn printed_layout(layout: &Layout, plan: &[Shown]) -> Result<Layout> {
    let mut dims = Vec::with_capacity(plan.len() * 2);
    let mut strides = Vec::with_capacity(plan.len() * 2);
    for ((d, &s), &shown) in layout.shape().iter().zip(layout.strides()).zip(plan) {
        match shown {
            Shown::All(_) => dims.push(d),
            Shown::First => dims.push(1),
            Shown::Edges => {
                // `d - EDGE_ITEMS < d`, so the step stays within the layout's checked span.
                dims.push(2);
                strides.push(s * (d - EDGE_ITEMS) as isize);
                dims.push(EDGE_ITEMS);
            }
        }
        strides.push(s);
    }
    Layout::new(TensorShape::new(&dims)?, &strides, layout.offset())
}

fn format_values(tensor: &Tensor) -> Result<String> {
    if tensor.num_elements() == 0 {
        return Ok("[]".into());
    }
    let plan = plan(&tensor.dims());
    let printed = tensor.with_layout(printed_layout(tensor.layout(), &plan)?);
    let mut cells = format_cells(&printed, plan.is_empty())?.into_iter();
    let mut out = String::new();
    render(&plan, 0, &mut cells, &mut out);
    Ok(out)
}

/// Print the sub-array whose dims print as `plan`, at nesting `depth`, taking its cells in
/// row-major order.
fn render(
    plan: &[Shown],
    depth: usize,
    cells: &mut impl Iterator<Item = String>,
    out: &mut String,
) {
    let Some((&shown, rest)) = plan.split_first() else {
        out.push_str(&cells.next().unwrap_or_default());
        return;
    };
    let separator = if rest.is_empty() {
        " ".to_string()
    } else {
        format!("{}{}", "\n".repeat(rest.len()), " ".repeat(depth + 1))
    };
    out.push('[');
    for (n, slot) in shown.slots().into_iter().enumerate() {
        if n > 0 {
            out.push_str(&separator);
        }
        match slot {
            Some(_) => render(rest, depth + 1, cells, out),
            None => out.push_str("..."),
        }
    }
    out.push(']');
}

/// Format every element of `printed` (a small view: what Display shows), in row-major
/// order, padded to common widths as NumPy does.
fn format_cells(printed: &Tensor, scalar: bool) -> Result<Vec<String>> {
    let dtype = printed.dtype();
    if dtype == DataType::String {
        return Ok(printed
            .to_strings()?
            .iter()
            .map(|s| python_bytes(s))
            .collect());
    }
    let bytes = printed.to_bytes()?;
    let values: Vec<Scalar> = (0..printed.num_elements())
        .map(|i| scalar_at(&bytes, dtype, i))
        .collect();
    let cells: Vec<String> = match dtype {
        // NumPy's `BoolFormat`: in an array `True` takes `False`'s width even when no
        // `False` is printed (`[ True  True]`).
        DataType::Bool => values
            .iter()
            .map(|v| match (v.to_f64() != 0.0, scalar) {
                (true, true) => "True",
                (true, false) => " True",
                (false, _) => "False",
            })
            .map(str::to_string)
            .collect(),
        d if d.is_integer() => values
            .iter()
            .map(|v| match v {
                Scalar::I64(x) => x.to_string(),
                Scalar::U64(x) => x.to_string(),
                other => other.to_f64().to_string(),
            })
            .collect(),
        d if d.is_complex() => {
            let (re, im): (Vec<f64>, Vec<f64>) = values
                .iter()
                .map(|v| match v {
                    Scalar::C64(c) => (c.re, c.im),
                    other => (other.to_f64(), 0.0),
                })
                .unzip();
            let part = dtype.real_dtype();
            if scalar {
                return Ok(vec![format!(
                    "({}{}j)",
                    float_repr(re[0], part),
                    signed(&float_repr(im[0], part))
                )]);
            }
            let (re, im) = (
                format_floats(&re, part, false),
                format_floats(&im, part, true),
            );
            return Ok(re
                .iter()
                .zip(&im)
                .map(|(r, i)| format!("{r}{}j", i.trim_start()))
                .collect());
        }
        _ => {
            let floats: Vec<f64> = values.iter().map(|v| v.to_f64()).collect();
            if scalar {
                return Ok(vec![float_repr(floats[0], dtype)]);
            }
            return Ok(format_floats(&floats, dtype, false));
        }
    };
    let width = cells.iter().map(String::len).max().unwrap_or(0);
    Ok(cells.into_iter().map(|c| format!("{c:>width$}")).collect())
}

fn signed(text: &str) -> String {
    if text.starts_with('-') {
        text.to_string()
    } else {
        format!("+{text}")
    }
}

/// Element `i` of little-endian `bytes` of `dtype` as a scalar.
fn scalar_at(bytes: &[u8], dtype: DataType, i: usize) -> Scalar {
    fn read<T: Element>(bytes: &[u8], i: usize) -> Scalar {
        let size = std::mem::size_of::<T>();
        let mut value = T::default();
        // SAFETY: `T: Element` has no padding; the bytes are a stored element of dtype
        // `T::DTYPE` (bool bytes are 0/1), so they form a valid `T`.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes[i * size..(i + 1) * size].as_ptr(),
                &mut value as *mut T as *mut u8,
                size,
            );
        }
        value.to_scalar()
    }
    crate::dispatch_dtype!(dtype, T => read::<T>(bytes, i), _ => {
        let byte = bytes[i * dtype.size()];
        // Float8 bytes print as the numbers they encode (as TensorFlow prints them); other
        // storage-only dtypes (int4, quantized) as their stored integers.
        match crate::float8::Float8::of(dtype) {
            Some(format) => Scalar::F64(f64::from(format.decode(byte))),
            None => Scalar::U64(u64::from(byte)),
        }
    })
}

/// Whether `text` (a decimal) parses back to exactly `value` in `dtype`.
fn round_trips(text: &str, value: f64, dtype: DataType) -> bool {
    let Ok(parsed) = text.parse::<f64>() else {
        return false;
    };
    let narrow = |v: f64| -> f64 {
        match dtype {
            DataType::Float => f64::from(v as f32),
            DataType::Half => crate::element::f16_from_f64(v).to_f64(),
            DataType::BFloat16 => crate::element::bf16_from_f64(v).to_f64(),
            _ => v,
        }
    };
    narrow(parsed) == value
}

/// The shortest positional digits that identify `value` in `dtype`: (integer part, fraction).
fn positional(value: f64, dtype: DataType) -> (String, String) {
    let text = match dtype {
        DataType::Double => format!("{value}"),
        DataType::Float => format!("{}", value as f32),
        _ => (0..=20)
            .map(|p| format!("{value:.p$}"))
            .find(|t| round_trips(t, value, dtype))
            .unwrap_or_else(|| format!("{value}")),
    };
    match text.split_once('.') {
        Some((int, frac)) => (int.to_string(), frac.to_string()),
        None => (text, String::new()),
    }
}

/// The shortest scientific digits for `value` in `dtype`: (mantissa integer digit, fraction, exponent).
fn scientific(value: f64, dtype: DataType) -> (String, String, i32) {
    let text = match dtype {
        DataType::Double => format!("{value:e}"),
        DataType::Float => format!("{:e}", value as f32),
        _ => (0..=20)
            .map(|p| format!("{value:.p$e}"))
            .find(|t| round_trips(t, value, dtype))
            .unwrap_or_else(|| format!("{value:e}")),
    };
    let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    (
        int.to_string(),
        frac.to_string(),
        exponent.parse().unwrap_or(0),
    )
}

fn exponent_text(exponent: i32) -> String {
    format!(
        "e{}{:02}",
        if exponent < 0 { '-' } else { '+' },
        exponent.abs()
    )
}

fn special(value: f64) -> Option<&'static str> {
    if value.is_nan() {
        Some("nan")
    } else if value == f64::INFINITY {
        Some("inf")
    } else if value == f64::NEG_INFINITY {
        Some("-inf")
    } else {
        None
    }
}

/// A 0-d float as NumPy prints it (Python's float repr): `7.0`, `0.1`, `1e-05`, `1e+20`.
fn float_repr(value: f64, dtype: DataType) -> String {
    if let Some(s) = special(value) {
        return s.to_string();
    }
    let magnitude = value.abs();
    if magnitude == 0.0 || (1e-4..1e16).contains(&magnitude) {
        let (int, frac) = positional(value, dtype);
        let frac = if frac.is_empty() {
            "0".to_string()
        } else {
            frac
        };
        format!("{int}.{frac}")
    } else {
        let (int, frac, exp) = scientific(value, dtype);
        let mantissa = if frac.is_empty() {
            int
        } else {
            format!("{int}.{frac}")
        };
        format!("{mantissa}{}", exponent_text(exp))
    }
}

/// Floats of one array as NumPy's `FloatingFormat` prints them, padded to one width.
fn format_floats(values: &[f64], dtype: DataType, sign: bool) -> Vec<String> {
    let finite: Vec<f64> = values
        .iter()
        .copied()
        .filter(|v| v.is_finite() && *v != 0.0)
        .map(f64::abs)
        .collect();
    let (max, min) = finite.iter().fold((0.0f64, f64::INFINITY), |(hi, lo), &v| {
        (hi.max(v), lo.min(v))
    });
    let exponential = !finite.is_empty() && (max >= 1e8 || min < 1e-4 || max / min > 1e3);
    let with_sign = |s: String| {
        if sign && !s.starts_with('-') {
            format!("+{s}")
        } else {
            s
        }
    };
    let cells: Vec<String> = if exponential {
        let parts: Vec<Option<(String, String, i32)>> = values
            .iter()
            .map(|&v| special(v).is_none().then(|| scientific(v, dtype)))
            .collect();
        let precision = parts.iter().flatten().map(|p| p.1.len()).max().unwrap_or(0);
        values
            .iter()
            .zip(parts)
            .map(|(&v, part)| match part {
                Some((int, frac, exp)) => {
                    with_sign(format!("{int}.{frac:0<precision$}{}", exponent_text(exp)))
                }
                None => with_sign(special(v).unwrap_or("nan").to_string()),
            })
            .collect()
    } else {
        let parts: Vec<Option<(String, String)>> = values
            .iter()
            .map(|&v| special(v).is_none().then(|| positional(v, dtype)))
            .collect();
        let int_width = parts
            .iter()
            .flatten()
            .map(|p| with_sign(p.0.clone()).len())
            .max()
            .unwrap_or(0);
        let frac_width = parts.iter().flatten().map(|p| p.1.len()).max().unwrap_or(0);
        values
            .iter()
            .zip(parts)
            .map(|(&v, part)| match part {
                Some((int, frac)) => format!("{:>int_width$}.{frac:<frac_width$}", with_sign(int)),
                None => with_sign(special(v).unwrap_or("nan").to_string()),
            })
            .collect()
    };
    let width = cells.iter().map(String::len).max().unwrap_or(0);
    cells.into_iter().map(|c| format!("{c:>width$}")).collect()
}

/// Bytes as Python's `repr(bytes)`: `b'abc'`, `b'\x00\n'`.
fn python_bytes(bytes: &[u8]) -> String {
    let quote = if bytes.contains(&b'\'') && !bytes.contains(&b'"') {
        '"'
    } else {
        '\''
    };
    let mut out = format!("b{quote}");
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b if b as char == quote => {
                out.push('\\');
                out.push(quote);
            }
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push(quote);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_shapes() {
        assert_eq!(python_shape(&TensorShape::scalar()), "()");
        assert_eq!(python_shape(&TensorShape::new(&[3]).unwrap()), "(3,)");
        assert_eq!(python_shape(&TensorShape::new(&[2, 3]).unwrap()), "(2, 3)");
    }

    #[test]
    fn numpy_float_formats() {
        assert_eq!(float_repr(7.0, DataType::Float), "7.0");
        assert_eq!(float_repr(0.1, DataType::Double), "0.1");
        assert_eq!(float_repr(f64::from(0.1f32), DataType::Float), "0.1");
        assert_eq!(float_repr(1e-5, DataType::Double), "1e-05");
        assert_eq!(float_repr(1e20, DataType::Double), "1e+20");
        assert_eq!(
            float_repr(half::f16::from_f32(0.1).to_f64(), DataType::Half),
            "0.1"
        );
        assert_eq!(
            format_floats(&[1.0, 2.0], DataType::Float, false),
            vec!["1.", "2."]
        );
        assert_eq!(
            format_floats(&[1.5, 2.25, -3.0], DataType::Double, false),
            vec![" 1.5 ", " 2.25", "-3.  "]
        );
        assert_eq!(
            format_floats(&[1e10, 1.5e10], DataType::Double, false),
            vec!["1.0e+10", "1.5e+10"]
        );
        assert_eq!(
            format_floats(&[f64::NAN, 1.0], DataType::Double, false),
            vec!["nan", " 1."]
        );
        assert_eq!(python_bytes(b"it's\x00"), "b\"it's\\x00\"");
        assert_eq!(python_bytes(b"ab"), "b'ab'");
    }

    #[test]
    fn summaries_pick_edges_and_stay_small() {
        assert_eq!(plan(&[10]), vec![Shown::All(10)]);
        assert_eq!(plan(&[2, 1000]), vec![Shown::All(2), Shown::Edges]);
        assert_eq!(Shown::Edges.slots().len(), 7);
        // 2^24 elements in dims of 2: NumPy would print them all; the outer dims print only
        // their first index until at most the threshold's elements are left.
        let wide = plan(&[2; 24]);
        let printed: usize = wide.iter().map(|p| p.count()).product();
        assert!(printed <= SUMMARY_THRESHOLD && printed > SUMMARY_THRESHOLD / 2);
        assert_eq!(wide[0], Shown::First);
        assert_eq!(wide[23], Shown::All(2));
        // Many long dims: edges double the printed rank, which stays within MAX_RANK.
        let mut deep = vec![1; 240];
        deep.extend([7; 14]);
        let deep = plan(&deep);
        assert!(deep.len() + deep.iter().filter(|&&p| p == Shown::Edges).count() <= MAX_RANK);
    }
}
