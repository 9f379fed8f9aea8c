//! Tensors made from a rule rather than data: `linspace` (TensorFlow's `LinSpace`) and
//! `eye` (`tf.eye`).

use std::sync::Arc;

use half::{bf16, f16};
use num_traits::Float;

use super::Tensor;
use crate::device::Device;
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::ops::BinaryOp;

impl Tensor {
    /// `num` evenly spaced values from `start` to `stop`, both included (TensorFlow's
    /// `LinSpace`): `start + i * step` with `step = (stop - start) / (num - 1)` computed in
    /// `dtype`, and the last value exactly `stop`, as TensorFlow's kernel. Half, bfloat16,
    /// float and double.
    pub fn linspace(
        start: f64,
        stop: f64,
        num: usize,
        dtype: DataType,
        device: &Arc<dyn Device>,
    ) -> Result<Tensor> {
        if num == 0 {
            return Err(Error::invalid("Requires num > 0: 0"));
        }
        // The device's memory first: a size it cannot hold is its error, before the host
        // makes the values.
        drop(Tensor::zeros([num], dtype, device)?);
        match dtype {
            DataType::Double => Tensor::from_vec(spaced::<f64>(start, stop, num), device),
            DataType::Float => Tensor::from_vec(spaced::<f32>(start, stop, num), device),
            DataType::Half => Tensor::from_vec(spaced::<f16>(start, stop, num), device),
            DataType::BFloat16 => Tensor::from_vec(spaced::<bf16>(start, stop, num), device),
            other => Err(Error::invalid(format!(
                "linspace of {other}: TensorFlow's LinSpace takes half, bfloat16, float and \
                 double"
            ))),
        }
    }

    /// The `rows x cols` identity matrix of `dtype` (ones on the main diagonal), made on the
    /// device by comparing two index ranges.
    pub fn eye(
        rows: usize,
        cols: usize,
        dtype: DataType,
        device: &Arc<dyn Device>,
    ) -> Result<Tensor> {
        // A result whose size overflows is refused before any index is made.
        super::byte_len(&crate::shape::TensorShape::new(&[rows, cols])?, dtype)?;
        let indices = if rows.max(cols) > i32::MAX as usize {
            DataType::Int64
        } else {
            DataType::Int32
        };
        let index = |n: usize| Tensor::arange(0i64, n as i64, 1i64, indices, device);
        let r = index(rows)?.reshape([rows, 1])?;
        let c = index(cols)?.reshape([1, cols])?;
        r.binary(BinaryOp::Eq, &c)?.cast(dtype)
    }
}

/// `num` values from `start` to `stop` computed in `T`, as TensorFlow's `LinSpace` kernel.
fn spaced<T: Float>(start: f64, stop: f64, num: usize) -> Vec<T> {
    let cast = |v: f64| T::from(v).unwrap_or_else(T::nan);
    let (start, stop) = (cast(start), cast(stop));
    let last = num - 1;
    let step = (stop - start) / cast(last.max(1) as f64);
    (0..num)
        .map(|i| {
            if i == last && num > 1 {
                stop
            } else {
                start + step * cast(i as f64)
            }
        })
        .collect()
}
