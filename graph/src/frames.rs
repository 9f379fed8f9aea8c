//! The frames of a plan with TensorFlow 1.x control flow, as TensorFlow's executor finds
//! them (`BuildControlFlowInfo`): every node runs in the frame of its inputs, but for
//! `Enter`, which opens the child frame its `frame_name` names, and `Exit`, whose output
//! is back in the parent. A frame's nodes (and its child frames, each one item) are put in
//! an order where inputs come first, a loop's back edges (`NextIteration` into `Merge`)
//! aside; any other cycle is an `Err`. The session's frame executor
//! (`crate::session::dataflow`) runs that order once per iteration.

use std::collections::{BTreeSet, HashMap};

use polytensor_core::{Error, Result};

use crate::attr::Attrs;
use crate::graph::Node;
use crate::ops::{Flow, Kind};
use crate::session::{Source, Step};

/// The root frame's index.
pub(crate) const ROOT: usize = 0;

/// The frames of one plan.
pub(crate) struct Frames {
    /// The frame each node of the plan runs in, by node id (`ROOT` for the others).
    of: Vec<usize>,
    /// Every frame; `ROOT` first.
    pub(crate) frames: Vec<Frame>,
    /// How each step of the plan runs in its frame, by step.
    pub(crate) steps: Vec<Wiring>,
    /// The slot each node's value is read from, by node id: its own, or an `Exit`'s in
    /// the parent's iterations.
    value_slots: Vec<usize>,
}

/// Where a step's values live and where it reads its inputs, resolved once per plan: an
/// iteration keeps its values in slots, one per node of its frame and one per `Exit` of
/// its child frames.
pub(crate) struct Wiring {
    /// The step's slot in its frame's iterations.
    pub(crate) slot: usize,
    /// Each data input.
    pub(crate) inputs: Vec<Read>,
    /// The slots of its control inputs.
    pub(crate) controls: Vec<usize>,
    /// For an `Enter`: whether it is constant (gives its value every iteration). An
    /// `Enter` reads its parent's iteration.
    pub(crate) enter: Option<bool>,
}

/// Where a step reads one input.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Read {
    /// Feed `i`.
    Feed(usize),
    /// Output `index` of the value in `slot`.
    Slot { slot: usize, index: usize },
    /// A back edge: what the frame's `NextIteration` number `next` gave the iteration
    /// before.
    Back { next: usize },
}

/// One frame: the root, or a loop opened by `Enter` nodes of one `frame_name`.
pub(crate) struct Frame {
    /// The `frame_name` (empty for the root).
    pub(crate) name: String,
    /// The enclosing frame (`ROOT`'s is itself).
    pub(crate) parent: usize,
    /// What one iteration runs, in order.
    pub(crate) order: Vec<Item>,
    /// How many values one iteration holds.
    pub(crate) slots: usize,
    /// Each `Exit`'s slot here and in the parent's iterations.
    pub(crate) exit_slots: Vec<(usize, usize)>,
    /// The slots of its `NextIteration`s, in `next_iterations` order.
    pub(crate) next_slots: Vec<usize>,
    /// Its `Exit` nodes, whose values the parent reads.
    pub(crate) exits: Vec<usize>,
    /// Its `NextIteration` nodes: while one of them is live, the loop goes on.
    pub(crate) next_iterations: Vec<usize>,
}

/// An item of a frame's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Item {
    /// Step `i` of the plan.
    Step(usize),
    /// A child frame, run to its end.
    Frame(usize),
}

/// Whether an edge from an op of type `source` into one of type `consumer` is a loop's
/// back edge, the one edge a cycle may run through (as TensorFlow's graph constructor
/// has it).
pub(crate) fn is_back_edge(source: Kind, consumer: Kind) -> bool {
    consumer == Kind::Flow(Flow::Merge) && source == Kind::Flow(Flow::NextIteration)
}

/// Whether `node` is an `Exit`.
fn is_exit(node: &Node) -> bool {
    node.kind == Kind::Flow(Flow::Exit)
}

/// Whether a plan of these steps needs the frame executor: it has a control-flow
/// primitive.
pub(crate) fn needed(steps: &[Step]) -> bool {
    steps.iter().any(|step| matches!(step.kind, Kind::Flow(_)))
}

