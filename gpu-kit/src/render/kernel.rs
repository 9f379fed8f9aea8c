//! What every language prints the same way in a loop kernel ([`crate::ir`]): the walk over
//! its statements and expressions. Each language supplies a [`Spelling`] of the parts it
//! writes its own way (types, declarations, loop heads, parameters, loads and stores,
//! selects, element math).

use std::fmt::Write;

use crate::body;
use crate::ir::{Buf, Ex, IndexOp, Local, Stmt, Words};
use crate::Elem;

/// The parts of a loop kernel a language writes its own way.
pub(super) trait Spelling {
    /// The declaration of `local`, immutable or `mutable`, with its initial value.
    fn declare(&self, local: Local, mutable: bool, init: &str) -> Option<String>;
    /// The head of a loop over `local` from `from` below `to` (`unroll`: a small constant
    /// count the compiler is asked to unroll).
    fn loop_head(&self, local: Local, from: &str, to: &str, unroll: bool) -> String;
    /// The declaration of a private array of `n` elements.
    fn array(&self, local: Local, n: usize) -> Option<String>;
    /// A store of `value` at `at` of `buf`, lines indented by `pad`.
    fn store(&self, buf: Buf, at: &str, value: &str, pad: &str) -> Option<String>;
    /// A truth literal.
    fn truth(&self, value: bool) -> &'static str;
    /// Index parameter `k`.
    fn param(&self, k: usize) -> Option<String>;
    /// The element at `at` of `buf`, as its load type.
    fn load(&self, buf: Buf, at: &str) -> Option<String>;
    /// `cond ? then : otherwise`.
    fn select(&self, cond: &str, then: &str, otherwise: &str) -> String;
    /// An integer element value as an index.
    fn to_index(&self, value: &str) -> String;
    /// Element math in `e` over `operands`.
    fn elem(&self, e: Elem, expr: &body::Expr, operands: &[String]) -> Option<String>;
    /// The word at `at` of `words`.
    fn word(&self, words: Words, at: &str) -> Option<String>;
    /// The value `v` of element `from` as element `to`.
    fn cast(&self, from: Elem, to: Elem, v: &str) -> Option<String>;
    /// A work-group builtin along `axis`: the group, the number of groups or the lane.
    fn builtin(&self, which: Builtin, axis: u8) -> String;
    /// The declaration of an array shared by a work-group, `None` where the language
    /// declares it outside the kernel's function.
    fn shared(&self, local: Local, n: usize) -> Option<Option<String>>;
    /// A work-group barrier.
    fn barrier(&self) -> &'static str;
    /// The non-negative index `v` as a value of element `e`.
    fn of_index(&self, e: Elem, v: &str) -> String;
    /// The index `v` as the bits of a 64-bit integer.
    fn index_bits(&self, v: &str) -> String;
    /// The index held in the 64-bit integer bits `v`.
    fn bits_index(&self, v: &str) -> String;
    /// The f32 value `v` times 2 to the index `k`.
    fn scale(&self, v: &str, k: &str) -> String;
    /// The complex value of element `e` with parts `re` and `im`.
    fn complex(&self, e: Elem, re: &str, im: &str) -> String;
    /// Index arithmetic `a op b`.
    fn index(&self, op: IndexOp, a: &str, b: &str) -> String {
        format!("({a} {} {b})", op.symbol())
    }
}

/// The work-group builtins ([`Ex::Group`], [`Ex::Groups`], [`Ex::Lane`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Builtin {
    /// The invocation's work-group.
    Group,
    /// The number of work-groups.
    Groups,
    /// The invocation's lane in its work-group.
    Lane,
}

