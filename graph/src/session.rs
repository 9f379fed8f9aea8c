//! `Session`: runs the part of a graph that fetches and targets need, each operation on the
//! device the placer ([`crate::placer`]) gives it, with tensors copied between devices
//! where an edge crosses them, the execution plan cached per (feeds, fetches, targets)
//! signature and variables kept in the session. A run may be given a deadline and a
//! cancellation handle ([`RunOptions`]).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use polytensor_core::collective::Collectives;
use polytensor_core::device::same_device;
use polytensor_core::{Device, Error, Result, Tensor};

use crate::graph::{python_shape, Graph, Operation, Output};
use smallvec::{smallvec, SmallVec};

use crate::ops::kernels::{self, Outputs, RunCtx, Variables};
use crate::ops::{Kind, Value};

mod call;
mod dataflow;
mod fold;
mod overlap;
mod placement;
mod plan;
mod plan_cache;
mod precision;
mod stop;
mod trace;

pub use placement::{PlacedOp, Placement, Transfer};
pub(crate) use plan::{Plan, Source, Step};
use plan_cache::PlanCache;
pub use plan_cache::PLAN_CACHE_CAPACITY;
use stop::Stop;
pub use stop::{timeout_from_millis, CancellationManager, RunOptions};
use trace::StepRecord;
pub use trace::{NodeStats, OpTypeStats, OutputStats, StepStats, Trace};

/// TensorFlow's `Session` over a snapshot of a graph and a set of devices: each operation
/// runs on the device its `device` field asks for, with TensorFlow's soft placement and
/// colocation ([`crate::placer`]), and tensors are copied where an edge crosses devices
/// ([`Session::placement`] lists both). [`Session::new`] opens one over a single device.
///
/// ```
/// use polytensor_graph::{Graph, Session};
/// let mut g = Graph::new();
/// let a = g.constant(3.0f32)?;
/// let b = g.constant(4.0f32)?;
/// let total = g.add(&a, &b)?;
/// let session = Session::new(&g, polytensor_cpu::CpuDevice::shared());
/// let values = session.run(&[], &[&total], &[])?;
/// assert_eq!(values[0].item::<f32>()?, 7.0);
/// # Ok::<(), polytensor_core::Error>(())
/// ```
pub struct Session {
    graph: Graph,
    /// The devices operations may run on; the first is the default.
    devices: Vec<Arc<dyn Device>>,
    soft_placement: bool,
    /// The deadline of a run whose [`RunOptions`] give none.
    operation_timeout: Option<Duration>,
    /// The passes each plan goes through (a function's session takes its caller's).
    optimizations: GraphOptimizations,
    /// The device of each node (an index into `devices`), placed on first use.
    placement: Mutex<Option<Arc<[usize]>>>,
    /// Variable values, by name; each step that runs holds the lock while it runs, so
    /// concurrent runs see each assignment whole. The sessions of the functions it calls
    /// share them.
    variables: Arc<Mutex<Variables>>,
    /// The plans of the signatures run, the least recently used dropped past
    /// [`PLAN_CACHE_CAPACITY`].
    plans: Mutex<PlanCache>,
    /// `Const` values already on their device, by node: decoded once, as TensorFlow's
    /// `Const` kernel holds its tensor.
    constants: Vec<OnceLock<Tensor>>,
    /// Fed tensors the runs so far copied to another device: (node, index, to, from).
    fed_copies: Mutex<BTreeSet<(usize, usize, usize, String)>>,
    /// The functions of the graph's library that `While`, `If` and `PartitionedCall` nodes
    /// have called, instantiated.
    functions: call::Functions,
    /// The communicator collective ops run through ([`Session::with_collectives`]).
    collectives: Option<Arc<dyn Collectives>>,
}

/// The guarded value, whether or not a thread panicked while holding it (every value a
/// session guards is whole between steps).
fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What a plan depends on: fed tensors, fetched tensors and target operations.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Signature {
    feeds: Vec<(usize, usize)>,
    fetches: Vec<(usize, usize)>,
    targets: Vec<usize>,
}

