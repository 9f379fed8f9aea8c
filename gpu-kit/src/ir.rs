//! The kit's kernel IR: a loop kernel is written once, as a Rust function that builds a
//! [`Kernel`], and each GPU language prints it ([`crate::render::c_kernel`] for OpenCL C
//! and CUDA C, [`crate::render::wgsl_kernel`] for WGSL).
//!
//! A kernel is a list of parameters and a [`Body`] of structured statements ([`Stmt`])
//! over typed expressions ([`Ex`]). What differs between languages is a rule of the
//! renderers, never of the kernel:
//!
//! - **Geometry.** An [`Ty::Index`] is a 64-bit signed integer in C and an `i32` in WGSL,
//!   whose index parameters travel as `u32` words of a geometry buffer (callers check
//!   that every word fits an `i32`).
//! - **Buffers.** Every buffer parameter is a buffer and an element offset (C: a pointer
//!   and an `i64`; WGSL: a binding and a geometry word). Loads and stores go through the
//!   element-storage rule: plain elements in C (f16 and bf16 as their 16 bits), and in
//!   WGSL 8- and 16-bit elements packed into `u32` words, computed on as 32-bit values.
//! - **Work division.** A [`Body::Map`] computes one value per output element: C loops
//!   over the elements with a grid-stride loop; WGSL has each invocation write one word of
//!   the output (all the elements packed in it), so no two invocations write one word. A
//!   [`Body::Each`] runs its statements once per item, and its [`Stmt::Store`]s land
//!   anywhere: WGSL writes a packed element with atomic and/or on its word.
//! - **Element arithmetic** is a [`crate::body::Expr`] (the same bodies as the
//!   elementwise ops, with [`crate::body::Expr::Local`] naming locals), so its semantics
//!   (wrapping integers, IEEE floats, NaN-aware comparisons) are the body's.
//!
//! ```
//! use polytensor_gpu_kit::ir::{item, Kernel};
//! use polytensor_gpu_kit::{render, Elem};
//!
//! // out[i] = data[i] for i < items: a copy of f16 elements.
//! let mut k = Kernel::new("copy");
//! let items = k.index("items");
//! let data = k.input("data", Elem::F16);
//! let out = k.output("out", Elem::F16);
//! let k = k.map(out, items, vec![], data.at(item()));
//! assert!(render::c_kernel(&k).unwrap().contains("f16_to_f32(data[data_offset + item])"));
//! assert!(render::wgsl_kernel(&k).unwrap().contains("fn element("));
//! ```

use crate::body::{self, Cmp};
use crate::Elem;

/// What a value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ty {
    /// A position, size or count: `i64` in C, `i32` in WGSL.
    Index,
    /// A truth value.
    Bool,
    /// A value of the element type, as it is computed on (f16 and bf16 as f32; WGSL's
    /// narrow integers as 32-bit ones).
    Value(Elem),
    /// An element's bits, moved and never computed on (the element is the raw type of
    /// its size: `U8`, `U16`, `U32`, `U64`, `C128`).
    Raw(Elem),
}

/// A named local variable and its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Local {
    /// Its name in every language (a plain identifier, not a keyword of either).
    pub name: &'static str,
    /// Its type.
    pub ty: Ty,
}

impl Local {
    /// The local `name` of type `ty`.
    pub const fn new(name: &'static str, ty: Ty) -> Self {
        Self { name, ty }
    }

    /// Its value.
    pub fn get(self) -> Ex {
        Ex::Local(self)
    }

    /// Its value as an element operand of a [`body::Expr`].
    pub fn value(self) -> body::Expr {
        body::Expr::Local(self.name)
    }
}

/// The item a [`Body`] runs for: the output element of a map, the work item of an each.
pub const ITEM: Local = Local::new("item", Ty::Index);

/// The current item ([`ITEM`]).
pub fn item() -> Ex {
    ITEM.get()
}

/// A buffer parameter: device memory and an element offset into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Buffer {
    /// Its name (its offset parameter is `<name>_offset` in C).
    pub name: &'static str,
    /// The element type of its elements.
    pub elem: Elem,
    /// Whether its elements are only moved (loads give [`Ty::Raw`]).
    pub moved: bool,
    /// Whether the kernel writes it.
    pub written: bool,
}

impl Buffer {
    /// The type its loads give.
    pub fn ty(&self) -> Ty {
        if self.moved {
            Ty::Raw(self.elem)
        } else {
            Ty::Value(self.elem)
        }
    }
}

