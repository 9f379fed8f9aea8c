//! TensorFlow's image resizing (`ResizeNearestNeighbor`, `ResizeBilinear`, as Keras's
//! `UpSampling2D` and `Resizing` write them) of NHWC images: the source rows and columns
//! and the interpolation weights are computed on the host as TensorFlow's kernels compute
//! them (`align_corners`, `half_pixel_centers`, in f32), and the images are gathered and
//! blended on their device.

use super::Tensor;
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::ops::BinaryOp;

/// How output positions map to input positions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResizeOptions {
    /// The corner pixels of input and output are aligned (TensorFlow's `align_corners`).
    pub align_corners: bool,
    /// Pixels are sampled at their centres (TensorFlow's `half_pixel_centers`).
    pub half_pixel_centers: bool,
}

impl ResizeOptions {
    /// TensorFlow's scale from an output of `output` to an input of `input` positions.
    fn scale(self, input: usize, output: usize) -> f32 {
        if self.align_corners && output > 1 {
            (input as f32 - 1.0) / (output as f32 - 1.0)
        } else {
            input as f32 / output as f32
        }
    }

    /// TensorFlow's refusal of both options at once.
    fn check(self) -> Result<()> {
        if self.align_corners && self.half_pixel_centers {
            return Err(Error::invalid(
                "If half_pixel_centers is True, align_corners must be False.",
            ));
        }
        Ok(())
    }
}

/// The source index of each of `output` positions for nearest-neighbour resizing.
fn nearest(input: usize, output: usize, options: ResizeOptions) -> Vec<i64> {
    let scale = options.scale(input, output);
    (0..output)
        .map(|o| {
            let at = if options.half_pixel_centers {
                (o as f32 + 0.5) * scale
            } else {
                o as f32 * scale
            };
            let at = if options.align_corners {
                at.round()
            } else {
                at.floor()
            };
            (at as i64).clamp(0, input as i64 - 1)
        })
        .collect()
}

/// For bilinear resizing, each output position's lower and upper source index and the
/// weight of the upper one.
fn bilinear(input: usize, output: usize, options: ResizeOptions) -> (Vec<i64>, Vec<i64>, Vec<f32>) {
    let scale = options.scale(input, output);
    let mut lower = Vec::with_capacity(output);
    let mut upper = Vec::with_capacity(output);
    let mut weight = Vec::with_capacity(output);
    for o in 0..output {
        let at = if options.half_pixel_centers {
            (o as f32 + 0.5) * scale - 0.5
        } else {
            o as f32 * scale
        };
        let floor = at.floor();
        lower.push((floor as i64).max(0));
        upper.push((at.ceil() as i64).min(input as i64 - 1));
        weight.push(at - floor);
    }
    (lower, upper, weight)
}

impl Tensor {
    /// The `[batch, height, width, channels]` image checked for resizing to `size`.
    fn resize_input(&self, size: [usize; 2], op: &str) -> Result<[usize; 4]> {
        let [batch, height, width, channels] = self.dims()[..] else {
            return Err(Error::invalid(format!(
                "{op}: input must be 4-dimensional{}",
                self.shape()
            )));
        };
        if size.contains(&0) {
            return Err(Error::invalid(format!(
                "{op}: output dimensions must be positive, got {size:?}"
            )));
        }
        if (height == 0 || width == 0) && batch * channels > 0 {
            return Err(Error::invalid(format!(
                "{op}: input image must be of non-zero size"
            )));
        }
        Ok([batch, height, width, channels])
    }

    /// The rows `rows` (axis 1) of this image, or its columns (axis 2).
    fn pick(&self, indices: &[i64], axis: i64) -> Result<Tensor> {
        let indices = Tensor::from_slice(indices, [indices.len()], self.device())?;
        self.gather(&indices, axis, 0)
    }

    /// TensorFlow's `ResizeNearestNeighbor` of an NHWC image to `size` (`[height, width]`):
    /// each output pixel the input pixel nearest to where it maps, in the image's dtype.
    pub fn resize_nearest(&self, size: [usize; 2], options: ResizeOptions) -> Result<Tensor> {
        options.check()?;
        let [_, height, width, _] = self.resize_input(size, "ResizeNearestNeighbor")?;
        self.pick(&nearest(height, size[0], options), 1)?
            .pick(&nearest(width, size[1], options), 2)
    }

    /// TensorFlow's `ResizeBilinear` of an NHWC image to `size` (`[height, width]`): each
    /// output pixel blended from the four input pixels around where it maps, in f32 (the
    /// op's output dtype, whatever the input's).
    pub fn resize_bilinear(&self, size: [usize; 2], options: ResizeOptions) -> Result<Tensor> {
        options.check()?;
        let [_, height, width, _] = self.resize_input(size, "ResizeBilinear")?;
        let x = self.cast(DataType::Float)?;
        let device = x.device();
        let (top, bottom, y_weight) = bilinear(height, size[0], options);
        let (left, right, x_weight) = bilinear(width, size[1], options);
        let y_weight = Tensor::from_slice(&y_weight, [1, size[0], 1, 1], device)?;
        let x_weight = Tensor::from_slice(&x_weight, [1, 1, size[1], 1], device)?;
        // TensorFlow's order: top = tl + (tr - tl) * x_lerp, the same below, then
        // top + (bottom - top) * y_lerp.
        let blend = |a: &Tensor, b: &Tensor, weight: &Tensor| -> Result<Tensor> {
            a.binary(
                BinaryOp::Add,
                &b.binary(BinaryOp::Sub, a)?.binary(BinaryOp::Mul, weight)?,
            )
        };
        // Each source row gathered once, then its two columns.
        let corners = |rows: &[i64]| -> Result<Tensor> {
            let rows = x.pick(rows, 1)?;
            blend(&rows.pick(&left, 2)?, &rows.pick(&right, 2)?, &x_weight)
        };
        blend(&corners(&top)?, &corners(&bottom)?, &y_weight)
    }
}
