//! Per-node timing of session runs: TensorFlow's `RunOptions.trace_level` with
//! `RunMetadata.step_stats`. A run given a [`Trace`] in its [`RunOptions`] records, for every
//! kernel it runs, the node, its op type (a fused chain's op types joined by `+`), its
//! device, when it started, how long it took and what it produced; [`StepStats`] sums them
//! by op type, lists the slowest nodes, and writes TensorFlow's `RunMetadata` proto and
//! Chrome's trace-event JSON.
//!
//! A traced step waits for its device to finish before its end is taken, so a GPU kernel's
//! time is its own, not the time to enqueue it (this serialises the device's queue: a traced
//! run is slower than an untraced one on an asynchronous device). A step that is a call of
//! the library's functions (`While`, `If`, `PartitionedCall`) records the nodes of the
//! function it runs, named `call_node/function_node`, instead of itself. `Const` nodes whose
//! value a session already holds run no kernel and record nothing.
//!
//! [`RunOptions`]: super::RunOptions

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use polytensor_core::proto::{Message, TensorShapeProto};
use polytensor_core::{DataType, TensorShape};

use super::locked;
use crate::ops::Value;

/// Where the runs given it record their steps, from any thread; clones share one record
/// (give each concurrent run its own to keep their steps apart).
///
/// ```
/// use polytensor_core::{DataType, PartialTensorShape, Tensor};
/// use polytensor_graph::{Graph, RunOptions, Session, Trace};
/// let mut g = Graph::new();
/// let x = g.placeholder(DataType::Float, &PartialTensorShape::unknown_rank())?;
/// let total = g.add(&x, &x)?;
/// let cpu = polytensor_cpu::CpuDevice::shared();
/// let session = Session::new(&g, cpu.clone());
/// let trace = Trace::new();
/// let options = RunOptions { trace: Some(trace.clone()), ..RunOptions::default() };
/// let three = Tensor::scalar(3.0f32, &cpu)?;
/// session.run_with(&options, &[(&x, &three)], &[&total], &[])?;
/// let stats = trace.take();
/// assert_eq!(stats.runs, 1);
/// assert!(stats.nodes.iter().any(|n| n.op == "AddV2"));
/// println!("{}", stats.summary(10));
/// # Ok::<(), polytensor_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Trace {
    /// When the trace began: every recorded start is measured from it.
    epoch: Instant,
    stats: Arc<Mutex<StepStats>>,
}

impl Default for Trace {
    fn default() -> Self {
        Self::new()
    }
}

impl Trace {
    /// An empty trace whose times count from now.
    pub fn new() -> Self {
        Trace {
            epoch: Instant::now(),
            stats: Arc::default(),
        }
    }

    /// What the runs so far recorded, leaving the trace empty (its times still count from
    /// when it was made).
    pub fn take(&self) -> StepStats {
        std::mem::take(&mut *locked(&self.stats))
    }

    /// A copy of what the runs so far recorded.
    pub fn stats(&self) -> StepStats {
        self.inspect(StepStats::clone)
    }

    /// `f` of what the runs so far recorded, without copying it (runs recording into the
    /// trace wait while `f` runs).
    pub fn inspect<R>(&self, f: impl FnOnce(&StepStats) -> R) -> R {
        f(&locked(&self.stats))
    }

    /// Record one step that started at `started` and ended now.
    pub(crate) fn record(&self, step: StepRecord<'_>, started: Instant, ended: Instant) {
        let outputs = step
            .outputs
            .iter()
            .enumerate()
            .filter_map(|(slot, value)| match value {
                Value::Tensor(t) => Some(OutputStats {
                    slot,
                    dtype: t.dtype(),
                    shape: t.shape().clone(),
                    bytes: t.num_elements().saturating_mul(t.dtype().size()) as u64,
                }),
                _ => None,
            })
            .collect();
        let stats = NodeStats {
            node: step.name,
            op: step.op,
            device: step.device.to_string(),
            start: started.saturating_duration_since(self.epoch),
            duration: ended.saturating_duration_since(started),
            outputs,
        };
        locked(&self.stats).nodes.push(stats);
    }

    /// Count one whole run that took `wall`.
    pub(crate) fn finish_run(&self, wall: Duration) {
        let mut stats = locked(&self.stats);
        stats.runs += 1;
        stats.wall += wall;
    }
}

/// What [`Trace::record`] is told about one step.
pub(crate) struct StepRecord<'a> {
    /// The node's name, with the calling nodes' names before it inside a function.
    pub(crate) name: String,
    /// The op type, or a fused chain's op types joined by `+`.
    pub(crate) op: String,
    /// The device's name.
    pub(crate) device: &'a str,
    /// What the step produced.
    pub(crate) outputs: &'a [Value],
}

