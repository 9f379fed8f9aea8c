//! TensorFlow's placer on polytensor's devices: which of a session's devices each operation
//! runs on.
//!
//! - **Requests.** A node's `device` field is TensorFlow's device name, whole or in part
//!   (`/job:localhost/replica:0/task:0/device:GPU:1`, `/device:CPU:0`, `/gpu:0`, `GPU:*`),
//!   or a polytensor device name (`wgpu:0`, `opencl:0`, `cuda:0`). `CPU:n` is the session's
//!   n-th CPU device; `GPU:n` its n-th device that is not a CPU, in the order the session
//!   lists them (the registry's order: CUDA, OpenCL, wgpu); a backend's own type (`WGPU`,
//!   `OPENCL`, `CUDA`) its n-th device of that backend. A request without a type (only a
//!   job, replica or task) constrains nothing.
//! - **Colocation.** A node whose `_class` attribute lists `loc:@other` runs where `other`
//!   runs, and so does an op that reads or writes a variable (its handle or reference)
//!   with the variable: the group takes the first explicit request of its members.
//! - **Soft placement.** A group whose request names no device of the session, or a device
//!   that cannot hold or compute its dtypes, runs on the session's default device (its
//!   first) or else the first device that can; without soft placement that is an `Err`
//!   with TensorFlow's words. Ops that ask for nothing run on the default device where it
//!   can run them (where no device can, on the default device, whose kernel then says
//!   why).
//!
//! Whether a device can run a node is decided from the kernel surface, as every op is
//! composed from it: the device must hold every input and output dtype (strings only on
//! CPUs), and support the elementwise op, matmul or reduction the node is.

use std::sync::Arc;

use polytensor_core::{DataType, Device, Error, Op, Result};

use crate::attr::{AttrKind, Attrs};
use crate::graph::{Graph, Node};
use crate::ops::Kind;

/// A parsed device request: the device type (upper case: `CPU`, `GPU`, `WGPU`, ...) and
/// index, each absent where the request leaves it open.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceSpec {
    /// The device type, upper case; `None` for any.
    pub kind: Option<String>,
    /// The index among the session's devices of that type; `None` for any (`*`).
    pub index: Option<usize>,
}

impl DeviceSpec {
    /// Parse TensorFlow's device name syntax (or a polytensor device name); the empty
    /// string asks for nothing. `Err` for a malformed name, as TensorFlow's.
    pub fn parse(spec: &str) -> Result<DeviceSpec> {
        let malformed = || Error::invalid(format!("Malformed device specification '{spec}'"));
        let mut parsed = DeviceSpec::default();
        for part in spec.split('/').filter(|p| !p.is_empty()) {
            let fields: Vec<&str> = part.split(':').collect();
            let (kind, index) = match fields.as_slice() {
                ["job", name] if !name.is_empty() => continue,
                ["replica" | "task", n] if n.parse::<usize>().is_ok() => continue,
                ["device", kind] => (*kind, "*"),
                ["device", kind, index] => (*kind, *index),
                [kind, index] => (*kind, *index),
                _ => return Err(malformed()),
            };
            let valid_kind =
                !kind.is_empty() && kind.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid_kind {
                return Err(malformed());
            }
            parsed.kind = Some(kind.to_ascii_uppercase());
            parsed.index = match index {
                "*" => None,
                n => Some(n.parse().map_err(|_| malformed())?),
            };
        }
        Ok(parsed)
    }

    /// The session's devices (indices into `devices`) this request matches.
    fn matches(&self, devices: &[Arc<dyn Device>]) -> Vec<usize> {
        let is_cpu = |d: &Arc<dyn Device>| d.kind().name() == "cpu";
        let of_kind: Vec<usize> = (0..devices.len())
            .filter(|&i| match self.kind.as_deref() {
                None => true,
                Some("CPU") => is_cpu(&devices[i]),
                Some("GPU") => !is_cpu(&devices[i]),
                Some(kind) => devices[i].kind().name().eq_ignore_ascii_case(kind),
            })
            .collect();
        match self.index {
            Some(n) => of_kind.get(n).copied().into_iter().collect(),
            None => of_kind,
        }
    }
}

/// The core op a node of `kind` computes with, where one decides whether a device runs it.
fn core_op(kind: Kind) -> Option<Op> {
    Some(match kind {
        Kind::Binary(op) | Kind::Compare(op) => Op::Binary(op),
        Kind::Unary(op) => Op::Unary(op),
        Kind::MatMul | Kind::BatchMatMul | Kind::Einsum => Op::Matmul,
        Kind::Reduce(op) => Op::Reduce(op),
        Kind::Cast => Op::Cast,
        _ => return None,
    })
}