/// How a session places operations: the parts of TensorFlow's `ConfigProto` that apply.
#[derive(Clone, Debug)]
pub struct SessionOptions {
    /// The devices operations may run on, the default first (operations that ask for no
    /// device, and those soft placement moves, run there where they can).
    pub devices: Vec<Arc<dyn Device>>,
    /// TensorFlow's `allow_soft_placement`: a request for a device the session lacks, or
    /// one that cannot run the operation, falls back to the default device (true, the
    /// default here as in TensorFlow 2) or is an `Err` (false).
    pub allow_soft_placement: bool,
    /// TensorFlow's `operation_timeout_in_ms`: how long a run may take where its
    /// [`RunOptions`] give no timeout (`None`, the default: without end).
    pub operation_timeout: Option<Duration>,
    /// The graph passes a session's plans go through (TensorFlow's `RewriterConfig`):
    /// every one on by default.
    pub optimizations: GraphOptimizations,
}

/// The passes that rewrite each plan before it first runs, as TensorFlow's grappler
/// rewrites a graph for inference (its `RewriterConfig`). None changes what a run returns
/// beyond floating-point rounding; each can be switched off to compare or to debug.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraphOptimizations {
    /// Grappler's `constant_folding`: the operations that depend on constants alone run
    /// once, when the plan is made, and the plan keeps their results in place of them.
    pub constant_folding: bool,
    /// Grappler's `remapping`: a convolution with its bias or batch norm, per-channel
    /// scale and shift, and activation, run as one fused step.
    pub remapping: bool,
    /// Mixed precision in bf16 (grappler's `auto_mixed_precision_onednn_bfloat16`, for
    /// inference): off by default, as in TensorFlow. On a device that multiplies bf16
    /// natively (a CPU with AVX512-BF16: [`Device::bf16_weights`]), each f32
    /// convolution's constant filter is rounded to bf16 once, when the plan is made, and
    /// its activations as the GEMM packs them; products are summed in f32, and results,
    /// epilogues and every other op stay f32. Results move by bf16's rounding (8
    /// significant bits): PERFORMANCE.md gives each zoo model's distance from f32. Without
    /// such a device nothing changes.
    pub bf16_weights: bool,
    /// oneDNN's reordered weights: each large constant filter of an f32 convolution (not
    /// depthwise) is laid out once, when the plan is made, as its device asks
    /// ([`Device::filter_strip`]: on the CPU, in strips of 64 output channels, so that the
    /// GEMM of a late layer at a small batch streams it from memory in order). The step
    /// keeps the filter as given too, for whatever the kernel does not run.
    pub packed_filters: bool,
    /// TensorFlow's inter-op parallelism, for independent branches: where two or more
    /// convolutions or matmuls on a CPU device read nothing of each other (Inception's
    /// towers, attention's query, key and value), they run side by side on the thread
    /// pool, each kernel's own parallel loops within it (one pool: the cores are not
    /// oversubscribed). Results do not change.
    pub parallel_branches: bool,
}

impl Default for GraphOptimizations {
    fn default() -> Self {
        GraphOptimizations {
            constant_folding: true,
            remapping: true,
            bf16_weights: false,
            packed_filters: true,
            parallel_branches: true,
        }
    }
}

impl GraphOptimizations {
    /// Every pass off: each node runs as the graph has it.
    pub const NONE: GraphOptimizations = GraphOptimizations {
        constant_folding: false,
        remapping: false,
        bf16_weights: false,
        packed_filters: false,
        parallel_branches: false,
    };
}

impl SessionOptions {
    /// Options over `devices` with soft placement.
    pub fn new(devices: Vec<Arc<dyn Device>>) -> Self {
        SessionOptions {
            devices,
            allow_soft_placement: true,
            operation_timeout: None,
            optimizations: GraphOptimizations::default(),
        }
    }
}

impl Session {
    /// A session over a snapshot of `graph` (operations added to `graph` later are not in
    /// it), running every operation on `device` (device requests fall back to it).
    pub fn new(graph: &Graph, device: Arc<dyn Device>) -> Self {
        Self::open(graph, vec![device], true)
    }

