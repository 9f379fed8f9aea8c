//! Keras 3's `LayerNormalization` over the last axis, as it freezes:
//!
//! ```text
//! mean  = Mean(x, [-1], keep_dims)          variance = Mean(SquaredDifference(x,
//! inv   = Rsqrt(variance + epsilon) * gamma                 StopGradient(mean)), [-1], keep_dims)
//! out   = x * inv + (Neg(mean) * inv + beta)
//! ```
//!
//! (`gamma` and `beta` each optional) becomes one [`Kind::LayerNorm`] step, as grappler's
//! remapper makes `_MklLayerNorm` of it: one pass per row instead of ten ops over the
//! tensor. Every value between is read only inside the pattern.

use polytensor_core::ops::{BinaryOp, ReduceOp, UnaryOp};

use super::{fuse_into, per_channel, private_step, scalar_f32, static_dims, Reads};
use crate::attr::Attrs;
use crate::graph::Node;
use crate::ops::Kind;
use crate::session::{Source, Step};

/// Fuse every layer normalization of `slots` (steps in run order).
pub(super) fn fuse_layer_norms(slots: &mut [Option<Step>], reads: &Reads, nodes: &[Node]) {
    for r in 0..slots.len() {
        if let Some(found) = LayerNorm::find(slots, reads, nodes, r) {
            found.replace(slots);
        }
    }
}

/// One matched pattern: the slots it covers and what the fused step reads.
struct LayerNorm {
    /// The slots of the pattern's steps but the last.
    inner: Vec<usize>,
    /// The last `AddV2`'s slot, where the fused step goes.
    last: usize,
    x: Source,
    gamma: Option<Source>,
    beta: Option<Source>,
    epsilon: f32,
    device: usize,
}

