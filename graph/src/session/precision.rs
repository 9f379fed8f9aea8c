//! The mixed-precision pass ([`GraphOptimizations::bf16_weights`](super::GraphOptimizations),
//! oneDNN's auto mixed precision for inference): the constant filter of each f32
//! convolution placed on a device that multiplies bf16 natively
//! ([`Device::bf16_weights`](polytensor_core::Device::bf16_weights)) is rounded to bf16 once,
//! when the plan is made; the step then reads the rounded filter, and the device rounds the
//! activations as it packs them and sums in f32. Depthwise convolutions keep f32 (they are
//! bound by memory, not by multiply-adds).

use polytensor_core::{DataType, Tensor};

use super::plan::{Plan, Source, Step};
use super::stop::Stop;
use super::Session;
use crate::ops::{Kind, Nn, Value};

impl Session {
    /// Give each convolution step of `steps` that takes bf16 weights its filter rounded to
    /// bf16 (see the module's doc).
    pub(super) fn round_weights(&self, steps: &mut [Step]) {
        for at in 0..steps.len() {
            let step = &steps[at];
            let convolves = match step.kind {
                Kind::FusedConv(fused) => !fused.depthwise,
                Kind::Nn(op) => op == Nn::Conv2D,
                _ => false,
            };
            if !convolves || !self.devices[step.device].bf16_weights() {
                continue;
            }
            let Some(&Source::Node { node, index }) = step.inputs.get(1) else {
                continue;
            };
            let Some(filter) = steps[..at]
                .iter()
                .find(|s| s.node == node)
                .and_then(|producer| self.constant_output(producer, index))
            else {
                continue;
            };
            if filter.dtype() != DataType::Float || filter.rank() != 4 {
                continue;
            }
            if let Ok(rounded) = filter.cast(DataType::BFloat16) {
                steps[at].weights = Some(Value::Tensor(rounded));
            }
        }
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
        };
        match self.execute(&plan, &[], &Stop::default()).ok()?.pop()? {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }
}
