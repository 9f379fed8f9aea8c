//! The string ops TensorFlow's savers and SavedModels use: `StringJoin`, `ShardedFilename`,
//! `ShardedFilespec`, and `StaticRegexFullMatch` / `RegexFullMatch` on a small regular
//! expression engine (literals, `.`, escapes, the quantifiers `*`, `+` and `?`, and `^` / `$`
//! anchors: what TensorFlow's own savers write, `^s3://.*`). Strings live on the host.

use polytensor_core::{DataType, Error, PartialTensorShape, Result, Tensor};

use super::kernels::{Outputs, RunCtx};
use super::{InferCtx, Source, Value};
use crate::graph::Typed;

/// A string op.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum StringOp {
    /// `StringJoin`: the inputs (scalars broadcast) joined with `separator`.
    Join,
    /// `ShardedFilename`: `BASENAME-SHARD-of-NUM` with five-digit numbers.
    ShardedFilename,
    /// `ShardedFilespec`: `BASENAME-?????-of-NUM`, the pattern of every shard's name.
    ShardedFilespec,
    /// `StaticRegexFullMatch` (the `pattern` attribute) and `RegexFullMatch` (an input):
    /// whether each whole string matches.
    FullMatch { static_pattern: bool },
}

/// String op types by TensorFlow's name.
pub(crate) const OPS: &[(&str, StringOp)] = &[
    ("StringJoin", StringOp::Join),
    ("ShardedFilename", StringOp::ShardedFilename),
    ("ShardedFilespec", StringOp::ShardedFilespec),
    (
        "StaticRegexFullMatch",
        StringOp::FullMatch {
            static_pattern: true,
        },
    ),
    (
        "RegexFullMatch",
        StringOp::FullMatch {
            static_pattern: false,
        },
    ),
];

impl StringOp {
    /// The type attributes tied to the inputs.
    pub(crate) fn typed(self) -> &'static [(&'static str, Source)] {
        match self {
            StringOp::Join => &[("N", Source::Count)],
            _ => &[],
        }
    }
}

/// The static outputs of `op`.
pub(crate) fn infer(op: StringOp, cx: &InferCtx<'_>) -> Result<Vec<Typed>> {
    let scalar = PartialTensorShape::new(&[])?;
    let expect = |i: usize, dtype: DataType| {
        if cx.inputs[i].0 == dtype {
            Ok(())
        } else {
            Err(cx.type_mismatch(i, dtype))
        }
    };
    match op {
        StringOp::Join => {
            let mut shape = scalar;
            for i in 0..cx.inputs.len() {
                expect(i, DataType::String)?;
                let input = &cx.inputs[i].1;
                if input.rank() != Some(0) {
                    shape = shape_of_non_scalars(&shape, input)
                        .map_err(|_| cx.error("Inputs must be the same shape, or scalars"))?;
                }
            }
            Ok(vec![(DataType::String, shape)])
        }
        StringOp::ShardedFilename | StringOp::ShardedFilespec => {
            let inputs = if op == StringOp::ShardedFilename {
                3
            } else {
                2
            };
            cx.exactly(inputs)?;
            expect(0, DataType::String)?;
            for i in 0..inputs {
                if i > 0 {
                    expect(i, DataType::Int32)?;
                }
                cx.with_rank(i, 0)?;
            }
            Ok(vec![(DataType::String, scalar)])
        }
        StringOp::FullMatch { static_pattern } => {
            cx.exactly(if static_pattern { 1 } else { 2 })?;
            expect(0, DataType::String)?;
            if static_pattern {
                Regex::new(&cx.attrs().string_or("pattern", "")?)?;
            } else {
                expect(1, DataType::String)?;
                cx.with_rank(1, 0)?;
            }
            Ok(vec![(DataType::Bool, cx.inputs[0].1.clone())])
        }
    }
}

/// The shape two non-scalar inputs of `StringJoin` share.
fn shape_of_non_scalars(
    so_far: &PartialTensorShape,
    input: &PartialTensorShape,
) -> Result<PartialTensorShape> {
    if so_far.rank() == Some(0) {
        return Ok(input.clone());
    }
    so_far.merge_with(input)
}

