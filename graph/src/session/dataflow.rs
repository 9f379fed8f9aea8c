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

use std::cell::RefCell;
use std::collections::hash_map::Entry;
use std::collections::HashMap;

use smallvec::{smallvec, SmallVec};

use polytensor_core::{DataType, Error, Result, Tensor};

use super::call::to_bool;
use super::{in_node, Plan, Session, Source, Step, Stop};
use crate::frames::{Frames, Item, Read, ROOT};
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

/// The values of one iteration of a frame (by slot, `crate::frames::Wiring`), and its
/// parent's (what `Enter`s read).
struct Env<'p> {
    values: Vec<Option<Produced>>,
    parent: Option<&'p Env<'p>>,
}

impl<'p> Env<'p> {
    fn new(slots: usize, parent: Option<&'p Env<'p>>) -> Self {
        Env {
            values: vec![None; slots],
            parent,
        }
    }

    fn get(&self, slot: usize) -> Result<&Produced> {
        self.values[slot].as_ref().ok_or_else(|| {
            Error::invalid(
                "a value was read before it was made (a graph whose frames TensorFlow's \
                 executor would not run)",
            )
        })
    }
}

/// One run of a plan: what every iteration reads.
struct Run<'r> {
    session: &'r Session,
    plan: &'r Plan,
    frames: &'r Frames,
    fed: &'r [Value],
    /// When the run stops early.
    stop: &'r Stop,
    /// `Merge`'s `value_index` scalars, by (device, index), made once per run.
    indices: RefCell<HashMap<(usize, usize), Tensor>>,
}