/// Whether `device` can hold tensors of `dtype`.
fn holds(device: &dyn Device, dtype: DataType) -> bool {
    match dtype {
        DataType::String => device.kind().name() == "cpu",
        DataType::Resource | DataType::Variant => true,
        _ => device.supports(Op::Copy, dtype),
    }
}

/// Whether `device` can run node `node` of `graph`.
pub(crate) fn runs(graph: &Graph, node: &Node, device: &dyn Device) -> bool {
    let inputs = node
        .inputs
        .iter()
        .map(|&(n, i)| graph.nodes[n].outputs[i].0);
    let mut dtypes = inputs.clone().chain(node.outputs.iter().map(|o| o.0));
    if !dtypes.all(|dtype| holds(device, dtype)) {
        return false;
    }
    let computed = inputs.clone().next().or(node.outputs.first().map(|o| o.0));
    match (core_op(node.kind), computed) {
        (Some(Op::Cast), _) => inputs
            .chain(node.outputs.iter().map(|o| o.0))
            .all(|d| device.supports(Op::Cast, d)),
        (Some(op), Some(dtype)) => device.supports(op, dtype),
        _ => true,
    }
}

/// Colocation groups: a union-find over nodes.
struct Groups(Vec<usize>);

impl Groups {
    fn root(&mut self, mut n: usize) -> usize {
        while self.0[n] != n {
            self.0[n] = self.0[self.0[n]];
            n = self.0[n];
        }
        n
    }

    fn join(&mut self, a: usize, b: usize) {
        let (a, b) = (self.root(a), self.root(b));
        if a != b {
            self.0[a.max(b)] = a.min(b);
        }
    }

    /// The groups' members, each group in node order, groups of several nodes and single
    /// nodes alike.
    fn members(mut self) -> Vec<Vec<usize>> {
        let count = self.0.len();
        let mut members: Vec<Vec<usize>> = vec![Vec::new(); count];
        for n in 0..count {
            let root = self.root(n);
            members[root].push(n);
        }
        members.retain(|m| !m.is_empty());
        members
    }
}

/// A node's `_class` attribute: TensorFlow writes a list of strings; a single string is
/// taken as a list of one.
fn classes(node: &Node) -> Result<Vec<String>> {
    match node.attrs.get("_class").and_then(|v| v.value.as_ref()) {
        Some(AttrKind::S(s)) => Ok(vec![String::from_utf8_lossy(s).into_owned()]),
        _ => Attrs {
            node: &node.name,
            attrs: &node.attrs,
        }
        .strings("_class"),
    }
}

/// The colocation groups of `graph`: `_class` attributes (`loc:@name` of a node the graph
/// has) and, with `variables`, variable edges.
fn colocation(graph: &Graph, variables: bool) -> Result<Groups> {
    let mut groups = Groups((0..graph.nodes.len()).collect());
    for (n, node) in graph.nodes.iter().enumerate() {
        for class in classes(node)? {
            {
                let Some(other) = class.strip_prefix("loc:@") else {
                    continue;
                };
                // A colocation with a node the graph lacks is refused when a GraphDef is
                // imported, as TensorFlow's importer refuses it; one a builder made is not
                // honoured (it is kept and written back).
                let Some(target) = graph.node_index(other) else {
                    continue;
                };
                groups.join(n, target);
            }
        }
        // Resource and reference edges colocate, as TensorFlow's: a variable op goes with
        // its variable (its first input).
        if variables && node.kind.acts_on_variable() {
            if let Some(&(variable, _)) = node.inputs.first() {
                groups.join(n, variable);
            }
        }
    }
    Ok(groups)
}

/// The device (an index into `devices`) each node of `graph` runs on; `devices[0]` is the
/// default. `Err` for a malformed request or a request no device satisfies without `soft`
/// placement. A node no device can run goes to the
/// default device, whose kernel reports the error when it runs.
pub(crate) fn place(graph: &Graph, devices: &[Arc<dyn Device>], soft: bool) -> Result<Vec<usize>> {
    let count = graph.nodes.len();
    if !soft {
        // The groups `_class` makes must not pin two devices (a variable's ops follow it,
        // whatever they ask for).
        for group in colocation(graph, false)?.members() {
            check_group_requests(graph, &group)?;
        }
    }
    let members = colocation(graph, true)?.members();
    let mut placement = vec![0; count];
    for group in &members {
        let fits = |d: usize| {
            group
                .iter()
                .all(|&n| runs(graph, &graph.nodes[n], devices[d].as_ref()))
        };
        let request = group
            .iter()
            .map(|&n| &graph.nodes[n])
            .find(|node| !node.device.is_empty());
        let mut chosen = None;
        if let Some(node) = request {
            let spec = DeviceSpec::parse(&node.device).map_err(|e| in_node(e, node))?;
            let matching = spec.matches(devices);
            chosen = matching.iter().copied().find(|&d| fits(d));
            if chosen.is_none() && !soft {
                return Err(unsatisfiable(node, &spec, &matching, devices));
            }
        }
        // Where no device can run the group, the default device's kernel says why when
        // it runs.
        let chosen = chosen
            .or_else(|| (0..devices.len()).find(|&d| fits(d)))
            .unwrap_or(0);
        for &n in group {
            placement[n] = chosen;
        }
    }
    Ok(placement)
}

