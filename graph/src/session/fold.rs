//! Constant folding, grappler's `constant_folding` for a plan: the steps whose inputs all
//! come, through pure operations, from `Const`s run once when the plan is made, on the
//! devices they are placed on; the plan keeps the results of those that later steps or
//! fetches read and drops the rest. A frozen Keras model's batch norms (`Rsqrt` of the
//! variance, its product with the scale, the shift), its `Identity`s of weights and its
//! shape arithmetic then cost nothing per run.
//!
//! Only operations that give the same result on every run fold (no variable, random,
//! stateful, control-flow, collective, debugging or function-calling op), and only what the
//! plan does not feed. A result whose static shape makes it larger than
//! [`MAX_FOLDED_BYTES`] is left to run (as TensorFlow's `kMaxConstantSize`), unless it is an
//! `Identity`, which keeps no new bytes; so is a plan whose folding fails: the run then
//! reports the error as it would have.

use std::collections::BTreeSet;

use super::plan::{Plan, Source, Step};
use super::stop::Stop;
use super::Session;
use crate::graph::Node;
use crate::ops::kernels::Outputs;
use crate::ops::{Array, Kind};

/// The largest result folding keeps in a plan, in bytes (TensorFlow's 10 MiB).
pub(crate) const MAX_FOLDED_BYTES: usize = 10 << 20;

impl Session {
    /// Fold the steps of `steps` that depend on constants alone (see the module's doc);
    /// `fetches` are the plan's and `placed` the device of every node.
    pub(super) fn fold(&self, steps: &mut Vec<Step>, fetches: &[Source], placed: &[usize]) {
        let nodes = &self.graph.nodes;
        let mut foldable = vec![false; nodes.len()];
        for step in steps.iter() {
            let node = &nodes[step.node];
            foldable[step.node] = pure(step.kind)
                && step
                    .inputs
                    .iter()
                    .all(|s| matches!(*s, Source::Node { node, .. } if foldable[node]))
                && node.control_inputs.iter().all(|&c| foldable[c])
                && (aliases(step.kind) || !too_big(node));
        }
        // The folded nodes something else reads: their values stay in the plan.
        let mut kept: BTreeSet<usize> = BTreeSet::new();
        let unfolded_reads = steps
            .iter()
            .filter(|s| !foldable[s.node])
            .flat_map(|s| s.inputs.iter());
        for source in unfolded_reads.chain(fetches) {
            if let Source::Node { node, .. } = *source {
                if foldable[node] {
                    kept.insert(node);
                }
            }
        }
        // Only what the kept values need runs now.
        let mut needed = vec![false; nodes.len()];
        let mut stack: Vec<usize> = kept.iter().copied().collect();
        while let Some(node) = stack.pop() {
            if !std::mem::replace(&mut needed[node], true) {
                stack.extend(nodes[node].inputs.iter().map(|&(n, _)| n));
            }
        }
        let work: Vec<&Step> = steps.iter().filter(|s| needed[s.node]).collect();
        if work.iter().all(|s| s.kind == Kind::Const) {
            // Nothing to compute: `Const` steps already keep their decoded values.
            if steps
                .iter()
                .any(|s| foldable[s.node] && !kept.contains(&s.node))
            {
                steps.retain(|s| !foldable[s.node] || kept.contains(&s.node));
            }
            return;
        }
        let fetched: Vec<Source> = kept
            .iter()
            .flat_map(|&node| (0..nodes[node].outputs.len()).map(move |index| (node, index)))
            .map(|(node, index)| Source::Node { node, index })
            .collect();
        let plan = Plan {
            steps: work
                .iter()
                .map(|s| Step {
                    crosses: s.reads_across(placed),
                    ..Step::new(s.node, s.device, s.kind, s.inputs.clone())
                })
                .collect(),
            fetches: fetched,
            transfers: BTreeSet::new(),
            feeds: Vec::new(),
            frames: None,
            side_by_side: Vec::new(),
        };
        let Ok(values) = self.execute(&plan, &[], &Stop::default()) else {
            // The run meets the error again, where it happens.
            return;
        };
        let mut results = values.into_iter();
        let mut folded: Vec<(usize, Outputs)> = Vec::with_capacity(kept.len());
        for &node in &kept {
            let outputs = results.by_ref().take(nodes[node].outputs.len()).collect();
            folded.push((node, outputs));
        }
        steps.retain_mut(|step| {
            if !foldable[step.node] {
                return true;
            }
            let Ok(at) = folded.binary_search_by_key(&step.node, |(n, _)| *n) else {
                return false;
            };
            step.kind = Kind::Const;
            step.inputs.clear();
            step.folded = Some(std::mem::take(&mut folded[at].1));
            true
        });
    }
}

