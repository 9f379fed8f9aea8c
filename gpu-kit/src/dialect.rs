//! The two dialects of the C-family kernels.

/// The language a kernel's text is rendered in. The shared text uses the names each
/// dialect's header defines (`i32`, `u64`, `f32`, `c64`; `KERNEL`, `GLOBAL`, `LOCAL`,
/// `FN`, `BARRIER()`, `GLOBAL_ID`, ...; `exp_f32`, `sqrt_f64`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// OpenCL C 1.2 and later (f64 through `cl_khr_fp64`).
    OpenCl,
    /// CUDA C++, compiled by NVRTC.
    Cuda,
}

impl Dialect {
    /// The dialect's header: its type names, qualifiers, thread indices and math names;
    /// with `fp64`, the f64 types too (on OpenCL they need `cl_khr_fp64`, so a program
    /// without f64 must not name them).
    pub fn header(self, fp64: bool) -> String {
        match self {
            Dialect::OpenCl if fp64 => {
                format!(
                    "{}{}",
                    include_str!("c/opencl.h"),
                    include_str!("c/opencl_fp64.h")
                )
            }
            Dialect::OpenCl => include_str!("c/opencl.h").to_string(),
            // CUDA always has f64.
            Dialect::Cuda => include_str!("c/cuda.h").to_string(),
        }
    }
}
