//! The session's remapper: a convolution, the bias or inference batch norm that alone reads
//! it, after a bias (or straight after a convolution without one) the `Mul` and `AddV2` by
//! per-channel vectors that Keras 3 writes for a batch norm (`x * scale + shift`), and the
//! residual `AddV2` that adds a tensor of the output's shape to the last (ResNet's
//! shortcut), and the `Relu`/`Relu6` that alone reads the sum,
//! become one step, as TensorFlow's grappler remapper makes `_FusedConv2D` of them. On a
//! device with direct window kernels the step is one pass over the output (the epilogue
//! applied while the block is in cache); elsewhere it runs the same ops one after another.
//! A zero `Pad` that only feeds such a `VALID` convolution becomes its padding (Keras's
//! `ZeroPadding2D` before a strided convolution). Keras's `Conv1D` (a `Squeeze` of the
//! height between the convolution and its bias) fuses the same way, the step's output
//! squeezed. Keras 3's layer normalization becomes one step ([`layer_norm`]). Fusion never
//! changes what a run returns:
//! a chain is fused only when nothing else reads or fetches the values it hides, and only
//! when all of it is placed on one device.

mod hard_swish;
mod layer_norm;

use std::collections::{HashMap, HashSet};

use polytensor_core::ops::{BinaryOp, UnaryOp};

use crate::attr::Attrs;
use crate::graph::Node;
use crate::ops::{Array, FusedConv, Kind, Nn};
use crate::session::{Source, Step};