/// What the traced runs recorded: TensorFlow's `StepStats`, in the order the steps ran.
#[derive(Clone, Debug, Default)]
pub struct StepStats {
    /// Every step of every traced run.
    pub nodes: Vec<NodeStats>,
    /// How many runs were traced.
    pub runs: usize,
    /// The runs' wall time, summed (kernels plus the session's own work between them).
    pub wall: Duration,
}

/// One step of a traced run: TensorFlow's `NodeExecStats`.
#[derive(Clone, Debug)]
pub struct NodeStats {
    /// The node (the last node of a fused chain; `call/node` inside a function).
    pub node: String,
    /// The op type, or a fused chain's op types joined by `+` (`Conv2D+BiasAdd+Relu`).
    pub op: String,
    /// The device it ran on.
    pub device: String,
    /// When it started, from when the [`Trace`] was made.
    pub start: Duration,
    /// How long its kernel took, the device's own work included.
    pub duration: Duration,
    /// The tensors it produced.
    pub outputs: Vec<OutputStats>,
}

/// One tensor a traced step produced: TensorFlow's `NodeOutput`.
#[derive(Clone, Debug)]
pub struct OutputStats {
    /// The output's index.
    pub slot: usize,
    /// Its dtype.
    pub dtype: DataType,
    /// Its shape.
    pub shape: TensorShape,
    /// Its size in bytes (elements times the dtype's size).
    pub bytes: u64,
}

impl NodeStats {
    /// The bytes of every tensor the step produced.
    pub fn output_bytes(&self) -> u64 {
        self.outputs.iter().map(|o| o.bytes).sum()
    }
}

/// The steps of one op type in a [`StepStats`], as [`StepStats::by_op_type`] gives them.
#[derive(Clone, Debug, PartialEq)]
pub struct OpTypeStats {
    /// The op type (or fused chain).
    pub op: String,
    /// How many steps of it ran, over every run.
    pub count: usize,
    /// Their time, summed over every run.
    pub total: Duration,
}

impl StepStats {
    /// The kernels' time summed over every run.
    pub fn kernel_time(&self) -> Duration {
        self.nodes.iter().map(|n| n.duration).sum()
    }