/// Run `op` (on the host: strings live there).
pub(crate) fn run(op: StringOp, cx: &RunCtx<'_, '_>) -> Result<Outputs> {
    let out = match op {
        StringOp::Join => join(cx)?,
        StringOp::ShardedFilename | StringOp::ShardedFilespec => {
            let basename = scalar_string(cx, 0)?;
            let ints = |i: usize| -> Result<i64> {
                cx.ints(i)?
                    .first()
                    .copied()
                    .ok_or_else(|| Error::invalid(format!("input {i} must be a scalar")))
            };
            let name = if op == StringOp::ShardedFilename {
                format!("{basename}-{:05}-of-{:05}", ints(1)?, ints(2)?)
            } else {
                format!("{basename}-?????-of-{:05}", ints(1)?)
            };
            Tensor::from_strings([name], [], cx.device)?
        }
        StringOp::FullMatch { static_pattern } => {
            let pattern = if static_pattern {
                cx.attrs().string_or("pattern", "")?
            } else {
                String::from_utf8_lossy(&scalar_bytes(cx, 1)?).into_owned()
            };
            let regex = Regex::new(&pattern)?;
            let input = cx.tensor(0)?;
            let matches: Vec<bool> = input
                .to_strings()?
                .iter()
                .map(|s| regex.full_match(s))
                .collect();
            Tensor::from_slice(&matches, input.shape().clone(), cx.device)?
        }
    };
    Ok(std::iter::once(Value::Tensor(out)).collect())
}

/// `StringJoin`: element `i` of the result joins element `i` of each input (a scalar's one
/// element for every `i`).
fn join(cx: &RunCtx<'_, '_>) -> Result<Tensor> {
    let separator = cx.attrs().string_or("separator", "")?;
    let inputs = (0..cx.inputs.len())
        .map(|i| cx.tensor(i).map(|t| t.into_owned()))
        .collect::<Result<Vec<_>>>()?;
    let shape = inputs
        .iter()
        .find(|t| t.rank() != 0)
        .map_or_else(polytensor_core::TensorShape::scalar, |t| t.shape().clone());
    if let Some(other) = inputs.iter().find(|t| t.rank() != 0 && *t.shape() != shape) {
        return Err(Error::invalid(format!(
            "Inputs must be the same shape, or scalars: {shape} vs. {}",
            other.shape()
        )));
    }
    let strings = inputs
        .iter()
        .map(Tensor::to_strings)
        .collect::<Result<Vec<_>>>()?;
    let joined = (0..shape.num_elements()).map(|i| {
        let mut out = Vec::new();
        for (k, s) in strings.iter().enumerate() {
            if k > 0 {
                out.extend_from_slice(separator.as_bytes());
            }
            out.extend_from_slice(&s[if s.len() == 1 { 0 } else { i }]);
        }
        out
    });
    Tensor::from_strings(joined.collect::<Vec<_>>(), shape, cx.device)
}

fn scalar_bytes(cx: &RunCtx<'_, '_>, i: usize) -> Result<Vec<u8>> {
    let t = cx.tensor(i)?;
    let mut strings = t.to_strings()?;
    if strings.len() != 1 {
        return Err(Error::invalid(format!(
            "input {i} of '{}' must be a scalar string, got shape {}",
            cx.node.name,
            t.shape()
        )));
    }
    Ok(strings.remove(0))
}

/// Input `i`, a string scalar, as text (bytes that are not UTF-8 replaced).
pub(crate) fn scalar_string(cx: &RunCtx<'_, '_>, i: usize) -> Result<String> {
    Ok(String::from_utf8_lossy(&scalar_bytes(cx, i)?).into_owned())
}

/// A regular expression of the subset TensorFlow's savers use, matched against whole
/// strings (RE2's `FullMatch`) by backtracking.
pub(crate) struct Regex {
    pieces: Vec<(Atom, Repeat)>,
}

#[derive(Clone, Copy, PartialEq)]
enum Atom {
    Byte(u8),
    Any,
}

#[derive(Clone, Copy, PartialEq)]
enum Repeat {
    One,
    ZeroOrMore,
    OneOrMore,
    ZeroOrOne,
}

