//! The frame executor: runs a plan with TensorFlow 1.x control flow as TensorFlow's
//! executor does, with frames, iterations and dead tensors.
//!
//! - A frame's order ([`crate::frames`]) runs once per iteration. A child frame runs to
//!   its end as one item of its parent's iteration, reading its `Enter`s' inputs from
//!   that iteration; its `Exit`s give the parent the last live value they saw.
//! - `Switch` makes the output its predicate does not pick dead. A node with a dead data
//!   or control input is dead itself (its outputs too) and runs no kernel; `Merge` gives
//!   its first live input, and is dead when none is.
//! - At iteration 0 a `Merge` sees its `Enter` inputs (its back edges are absent); at
//!   iteration `i + 1` the values its `NextIteration` inputs had at `i` (a non-constant
//!   `Enter` is absent then; a constant one gives its value every iteration). The loop
//!   ends after an iteration whose `NextIteration`s are all dead.

use std::collections::HashMap;

use smallvec::{smallvec, SmallVec};

use polytensor_core::device::same_device;
use polytensor_core::{DataType, Error, Result, Tensor};

use super::call::to_bool;
use super::{in_node, locked, Plan, Session, Source, Step};
use crate::attr::Attrs;
use crate::frames::{is_back_edge, Frames, Item, ROOT};
use crate::ops::kernels::Variables;
use crate::ops::{Flow, Kind, Value};

/// What a node gave in one iteration: whether it is dead, and each output (`None` dead).
#[derive(Clone)]
struct Produced {
    dead: bool,
    outputs: SmallVec<[Option<Value>; 2]>,
}

impl Produced {
    fn dead(outputs: usize) -> Produced {
        Produced {
            dead: true,
            outputs: (0..outputs).map(|_| None).collect(),
        }
    }
}

/// The values of one iteration of a frame, and its parent's (what `Enter`s read).
struct Env<'p> {
    values: HashMap<usize, Produced>,
    parent: Option<&'p Env<'p>>,
}

impl Env<'_> {
    fn get(&self, session: &Session, node: usize) -> Result<&Produced> {
        self.values.get(&node).ok_or_else(|| {
            Error::invalid(format!(
                "'{}' was read before it ran (a graph whose frames TensorFlow's executor \
                 would not run)",
                session.graph.nodes[node].name
            ))
        })
    }
}

/// One run of a plan: what every iteration reads.
struct Run<'r> {
    session: &'r Session,
    plan: &'r Plan,
    frames: &'r Frames,
    fed: &'r [Value],
}

impl Session {
    /// Run `plan`, whose frames are `frames`, with `fed` values.
    pub(super) fn execute_frames(
        &self,
        plan: &Plan,
        frames: &Frames,
        fed: &[Value],
    ) -> Result<Vec<Value>> {
        let run = Run {
            session: self,
            plan,
            frames,
            fed,
        };
        let mut env = Env {
            values: HashMap::new(),
            parent: None,
        };
        run.iteration(ROOT, &mut env, 0, &HashMap::new())?;
        plan.fetches
            .iter()
            .enumerate()
            .map(|(i, source)| match *source {
                Source::Feed(f) => Ok(fed[f].clone()),
                Source::Node { node, index } => {
                    let name = &self.graph.nodes[node].name;
                    if frames.of(node) != ROOT {
                        return Err(Error::invalid(format!(
                            "Cannot fetch '{name}:{index}': it is inside the while loop \
                             '{}'; fetch what the loop's Exit gives",
                            frames.frames[frames.of(node)].name
                        )));
                    }
                    env.get(self, node)?.outputs[index].clone().ok_or_else(|| {
                        Error::invalid(format!(
                            "Retval[{i}] does not have value ('{name}:{index}' is dead: a \
                             cond branch not taken)"
                        ))
                    })
                }
            })
            .collect()
    }
}