/// A kernel parameter, in the order the launch passes its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Param {
    /// A count, size or flag ([`Ty::Index`]).
    Index(&'static str),
    /// A buffer and its element offset (two arguments: the memory, then the offset).
    Buffer(Buffer),
    /// A read-only array of index words (one argument, the memory): geometry whose
    /// length varies with the launch, such as a strided view's dims and strides. C holds
    /// `i64` words, WGSL `i32` words in a binding of their own.
    Words(&'static str),
}

/// An array-of-words parameter of a kernel ([`Param::Words`]): its position among the
/// parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Words(pub usize);

impl Words {
    /// The word at position `at`.
    pub fn at(self, at: Ex) -> Ex {
        Ex::Word(self, Box::new(at))
    }
}

/// A buffer parameter of a kernel: its position among the parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Buf(pub usize);

impl Buf {
    /// The element at position `at` (from the buffer's offset) as its load type.
    pub fn at(self, at: Ex) -> Ex {
        Ex::Load(self, Box::new(at))
    }

    /// Store `value` at position `at`.
    pub fn store(self, at: Ex, value: Ex) -> Stmt {
        Stmt::Store(self, at, value)
    }
}

/// Arithmetic on indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IndexOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b` of a non-negative `a` and a positive `b` (WGSL divides them unsigned).
    Div,
    /// `a % b` of a non-negative `a` and a positive `b`.
    Rem,
    /// Bitwise and (of non-negative flags).
    BitAnd,
    /// Shift right (of non-negative flags).
    Shr,
}

impl IndexOp {
    /// The operator of every language.
    pub fn symbol(self) -> &'static str {
        match self {
            IndexOp::Add => "+",
            IndexOp::Sub => "-",
            IndexOp::Mul => "*",
            IndexOp::Div => "/",
            IndexOp::Rem => "%",
            IndexOp::BitAnd => "&",
            IndexOp::Shr => ">>",
        }
    }
}

/// A typed expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Ex {
    /// An index literal (small: it fits an `i32`).
    Int(i32),
    /// A truth literal.
    Bool(bool),
    /// Index parameter `k` (its position among the parameters).
    Param(usize),
    /// A local's value.
    Local(Local),
    /// An element of a local array ([`Stmt::Array`]).
    Element(Local, Box<Ex>),
    /// The element at a position of a buffer, as the buffer's load type.
    Load(Buf, Box<Ex>),
    /// The index word at a position of a words parameter.
    Word(Words, Box<Ex>),
    /// Arithmetic on indices.
    Index(IndexOp, Box<Ex>, Box<Ex>),
    /// A comparison of indices.
    Compare(Cmp, Box<Ex>, Box<Ex>),
    /// Not.
    Not(Box<Ex>),
    /// Both (short-circuit in C).
    And(Box<Ex>, Box<Ex>),
    /// Either (short-circuit in C).
    Or(Box<Ex>, Box<Ex>),
    /// The first value when the condition holds, else the second (both of one type;
    /// WGSL evaluates both, so neither may load out of bounds).
    Select(Box<Ex>, Box<Ex>, Box<Ex>),
    /// An integer element value (`Value(I32)`, a row number read from memory) as an index.
    ToIndex(Box<Ex>),
    /// Element arithmetic in the element type: a value of [`Ty::Value`], or a condition
    /// when the expression is a [`body::Expr::Compare`]. The body's operand `k`
    /// ([`body::Expr::Arg`]) is the `k`-th expression of the list; its
    /// [`body::Expr::Local`]s are locals.
    Elem(Elem, body::Expr, Vec<Ex>),
    /// A value of the first element type converted to the second, with the shared cast
    /// semantics ([`crate::body::Cast`]).
    Cast(Elem, Elem, Box<Ex>),
    /// The invocation's work-group along an axis (0, 1 or 2) of a [`Body::Groups`].
    Group(u8),
    /// The number of work-groups along an axis of a [`Body::Groups`].
    Groups(u8),
    /// The invocation's lane (its index in its work-group) along an axis of a
    /// [`Body::Groups`].
    Lane(u8),
    /// A non-negative index as a value of an integer or real element.
    FromIndex(Elem, Box<Ex>),
    /// An index as the bits of a 64-bit integer ([`Ty::Raw`] of `U64`), sign-extended.
    IndexBits(Box<Ex>),
    /// The index held in the bits of a 64-bit integer ([`Ex::IndexBits`] undone).
    BitsIndex(Box<Ex>),
    /// The power of two `k` (an index) with `|x| 2^-k` in `[1, 2)`, of a finite non-zero
    /// f32 value `x` (subnormals too); 0 for zeros, infinities and NaN.
    Exponent(Box<Ex>),
    /// The f32 value `x` times `2^k`, of an index `k` in `-126..=127` (exact unless the
    /// product is subnormal).
    Scale(Box<Ex>, Box<Ex>),
    /// The real (0) or imaginary (1) part of a complex value.
    Part(u8, Box<Ex>),
    /// The complex value of an element from its real and imaginary parts.
    Complex(Elem, Box<Ex>, Box<Ex>),
}