/// Fuse the chains of `steps` (in run order) that nothing outside them reads: fetches are
/// `fetches`, and no node of a chain may be a control input of another node.
pub(crate) fn fuse(steps: &mut Vec<Step>, fetches: &[Source], nodes: &[Node]) {
    let reads = Reads::of(steps, fetches, nodes);
    let private = |node: usize| reads.private(node);
    let controls = &reads.controls;
    let mut slots: Vec<Option<Step>> = std::mem::take(steps).into_iter().map(Some).collect();
    for c in 0..slots.len() {
        let Some(conv) = &slots[c] else { continue };
        let depthwise = match conv.kind {
            Kind::Nn(Nn::Conv2D) => false,
            Kind::Nn(Nn::Depthwise) => true,
            _ => continue,
        };
        if !nhwc(&nodes[conv.node]) || !private(conv.node) {
            continue;
        }
        let conv_node = conv.node;
        let Some(b) = reader_of(&slots, conv_node) else {
            continue;
        };
        // Keras's `Conv1D`: the convolution's height of 1 squeezed away before its bias.
        // `head` is the node whose value the rest of the chain reads.
        let (head, squeeze, b) = match &slots[b] {
            Some(s)
                if s.kind == Kind::Squeeze
                    && s.device == conv.device
                    && squeezes_height(nodes, conv_node, &nodes[s.node])
                    && private(s.node) =>
            {
                let Some(next) = reader_of(&slots, s.node) else {
                    continue;
                };
                (s.node, Some(b), next)
            }
            _ => (conv_node, None, b),
        };
        let Some(follow) = &slots[b] else { continue };
        // A chain runs on one device.
        if follow.device != conv.device {
            continue;
        }
        let device = conv.device;
        // The convolution's bias, its batch norm, or (a convolution without bias) straight
        // away Keras's batch norm.
        let (norm, biased) = match follow.kind {
            Kind::Nn(Nn::BiasAdd) => (false, true),
            Kind::Nn(Nn::BatchNorm) => (true, true),
            Kind::Binary(BinaryOp::Mul) => (false, false),
            _ => continue,
        };
        if !nhwc(&nodes[follow.node])
            || controls.contains(&follow.node)
            || (norm && !inference(&nodes[follow.node]))
        {
            continue;
        }
        let follow_node = follow.node;
        // Only output 0 of the bias or batch norm may be read (by the activation, or by
        // anything when there is none).
        let others_read = (1..nodes[follow_node].outputs.len())
            .any(|i| reads.readers.contains_key(&(follow_node, i)));
        if others_read {
            continue;
        }
        // After a bias (or the convolution), Keras's batch norm: `Mul` by a per-channel
        // vector, then `AddV2` of one, each the only reader of what it follows.
        let channels = nodes[conv.node].outputs[0]
            .1
            .dims()
            .and_then(|d| *d.last()?);
        let affine = if norm {
            None
        } else {
            let by_vector = |from: usize, op: BinaryOp| {
                by_vector(&slots, nodes, &reads, from, op, device, channels)
            };
            let from = if biased { follow_node } else { head };
            by_vector(from, BinaryOp::Mul).and_then(|(m, scale)| {
                let mul = slots[m].as_ref()?.node;
                by_vector(mul, BinaryOp::Add).map(|(a, shift)| (m, a, scale, shift))
            })
        };
        // Without a bias, the product by a vector must be what reads the convolution.
        if !biased && affine.is_none_or(|(m, ..)| m != b) {
            continue;
        }
        // What the residual `AddV2` reads: the bias or batch norm, or the affine's `AddV2`.
        let tail = match affine {
            Some((_, a, ..)) => slots[a].as_ref().map_or(follow_node, |s| s.node),
            None => follow_node,
        };
        let conv_dims = static_dims(
            nodes,
            Source::Node {
                node: conv_node,
                index: 0,
            },
        );
        let residual = residual_after(&slots, &reads, nodes, tail, device, conv_dims);
        // The node the activation follows: the residual's `AddV2`, or the tail.
        let tail = match residual {
            Some((r, _)) => slots[r].as_ref().map_or(tail, |s| s.node),
            None => tail,
        };
        let activation = activation_after(&slots, &reads, tail, device);
        let (last, op) = match (activation, residual, affine) {
            (Some((a, op)), ..) => (a, Some(op)),
            (None, Some((r, _)), _) => (r, None),
            (None, None, Some((_, add, ..))) => (add, None),
            (None, None, None) => (b, None),
        };
        let Some(conv) = slots[c].take() else {
            continue;
        };
        let mut inputs = conv.inputs;
        let mut chain = vec![conv_node];
        if biased {
            if let Some(follow) = slots[b].take() {
                inputs.extend(follow.inputs.into_iter().skip(1));
                chain.push(follow_node);
            }
        }
        if let Some((m, a, scale, shift)) = affine {
            inputs.extend([scale, shift]);
            let mul = slots[m].take().map(|s| s.node);
            // The `AddV2` is the step's node unless an activation follows it.
            let add = if a == last {
                slots[a].as_ref().map(|s| s.node)
            } else {
                slots[a].take().map(|s| s.node)
            };
            chain.extend(mul.into_iter().chain(add));
        }
        if let Some((r, other)) = residual {
            inputs.push(other);
            // The residual's `AddV2` is the step's node unless an activation follows it.
            if r != last {
                chain.extend(slots[r].take().map(|s| s.node));
            }
        }
        // A zero `Pad` that only this convolution reads becomes its padding: the step reads
        // the pad's input, and its paddings last.
        let pad = match inputs[0] {
            Source::Node { node, index: 0 } if private(node) => slots
                .iter()
                .position(|s| {
                    s.as_ref().is_some_and(|s| {
                        s.node == node && s.kind == Kind::Array(Array::Pad) && s.device == device
                    })
                })
                .filter(|_| valid(&nodes[conv_node])),
            _ => None,
        };
        let padded = match pad.and_then(|p| slots[p].take()) {
            Some(pad) => {
                inputs[0] = pad.inputs[0];
                inputs.push(pad.inputs[1]);
                true
            }
            None => false,
        };
        // The squeeze goes last, so that the bias or batch norm stays second.
        chain.extend(squeeze.and_then(|q| slots[q].take()).map(|s| s.node));
        let node = match slots[last].take() {
            Some(step) => step.node,
            None => follow_node,
        };
        let kind = Kind::FusedConv(FusedConv {
            depthwise,
            norm,
            biased,
            affine: affine.is_some(),
            activation: op,
            padded,
            squeezed: squeeze.is_some(),
            residual: residual.is_some(),
        });
        slots[last] = Some(Step {
            chain,
            ..Step::new(node, device, kind, inputs)
        });
    }
    layer_norm::fuse_layer_norms(&mut slots, &reads, nodes);
    fuse_channel_affines(&mut slots, &reads, nodes);
    fuse_swishes(&mut slots, &reads, nodes);
    fuse_gelus(&mut slots, &reads, nodes);
    hard_swish::fuse_hard_swishes(&mut slots, &reads, nodes);
    *steps = slots.into_iter().flatten().collect();
}

