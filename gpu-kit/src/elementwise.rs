//! Elementwise kernels: `out[i] = f(in0[p0(i)], in1[p1(i)], ...)` for one to three strided
//! (broadcast, transposed, offset) inputs and a contiguous output, one IR kernel
//! ([`MapKernel::kernel`]) for every GPU language; `f` is an op's body, a cast or a move
//! ([`MapOp`]). Each comes in three variants ([`Variant`]) by how positions follow the
//! output index.

use polytensor_core::plan::Coalesced;

use crate::ir::{self, item, Kernel, KernelName, Local, Stmt, Ty};
use crate::launch::Arg;
use crate::{body, render, Dialect, Elem, Library};

/// How a kernel reads or writes one operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// Stored as the element's storage type, computed on as its value type.
    Value(Elem),
    /// The element's bits, moved without conversion (copy, where, fill).
    Raw(Elem),
}

/// Whether positions are affine in the flat index (one coalesced dim) or unravelled
/// through the geometry buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// One dim, every stride 1: `p = offset + i`. Compilers that vectorise across
    /// work-items (PoCL) load and store whole vectors here.
    Contiguous,
    /// One dim: `p = offset + i * stride`.
    Flat,
    /// Any rank: dims and strides from the geometry buffer.
    Strided,
}

impl Variant {
    /// The variant that runs `plan`: the cheapest whose position rule covers it.
    pub fn of(plan: &Coalesced) -> Self {
        if !plan.is_flat() {
            Variant::Strided
        } else if (0..plan.operands()).all(|k| plan.strides(k)[0] == 1) {
            Variant::Contiguous
        } else {
            Variant::Flat
        }
    }

    /// Every variant.
    pub const ALL: [Variant; 3] = [Variant::Contiguous, Variant::Flat, Variant::Strided];

    /// The suffix of a kernel's name in this variant.
    pub fn suffix(self) -> &'static str {
        match self {
            Variant::Contiguous => "contiguous",
            Variant::Flat => "flat",
            Variant::Strided => "strided",
        }
    }
}

/// What a map kernel computes from its inputs (`x`, `y`, `z`).
#[derive(Debug, Clone, PartialEq)]
pub enum MapOp {
    /// An op's body in element `e`, its operand `k` being input `k`.
    Body(Elem, body::Expr),
    /// The input converted from the first element to the second.
    Cast(Elem, Elem),
    /// The input unchanged (a move of raw bits).
    Copy,
}

/// An elementwise kernel: its name in its program, its operands and what it computes.
/// [`MapKernel::kernel`] builds it, in one of its [`Variant`]s, as a kernel of the IR
/// that every GPU language prints.
#[derive(Debug, Clone, PartialEq)]
pub struct MapKernel {
    /// The name, unique in its program; each variant's kernel adds a suffix
    /// (`<name>_contiguous`, `<name>_flat`, `<name>_strided`).
    pub name: KernelName,
    /// The inputs, `x`, `y`, `z`.
    pub inputs: Vec<Access>,
    /// The output.
    pub output: Access,
    /// What the output's value is.
    pub op: MapOp,
}

/// Per input: its buffer, its stride (flat variant), its position and its value.
const INPUTS: [(&str, &str, Local, &str); 3] = [
    ("in0", "stride0", Local::new("p0", Ty::Index), "x"),
    ("in1", "stride1", Local::new("p1", Ty::Index), "y"),
    ("in2", "stride2", Local::new("p2", Ty::Index), "z"),
];

impl MapKernel {
    /// Whether the kernel computes in f64.
    pub fn needs_fp64(&self) -> bool {
        self.value_elems().iter().any(|e| e.needs_fp64())
    }

    /// The element types the kernel computes on (raw moves compute on none).
    fn value_elems(&self) -> Vec<Elem> {
        self.inputs
            .iter()
            .chain([&self.output])
            .filter_map(|a| match a {
                Access::Value(e) => Some(*e),
                Access::Raw(_) => None,
            })
            .collect()
    }

    /// Whether C renders the kernel's op (every cast and move does; an op's body where
    /// the helper library has its functions).
    pub fn renders_c(&self) -> bool {
        match &self.op {
            MapOp::Body(e, expr) => render::c(expr, *e).is_some(),
            MapOp::Cast(..) | MapOp::Copy => true,
        }
    }

    /// The kernel's name in `variant`.
    pub fn name(&self, variant: Variant) -> KernelName {
        self.name.with(variant.suffix())
    }

