//! Keras's hard swish (MobileNetV3's activation), as it freezes:
//!
//! ```text
//! out = x * (Relu6(x + 3) / 6)          (or `* (1/6)` for the division)
//! ```
//!
//! (either operand order of the sum and the products) becomes one [`Kind::HardSwish`]
//! step where the three values between are private to it: one pass over the tensor instead
//! of four. The constants must be those f32 values, so the step rounds as the ops do.
//! The hard sigmoid of a squeeze-excite block (`se * (Relu6(x + 3) / 6)`, the product by
//! another tensor) is left as its ops: it runs on a vector per image.

use polytensor_core::ops::{BinaryOp, UnaryOp};

use super::{by_constant, fuse_into, private_step, private_unary, product_of, scalar_f32, Reads};
use crate::graph::Node;
use crate::ops::{Division, Kind};
use crate::session::{Source, Step};

/// Fuse every hard swish of `slots` (steps in run order).
pub(super) fn fuse_hard_swishes(slots: &mut [Option<Step>], reads: &Reads, nodes: &[Node]) {
    let add = Kind::Binary(BinaryOp::Add);
    let (mul, div) = (Kind::Binary(BinaryOp::Mul), Kind::Division(Division::Real));
    for r in 0..slots.len() {
        let Some((relu6_node, device, into_relu6)) =
            private_unary(&slots[r], reads, UnaryOp::Relu6)
        else {
            continue;
        };
        // `x + 3`, private to the `Relu6`.
        let Some(sum) = private_step(slots, reads, into_relu6, add, device) else {
            continue;
        };
        let Some(x) = by_constant(slots, nodes, sum, 3.0) else {
            continue;
        };
        // The `Relu6`'s value divided by 6 (or times 1/6), private to the last product.
        let relu6_out = Source::Node {
            node: relu6_node,
            index: 0,
        };
        let gate = slots.iter().position(|t| {
            t.as_ref().is_some_and(|t| {
                (t.kind == div || t.kind == mul)
                    && t.device == device
                    && t.inputs.len() == 2
                    && t.inputs.contains(&relu6_out)
                    && reads.private(t.node)
                    && !reads.controls.contains(&t.node)
            })
        });
        let Some((gate, divide)) = gate.and_then(|g| {
            let step = slots[g].as_ref()?;
            let divide = step.kind == div;
            let constant = if divide { 6.0 } else { 1.0 / 6.0 };
            let other = *step.inputs.iter().find(|&&i| i != relu6_out)?;
            let ordered = !divide || step.inputs[0] == relu6_out;
            (ordered && scalar_f32(nodes, other) == Some(constant)).then_some((g, divide))
        }) else {
            continue;
        };
        let Some(gate_node) = slots[gate].as_ref().map(|t| t.node) else {
            continue;
        };
        let gate_out = Source::Node {
            node: gate_node,
            index: 0,
        };
        // `x` times the gate: where the fused step goes.
        let Some(last) = product_of(slots, reads, device, [gate_out, x]) else {
            continue;
        };
        fuse_into(
            slots,
            last,
            &[sum, r, gate],
            (device, Kind::HardSwish { divide }),
            vec![x],
        );
    }
}