/// Keras's swish, `x * Sigmoid(x * beta)` for a scalar `beta` (or `x * Sigmoid(x)`, SiLU),
/// becomes one [`Kind::Swish`] step where the product and the sigmoid are private to it.
fn fuse_swishes(slots: &mut [Option<Step>], reads: &Reads, nodes: &[Node]) {
    for s in 0..slots.len() {
        let Some((sigmoid_node, device, into_sigmoid)) =
            private_unary(&slots[s], reads, UnaryOp::Sigmoid)
        else {
            continue;
        };
        // What the sigmoid reads: `x * beta` (a private product by a scalar), or `x`.
        let mul = Kind::Binary(BinaryOp::Mul);
        let product = private_step(slots, reads, into_sigmoid, mul, device);
        // (the product's slot, x, beta): beta is the operand of rank 0.
        let scaled = product.and_then(|m| {
            let inputs = &slots[m].as_ref()?.inputs;
            let scalar = |i: usize| static_dims(nodes, inputs[i]).is_some_and(|d| d.is_empty());
            match inputs[..] {
                [a, b] if !scalar(0) && scalar(1) => Some((m, a, b)),
                [a, b] if scalar(0) && !scalar(1) => Some((m, b, a)),
                _ => None,
            }
        });
        let x = scaled.map_or(into_sigmoid, |(_, x, _)| x);
        let sigmoid_out = Source::Node {
            node: sigmoid_node,
            index: 0,
        };
        // The product of `x` and the sigmoid (of `x`'s shape: `beta` is a scalar).
        let Some(last) = product_of(slots, reads, device, [sigmoid_out, x]) else {
            continue;
        };
        let mut taken = Vec::new();
        let mut inputs = vec![x];
        if let Some((m, _, beta)) = scaled {
            taken.push(m);
            inputs.push(beta);
        }
        taken.push(s);
        fuse_into(slots, last, &taken, (device, Kind::Swish), inputs);
    }
}

/// Keras 3's exact GELU, `(x * 0.5) * Erfc(Neg(x) * (1/√2))` (either operand order of each
/// product), becomes one [`Kind::Gelu`] step where the four values between are private to
/// it; the constants must be those f32 values, so the step rounds as the ops do.
fn fuse_gelus(slots: &mut [Option<Step>], reads: &Reads, nodes: &[Node]) {
    for e in 0..slots.len() {
        let Some((erfc_node, device, into_erfc)) = private_unary(&slots[e], reads, UnaryOp::Erfc)
        else {
            continue;
        };
        let step_of = |source: Source, kind: Kind| private_step(slots, reads, source, kind, device);
        // The product by a scalar constant `value`: its slot and its other operand.
        let by_constant = |at: usize, value: f32| by_constant(slots, nodes, at, value);
        let mul = Kind::Binary(BinaryOp::Mul);
        let Some(scaled) = step_of(into_erfc, mul) else {
            continue;
        };
        let Some(negated) = by_constant(scaled, std::f32::consts::FRAC_1_SQRT_2) else {
            continue;
        };
        let Some(neg) = step_of(negated, Kind::Unary(UnaryOp::Neg)) else {
            continue;
        };
        let Some(&x) = slots[neg].as_ref().and_then(|t| t.inputs.first()) else {
            continue;
        };
        let erfc_out = Source::Node {
            node: erfc_node,
            index: 0,
        };
        // The last product: the erfc's value times a private `x * 0.5`.
        let last = slots.iter().position(|t| {
            t.as_ref().is_some_and(|t| {
                t.kind == mul
                    && t.device == device
                    && t.inputs.len() == 2
                    && t.inputs.contains(&erfc_out)
                    && !reads.controls.contains(&t.node)
            })
        });
        let half = last.and_then(|l| {
            let inputs = &slots[l].as_ref()?.inputs;
            let other = *inputs.iter().find(|&&i| i != erfc_out)?;
            let h = step_of(other, mul)?;
            (by_constant(h, 0.5)? == x).then_some(h)
        });
        let (Some(last), Some(half)) = (last, half) else {
            continue;
        };
        fuse_into(
            slots,
            last,
            &[half, neg, scaled, e],
            (device, Kind::Gelu),
            vec![x],
        );
    }
}

/// The step in slot `last` becomes one of `kind` on `device` reading `inputs`, under the
/// same node, with the steps of the slots `taken` emptied into its chain in that order
/// (nothing changes where `last` is empty).
fn fuse_into(
    slots: &mut [Option<Step>],
    last: usize,
    taken: &[usize],
    (device, kind): (usize, Kind),
    inputs: Vec<Source>,
) {
    let Some(node) = slots[last].as_ref().map(|t| t.node) else {
        return;
    };
    let chain = taken
        .iter()
        .filter_map(|&i| slots[i].take().map(|t| t.node))
        .collect();
    slots[last] = Some(Step {
        chain,
        ..Step::new(node, device, kind, inputs)
    });
}

