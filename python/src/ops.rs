//! The eager ops of `polytensor.Tensor`: Python's operators (with NumPy broadcasting and
//! Python numbers taking the tensor's dtype, as in TensorFlow), the named elementwise ops,
//! reductions, matmul, casts and shape changes. Each runs with the GIL released.

use polytensor::{BinaryOp, ReduceOp, Scalar, Tensor, UnaryOp};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyList, PyTuple};

use crate::errors::IntoPyResult;
use crate::tensor::{parse_dtype, py_to_scalar, PyTensor};

/// The right operand of an op on `like`: a tensor as it is, a Python number as a 0-d
/// tensor of `like`'s dtype on its device, a NumPy array or list as `Tensor(x)` on that
/// device; `None` for anything else (the operator then returns `NotImplemented`).
fn operand(like: &Tensor, other: &Bound<'_, PyAny>) -> PyResult<Option<Tensor>> {
    if let Ok(t) = other.cast::<PyTensor>() {
        return Ok(Some(t.get().tensor.clone()));
    }
    if let Some(value) = py_to_scalar(other)? {
        let dtype = like.dtype();
        let fits = match value {
            Scalar::F64(_) => dtype.is_float() || dtype.is_complex(),
            Scalar::C64(_) => dtype.is_complex(),
            _ => true,
        };
        if !fits {
            return Err(PyTypeError::new_err(format!(
                "Cannot convert {} to a tensor of dtype {dtype}",
                other.repr()?
            )));
        }
        return Tensor::full([], value, dtype, like.device()).py().map(Some);
    }
    let convertible = other.is_instance_of::<PyList>()
        || other.is_instance_of::<PyTuple>()
        || other.hasattr("__array__")?
        || other.hasattr("__dlpack__")?;
    if !convertible {
        return Ok(None);
    }
    PyTensor::from_data(other, None, like.device()).map(Some)
}

impl PyTensor {
    /// `self op other`, or `other op self` when `reflected`.
    fn binary_op(
        &self,
        py: Python<'_>,
        op: BinaryOp,
        other: &Bound<'_, PyAny>,
        reflected: bool,
    ) -> PyResult<Py<PyAny>> {
        self.operator(py, other, reflected, |a, b| a.binary(op, b))
    }

    /// An operator's body: `apply(self, other)` (or `apply(other, self)` when `reflected`)
    /// with the GIL released; `NotImplemented` for an operand it cannot take.
    fn operator(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        reflected: bool,
        apply: impl Fn(&Tensor, &Tensor) -> polytensor::Result<Tensor> + Send + Sync,
    ) -> PyResult<Py<PyAny>> {
        let Some(other) = operand(&self.tensor, other)? else {
            return Ok(py.NotImplemented());
        };
        let (a, b) = if reflected {
            (&other, &self.tensor)
        } else {
            (&self.tensor, &other)
        };
        let out = py.detach(|| apply(a, b)).py()?;
        Ok(PyTensor::from(out).into_pyobject(py)?.into_any().unbind())
    }

    /// `self ** other` (or `other ** self`); the three-argument `pow` is refused.
    fn pow_op(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        modulo: Option<&Bound<'_, PyAny>>,
        reflected: bool,
    ) -> PyResult<Py<PyAny>> {
        if modulo.is_some_and(|m| !m.is_none()) {
            return Err(PyTypeError::new_err(
                "pow() with a modulus is not supported",
            ));
        }
        self.binary_op(py, BinaryOp::Pow, other, reflected)
    }

    fn matmul_op(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        reflected: bool,
    ) -> PyResult<Py<PyAny>> {
        self.operator(py, other, reflected, |a, b| a.matmul(b))
    }

    fn unary_op(&self, py: Python<'_>, op: UnaryOp) -> PyResult<PyTensor> {
        let t = &self.tensor;
        Ok(py.detach(|| t.unary(op)).py()?.into())
    }