impl Frames {
    /// The frames of `steps` (a plan's, in node order) over `nodes`.
    pub(crate) fn analyze(nodes: &[Node], steps: &[Step]) -> Result<Frames> {
        let mut frames = Frames {
            of: vec![ROOT; nodes.len()],
            frames: vec![Frame::new(String::new(), ROOT)],
            steps: Vec::with_capacity(steps.len()),
            value_slots: Vec::new(),
        };
        let mut by_name: HashMap<(usize, String), usize> = HashMap::new();
        // The first node of each frame, to keep node order among ready items.
        let mut first: Vec<usize> = vec![0];
        for step in steps {
            let node = &nodes[step.node];
            let input_frame = frames.input_frame(nodes, step)?;
            let frame = match step.kind {
                Kind::Flow(Flow::Enter) => {
                    let name = Attrs {
                        node: &node.name,
                        attrs: &node.attrs,
                    }
                    .string_or("frame_name", "")?;
                    let next = frames.frames.len();
                    let frame = *by_name.entry((input_frame, name.clone())).or_insert(next);
                    if frame == next {
                        frames.frames.push(Frame::new(name, input_frame));
                        first.push(step.node);
                    }
                    frame
                }
                Kind::Flow(Flow::Exit | Flow::NextIteration) if input_frame == ROOT => {
                    return Err(Error::invalid(format!(
                        "{} node '{}' is not inside a while loop: its input comes from no \
                         Enter",
                        node.op_type, node.name
                    )));
                }
                _ => input_frame,
            };
            frames.of[step.node] = frame;
            match step.kind {
                Kind::Flow(Flow::Exit) => frames.frames[frame].exits.push(step.node),
                Kind::Flow(Flow::NextIteration) => {
                    frames.frames[frame].next_iterations.push(step.node)
                }
                _ => {}
            }
        }
        // A back edge stays in its frame.
        for step in steps {
            for input in &step.inputs {
                if let Source::Node { node, .. } = *input {
                    let (source, merge) = (&nodes[node], &nodes[step.node]);
                    if is_back_edge(source.kind, merge.kind)
                        && frames.of[node] != frames.of[step.node]
                    {
                        return Err(Error::invalid(format!(
                            "NextIteration '{}' and Merge '{}' are in different frames ('{}' \
                             and '{}')",
                            source.name,
                            merge.name,
                            frames.frames[frames.of[node]].name,
                            frames.frames[frames.of[step.node]].name
                        )));
                    }
                }
            }
        }
        frames.order(nodes, steps, &first)?;
        frames.wire(nodes, steps)?;
        Ok(frames)
    }

    /// Give every step its slots and resolve where it reads.
    fn wire(&mut self, nodes: &[Node], steps: &[Step]) -> Result<()> {
        let mut slot = vec![usize::MAX; nodes.len()];
        let mut exit_slot = vec![usize::MAX; nodes.len()];
        for step in steps {
            let frame = self.of[step.node];
            slot[step.node] = self.frames[frame].take_slot();
            if is_exit(&nodes[step.node]) {
                let parent = self.frames[frame].parent;
                exit_slot[step.node] = self.frames[parent].take_slot();
            }
        }
        for frame in &mut self.frames {
            frame.exit_slots = frame
                .exits
                .iter()
                .map(|&x| (slot[x], exit_slot[x]))
                .collect();
            frame.next_slots = frame.next_iterations.iter().map(|&n| slot[n]).collect();
        }
        // The slot a consumer reads each node's value from.
        self.value_slots = (0..nodes.len())
            .map(|node| {
                if is_exit(&nodes[node]) {
                    exit_slot[node]
                } else {
                    slot[node]
                }
            })
            .collect();
        let read_slot = |node: usize| self.value_slots[node];
        for step in steps {
            let node = &nodes[step.node];
            let frame = &self.frames[self.of[step.node]];
            let inputs = step
                .inputs
                .iter()
                .map(|input| match *input {
                    Source::Feed(i) => Ok(Read::Feed(i)),
                    Source::Node { node: from, .. }
                        if is_back_edge(nodes[from].kind, node.kind) =>
                    {
                        let next = frame
                            .next_iterations
                            .iter()
                            .position(|&n| n == from)
                            .ok_or_else(|| {
                                Error::invalid(format!(
                                    "NextIteration '{}' is not in the frame of Merge '{}'",
                                    nodes[from].name, node.name
                                ))
                            })?;
                        Ok(Read::Back { next })
                    }
                    Source::Node { node: from, index } => Ok(Read::Slot {
                        slot: read_slot(from),
                        index,
                    }),
                })
                .collect::<Result<_>>()?;
            let enter = match step.kind {
                Kind::Flow(Flow::Enter) => Some(
                    Attrs {
                        node: &node.name,
                        attrs: &node.attrs,
                    }
                    .bool_or("is_constant", false)?,
                ),
                _ => None,
            };
            self.steps.push(Wiring {
                slot: slot[step.node],
                inputs,
                controls: node.control_inputs.iter().map(|&c| read_slot(c)).collect(),
                enter,
            });
        }
        Ok(())
    }

    /// The slot node `node`'s value is read from in the iterations of the frame it lives
    /// in.
    pub(crate) fn value_slot(&self, node: usize) -> usize {
        self.value_slots[node]
    }

    /// The frame node `node` runs in.
    pub(crate) fn of(&self, node: usize) -> usize {
        self.of[node]
    }

    /// The frame the value of `node`'s outputs lives in: its own, but for an `Exit`'s,
    /// which is its parent's.
    fn value_frame(&self, nodes: &[Node], node: usize) -> usize {
        let frame = self.of[node];
        if is_exit(&nodes[node]) {
            self.frames[frame].parent
        } else {
            frame
        }
    }