/// The other operand of the binary step in slot `at` where one operand is the scalar f32
/// constant `value`.
fn by_constant(slots: &[Option<Step>], nodes: &[Node], at: usize, value: f32) -> Option<Source> {
    match slots[at].as_ref()?.inputs[..] {
        [a, b] if scalar_f32(nodes, b) == Some(value) => Some(a),
        [a, b] if scalar_f32(nodes, a) == Some(value) => Some(b),
        _ => None,
    }
}

/// The slot of the product (on `device`, waited on by no control input) of `operands`, in
/// either order.
fn product_of(
    slots: &[Option<Step>],
    reads: &Reads,
    device: usize,
    [a, b]: [Source; 2],
) -> Option<usize> {
    slots.iter().position(|t| {
        t.as_ref().is_some_and(|t| {
            t.kind == Kind::Binary(BinaryOp::Mul)
                && t.device == device
                && t.inputs.len() == 2
                && t.inputs.contains(&a)
                && t.inputs.contains(&b)
                && !reads.controls.contains(&t.node)
        })
    })
}

/// The step in `slot` if it applies `op` to one input and nothing else reads its value: its
/// node, device and input.
fn private_unary(
    slot: &Option<Step>,
    reads: &Reads,
    op: UnaryOp,
) -> Option<(usize, usize, Source)> {
    let step = slot.as_ref()?;
    let fits = step.kind == Kind::Unary(op) && step.inputs.len() == 1 && reads.private(step.node);
    fits.then(|| (step.node, step.device, step.inputs[0]))
}

/// The slot of the step of `kind` on `device` that computes `source`, a value read by that
/// one step and no control input waits on.
fn private_step(
    slots: &[Option<Step>],
    reads: &Reads,
    source: Source,
    kind: Kind,
    device: usize,
) -> Option<usize> {
    let Source::Node { node, index: 0 } = source else {
        return None;
    };
    if !reads.private(node) {
        return None;
    }
    slots.iter().position(|t| {
        t.as_ref().is_some_and(|t| {
            t.node == node
                && t.kind == kind
                && t.device == device
                && !reads.controls.contains(&t.node)
        })
    })
}

/// The value of the f32 scalar `Const` that `source` names (`None` for anything else).
fn scalar_f32(nodes: &[Node], source: Source) -> Option<f32> {
    let Source::Node { node, index: 0 } = source else {
        return None;
    };
    let node = &nodes[node];
    if &*node.op_type != "Const" || !static_dims(nodes, source).is_some_and(|d| d.is_empty()) {
        return None;
    }
    let attrs = Attrs {
        node: &node.name,
        attrs: &node.attrs,
    };
    let proto = attrs.tensor("value").ok()?;
    if polytensor_core::DataType::from_i32(proto.dtype).ok()? != polytensor_core::DataType::Float {
        return None;
    }
    match (proto.float_val.as_slice(), proto.tensor_content.as_ref()) {
        ([value], _) => Some(*value),
        ([], &[a, b, c, d]) => Some(f32::from_le_bytes([a, b, c, d])),
        _ => None,
    }
}