impl Regex {
    /// Parse `pattern`: an `Err` naming what is not supported (classes, groups,
    /// alternation, counted repeats).
    pub(crate) fn new(pattern: &str) -> Result<Self> {
        let unsupported = |what: &str| Error::Unsupported {
            op: format!(
                "the regular expression {pattern:?} ({what}; polytensor supports literals, \
                     '.', escapes, '*', '+', '?', '^' and '$')"
            ),
            dtype: DataType::String,
            device: "any device".into(),
        };
        let bytes = pattern.as_bytes();
        let body = bytes.strip_prefix(b"^").unwrap_or(bytes);
        let body = match body.strip_suffix(b"$") {
            Some(stripped) if !stripped.ends_with(b"\\") => stripped,
            _ => body,
        };
        let mut pieces: Vec<(Atom, Repeat)> = Vec::new();
        let mut at = 0;
        while at < body.len() {
            let atom = match body[at] {
                b'\\' => {
                    at += 1;
                    match body.get(at) {
                        Some(c) if c.is_ascii_punctuation() => Atom::Byte(*c),
                        Some(_) => return Err(unsupported("an escape class")),
                        None => return Err(unsupported("a trailing backslash")),
                    }
                }
                b'.' => Atom::Any,
                b'*' | b'+' | b'?' => {
                    let repeat = match body[at] {
                        b'*' => Repeat::ZeroOrMore,
                        b'+' => Repeat::OneOrMore,
                        _ => Repeat::ZeroOrOne,
                    };
                    match pieces.last_mut() {
                        Some(last) if last.1 == Repeat::One => last.1 = repeat,
                        _ => return Err(unsupported("a quantifier with nothing to repeat")),
                    }
                    at += 1;
                    continue;
                }
                b'[' | b']' | b'(' | b')' | b'|' | b'{' | b'}' | b'^' | b'$' => {
                    return Err(unsupported(
                        "classes, groups, alternation or anchors inside",
                    ))
                }
                c => Atom::Byte(c),
            };
            pieces.push((atom, Repeat::One));
            at += 1;
        }
        Ok(Self { pieces })
    }

    /// Whether all of `text` matches: a simulation of every position in the pattern at
    /// once (Thompson's construction), linear in the text, whatever the pattern.
    pub(crate) fn full_match(&self, text: &[u8]) -> bool {
        // `+` is one match then `*`.
        let pieces: Vec<(Atom, Repeat)> = self
            .pieces
            .iter()
            .flat_map(|&(atom, repeat)| match repeat {
                Repeat::OneOrMore => vec![(atom, Repeat::One), (atom, Repeat::ZeroOrMore)],
                other => vec![(atom, other)],
            })
            .collect();
        let closure = |states: &mut Vec<bool>| {
            for i in 0..pieces.len() {
                if states[i] && pieces[i].1 != Repeat::One {
                    states[i + 1] = true;
                }
            }
        };
        let mut states = vec![false; pieces.len() + 1];
        states[0] = true;
        closure(&mut states);
        for &b in text {
            let mut next = vec![false; pieces.len() + 1];
            for (i, &(atom, repeat)) in pieces.iter().enumerate() {
                if states[i] && (atom == Atom::Any || atom == Atom::Byte(b)) {
                    let to = if repeat == Repeat::ZeroOrMore {
                        i
                    } else {
                        i + 1
                    };
                    next[to] = true;
                }
            }
            closure(&mut next);
            if !next.contains(&true) {
                return false;
            }
            states = next;
        }
        states[pieces.len()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_savers_pattern_and_friends() {
        let s3 = Regex::new("^s3://.*").unwrap();
        assert!(s3.full_match(b"s3://bucket/ckpt"));
        assert!(s3.full_match(b"s3://"));
        assert!(!s3.full_match(b"/tmp/s3://x"));
        let r = Regex::new(r"a+b?c*\.x$").unwrap();
        assert!(r.full_match(b"aaa.x"));
        assert!(r.full_match(b"abcc.x"));
        assert!(!r.full_match(b"b.x"));
        assert!(!r.full_match(b"abbc.x"));
        // No backtracking blow-up.
        let stars = Regex::new(&".*".repeat(40)).unwrap();
        assert!(stars.full_match(&[b'x'; 5000]));
        assert!(!Regex::new(&format!("{}y", "a*".repeat(40)))
            .unwrap()
            .full_match(&[b'a'; 5000]));
        for bad in ["[ab]", "(a|b)", "a{2}", "*a", r"\d"] {
            assert!(Regex::new(bad).is_err(), "{bad}");
        }
    }
}