    /// A session over a snapshot of `graph` on `options.devices`, placing each operation
    /// as its `device` field asks. `Err` if no device is given.
    pub fn with_options(graph: &Graph, options: SessionOptions) -> Result<Self> {
        if options.devices.is_empty() {
            return Err(Error::invalid("a session needs at least one device"));
        }
        let mut session = Self::open(graph, options.devices, options.allow_soft_placement);
        session.operation_timeout = options.operation_timeout;
        session.optimizations = options.optimizations;
        Ok(session)
    }

    fn open(graph: &Graph, devices: Vec<Arc<dyn Device>>, soft_placement: bool) -> Self {
        Self::sharing(graph, devices, soft_placement, Arc::default(), None)
    }

    /// The session, running its collective ops (`CollectiveReduceV2`, `CollectiveGatherV2`,
    /// `CollectiveBcastSendV2`/`RecvV2`) through `collectives`, a communicator whose every
    /// member runs the same graph (polytensor-distributed's MPI `Communicator`, under
    /// `mpirun`). Without one, collective ops run only in groups of one.
    pub fn with_collectives(mut self, collectives: Arc<dyn Collectives>) -> Self {
        self.collectives = Some(collectives);
        self
    }

    /// A session whose variables are `variables` and whose communicator is `collectives`
    /// (a function's session shares its caller's).
    fn sharing(
        graph: &Graph,
        devices: Vec<Arc<dyn Device>>,
        soft_placement: bool,
        variables: Arc<Mutex<Variables>>,
        collectives: Option<Arc<dyn Collectives>>,
    ) -> Self {
        Session {
            graph: graph.clone(),
            devices,
            soft_placement,
            operation_timeout: None,
            optimizations: GraphOptimizations::default(),
            placement: Mutex::new(None),
            variables,
            plans: Mutex::new(PlanCache::new(PLAN_CACHE_CAPACITY)),
            constants: (0..graph.len()).map(|_| OnceLock::new()).collect(),
            fed_copies: Mutex::new(BTreeSet::new()),
            functions: call::Functions::default(),
            collectives,
        }
    }

    /// Take in the operations added to the session's graph since the session was made (or
    /// last extended): `graph` must be that graph grown, every operation the session has
    /// still there under the same index, name and type (TensorFlow's `Session::Extend`,
    /// which its sessions do before each run). Variables are kept; placement, plans and
    /// decoded constants are made again on the next run.
    pub fn extend(&mut self, graph: &Graph) -> Result<()> {
        let old = &self.graph.nodes;
        let grown = graph.nodes.len() >= old.len()
            && old
                .iter()
                .zip(graph.nodes.iter())
                .all(|(a, b)| a.name == b.name && a.op_type == b.op_type && a.inputs == b.inputs);
        if !grown {
            return Err(Error::invalid(
                "Session::extend needs the session's graph with operations added, not another \
                 graph",
            ));
        }
        self.graph = graph.clone();
        // Placement is made again and may move a `Const`: decode every one anew.
        self.constants = (0..graph.nodes.len()).map(|_| OnceLock::new()).collect();
        *locked(&self.placement) = None;
        locked(&self.plans).clear();
        locked(&self.fed_copies).clear();
        self.functions = call::Functions::default();
        Ok(())
    }

    /// The default device: where operations that ask for none run.
    pub fn device(&self) -> &Arc<dyn Device> {
        &self.devices[0]
    }

    /// The devices operations may run on, the default first.
    pub fn devices(&self) -> &[Arc<dyn Device>] {
        &self.devices
    }

    /// How many execution plans the session has cached (one per distinct signature of
    /// feeds, fetches and targets run, at most [`PLAN_CACHE_CAPACITY`]: past it the plan
    /// used least recently is dropped).
    pub fn cached_plans(&self) -> usize {
        locked(&self.plans).len()
    }

    /// The graph this session runs.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Run the operations `fetches` and `targets` need, with `feeds` replacing the values of
    /// the tensors they name, and return the fetched values in order (each on the device
    /// of the operation that produced it; a fed tensor as it was fed). Variable updates
    /// persist across calls. A tensor fed twice in one call is an `Err` naming it (a fetch
    /// may repeat).
    pub fn run(
        &self,
        feeds: &[(&Output, &Tensor)],
        fetches: &[&Output],
        targets: &[&Operation],
    ) -> Result<Vec<Tensor>> {
        self.run_with(&RunOptions::default(), feeds, fetches, targets)
    }