impl Run<'_> {
    /// Run loop frame `frame` to its end inside its parent's iteration `parent`; the
    /// values its `Exit`s give the parent.
    fn frame(&self, frame: usize, parent: &Env<'_>) -> Result<Vec<(usize, Produced)>> {
        let info = &self.frames.frames[frame];
        let mut exits: Vec<(usize, Produced)> = info
            .exits
            .iter()
            .map(|&exit| (exit, Produced::dead(1)))
            .collect();
        let mut back: HashMap<usize, Option<Value>> = HashMap::new();
        for iteration in 0.. {
            let mut env = Env {
                values: HashMap::new(),
                parent: Some(parent),
            };
            self.iteration(frame, &mut env, iteration, &back)?;
            for (exit, value) in &mut exits {
                if let Some(produced) = env.values.get(exit).filter(|p| !p.dead) {
                    *value = produced.clone();
                }
            }
            back = info
                .next_iterations
                .iter()
                .map(|&next| {
                    let value = env.values.get(&next).and_then(|p| p.outputs[0].clone());
                    (next, value)
                })
                .collect();
            if back.values().all(Option::is_none) {
                break;
            }
        }
        Ok(exits)
    }

    /// Run iteration `iteration` of `frame` into `env`; `back` holds the values its
    /// `NextIteration`s gave the iteration before.
    fn iteration(
        &self,
        frame: usize,
        env: &mut Env<'_>,
        iteration: usize,
        back: &HashMap<usize, Option<Value>>,
    ) -> Result<()> {
        for &item in &self.frames.frames[frame].order {
            match item {
                Item::Step(i) => {
                    let step = &self.plan.steps[i];
                    let produced = self.step(step, env, iteration, back)?;
                    env.values.insert(step.node, produced);
                }
                Item::Frame(child) => {
                    let exits = self.frame(child, env)?;
                    env.values.extend(exits);
                }
            }
        }
        Ok(())
    }

    /// Run one step in an iteration.
    fn step(
        &self,
        step: &Step,
        env: &Env<'_>,
        iteration: usize,
        back: &HashMap<usize, Option<Value>>,
    ) -> Result<Produced> {
        let session = self.session;
        let node = &session.graph.nodes[step.node];
        let flow = match step.kind {
            Kind::Flow(flow) => Some(flow),
            _ => None,
        };
        // An `Enter` reads its parent's iteration.
        let (reading, absent) = if flow == Some(Flow::Enter) {
            let constant = Attrs {
                node: &node.name,
                attrs: &node.attrs,
            }
            .bool_or("is_constant", false)?;
            let parent = env
                .parent
                .ok_or_else(|| Error::invalid(format!("Enter '{}' has no parent", node.name)))?;
            (parent, iteration > 0 && !constant)
        } else {
            (env, false)
        };
        let mut inputs: SmallVec<[Option<Value>; 4]> = SmallVec::new();
        for &source in &step.inputs {
            inputs.push(match source {
                _ if absent => None,
                Source::Feed(i) => Some(self.fed[i].clone()),
                Source::Node { node: from, .. }
                    if is_back_edge(&session.graph.nodes[from].op_type, &node.op_type) =>
                {
                    back.get(&from).cloned().flatten()
                }
                Source::Node { node: from, index } => {
                    reading.get(session, from)?.outputs[index].clone()
                }
            });
        }
        let mut control_dead = false;
        for &control in &node.control_inputs {
            control_dead |= reading.get(session, control)?.dead;
        }
        let outputs = node.outputs.len();
        if flow == Some(Flow::Merge) {
            let live = inputs.iter().position(Option::is_some);
            return match live {
                Some(at) if !control_dead => {
                    let device = &session.devices[step.device];
                    let index = Tensor::scalar(at as i32, device).map_err(|e| in_node(e, node))?;
                    Ok(Produced {
                        dead: false,
                        outputs: smallvec![inputs[at].take(), Some(Value::Tensor(index))],
                    })
                }
                _ => Ok(Produced::dead(outputs)),
            };
        }
        if control_dead || inputs.iter().any(Option::is_none) {
            return Ok(Produced::dead(outputs));
        }
        let inputs: SmallVec<[Value; 4]> = inputs.into_iter().flatten().collect();
        if flow == Some(Flow::Switch) {
            let Value::Tensor(pred) = &inputs[1] else {
                return Err(in_node(Error::invalid("the predicate must be a tensor"), node));
            };
            if !pred.dims().is_empty() || pred.dtype() != DataType::Bool {
                return Err(in_node(
                    Error::invalid(format!(
                        "The second input must be a scalar, but it has shape {:?}",
                        pred.dims()
                    )),
                    node,
                ));
            }
            let taken = to_bool(pred).map_err(|e| in_node(e, node))?;
            let data = Some(inputs[0].clone());
            return Ok(Produced {
                dead: false,
                outputs: if taken {
                    smallvec![None, data]
                } else {
                    smallvec![data, None]
                },
            });
        }
        let outputs = self.kernel(step, &inputs)?;
        Ok(Produced {
            dead: false,
            outputs: outputs.into_iter().map(Some).collect(),
        })
    }

    /// Run `step`'s kernel on live `inputs`, copied to its device where they are elsewhere.
    fn kernel(&self, step: &Step, inputs: &[Value]) -> Result<crate::ops::kernels::Outputs> {
        let session = self.session;
        if let Some(constant) = session.constants[step.node].get() {
            return Ok(smallvec![Value::Tensor(constant.clone())]);
        }
        let device = &session.devices[step.device];
        let node = &session.graph.nodes[step.node];
        let mut copies: SmallVec<[Value; 4]> = SmallVec::new();
        for (value, source) in inputs.iter().zip(&step.inputs) {
            copies.push(match value {
                Value::Tensor(t) if !same_device(t.device(), device) => {
                    if let Source::Feed(i) = *source {
                        let (fed_node, index) = self.plan.feeds[i];
                        let from = t.device().name().to_string();
                        locked(&session.fed_copies).insert((fed_node, index, step.device, from));
                    }
                    Value::Tensor(t.to_device(device).map_err(|e| in_node(e, node))?)
                }
                other => other.clone(),
            });
        }
        let mut unused = Variables::new();
        session.run_kernel(step, copies.iter().collect(), &mut unused)
    }
}