impl LayerNorm {
    /// The pattern whose `Rsqrt` is in slot `r`, if it is one.
    fn find(slots: &[Option<Step>], reads: &Reads, nodes: &[Node], r: usize) -> Option<Self> {
        // Its readers are checked below (one without gamma is read twice).
        let (rsqrt, device, into_rsqrt) = unary_step(&slots[r], UnaryOp::Rsqrt)?;
        let step_of = |source: Source, kind: Kind| private_step(slots, reads, source, kind, device);
        let inputs = |slot: usize| slots[slot].as_ref().map(|s| s.inputs.as_slice());
        let out = |slot: usize| slots[slot].as_ref().map(|s| output(s.node));
        // variance + epsilon
        let add = step_of(into_rsqrt, Kind::Binary(BinaryOp::Add))?;
        let (variance, epsilon) = match *inputs(add)? {
            [v, e] if scalar_f32(nodes, e).is_some() => (v, scalar_f32(nodes, e)?),
            [e, v] if scalar_f32(nodes, e).is_some() => (v, scalar_f32(nodes, e)?),
            _ => return None,
        };
        let variance = step_of(variance, Kind::Reduce(ReduceOp::Mean))?;
        let difference = step_of(
            *inputs(variance)?.first()?,
            Kind::Binary(BinaryOp::SquaredDifference),
        )?;
        let [x, centre] = *inputs(difference)? else {
            return None;
        };
        // The mean, through a `StopGradient` (or `Identity`) or not.
        let stop = step_of(centre, Kind::Identity);
        let mean_out = match stop {
            Some(s) => *inputs(s)?.first()?,
            None => centre,
        };
        let mean = slot_of(slots, mean_out, Kind::Reduce(ReduceOp::Mean), device)?;
        // The rank, where known (the mean keeps `x`'s), and the columns: `x`'s last dim, or
        // where that is unknown the length of `gamma` or `beta` (checked when it runs).
        let rank = static_dims(nodes, x)
            .or_else(|| static_dims(nodes, mean_out))
            .map(<[_]>::len);
        let columns = static_dims(nodes, x).and_then(|d| *d.last()?);
        let over_last = |slot: usize| {
            slots[slot]
                .as_ref()
                .is_some_and(|s| reduces_last_axis(nodes, s, rank))
        };
        if inputs(mean)?.first() != Some(&x) || !over_last(mean) || !over_last(variance) {
            return None;
        }
        // `inv`: the rsqrt, or its product by gamma.
        let rsqrt_out = output(rsqrt);
        let rsqrt_readers = readers(slots, reads, rsqrt_out)?;
        let (gamma, scale_slot, scale) = match rsqrt_readers[..] {
            [m] => {
                let columns = columns.or_else(|| vector_length(slots, nodes, m, rsqrt_out));
                let gamma =
                    vector_operand(slots, nodes, (m, device), BinaryOp::Mul, rsqrt_out, columns)?;
                (Some(gamma), Some(m), out(m)?)
            }
            _ => (None, None, rsqrt_out),
        };
        // x * inv, and Neg(mean) * inv.
        let [p, q] = readers(slots, reads, scale)?[..] else {
            return None;
        };
        let neg = slots.iter().position(|s| {
            s.as_ref().is_some_and(|s| {
                s.kind == Kind::Unary(UnaryOp::Neg) && s.device == device && s.inputs == [mean_out]
            })
        })?;
        let neg_out = out(neg)?;
        let product_of = |slot: usize, operand: Source| {
            let step = slots[slot].as_ref()?;
            let fits = step.kind == Kind::Binary(BinaryOp::Mul)
                && step.device == device
                && step.inputs.len() == 2
                && step.inputs.contains(&scale)
                && step.inputs.contains(&operand);
            fits.then_some(slot)
        };
        let (scaled, shifted) = match (product_of(p, x), product_of(q, neg_out)) {
            (Some(a), Some(b)) => (a, b),
            _ => (product_of(q, x)?, product_of(p, neg_out)?),
        };
        // Neg(mean) * inv + beta, or without beta; then the sum.
        let shifted_out = out(shifted)?;
        let after_shift = single_reader(slots, reads, shifted_out)?;
        let columns = columns.or_else(|| vector_length(slots, nodes, after_shift, shifted_out));
        let plus_beta = vector_operand(
            slots,
            nodes,
            (after_shift, device),
            BinaryOp::Add,
            shifted_out,
            columns,
        )
        .filter(|&b| b != out(scaled).unwrap_or(b));
        let (beta, shift_slot, shift) = match plus_beta {
            Some(beta) => (Some(beta), Some(after_shift), out(after_shift)?),
            None => (None, None, shifted_out),
        };
        let last = single_reader(slots, reads, shift)?;
        let sum = slots[last].as_ref()?;
        let scaled_out = out(scaled)?;
        let fits = sum.kind == Kind::Binary(BinaryOp::Add)
            && sum.device == device
            && sum.inputs.len() == 2
            && sum.inputs.contains(&scaled_out)
            && sum.inputs.contains(&shift)
            && single_reader(slots, reads, scaled_out) == Some(last);
        if !fits {
            return None;
        }
        // Every value inside is read only inside: the mean by the difference (or its
        // `StopGradient`) and the `Neg`.
        let mean_readers = readers(slots, reads, mean_out)?;
        let inside_mean = [stop.unwrap_or(difference), neg];
        if mean_readers.len() != 2 || !mean_readers.iter().all(|r| inside_mean.contains(r)) {
            return None;
        }
        if single_reader(slots, reads, neg_out) != Some(shifted) {
            return None;
        }
        let mut inner = vec![mean, difference, variance, add, r, neg, scaled, shifted];
        inner.extend(stop);
        inner.extend(scale_slot);
        inner.extend(shift_slot);
        let controlled = inner.iter().chain([&last]).any(|&s| {
            slots[s]
                .as_ref()
                .is_none_or(|s| reads.controls.contains(&s.node))
        });
        if controlled {
            return None;
        }
        Some(LayerNorm {
            inner,
            last,
            x,
            gamma,
            beta,
            epsilon,
            device,
        })
    }

    /// Put the fused step in the last slot and empty the others.
    fn replace(self, slots: &mut [Option<Step>]) {
        let mut inputs = vec![self.x];
        inputs.extend(self.gamma);
        inputs.extend(self.beta);
        let kind = Kind::LayerNorm {
            epsilon: self.epsilon,
            gamma: self.gamma.is_some(),
            beta: self.beta.is_some(),
        };
        fuse_into(slots, self.last, &self.inner, (self.device, kind), inputs);
    }
}

/// Output 0 of `node`.
fn output(node: usize) -> Source {
    Source::Node { node, index: 0 }
}

