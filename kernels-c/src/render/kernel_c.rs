//! A loop kernel ([`crate::ir::Kernel`]) as C, over the names of the dialect headers
//! (`KERNEL`, `GLOBAL`, `GLOBAL_ID`, `GLOBAL_SIZE`) and of the helper libraries: the same
//! text for OpenCL C and CUDA C. Indices are `i64`; every buffer is a pointer and an
//! `i64` element offset; a map or each loops over its items with a grid-stride loop, so
//! any grid covers them.

use std::fmt::Write;

use crate::ir::{Body, Buffer, Ex, Kernel, Param, Stmt, Ty, ITEM};

/// `kernel` as C, or `None` where an element expression has no C rendering.
pub fn c_kernel(kernel: &Kernel) -> Option<String> {
    let params: Vec<String> = kernel
        .params
        .iter()
        .map(|p| match p {
            Param::Index(name) => format!("const i64 {name}"),
            Param::Buffer(b) => format!(
                "GLOBAL {}{}* {}, const i64 {}_offset",
                if b.written { "" } else { "const " },
                stored(b),
                b.name,
                b.name
            ),
        })
        .collect();
    let r = C { kernel };
    let mut text = format!("\nKERNEL void {}({}) {{\n", kernel.name, params.join(", "));
    let (count, stmts) = match &kernel.body {
        Body::Map { count, stmts, .. } | Body::Each { count, stmts } => (count, stmts),
    };
    let item = ITEM.name;
    writeln!(
        text,
        "    for (i64 {item} = GLOBAL_ID; {item} < {}; {item} += GLOBAL_SIZE) {{",
        r.ex(count)?
    )
    .ok()?;
    r.block(stmts, 2, &mut text)?;
    if let Body::Map { out, value, .. } = &kernel.body {
        let b = kernel.buffer(*out);
        writeln!(
            text,
            "        {}[{}_offset + {item}] = {};",
            b.name,
            b.name,
            store(b, &r.ex(value)?)
        )
        .ok()?;
    }
    text += "    }\n}\n";
    Some(text)
}

/// The C type a buffer's elements are stored as.
fn stored(b: &Buffer) -> &'static str {
    if b.moved {
        b.elem.raw()
    } else {
        b.elem.storage()
    }
}

/// The stored form of `value` for buffer `b`.
fn store(b: &Buffer, value: &str) -> String {
    if b.moved {
        value.to_string()
    } else {
        b.elem.store(value)
    }
}

/// The C type of a local.
fn c_type(ty: Ty) -> &'static str {
    match ty {
        Ty::Index => "i64",
        Ty::Bool => "int",
        Ty::Value(e) => e.value(),
        Ty::Raw(e) => e.raw(),
    }
}

/// The C renderer of one kernel's statements and expressions.
struct C<'a> {
    kernel: &'a Kernel,
}

impl C<'_> {
    fn block(&self, stmts: &[Stmt], depth: usize, text: &mut String) -> Option<()> {
        let pad = "    ".repeat(depth);
        for s in stmts {
            match s {
                Stmt::Let(l, init) => writeln!(
                    text,
                    "{pad}const {} {} = {};",
                    c_type(l.ty),
                    l.name,
                    self.ex(init)?
                ),
                Stmt::Var(l, init) => {
                    writeln!(
                        text,
                        "{pad}{} {} = {};",
                        c_type(l.ty),
                        l.name,
                        self.ex(init)?
                    )
                }
                Stmt::Assign(l, value) => writeln!(text, "{pad}{} = {};", l.name, self.ex(value)?),
                Stmt::If(cond, then, otherwise) => {
                    writeln!(text, "{pad}if ({}) {{", self.ex(cond)?).ok()?;
                    self.block(then, depth + 1, text)?;
                    if !otherwise.is_empty() {
                        writeln!(text, "{pad}}} else {{").ok()?;
                        self.block(otherwise, depth + 1, text)?;
                    }
                    writeln!(text, "{pad}}}")
                }
                Stmt::For(l, from, to, body) => {
                    let i = l.name;
                    writeln!(
                        text,
                        "{pad}for (i64 {i} = {}; {i} < {}; {i}++) {{",
                        self.ex(from)?,
                        self.ex(to)?
                    )
                    .ok()?;
                    self.block(body, depth + 1, text)?;
                    writeln!(text, "{pad}}}")
                }
                Stmt::Unroll(l, n, body) => {
                    let i = l.name;
                    writeln!(
                        text,
                        "{pad}UNROLL\n{pad}for (i64 {i} = 0; {i} < {n}; {i}++) {{"
                    )
                    .ok()?;
                    self.block(body, depth + 1, text)?;
                    writeln!(text, "{pad}}}")
                }
                Stmt::Array(l, n) => writeln!(text, "{pad}{} {}[{n}];", c_type(l.ty), l.name),
                Stmt::Set(l, at, value) => {
                    writeln!(
                        text,
                        "{pad}{}[{}] = {};",
                        l.name,
                        self.ex(at)?,
                        self.ex(value)?
                    )
                }
                Stmt::Continue => writeln!(text, "{pad}continue;"),
                Stmt::Store(buf, at, value) => {
                    let b = self.kernel.buffer(*buf);
                    writeln!(
                        text,
                        "{pad}{}[{}_offset + {}] = {};",
                        b.name,
                        b.name,
                        self.ex(at)?,
                        store(b, &self.ex(value)?)
                    )
                }
            }
            .ok()?;
        }
        Some(())
    }

    fn ex(&self, ex: &Ex) -> Option<String> {
        Some(match ex {
            Ex::Int(n) => n.to_string(),
            Ex::Bool(b) => u8::from(*b).to_string(),
            Ex::Param(k) => match self.kernel.params[*k] {
                Param::Index(name) => name.to_string(),
                Param::Buffer(b) => b.name.to_string(),
            },
            Ex::Local(l) => l.name.to_string(),
            Ex::Load(buf, at) => {
                let b = self.kernel.buffer(*buf);
                let element = format!("{}[{}_offset + {}]", b.name, b.name, self.ex(at)?);
                if b.moved {
                    element
                } else {
                    b.elem.load(&element)
                }
            }
            Ex::Index(op, a, b) => format!("({} {} {})", self.ex(a)?, op.symbol(), self.ex(b)?),
            Ex::Compare(op, a, b) => {
                format!("({} {} {})", self.ex(a)?, op.symbol(), self.ex(b)?)
            }
            Ex::Not(a) => format!("(!{})", self.ex(a)?),
            Ex::And(a, b) => format!("({} && {})", self.ex(a)?, self.ex(b)?),
            Ex::Or(a, b) => format!("({} || {})", self.ex(a)?, self.ex(b)?),
            Ex::Select(c, a, b) => {
                format!("({} ? {} : {})", self.ex(c)?, self.ex(a)?, self.ex(b)?)
            }
            Ex::ToIndex(a) => format!("(i64)({})", self.ex(a)?),
            Ex::Element(array, at) => format!("{}[{}]", array.name, self.ex(at)?),
            Ex::Elem(e, expr, operands) => {
                let operands = operands
                    .iter()
                    .map(|x| self.ex(x))
                    .collect::<Option<Vec<_>>>()?;
                super::c_with(expr, *e, &operands)?
            }
        })
    }
}
