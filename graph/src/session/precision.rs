//! The mixed-precision pass ([`GraphOptimizations::bf16_weights`](super::GraphOptimizations),
//! oneDNN's auto mixed precision for inference): the constant weights of each f32
//! convolution and matrix product (`MatMul`, `BatchMatMulV2` by a matrix, untransposed)
//! placed on a device that multiplies bf16 natively
//! ([`Device::bf16_weights`](polytensor_core::Device::bf16_weights)) are rounded to bf16
//! once, when the plan is made; the step then reads the rounded weights, and the device
//! rounds the activations as it lays them out and sums in f32. Depthwise convolutions keep
//! f32 (they are bound by memory, not by multiply-adds). Also the packing pass
//! ([`GraphOptimizations::packed_filters`](super::GraphOptimizations)): each constant
//! filter laid out once as its device's kernel reads it.

use std::collections::HashMap;

use polytensor_core::{DataType, PackedFilter, Tensor};

use super::plan::{Plan, Source, Step};
use super::stop::Stop;
use super::Session;
use crate::attr::Attrs;
use crate::ops::{Kind, Nn, Value};

impl Session {
    /// Give each convolution and matrix product step of `steps` that takes bf16 weights its
    /// weights rounded to bf16 (see the module's doc).
    pub(super) fn round_weights(&self, steps: &mut [Step]) {
        let step_of = steps_by_node(steps);
        for at in 0..steps.len() {
            let step = &steps[at];
            let node = &self.graph.nodes[step.node];
            let attrs = Attrs {
                node: &node.name,
                attrs: &node.attrs,
            };
            let untransposed = |name| attrs.bool_or(name, false).is_ok_and(|t| !t);
            // The rank the weights must have.
            let rank = match step.kind {
                Kind::FusedConv(fused) if !fused.depthwise => 4,
                Kind::Nn(Nn::Conv2D) => 4,
                Kind::MatMul if untransposed("transpose_b") => 2,
                Kind::BatchMatMul if untransposed("adj_y") => 2,
                _ => continue,
            };
            if !self.devices[step.device].bf16_weights() {
                continue;
            }
            let Some(filter) = self.constant_weights(steps, &step_of, at) else {
                continue;
            };
            if filter.dtype() != DataType::Float || filter.rank() != rank {
                continue;
            }
            if let Ok(rounded) = filter.cast(DataType::BFloat16) {
                steps[at].weights = Some(Value::Tensor(rounded));
            }
        }
    }

    /// Lay out the constant filter of each fused convolution step (not depthwise) of
    /// `steps` as its device asks, once ([`GraphOptimizations::packed_filters`]); a step
    /// whose weights the mixed-precision pass rounded keeps those.
    ///
    /// [`GraphOptimizations::packed_filters`]: super::GraphOptimizations::packed_filters
    pub(super) fn pack_filters(&self, steps: &mut [Step]) {
        let step_of = steps_by_node(steps);
        for at in 0..steps.len() {
            let step = &steps[at];
            let fits = matches!(step.kind, Kind::FusedConv(f) if !f.depthwise);
            if !fits || step.weights.is_some() {
                continue;
            }
            let Some(filter) = self.constant_weights(steps, &step_of, at) else {
                continue;
            };
            if filter.rank() == 4 {
                steps[at].packed = PackedFilter::new(&filter).ok().flatten();
            }
        }
    }

    /// The value of input 1 (the weights) of step `at` where an earlier step of `steps`
    /// gives it as a constant.
    fn constant_weights(
        &self,
        steps: &[Step],
        step_of: &HashMap<usize, usize>,
        at: usize,
    ) -> Option<Tensor> {
        let &Source::Node { node, index } = steps[at].inputs.get(1)? else {
            return None;
        };
        let producer = *step_of.get(&node).filter(|&&producer| producer < at)?;
        self.constant_output(&steps[producer], index)
    }

    /// Output `index` of `step` where it is a constant (a `Const`, or a folded result).
    fn constant_output(&self, step: &Step, index: usize) -> Option<Tensor> {
        if let Some(folded) = &step.folded {
            return match folded.get(index) {
                Some(Value::Tensor(t)) => Some(t.clone()),
                _ => None,
            };
        }
        if step.kind != Kind::Const {
            return None;
        }
        let plan = Plan {
            steps: vec![Step::new(step.node, step.device, Kind::Const, Vec::new())],
            fetches: vec![Source::Node {
                node: step.node,
                index,
            }],
            transfers: Default::default(),
            feeds: Vec::new(),
            frames: None,
            side_by_side: Vec::new(),
        };
        match self.execute(&plan, &[], &Stop::default()).ok()?.pop()? {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }
}

/// Each node's step in `steps` (a plan runs a node once).
fn steps_by_node(steps: &[Step]) -> HashMap<usize, usize> {
    steps
        .iter()
        .enumerate()
        .map(|(at, s)| (s.node, at))
        .collect()
}