impl Ex {
    fn index_op(self, op: IndexOp, other: Ex) -> Ex {
        Ex::Index(op, Box::new(self), Box::new(other))
    }

    /// The comparison `self op other` of indices.
    pub fn cmp(self, op: Cmp, other: Ex) -> Ex {
        Ex::Compare(op, Box::new(self), Box::new(other))
    }

    /// `self < other`.
    pub fn lt(self, other: Ex) -> Ex {
        self.cmp(Cmp::Lt, other)
    }

    /// `self >= other`.
    pub fn ge(self, other: Ex) -> Ex {
        self.cmp(Cmp::Ge, other)
    }

    /// `self > other`.
    pub fn gt(self, other: Ex) -> Ex {
        self.cmp(Cmp::Gt, other)
    }

    /// `self != other`.
    pub fn ne(self, other: Ex) -> Ex {
        self.cmp(Cmp::Ne, other)
    }

    /// Both conditions.
    pub fn and(self, other: Ex) -> Ex {
        Ex::And(Box::new(self), Box::new(other))
    }

    /// Either condition.
    pub fn or(self, other: Ex) -> Ex {
        Ex::Or(Box::new(self), Box::new(other))
    }

    /// `self ? then : otherwise`, `self` a condition.
    pub fn then(self, then: Ex, otherwise: Ex) -> Ex {
        Ex::Select(Box::new(self), Box::new(then), Box::new(otherwise))
    }

    /// `self` clamped to `lo..=hi` (`lo` wins when they cross).
    pub fn clamp(self, lo: Ex, hi: Ex) -> Ex {
        self.clone()
            .lt(lo.clone())
            .then(lo, self.clone().gt(hi.clone()).then(hi, self))
    }

    /// The value `self` of element `from` converted to element `to`.
    pub fn cast(self, from: Elem, to: Elem) -> Ex {
        Ex::Cast(from, to, Box::new(self))
    }

    /// An integer element value as an index.
    pub fn to_index(self) -> Ex {
        Ex::ToIndex(Box::new(self))
    }

    /// A non-negative index as a value of element `e`.
    pub fn of_index(self, e: Elem) -> Ex {
        Ex::FromIndex(e, Box::new(self))
    }

    /// An index as the bits of a 64-bit integer.
    pub fn bits(self) -> Ex {
        Ex::IndexBits(Box::new(self))
    }

    /// The index the bits of a 64-bit integer hold.
    pub fn from_bits(self) -> Ex {
        Ex::BitsIndex(Box::new(self))
    }

    /// The real (0) or imaginary (1) part of a complex value.
    pub fn part(self, which: u8) -> Ex {
        Ex::Part(which, Box::new(self))
    }

    /// The smaller of two indices.
    pub fn min(self, other: Ex) -> Ex {
        self.clone().lt(other.clone()).then(self, other)
    }

    /// Whether the index `self` is outside `0..end`.
    pub fn outside(self, end: Ex) -> Ex {
        self.clone().lt(Ex::Int(0)).or(self.ge(end))
    }
}

macro_rules! index_operators {
    ($($trait:ident $method:ident => $op:ident;)*) => {$(
        impl std::ops::$trait for Ex {
            type Output = Ex;
            /// Index arithmetic.
            fn $method(self, other: Ex) -> Ex {
                self.index_op(IndexOp::$op, other)
            }
        }
    )*};
}

index_operators! {
    Add add => Add;
    Sub sub => Sub;
    Mul mul => Mul;
    Div div => Div;
    Rem rem => Rem;
    BitAnd bitand => BitAnd;
    Shr shr => Shr;
}