    /// The kernel in `variant`. Its parameters, in order:
    /// - `count`: the number of output elements;
    /// - strided variant only: the words `geometry`: the rank `r` of the coalesced shape
    ///   ([`polytensor_core::plan::Coalesced`]), its `r` dims, then each input's `r`
    ///   strides ([`MapKernel::geometry`]);
    /// - per input: its buffer (and offset), then (flat variant only) its stride (the
    ///   contiguous variant's strides are all 1);
    /// - the output buffer (and offset), written contiguously.
    pub fn kernel(&self, variant: Variant) -> Kernel {
        let mut k = Kernel::new(self.name(variant));
        let count = k.index("count");
        let geometry = (variant == Variant::Strided).then(|| k.words("geometry"));
        let mut inputs = Vec::new();
        for (access, (name, stride, ..)) in self.inputs.iter().zip(INPUTS) {
            let buf = match *access {
                Access::Value(e) => k.input(name, e),
                Access::Raw(e) => k.moved(name, e, false),
            };
            inputs.push((buf, (variant == Variant::Flat).then(|| k.index(stride))));
        }
        let out = match self.output {
            Access::Value(e) => k.output("out", e),
            Access::Raw(e) => k.moved("out", e, true),
        };
        let mut stmts = match geometry {
            Some(geometry) => {
                let positions: Vec<Local> = INPUTS.iter().take(inputs.len()).map(|i| i.2).collect();
                ir::unravel(geometry, item(), &positions)
            }
            None => inputs
                .iter()
                .zip(INPUTS)
                .map(|((_, stride), (.., p, _))| {
                    let at = match stride {
                        Some(stride) => item() * stride.clone(),
                        None => item(),
                    };
                    Stmt::Let(p, at)
                })
                .collect(),
        };
        let mut values = Vec::new();
        for (&(buf, _), (.., p, value)) in inputs.iter().zip(INPUTS) {
            let local = Local::new(value, load_ty(self.inputs[values.len()]));
            stmts.push(Stmt::Let(local, buf.at(p.get())));
            values.push(local.get());
        }
        let value = match &self.op {
            MapOp::Body(e, expr) => ir::elem_of(*e, expr.clone(), values),
            MapOp::Cast(from, to) => values[0].clone().cast(*from, *to),
            MapOp::Copy => values[0].clone(),
        };
        k.map(out, count, stmts, value)
    }

    /// Whether WGSL renders the kernel: it holds every operand ([`crate::wgsl::Storage`])
    /// and spells the op.
    pub fn renders_wgsl(&self) -> bool {
        let held = self.inputs.iter().chain([&self.output]).all(|a| match *a {
            Access::Value(e) => crate::wgsl::Storage::of_elem(e).is_some(),
            Access::Raw(e) => crate::wgsl::Storage::raw_elem(e).is_some(),
        });
        held && match &self.op {
            MapOp::Body(e, expr) => render::wgsl(expr, *e).is_some(),
            MapOp::Cast(from, to) => render::wgsl_cast(*from, *to, "x").is_some(),
            MapOp::Copy => true,
        }
    }

    /// The geometry words of the strided variant for a coalesced plan.
    pub fn geometry(plan: &Coalesced, inputs: usize) -> Vec<i64> {
        let mut words = vec![plan.rank() as i64];
        words.extend(plan.dims().iter().map(|&d| d as i64));
        for k in 0..inputs {
            words.extend(plan.strides(k).iter().map(|&s| s as i64));
        }
        words
    }
}

/// The arguments of a [`MapKernel::kernel`] in `variant` over `plan` (`count` output
/// elements), in its parameter order: the count, the geometry words' memory (strided
/// variant), each input's memory and element offset (and stride, flat variant), the
/// output's memory and element offset.
pub fn map_args<M: Copy>(
    plan: &Coalesced,
    variant: Variant,
    count: usize,
    geometry: Option<M>,
    inputs: &[(M, usize)],
    out: (M, usize),
) -> Vec<Arg<M>> {
    let mut args = vec![Arg::I64(count as i64)];
    args.extend(geometry.map(Arg::Mem));
    for (k, &(mem, offset)) in inputs.iter().enumerate() {
        args.extend([Arg::Mem(mem), Arg::I64(offset as i64)]);
        if variant == Variant::Flat {
            args.push(Arg::I64(plan.strides(k)[0] as i64));
        }
    }
    args.extend([Arg::Mem(out.0), Arg::I64(out.1 as i64)]);
    args
}

/// The type an input read as `access` loads as.
fn load_ty(access: Access) -> Ty {
    match access {
        Access::Value(e) => Ty::Value(e),
        Access::Raw(e) => Ty::Raw(e),
    }
}

/// One program holding the `kernels` with the helpers they all need: runtimes pay a large
/// fixed cost per program build (PoCL about 0.3 s, however many kernels it holds), so
/// backends build the kernels of one op family and dtype together. `None` where a
/// kernel's expression has no C rendering.
pub fn program(dialect: Dialect, kernels: &[Kernel]) -> Option<String> {
    let elems: Vec<Elem> = kernels
        .iter()
        .flat_map(|k| k.buffers().filter(|(_, b)| !b.moved).map(|(_, b)| b.elem))
        .collect();
    let mut text = Library::new(dialect, &elems, false).render();
    for kernel in kernels {
        text += &render::c_kernel(kernel)?;
    }
    Some(text)
}
