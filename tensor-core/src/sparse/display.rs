//! `Display` as TensorFlow prints a `SparseTensor`: its three components in turn.

use std::fmt;

use super::SparseTensor;

impl fmt::Display for SparseTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SparseTensor(indices={}, values={}, dense_shape={})",
            self.indices, self.values, self.dense_shape
        )
    }
}

impl fmt::Debug for SparseTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