/// Not.
impl std::ops::Not for Ex {
    type Output = Ex;
    fn not(self) -> Ex {
        Ex::Not(Box::new(self))
    }
}

/// The small index `n`.
pub fn int(n: i32) -> Ex {
    Ex::Int(n)
}

/// Element arithmetic `expr` in element `e` (over locals).
pub fn elem(e: Elem, expr: body::Expr) -> Ex {
    Ex::Elem(e, expr, vec![])
}

/// Element arithmetic `expr` in element `e`, its operand `k` being `operands[k]`.
pub fn elem_of(e: Elem, expr: body::Expr, operands: impl IntoIterator<Item = Ex>) -> Ex {
    Ex::Elem(e, expr, operands.into_iter().collect())
}

/// A statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Stmt {
    /// An immutable local, initialised.
    Let(Local, Ex),
    /// A mutable local, initialised.
    Var(Local, Ex),
    /// A new value of a mutable local.
    Assign(Local, Ex),
    /// The first block when the condition holds, else the second.
    If(Ex, Vec<Stmt>, Vec<Stmt>),
    /// The block for each index of the local from the first bound up to (not including)
    /// the second.
    For(Local, Ex, Ex, Vec<Stmt>),
    /// The block for each index of the local in `0..n`, a small constant the compiler is
    /// asked to unroll.
    Unroll(Local, usize, Vec<Stmt>),
    /// A private array of `n` elements of the local's type (uninitialised: written before
    /// it is read).
    Array(Local, usize),
    /// A new value of an element of a local array.
    Set(Local, Ex, Ex),
    /// The block for each index of the local from the first bound below the second, the
    /// index growing by the third (a positive index) each turn.
    Stride(Local, Ex, Ex, Ex, Vec<Stmt>),
    /// An array of `n` elements of the local's type shared by a work-group (uninitialised).
    /// Only at the top level of a [`Body::Groups`]' statements.
    Shared(Local, usize),
    /// Wait until every invocation of the work-group reaches this point, its writes to
    /// shared arrays then visible to all. Only where every invocation of the group gets
    /// (uniform control flow: loop bounds and conditions the same for the whole group).
    Barrier,
    /// On to the next turn of the innermost loop.
    Continue,
    /// Store a value (of the buffer's load type) at a position of a written buffer.
    Store(Buf, Ex, Ex),
}

/// `if cond { then }`.
pub fn when(cond: Ex, then: Vec<Stmt>) -> Stmt {
    Stmt::If(cond, then, vec![])
}

/// The statements that unravel `index` (row-major) over the dims of an array of words
/// laid out as `[rank, dims..., then each operand's strides...]` (the layout of a strided
/// map's geometry and of matmul's batch dims) into one position per operand: the mutable
/// locals `positions`, from 0, each growing by the index along a dim times its operand's
/// stride along it.
pub fn unravel(words: Words, index: Ex, positions: &[Local]) -> Vec<Stmt> {
    let [rank, rest, turn, d, dim, along] =
        ["rank", "rest", "turn", "d", "dim", "along"].map(|n| Local::new(n, Ty::Index));
    let mut stmts = vec![Stmt::Let(rank, words.at(int(0))), Stmt::Var(rest, index)];
    // The last dim first: its index is the remainder.
    let mut steps = vec![
        Stmt::Let(d, rank.get() - int(1) - turn.get()),
        Stmt::Let(dim, words.at(int(1) + d.get())),
        Stmt::Let(along, rest.get() % dim.get()),
        Stmt::Assign(rest, rest.get() / dim.get()),
    ];
    for (k, &p) in positions.iter().enumerate() {
        stmts.push(Stmt::Var(p, int(0)));
        let stride = words.at(int(1) + int(k as i32 + 1) * rank.get() + d.get());
        steps.push(Stmt::Assign(p, p.get() + along.get() * stride));
    }
    stmts.push(Stmt::For(turn, int(0), rank.get(), steps));
    stmts
}

