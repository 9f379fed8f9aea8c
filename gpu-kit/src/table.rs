//! The kernel table, shared by every backend that compiles these kernels (OpenCL, CUDA):
//! which generated kernel runs each (op, dtype), and which kernels are compiled together
//! into one program. A backend's `supports` is derived from it and nothing else, and the
//! CUDA PTX check compiles exactly the programs [`all_programs`] lists.
//!
//! Compiling a program has a large fixed cost (PoCL: about 0.3 s, NVRTC about as much,
//! however many kernels it holds), so the kernels of one family and dtype share a program:
//! every unary op of a dtype, every binary op, every cast from it, every reduction; moves
//! (copy, where) share one per element size. Each elementwise kernel comes in a contiguous,
//! a flat and a strided variant.

use crate::elementwise::{self, Access, MapKernel, MapOp, Variant};
use crate::ir::{Kernel, KernelName};
use crate::matmul::{MatmulKernel, Schedule};
use crate::reduce::{self, ReduceKernel, Stage};
use crate::segment::SegmentKernels;
use crate::window::WindowKernels;
use crate::{body, Dialect, Elem};
use polytensor_core::plan::segment::SegmentOp;
use polytensor_core::{BinaryOp, DataType, Op, ReduceOp, UnaryOp};

/// A program: the kernels of one family and dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProgramKey {
    /// Every unary op of the dtype.
    Unary(DataType),
    /// Every binary op of the dtype (comparisons and logical ops included).
    Binary(DataType),
    /// Every cast from the dtype.
    Cast(DataType),
    /// Copy and where on elements of the dtype's raw type (shared by equal sizes).
    Move(Elem),
    /// Every reduction of the dtype.
    Reduce(DataType),
    /// Matmul of the dtype.
    Matmul(DataType),
    /// The direct window kernels of the dtype (convolutions, pooling).
    Window(DataType),
    /// The segment gather of elements moved as the raw type (shared by equal sizes).
    SegmentGather(Elem),
    /// The segment folds of the dtype (sum, mean, square-root mean, max).
    Segment(DataType),
}

/// The element a raw move of `dtype` is done as: one per element size (any fixed-size
/// dtype moves, whether or not kernels compute on it).
pub(crate) fn move_elem(dtype: DataType) -> Option<Elem> {
    if !dtype.is_pod() {
        return None;
    }
    raw_elem(dtype.size())
}

/// The raw element type of elements of `size` bytes (`U8`, `U16`, `U32`, `U64`, `C128`),
/// as moves and fills move them.
pub fn raw_elem(size: usize) -> Option<Elem> {
    Some(match size {
        1 => Elem::U8,
        2 => Elem::U16,
        4 => Elem::U32,
        8 => Elem::U64,
        16 => Elem::C128,
        _ => return None,
    })
}

/// The program holding `op` on `dtype`'s elementwise kernel and the kernel's name (before
/// its variant's suffix), without building the kernel: what a launch needs.
pub fn map_name(op: Op, dtype: DataType) -> Option<(ProgramKey, KernelName)> {
    if !op.is_defined_for(dtype) {
        return None;
    }
    Some(match op {
        Op::Where => (ProgramKey::Move(move_elem(dtype)?), "where".into()),
        Op::Copy => (ProgramKey::Move(move_elem(dtype)?), "copy".into()),
        Op::Unary(u) => (ProgramKey::Unary(dtype), u.name().into()),
        Op::Binary(b) => (ProgramKey::Binary(dtype), b.name().into()),
        _ => return None,
    })
}

/// The program holding the cast from `from` to `to` and the kernel's name (before its
/// variant's suffix).
pub fn cast_name(from: DataType, to: DataType) -> (ProgramKey, KernelName) {
    (
        ProgramKey::Cast(from),
        KernelName::new("to").with(to.name()),
    )
}

/// The program holding `op` on `dtype`'s elementwise kernel, and the kernel; whether a
/// language renders it is [`MapKernel::renders_c`]'s or the WGSL renderer's to say.
pub fn map_spec(op: Op, dtype: DataType) -> Option<(ProgramKey, MapKernel)> {
    let (key, name) = map_name(op, dtype)?;
    if let ProgramKey::Move(m) = key {
        return Some((key, move_kernel(op, name, m)?));
    }
    let e = Elem::of(dtype)?;
    let value = |out: DataType| Some(Access::Value(Elem::of(out)?));
    let (inputs, output, op) = match op {
        Op::Unary(u) => (
            vec![Access::Value(e)],
            value(u.output_dtype(dtype))?,
            MapOp::Body(e, body::unary(u, e)?),
        ),
        Op::Binary(b) => (
            vec![Access::Value(e), Access::Value(e)],
            value(b.output_dtype(dtype))?,
            MapOp::Body(e, body::binary(b, e)?),
        ),
        _ => return None,
    };
    Some((
        key,
        MapKernel {
            name,
            inputs,
            output,
            op,
        },
    ))
}

