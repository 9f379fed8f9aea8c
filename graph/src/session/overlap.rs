//! Independent branches side by side (TensorFlow's executor runs every ready node on its
//! inter-op pool): Inception's towers, ResNet's shortcut beside its first convolution,
//! attention's query, key and value. At a small batch a convolution or a matmul splits its
//! rows across the threads poorly, so two of them at once keep the cores busier than each
//! alone.
//!
//! The plan's steps are ranked by depth (a step's depth is one more than its deepest
//! producer's, through data and control inputs and the inputs of a fused chain): steps of
//! one depth never read each other. Where a depth holds two or more heavy steps (a
//! convolution, a matmul) on a CPU device, the plan is reordered by depth, those steps
//! made contiguous, and their range run on the thread pool together, each kernel's own
//! parallel loops nested in it (one pool, no extra threads: the cores are not
//! oversubscribed). Everything else runs in order, as before; a plan without such a depth,
//! or with steps whose effects go beyond their outputs (variables, calls, collectives,
//! prints), keeps its order.

use std::collections::HashMap;
use std::ops::Range;

use polytensor_core::device::DeviceKind;

use super::{Session, Source, Step};
use crate::graph::Node;
use crate::ops::{Kind, Nn};

impl Session {
    /// Reorder `steps` so that the heavy steps of each depth that has two or more are
    /// contiguous, and return their ranges (in order); `steps` unchanged and no range where
    /// no depth has two.
    pub(super) fn overlap(&self, steps: &mut Vec<Step>, nodes: &[Node]) -> Vec<Range<usize>> {
        // Steps with effects beyond their outputs (variables, seeded random streams, calls,
        // collectives, prints and asserts) keep the plan's order among them: such a plan
        // is not reordered.
        let effects = steps.iter().any(|step| {
            super::plan::touches_variables(step.kind)
                || matches!(
                    step.kind,
                    Kind::Call(_)
                        | Kind::Collective(_)
                        | Kind::Debug(_)
                        | Kind::Saver(_)
                        | Kind::Table(_)
                )
        });
        if effects {
            return Vec::new();
        }
        let depth = depths(steps, nodes);
        let side_by_side: Vec<bool> = steps
            .iter()
            .map(|step| self.runs_side_by_side(step, nodes))
            .collect();
        let mut heavy_at: HashMap<usize, usize> = HashMap::new();
        for (at, step_depth) in depth.iter().enumerate() {
            if side_by_side[at] {
                *heavy_at.entry(*step_depth).or_default() += 1;
            }
        }
        let grouped = |at: usize| side_by_side[at] && heavy_at[&depth[at]] >= 2;
        if !(0..steps.len()).any(grouped) {
            return Vec::new();
        }
        // By depth, each depth's grouped steps last; otherwise as planned.
        let mut order: Vec<usize> = (0..steps.len()).collect();
        order.sort_by_key(|&at| (depth[at], grouped(at), at));
        let mut ranges: Vec<Range<usize>> = Vec::new();
        for (position, &at) in order.iter().enumerate() {
            if !grouped(at) {
                continue;
            }
            match ranges.last_mut() {
                Some(range) if range.end == position && depth[order[range.start]] == depth[at] => {
                    range.end += 1
                }
                _ => ranges.push(position..position + 1),
            }
        }
        let mut slots: Vec<Option<Step>> = std::mem::take(steps).into_iter().map(Some).collect();
        *steps = order.iter().filter_map(|&at| slots[at].take()).collect();
        ranges
    }

    /// Whether `step` may run beside others of its depth: a convolution or a matmul on a
    /// CPU device that reads no reference variable (a variable's lock orders its readers)
    /// and whose value was not folded into the plan.
    fn runs_side_by_side(&self, step: &Step, nodes: &[Node]) -> bool {
        let heavy = matches!(
            step.kind,
            Kind::MatMul
                | Kind::BatchMatMul
                | Kind::Einsum
                | Kind::FusedConv(_)
                | Kind::Nn(Nn::Conv2D | Nn::Depthwise)
        );
        let reads_reference = step.inputs.iter().any(|input| match *input {
            Source::Node { node, .. } => matches!(
                nodes[node].kind,
                Kind::RefVariable | Kind::RefAssign | Kind::RefAssignAdd
            ),
            Source::Feed(_) => false,
        });
        heavy
            && step.folded.is_none()
            && !reads_reference
            && self.devices[step.device].kind() == DeviceKind::CPU
    }
}

