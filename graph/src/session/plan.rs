//! A session's plans: the steps one signature (feeds, fetches, targets) runs, in an order
//! where inputs come first, each input's source, the copies between devices, fusion and
//! the frames of 1.x control flow.

use std::collections::{BTreeSet, HashMap};

use polytensor_core::Result;

use super::{Session, Signature};
use crate::frames::Frames;
use crate::ops::Kind;

/// The operations one signature runs, in an order where inputs come first, and for each
/// input of each, where its value comes from.
pub(crate) struct Plan {
    pub(super) steps: Vec<Step>,
    /// Where each fetch is read from.
    pub(super) fetches: Vec<Source>,
    /// The edges that cross devices: output `(node, index)` copied to a device, once per
    /// run (TensorFlow's Send/Recv pairs).
    pub(super) transfers: BTreeSet<(usize, usize, usize)>,
    /// The fed tensors, as the signature names them.
    pub(super) feeds: Vec<(usize, usize)>,
    /// The frames of a plan with 1.x control flow, which the frame executor runs (`None`:
    /// the steps run once, in order).
    pub(super) frames: Option<Frames>,
    /// Ranges of `steps` that run side by side, in order (`Session::overlap`); the other
    /// steps run one after another.
    pub(super) side_by_side: Vec<std::ops::Range<usize>>,
}

pub(crate) struct Step {
    /// The node whose outputs the step produces (the last of a fused chain).
    pub(crate) node: usize,
    /// The device it runs on (an index into the session's devices).
    pub(crate) device: usize,
    /// Whether an input may be on another device (one from a step placed elsewhere, or a
    /// feed): only then does a run look for copies to make.
    pub(crate) crosses: bool,
    /// Whether the step reads or writes the session's variables (a variable op, a
    /// stateful random op, or a reader of a reference variable): only then does it take
    /// the variables' lock.
    pub(crate) uses_variables: bool,
    pub(crate) kind: Kind,
    pub(crate) inputs: Vec<Source>,
    /// The other nodes a fused step runs, in order (empty for one node).
    pub(crate) chain: Vec<usize>,
    /// Nodes whose outputs no later step and no fetch reads: released after this step, as
    /// TensorFlow's executor drops a tensor when its last consumer has run.
    pub(crate) release: Vec<usize>,
    /// The outputs constant folding computed when the plan was made: the step gives them
    /// instead of running its kernel.
    pub(crate) folded: Option<crate::ops::kernels::Outputs>,
    /// The step's second input (a convolution's filter) as the mixed-precision pass
    /// rounded it, read in place of its source's value.
    pub(crate) weights: Option<crate::ops::Value>,
    /// A convolution's constant filter packed for its device, once (see
    /// `Session::pack_filters`).
    pub(crate) packed: Option<polytensor_core::PackedFilter>,
}

impl Step {
    /// A step of `kind` running `node` on `device`, reading `inputs`: nothing fused, folded
    /// or released yet, and its `crosses` and `uses_variables` to be set once the plan's
    /// steps are final.
    pub(crate) fn new(node: usize, device: usize, kind: Kind, inputs: Vec<Source>) -> Self {
        Step {
            node,
            device,
            crosses: false,
            uses_variables: false,
            kind,
            inputs,
            chain: Vec::new(),
            release: Vec::new(),
            folded: None,
            weights: None,
            packed: None,
        }
    }

    /// Whether an input may be on another device than the step's: a feed, or an output of
    /// a node placed elsewhere (`placed`: each node's device).
    pub(crate) fn reads_across(&self, placed: &[usize]) -> bool {
        self.inputs.iter().any(|input| match *input {
            Source::Feed(_) => true,
            Source::Node { node, .. } => placed[node] != self.device,
        })
    }
}

/// Where a value comes from while a plan runs.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Source {
    /// Feed number `i`.
    Feed(usize),
    /// Output `index` of the step that runs node `node`.
    Node { node: usize, index: usize },
}