/// The kernel `name` of a raw move (`where` or `copy`) of elements moved as `m`.
fn move_kernel(op: Op, name: KernelName, m: Elem) -> Option<MapKernel> {
    let (inputs, op) = match op {
        Op::Where => (
            vec![Access::Value(Elem::Bool), Access::Raw(m), Access::Raw(m)],
            MapOp::Body(Elem::Bool, body::select()),
        ),
        Op::Copy => (vec![Access::Raw(m)], MapOp::Copy),
        _ => return None,
    };
    Some(MapKernel {
        name,
        inputs,
        output: Access::Raw(m),
        op,
    })
}

/// The program and kernel of the cast from `from` to `to`.
pub fn cast_spec(from: DataType, to: DataType) -> Option<(ProgramKey, MapKernel)> {
    let (f, t) = (Elem::of(from)?, Elem::of(to)?);
    let (key, name) = cast_name(from, to);
    Some((
        key,
        MapKernel {
            name,
            inputs: vec![Access::Value(f)],
            output: Access::Value(t),
            op: MapOp::Cast(f, t),
        },
    ))
}

/// Every elementwise kernel of a program, whatever renders it.
fn map_specs(key: ProgramKey) -> Vec<MapKernel> {
    let specs: Vec<(ProgramKey, MapKernel)> = match key {
        ProgramKey::Unary(dtype) => UnaryOp::ALL
            .iter()
            .filter_map(|&op| map_spec(Op::Unary(op), dtype))
            .collect(),
        ProgramKey::Binary(dtype) => BinaryOp::ALL
            .iter()
            .filter_map(|&op| map_spec(Op::Binary(op), dtype))
            .collect(),
        ProgramKey::Cast(from) => DataType::ALL
            .iter()
            .filter_map(|&to| cast_spec(from, to))
            .collect(),
        ProgramKey::Move(m) => [(Op::Copy, "copy"), (Op::Where, "where")]
            .into_iter()
            .filter_map(|(op, name)| Some((key, move_kernel(op, name.into(), m)?)))
            .collect(),
        ProgramKey::Reduce(_)
        | ProgramKey::Matmul(_)
        | ProgramKey::Window(_)
        | ProgramKey::SegmentGather(_)
        | ProgramKey::Segment(_) => vec![],
    };
    specs
        .into_iter()
        .filter(|(k, _)| *k == key)
        .map(|(_, spec)| spec)
        .collect()
}

/// Every elementwise kernel of a program that C renders, on a device with or without f64.
pub fn map_members(key: ProgramKey, fp64: bool) -> Vec<MapKernel> {
    map_specs(key)
        .into_iter()
        .filter(|spec| (fp64 || !spec.needs_fp64()) && spec.renders_c())
        .collect()
}

/// Every reduction of a dtype's program, each as `kernel` builds it for the device (the
/// C programs: [`ReduceKernel::new`], floats accumulated in f64 where the device has it).
pub fn reduce_members(
    dtype: DataType,
    kernel: impl Fn(ReduceOp, Elem) -> ReduceKernel,
) -> Vec<ReduceKernel> {
    let Some(input) = Elem::of(dtype) else {
        return vec![];
    };
    ReduceOp::ALL
        .iter()
        .filter(|&&op| Op::Reduce(op).is_defined_for(dtype))
        .map(|&op| kernel(op, input))
        .collect()
}

/// The IR kernels of the program of `key`, on a device with or without f64, with matmul
/// work divided by `schedule` and reductions as `reduce` builds them; `None` if the table
/// has no such program. Unlike [`program_source`], kernels a language may not render are
/// listed too (a backend that compiles kernel by kernel, as wgpu does, picks one by name,
/// and its capabilities decide what is launched).
pub fn program_kernels(
    key: ProgramKey,
    fp64: bool,
    schedule: Schedule,
    reduce: impl Fn(ReduceOp, Elem) -> ReduceKernel,
) -> Option<Vec<Kernel>> {
    Some(match key {
        ProgramKey::Matmul(dtype) => vec![MatmulKernel::new(Elem::of(dtype)?, schedule)?.kernel()],
        ProgramKey::Window(dtype) => window_kernels(dtype, fp64)?.kernels(),
        ProgramKey::SegmentGather(m) => SegmentKernels::Gather(m).kernels(),
        ProgramKey::Segment(dtype) => SegmentKernels::reduce(dtype)?.kernels(),
        ProgramKey::Reduce(dtype) => reduce_members(dtype, reduce)
            .iter()
            .flat_map(|k| Stage::ALL.map(|stage| k.kernel(stage)))
            .collect::<Option<Vec<_>>>()?,
        _ => map_specs(key)
            .iter()
            .flat_map(|spec| Variant::ALL.map(|variant| spec.kernel(variant)))
            .collect(),
    })
}

