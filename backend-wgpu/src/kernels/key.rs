//! Typed cache keys of compiled pipelines: what a pipeline computes, on which dtypes, in
//! which variant. Equal keys have equal WGSL sources; `Display` gives the label shown in
//! driver messages and errors.

use std::fmt;

use polytensor_core::plan::segment::SegmentOp;
use polytensor_core::{DataType, Op, ReduceOp};

use polytensor_gpu_kit::elementwise::Variant;
use polytensor_gpu_kit::reduce::Stage;
use polytensor_gpu_kit::window::WindowKernel;

/// What an elementwise pipeline computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum MapKey {
    /// An elementwise op (or a move: copy, fill, where) on a dtype.
    Op(Op, DataType),
    /// A cast from one dtype to another.
    Cast(DataType, DataType),
}

/// A compiled pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum PipelineKey {
    /// An elementwise kernel in one of its variants.
    Map { map: MapKey, variant: Variant },
    /// The matmul of a dtype.
    Matmul(DataType),
    /// A reduction of a dtype, in one of its stages.
    Reduce(ReduceOp, DataType, Stage),
    /// A direct window kernel (convolution, pooling) of a dtype.
    Window(WindowKernel, DataType),
    /// A segment reduction of a dtype.
    Segment(SegmentOp, DataType),
    /// A pass of a row scatter of a dtype: the fill (`false`) or the scatter (`true`).
    Scatter(DataType, bool),
}

impl fmt::Display for MapKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MapKey::Op(op, dtype) => write!(f, "{op}.{dtype}"),
            MapKey::Cast(from, to) => write!(f, "cast.{from}.{to}"),
        }
    }
}

impl fmt::Display for PipelineKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PipelineKey::Map { map, variant } => write!(f, "{map}.{variant:?}"),
            PipelineKey::Matmul(dtype) => write!(f, "matmul.{dtype}"),
            PipelineKey::Reduce(op, dtype, stage) => write!(f, "reduce_{op}.{dtype}.{stage:?}"),
            PipelineKey::Window(op, dtype) => write!(f, "{}.{dtype}", op.name()),
            PipelineKey::Segment(op, dtype) => write!(f, "{}.{dtype}", op.name()),
            PipelineKey::Scatter(dtype, scatter) => write!(
                f,
                "scatter_rows.{dtype}.{}",
                if *scatter { "scatter" } else { "fill" }
            ),
        }
    }
}
