//! `polytensor show MODEL`: what a model holds, as `saved_model_cli show` and
//! `inspect_checkpoint` tell it: inputs, outputs and signatures, the op types with their
//! counts and whether each device here runs them, the parameters; a checkpoint's keys.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use polytensor::graph::proto::{FunctionDefLibrary, GraphDef, NodeDef};
use polytensor::graph::{python_shape, Graph};
use polytensor::proto::TensorShapeProto;
use polytensor::saved_model::{MetaGraphDef, SavedModelProto, TensorInfo};
use polytensor::{DataType, Device, PartialTensorShape};
use prost::Message;

use crate::error::{CliError, CliResult, Context};
use crate::model::{read_bytes, sink_outputs, ModelPath};

/// The text `show` prints for `model`, with device columns for `devices`.
pub fn show(model: &ModelPath, devices: &[Arc<dyn Device>]) -> CliResult<String> {
    match model {
        ModelPath::Frozen(path) => {
            let bytes = read_bytes(path)?;
            let def = GraphDef::decode_shared(bytes.into())
                .context(format!("reading {} as a GraphDef", path.display()))?;
            let mut text = format!("{}: a frozen GraphDef\n", path.display());
            graph_summary(&mut text, &def, devices, true);
            Ok(text)
        }
        ModelPath::SavedModel(dir) => {
            let path = dir.join("saved_model.pb");
            let proto = SavedModelProto::decode(read_bytes(&path)?.as_slice()).map_err(|e| {
                CliError::bad_input(format!("{}: not a SavedModel: {e}", path.display()))
            })?;
            let mut text = String::new();
            for meta in &proto.meta_graphs {
                saved_model_summary(&mut text, dir, meta, devices)?;
            }
            if proto.meta_graphs.is_empty() {
                return Err(CliError::bad_input(format!(
                    "{}: no MetaGraph",
                    path.display()
                )));
            }
            Ok(text)
        }
        ModelPath::Checkpoint(prefix) => checkpoint_summary(prefix),
    }
}

fn saved_model_summary(
    text: &mut String,
    dir: &std::path::Path,
    meta: &MetaGraphDef,
    devices: &[Arc<dyn Device>],
) -> CliResult<()> {
    let info = meta.meta_info_def.clone().unwrap_or_default();
    let _ = writeln!(
        text,
        "{}: a SavedModel, MetaGraph with tags {:?} (TensorFlow {})",
        dir.display(),
        info.tags,
        if info.tensorflow_version.is_empty() {
            "?"
        } else {
            &info.tensorflow_version
        }
    );
    // (`__saved_model_init_op`, TensorFlow 2's init op, is no signature to call.)
    for (key, signature) in meta
        .signature_def
        .iter()
        .filter(|(key, _)| !key.starts_with("__"))
    {
        let _ = writeln!(text, "signature {key:?} ({}):", signature.method_name);
        for (title, infos) in [
            ("inputs", &signature.inputs),
            ("outputs", &signature.outputs),
        ] {
            let _ = writeln!(text, "  {title}:");
            for (name, info) in infos {
                let _ = writeln!(text, "    {name}: {}", tensor_info(info));
            }
        }
    }
    let prefix = dir.join("variables").join("variables");
    if polytensor::checkpoint::index_path(&prefix).is_file() {
        let reader = polytensor::checkpoint::Reader::open(&prefix)
            .context(format!("reading the variables {}", prefix.display()))?;
        let (mut count, mut values, mut bytes) = (0usize, 0usize, 0usize);
        for (_, entry) in reader.entries() {
            if entry.dtype() == DataType::String {
                continue;
            }
            count += 1;
            values += entry.shape().num_elements();
            bytes += entry.shape().num_elements() * entry.dtype().size();
        }
        let _ = writeln!(
            text,
            "variables: {} values, {} in {count} tensors ({})",
            thousands(values),
            human_bytes(bytes),
            prefix.display()
        );
    }
    if let Some(def) = &meta.graph_def {
        graph_summary(text, def, devices, false);
    }
    Ok(())
}

/// A signature's tensor: `float32 (-1, 4) <- serving_default_x:0`.
fn tensor_info(info: &TensorInfo) -> String {
    let dtype = DataType::from_i32(info.dtype).map_or_else(|e| e.to_string(), |d| d.to_string());
    let shape = info
        .tensor_shape
        .as_ref()
        .and_then(|s| PartialTensorShape::from_proto(s).ok())
        .map_or("<unknown>".to_string(), |s| python_shape(&s));
    format!("{dtype} {shape} <- {}", info.name)
}