/// The step in `slot` if it applies `op` to one input (whoever reads it): its node, device
/// and input.
fn unary_step(slot: &Option<Step>, op: UnaryOp) -> Option<(usize, usize, Source)> {
    let step = slot.as_ref()?;
    (step.kind == Kind::Unary(op) && step.inputs.len() == 1)
        .then(|| (step.node, step.device, step.inputs[0]))
}

/// The slot of the step of `kind` on `device` that computes `source`.
fn slot_of(slots: &[Option<Step>], source: Source, kind: Kind, device: usize) -> Option<usize> {
    let Source::Node { node, index: 0 } = source else {
        return None;
    };
    slots.iter().position(|s| {
        s.as_ref()
            .is_some_and(|s| s.node == node && s.kind == kind && s.device == device)
    })
}

/// The slots of every step that reads `source` (output 0 of a node), when those are all
/// its readers: it is not fetched, no other output of its node is read, and it is no
/// control input.
fn readers(slots: &[Option<Step>], reads: &Reads, source: Source) -> Option<Vec<usize>> {
    let Source::Node { node, index: 0 } = source else {
        return None;
    };
    let uses = |s: &Step| s.inputs.iter().filter(|&&i| i == source).count();
    let found: Vec<usize> = (0..slots.len())
        .filter(|&i| slots[i].as_ref().is_some_and(|s| uses(s) > 0))
        .collect();
    let counted: usize = found
        .iter()
        .filter_map(|&i| slots[i].as_ref().map(uses))
        .sum();
    let all = reads.readers.get(&(node, 0)) == Some(&counted)
        && reads.read_node.get(&node) == Some(&counted)
        && !reads.fetched.contains(&node)
        && !reads.controls.contains(&node);
    all.then_some(found)
}

/// The one step that reads `source`, when it is its only reader.
fn single_reader(slots: &[Option<Step>], reads: &Reads, source: Source) -> Option<usize> {
    match readers(slots, reads, source)?[..] {
        [one] => Some(one),
        _ => None,
    }
}

/// The other operand of the `op` step in `slot` (on `device`) that reads `from`, when it is
/// a vector of `columns` values (`[C]`, or ones before it).
fn vector_operand(
    slots: &[Option<Step>],
    nodes: &[Node],
    (slot, device): (usize, usize),
    op: BinaryOp,
    from: Source,
    columns: Option<usize>,
) -> Option<Source> {
    let step = slots[slot].as_ref()?;
    if step.kind != Kind::Binary(op) || step.inputs.len() != 2 || step.device != device {
        return None;
    }
    let other = *step.inputs.iter().find(|&&i| i != from)?;
    per_channel(static_dims(nodes, other), columns).then_some(other)
}

/// The last dim of the other operand of the step in `slot` that reads `from`, when it is
/// more than 1 (a per-column vector's length, where the tensor's is not known statically).
fn vector_length(
    slots: &[Option<Step>],
    nodes: &[Node],
    slot: usize,
    from: Source,
) -> Option<usize> {
    let step = slots[slot].as_ref()?;
    let other = *step.inputs.iter().find(|&&i| i != from)?;
    static_dims(nodes, other)?
        .last()
        .copied()
        .flatten()
        .filter(|&c| c > 1)
}

/// Whether the `Mean` step reduces the last axis (`-1`, or `rank - 1` where the rank is
/// known) and keeps it.
fn reduces_last_axis(nodes: &[Node], step: &Step, rank: Option<usize>) -> bool {
    let node = &nodes[step.node];
    let attrs = Attrs {
        node: &node.name,
        attrs: &node.attrs,
    };
    let Some(&Source::Node {
        node: axes,
        index: 0,
    }) = step.inputs.get(1)
    else {
        return false;
    };
    let axes = &nodes[axes];
    let values = (&*axes.op_type == "Const")
        .then(|| {
            let attrs = Attrs {
                node: &axes.name,
                attrs: &axes.attrs,
            };
            crate::ops::infer::proto_ints(attrs.tensor("value").ok()?)
        })
        .flatten();
    let last = rank.map(|r| r as i64 - 1);
    attrs.bool_or("keep_dims", false).unwrap_or(false)
        && matches!(values.as_deref(), Some(&[a]) if a == -1 || Some(a) == last)
}