    fn named_binary(
        &self,
        py: Python<'_>,
        op: BinaryOp,
        other: &Bound<'_, PyAny>,
    ) -> PyResult<PyTensor> {
        let other = operand(&self.tensor, other)?.ok_or_else(|| {
            PyTypeError::new_err(format!(
                "{} takes a tensor, an array or a number",
                op.name()
            ))
        })?;
        let t = &self.tensor;
        Ok(py.detach(|| t.binary(op, &other)).py()?.into())
    }

    /// A reduction over `axis` (an int, a tuple, or `None` for every axis).
    fn reduce_op(
        &self,
        py: Python<'_>,
        op: ReduceOp,
        axis: Option<&Bound<'_, PyAny>>,
        keepdims: bool,
    ) -> PyResult<PyTensor> {
        let t = &self.tensor;
        let axes: Option<Vec<isize>> = match axis {
            None => None,
            Some(a) if a.is_none() => None,
            Some(a) => Some(match a.extract::<isize>() {
                Ok(one) => vec![one],
                Err(_) => a.extract::<Vec<isize>>()?,
            }),
        };
        let out = py.detach(|| match axes {
            Some(axes) => t.reduce(op, &axes, keepdims),
            None if keepdims => {
                let every: Vec<isize> = (0..t.rank() as isize).collect();
                t.reduce(op, &every, true)
            }
            None => t.reduce_all(op),
        });
        Ok(out.py()?.into())
    }

    /// `argmax`/`argmin`: over `axis`, or over the flattened tensor for `None` (NumPy's).
    fn arg_op(&self, py: Python<'_>, op: ReduceOp, axis: Option<isize>) -> PyResult<PyTensor> {
        let t = &self.tensor;
        let out = py.detach(|| match axis {
            Some(axis) => t.reduce(op, &[axis], false),
            None => t.reshape_infer(&[-1])?.reduce(op, &[0], false),
        });
        Ok(out.py()?.into())
    }
}

/// Dims given as `f(2, 3)` or `f((2, 3))`.
fn dims_arg(args: &Bound<'_, PyTuple>) -> PyResult<Vec<i64>> {
    if args.len() == 1 {
        let first = args.get_item(0)?;
        if let Ok(one) = first.extract::<i64>() {
            return Ok(vec![one]);
        }
        return first.extract::<Vec<i64>>();
    }
    args.extract::<Vec<i64>>()
}

/// Named elementwise ops of one operand.
macro_rules! unary_methods {
    ($($name:ident => $op:ident;)*) => {
        #[pymethods]
        impl PyTensor {
            $(
                fn $name(&self, py: Python<'_>) -> PyResult<PyTensor> {
                    self.unary_op(py, UnaryOp::$op)
                }
            )*
        }
    };
}

unary_methods! {
    __neg__ => Neg; __abs__ => Abs; __invert__ => Not;
    neg => Neg; abs => Abs; sign => Sign; sqrt => Sqrt; rsqrt => Rsqrt; exp => Exp;
    log => Log; sin => Sin; cos => Cos; tanh => Tanh; sigmoid => Sigmoid; erf => Erf; erfc => Erfc;
    relu => Relu; relu6 => Relu6; floor => Floor; ceil => Ceil; round => Round;
    reciprocal => Recip; square => Square; logical_not => Not;
}

/// Named elementwise ops of two operands (broadcasting).
macro_rules! binary_methods {
    ($($name:ident => $op:ident;)*) => {
        #[pymethods]
        impl PyTensor {
            $(
                fn $name(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
                    self.named_binary(py, BinaryOp::$op, other)
                }
            )*
        }
    };
}

binary_methods! {
    add => Add; subtract => Sub; multiply => Mul; divide => Div; mod_ => Rem; pow => Pow;
    maximum => Max; minimum => Min; squared_difference => SquaredDifference;
    equal => Eq; not_equal => Ne; less => Lt; less_equal => Le; greater => Gt;
    greater_equal => Ge; logical_and => And; logical_or => Or; logical_xor => Xor;
}