/// The remapper's other pattern: a batch norm in inference that no convolution precedes
/// (a densely connected or pre-activation network's, as Keras writes it: `Mul` by a
/// per-channel vector, `AddV2` of one), with the `Relu`/`Relu6` that alone reads it,
/// becomes one [`Kind::ChannelAffine`] step.
fn fuse_channel_affines(slots: &mut [Option<Step>], reads: &Reads, nodes: &[Node]) {
    for m in 0..slots.len() {
        let Some(mul) = &slots[m] else { continue };
        if mul.kind != Kind::Binary(BinaryOp::Mul)
            || mul.inputs.len() != 2
            || reads.controls.contains(&mul.node)
        {
            continue;
        }
        let (mul_node, device) = (mul.node, mul.device);
        let Some(dims) = nodes[mul_node].outputs[0].1.dims() else {
            continue;
        };
        let channels = dims.last().copied().flatten();
        let rank = dims.len();
        // The image (of the product's rank) and the per-channel scale, either way round.
        let operands = [(0, 1), (1, 0)].into_iter().find_map(|(x, v)| {
            let (x, v) = (mul.inputs[x], mul.inputs[v]);
            let image = static_dims(nodes, x).is_some_and(|d| d.len() == rank && rank >= 2);
            (image && per_channel(static_dims(nodes, v), channels)).then_some((x, v))
        });
        let Some((image, scale)) = operands else {
            continue;
        };
        let Some((a, shift)) = by_vector(
            slots,
            nodes,
            reads,
            mul_node,
            BinaryOp::Add,
            device,
            channels,
        ) else {
            continue;
        };
        let Some(add_node) = slots[a].as_ref().map(|s| s.node) else {
            continue;
        };
        let activation = activation_after(slots, reads, add_node, device);
        let last = activation.map_or(a, |(r, _)| r);
        let Some(node) = slots[last].as_ref().map(|s| s.node) else {
            continue;
        };
        slots[m] = None;
        slots[a] = None;
        let kind = Kind::ChannelAffine {
            activation: activation.map(|(_, op)| op),
        };
        slots[last] = Some(Step {
            chain: if activation.is_some() {
                vec![mul_node, add_node]
            } else {
                vec![mul_node]
            },
            ..Step::new(node, device, kind, vec![image, scale, shift])
        });
    }
}

/// Who reads what in a plan: what fusion needs to know that a value is private to a chain.
struct Reads {
    /// Readers of each output `(node, index)`, fetches included.
    readers: HashMap<(usize, usize), usize>,
    /// Reads of any output of each node.
    read_node: HashMap<usize, usize>,
    fetched: HashSet<usize>,
    /// Nodes that are a control input of another.
    controls: HashSet<usize>,
}

impl Reads {
    fn of(steps: &[Step], fetches: &[Source], nodes: &[Node]) -> Self {
        let mut readers: HashMap<(usize, usize), usize> = HashMap::new();
        let mut read_node: HashMap<usize, usize> = HashMap::new();
        for source in steps.iter().flat_map(|s| s.inputs.iter()).chain(fetches) {
            if let Source::Node { node, index } = *source {
                *readers.entry((node, index)).or_default() += 1;
                *read_node.entry(node).or_default() += 1;
            }
        }
        let fetched = fetches
            .iter()
            .filter_map(|s| match *s {
                Source::Node { node, .. } => Some(node),
                Source::Feed(_) => None,
            })
            .collect();
        let controls = nodes
            .iter()
            .flat_map(|n| n.control_inputs.iter().copied())
            .collect();
        Reads {
            readers,
            read_node,
            fetched,
            controls,
        }
    }

    /// Read only by one step, through output 0, and neither fetched nor a control input.
    fn private(&self, node: usize) -> bool {
        self.readers.get(&(node, 0)) == Some(&1)
            && self.read_node.get(&node) == Some(&1)
            && !self.fetched.contains(&node)
            && !self.controls.contains(&node)
    }
}

/// The step of `slots` that reads output 0 of `node` as its first input.
fn reader_of(slots: &[Option<Step>], node: usize) -> Option<usize> {
    slots.iter().position(|s| {
        s.as_ref().is_some_and(
            |s| matches!(s.inputs.first(), Some(Source::Node { node: n, index: 0 }) if *n == node),
        )
    })
}

/// The `AddV2` step on `device` that alone reads `node` (a private value, a convolution's
/// chain of output dims `dims`) and adds a tensor of the same static shape (a residual
/// connection): its slot and that tensor. Only a shape known but for the batch fuses: a
/// residual that would broadcast stays an op.
fn residual_after(
    slots: &[Option<Step>],
    reads: &Reads,
    nodes: &[Node],
    node: usize,
    device: usize,
    dims: Option<&[Option<usize>]>,
) -> Option<(usize, Source)> {
    if !reads.private(node) {
        return None;
    }
    // The sum reads the chain's value as either operand.
    let at = slots.iter().position(|s| {
        s.as_ref().is_some_and(|s| {
            s.inputs
                .iter()
                .any(|i| matches!(i, Source::Node { node: n, index: 0 } if *n == node))
        })
    })?;
    let step = slots[at].as_ref()?;
    if step.kind != Kind::Binary(BinaryOp::Add)
        || reads.controls.contains(&step.node)
        || step.device != device
    {
        return None;
    }
    let other = match step.inputs[..] {
        [Source::Node { node: a, .. }, b] if a == node => b,
        [a, Source::Node { node: b, .. }] if b == node => a,
        _ => return None,
    };
    if matches!(other, Source::Node { node: o, .. } if o == node) {
        return None;
    }
    let dims = dims?;
    let known = dims.len() == 4 && dims[1..].iter().all(Option::is_some);
    (known && static_dims(nodes, other) == Some(dims)).then_some((at, other))
}

