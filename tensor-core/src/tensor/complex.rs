//! Complex numbers from and to their parts: TensorFlow's `Complex`, `Real`, `Imag`, `Conj`,
//! `Angle` and `ComplexAbs`.
//!
//! None of these needs a kernel of its own. A complex tensor bitcast to its real dtype is a
//! view with an innermost dim of 2 (real, imaginary), so the parts are strided views of it,
//! and the other ops are one elementwise kernel that every device already has (`where`,
//! `mul`, `log`) over that view. Every device that holds complex tensors runs them, with the
//! same numbers.

use super::Tensor;
use crate::dtype::DataType;
use crate::error::{Error, Result};
use crate::ops::broadcast_shapes;

/// The complex dtype whose parts are `dtype` (`float32` -> `complex64`), as TensorFlow's
/// `Complex` allows: float32 and float64 only.
fn complex_of(dtype: DataType) -> Result<DataType> {
    match dtype {
        DataType::Float => Ok(DataType::Complex64),
        DataType::Double => Ok(DataType::Complex128),
        other => Err(Error::DTypeMismatch {
            op: "complex",
            expected: "float32 or float64 parts".into(),
            found: other,
        }),
    }
}

impl Tensor {
    /// `real + i * imag` (TensorFlow's `Complex`): float32 parts give complex64, float64
    /// parts complex128; both parts of one dtype, broadcast together (NumPy's rules).
    ///
    /// ```
    /// # use polytensor_core::{DataType, Tensor};
    /// # let cpu = polytensor_cpu::CpuDevice::shared();
    /// let re = Tensor::from_slice(&[1.0f32, 2.0], [2], &cpu)?;
    /// let im = Tensor::from_slice(&[-3.0f32], [1], &cpu)?;
    /// let z = Tensor::complex(&re, &im)?;
    /// assert_eq!(z.dtype(), DataType::Complex64);
    /// assert_eq!(z.imag()?.to_vec::<f32>()?, [-3.0, -3.0]);
    /// # Ok::<(), polytensor_core::Error>(())
    /// ```
    pub fn complex(real: &Tensor, imag: &Tensor) -> Result<Tensor> {
        let complex = complex_of(real.dtype)?;
        if imag.dtype != real.dtype {
            return Err(Error::DTypeMismatch {
                op: "complex",
                expected: real.dtype.to_string(),
                found: imag.dtype,
            });
        }
        let shape = broadcast_shapes(real.shape(), imag.shape())?;
        // [shape.., 2] of parts: the real part where the innermost index is 0.
        let first = Tensor::from_slice(&[true, false], [2], real.device())?;
        let parts = |t: &Tensor| t.broadcast_to(&shape)?.unsqueeze(-1);
        first.where_(&parts(real)?, &parts(imag)?)?.bitcast(complex)
    }

    /// The real part (TensorFlow's `Real`, NumPy's `.real`): for a complex tensor a strided
    /// view of its buffer (no copy); other dtypes are their own real part.
    pub fn real(&self) -> Result<Tensor> {
        self.part(0)
    }

    /// The imaginary part (TensorFlow's `Imag`): for a complex tensor a strided view of its
    /// buffer (no copy); zeros for other dtypes.
    pub fn imag(&self) -> Result<Tensor> {
        if self.dtype.is_complex() {
            self.part(1)
        } else {
            Tensor::zeros(self.shape(), self.dtype, self.device())
        }
    }

    /// The complex conjugate, `re - i * im` (TensorFlow's `Conj`); other dtypes are their
    /// own conjugate.
    pub fn conj(&self) -> Result<Tensor> {
        if !self.dtype.is_complex() {
            return Ok(self.clone());
        }
        // The real part is copied and only the imaginary part negated, so that every bit
        // of the real part survives: a multiplication by (1, -1) would give CUDA's
        // canonical NaN for a NaN with a payload.
        Tensor::complex(&self.real()?, &self.imag()?.neg()?)
    }

    /// The argument of each complex number, `atan2(im, re)` in `[-pi, pi]` (TensorFlow's
    /// `Angle`; signed zeros as `atan2` has them): float32 for complex64, float64 for
    /// complex128. Computed as the imaginary part of the complex `log`, whose kernels take
    /// it from `atan2` on every device. Other dtypes are an `Err`, as for TensorFlow's op.
    pub fn angle(&self) -> Result<Tensor> {
        if !self.dtype.is_complex() {
            return Err(Error::DTypeMismatch {
                op: "angle",
                expected: "complex64 or complex128".into(),
                found: self.dtype,
            });
        }
        self.log()?.imag()
    }

    /// The modulus `|z|` of each complex number (TensorFlow's `ComplexAbs`; the same as
    /// [`Tensor::abs`], which gives the real dtype for complex inputs).
    pub fn complex_abs(&self) -> Result<Tensor> {
        self.abs()
    }

    /// Part `index` (0 real, 1 imaginary) of a complex tensor as a view; a non-complex
    /// tensor is its own real part.
    fn part(&self, index: usize) -> Result<Tensor> {
        if !self.dtype.is_complex() {
            return Ok(self.clone());
        }
        self.bitcast(self.dtype.real_dtype())?
            .narrow(-1, index, 1)?
            .squeeze(-1)
    }
}