    /// The time of each op type, summed over every run, the longest first (ties by name).
    pub fn by_op_type(&self) -> Vec<OpTypeStats> {
        let mut by_op: HashMap<&str, (usize, Duration)> = HashMap::new();
        for node in &self.nodes {
            let entry = by_op.entry(&node.op).or_default();
            entry.0 += 1;
            entry.1 += node.duration;
        }
        let mut ops: Vec<OpTypeStats> = by_op
            .into_iter()
            .map(|(op, (count, total))| OpTypeStats {
                op: op.to_string(),
                count,
                total,
            })
            .collect();
        ops.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.op.cmp(&b.op)));
        ops
    }

    /// The nodes by their time summed over every run, the longest first, at most `n`:
    /// (node, op type, total time, times run).
    pub fn top_nodes(&self, n: usize) -> Vec<(&str, &str, Duration, usize)> {
        let mut by_node: HashMap<&str, (&str, Duration, usize)> = HashMap::new();
        for node in &self.nodes {
            let entry = by_node
                .entry(&node.node)
                .or_insert((&node.op, Duration::ZERO, 0));
            entry.1 += node.duration;
            entry.2 += 1;
        }
        let mut nodes: Vec<_> = by_node
            .into_iter()
            .map(|(name, (op, total, count))| (name, op, total, count))
            .collect();
        nodes.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(b.0)));
        nodes.truncate(n);
        nodes
    }

    /// A table of the op types and the `top` slowest nodes, times per run (TensorFlow's
    /// profiler's "op view" and "scope view", in text).
    pub fn summary(&self, top: usize) -> String {
        let runs = self.runs.max(1) as u32;
        let kernels = self.kernel_time();
        let share = |d: Duration| {
            if kernels.is_zero() {
                0.0
            } else {
                100.0 * d.as_secs_f64() / kernels.as_secs_f64()
            }
        };
        let ms = |d: Duration| d.as_secs_f64() * 1e3 / f64::from(runs);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} run(s): {:.3} ms per run, {} kernels taking {:.3} ms (summed: kernels run \
             side by side overlap)",
            self.runs,
            ms(self.wall),
            self.nodes.len() / runs as usize,
            ms(kernels),
        );
        let _ = writeln!(out, "\n{:>10} {:>6} {:>7}  op type", "ms/run", "%", "count");
        for op in self.by_op_type().iter().take(top) {
            let _ = writeln!(
                out,
                "{:>10.3} {:>5.1}% {:>7}  {}",
                ms(op.total),
                share(op.total),
                op.count / runs as usize,
                op.op
            );
        }
        let _ = writeln!(out, "\n{:>10} {:>6}  node (op type)", "ms/run", "%");
        for (name, op, total, _) in self.top_nodes(top) {
            let _ = writeln!(
                out,
                "{:>10.3} {:>5.1}%  {name} ({op})",
                ms(total),
                share(total)
            );
        }
        out
    }

    /// Chrome's trace-event JSON (opens in Perfetto and `chrome://tracing`): one complete
    /// event per step, a row per device, with the op type, the output shapes and bytes.
    pub fn chrome_trace(&self) -> String {
        let mut devices: Vec<&str> = Vec::new();
        let mut out = String::from("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[");
        for node in &self.nodes {
            let tid = match devices.iter().position(|&d| d == node.device) {
                Some(tid) => tid,
                None => {
                    devices.push(&node.device);
                    devices.len() - 1
                }
            };
            let shapes: Vec<String> = node
                .outputs
                .iter()
                .map(|o| json_string(&o.shape.to_string()))
                .collect();
            let _ = write!(
                out,
                "{{\"name\":{op},\"cat\":\"Op\",\"ph\":\"X\",\"pid\":0,\"tid\":{tid},\
                 \"ts\":{ts:.3},\"dur\":{dur:.3},\"args\":{{\"name\":{name},\"op\":{op},\
                 \"outputs\":[{shapes}],\"bytes\":{bytes}}}}},",
                op = json_string(&node.op),
                ts = node.start.as_secs_f64() * 1e6,
                dur = node.duration.as_secs_f64() * 1e6,
                name = json_string(&node.node),
                shapes = shapes.join(","),
                bytes = node.output_bytes(),
            );
        }
        for (tid, device) in devices.iter().enumerate() {
            let _ = write!(
                out,
                "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":{tid},\
                 \"args\":{{\"name\":{}}}}},",
                json_string(device)
            );
        }
        if out.ends_with(',') {
            out.pop();
        }
        out.push_str("]}");
        out
    }

    /// TensorFlow's `RunMetadata` proto with these steps as its `step_stats` (one
    /// `DeviceStepStats` per device), as `TF_SessionRun` writes its `run_metadata`:
    /// TensorFlow's `timeline.Timeline` and profiler read it.
    pub fn run_metadata_proto(&self) -> Vec<u8> {
        let mut by_device: Vec<DeviceStepStatsProto> = Vec::new();
        for node in &self.nodes {
            let at = match by_device.iter().position(|d| d.device == node.device) {
                Some(at) => at,
                None => {
                    by_device.push(DeviceStepStatsProto {
                        device: node.device.clone(),
                        node_stats: Vec::new(),
                    });
                    by_device.len() - 1
                }
            };
            let micros = |d: Duration| i64::try_from(d.as_micros()).unwrap_or(i64::MAX);
            let nanos = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
            by_device[at].node_stats.push(NodeExecStatsProto {
                node_name: node.node.clone(),
                all_start_micros: micros(node.start),
                op_start_rel_micros: 0,
                op_end_rel_micros: micros(node.duration),
                all_end_rel_micros: micros(node.duration),
                output: node
                    .outputs
                    .iter()
                    .map(|o| NodeOutputProto {
                        slot: i32::try_from(o.slot).unwrap_or(i32::MAX),
                        tensor_description: Some(TensorDescriptionProto {
                            dtype: o.dtype.as_i32(),
                            shape: Some(o.shape.to_proto()),
                            allocation_description: Some(AllocationDescriptionProto {
                                requested_bytes: i64::try_from(o.bytes).unwrap_or(i64::MAX),
                                allocated_bytes: i64::try_from(o.bytes).unwrap_or(i64::MAX),
                            }),
                        }),
                    })
                    .collect(),
                timeline_label: format!("{} = {}()", node.node, node.op),
                all_start_nanos: nanos(node.start),
                op_end_rel_nanos: nanos(node.duration),
                all_end_rel_nanos: nanos(node.duration),
            });
        }
        RunMetadataProto {
            step_stats: Some(StepStatsProto {
                dev_stats: by_device,
            }),
        }
        .encode_to_vec()
    }
}

/// `text` as a JSON string, quoted and escaped.
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// TensorFlow's `RunMetadata`, the part a traced run fills.
#[derive(Clone, PartialEq, prost::Message)]
struct RunMetadataProto {
    #[prost(message, optional, tag = "1")]
    step_stats: Option<StepStatsProto>,
}

