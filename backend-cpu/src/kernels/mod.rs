//! CPU kernels, one module per op family. Each dispatches on the dtype class once and runs
//! one generic loop per class.

pub(crate) mod binary;
pub(crate) mod cast;
pub(crate) mod copy;
mod few_channels;
pub(crate) mod fill;
mod kept;
pub(crate) mod matmul;
mod mixed;
pub(crate) mod optimizer;
pub(crate) mod pool_grad;
pub(crate) mod reduce;
pub(crate) mod reduce_fast;
pub(crate) mod segment;
mod stored;
pub(crate) mod unary;
pub(crate) mod window;
mod winograd;

use std::fmt::Display;

use polytensor_core::{Error, TensorView};

/// `Error::Unsupported` for `op` on the dtype and device of `view`.
pub(crate) fn unsupported(op: impl Display, view: &TensorView<'_>) -> Error {
    Error::unsupported(op, view.dtype(), view.buffer().device().name())
}

/// Run one expression per dtype class, with a type alias bound to the element type (float,
/// int) or to the component type (complex).
macro_rules! by_class {
    ($dtype:expr,
     float $f:ident => $float:expr,
     int $i:ident => $int:expr,
     complex $c:ident => $complex:expr,
     bool => $bool:expr,
     else => $other:expr $(,)?) => {{
        use polytensor_core::DataType as D;
        match $dtype {
            D::Float => {
                type $f = f32;
                $float
            }
            D::Double => {
                type $f = f64;
                $float
            }
            D::Half => {
                type $f = half::f16;
                $float
            }
            D::BFloat16 => {
                type $f = half::bf16;
                $float
            }
            D::Int8 => {
                type $i = i8;
                $int
            }
            D::Int16 => {
                type $i = i16;
                $int
            }
            D::Int32 => {
                type $i = i32;
                $int
            }
            D::Int64 => {
                type $i = i64;
                $int
            }
            D::UInt8 => {
                type $i = u8;
                $int
            }
            D::UInt16 => {
                type $i = u16;
                $int
            }
            D::UInt32 => {
                type $i = u32;
                $int
            }
            D::UInt64 => {
                type $i = u64;
                $int
            }
            D::Complex64 => {
                type $c = f32;
                $complex
            }
            D::Complex128 => {
                type $c = f64;
                $complex
            }
            D::Bool => $bool,
            _ => $other,
        }
    }};
}
pub(crate) use by_class;

/// Data for the kernels' unit tests that compare two paths bit for bit.
#[cfg(test)]
pub(crate) mod test_data {
    use std::sync::Arc;

    use polytensor_core::{Device, Tensor};

    /// Small integers times `step` (a multiple of 1/4 for images): exact in bf16, and every
    /// product and sum exact in f32, so two kernels must give the same bits whatever the
    /// order of their sums.
    pub(crate) fn integers(dims: &[usize], seed: usize, step: f32) -> Vec<f32> {
        let n: usize = dims.iter().product();
        (0..n)
            .map(|i| (((i * 7 + seed * 13) % 9) as f32 - 4.0) * step)
            .collect()
    }

    /// A shift for each of `filters` channels (`i - 9`), as an epilogue takes it.
    pub(crate) fn shift(filters: usize, device: &Arc<dyn Device>) -> Tensor {
        let shift: Vec<f32> = (0..filters).map(|i| i as f32 - 9.0).collect();
        Tensor::from_slice(&shift, [filters], device).expect("a shift")
    }
}