/// `stmts` at `depth` (four spaces each), appended to `text`.
pub(super) fn block<S: Spelling>(
    s: &S,
    stmts: &[Stmt],
    depth: usize,
    text: &mut String,
) -> Option<()> {
    let pad = "    ".repeat(depth);
    let nested = |head: String, body: &[Stmt], text: &mut String| -> Option<()> {
        writeln!(text, "{pad}{head}").ok()?;
        block(s, body, depth + 1, text)?;
        writeln!(text, "{pad}}}").ok()
    };
    for stmt in stmts {
        match stmt {
            Stmt::Let(l, init) => push(text, &pad, &s.declare(*l, false, &expression(s, init)?)?),
            Stmt::Var(l, init) => push(text, &pad, &s.declare(*l, true, &expression(s, init)?)?),
            Stmt::Assign(l, value) => push(
                text,
                &pad,
                &format!("{} = {};", l.name, expression(s, value)?),
            ),
            Stmt::If(cond, then, otherwise) => {
                let head = format!("if ({}) {{", expression(s, cond)?);
                if otherwise.is_empty() {
                    nested(head, then, text)?;
                } else {
                    writeln!(text, "{pad}{head}").ok()?;
                    block(s, then, depth + 1, text)?;
                    nested("} else {".to_string(), otherwise, text)?;
                }
            }
            Stmt::For(l, from, to, body) => {
                let (from, to) = (expression(s, from)?, expression(s, to)?);
                nested(s.loop_head(*l, &from, &to, false), body, text)?;
            }
            Stmt::Unroll(l, n, body) => {
                nested(s.loop_head(*l, "0", &n.to_string(), true), body, text)?;
            }
            Stmt::Stride(l, from, to, step, body) => {
                let head = format!(
                    "for ({}; {} < {}; {} += {}) {{",
                    s.declare(*l, true, &expression(s, from)?)?
                        .trim_end_matches(';'),
                    l.name,
                    expression(s, to)?,
                    l.name,
                    expression(s, step)?
                );
                nested(head, body, text)?;
            }
            Stmt::Shared(l, n) => {
                if let Some(line) = s.shared(*l, *n)? {
                    push(text, &pad, &line);
                }
            }
            Stmt::Barrier => push(text, &pad, s.barrier()),
            Stmt::Array(l, n) => push(text, &pad, &s.array(*l, *n)?),
            Stmt::Set(l, at, value) => push(
                text,
                &pad,
                &format!(
                    "{}[{}] = {};",
                    l.name,
                    expression(s, at)?,
                    expression(s, value)?
                ),
            ),
            Stmt::Continue => push(text, &pad, "continue;"),
            Stmt::Store(buf, at, value) => {
                text.push_str(&s.store(*buf, &expression(s, at)?, &expression(s, value)?, &pad)?)
            }
        }
    }
    Some(())
}

/// Append `line` to `text`, indented by `pad`.
fn push(text: &mut String, pad: &str, line: &str) {
    text.push_str(pad);
    text.push_str(line);
    text.push('\n');
}

/// `ex` in the language of `s`.
pub(super) fn expression<S: Spelling>(s: &S, ex: &Ex) -> Option<String> {
    let go = |x: &Ex| expression(s, x);
    Some(match ex {
        Ex::Int(n) => n.to_string(),
        Ex::Bool(b) => s.truth(*b).to_string(),
        Ex::Param(k) => s.param(*k)?,
        Ex::Local(l) => l.name.to_string(),
        Ex::Element(array, at) => format!("{}[{}]", array.name, go(at)?),
        Ex::Load(buf, at) => s.load(*buf, &go(at)?)?,
        Ex::Word(words, at) => s.word(*words, &go(at)?)?,
        Ex::Cast(from, to, v) => s.cast(*from, *to, &go(v)?)?,
        Ex::Group(axis) => s.builtin(Builtin::Group, *axis),
        Ex::Groups(axis) => s.builtin(Builtin::Groups, *axis),
        Ex::Lane(axis) => s.builtin(Builtin::Lane, *axis),
        Ex::Index(op, a, b) => s.index(*op, &go(a)?, &go(b)?),
        Ex::Compare(op, a, b) => format!("({} {} {})", go(a)?, op.symbol(), go(b)?),
        Ex::Not(a) => format!("(!{})", go(a)?),
        Ex::And(a, b) => format!("({} && {})", go(a)?, go(b)?),
        Ex::Or(a, b) => format!("({} || {})", go(a)?, go(b)?),
        Ex::Select(c, a, b) => s.select(&go(c)?, &go(a)?, &go(b)?),
        Ex::ToIndex(a) => s.to_index(&go(a)?),
        Ex::FromIndex(e, a) => s.of_index(*e, &go(a)?),
        Ex::IndexBits(a) => s.index_bits(&go(a)?),
        Ex::BitsIndex(a) => s.bits_index(&go(a)?),
        Ex::Exponent(a) => format!("exponent_f32({})", go(a)?),
        Ex::Scale(a, k) => s.scale(&go(a)?, &go(k)?),
        Ex::Part(which, a) => format!("{}.{}", go(a)?, if *which == 0 { "x" } else { "y" }),
        Ex::Complex(e, re, im) => s.complex(*e, &go(re)?, &go(im)?),
        Ex::Elem(e, expr, operands) => {
            let operands = operands.iter().map(go).collect::<Option<Vec<_>>>()?;
            s.elem(*e, expr, &operands)?
        }
    })
}