/// The `Relu`/`Relu6` step on `device` that alone reads `node`, a private value: its slot
/// and op.
fn activation_after(
    slots: &[Option<Step>],
    reads: &Reads,
    node: usize,
    device: usize,
) -> Option<(usize, UnaryOp)> {
    if !reads.private(node) {
        return None;
    }
    let at = reader_of(slots, node)?;
    let step = slots[at].as_ref()?;
    match step.kind {
        Kind::Unary(op @ (UnaryOp::Relu | UnaryOp::Relu6))
            if !reads.controls.contains(&step.node) && step.device == device =>
        {
            Some((at, op))
        }
        _ => None,
    }
}

/// The static dims of what `source` names (`None` for a feed or an unknown rank).
fn static_dims(nodes: &[Node], source: Source) -> Option<&[Option<usize>]> {
    match source {
        Source::Node { node, index } => nodes[node].outputs[index].1.dims(),
        Source::Feed(_) => None,
    }
}

/// Whether `dims` are a vector of `channels` values: `[C]`, or `[1, 1, 1, C]` as Keras
/// reshapes one to broadcast it.
fn per_channel(dims: Option<&[Option<usize>]>, channels: Option<usize>) -> bool {
    channels.is_some()
        && dims.is_some_and(|v| {
            v.len() <= 4
                && v.last() == Some(&channels)
                && v[..v.len() - 1].iter().all(|&d| d == Some(1))
        })
}

/// The step (on `device`) that applies `op` (`Mul` or `AddV2`) to output 0 of `from`, a
/// private value, and a per-channel vector of `channels`: its slot and the vector's source.
fn by_vector(
    slots: &[Option<Step>],
    nodes: &[Node],
    reads: &Reads,
    from: usize,
    op: BinaryOp,
    device: usize,
    channels: Option<usize>,
) -> Option<(usize, Source)> {
    if !reads.private(from) {
        return None;
    }
    let read = Source::Node {
        node: from,
        index: 0,
    };
    let at = slots.iter().position(|s| {
        s.as_ref().is_some_and(|s| {
            s.kind == Kind::Binary(op) && s.device == device && s.inputs.contains(&read)
        })
    })?;
    let step = slots[at].as_ref()?;
    let other = *step.inputs.iter().find(|&&i| i != read)?;
    let fits = per_channel(static_dims(nodes, other), channels)
        && !reads.controls.contains(&step.node)
        && step.inputs.len() == 2;
    fits.then_some((at, other))
}

/// Whether `squeeze` drops exactly the height (axis 1, of size 1) of the NHWC output of
/// `conv`, as Keras's `Conv1D` does.
fn squeezes_height(nodes: &[Node], conv: usize, squeeze: &Node) -> bool {
    let attrs = Attrs {
        node: &squeeze.name,
        attrs: &squeeze.attrs,
    };
    let height_one = nodes[conv].outputs[0]
        .1
        .dims()
        .is_some_and(|d| d.len() == 4 && d[1] == Some(1));
    height_one
        && attrs
            .ints("squeeze_dims")
            .is_ok_and(|d| d == [1] || d == [-3])
}

/// Whether a convolution pads nothing itself (`VALID`), so a `Pad` before it can be its
/// padding.
fn valid(node: &Node) -> bool {
    let attrs = Attrs {
        node: &node.name,
        attrs: &node.attrs,
    };
    attrs.string_or("padding", "").is_ok_and(|p| p == "VALID")
}

/// Whether a node's `data_format` is NHWC (TensorFlow's default).
/// Whether batch norm `node` runs in inference (`is_training = false`): only then is it a
/// per-channel product and sum to fold into a convolution.
fn inference(node: &Node) -> bool {
    let attrs = Attrs {
        node: &node.name,
        attrs: &node.attrs,
    };
    attrs.bool_or("is_training", true).is_ok_and(|t| !t)
}

fn nhwc(node: &Node) -> bool {
    let attrs = Attrs {
        node: &node.name,
        attrs: &node.attrs,
    };
    attrs
        .string_or("data_format", "NHWC")
        .is_ok_and(|f| f == "NHWC")
}