/// Whether a node of `kind` gives the same outputs for the same inputs on every run, with no
/// effect beside them.
fn pure(kind: Kind) -> bool {
    match kind {
        Kind::Array(array) => array != Array::PlaceholderWithDefault,
        Kind::Const
        | Kind::Identity
        | Kind::IdentityN
        | Kind::Binary(_)
        | Kind::Compare(_)
        | Kind::Division(_)
        | Kind::Unary(_)
        | Kind::Cast
        | Kind::Select { .. }
        | Kind::MatMul
        | Kind::BatchMatMul
        | Kind::Reduce(_)
        | Kind::Arg(_)
        | Kind::Reshape
        | Kind::Transpose
        | Kind::ExpandDims
        | Kind::Squeeze
        | Kind::Shape
        | Kind::Fill
        | Kind::Range
        | Kind::AddN
        | Kind::MakeComplex
        | Kind::ComplexPart(_)
        | Kind::Conj
        | Kind::Nn(_)
        | Kind::Logical { .. }
        | Kind::Einsum => true,
        _ => false,
    }
}

/// Whether a node of `kind` folds whatever its size: a `Const`, or an `Identity` of one,
/// whose result is its input's buffer, so that folding it keeps no new bytes (the size limit
/// is for new constants; Keras's `ReadVariableOp` of a filter of more than 10 MiB, which
/// the step after it must see as a constant to pack it).
fn aliases(kind: Kind) -> bool {
    matches!(kind, Kind::Const | Kind::Identity | Kind::IdentityN)
}

/// Whether an output of `node` is known, from its static shape, to be larger than
/// [`MAX_FOLDED_BYTES`].
fn too_big(node: &Node) -> bool {
    node.outputs.iter().any(|(dtype, shape)| {
        shape
            .num_elements()
            .is_some_and(|n| n.saturating_mul(dtype.size()) > MAX_FOLDED_BYTES)
    })
}

#[cfg(test)]
mod tests {
    use polytensor_core::{DataType, PartialTensorShape, Tensor};

    use super::super::SessionOptions;
    use super::*;
    use crate::graph::Graph;

    /// A constant of more than [`MAX_FOLDED_BYTES`] read through an `Identity` folds (the
    /// `Identity` keeps no new bytes, and the product after it sees a constant), while a
    /// computed result of that size still runs; the values are those of the graph.
    #[test]
    #[cfg_attr(miri, ignore = "a constant of 12 MiB")]
    fn identities_of_large_constants_fold_and_large_results_run() {
        let cpu = polytensor_cpu::CpuDevice::shared();
        let mut g = Graph::new();
        let x = g
            .placeholder(DataType::Float, &PartialTensorShape::unknown_rank())
            .unwrap();
        let rows = MAX_FOLDED_BYTES / 4 / 512 + 512;
        let values: Vec<f32> = (0..rows * 512).map(|i| (i % 7) as f32 - 3.0).collect();
        let weights = g.constant_values(&values, &[rows, 512]).unwrap();
        let read = g.op("Identity").input(&weights).build_output().unwrap();
        let doubled = g.add(&read, &read).unwrap();
        let product = g.matmul(&x, &read).unwrap();
        let session = Session::with_options(&g, SessionOptions::new(vec![cpu.clone()])).unwrap();
        let input = Tensor::from_slice(&vec![1f32; rows], [1, rows], &cpu).unwrap();
        let signature = session
            .signature(&[(&x, &input)], &[&product, &doubled], &[])
            .unwrap();
        let plan = session.plan(&signature).unwrap();
        let kinds: Vec<Kind> = plan.steps.iter().map(|s| s.kind).collect();
        assert!(!kinds.contains(&Kind::Identity), "{kinds:?}");
        assert!(kinds.contains(&Kind::MatMul), "{kinds:?}");
        assert!(
            kinds.iter().any(|k| matches!(k, Kind::Binary(_))),
            "the sum of 12 MiB runs: {kinds:?}"
        );
        let got = session
            .run(&[(&x, &input)], &[&product, &doubled], &[])
            .unwrap();
        let column = |j: usize| values.iter().skip(j).step_by(512).sum::<f32>();
        let product = got[0].to_vec::<f32>().unwrap();
        assert_eq!(product[..3], [column(0), column(1), column(2)]);
        let doubled = got[1].to_vec::<f32>().unwrap();
        assert_eq!(
            doubled[..3],
            [2.0 * values[0], 2.0 * values[1], 2.0 * values[2]]
        );
    }
}
