//! `Display` like TensorFlow eager (`tf.Tensor(7.0, shape=(), dtype=float32)`), with NumPy's
//! array formatting: aligned columns, `1.` for integral floats, scientific notation when
//! magnitudes call for it, and `...` summaries past 1000 elements. Lines are not wrapped.

use std::fmt;

use super::Tensor;
use crate::dtype::DataType;
use crate::element::{Element, Scalar};
use crate::error::Result;
use crate::shape::TensorShape;

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

/// The indices shown along a dim of size `size` (`None` marks the `...`).
fn shown(size: usize, summarize: bool) -> Vec<Option<usize>> {
    if summarize && size > 2 * EDGE_ITEMS {
        (0..EDGE_ITEMS)
            .map(Some)
            .chain([None])
            .chain((size - EDGE_ITEMS..size).map(Some))
            .collect()
    } else {
        (0..size).map(Some).collect()
    }
}

/// Row-major flat indices of the shown elements.
fn shown_elements(dims: &[usize], summarize: bool) -> Vec<usize> {
    let mut flat = vec![0usize];
    for &d in dims {
        let picks: Vec<usize> = shown(d, summarize).into_iter().flatten().collect();
        flat = flat
            .iter()
            .flat_map(|&base| picks.iter().map(move |&i| base * d + i))
            .collect();
    }
    flat
}

fn format_values(tensor: &Tensor) -> Result<String> {
    let dims = tensor.dims();
    if tensor.num_elements() == 0 {
        return Ok("[]".into());
    }
    let summarize = tensor.num_elements() > SUMMARY_THRESHOLD;
    let indices = shown_elements(&dims, summarize);
    let cells = format_cells(tensor, &indices, dims.is_empty())?;
    let lookup: std::collections::HashMap<usize, String> = indices.into_iter().zip(cells).collect();
    let mut out = String::new();
    render(&dims, 0, 0, summarize, &lookup, &mut out);
    Ok(out)
}

/// Print the sub-array at `flat` (row-major index of its first element) at nesting `depth`.
fn render(
    dims: &[usize],
    depth: usize,
    flat: usize,
    summarize: bool,
    cells: &std::collections::HashMap<usize, String>,
    out: &mut String,
) {
    let Some((&size, rest)) = dims.split_first() else {
        out.push_str(&cells[&flat]);
        return;
    };
    let separator = if rest.is_empty() {
        " ".to_string()
    } else {
        format!("{}{}", "\n".repeat(rest.len()), " ".repeat(depth + 1))
    };
    let inner: usize = rest.iter().product();
    out.push('[');
    for (n, index) in shown(size, summarize).into_iter().enumerate() {
        if n > 0 {
            out.push_str(&separator);
        }
        match index {
            Some(i) => render(rest, depth + 1, flat + i * inner, summarize, cells, out),
            None => out.push_str("..."),
        }
    }
    out.push(']');
}

/// Format the elements at `indices`, padded to common widths as NumPy does.
fn format_cells(tensor: &Tensor, indices: &[usize], scalar: bool) -> Result<Vec<String>> {
    let dtype = tensor.dtype();
    if dtype == DataType::String {
        let strings = tensor.to_strings()?;
        return Ok(indices.iter().map(|&i| python_bytes(&strings[i])).collect());
    }
    let bytes = tensor.to_bytes()?;
    let values: Vec<Scalar> = indices
        .iter()
        .map(|&i| scalar_at(&bytes, dtype, i))
        .collect();
    let cells: Vec<String> = match dtype {
        DataType::Bool => values
            .iter()
            .map(|v| if v.to_f64() != 0.0 { "True" } else { "False" }.to_string())
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
    crate::dispatch_dtype!(dtype, T => read::<T>(bytes, i), _ => Scalar::U64(u64::from(bytes[i * dtype.size()])))
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
    fn summaries_pick_edges() {
        assert_eq!(shown(10, true).len(), 7);
        assert_eq!(shown(6, true).len(), 6);
        assert_eq!(shown_elements(&[2, 10], true).len(), 12);
    }
}