/// What a kernel does for each of its items.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// `count` elements of the written buffer `out` from its offset on: element
    /// [`ITEM`] is `value` after the statements.
    Map {
        /// The output.
        out: Buf,
        /// How many elements it writes.
        count: Ex,
        /// Statements that compute locals for the value.
        stmts: Vec<Stmt>,
        /// The element's value (the output's load type).
        value: Ex,
    },
    /// The statements for each [`ITEM`] in `0..count`.
    Each {
        /// How many items.
        count: Ex,
        /// What each item does.
        stmts: Vec<Stmt>,
    },
    /// The statements, run by every invocation of every work-group of `size` lanes (the
    /// launch gives the number of groups): work divided by [`Ex::Group`] and [`Ex::Lane`],
    /// shared through [`Stmt::Shared`] arrays between [`Stmt::Barrier`]s.
    Groups {
        /// Lanes of a work-group along each axis.
        size: [u32; 3],
        /// What each invocation does.
        stmts: Vec<Stmt>,
    },
}

impl Body {
    /// Its statements.
    pub fn stmts(&self) -> &[Stmt] {
        match self {
            Body::Map { stmts, .. } | Body::Each { stmts, .. } | Body::Groups { stmts, .. } => {
                stmts
            }
        }
    }
}

/// A kernel's name: up to three static parts joined by `_` (`add_strided`,
/// `to_float_flat`, `sum_tree`). It is `Copy`, so that a launch names its kernel (and a
/// backend finds it in its compiled program) without building a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelName([&'static str; 3]);

impl KernelName {
    /// The name `base`.
    pub const fn new(base: &'static str) -> Self {
        Self([base, "", ""])
    }

    /// This name with `part` appended (`add` with `strided`: `add_strided`); at most three
    /// parts.
    pub fn with(self, part: &'static str) -> Self {
        let mut parts = self.0;
        match parts.iter().position(|p| p.is_empty()) {
            Some(free) => parts[free] = part,
            None => panic!("a kernel name has at most three parts: {self}_{part}"),
        }
        Self(parts)
    }
}

impl From<&'static str> for KernelName {
    fn from(base: &'static str) -> Self {
        Self::new(base)
    }
}

impl std::fmt::Display for KernelName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = self.0.iter().filter(|p| !p.is_empty());
        if let Some(first) = parts.next() {
            f.write_str(first)?;
        }
        for part in parts {
            write!(f, "_{part}")?;
        }
        Ok(())
    }
}

/// A loop kernel: its name, its parameters and its body.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    /// Its name (C's kernel name; WGSL's entry point is `main`).
    pub name: KernelName,
    /// Its parameters, in launch order.
    pub params: Vec<Param>,
    /// What it does.
    pub body: Body,
}

/// A kernel being declared: its parameters, before its body.
#[derive(Debug, Clone)]
pub struct Declare {
    name: KernelName,
    params: Vec<Param>,
}

impl Kernel {
    /// Declare kernel `name`: add its parameters, then give its body.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(name: impl Into<KernelName>) -> Declare {
        Declare {
            name: name.into(),
            params: Vec::new(),
        }
    }

    /// The buffer parameter `buf`.
    pub fn buffer(&self, buf: Buf) -> &Buffer {
        match &self.params[buf.0] {
            Param::Buffer(b) => b,
            Param::Index(name) | Param::Words(name) => {
                panic!("parameter {name} is not a buffer")
            }
        }
    }

    /// The name of the words parameter `words`.
    pub fn words_name(&self, words: Words) -> &'static str {
        match &self.params[words.0] {
            Param::Words(name) => name,
            Param::Index(name) => panic!("parameter {name} is not an array of words"),
            Param::Buffer(b) => panic!("parameter {} is not an array of words", b.name),
        }
    }

    /// The buffers, in order.
    pub fn buffers(&self) -> impl Iterator<Item = (Buf, &Buffer)> {
        self.params.iter().enumerate().filter_map(|(k, p)| match p {
            Param::Buffer(b) => Some((Buf(k), b)),
            Param::Index(_) | Param::Words(_) => None,
        })
    }

    /// Every statement of the body, nested ones included, in order.
    pub fn statements(&self) -> Vec<&Stmt> {
        fn walk<'a>(stmts: &'a [Stmt], all: &mut Vec<&'a Stmt>) {
            for s in stmts {
                all.push(s);
                match s {
                    Stmt::If(_, a, b) => {
                        walk(a, all);
                        walk(b, all);
                    }
                    Stmt::For(_, _, _, body)
                    | Stmt::Stride(_, _, _, _, body)
                    | Stmt::Unroll(_, _, body) => walk(body, all),
                    _ => {}
                }
            }
        }
        let mut all = Vec::new();
        walk(self.body.stmts(), &mut all);
        all
    }
}

