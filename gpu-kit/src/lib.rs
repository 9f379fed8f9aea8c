//! polytensor's GPU kernel kit: every GPU kernel is written here once and printed for each
//! GPU language. OpenCL C and CUDA C++ both compile kernels from source text at run time
//! (the OpenCL runtime, NVRTC), and both are C underneath, so their text is one, over the
//! fixed-width type names and macros of a small [`Dialect`] header (`c/opencl.h`,
//! `c/cuda.h`); the OpenCL instance runs on PoCL in CI, and the CUDA instance differs only
//! by the header in front of it. The same kernels print as WGSL for wgpu ([`render`],
//! [`wgsl`]).
//!
//! This crate knows nothing of any driver: it turns (op, dtype, variant) into source text
//! and says how to launch it ([`elementwise::MapKernel`], [`reduce::ReduceKernel`],
//! [`matmul::MatmulKernel`], [`window::WindowKernels`],
//! [`segment::SegmentKernels`]); [`launch`] goes from a `Device` call to those launches
//! (plans, argument lists, grids) through a backend's [`launch::Queue`], which compiles,
//! caches and enqueues.
//!
//! - [`Elem`]: how each dtype is stored and computed on (f16 and bf16 as their 16 bits,
//!   computed in f32 and rounded once; complex as `float2`/`double2`).
//! - [`body`]: the body of every elementwise op, one typed expression for every GPU
//!   language, `where`'s, and every cast's steps ([`body::Cast`]); and [`render`]: their
//!   C and WGSL dialect layers (wgpu renders its kernels' bodies and casts from here too).
//! - [`ir`]: the kernel IR. A loop kernel (the elementwise, segment and window families so
//!   far) is one
//!   Rust function building an [`ir::Kernel`], which [`render::c_kernel`] prints for
//!   OpenCL and CUDA and [`render::wgsl_kernel`] for WGSL (over [`wgsl`]'s storage rule
//!   and helpers), so every GPU backend runs the same kernel.
//! - [`table`]: which kernel runs each (op, dtype), grouped into programs; the single
//!   source of every backend's `supports`.
//! - [`Library`]: the helper headers a kernel needs (`c/scalar.h`, `c/real.h`,
//!   `c/complex.h`, `c/fp64.h`), instantiated per type.

pub mod body;
mod dialect;
mod elem;
pub mod elementwise;
pub mod ir;
pub mod launch;
mod library;
pub mod matmul;
pub mod reduce;
pub mod render;
pub mod segment;
pub mod table;
pub mod wgsl;
pub mod window;

pub use dialect::Dialect;
pub use elem::{Elem, Real};
pub use library::Library;

#[cfg(test)]
mod tests {
    use super::elementwise::{Access, MapKernel, MapOp, Variant};
    use super::matmul::{MatmulKernel, Schedule};
    use super::reduce::ReduceKernel;
    use super::*;
    use polytensor_core::ReduceOp;

    /// The kernel text after the dialect header (and the f64 part of OpenCL's).
    fn body(source: &str, dialect: Dialect, fp64: bool) -> String {
        source
            .strip_prefix(&dialect.header(fp64))
            .expect("every source starts with its dialect's header")
            .to_string()
    }

    #[test]
    fn opencl_and_cuda_kernels_differ_only_by_the_dialect_header() {
        let map = MapKernel {
            name: "pow".into(),
            inputs: vec![Access::Value(Elem::BF16), Access::Value(Elem::BF16)],
            output: Access::Value(Elem::BF16),
            op: MapOp::Body(
                Elem::BF16,
                body::binary(polytensor_core::BinaryOp::Pow, Elem::BF16).unwrap(),
            ),
        };
        let map_source =
            |dialect| elementwise::program(dialect, &[map.kernel(Variant::Strided)]).unwrap();
        let reduce = ReduceKernel {
            op: ReduceOp::Mean,
            input: Elem::C64,
            wide: true,
            lanes: reduce::WORKGROUP,
        };
        let tiled = MatmulKernel::new(Elem::F16, Schedule::Tiled).unwrap();
        let blocked = MatmulKernel::new(Elem::C64, Schedule::Blocked).unwrap();
        let windows = window::WindowKernels::new(polytensor_core::DataType::BFloat16).unwrap();
        let sources = [
            (
                map_source(Dialect::OpenCl),
                map_source(Dialect::Cuda),
                false,
            ),
            (
                reduce.source(Dialect::OpenCl).unwrap(),
                reduce.source(Dialect::Cuda).unwrap(),
                true,
            ),
            (
                tiled.source(Dialect::OpenCl),
                tiled.source(Dialect::Cuda),
                false,
            ),
            (
                blocked.source(Dialect::OpenCl),
                blocked.source(Dialect::Cuda),
                false,
            ),
            (
                windows.source(Dialect::OpenCl).unwrap(),
                windows.source(Dialect::Cuda).unwrap(),
                false,
            ),
        ];
        for (opencl, cuda, fp64) in sources {
            assert_eq!(
                body(&opencl, Dialect::OpenCl, fp64),
                body(&cuda, Dialect::Cuda, fp64)
            );
        }
        assert!(reduce.needs_fp64() && !map.needs_fp64());
    }

    #[test]
    fn the_variant_follows_the_plan() {
        use polytensor_core::plan::Coalesced;
        let contiguous = Coalesced::new(&[2, 3], &[&[3, 1], &[3, 1]]);
        assert_eq!(Variant::of(&contiguous), Variant::Contiguous);
        let broadcast = Coalesced::new(&[2, 3], &[&[3, 1], &[0, 0]]);
        assert_eq!(Variant::of(&broadcast), Variant::Flat);
        let transposed = Coalesced::new(&[2, 3], &[&[1, 2]]);
        assert_eq!(Variant::of(&transposed), Variant::Strided);
    }

    #[test]
    fn helpers_come_only_with_the_types_that_need_them() {
        let copy = |e| {
            let kernel = MapKernel {
                name: "copy".into(),
                inputs: vec![Access::Value(e)],
                output: Access::Value(e),
                op: MapOp::Copy,
            };
            elementwise::program(Dialect::OpenCl, &[kernel.kernel(Variant::Flat)]).unwrap()
        };
        let ints = copy(Elem::I32);
        assert!(!ints.contains("cl_khr_fp64") && !ints.contains("#define CPLX"));
        let complex = copy(Elem::C128);
        assert!(complex.contains("cl_khr_fp64") && complex.contains("#define CPLX c128"));
    }
}