/// Each step's depth: 0 for a step that reads no other step, else one more than the
/// deepest step it reads (data inputs, control inputs, and those of its fused chain).
fn depths(steps: &[Step], nodes: &[Node]) -> Vec<usize> {
    let mut step_of: HashMap<usize, usize> = HashMap::new();
    for (at, step) in steps.iter().enumerate() {
        step_of.insert(step.node, at);
        for &node in &step.chain {
            step_of.insert(node, at);
        }
    }
    let mut depth = vec![0usize; steps.len()];
    for (at, step) in steps.iter().enumerate() {
        let data = step.inputs.iter().filter_map(|input| match *input {
            Source::Node { node, .. } => Some(node),
            Source::Feed(_) => None,
        });
        let members = std::iter::once(step.node).chain(step.chain.iter().copied());
        let around = members.flat_map(|member| {
            let n = &nodes[member];
            n.control_inputs
                .iter()
                .copied()
                .chain(n.inputs.iter().map(|&(node, _)| node))
        });
        depth[at] = data
            .chain(around)
            .filter_map(|node| step_of.get(&node).copied())
            .filter(|&producer| producer < at)
            .map(|producer| depth[producer] + 1)
            .max()
            .unwrap_or(0);
    }
    depth
}

#[cfg(test)]
mod tests {
    use polytensor_core::{DataType, PartialTensorShape, Tensor};

    use super::super::{GraphOptimizations, SessionOptions};
    use super::*;
    use crate::graph::{Graph, Output};

    /// `x @ w1 + x @ w2` (each product a branch of its own), the second product after the
    /// first by a control input where `ordered`; the graph and its input and output.
    fn two_branches(ordered: bool) -> (Graph, Output, Output) {
        let mut g = Graph::new();
        let x = g
            .placeholder(DataType::Float, &PartialTensorShape::unknown_rank())
            .unwrap();
        let values: Vec<f32> = (0..64).map(|i| (i as f32 * 0.37).sin()).collect();
        let w1 = g.constant_values(&values, &[8, 8]).unwrap();
        let w2 = g.constant_values(&values[..32], &[8, 4]).unwrap();
        let w3 = g.constant_values(&values[32..], &[4, 8]).unwrap();
        let first = g.matmul(&x, &w1).unwrap();
        let mut second = g.op("MatMul").input(&x).input(&w2);
        if ordered {
            second = second.control_input(first.op());
        }
        let second = second.build_output().unwrap();
        // A third product below the second: a depth of its own.
        let third = g.matmul(&second, &w3).unwrap();
        let total = g.add(&first, &third).unwrap();
        (g, x, total)
    }

    fn session(g: &Graph, parallel_branches: bool) -> Session {
        let cpu = polytensor_cpu::CpuDevice::shared();
        let mut options = SessionOptions::new(vec![cpu]);
        options.optimizations = GraphOptimizations {
            parallel_branches,
            ..GraphOptimizations::default()
        };
        Session::with_options(g, options).unwrap()
    }

    /// The two products of one depth run side by side, the third (deeper) and the sum in
    /// order after them; a control input between the two keeps them apart; either way the
    /// results have the bits of the plan run in order.
    #[test]
    fn independent_products_run_side_by_side_with_the_same_bits() {
        let cpu = polytensor_cpu::CpuDevice::shared();
        let input: Vec<f32> = (0..48).map(|i| (i as f32 * 0.11).cos()).collect();
        let input = Tensor::from_slice(&input, [6, 8], &cpu).unwrap();
        for ordered in [false, true] {
            let (g, x, total) = two_branches(ordered);
            let together = session(&g, true);
            let signature = together.signature(&[(&x, &input)], &[&total], &[]).unwrap();
            let plan = together.plan(&signature).unwrap();
            let kinds = |range: &Range<usize>| -> Vec<Kind> {
                plan.steps[range.clone()].iter().map(|s| s.kind).collect()
            };
            let ranges: Vec<Vec<Kind>> = plan.side_by_side.iter().map(kinds).collect();
            if ordered {
                assert!(ranges.is_empty(), "{ranges:?}");
            } else {
                assert_eq!(ranges, [vec![Kind::MatMul, Kind::MatMul]]);
            }
            let got = together.run(&[(&x, &input)], &[&total], &[]).unwrap();
            let want = session(&g, false)
                .run(&[(&x, &input)], &[&total], &[])
                .unwrap();
            assert_eq!(
                got[0].to_vec::<f32>().unwrap(),
                want[0].to_vec::<f32>().unwrap()
            );
        }
    }
}
