//! `std::ops` operators on tensors: tensor with tensor, owned or borrowed on either side,
//! and tensor with a Rust number on either side (`&a + 1.0`, `2.0 * &a`).
//!
//! Operators cannot fail loudly without panicking, so they return `Result<Tensor>` (as the
//! methods do): `(&a + &b)?`. A shape, dtype or device mismatch is an `Err`, never a panic.
//! A chain reads best as methods, each step with `?`: `a.mul(&b)?.sub(&c)?`.
//!
//! A number operand (an `f64` or an `i64`, so that a literal needs no suffix: `(&a * 2.0)?`)
//! takes the tensor's dtype, as a Python number does in TensorFlow and NumPy: `&ints + 2` stays int32, `&halfs * 0.5` stays f16. A number the dtype cannot hold
//! exactly (`&ints + 1.5`, `&bytes + 300` for uint8) is an `Err`, as in TensorFlow
//! ("Cannot convert 1.5 to EagerTensor of dtype int32"); float dtypes round it.

use std::ops::{Add, Div, Mul, Neg, Rem, Sub};

use super::Tensor;
use crate::element::{Element, Scalar};
use crate::error::{Error, Result};

macro_rules! binary_operator {
    ($($trait:ident :: $method:ident => $call:ident;)*) => {$(
        impl $trait<&Tensor> for &Tensor {
            type Output = Result<Tensor>;
            /// The same as the method of that name: broadcasting, `Err` on mismatch.
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                Tensor::$call(self, rhs)
            }
        }
        impl $trait<Tensor> for Tensor {
            type Output = Result<Tensor>;
            /// The same as the method of that name: broadcasting, `Err` on mismatch.
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                Tensor::$call(&self, &rhs)
            }
        }
        impl $trait<&Tensor> for Tensor {
            type Output = Result<Tensor>;
            /// The same as the method of that name: broadcasting, `Err` on mismatch.
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                Tensor::$call(&self, rhs)
            }
        }
        impl $trait<Tensor> for &Tensor {
            type Output = Result<Tensor>;
            /// The same as the method of that name: broadcasting, `Err` on mismatch.
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                Tensor::$call(self, &rhs)
            }
        }
        scalar_operator!($trait::$method => $call; f64, i64);
    )*};
}

macro_rules! scalar_operator {
    ($trait:ident :: $method:ident => $call:ident; $($number:ty),*) => {$(
        impl $trait<$number> for &Tensor {
            type Output = Result<Tensor>;
            /// The op with the number as a scalar of this tensor's dtype.
            fn $method(self, rhs: $number) -> Result<Tensor> {
                Tensor::$call(self, &self.number(rhs)?)
            }
        }
        impl $trait<$number> for Tensor {
            type Output = Result<Tensor>;
            /// The op with the number as a scalar of this tensor's dtype.
            fn $method(self, rhs: $number) -> Result<Tensor> {
                Tensor::$call(&self, &self.number(rhs)?)
            }
        }
        impl $trait<&Tensor> for $number {
            type Output = Result<Tensor>;
            /// The op with the number as a scalar of the tensor's dtype, on the left.
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                Tensor::$call(&rhs.number(self)?, rhs)
            }
        }
        impl $trait<Tensor> for $number {
            type Output = Result<Tensor>;
            /// The op with the number as a scalar of the tensor's dtype, on the left.
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                Tensor::$call(&rhs.number(self)?, &rhs)
            }
        }
    )*};
}

binary_operator! {
    Add::add => add;
    Sub::sub => sub;
    Mul::mul => mul;
    Div::div => div;
    Rem::rem => rem;
}

impl Tensor {
    /// `value` as a 0-d tensor of this tensor's dtype on its device, for a number operand:
    /// an `Err` where the dtype cannot hold it exactly (float dtypes round it).
    fn number(&self, value: impl Into<Scalar>) -> Result<Tensor> {
        let value = value.into();
        let dtype = self.dtype;
        if !dtype.is_float() && !dtype.is_complex() {
            let held = crate::dispatch_dtype!(dtype,
                T => Some(T::from_scalar(value).to_scalar()),
                _ => None);
            if held.is_none_or(|held| held.to_f64() != value.to_f64()) {
                return Err(Error::invalid(format!(
                    "Cannot convert {} to a tensor of dtype {dtype}",
                    value.to_f64()
                )));
            }
        }
        Tensor::full([0usize; 0], value, dtype, self.device())
    }
}

impl Neg for &Tensor {
    type Output = Result<Tensor>;
    /// `-x`; an `Err` for dtypes without negation.
    fn neg(self) -> Result<Tensor> {
        Tensor::neg(self)
    }
}

impl Neg for Tensor {
    type Output = Result<Tensor>;
    /// `-x`; an `Err` for dtypes without negation.
    fn neg(self) -> Result<Tensor> {
        Tensor::neg(&self)
    }
}