/// Without soft placement, the device requests of a colocation group must agree (one may
/// leave open what another names): TensorFlow's error for two that cannot merge.
fn check_group_requests(graph: &Graph, group: &[usize]) -> Result<()> {
    let mut merged: Option<(&Node, DeviceSpec)> = None;
    for &n in group {
        let node = &graph.nodes[n];
        if node.device.is_empty() {
            continue;
        }
        let spec = DeviceSpec::parse(&node.device).map_err(|e| in_node(e, node))?;
        let Some((first, so_far)) = merged.take() else {
            merged = Some((node, spec));
            continue;
        };
        let clash = match (&so_far.kind, &spec.kind, so_far.index, spec.index) {
            (Some(a), Some(b), _, _) if a != b => Some("types"),
            (_, _, Some(a), Some(b)) if a != b => Some("ids"),
            _ => None,
        };
        if let Some(what) = clash {
            return Err(Error::invalid(format!(
                "Cannot colocate nodes {{{{colocation_node {}}}}} and {{{{colocation_node {}}}}}: \
                 Cannot merge devices with incompatible {what}: '{}' and '{}'",
                first.name, node.name, first.device, node.device
            )));
        }
        let spec = DeviceSpec {
            kind: so_far.kind.or(spec.kind),
            index: so_far.index.or(spec.index),
        };
        merged = Some((first, spec));
    }
    Ok(())
}

/// The session's device names, comma-separated.
fn names(devices: &[Arc<dyn Device>]) -> String {
    devices
        .iter()
        .map(|d| d.name().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// TensorFlow's error for a request that cannot be met without soft placement.
fn unsatisfiable(
    node: &Node,
    spec: &DeviceSpec,
    matching: &[usize],
    devices: &[Arc<dyn Device>],
) -> Error {
    let request = &node.device;
    Error::invalid(if matching.is_empty() {
        format!(
            "Cannot assign a device for operation {name}: {{{{node {name}}}}} was explicitly \
             assigned to {request} but available devices are [ {} ]. Make sure the device \
             specification refers to a valid device.",
            names(devices),
            name = node.name,
        )
    } else {
        format!(
            "Cannot assign a device for operation {}: Could not satisfy explicit device \
             specification '{request}' because no supported kernel for {} devices is \
             available.",
            node.name,
            spec.kind.as_deref().unwrap_or("these"),
        )
    })
}

/// Name the node a device request came from.
fn in_node(error: Error, node: &Node) -> Error {
    match error {
        Error::InvalidArgument(message) => {
            Error::InvalidArgument(format!("{message} in node {}", node.name))
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: Option<&str>, index: Option<usize>) -> DeviceSpec {
        DeviceSpec {
            kind: kind.map(str::to_string),
            index,
        }
    }

    #[test]
    fn device_names_parse_as_tensorflow_writes_them() {
        let parse = |s| DeviceSpec::parse(s).unwrap();
        assert_eq!(parse(""), spec(None, None));
        assert_eq!(parse("/device:CPU:0"), spec(Some("CPU"), Some(0)));
        assert_eq!(
            parse("/job:localhost/replica:0/task:0/device:GPU:1"),
            spec(Some("GPU"), Some(1))
        );
        assert_eq!(parse("/gpu:0"), spec(Some("GPU"), Some(0)));
        assert_eq!(parse("/device:GPU:*"), spec(Some("GPU"), None));
        assert_eq!(parse("/job:worker/task:1"), spec(None, None));
        assert_eq!(parse("wgpu:0"), spec(Some("WGPU"), Some(0)));
        assert_eq!(parse("opencl:1"), spec(Some("OPENCL"), Some(1)));
        for bad in [
            "/device:GPU:x",
            "/replica:a",
            "/foo",
            "/device::0",
            "gpu:0:1:2",
        ] {
            let error = DeviceSpec::parse(bad).unwrap_err().to_string();
            assert!(
                error.contains("Malformed device specification"),
                "{bad}: {error}"
            );
        }
    }
}
