//! A loop kernel ([`crate::ir::Kernel`]) as WGSL: one compute shader whose entry point is
//! `main`.
//!
//! - Binding 0 is the geometry, `g: array<u32>`: one word per index parameter and per
//!   buffer's element offset, in parameter order; indices are `i32` (the launch checks
//!   that every word fits one). The buffers and arrays of words ([`Param::Words`], as
//!   `array<i32>`) follow at bindings 1, 2, ... in parameter order, each buffer with its
//!   elements as [`Storage`] lays them out.
//! - The kernel carries the helper functions its text calls, and only those
//!   ([`helpers_for`]).
//! - A [`Body::Map`] is a function `element(item)`, and each invocation writes one word of
//!   the output ([`Storage::store_body`]): all the elements packed in it, keeping the bits
//!   of elements outside the range. A [`Body::Each`] runs once per invocation below its
//!   count; a [`Stmt::Store`] of a packed element clears and sets its bits in its word with
//!   `atomicAnd` and `atomicOr` (the buffer is then `atomic<u32>`), so stores of distinct
//!   elements that share a word never race.
//! - A map or each runs one invocation per item (a map's: per word of its output,
//!   [`Storage::invocations`]), numbered `id.x + id.y * groups.x * WGSL_GROUP`: the
//!   launch gives at least as many invocations, laid out as whole rows of work-groups
//!   within the device's per-dimension limit (unlike C's grid-stride loop, no grid that
//!   is too small is covered). A [`Body::Groups`] kernel has its own work-group size; its
//!   shared arrays are `var<workgroup>` arrays of the module.

use std::fmt::Write;

use super::kernel::{block, expression, Builtin, Spelling};
use crate::body;
use crate::ir::{Body, Buf, Buffer, Ex, IndexOp, Kernel, Local, Param, Stmt, Ty, Words, ITEM};
use crate::launch::Arg;
use crate::wgsl::{helpers_for, Scalar, Storage};
use crate::{Elem, Real};

/// Invocations per workgroup of a kernel rendered from the IR.
pub const WGSL_GROUP: u32 = 256;

/// How buffer `b`'s elements sit in its storage buffer, if WGSL can hold them.
pub fn wgsl_storage(b: &Buffer) -> Option<Storage> {
    if b.moved {
        Storage::raw_elem(b.elem)
    } else {
        Storage::of_elem(b.elem)
    }
}

/// The invocations a launch of the map or each `kernel` with arguments `args` (in
/// parameter order, as the kit's launches give them) needs: one per item of an each, one
/// per output word of a map (its first word may hold elements before the output's
/// offset); `None` for a groups kernel (its grid is the launch's), or where the count is
/// not an index parameter.
pub fn wgsl_invocations<M>(kernel: &Kernel, args: &[Arg<M>]) -> Option<usize> {
    // The argument of parameter `k`: a buffer takes two (memory, offset), the others one.
    let first_arg = |k: usize| -> usize {
        kernel.params[..k]
            .iter()
            .map(|p| if matches!(p, Param::Buffer(_)) { 2 } else { 1 })
            .sum()
    };
    let index = |at: usize| match args.get(at)? {
        Arg::I64(v) => usize::try_from(*v).ok(),
        Arg::Mem(_) => None,
    };
    let (count, out) = match &kernel.body {
        Body::Map { out, count, .. } => (count, Some(*out)),
        Body::Each { count, .. } => (count, None),
        Body::Groups { .. } => return None,
    };
    let Ex::Param(k) = count else {
        return None;
    };
    let count = index(first_arg(*k))?;
    let Some(out) = out else {
        return Some(count);
    };
    let lanes = wgsl_storage(kernel.buffer(out)).map_or(1, Storage::lanes);
    let offset = index(first_arg(out.0) + 1)?;
    Some((offset % lanes + count).div_ceil(lanes))
}