/// TensorFlow's `StepStats`.
#[derive(Clone, PartialEq, prost::Message)]
struct StepStatsProto {
    #[prost(message, repeated, tag = "1")]
    dev_stats: Vec<DeviceStepStatsProto>,
}

/// TensorFlow's `DeviceStepStats`.
#[derive(Clone, PartialEq, prost::Message)]
struct DeviceStepStatsProto {
    #[prost(string, tag = "1")]
    device: String,
    #[prost(message, repeated, tag = "2")]
    node_stats: Vec<NodeExecStatsProto>,
}

/// TensorFlow's `NodeExecStats`, the fields a trace knows.
#[derive(Clone, PartialEq, prost::Message)]
struct NodeExecStatsProto {
    #[prost(string, tag = "1")]
    node_name: String,
    #[prost(int64, tag = "2")]
    all_start_micros: i64,
    #[prost(int64, tag = "3")]
    op_start_rel_micros: i64,
    #[prost(int64, tag = "4")]
    op_end_rel_micros: i64,
    #[prost(int64, tag = "5")]
    all_end_rel_micros: i64,
    #[prost(message, repeated, tag = "7")]
    output: Vec<NodeOutputProto>,
    #[prost(string, tag = "8")]
    timeline_label: String,
    #[prost(int64, tag = "13")]
    all_start_nanos: i64,
    #[prost(int64, tag = "15")]
    op_end_rel_nanos: i64,
    #[prost(int64, tag = "16")]
    all_end_rel_nanos: i64,
}

/// TensorFlow's `NodeOutput`.
#[derive(Clone, PartialEq, prost::Message)]
struct NodeOutputProto {
    #[prost(int32, tag = "1")]
    slot: i32,
    #[prost(message, optional, tag = "3")]
    tensor_description: Option<TensorDescriptionProto>,
}

/// TensorFlow's `TensorDescription`.
#[derive(Clone, PartialEq, prost::Message)]
struct TensorDescriptionProto {
    #[prost(int32, tag = "1")]
    dtype: i32,
    #[prost(message, optional, tag = "2")]
    shape: Option<TensorShapeProto>,
    #[prost(message, optional, tag = "4")]
    allocation_description: Option<AllocationDescriptionProto>,
}

/// TensorFlow's `AllocationDescription`, the sizes.
#[derive(Clone, PartialEq, prost::Message)]
struct AllocationDescriptionProto {
    #[prost(int64, tag = "1")]
    requested_bytes: i64,
    #[prost(int64, tag = "2")]
    allocated_bytes: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, op: &str, micros: u64) -> NodeStats {
        NodeStats {
            node: name.into(),
            op: op.into(),
            device: "cpu:0".into(),
            start: Duration::ZERO,
            duration: Duration::from_micros(micros),
            outputs: Vec::new(),
        }
    }

    #[test]
    fn op_types_and_nodes_are_summed_over_runs_the_longest_first() {
        let stats = StepStats {
            nodes: vec![
                node("a", "Conv2D", 30),
                node("b", "Relu", 5),
                node("c", "Conv2D", 10),
                node("a", "Conv2D", 30),
            ],
            runs: 2,
            wall: Duration::from_micros(100),
        };
        let ops = stats.by_op_type();
        assert_eq!(ops[0].op, "Conv2D");
        assert_eq!((ops[0].count, ops[0].total), (3, Duration::from_micros(70)));
        assert_eq!(ops[1].op, "Relu");
        let top = stats.top_nodes(2);
        assert_eq!(top[0], ("a", "Conv2D", Duration::from_micros(60), 2));
        assert_eq!(top[1].0, "c");
        let summary = stats.summary(5);
        assert!(
            summary.starts_with("2 run(s): 0.050 ms per run"),
            "{summary}"
        );
        assert!(summary.contains("Conv2D"));
        let trace: serde_json::Value = serde_json::from_str(&stats.chrome_trace()).unwrap();
        assert_eq!(trace["traceEvents"].as_array().unwrap().len(), 5);
        assert_eq!(json_string("a\"b\\\n"), r#""a\"b\\\u000a""#);
        let metadata = RunMetadataProto::decode(&stats.run_metadata_proto()[..]).unwrap();
        let devices = metadata.step_stats.unwrap().dev_stats;
        assert_eq!(devices.len(), 1);
        assert_eq!(devices[0].node_stats.len(), 4);
        assert_eq!(devices[0].node_stats[0].op_end_rel_micros, 30);
    }
}
