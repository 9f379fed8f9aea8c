//! A loop kernel ([`crate::ir::Kernel`]) as C, over the names of the dialect headers
//! (`KERNEL`, `GLOBAL`, `GLOBAL_ID`, `GLOBAL_SIZE`) and of the helper libraries: the same
//! text for OpenCL C and CUDA C. Indices are `i64`; every buffer is a pointer and an
//! `i64` element offset; a map or each loops over its items with a grid-stride loop, so
//! any grid covers them; a groups body is the kernel's body as it stands, its shared arrays
//! `LOCAL` arrays of the function.

use std::fmt::Write;

use super::kernel::{block, expression, Builtin, Spelling};
use crate::body;
use crate::ir::{Body, Buf, Buffer, Kernel, Local, Param, Ty, Words, ITEM};
use crate::Elem;

/// `kernel` as C, or `None` where an element expression has no C rendering.
pub fn c_kernel(kernel: &Kernel) -> Option<String> {
    let params: Vec<String> = kernel
        .params
        .iter()
        .map(|p| match p {
            Param::Index(name) => format!("const i64 {name}"),
            Param::Words(name) => format!("GLOBAL const i64* {name}"),
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
        Body::Groups { stmts, .. } => {
            block(&r, stmts, 1, &mut text)?;
            text += "}\n";
            return Some(text);
        }
    };
    let item = ITEM.name;
    writeln!(
        text,
        "    for (i64 {item} = GLOBAL_ID; {item} < {}; {item} += GLOBAL_SIZE) {{",
        expression(&r, count)?
    )
    .ok()?;
    block(&r, stmts, 2, &mut text)?;
    if let Body::Map { out, value, .. } = &kernel.body {
        let b = kernel.buffer(*out);
        writeln!(
            text,
            "        {}[{}_offset + {item}] = {};",
            b.name,
            b.name,
            store(b, &expression(&r, value)?)
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

/// C's spelling of one kernel.
struct C<'a> {
    kernel: &'a Kernel,
}

impl Spelling for C<'_> {
    fn declare(&self, local: Local, mutable: bool, init: &str) -> Option<String> {
        let constant = if mutable { "" } else { "const " };
        Some(format!(
            "{constant}{} {} = {init};",
            c_type(local.ty),
            local.name
        ))
    }

    fn loop_head(&self, local: Local, from: &str, to: &str, unroll: bool) -> String {
        let (i, hint) = (local.name, if unroll { "UNROLL " } else { "" });
        format!("{hint}for (i64 {i} = {from}; {i} < {to}; {i}++) {{")
    }

    fn array(&self, local: Local, n: usize) -> Option<String> {
        Some(format!("{} {}[{n}];", c_type(local.ty), local.name))
    }

    fn store(&self, buf: Buf, at: &str, value: &str, pad: &str) -> Option<String> {
        let b = self.kernel.buffer(buf);
        let name = b.name;
        Some(format!(
            "{pad}{name}[{name}_offset + {at}] = {};\n",
            store(b, value)
        ))
    }

    fn truth(&self, value: bool) -> &'static str {
        if value {
            "1"
        } else {
            "0"
        }
    }

    fn param(&self, k: usize) -> Option<String> {
        match self.kernel.params.get(k)? {
            Param::Index(name) => Some(name.to_string()),
            Param::Buffer(_) | Param::Words(_) => None,
        }
    }

    fn load(&self, buf: Buf, at: &str) -> Option<String> {
        let b = self.kernel.buffer(buf);
        let element = format!("{}[{}_offset + {at}]", b.name, b.name);
        Some(if b.moved {
            element
        } else {
            b.elem.load(&element)
        })
    }

    fn select(&self, cond: &str, then: &str, otherwise: &str) -> String {
        format!("({cond} ? {then} : {otherwise})")
    }

    fn to_index(&self, value: &str) -> String {
        format!("(i64)({value})")
    }

    fn elem(&self, e: Elem, expr: &body::Expr, operands: &[String]) -> Option<String> {
        super::c_with(expr, e, operands)
    }

    fn word(&self, words: Words, at: &str) -> Option<String> {
        Some(format!("{}[{at}]", self.kernel.words_name(words)))
    }

    fn cast(&self, from: Elem, to: Elem, v: &str) -> Option<String> {
        Some(super::c_cast(from, to, v))
    }

    fn builtin(&self, which: Builtin, axis: u8) -> String {
        let name = match which {
            Builtin::Group => "GROUP_ID",
            Builtin::Groups => "NUM_GROUPS",
            Builtin::Lane => "LOCAL_ID2",
        };
        format!("{name}({axis})")
    }

    fn shared(&self, local: Local, n: usize) -> Option<Option<String>> {
        Some(Some(format!(
            "LOCAL {} {}[{n}];",
            c_type(local.ty),
            local.name
        )))
    }

    fn barrier(&self) -> &'static str {
        "BARRIER();"
    }

    fn of_index(&self, e: Elem, v: &str) -> String {
        format!("({})({v})", e.value())
    }

    fn index_bits(&self, v: &str) -> String {
        format!("(u64)({v})")
    }

    fn bits_index(&self, v: &str) -> String {
        format!("(i64)({v})")
    }

    fn scale(&self, v: &str, k: &str) -> String {
        format!("({v} * pow2_f32({k}))")
    }

    fn complex(&self, e: Elem, re: &str, im: &str) -> String {
        format!("{}({re}, {im})", super::complex_maker(e))
    }
}