impl Declare {
    fn buffer(&mut self, name: &'static str, elem: Elem, moved: bool, written: bool) -> Buf {
        self.params.push(Param::Buffer(Buffer {
            name,
            elem,
            moved,
            written,
        }));
        Buf(self.params.len() - 1)
    }

    /// An index parameter.
    pub fn index(&mut self, name: &'static str) -> Ex {
        self.params.push(Param::Index(name));
        Ex::Param(self.params.len() - 1)
    }

    /// A read-only array of index words.
    pub fn words(&mut self, name: &'static str) -> Words {
        self.params.push(Param::Words(name));
        Words(self.params.len() - 1)
    }

    /// A buffer the kernel reads values of `elem` from.
    pub fn input(&mut self, name: &'static str, elem: Elem) -> Buf {
        self.buffer(name, elem, false, false)
    }

    /// A buffer the kernel writes values of `elem` to.
    pub fn output(&mut self, name: &'static str, elem: Elem) -> Buf {
        self.buffer(name, elem, false, true)
    }

    /// A buffer of `raw` elements (`U8`, `U16`, `U32`, `U64`, `C128`), read or
    /// (`written`) written as bits.
    pub fn moved(&mut self, name: &'static str, raw: Elem, written: bool) -> Buf {
        self.buffer(name, raw, true, written)
    }

    /// The kernel that writes `count` elements of `out`, element [`ITEM`] being `value`
    /// after `stmts`.
    pub fn map(self, out: Buf, count: Ex, stmts: Vec<Stmt>, value: Ex) -> Kernel {
        Kernel {
            name: self.name,
            params: self.params,
            body: Body::Map {
                out,
                count,
                stmts,
                value,
            },
        }
    }

    /// The kernel that runs `stmts` for each [`ITEM`] in `0..count`.
    pub fn each(self, count: Ex, stmts: Vec<Stmt>) -> Kernel {
        Kernel {
            name: self.name,
            params: self.params,
            body: Body::Each { count, stmts },
        }
    }