/// Whether a kernel for `op` on `dtype` exists, given whether the device computes in f64.
pub fn has_kernel(op: Op, dtype: DataType, fp64: bool) -> bool {
    match op {
        Op::Copy | Op::Where => return map_spec(op, dtype).is_some_and(|(_, s)| s.renders_c()),
        Op::Fill => return op.is_defined_for(dtype) && move_elem(dtype).is_some(),
        _ => {}
    }
    let Some(e) = Elem::of(dtype) else {
        return false;
    };
    if e.needs_fp64() && !fp64 && op != Op::Arange {
        return false;
    }
    match op {
        Op::Arange => op.is_defined_for(dtype),
        Op::Cast => true,
        Op::Matmul => MatmulKernel::is_defined_for(e),
        Op::Reduce(_) => op.is_defined_for(dtype),
        _ => map_spec(op, dtype).is_some_and(|(_, s)| s.renders_c()),
    }
}

/// The direct window kernels of `dtype` on a device with or without f64, if it has them
/// (`Device::window_kernels`).
pub fn window_kernels(dtype: DataType, fp64: bool) -> Option<WindowKernels> {
    WindowKernels::new(dtype).filter(|k| fp64 || !k.needs_fp64())
}

/// The program of the kit's segment kernel for `op` on `dtype`, on a device with or without
/// f64, if there is one (`Device::segment_reduce`).
pub fn segment_program(op: SegmentOp, dtype: DataType, fp64: bool) -> Option<ProgramKey> {
    let kernels = SegmentKernels::new(op, dtype).filter(|k| fp64 || !k.needs_fp64())?;
    Some(match kernels {
        SegmentKernels::Gather(m) => ProgramKey::SegmentGather(m),
        SegmentKernels::Reduce(..) => ProgramKey::Segment(dtype),
    })
}

/// A program's text and the names of its kernels.
#[derive(Debug, Clone)]
pub struct ProgramSource {
    /// The source text, dialect header first.
    pub text: String,
    /// The kernels it defines.
    pub kernels: Vec<KernelName>,
}

/// The text and kernel names of the program of `key` in `dialect`, on a device with or
/// without f64, with matmul work divided by `schedule`; `None` if the table has no such
/// program.
pub fn program_source(
    dialect: Dialect,
    key: ProgramKey,
    fp64: bool,
    schedule: Schedule,
) -> Option<ProgramSource> {
    Some(match key {
        ProgramKey::Matmul(dtype) => {
            let kernel = MatmulKernel::new(Elem::of(dtype)?, schedule)?;
            if kernel.needs_fp64() && !fp64 {
                return None;
            }
            ProgramSource {
                text: kernel.source(dialect),
                kernels: vec![KernelName::new("matmul")],
            }
        }
        ProgramKey::Window(dtype) => {
            let kernels = window_kernels(dtype, fp64)?;
            ProgramSource {
                text: kernels.source(dialect)?,
                kernels: WindowKernels::NAMES.map(KernelName::new).to_vec(),
            }
        }
        ProgramKey::SegmentGather(m) => {
            let kernels = SegmentKernels::Gather(m);
            ProgramSource {
                text: kernels.source(dialect),
                kernels: kernels.names(),
            }
        }
        ProgramKey::Segment(dtype) => {
            let kernels = SegmentKernels::reduce(dtype).filter(|k| fp64 || !k.needs_fp64())?;
            ProgramSource {
                text: kernels.source(dialect),
                kernels: kernels.names(),
            }
        }
        ProgramKey::Reduce(dtype) => {
            let members = reduce_members(dtype, |op, e| ReduceKernel::new(op, e, fp64));
            ProgramSource {
                text: reduce::program(dialect, &members)?,
                kernels: members
                    .iter()
                    .flat_map(|k| Stage::ALL.map(|stage| k.kernel_name(stage)))
                    .collect(),
            }
        }
        _ => {
            let kernels: Vec<_> = map_members(key, fp64)
                .iter()
                .flat_map(|spec| {
                    [Variant::Contiguous, Variant::Flat, Variant::Strided]
                        .map(|variant| spec.kernel(variant))
                })
                .collect();
            if kernels.is_empty() {
                return None;
            }
            ProgramSource {
                text: elementwise::program(dialect, &kernels)?,
                kernels: kernels.into_iter().map(|k| k.name).collect(),
            }
        }
    })
}