/// Inputs and outputs (for a frozen graph), constants, and the op table of `def` and its
/// functions.
fn graph_summary(text: &mut String, def: &GraphDef, devices: &[Arc<dyn Device>], frozen: bool) {
    let library = match def.library.as_deref().map(FunctionDefLibrary::decode_bytes) {
        Some(Ok(library)) => library,
        Some(Err(e)) => {
            let _ = writeln!(text, "the function library is malformed: {e}");
            FunctionDefLibrary::default()
        }
        None => FunctionDefLibrary::default(),
    };
    let functions = library.function.len();
    let nodes: Vec<&NodeDef> = def
        .node
        .iter()
        .chain(library.function.iter().flat_map(|f| &f.node_def))
        .collect();
    let _ = writeln!(
        text,
        "{} operations in the graph, {} in {functions} functions",
        def.node.len(),
        nodes.len() - def.node.len()
    );
    let graph = Graph::from_graph_def(def);
    match &graph {
        Ok(graph) if frozen => {
            let _ = writeln!(text, "inputs:");
            for op in graph
                .operations()
                .filter(|op| op.op_type() == "Placeholder")
            {
                if let Ok(output) = graph.output(&op, 0) {
                    let _ = writeln!(text, "  {}", described(&output));
                }
            }
            let _ = writeln!(text, "outputs:");
            for output in sink_outputs(graph).unwrap_or_default() {
                let _ = writeln!(text, "  {}", described(&output));
            }
        }
        Ok(_) => {}
        Err(e) => {
            let _ = writeln!(text, "polytensor cannot import the graph: {e}");
        }
    }
    let (mut count, mut values, mut bytes) = (0usize, 0usize, 0usize);
    for node in nodes.iter().filter(|n| n.op == "Const") {
        if let Some((dtype, elements)) = constant(node) {
            count += 1;
            values += elements;
            bytes += elements.saturating_mul(dtype.size());
        }
    }
    let _ = writeln!(
        text,
        "constants{}: {} values, {} in {count} tensors",
        if frozen { " (the weights)" } else { "" },
        thousands(values),
        human_bytes(bytes)
    );
    op_table(text, &nodes, graph.ok().as_ref(), devices);
}

/// `x:0 float32 (-1, 4)`.
fn described(output: &polytensor::graph::Output) -> String {
    format!(
        "{} {} {}",
        output.name(),
        output.dtype(),
        python_shape(output.shape())
    )
}

/// A `Const` node's dtype and element count.
fn constant(node: &NodeDef) -> Option<(DataType, usize)> {
    use polytensor::graph::AttrKind;
    let Some(AttrKind::Tensor(tensor)) = node.attr.get("value").and_then(|v| v.value.as_ref())
    else {
        return None;
    };
    let dtype = DataType::from_i32(tensor.dtype).ok()?;
    let elements = tensor
        .tensor_shape
        .as_ref()
        .map_or(Some(1), |s: &TensorShapeProto| {
            s.dim.iter().try_fold(1usize, |n, d| {
                usize::try_from(d.size).ok().and_then(|d| n.checked_mul(d))
            })
        })?;
    Some((dtype, elements))
}

/// Op types with their counts, whether polytensor knows each, and whether each device
/// runs its nodes (as the placer judges them: every node, some of them, none).
fn op_table(
    text: &mut String,
    nodes: &[&NodeDef],
    graph: Option<&Graph>,
    devices: &[Arc<dyn Device>],
) {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for node in nodes {
        *counts.entry(node.op.as_str()).or_default() += 1;
    }
    // (op type, device) -> (nodes it runs, nodes), over the graph and its functions.
    let mut runs: BTreeMap<(String, usize), (usize, usize)> = BTreeMap::new();
    if let Some(graph) = graph {
        let bodies: Vec<Graph> = graph
            .function_graphs()
            .into_iter()
            .filter_map(|(_, g)| g.ok())
            .collect();
        for g in std::iter::once(graph).chain(&bodies) {
            for op in g.operations() {
                for (d, device) in devices.iter().enumerate() {
                    let cell = runs.entry((op.op_type().to_string(), d)).or_default();
                    cell.1 += 1;
                    if g.runs_on(&op, device.as_ref()).unwrap_or(false) {
                        cell.0 += 1;
                    }
                }
            }
        }
    }
    let known: std::collections::HashSet<&str> = polytensor::graph::op_types().collect();
    let width = counts.keys().map(|k| k.len()).max().unwrap_or(0).max(8);
    let _ = write!(text, "op types:\n  {:width$} {:>6}", "type", "count");
    for device in devices {
        let _ = write!(text, "  {:>10}", device.name());
    }
    text.push('\n');
    for (op, count) in counts {
        let _ = write!(text, "  {op:width$} {count:>6}");
        if !known.contains(op) {
            let _ = writeln!(text, "  not in polytensor");
            continue;
        }
        for d in 0..devices.len() {
            let cell = match runs.get(&(op.to_string(), d)) {
                None => "?".to_string(),
                Some(&(yes, all)) if yes == all => "yes".to_string(),
                Some(&(0, _)) => "no".to_string(),
                Some(&(yes, all)) => format!("{yes}/{all}"),
            };
            let _ = write!(text, "  {cell:>10}");
        }
        text.push('\n');
    }
}

/// Every key of a checkpoint with its dtype, shape and slices, as TensorFlow's
/// `inspect_checkpoint` lists them.
fn checkpoint_summary(prefix: &std::path::Path) -> CliResult<String> {
    let reader = polytensor::checkpoint::Reader::open(prefix)
        .context(format!("reading the checkpoint {}", prefix.display()))?;
    let mut lines = Vec::new();
    let (mut values, mut bytes) = (0usize, 0usize);
    for (key, entry) in reader.entries() {
        let elements = entry.shape().num_elements();
        values += elements;
        if entry.dtype() != DataType::String {
            bytes += elements * entry.dtype().size();
        }
        let mut line = format!("  {key} ({}) {}", entry.dtype(), entry.shape());
        if !entry.slices().is_empty() {
            let slices: Vec<String> = entry.slices().iter().map(|s| s.to_string()).collect();
            let _ = write!(line, " in slices {}", slices.join(" "));
        }
        lines.push(line);
    }
    Ok(format!(
        "{}: a checkpoint of {} tensors in {} shard{}, {} values, {}\n{}\n",
        prefix.display(),
        lines.len(),
        reader.num_shards(),
        if reader.num_shards() == 1 { "" } else { "s" },
        thousands(values),
        human_bytes(bytes),
        lines.join("\n")
    ))
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes in B, KiB, MiB or GiB.
pub fn human_bytes(bytes: usize) -> String {
    let units = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", units[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB");
    }
}