/// `kernel` as WGSL, or `None` where WGSL cannot hold one of its element types or render
/// one of its element expressions.
pub fn wgsl_kernel(kernel: &Kernel) -> Option<String> {
    let r = Wgsl::new(kernel)?;
    let mut text = "\n@group(0) @binding(0) var<storage, read> g: array<u32>;\n".to_string();
    for (k, p) in kernel.params.iter().enumerate() {
        let (name, access, item) = match (p, r.places[k]) {
            (Param::Words(name), Place::Words { .. }) => (*name, "read", "i32".to_string()),
            (Param::Buffer(b), Place::Buffer { storage, .. }) => {
                let item = storage.array_type().to_string();
                match (b.written, r.atomic(Buf(k))) {
                    (true, true) => (b.name, "read_write", "atomic<u32>".to_string()),
                    (true, false) => (b.name, "read_write", item),
                    _ => (b.name, "read", item),
                }
            }
            _ => continue,
        };
        writeln!(
            text,
            "@group(0) @binding({}) var<storage, {access}> {name}: array<{item}>;",
            r.places[k].binding()?
        )
        .ok()?;
    }
    let item = ITEM.name;
    if let Body::Map {
        out, stmts, value, ..
    } = &kernel.body
    {
        let t = wgsl_type(kernel.buffer(*out).ty())?;
        writeln!(text, "\nfn element(invocation_item: u32) -> {t} {{").ok()?;
        text += &r.geometry();
        writeln!(text, "    let {item}: i32 = i32(invocation_item);").ok()?;
        block(&r, stmts, 1, &mut text)?;
        writeln!(text, "    return {};\n}}", expression(&r, value)?).ok()?;
    }
    for stmt in kernel.statements() {
        if let Stmt::Shared(l, n) = stmt {
            writeln!(
                text,
                "var<workgroup> {}: array<{}, {n}>;",
                l.name,
                wgsl_type(l.ty)?
            )
            .ok()?;
        }
    }
    let (size, builtins) = match &kernel.body {
        Body::Groups { size: [x, y, z], .. } => (
            format!("{x}, {y}, {z}"),
            "@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_id) lane: vec3<u32>",
        ),
        _ => (
            WGSL_GROUP.to_string(),
            "@builtin(global_invocation_id) id: vec3<u32>",
        ),
    };
    writeln!(
        text,
        "\n@compute @workgroup_size({size})
fn main({builtins}, @builtin(num_workgroups) groups: vec3<u32>) {{"
    )
    .ok()?;
    // Every binding is part of the layout, whether or not the kernel reads it.
    for p in &kernel.params {
        match p {
            Param::Buffer(b) => writeln!(text, "    _ = arrayLength(&{});", b.name).ok()?,
            Param::Words(name) => writeln!(text, "    _ = arrayLength(&{name});").ok()?,
            Param::Index(_) => {}
        }
    }
    text += &r.geometry();
    // One invocation per item (a map's: per word of its output), numbered over a 2-D grid
    // of whole rows of work-groups: no loop, which lavapipe's compiler turns a packed
    // store's lanes into a slower shader for.
    if !matches!(kernel.body, Body::Groups { .. }) {
        writeln!(text, "    let i = id.x + id.y * groups.x * {WGSL_GROUP}u;").ok()?;
    }
    match &kernel.body {
        Body::Map { out, count, .. } => {
            let b = kernel.buffer(*out);
            let Place::Buffer { storage, word, .. } = r.places[out.0] else {
                return None;
            };
            let (count, base) = (
                format!("u32({})", expression(&r, count)?),
                format!("g[{word}]"),
            );
            writeln!(
                text,
                "    if (i >= {}) {{\n        return;\n    }}",
                storage.invocations(&count, &base)
            )
            .ok()?;
            text += &storage.store_body(b.name, &count, &base);
        }
        Body::Each { count, stmts } => {
            writeln!(
                text,
                "    if (i >= u32({})) {{\n        return;\n    }}",
                expression(&r, count)?
            )
            .ok()?;
            writeln!(text, "    let {item}: i32 = i32(i);").ok()?;
            block(&r, stmts, 1, &mut text)?;
        }
        Body::Groups { stmts, .. } => block(&r, stmts, 1, &mut text)?,
    }
    text += "}\n";
    Some(helpers_for(r.float(), &text) + &text)
}

/// The WGSL type of a local, if WGSL has one for it.
fn wgsl_type(ty: Ty) -> Option<String> {
    Some(match ty {
        Ty::Index => "i32".to_string(),
        Ty::Bool => "bool".to_string(),
        Ty::Value(e) => super::wgsl_type(e).to_string(),
        Ty::Raw(e) => Storage::raw_elem(e)?.value_type().to_string(),
    })
}

/// Where a parameter lives in WGSL.
#[derive(Debug, Clone, Copy)]
enum Place {
    /// An index: a word of the geometry `g`.
    Word(usize),
    /// A buffer: its binding, its elements' storage and the `g` word of its offset.
    Buffer {
        binding: usize,
        storage: Storage,
        word: usize,
    },
    /// An array of words: its binding.
    Words { binding: usize },
}

impl Place {
    /// Its binding, if it has one.
    fn binding(self) -> Option<usize> {
        match self {
            Place::Word(_) => None,
            Place::Buffer { binding, .. } | Place::Words { binding } => Some(binding),
        }
    }
}

/// The WGSL renderer of one kernel: where each parameter lives.
struct Wgsl<'a> {
    kernel: &'a Kernel,
    /// Per parameter, where it lives.
    places: Vec<Place>,
}

impl<'a> Wgsl<'a> {
    fn new(kernel: &'a Kernel) -> Option<Self> {
        let (mut word, mut binding) = (0, 1);
        let mut places = Vec::new();
        for p in &kernel.params {
            places.push(match p {
                Param::Index(_) => Place::Word(word),
                Param::Buffer(b) => Place::Buffer {
                    binding,
                    storage: wgsl_storage(b)?,
                    word,
                },
                Param::Words(_) => Place::Words { binding },
            });
            match p {
                Param::Index(_) => word += 1,
                Param::Buffer(_) => (word, binding) = (word + 1, binding + 1),
                Param::Words(_) => binding += 1,
            }
        }
        Some(Self { kernel, places })
    }

    /// The storage of buffer `buf`.
    fn storage(&self, buf: Buf) -> Option<Storage> {
        match self.places[buf.0] {
            Place::Buffer { storage, .. } => Some(storage),
            _ => None,
        }
    }

    /// Whether `buf` is written by packed stores anywhere (so its words are atomic).
    fn atomic(&self, buf: Buf) -> bool {
        matches!(self.storage(buf), Some(Storage::Packed(_)))
            && self
                .kernel
                .statements()
                .iter()
                .any(|s| matches!(s, Stmt::Store(b, ..) if *b == buf))
    }

    /// The float type of the helpers: f64 where the kernel computes on f64 or complex128.
    fn float(&self) -> Scalar {
        let wide = self
            .kernel
            .buffers()
            .any(|(_, b)| !b.moved && b.elem.real() == Some(Real::F64));
        if wide {
            Scalar::F64
        } else {
            Scalar::F32
        }
    }

    /// The position of element `at` (an `i32` expression) of `buf`.
    fn position(&self, buf: Buf, at: &str) -> Option<String> {
        Some(format!("({}_offset + {at})", self.kernel.buffer(buf).name))
    }

    /// Every geometry word as a local of the function that begins here (read once, not in
    /// every turn of a loop): index parameters under their names, buffer offsets as
    /// `<buffer>_offset`.
    fn geometry(&self) -> String {
        let mut text = String::new();
        for (p, place) in self.kernel.params.iter().zip(&self.places) {
            let (name, word) = match (p, place) {
                (Param::Index(name), Place::Word(word)) => (name.to_string(), word),
                (Param::Buffer(b), Place::Buffer { word, .. }) => {
                    (format!("{}_offset", b.name), word)
                }
                _ => continue,
            };
            text += &format!("    let {name} = i32(g[{word}]);\n");
        }
        text
    }
}

impl Spelling for Wgsl<'_> {
    fn declare(&self, local: Local, mutable: bool, init: &str) -> Option<String> {
        let keyword = if mutable { "var" } else { "let" };
        Some(format!(
            "{keyword} {}: {} = {init};",
            local.name,
            wgsl_type(local.ty)?
        ))
    }

    fn loop_head(&self, local: Local, from: &str, to: &str, _unroll: bool) -> String {
        let i = local.name;
        format!("for (var {i}: i32 = {from}; {i} < {to}; {i}++) {{")
    }

    fn array(&self, local: Local, n: usize) -> Option<String> {
        Some(format!(
            "var {}: array<{}, {n}>;",
            local.name,
            wgsl_type(local.ty)?
        ))
    }

    fn store(&self, buf: Buf, at: &str, value: &str, pad: &str) -> Option<String> {
        // A block of its own, so that its locals shadow nothing outside.
        let name = self.kernel.buffer(buf).name;
        let position = self.position(buf, at)?;
        let mut text = format!("{pad}{{\n{pad}    let store_value = {value};\n");
        match self.storage(buf)? {
            Storage::Word(_) => {
                writeln!(text, "{pad}    {name}[{position}] = store_value;").ok()?;
            }
            Storage::Wide(n) => {
                writeln!(text, "{pad}    let store_at = u32({position});").ok()?;
                for w in 0..n {
                    writeln!(
                        text,
                        "{pad}    {name}[{n}u * store_at + {w}u] = store_value[{w}];"
                    )
                    .ok()?;
                }
            }
            Storage::Packed(packing) => {
                let (lanes, bits, mask) = (32 / packing.bits(), packing.bits(), packing.mask());
                writeln!(
                    text,
                    "{pad}    let store_at = u32({position});
{pad}    let store_shift = (store_at % {lanes}u) * {bits}u;
{pad}    atomicAnd(&{name}[store_at / {lanes}u], ~({mask}u << store_shift));
{pad}    atomicOr(&{name}[store_at / {lanes}u], {} << store_shift);",
                    packing.encode("store_value")
                )
                .ok()?;
            }
        }
        writeln!(text, "{pad}}}").ok()?;
        Some(text)
    }

    fn truth(&self, value: bool) -> &'static str {
        if value {
            "true"
        } else {
            "false"
        }
    }

    fn param(&self, k: usize) -> Option<String> {
        match self.kernel.params.get(k)? {
            Param::Index(name) => Some(name.to_string()),
            Param::Buffer(_) | Param::Words(_) => None,
        }
    }

    fn load(&self, buf: Buf, at: &str) -> Option<String> {
        let name = self.kernel.buffer(buf).name;
        Some(self.storage(buf)?.load(name, &self.position(buf, at)?))
    }

    fn select(&self, cond: &str, then: &str, otherwise: &str) -> String {
        format!("select({otherwise}, {then}, {cond})")
    }

    fn to_index(&self, value: &str) -> String {
        format!("i32({value})")
    }

    fn elem(&self, e: Elem, expr: &body::Expr, operands: &[String]) -> Option<String> {
        super::wgsl_with(expr, e, operands)
    }

    fn word(&self, words: Words, at: &str) -> Option<String> {
        Some(format!("{}[{at}]", self.kernel.words_name(words)))
    }

    fn cast(&self, from: Elem, to: Elem, v: &str) -> Option<String> {
        super::wgsl_cast(from, to, v)
    }

    fn builtin(&self, which: Builtin, axis: u8) -> String {
        let name = match which {
            Builtin::Group => "group",
            Builtin::Groups => "groups",
            Builtin::Lane => "lane",
        };
        format!("i32({name}.{})", ["x", "y", "z"][usize::from(axis.min(2))])
    }

    fn shared(&self, _local: Local, _n: usize) -> Option<Option<String>> {
        // Declared at module scope (`var<workgroup>`).
        Some(None)
    }

    fn barrier(&self) -> &'static str {
        "workgroupBarrier();"
    }

    fn of_index(&self, e: Elem, v: &str) -> String {
        format!("{}({v})", super::wgsl_type(e))
    }

    fn index_bits(&self, v: &str) -> String {
        format!("vec2<u32>(bitcast<u32>({v}), select(0u, ~0u, {v} < 0))")
    }

    fn bits_index(&self, v: &str) -> String {
        format!("bitcast<i32>(({v}).x)")
    }

    fn scale(&self, v: &str, k: &str) -> String {
        format!("({v} * pow2({k}))")
    }

    fn complex(&self, e: Elem, re: &str, im: &str) -> String {
        format!("{}({re}, {im})", super::wgsl_type(e))
    }

    fn index(&self, op: IndexOp, a: &str, b: &str) -> String {
        match op {
            // Of non-negative indices (the IR's rule): an unsigned division, which WGSL
            // compilers make cheaper than a signed one (no `MIN / -1` case to guard).
            IndexOp::Div | IndexOp::Rem => format!("i32(u32({a}) {} u32({b}))", op.symbol()),
            _ => format!("({a} {} {b})", op.symbol()),
        }
    }
}