    /// The inputs of `step` (data and control, loop back edges and feeds aside), each an
    /// edge within one frame: (producer, frame the value lives in).
    fn edges<'s>(
        &'s self,
        nodes: &'s [Node],
        step: &'s Step,
    ) -> impl Iterator<Item = (usize, usize)> + 's {
        let consumer = &nodes[step.node];
        let data = step.inputs.iter().filter_map(move |input| match *input {
            Source::Node { node, .. } if !is_back_edge(nodes[node].kind, consumer.kind) => {
                Some(node)
            }
            _ => None,
        });
        data.chain(consumer.control_inputs.iter().copied())
            .map(move |node| (node, self.value_frame(nodes, node)))
    }

    /// The frame `step`'s inputs come from (the root for a node with none); `Err`, in
    /// TensorFlow's words, where they disagree.
    fn input_frame(&self, nodes: &[Node], step: &Step) -> Result<usize> {
        let mut seen: Option<(usize, usize)> = None;
        for (node, frame) in self.edges(nodes, step) {
            match seen {
                None => seen = Some((node, frame)),
                Some((other, other_frame)) if other_frame != frame => {
                    return Err(Error::invalid(format!(
                        "The node '{}' has inputs from different frames. The input '{}' is in \
                         frame '{}'. The input '{}' is in frame '{}'.",
                        nodes[step.node].name,
                        nodes[other].name,
                        self.frames[other_frame].name,
                        nodes[node].name,
                        self.frames[frame].name
                    )))
                }
                Some(_) => {}
            }
        }
        Ok(seen.map_or(ROOT, |(_, frame)| frame))
    }

    /// What node `node` is among the items of `frame`: itself, or the child frame of
    /// `frame` it runs inside.
    fn item_in(&self, frame: usize, node: usize, step: usize) -> Item {
        let mut inner = self.of[node];
        if inner == frame {
            return Item::Step(step);
        }
        while self.frames[inner].parent != frame {
            inner = self.frames[inner].parent;
        }
        Item::Frame(inner)
    }

    /// Each frame's order: Kahn's algorithm over its items, node order among ready ones.
    fn order(&mut self, nodes: &[Node], steps: &[Step], first: &[usize]) -> Result<()> {
        let step_of: HashMap<usize, usize> =
            steps.iter().enumerate().map(|(i, s)| (s.node, i)).collect();
        let count = self.frames.len();
        let mut items: Vec<Vec<Item>> = vec![Vec::new(); count];
        for (i, step) in steps.iter().enumerate() {
            items[self.of[step.node]].push(Item::Step(i));
        }
        for frame in 1..count {
            items[self.frames[frame].parent].push(Item::Frame(frame));
        }
        let mut consumers: HashMap<Item, Vec<Item>> = HashMap::new();
        let mut pending: HashMap<Item, usize> = HashMap::new();
        for (i, step) in steps.iter().enumerate() {
            for (node, frame) in self.edges(nodes, step) {
                let Some(&producer) = step_of.get(&node) else {
                    continue;
                };
                let (from, to) = (
                    self.item_in(frame, node, producer),
                    self.item_in(frame, step.node, i),
                );
                if from != to {
                    consumers.entry(from).or_default().push(to);
                    *pending.entry(to).or_default() += 1;
                }
            }
        }
        let key = |item: Item| match item {
            Item::Step(i) => steps[i].node,
            Item::Frame(f) => first[f],
        };
        for (frame, items) in items.into_iter().enumerate() {
            let total = items.len();
            let mut ready: BTreeSet<(usize, Item)> = items
                .iter()
                .filter(|item| pending.get(item).copied().unwrap_or(0) == 0)
                .map(|&item| (key(item), item))
                .collect();
            let mut order = Vec::with_capacity(total);
            while let Some((_, item)) = ready.pop_first() {
                order.push(item);
                for &next in consumers.get(&item).into_iter().flatten() {
                    let left = pending.get_mut(&next).map(|p| {
                        *p -= 1;
                        *p
                    });
                    if left == Some(0) {
                        ready.insert((key(next), next));
                    }
                }
            }
            if order.len() != total {
                let stuck = items
                    .iter()
                    .find(|item| !order.contains(item))
                    .map(|&item| match item {
                        Item::Step(i) => nodes[steps[i].node].name.to_string(),
                        Item::Frame(f) => format!("the loop '{}'", self.frames[f].name),
                    })
                    .unwrap_or_default();
                return Err(Error::invalid(format!(
                    "Graph has a cycle that is not a while loop: {stuck} depends on itself \
                     through its inputs"
                )));
            }
            self.frames[frame].order = order;
        }
        Ok(())
    }
}

impl Frame {
    fn new(name: String, parent: usize) -> Frame {
        Frame {
            name,
            parent,
            order: Vec::new(),
            slots: 0,
            exit_slots: Vec::new(),
            next_slots: Vec::new(),
            exits: Vec::new(),
            next_iterations: Vec::new(),
        }
    }

    fn take_slot(&mut self) -> usize {
        self.slots += 1;
        self.slots - 1
    }
}

impl PartialOrd for Item {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Item {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let rank = |item: &Item| match *item {
            Item::Step(i) => (0, i),
            Item::Frame(f) => (1, f),
        };
        rank(self).cmp(&rank(other))
    }
}
