//! `std::ops` operators on tensors.
//!
//! Operators cannot fail loudly without panicking, so they return `Result<Tensor>` (as the
//! methods do): `(&a + &b)?`. A shape, dtype or device mismatch is an `Err`, never a panic.

use std::ops::{Add, Div, Mul, Neg, Rem, Sub};

use super::Tensor;
use crate::error::Result;

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
    )*};
}

binary_operator! {
    Add::add => add;
    Sub::sub => sub;
    Mul::mul => mul;
    Div::div => div;
    Rem::rem => rem;
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
