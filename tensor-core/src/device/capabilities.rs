//! [`Capabilities`]: which ops a device runs for which dtypes, computed once when the
//! device opens, so that `Device::supports` (asked on every op), the `Unsupported` errors
//! and the conformance table's "unsupported" cells all read one table.

use std::fmt;

use crate::dtype::DTypeSet;
use crate::{DataType, Error, Op};

/// For every op ([`Op::index`]), the dtypes a device runs it for: only dtypes the op is
/// defined for ([`Op::is_defined_for`]), whatever the rule says.
#[derive(Clone, PartialEq, Eq)]
pub struct Capabilities {
    sets: [DTypeSet; Op::COUNT],
}

impl Capabilities {
    /// The table of a device whose kernels run `op` for `dtype` when `runs(op, dtype)`:
    /// the rule is asked once per defined pair, here, never again.
    pub fn compute(runs: impl Fn(Op, DataType) -> bool) -> Self {
        let mut sets = [DTypeSet::EMPTY; Op::COUNT];
        for op in Op::all() {
            sets[op.index()] = DataType::ALL
                .iter()
                .copied()
                .filter(|&d| op.is_defined_for(d) && runs(op, d))
                .fold(DTypeSet::EMPTY, DTypeSet::with);
        }
        Capabilities { sets }
    }

    /// Whether the device runs `op` for `dtype`: one bit test.
    #[inline]
    pub fn supports(&self, op: Op, dtype: DataType) -> bool {
        self.sets[op.index()].contains(dtype)
    }

    /// The dtypes the device runs `op` for.
    pub fn dtypes(&self, op: Op) -> DTypeSet {
        self.sets[op.index()]
    }
}

/// How a device's float arithmetic departs from IEEE 754's (correctly rounded, with
/// gradual underflow), as WGSL and GPU drivers are allowed to: found when the device opens,
/// so that results are judged by what the device declares. The default is IEEE 754.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FloatSemantics {
    /// f32 arithmetic (and bf16's, computed in f32) flushes subnormal operands and results
    /// to zero (NVIDIA's Vulkan driver); moves keep them.
    pub flushes_subnormals: bool,
    /// Division, `sqrt` and `1/x` are within WGSL's 2.5 ulp, not correctly rounded.
    pub inexact_division: bool,
}

impl fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(Op::all().into_iter().map(|op| (op, self.dtypes(op))))
            .finish()
    }
}

impl Error {
    /// `Error::Unsupported`: `device` does not run `op` for `dtype`. The one constructor
    /// every backend uses.
    #[cold]
    pub fn unsupported(op: impl fmt::Display, dtype: DataType, device: &str) -> Error {
        Error::Unsupported {
            op: op.to_string(),
            dtype,
            device: device.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BinaryOp, UnaryOp};

    #[test]
    fn the_table_holds_what_the_rule_allows_among_defined_pairs() {
        let caps = Capabilities::compute(|op, dtype| {
            dtype != DataType::Double || op == Op::Binary(BinaryOp::Add)
        });
        assert!(caps.supports(Op::Binary(BinaryOp::Add), DataType::Double));
        assert!(!caps.supports(Op::Unary(UnaryOp::Exp), DataType::Double));
        assert!(caps.supports(Op::Unary(UnaryOp::Exp), DataType::Float));
        // Never an op for a dtype it is not defined for, whatever the rule says.
        assert!(!caps.supports(Op::Unary(UnaryOp::Exp), DataType::Int32));
        assert!(!caps.supports(Op::Fill, DataType::String));
        assert!(format!("{caps:?}").contains("Matmul"));
    }
}