/// Reductions: `t.sum()`, `t.sum(axis=1, keepdims=True)`, `t.sum((0, 1))`.
macro_rules! reduce_methods {
    ($($name:ident => $op:ident;)*) => {
        #[pymethods]
        impl PyTensor {
            $(
                #[pyo3(signature = (axis=None, keepdims=false))]
                fn $name(
                    &self,
                    py: Python<'_>,
                    axis: Option<&Bound<'_, PyAny>>,
                    keepdims: bool,
                ) -> PyResult<PyTensor> {
                    self.reduce_op(py, ReduceOp::$op, axis, keepdims)
                }
            )*
        }
    };
}

reduce_methods! {
    sum => Sum; prod => Prod; mean => Mean; max => Max; min => Min;
}

#[pymethods]
impl PyTensor {
    // Python's operators: each takes a tensor, a Python number or an array, and has its
    // reflected form (`1 - t`). (Written out: PyO3's operator slots do not expand inside
    // `macro_rules!`.)
    fn __add__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary_op(py, BinaryOp::Add, other, false)
    }

    fn __radd__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary_op(py, BinaryOp::Add, other, true)
    }

    fn __sub__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary_op(py, BinaryOp::Sub, other, false)
    }

    fn __rsub__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary_op(py, BinaryOp::Sub, other, true)
    }

    fn __mul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary_op(py, BinaryOp::Mul, other, false)
    }

    fn __rmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary_op(py, BinaryOp::Mul, other, true)
    }

    fn __truediv__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary_op(py, BinaryOp::Div, other, false)
    }

    fn __rtruediv__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary_op(py, BinaryOp::Div, other, true)
    }

    fn __mod__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary_op(py, BinaryOp::Rem, other, false)
    }

    fn __rmod__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary_op(py, BinaryOp::Rem, other, true)
    }

    fn __and__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary_op(py, BinaryOp::And, other, false)
    }

    fn __rand__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary_op(py, BinaryOp::And, other, true)
    }

    fn __or__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary_op(py, BinaryOp::Or, other, false)
    }

    fn __ror__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary_op(py, BinaryOp::Or, other, true)
    }

    fn __xor__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary_op(py, BinaryOp::Xor, other, false)
    }

    fn __rxor__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary_op(py, BinaryOp::Xor, other, true)
    }

    fn __pow__(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        modulo: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.pow_op(py, other, modulo, false)
    }

    fn __rpow__(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        modulo: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.pow_op(py, other, modulo, true)
    }

    fn __matmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.matmul_op(py, other, false)
    }

    fn __rmatmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.matmul_op(py, other, true)
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary_op(py, BinaryOp::Eq, other, false)
    }

    fn __ne__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary_op(py, BinaryOp::Ne, other, false)
    }

    fn __lt__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary_op(py, BinaryOp::Lt, other, false)
    }

    fn __le__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary_op(py, BinaryOp::Le, other, false)
    }

    fn __gt__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary_op(py, BinaryOp::Gt, other, false)
    }

    fn __ge__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary_op(py, BinaryOp::Ge, other, false)
    }

    /// Matrix product (batched over leading dims, as `tf.linalg.matmul`).
    fn matmul(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.matmul_op(py, other, false)
    }

    /// The index of the largest element over `axis` (the flattened tensor for `None`).
    #[pyo3(signature = (axis=None))]
    fn argmax(&self, py: Python<'_>, axis: Option<isize>) -> PyResult<PyTensor> {
        self.arg_op(py, ReduceOp::ArgMax, axis)
    }

    /// The index of the smallest element over `axis` (the flattened tensor for `None`).
    #[pyo3(signature = (axis=None))]
    fn argmin(&self, py: Python<'_>, axis: Option<isize>) -> PyResult<PyTensor> {
        self.arg_op(py, ReduceOp::ArgMin, axis)
    }

    /// The elements converted to `dtype` (`tf.cast`).
    fn cast(&self, py: Python<'_>, dtype: &str) -> PyResult<PyTensor> {
        let dtype = parse_dtype(dtype)?;
        let t = &self.tensor;
        Ok(py.detach(|| t.cast(dtype)).py()?.into())
    }

    /// NumPy's name for [`cast`](Self::cast).
    fn astype(&self, py: Python<'_>, dtype: &str) -> PyResult<PyTensor> {
        self.cast(py, dtype)
    }

    /// The same elements in another shape (one dim may be -1): `t.reshape(2, -1)`.
    #[pyo3(signature = (*shape))]
    fn reshape(&self, py: Python<'_>, shape: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let dims = dims_arg(shape)?;
        let t = &self.tensor;
        Ok(py.detach(|| t.reshape_infer(&dims)).py()?.into())
    }

    /// The elements as one dim.
    fn flatten(&self, py: Python<'_>) -> PyResult<PyTensor> {
        let t = &self.tensor;
        Ok(py.detach(|| t.reshape_infer(&[-1])).py()?.into())
    }

    /// The dims permuted (`t.transpose(1, 0, 2)`); reversed when none are given.
    #[pyo3(signature = (*axes))]
    fn transpose(&self, py: Python<'_>, axes: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let rank = self.tensor.rank();
        let perm: Vec<usize> = if axes.is_empty() {
            (0..rank).rev().collect()
        } else {
            dims_arg(axes)?
                .into_iter()
                .map(|a| {
                    let a = if a < 0 { a + rank as i64 } else { a };
                    usize::try_from(a).map_err(|_| {
                        pyo3::exceptions::PyValueError::new_err(format!(
                            "axis {a} is out of range for a tensor of rank {rank}"
                        ))
                    })
                })
                .collect::<PyResult<_>>()?
        };
        let t = &self.tensor;
        Ok(py.detach(|| t.permute(&perm)).py()?.into())
    }

    /// The dims reversed (a view).
    #[getter(T)]
    fn reversed_dims(&self, py: Python<'_>) -> PyResult<PyTensor> {
        let perm: Vec<usize> = (0..self.tensor.rank()).rev().collect();
        let t = &self.tensor;
        Ok(py.detach(|| t.permute(&perm)).py()?.into())
    }

    /// Remove dim `axis` (of size 1), or every dim of size 1 for `None`.
    #[pyo3(signature = (axis=None))]
    fn squeeze(&self, py: Python<'_>, axis: Option<isize>) -> PyResult<PyTensor> {
        let t = &self.tensor;
        let out = py.detach(|| match axis {
            Some(axis) => t.squeeze(axis),
            None => {
                let kept: Vec<usize> = t.dims().into_iter().filter(|&d| d != 1).collect();
                t.reshape(kept)
            }
        });
        Ok(out.py()?.into())
    }

    /// Insert a dim of size 1 at `axis` (`tf.expand_dims`).
    fn expand_dims(&self, py: Python<'_>, axis: isize) -> PyResult<PyTensor> {
        let t = &self.tensor;
        Ok(py.detach(|| t.unsqueeze(axis)).py()?.into())
    }

    /// A view broadcast to `shape` (no copy).
    #[pyo3(signature = (*shape))]
    fn broadcast_to(&self, py: Python<'_>, shape: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let dims: Vec<usize> = dims_arg(shape)?
            .into_iter()
            .map(|d| usize::try_from(d).unwrap_or(usize::MAX))
            .collect();
        let t = &self.tensor;
        Ok(py.detach(|| t.broadcast_to(dims)).py()?.into())
    }

    /// The elements in row-major order (a copy unless they already are).
    fn contiguous(&self, py: Python<'_>) -> PyResult<PyTensor> {
        let t = &self.tensor;
        Ok(py.detach(|| t.contiguous()).py()?.into())
    }

    /// Softmax over the last dim.
    fn softmax(&self, py: Python<'_>) -> PyResult<PyTensor> {
        let t = &self.tensor;
        Ok(py.detach(|| t.softmax()).py()?.into())
    }

    /// Log-softmax over the last dim.
    fn log_softmax(&self, py: Python<'_>) -> PyResult<PyTensor> {
        let t = &self.tensor;
        Ok(py.detach(|| t.log_softmax()).py()?.into())
    }
}