    /// The kernel whose every invocation, in work-groups of `size` lanes, runs `stmts`.
    pub fn groups(self, size: [u32; 3], stmts: Vec<Stmt>) -> Kernel {
        Kernel {
            name: self.name,
            params: self.params,
            body: Body::Groups { size, stmts },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::Arg;
    use crate::render::{c_kernel, wgsl_invocations, wgsl_kernel};

    /// `out[rows[i]] = data[i]` for bytes: an each with a scattered store.
    fn scatter_bytes() -> Kernel {
        let mut k = Kernel::new("scatter_bytes");
        let items = k.index("items");
        let data = k.moved("data", Elem::U8, false);
        let rows = k.input("rows", Elem::I32);
        let out = k.moved("out", Elem::U8, true);
        let r = Local::new("r", Ty::Index);
        k.each(
            items,
            vec![
                Stmt::Let(r, rows.at(item()).to_index()),
                out.store(r.get(), data.at(item())),
            ],
        )
    }

    #[test]
    fn parameters_are_arguments_in_c_and_words_and_bindings_in_wgsl() {
        let k = scatter_bytes();
        let c = c_kernel(&k).unwrap();
        assert!(c.contains(
            "KERNEL void scatter_bytes(const i64 items, GLOBAL const u8* data, const i64 \
             data_offset, GLOBAL const i32* rows, const i64 rows_offset, GLOBAL u8* out, \
             const i64 out_offset)"
        ));
        assert!(c.contains("for (i64 item = GLOBAL_ID; item < items; item += GLOBAL_SIZE)"));
        let wgsl = wgsl_kernel(&k).unwrap();
        // Words: items, then each buffer's offset; bindings: the buffers after `g`.
        assert!(wgsl.contains("let items = i32(g[0]);"));
        assert!(wgsl.contains("let rows_offset = i32(g[2]);"));
        assert!(wgsl.contains("let out_offset = i32(g[3]);"));
        assert!(wgsl.contains("if (i >= u32(items))"));
        assert!(wgsl.contains("@binding(2) var<storage, read> rows: array<i32>;"));
        assert!(wgsl.contains("rows[(rows_offset + item)]"));
        assert!(wgsl.contains("(out_offset + r)"));
    }

    #[test]
    fn packed_scattered_stores_are_atomic_in_wgsl_and_plain_in_c() {
        let k = scatter_bytes();
        assert!(c_kernel(&k)
            .unwrap()
            .contains("out[out_offset + r] = data[data_offset + item];"));
        let wgsl = wgsl_kernel(&k).unwrap();
        assert!(wgsl.contains("var<storage, read_write> out: array<atomic<u32>>;"));
        assert!(wgsl.contains("atomicAnd(&out[store_at / 4u], ~(255u << store_shift));"));
        assert!(
            wgsl.contains("atomicOr(&out[store_at / 4u], (store_value & 255u) << store_shift);")
        );
        // One invocation an item.
        assert!(wgsl.contains("let i = id.x + id.y * groups.x * 256u;"));
        let args = [
            Arg::I64(10),
            Arg::Mem(0u8),
            Arg::I64(0),
            Arg::Mem(1),
            Arg::I64(0),
        ];
        assert_eq!(wgsl_invocations(&k, &args), Some(10));
    }

    #[test]
    fn a_map_writes_whole_words_of_a_packed_output_in_wgsl() {
        let mut k = Kernel::new("halve");
        let items = k.index("items");
        let x = k.input("x", Elem::BF16);
        let out = k.output("out", Elem::BF16);
        let v = Local::new("v", Ty::Value(Elem::BF16));
        let k = k.map(
            out,
            items,
            vec![Stmt::Let(v, x.at(item()))],
            elem(Elem::BF16, v.value() / body::num(2)),
        );
        let c = c_kernel(&k).unwrap();
        assert!(c.contains("const f32 v = bf16_to_f32(x[x_offset + item]);"));
        assert!(c.contains("out[out_offset + item] = f32_to_bf16((v / 2.0f));"));
        let wgsl = wgsl_kernel(&k).unwrap();
        assert!(wgsl.contains("fn element(invocation_item: u32) -> f32 {"));
        assert!(wgsl.contains("let v: f32 = bitcast<f32>("));
        assert!(wgsl.contains("f32_to_bf16(element(position - skip))"));
        assert!(
            wgsl.contains("fn f32_to_bf16("),
            "the conversions come along"
        );
        // Two bf16 to a word; an output from an odd element on shares its first word.
        assert!(wgsl.contains("if (i >= ((g[2] % 2u) + u32(items) + 1u) / 2u) {"));
        // The launch starts as many: 4 elements from element 1 span 3 words.
        let args = |offset| {
            [
                Arg::I64(4),
                Arg::Mem(0u8),
                Arg::I64(0),
                Arg::Mem(1),
                Arg::I64(offset),
            ]
        };
        assert_eq!(wgsl_invocations(&k, &args(1)), Some(3));
        assert_eq!(wgsl_invocations(&k, &args(0)), Some(2));
    }

    #[test]
    fn control_flow_and_locals_render_in_both_languages() {
        let mut k = Kernel::new("count_positive");
        let items = k.index("items");
        let n = k.index("n");
        let x = k.input("x", Elem::I64);
        let out = k.output("out", Elem::I64);
        let (j, total) = (
            Local::new("j", Ty::Index),
            Local::new("total", Ty::Value(Elem::I64)),
        );
        let positive = elem(Elem::I64, body::Expr::Local("v").cmp(Cmp::Gt, body::num(0)));
        let v = Local::new("v", Ty::Value(Elem::I64));
        let k = k.map(
            out,
            items,
            vec![
                Stmt::Var(total, elem(Elem::I64, body::num(0))),
                Stmt::For(
                    j,
                    int(0),
                    n,
                    vec![
                        Stmt::Let(v, x.at(item() * Ex::Param(1) + j.get())),
                        when(!positive, vec![Stmt::Continue]),
                        Stmt::Assign(total, elem(Elem::I64, total.value() + body::num(1))),
                    ],
                ),
            ],
            total.get(),
        );
        let c = c_kernel(&k).unwrap();
        assert!(c.contains("for (i64 j = 0; j < n; j++) {"));
        assert!(c.contains("if ((!(v > (i64)0))) {\n                continue;"));
        assert!(c.contains("total = (i64)((u64)total + (u64)(i64)1);"));
        let wgsl = wgsl_kernel(&k).unwrap();
        assert!(wgsl.contains("for (var j: i32 = 0; j < n; j++) {"));
        assert!(wgsl.contains("var total: i64 = i64(0);"));
        assert!(wgsl.contains("continue;"));
    }

    #[test]
    fn expressions_without_a_rendering_make_no_kernel() {
        // A float `%` is no operator of either language (the libraries' `fmod` is a call).
        let mut k = Kernel::new("remainder");
        let items = k.index("items");
        let x = k.input("x", Elem::F32);
        let out = k.output("out", Elem::F32);
        let rem = body::Expr::Arith(body::Arith::Rem, Box::new(body::x()), Box::new(body::x()));
        let k = k.map(out, items, vec![], elem_of(Elem::F32, rem, [x.at(item())]));
        assert!(c_kernel(&k).is_none());
        assert!(wgsl_kernel(&k).is_none());
    }

    #[test]
    fn words_and_casts_render_in_both_languages() {
        let mut k = Kernel::new("gather_cast");
        let items = k.index("items");
        let at = k.words("at");
        let x = k.input("x", Elem::I64);
        let out = k.output("out", Elem::F16);
        let k = k.map(
            out,
            items,
            vec![],
            x.at(at.at(item())).cast(Elem::I64, Elem::F16),
        );
        let c = c_kernel(&k).unwrap();
        assert!(c.contains("GLOBAL const i64* at, GLOBAL const i64* x"));
        assert!(c.contains("i64_to_f32_bits((i64)x[x_offset + at[item]], 11)"));
        let wgsl = wgsl_kernel(&k).unwrap();
        assert!(wgsl.contains("@binding(1) var<storage, read> at: array<i32>;"));
        assert!(wgsl.contains("@binding(2) var<storage, read> x: array<i64>;"));
        // Words take no geometry word: x's offset is the second.
        assert!(wgsl.contains("let x_offset = i32(g[1]);"));
        assert!(wgsl.contains("int64_to_float(") && wgsl.contains("fn int64_to_float("));
    }

    #[test]
    fn work_groups_share_arrays_between_barriers_in_both_languages() {
        // Each group of 8 lanes reverses its 8 elements through a shared array.
        let mut k = Kernel::new("reverse_blocks");
        let x = k.input("x", Elem::F32);
        let out = k.output("out", Elem::F32);
        let (tile, lane, at) = (
            Local::new("tile", Ty::Value(Elem::F32)),
            Local::new("l", Ty::Index),
            Local::new("at", Ty::Index),
        );
        let k = k.groups(
            [8, 1, 1],
            vec![
                Stmt::Shared(tile, 8),
                Stmt::Let(lane, Ex::Lane(0)),
                Stmt::Let(at, Ex::Group(0) * int(8) + lane.get()),
                Stmt::Set(tile, lane.get(), x.at(at.get())),
                Stmt::Barrier,
                out.store(at.get(), Ex::Element(tile, Box::new(int(7) - lane.get()))),
                Stmt::Stride(lane, int(0), Ex::Groups(0), int(2), vec![Stmt::Continue]),
            ],
        );
        let c = c_kernel(&k).unwrap();
        assert!(c.contains("LOCAL f32 tile[8];"));
        assert!(c.contains("const i64 l = LOCAL_ID2(0);"));
        assert!(c.contains("BARRIER();"));
        assert!(c.contains("for (i64 l = 0; l < NUM_GROUPS(0); l += 2) {"));
        assert!(
            !c.contains("GLOBAL_ID"),
            "a groups body has no grid-stride loop"
        );
        let wgsl = wgsl_kernel(&k).unwrap();
        assert!(wgsl.contains("var<workgroup> tile: array<f32, 8>;"));
        assert!(wgsl.contains("@compute @workgroup_size(8, 1, 1)"));
        assert!(wgsl.contains("let l: i32 = i32(lane.x);"));
        assert!(wgsl.contains("(i32(group.x) * 8)"));
        assert!(wgsl.contains("workgroupBarrier();"));
        assert!(wgsl.contains("for (var l: i32 = 0; l < i32(groups.x); l += 2) {"));
    }

    #[test]
    fn index_division_is_unsigned_in_wgsl() {
        let mut k = Kernel::new("halves");
        let items = k.index("items");
        let x = k.input("x", Elem::I32);
        let out = k.output("out", Elem::I32);
        let k = k.map(out, items, vec![], x.at(item() / int(2) + item() % int(2)));
        assert!(c_kernel(&k).unwrap().contains("((item / 2) + (item % 2))"));
        let wgsl = wgsl_kernel(&k).unwrap();
        assert!(wgsl.contains("(i32(u32(item) / u32(2)) + i32(u32(item) % u32(2)))"));
    }
}
