//! Elementwise kernels: `out[i] = f(in0[p0(i)], in1[p1(i)], ...)` for one to three strided
//! (broadcast, transposed, offset) inputs and a contiguous output, in one template; `f` is
//! a C expression over `x`, `y`, `z` rendered from the kit's bodies ([`crate::render`]).
//!
//! The kernel is named `map`. Its arguments, in order:
//! - `i64 count`: the number of output elements;
//! - strided variant only: `GLOBAL const i64* geometry`: the rank `r` of the coalesced
//!   shape ([`polytensor_core::plan::Coalesced`]), its `r` dims, then each input's `r` strides;
//! - per input: its buffer, then `i64` offset (elements), then (flat variant only) its
//!   `i64` stride (the contiguous variant's strides are all 1);
//! - the output buffer and its `i64` offset (elements).
//!
//! Each work-item handles elements `GLOBAL_ID, GLOBAL_ID + GLOBAL_SIZE, ...`, so any
//! launch size covers any count.

use crate::{Dialect, Elem, Library};

/// How a kernel reads or writes one operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// Stored as the element's storage type, computed on as its value type.
    Value(Elem),
    /// The element's bits, moved without conversion (copy, where, fill).
    Raw(Elem),
}

impl Access {
    fn storage(self) -> &'static str {
        match self {
            Access::Value(e) => e.storage(),
            Access::Raw(e) => e.raw(),
        }
    }

    fn value(self) -> &'static str {
        match self {
            Access::Value(e) => e.value(),
            Access::Raw(e) => e.raw(),
        }
    }

    fn load(self, stored: &str) -> String {
        match self {
            Access::Value(e) => e.load(stored),
            Access::Raw(_) => stored.to_string(),
        }
    }

    fn store(self, value: &str) -> String {
        match self {
            Access::Value(e) => e.store(value),
            Access::Raw(_) => value.to_string(),
        }
    }
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
    pub fn of(plan: &polytensor_core::plan::Coalesced) -> Self {
        if !plan.is_flat() {
            Variant::Strided
        } else if (0..plan.operands()).all(|k| plan.strides(k)[0] == 1) {
            Variant::Contiguous
        } else {
            Variant::Flat
        }
    }
}

/// An elementwise kernel: its operands and the expression that combines them. Equal
/// kernels have equal text, so a `MapKernel` is the cache key of its compiled program.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MapKernel {
    /// The inputs, named `x`, `y`, `z` in the expression.
    pub inputs: Vec<Access>,
    /// The output.
    pub output: Access,
    /// The C expression of the output's value.
    pub expression: String,
    /// Flat or strided positions.
    pub variant: Variant,
}

/// The names of the inputs in expressions.
const NAMES: [&str; 3] = ["x", "y", "z"];

impl MapKernel {
    /// Whether the kernel computes in f64.
    pub fn needs_fp64(&self) -> bool {
        Library::new(Dialect::OpenCl, &self.value_elems(), false).needs_fp64()
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

    /// A program of just this kernel, named `map`, in `dialect`.
    pub fn source(&self, dialect: Dialect) -> String {
        program(dialect, &[("map", self)])
    }

    /// The kernel's own text, named `name` (its expression in `apply_<name>`), without
    /// the helper library it calls.
    fn body(&self, name: &str) -> String {
        let params: Vec<String> = self
            .inputs
            .iter()
            .zip(NAMES)
            .map(|(a, name)| format!("{} {name}", a.value()))
            .collect();
        let mut text = format!(
            "\nFN {} apply_{name}({}) {{\n    return {};\n}}\n",
            self.output.value(),
            params.join(", "),
            self.expression
        );
        let strided = self.variant == Variant::Strided;
        let mut args = vec!["const i64 count".to_string()];
        if strided {
            args.push("GLOBAL const i64* geometry".into());
        }
        for (k, a) in self.inputs.iter().enumerate() {
            args.push(format!("GLOBAL const {}* in{k}", a.storage()));
            args.push(format!("const i64 offset{k}"));
            if self.variant == Variant::Flat {
                args.push(format!("const i64 stride{k}"));
            }
        }
        args.push(format!("GLOBAL {}* out", self.output.storage()));
        args.push("const i64 out_offset".into());
        let loads: Vec<String> = (0..self.inputs.len())
            .map(|k| self.inputs[k].load(&format!("in{k}[p{k}]")))
            .collect();
        let store = self
            .output
            .store(&format!("apply_{name}({})", loads.join(", ")));
        let positions = if strided {
            let starts: String = (0..self.inputs.len())
                .map(|k| format!("        i64 p{k} = offset{k};\n"))
                .collect();
            let steps: String = (0..self.inputs.len())
                .map(|k| {
                    format!(
                        "            p{k} += index * geometry[1 + {} * rank + d];\n",
                        k + 1
                    )
                })
                .collect();
            format!(
                "        i64 rest = i;\n{starts}        for (i64 d = rank - 1; d >= 0; d--) {{\n            \
                 const i64 dim = geometry[1 + d];\n            const i64 index = rest % dim;\n            \
                 rest /= dim;\n{steps}        }}\n"
            )
        } else {
            let step = |k: usize| match self.variant {
                Variant::Flat => format!(" * stride{k}"),
                _ => String::new(),
            };
            (0..self.inputs.len())
                .map(|k| format!("        const i64 p{k} = offset{k} + i{};\n", step(k)))
                .collect()
        };
        let rank = if strided {
            "    const i64 rank = geometry[0];\n"
        } else {
            ""
        };
        text += &format!(
            "\nKERNEL void {name}({}) {{\n{rank}    for (i64 i = GLOBAL_ID; i < count; i += GLOBAL_SIZE) {{\n\
             {positions}        out[out_offset + i] = {store};\n    }}\n}}\n",
            args.join(", ")
        );
        text
    }

    /// The geometry words of the strided variant for a coalesced plan.
    pub fn geometry(plan: &polytensor_core::plan::Coalesced, inputs: usize) -> Vec<i64> {
        let mut words = vec![plan.rank() as i64];
        words.extend(plan.dims().iter().map(|&d| d as i64));
        for k in 0..inputs {
            words.extend(plan.strides(k).iter().map(|&s| s as i64));
        }
        words
    }
}

/// One program holding `kernels`, each under its name, with the helpers they all need:
/// runtimes pay a large fixed cost per program build (PoCL about 0.3 s, however many
/// kernels it holds), so backends build the kernels of one op family and dtype together.
pub fn program(dialect: Dialect, kernels: &[(&str, &MapKernel)]) -> String {
    let elems: Vec<Elem> = kernels.iter().flat_map(|(_, k)| k.value_elems()).collect();
    let mut text = Library::new(dialect, &elems, false).render();
    for (name, kernel) in kernels {
        text += &kernel.body(name);
    }
    text
}