/// Every program of the table on a device with or without f64: what a backend can ever
/// compile (the CUDA PTX check compiles each of them).
pub fn all_programs(fp64: bool) -> Vec<ProgramKey> {
    let raw = [Elem::U8, Elem::U16, Elem::U32, Elem::U64, Elem::C128];
    let moves = raw
        .map(ProgramKey::Move)
        .into_iter()
        .chain(raw.map(ProgramKey::SegmentGather));
    let typed = DataType::ALL.iter().flat_map(|&dtype| {
        [
            ProgramKey::Unary(dtype),
            ProgramKey::Binary(dtype),
            ProgramKey::Cast(dtype),
            ProgramKey::Reduce(dtype),
            ProgramKey::Matmul(dtype),
            ProgramKey::Window(dtype),
            ProgramKey::Segment(dtype),
        ]
    });
    moves
        .chain(typed)
        .filter(|&key| match key {
            ProgramKey::Reduce(dtype) => {
                !reduce_members(dtype, |op, e| ReduceKernel::new(op, e, fp64)).is_empty()
            }
            ProgramKey::Matmul(dtype) => has_kernel(Op::Matmul, dtype, fp64),
            ProgramKey::Window(dtype) => window_kernels(dtype, fp64).is_some(),
            ProgramKey::SegmentGather(_) => true,
            ProgramKey::Segment(dtype) => segment_program(SegmentOp::Sum, dtype, fp64).is_some(),
            _ => !map_members(key, fp64).is_empty(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render;

    /// What `MapKernel::renders_c` and `renders_wgsl` promise (the rule behind every
    /// backend's capabilities) is what the renderers do, for every kernel of the table in
    /// every variant.
    #[test]
    fn every_map_kernel_renders_where_the_table_says_it_does() {
        let mut checked = 0;
        for &dtype in DataType::ALL {
            let ops = UnaryOp::ALL
                .iter()
                .map(|&u| Op::Unary(u))
                .chain(BinaryOp::ALL.iter().map(|&b| Op::Binary(b)))
                .chain([Op::Copy, Op::Where]);
            let specs = ops
                .filter_map(|op| map_spec(op, dtype))
                .chain(DataType::ALL.iter().filter_map(|&to| cast_spec(dtype, to)));
            for (_, spec) in specs {
                for variant in [Variant::Contiguous, Variant::Flat, Variant::Strided] {
                    let kernel = spec.kernel(variant);
                    assert_eq!(
                        render::c_kernel(&kernel).is_some(),
                        spec.renders_c(),
                        "{} in C",
                        kernel.name
                    );
                    assert_eq!(
                        render::wgsl_kernel(&kernel).is_some(),
                        spec.renders_wgsl(),
                        "{} of {dtype} in WGSL",
                        kernel.name
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 1000, "{checked} kernels");
    }

    /// A launch names its kernel by a `KernelName` built without the kernel
    /// ([`map_name`], [`cast_name`], [`ReduceKernel::kernel_name`]): every program
    /// defines each name it lists exactly once, and the launch names are among them.
    #[test]
    fn programs_define_the_kernels_launches_name() {
        for fp64 in [false, true] {
            for key in all_programs(fp64) {
                let program = program_source(Dialect::OpenCl, key, fp64, Schedule::Tiled).unwrap();
                let mut names: Vec<String> =
                    program.kernels.iter().map(ToString::to_string).collect();
                for name in &names {
                    let head = format!("KERNEL void {name}(");
                    assert_eq!(program.text.matches(&head).count(), 1, "{name} in {key:?}");
                }
                names.sort();
                names.dedup();
                assert_eq!(names.len(), program.kernels.len(), "{key:?}");
            }
        }
        let (key, name) = map_name(Op::Binary(BinaryOp::Add), DataType::Half).unwrap();
        let program = program_source(Dialect::Cuda, key, true, Schedule::Tiled).unwrap();
        assert!(program
            .kernels
            .contains(&name.with(Variant::Strided.suffix())));
        let (key, name) = cast_name(DataType::Int8, DataType::BFloat16);
        let program = program_source(Dialect::Cuda, key, true, Schedule::Tiled).unwrap();
        assert_eq!(name.with("flat").to_string(), "to_bfloat16_flat");
        assert!(program.kernels.contains(&name.with(Variant::Flat.suffix())));
    }
}