impl Session {
    /// Run `plan`, whose frames are `frames`, with `fed` values.
    pub(super) fn execute_frames(
        &self,
        plan: &Plan,
        frames: &Frames,
        fed: &[Value],
        stop: &Stop,
    ) -> Result<Vec<Value>> {
        let run = Run {
            session: self,
            plan,
            frames,
            fed,
            stop,
            indices: RefCell::default(),
        };
        let mut env = Env::new(frames.frames[ROOT].slots, None);
        run.iteration(ROOT, &mut env, 0, &[])?;
        plan.fetches
            .iter()
            .enumerate()
            .map(|(i, source)| match *source {
                Source::Feed(f) => Ok(fed[f].clone()),
                Source::Node { node, index } => {
                    let name = &self.graph.nodes[node].name;
                    let frame = frames.of(node);
                    let is_exit = self.graph.nodes[node].kind == Kind::Flow(Flow::Exit);
                    if frame != ROOT && !(is_exit && frames.frames[frame].parent == ROOT) {
                        return Err(Error::invalid(format!(
                            "Cannot fetch '{name}:{index}': it is inside the while loop \
                             '{}'; fetch what the loop's Exit gives",
                            frames.frames[frame].name
                        )));
                    }
                    env.get(frames.value_slot(node))?.outputs[index]
                        .clone()
                        .ok_or_else(|| {
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
    /// values its `Exit`s give the parent, by the parent's slots.
    fn frame(&self, frame: usize, parent: &Env<'_>) -> Result<Vec<(usize, Produced)>> {
        let info = &self.frames.frames[frame];
        // (slot here, slot in the parent, last live value).
        let mut exits: Vec<(usize, usize, Produced)> = info
            .exit_slots
            .iter()
            .map(|&(here, there)| (here, there, Produced::dead(1)))
            .collect();
        let mut back: Vec<Option<Value>> = Vec::new();
        for iteration in 0.. {
            let mut env = Env::new(info.slots, Some(parent));
            self.iteration(frame, &mut env, iteration, &back)?;
            for (slot, _, value) in &mut exits {
                if let Some(produced) = env.values[*slot].take().filter(|p| !p.dead) {
                    *value = produced;
                }
            }
            back = info
                .next_slots
                .iter()
                .map(|&slot| env.values[slot].take().and_then(|p| p.outputs[0].clone()))
                .collect();
            if back.iter().all(Option::is_none) {
                break;
            }
        }
        Ok(exits
            .into_iter()
            .map(|(_, parent_slot, value)| (parent_slot, value))
            .collect())
    }

    /// Run iteration `iteration` of `frame` into `env`; `back` holds the values its
    /// `NextIteration`s gave the iteration before.
    fn iteration(
        &self,
        frame: usize,
        env: &mut Env<'_>,
        iteration: usize,
        back: &[Option<Value>],
    ) -> Result<()> {
        for &item in &self.frames.frames[frame].order {
            match item {
                Item::Step(i) => {
                    let produced = self.step(i, env, iteration, back)?;
                    env.values[self.frames.steps[i].slot] = Some(produced);
                }
                Item::Frame(child) => {
                    for (slot, value) in self.frame(child, env)? {
                        env.values[slot] = Some(value);
                    }
                }
            }
        }
        Ok(())
    }

    /// Run step `i` of the plan in an iteration.
    fn step(
        &self,
        i: usize,
        env: &Env<'_>,
        iteration: usize,
        back: &[Option<Value>],
    ) -> Result<Produced> {
        self.stop.check()?;
        let (step, wiring) = (&self.plan.steps[i], &self.frames.steps[i]);
        let session = self.session;
        let node = &session.graph.nodes[step.node];
        let flow = match step.kind {
            Kind::Flow(flow) => Some(flow),
            _ => None,
        };
        // An `Enter` reads its parent's iteration; a non-constant one only at iteration 0.
        let (reading, absent) = match wiring.enter {
            Some(constant) => {
                let parent = env.parent.ok_or_else(|| {
                    Error::invalid(format!("Enter '{}' has no parent", node.name))
                })?;
                (parent, iteration > 0 && !constant)
            }
            None => (env, false),
        };
        let mut inputs: SmallVec<[Option<&Value>; 4]> = SmallVec::new();
        for read in &wiring.inputs {
            inputs.push(match *read {
                _ if absent => None,
                Read::Feed(i) => Some(&self.fed[i]),
                Read::Back { next } => back.get(next).and_then(Option::as_ref),
                Read::Slot { slot, index } => {
                    reading.get(slot).map_err(|e| in_node(e, node))?.outputs[index].as_ref()
                }
            });
        }
        let mut control_dead = false;
        for &slot in &wiring.controls {
            control_dead |= reading.get(slot).map_err(|e| in_node(e, node))?.dead;
        }
        let outputs = node.outputs.len();
        if flow == Some(Flow::Merge) {
            let live = inputs.iter().position(Option::is_some);
            return match live {
                Some(at) if !control_dead => Ok(Produced {
                    dead: false,
                    outputs: smallvec![inputs[at].cloned(), Some(self.index(step, at)?)],
                }),
                _ => Ok(Produced::dead(outputs)),
            };
        }
        if control_dead || inputs.iter().any(Option::is_none) {
            return Ok(Produced::dead(outputs));
        }
        let inputs: SmallVec<[&Value; 4]> = inputs.into_iter().flatten().collect();
        if flow == Some(Flow::Switch) {
            let Value::Tensor(pred) = &inputs[1] else {
                return Err(in_node(
                    Error::invalid("the predicate must be a tensor"),
                    node,
                ));
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

    /// `Merge`'s `value_index` `at`, on `step`'s device.
    fn index(&self, step: &Step, at: usize) -> Result<Value> {
        let mut indices = self.indices.borrow_mut();
        let index = match indices.entry((step.device, at)) {
            Entry::Occupied(known) => known.get().clone(),
            Entry::Vacant(entry) => {
                let device = &self.session.devices[step.device];
                let node = &self.session.graph.nodes[step.node];
                let index = i32::try_from(at)
                    .map_err(|_| Error::invalid("Merge has too many inputs"))
                    .and_then(|at| Tensor::scalar(at, device))
                    .map_err(|e| in_node(e, node))?;
                entry.insert(index).clone()
            }
        };
        Ok(Value::Tensor(index))
    }

    /// Run `step`'s kernel on live `inputs`, copied to its device where they are elsewhere.
    fn kernel(&self, step: &Step, inputs: &[&Value]) -> Result<crate::ops::kernels::Outputs> {
        let session = self.session;
        if let Some(constant) = session.constants[step.node].get() {
            return Ok(smallvec![Value::Tensor(constant.clone())]);
        }
        // Inputs on another device, copied here (`None`: read where it is).
        let copies = inputs
            .iter()
            .zip(&step.inputs)
            .map(|(&value, &source)| session.copy_here(self.plan, step, source, value))
            .collect::<Result<SmallVec<[Option<Value>; 4]>>>()?;
        let here = inputs
            .iter()
            .zip(&copies)
            .map(|(&value, copy)| copy.as_ref().unwrap_or(value))
            .collect();
        let mut unused = Variables::new();
        session.run_kernel(step, here, &mut unused, self.stop)
    }
}