    /// [`run`](Self::run) that stops early as `options` say: past its timeout (or the
    /// session's [`operation_timeout`](SessionOptions::operation_timeout)) it is an
    /// [`Error::DeadlineExceeded`], once its handle is cancelled an [`Error::Cancelled`],
    /// with TensorFlow's messages. A run that stops frees what it made; the session takes
    /// the next run as before.
    pub fn run_with(
        &self,
        options: &RunOptions,
        feeds: &[(&Output, &Tensor)],
        fetches: &[&Output],
        targets: &[&Operation],
    ) -> Result<Vec<Tensor>> {
        let stop = Stop::starting(options, self.operation_timeout);
        let signature = self.signature(feeds, fetches, targets)?;
        for (i, fed) in signature.feeds.iter().enumerate() {
            if let Some(first) = signature.feeds[..i].iter().position(|f| f == fed) {
                return Err(Error::invalid(format!(
                    "Duplicate feed: {} is fed more than once in one run (feeds {first} and \
                     {i}); feed each tensor once",
                    feeds[i].0.name()
                )));
            }
        }
        for ((output, value), &(node, index)) in feeds.iter().zip(&signature.feeds) {
            self.check_feed(output, value, node, index)?;
        }
        let fed: Vec<Value> = feeds
            .iter()
            .map(|(_, t)| Value::Tensor((*t).clone()))
            .collect();
        let started = Instant::now();
        let fetched = self.run_signature(signature, &fed, &stop);
        if let Some((trace, _)) = &stop.trace {
            trace.finish_run(started.elapsed());
        }
        fetched?
            .into_iter()
            .map(|value| match value {
                Value::Tensor(t) => Ok(t),
                Value::Ref(name) => locked(&self.variables).get(&name).cloned().ok_or_else(|| {
                    Error::invalid(format!("Attempting to use uninitialized value {name}"))
                }),
                Value::Resource(name) => Err(Error::invalid(format!(
                    "cannot fetch the resource handle of variable {name}"
                ))),
                Value::List(_) => Err(Error::invalid(
                    "cannot fetch a TensorList (a variant tensor): fetch its elements, with \
                     TensorListStack or TensorListGetItem",
                )),
            })
            .collect()
    }

    /// Run the plan of `signature` (made on first use) with `fed` values, giving the
    /// fetched values as they are (a handle stays a handle), stopping where `stop` says.
    fn run_signature(
        &self,
        signature: Signature,
        fed: &[Value],
        stop: &Stop,
    ) -> Result<Vec<Value>> {
        let cached = locked(&self.plans).get(&signature);
        let plan = match cached {
            Some(plan) => plan,
            None => {
                // Made outside the lock: a concurrent run may make the same plan too.
                let plan = Arc::new(self.plan(&signature)?);
                locked(&self.plans).insert(signature, plan.clone());
                plan
            }
        };
        match &plan.frames {
            Some(frames) => self.execute_frames(&plan, frames, fed, stop),
            None => self.execute(&plan, fed, stop),
        }
    }

    /// [`run`](Self::run) with tensors and operations named as TensorFlow names them
    /// (`"x:0"`, `"init"`).
    pub fn run_by_name(
        &self,
        feeds: &[(&str, &Tensor)],
        fetches: &[&str],
        targets: &[&str],
    ) -> Result<Vec<Tensor>> {
        self.run_by_name_with(&RunOptions::default(), feeds, fetches, targets)
    }