impl Session {
    /// The steps a signature needs: every node reachable backwards from the fetches and
    /// targets through data and control inputs, stopping at fed tensors.
    pub(super) fn plan(&self, signature: &Signature) -> Result<Plan> {
        let placed = self.placed()?;
        let nodes = &self.graph.nodes;
        let fed =
            |node: usize, index: usize| signature.feeds.iter().position(|&f| f == (node, index));
        let source = |(node, index): (usize, usize)| match fed(node, index) {
            Some(i) => Source::Feed(i),
            None => Source::Node { node, index },
        };
        // Nodes are stored in an order where inputs come first (the builder and the GraphDef
        // reader both guarantee it), so marking backwards and running forwards is enough.
        let mut needed = vec![false; nodes.len()];
        let mut stack: Vec<usize> = signature
            .fetches
            .iter()
            .filter(|&&(n, i)| fed(n, i).is_none())
            .map(|&(n, _)| n)
            .chain(signature.targets.iter().copied())
            .collect();
        while let Some(node) = stack.pop() {
            if std::mem::replace(&mut needed[node], true) {
                continue;
            }
            let n = &nodes[node];
            stack.extend(
                n.inputs
                    .iter()
                    .filter(|&&(m, i)| fed(m, i).is_none())
                    .map(|&(m, _)| m),
            );
            stack.extend(n.control_inputs.iter().copied());
        }
        let mut steps = (0..nodes.len())
            .filter(|&node| needed[node])
            .map(|node| {
                let n = &nodes[node];
                let inputs = n.inputs.iter().map(|&input| source(input)).collect();
                Step::new(node, placed[node], n.kind, inputs)
            })
            .collect::<Vec<Step>>();
        let fetches: Vec<Source> = signature.fetches.iter().map(|&f| source(f)).collect();
        let frames = if crate::frames::needed(&steps) {
            Some(Frames::analyze(nodes, &steps)?)
        } else {
            if self.optimizations.constant_folding {
                self.fold(&mut steps, &fetches, &placed);
            }
            if self.optimizations.remapping {
                crate::fusion::fuse(&mut steps, &fetches, nodes);
            }
            if self.optimizations.bf16_weights {
                self.round_weights(&mut steps);
            }
            if self.optimizations.packed_filters {
                self.pack_filters(&mut steps);
            }
            None
        };
        let side_by_side = if frames.is_none() && self.optimizations.parallel_branches {
            self.overlap(&mut steps, nodes)
        } else {
            Vec::new()
        };
        // The last step reading each node's outputs releases them (fetched nodes never).
        let mut last_reader: HashMap<usize, usize> = HashMap::new();
        for (at, step) in steps.iter().enumerate() {
            for input in &step.inputs {
                if let Source::Node { node, .. } = *input {
                    last_reader.insert(node, at);
                }
            }
        }
        for source in &fetches {
            if let Source::Node { node, .. } = *source {
                last_reader.remove(&node);
            }
        }
        for (node, at) in last_reader {
            steps[at].release.push(node);
        }
        for step in &mut steps {
            step.crosses = step.reads_across(&placed);
            step.uses_variables = touches_variables(step.kind)
                || step.inputs.iter().any(|input| match *input {
                    Source::Node { node, .. } => {
                        matches!(
                            nodes[node].kind,
                            Kind::RefVariable | Kind::RefAssign | Kind::RefAssignAdd
                        )
                    }
                    Source::Feed(_) => false,
                });
        }
        let placed = &placed;
        let transfers = steps
            .iter()
            .flat_map(|step| {
                step.inputs.iter().filter_map(move |input| match *input {
                    Source::Node { node, index } if placed[node] != step.device => {
                        Some((node, index, step.device))
                    }
                    _ => None,
                })
            })
            .collect();
        Ok(Plan {
            steps,
            fetches,
            transfers,
            feeds: signature.feeds.clone(),
            frames,
            side_by_side,
        })
    }
}

/// Whether a node of `kind` reads or writes the session's variables itself: a variable op,
/// or a stateful random op (its stream's position is kept with the variables).
pub(super) fn touches_variables(kind: Kind) -> bool {
    kind.acts_on_variable() || matches!(kind, Kind::Generate(_))
}