    /// [`run_with`](Self::run_with) with tensors and operations named as TensorFlow names
    /// them.
    pub fn run_by_name_with(
        &self,
        options: &RunOptions,
        feeds: &[(&str, &Tensor)],
        fetches: &[&str],
        targets: &[&str],
    ) -> Result<Vec<Tensor>> {
        let feed_outputs = feeds
            .iter()
            .map(|(name, _)| self.graph.tensor(name))
            .collect::<Result<Vec<_>>>()?;
        let fetch_outputs = fetches
            .iter()
            .map(|name| self.graph.tensor(name))
            .collect::<Result<Vec<_>>>()?;
        let target_ops = targets
            .iter()
            .map(|name| {
                self.graph.operation(name).ok_or_else(|| {
                    Error::invalid(format!(
                        "The name '{name}' refers to an Operation not in the graph."
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let feeds: Vec<(&Output, &Tensor)> = feed_outputs
            .iter()
            .zip(feeds.iter().map(|(_, t)| *t))
            .collect();
        let fetches: Vec<&Output> = fetch_outputs.iter().collect();
        let targets: Vec<&Operation> = target_ops.iter().collect();
        self.run_with(options, &feeds, &fetches, &targets)
    }

    fn signature(
        &self,
        feeds: &[(&Output, &Tensor)],
        fetches: &[&Output],
        targets: &[&Operation],
    ) -> Result<Signature> {
        let locate = |o: &Output| self.graph.locate(o);
        Ok(Signature {
            feeds: feeds
                .iter()
                .map(|(o, _)| locate(o))
                .collect::<Result<_>>()?,
            fetches: fetches.iter().map(|o| locate(o)).collect::<Result<_>>()?,
            targets: targets
                .iter()
                .map(|op| self.graph.node(op).map(|_| op.id))
                .collect::<Result<_>>()?,
        })
    }

    /// A feed must match the static dtype and be compatible with the static shape.
    fn check_feed(&self, output: &Output, value: &Tensor, node: usize, index: usize) -> Result<()> {
        let (dtype, shape) = &self.graph.nodes[node].outputs[index];
        if value.dtype() != *dtype {
            return Err(Error::invalid(format!(
                "Cannot feed value of dtype {} for Tensor {}, which has dtype {}",
                value.dtype(),
                output.name(),
                dtype
            )));
        }
        let fed = polytensor_core::PartialTensorShape::from(value.shape());
        if !shape.is_compatible_with(&fed) {
            return Err(Error::invalid(format!(
                "Cannot feed value of shape {} for Tensor {}, which has shape {}",
                python_shape(&fed),
                output.name(),
                python_shape(shape)
            )));
        }
        Ok(())
    }

    fn execute(&self, plan: &Plan, fed: &[Value], stop: &Stop) -> Result<Vec<Value>> {
        let mut run = RunValues {
            values: vec![None; self.graph.nodes.len()],
            copies: HashMap::new(),
        };
        // What a step that uses no variables is given in their place (never read).
        let mut unused = Variables::new();
        let mut side_by_side = plan.side_by_side.iter().peekable();
        let mut at = 0;
        while let Some(step) = plan.steps.get(at) {
            if let Some(range) = side_by_side.next_if(|range| range.start == at) {
                self.run_side_by_side(plan, &plan.steps[range.clone()], &mut run, fed, stop)?;
                at = range.end;
                continue;
            }
            at += 1;
            stop.check()?;
            if let Some(folded) = &step.folded {
                run.values[step.node] = Some(folded.clone());
                continue;
            }
            if let Some(constant) = self.constants[step.node].get() {
                run.values[step.node] = Some(smallvec![Value::Tensor(constant.clone())]);
                continue;
            }
            self.copy_inputs(plan, step, &mut run, fed)?;
            let inputs = self.inputs_of(step, &run, fed)?;
            let outputs = self.run_kernel(step, inputs, &mut unused, stop)?;
            run.values[step.node] = Some(outputs);
            run.release(step);
        }
        plan.fetches
            .iter()
            .map(|&source| read_value(&run.values, fed, &self.graph, source).cloned())
            .collect()
    }

    /// Run `steps` (a range of [`Plan::side_by_side`]: none reads another) on the thread
    /// pool together, then release what they were the last to read.
    fn run_side_by_side(
        &self,
        plan: &Plan,
        steps: &[Step],
        run: &mut RunValues,
        fed: &[Value],
        stop: &Stop,
    ) -> Result<()> {
        use rayon::prelude::*;
        stop.check()?;
        for step in steps {
            self.copy_inputs(plan, step, run, fed)?;
        }
        let inputs = steps
            .iter()
            .map(|step| self.inputs_of(step, run, fed))
            .collect::<Result<Vec<_>>>()?;
        let outputs: Vec<Result<Outputs>> = steps
            .par_iter()
            .zip(inputs)
            .map(|(step, inputs)| self.run_kernel(step, inputs, &mut Variables::new(), stop))
            .collect();
        for (step, outputs) in steps.iter().zip(outputs) {
            run.values[step.node] = Some(outputs?);
        }
        for step in steps {
            run.release(step);
        }
        Ok(())
    }

    /// Copy each input of `step` that lives on another device to the step's, once per run
    /// for every step on that device that reads it.
    fn copy_inputs(
        &self,
        plan: &Plan,
        step: &Step,
        run: &mut RunValues,
        fed: &[Value],
    ) -> Result<()> {
        for &source in step.inputs.iter().filter(|_| step.crosses) {
            let key = (source, step.device);
            if run.copies.contains_key(&key) {
                continue;
            }
            let value = read_value(&run.values, fed, &self.graph, source)?;
            if let Some(copy) = self.copy_here(plan, step, source, value)? {
                run.copies.insert(key, copy);
            }
        }
        Ok(())
    }

    /// The values `step` reads: its copies where an input crossed devices, the rounded
    /// weights where the plan made them.
    fn inputs_of<'v>(
        &self,
        step: &'v Step,
        run: &'v RunValues,
        fed: &'v [Value],
    ) -> Result<SmallVec<[&'v Value; 4]>> {
        let mut inputs: SmallVec<[&Value; 4]> = SmallVec::with_capacity(step.inputs.len());
        for (i, &source) in step.inputs.iter().enumerate() {
            let copy = step
                .crosses
                .then(|| run.copies.get(&(source, step.device)))
                .flatten();
            inputs.push(match (copy, &step.weights) {
                (_, Some(weights)) if i == 1 => weights,
                (Some(copy), _) => copy,
                _ => read_value(&run.values, fed, &self.graph, source)?,
            });
        }
        Ok(inputs)
    }

    /// `value` (read from `source`) copied to `step`'s device, or `None` where it is a
    /// handle or already there; a fed tensor's copy is recorded for [`Session::placement`].
    fn copy_here(
        &self,
        plan: &Plan,
        step: &Step,
        source: Source,
        value: &Value,
    ) -> Result<Option<Value>> {
        let device = &self.devices[step.device];
        let t = match value {
            Value::Tensor(t) => t,
            Value::List(list) => {
                let moved = list
                    .on_device(device)
                    .map_err(|e| in_node(e, &self.graph.nodes[step.node]))?;
                return Ok(moved.map(|list| Value::List(Arc::new(list))));
            }
            _ => return Ok(None),
        };
        if same_device(t.device(), device) {
            return Ok(None);
        }
        let copy = t
            .to_device(device)
            .map_err(|e| in_node(e, &self.graph.nodes[step.node]))?;
        if let Source::Feed(i) = source {
            let (fed_node, index) = plan.feeds[i];
            let from = t.device().name().to_string();
            locked(&self.fed_copies).insert((fed_node, index, step.device, from));
        }
        Ok(Some(Value::Tensor(copy)))
    }

    /// Run one step's kernel (a call of the library's functions for a functional op)
    /// on inputs already on its device, with the variables' lock where it uses them
    /// (`unused` stands in for them otherwise), and keep a `Const`'s value. A call stops
    /// where `stop` says.
    #[inline(always)]
    fn run_kernel<'a>(
        &'a self,
        step: &Step,
        inputs: SmallVec<[&'a Value; 4]>,
        unused: &mut Variables,
        stop: &Stop,
    ) -> Result<Outputs> {
        let graph = &self.graph;
        let node = &graph.nodes[step.node];
        let device = &self.devices[step.device];
        if let Kind::Call(call) = step.kind {
            let scoped;
            let stop = match stop.trace {
                Some(_) => {
                    scoped = stop.within(&node.name);
                    &scoped
                }
                None => stop,
            };
            return self
                .call(call, node, step.device, &inputs, stop)
                .map_err(|e| in_node(e, node));
        }
        let started = stop.trace.as_ref().map(|_| Instant::now());
        let chain = if step.chain.is_empty() {
            SmallVec::new()
        } else {
            step.chain.iter().map(|&n| &graph.nodes[n]).collect()
        };
        let collectives = self.collectives.as_deref();
        let outputs = if step.uses_variables {
            run_step(
                step,
                node,
                device,
                &mut locked(&self.variables),
                inputs,
                chain,
                collectives,
            )
        } else {
            run_step(step, node, device, unused, inputs, chain, collectives)
        }?;
        if let (Kind::Const, [Value::Tensor(t)]) = (step.kind, outputs.as_slice()) {
            let _ = self.constants[step.node].set(t.clone());
        }
        if let (Some((trace, scope)), Some(started)) = (&stop.trace, started) {
            self.record(trace, scope, step, &outputs, started)?;
        }
        Ok(outputs)
    }

    /// Record `step`, which started at `started` and made `outputs`, in `trace` once its
    /// device has finished it.
    #[cold]
    fn record(
        &self,
        trace: &Trace,
        scope: &str,
        step: &Step,
        outputs: &[Value],
        started: Instant,
    ) -> Result<()> {
        let graph = &self.graph;
        let node = &graph.nodes[step.node];
        let device = &self.devices[step.device];
        device.synchronize().map_err(|e| in_node(e, node))?;
        let ended = Instant::now();
        let mut op = String::new();
        for &n in step.chain.iter().filter(|&&n| n != step.node) {
            op.push_str(&graph.nodes[n].op_type);
            op.push('+');
        }
        op.push_str(&node.op_type);
        let record = StepRecord {
            name: format!("{scope}{}", node.name),
            op,
            device: device.name(),
            outputs,
        };
        trace.record(record, started, ended);
        Ok(())
    }
}

/// Run one step's kernel with `variables` (the session's, held for the step, or an empty
/// stand-in for a step that uses none).
#[inline(always)]
fn run_step<'a, 'v>(
    step: &'v Step,
    node: &'a crate::graph::Node,
    device: &'a Arc<dyn Device>,
    variables: &'v mut Variables,
    inputs: SmallVec<[&'a Value; 4]>,
    chain: SmallVec<[&'a crate::graph::Node; 2]>,
    collectives: Option<&'a dyn Collectives>,
) -> Result<Outputs> {
    let mut cx = RunCtx {
        node,
        device,
        variables,
        inputs,
        chain,
        collectives,
        packed: step.packed.as_ref(),
    };
    kernels::run(step.kind, &mut cx).map_err(|e| in_node(e, node))
}

/// What a run of a plan without frames holds: each node's outputs (until its last reader
/// has run), and the tensors copied to a device other than their producer's, by (source,
/// device): made once per run for every step on that device that reads them.
struct RunValues {
    values: Vec<Option<Outputs>>,
    copies: HashMap<(Source, usize), Value>,
}

impl RunValues {
    /// Drop what `step` was the last to read (and its copies).
    fn release(&mut self, step: &Step) {
        for &done in &step.release {
            self.values[done] = None;
            if !self.copies.is_empty() {
                self.copies.retain(
                    |(key, _), _| !matches!(key, Source::Node { node, .. } if *node == done),
                );
            }
        }
    }
}

/// The value `source` names while a plan runs.
fn read_value<'v>(
    values: &'v [Option<Outputs>],
    fed: &'v [Value],
    graph: &Graph,
    source: Source,
) -> Result<&'v Value> {
    match source {
        Source::Feed(i) => Ok(&fed[i]),
        Source::Node { node, index } => values[node]
            .as_ref()
            .and_then(|outputs| outputs.get(index))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "output {index} of '{}' was not produced",
                    graph.nodes[node].name
                ))
            }),
    }
}

/// Name the node an error came from, as TensorFlow does (`[[{{node x}}]]`).
fn in_node(error: Error, node: &crate::graph::Node) -> Error {
    match error {
        Error::InvalidArgument(message) => {
            Error::InvalidArgument(format!("{message}\n\t [[{{{{node {}}}}}]]", node.name))
        }
        other => other,
    }
}
