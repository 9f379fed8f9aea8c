//! TensorFlow's SavedModels: a directory holding `saved_model.pb` (graphs by tags, with
//! signatures) and `variables/` (a checkpoint), loaded as TensorFlow's C++ loader does
//! (`LoadSavedModel`): the graph that matches the tags is imported with its function
//! library, a session opens over the devices given, the saver's restore op runs with the
//! variables' checkpoint, then the init op (with the assets' paths fed). A signature then
//! runs by its input and output keys.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use polytensor_core::{DataType, Error, PartialTensorShape, Result, Tensor};
use prost::Message;

use crate::proto::FunctionDefLibrary;
use crate::{Graph, RunOptions, Session, SessionOptions};

mod freeze;
mod objects;
mod proto;

pub use objects::{
    ObjectReference, SavedConcreteFunction, SavedObject, SavedObjectGraph, SavedVariable,
    SerializedTensor, TrackableObject, TrackableObjectGraph,
};
pub use proto::{
    AssetFileDef, MetaGraphDef, MetaInfoDef, SavedModelProto, SaverDef, SignatureDef, TensorInfo,
};

/// The signature key TensorFlow 2 gives the init op (`__saved_model_init_op`).
const INIT_OP_SIGNATURE: &str = "__saved_model_init_op";

/// A loaded SavedModel: its session, with the variables restored, and its signatures.
///
/// ```no_run
/// # fn main() -> polytensor_core::Result<()> {
/// # let devices = vec![polytensor_cpu::CpuDevice::shared()];
/// use polytensor_graph::{SavedModel, SessionOptions};
/// let model = SavedModel::load("/tmp/exported", &["serve"], SessionOptions::new(devices))?;
/// let x = polytensor_core::Tensor::zeros([1, 4], polytensor_core::DataType::Float, &model.session().devices()[0])?;
/// let outputs = model.run("serving_default", &[("x", &x)])?;
/// println!("{}", outputs["output_0"]);
/// # Ok(()) }
/// ```
pub struct SavedModel {
    dir: PathBuf,
    tags: Vec<String>,
    graph: Graph,
    session: Session,
    signatures: BTreeMap<String, Signature>,
    /// The `MetaGraphDef` loaded, as TensorFlow wrote it.
    meta_graph_bytes: bytes::Bytes,
}

/// A signature: the graph's tensors behind its input and output keys.
#[derive(Debug, Clone, PartialEq)]
pub struct Signature {
    /// The inputs, by key.
    pub inputs: BTreeMap<String, TensorSpec>,
    /// The outputs, by key.
    pub outputs: BTreeMap<String, TensorSpec>,
    /// The method (`tensorflow/serving/predict`).
    pub method_name: String,
}

/// One input or output of a [`Signature`]: the tensor's name in the graph, its dtype and
/// its static shape.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorSpec {
    /// The graph tensor (`serving_default_x:0`).
    pub name: String,
    /// The dtype.
    pub dtype: DataType,
    /// The static shape (`None` dims are any size).
    pub shape: PartialTensorShape,
}

impl SavedModel {
    /// Load the graph of `dir` tagged exactly `tags` (in any order) into a session with
    /// `options`, restore its variables from `dir/variables` and run its init op.
    pub fn load(dir: impl AsRef<Path>, tags: &[&str], options: SessionOptions) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        let (mut meta_graph, meta_graph_bytes) = read_meta_graph(&dir, tags)?;
        let graph_def = meta_graph.graph_def.take().unwrap_or_default();
        check_library(&graph_def.library)?;
        let graph = Graph::from_graph_def(&graph_def)?;
        let session = Session::with_options(&graph, options)?;
        let signatures = meta_graph
            .signature_def
            .iter()
            .filter(|(key, _)| key.as_str() != INIT_OP_SIGNATURE)
            .map(|(key, def)| Ok((key.clone(), Signature::from_proto(key, def)?)))
            .collect::<Result<BTreeMap<_, _>>>()?;
        let model = SavedModel {
            dir,
            tags: tags.iter().map(|t| t.to_string()).collect(),
            graph,
            session,
            signatures,
            meta_graph_bytes,
        };
        model.restore_variables(&meta_graph)?;
        model.restore_captured_variables(&meta_graph, &graph_def)?;
        model.run_init_op(&meta_graph)?;
        Ok(model)
    }

    /// The directory the model was loaded from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The tags of the graph loaded.
    pub fn tags(&self) -> &[String] {
        &self.tags
    }

    /// The graph (with its function library).
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The session the model runs in, its variables restored.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The serialized `MetaGraphDef` loaded, byte for byte as in `saved_model.pb`.
    pub fn meta_graph_def_bytes(&self) -> &[u8] {
        &self.meta_graph_bytes
    }

    /// The graph, the session and the signatures, for a caller that runs the session
    /// itself (the C API).
    pub fn into_parts(self) -> (Graph, Session, BTreeMap<String, Signature>) {
        (self.graph, self.session, self.signatures)
    }

    /// The signatures, by key (without TensorFlow's internal init-op signature).
    pub fn signatures(&self) -> &BTreeMap<String, Signature> {
        &self.signatures
    }

    /// The signature `key`, or an `Err` listing those the model has.
    pub fn signature(&self, key: &str) -> Result<&Signature> {
        self.signatures.get(key).ok_or_else(|| {
            Error::NotFound(format!(
                "the SavedModel has no signature '{key}'; its signatures are: {}",
                self.signatures
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
    }

    /// Run signature `key` on `feeds` (by input key; every input must be fed); its outputs
    /// by key.
    pub fn run(&self, key: &str, feeds: &[(&str, &Tensor)]) -> Result<BTreeMap<String, Tensor>> {
        self.run_with(&RunOptions::default(), key, feeds)
    }

    /// [`run`](Self::run) with `options`: a timeout, a cancellation handle, a [`Trace`] of
    /// its steps.
    ///
    /// [`Trace`]: crate::Trace
    pub fn run_with(
        &self,
        options: &RunOptions,
        key: &str,
        feeds: &[(&str, &Tensor)],
    ) -> Result<BTreeMap<String, Tensor>> {
        let signature = self.signature(key)?;
        let mut named = Vec::with_capacity(feeds.len());
        for &(input, tensor) in feeds {
            let spec = signature.inputs.get(input).ok_or_else(|| {
                Error::invalid(format!(
                    "signature '{key}' has no input '{input}'; its inputs are: {}",
                    signature
                        .inputs
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
            spec.check(input, tensor)?;
            named.push((spec.name.as_str(), tensor));
        }
        if let Some(missing) = signature
            .inputs
            .keys()
            .find(|k| !feeds.iter().any(|(f, _)| f == k))
        {
            return Err(Error::invalid(format!(
                "signature '{key}' needs input '{missing}', which was not fed"
            )));
        }
        let fetches: Vec<&str> = signature
            .outputs
            .values()
            .map(|s| s.name.as_str())
            .collect();
        let values = self
            .session
            .run_by_name_with(options, &named, &fetches, &[])?;
        Ok(signature.outputs.keys().cloned().zip(values).collect())
    }

    /// TensorFlow's `RunRestore`: feed `variables/variables` to the saver's filename tensor
    /// and run its restore op (nothing to do for a model without variables).
    fn restore_variables(&self, meta_graph: &MetaGraphDef) -> Result<()> {
        let Some(saver) = &meta_graph.saver_def else {
            return Ok(());
        };
        let prefix = self.dir.join("variables").join("variables");
        if !polytensor_core::checkpoint::index_path(&prefix).exists() {
            return Ok(());
        }
        let cpu = self.host_device()?;
        let path = Tensor::from_strings([prefix.to_string_lossy().as_bytes()], [], &cpu)?;
        self.session
            .run_by_name(
                &[(saver.filename_tensor_name.as_str(), &path)],
                &[],
                &[saver.restore_op_name.as_str()],
            )
            .map_err(|e| context(e, "restoring the SavedModel's variables"))?;
        Ok(())
    }

    /// TensorFlow 2's restore by object: each variable a signature function captures takes
    /// the checkpoint value of the object it stands for (what `tf.saved_model.load` binds),
    /// found through the object graphs of the MetaGraph and of the checkpoint.
    fn restore_captured_variables(
        &self,
        meta_graph: &MetaGraphDef,
        graph_def: &crate::proto::GraphDef,
    ) -> Result<()> {
        let Some(saved) = &meta_graph.object_graph_def else {
            return Ok(());
        };
        let prefix = self.dir.join("variables").join("variables");
        if !polytensor_core::checkpoint::index_path(&prefix).exists() {
            return Ok(());
        }
        let reader = polytensor_core::checkpoint::Reader::open(&prefix)?;
        const OBJECT_GRAPH_KEY: &str = "_CHECKPOINTABLE_OBJECT_GRAPH";
        if !reader.contains(OBJECT_GRAPH_KEY) {
            return Ok(());
        }
        let cpu = self.host_device()?;
        let bytes = reader.read(OBJECT_GRAPH_KEY, &cpu)?.to_strings()?;
        let tracked =
            objects::TrackableObjectGraph::decode(bytes.first().map_or(&[][..], |b| b.as_slice()))
                .map_err(|e| {
                    Error::DataLoss(format!("{}: {OBJECT_GRAPH_KEY}: {e}", prefix.display()))
                })?;
        let keys = objects::variable_keys(saved, &tracked);
        for (handle, object) in objects::captured_handles(graph_def, saved) {
            let Some(key) = keys.get(&object) else {
                continue;
            };
            self.session
                .restore_variable(&handle, |device| reader.read(key, device))
                .map_err(|e| context(e, &format!("restoring variable {handle} from {key}")))?;
        }
        Ok(())
    }

    /// Run the init op (TensorFlow 2's `__saved_model_init_op` signature), feeding each
    /// asset's path to its tensor.
    fn run_init_op(&self, meta_graph: &MetaGraphDef) -> Result<()> {
        let Some(init) = meta_graph
            .signature_def
            .get(INIT_OP_SIGNATURE)
            .and_then(|s| s.outputs.get(INIT_OP_SIGNATURE))
        else {
            return Ok(());
        };
        let cpu = self.host_device()?;
        let assets = meta_graph
            .asset_file_def
            .iter()
            .filter_map(|asset| {
                let tensor = asset.tensor_info.as_ref()?.name.clone();
                let path = self.dir.join("assets").join(&asset.filename);
                Some(
                    Tensor::from_strings([path.to_string_lossy().as_bytes()], [], &cpu)
                        .map(|t| (tensor, t)),
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let feeds: Vec<(&str, &Tensor)> = assets.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let op = init.name.split(':').next().unwrap_or_default();
        self.session
            .run_by_name(&feeds, &[], &[op])
            .map_err(|e| context(e, "running the SavedModel's init op"))?;
        Ok(())
    }

    /// The session's first CPU device, where strings (file names) live.
    fn host_device(&self) -> Result<std::sync::Arc<dyn polytensor_core::Device>> {
        self.session
            .devices()
            .iter()
            .find(|d| d.kind() == polytensor_core::device::DeviceKind::CPU)
            .cloned()
            .ok_or_else(|| {
                Error::invalid("loading a SavedModel needs a CPU device for its file names")
            })
    }
}

impl std::fmt::Debug for SavedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SavedModel")
            .field("dir", &self.dir)
            .field("tags", &self.tags)
            .field("signatures", &self.signatures.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Signature {
    fn from_proto(key: &str, def: &SignatureDef) -> Result<Self> {
        let specs = |infos: &BTreeMap<String, TensorInfo>| {
            infos
                .iter()
                .map(|(k, info)| Ok((k.clone(), TensorSpec::from_proto(key, k, info)?)))
                .collect::<Result<BTreeMap<_, _>>>()
        };
        Ok(Signature {
            inputs: specs(&def.inputs)?,
            outputs: specs(&def.outputs)?,
            method_name: def.method_name.clone(),
        })
    }
}

impl TensorSpec {
    fn from_proto(signature: &str, key: &str, info: &TensorInfo) -> Result<Self> {
        if info.name.is_empty() {
            return Err(Error::Unsupported {
                op: format!(
                    "signature '{signature}', key '{key}': sparse and composite tensors in a \
                     signature"
                ),
                dtype: DataType::from_i32(info.dtype).unwrap_or(DataType::Variant),
                device: "any device".into(),
            });
        }
        Ok(TensorSpec {
            name: info.name.clone(),
            dtype: DataType::from_i32(info.dtype).map_err(|e| {
                Error::InvalidProto(format!("signature '{signature}', key '{key}': {e}"))
            })?,
            shape: match &info.tensor_shape {
                Some(shape) => PartialTensorShape::from_proto(shape)?,
                None => PartialTensorShape::unknown_rank(),
            },
        })
    }

    /// `Err` where `tensor` cannot feed this input: another dtype, or a shape the static
    /// one refuses.
    fn check(&self, key: &str, tensor: &Tensor) -> Result<()> {
        if tensor.dtype() != self.dtype {
            return Err(Error::invalid(format!(
                "input '{key}' expects {} but was fed {}",
                self.dtype,
                tensor.dtype()
            )));
        }
        let fed = PartialTensorShape::from(tensor.shape());
        if !self.shape.is_compatible_with(&fed) {
            return Err(Error::invalid(format!(
                "input '{key}' expects shape {} but was fed {}",
                self.shape,
                tensor.shape()
            )));
        }
        Ok(())
    }
}

/// The meta graph of `dir/saved_model.pb` tagged exactly `tags`, decoded and as written.
fn read_meta_graph(dir: &Path, tags: &[&str]) -> Result<(MetaGraphDef, bytes::Bytes)> {
    let path = dir.join("saved_model.pb");
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::NotFound(format!(
                "Could not find SavedModel .pb or .pbtxt at supplied export directory path: {}",
                dir.display()
            )))
        }
        Err(e) => return Err(Error::io(&path.display().to_string(), e)),
    };
    let bad = |e: prost::DecodeError| Error::InvalidProto(format!("{}: {e}", path.display()));
    let model = proto::SavedModelBytes::decode(bytes::Bytes::from(bytes)).map_err(bad)?;
    let mut wanted: Vec<&str> = tags.to_vec();
    wanted.sort_unstable();
    wanted.dedup();
    let mut available = Vec::new();
    for encoded in model.meta_graphs {
        let meta_graph = MetaGraphDef::decode(encoded.clone()).map_err(bad)?;
        let mut have: Vec<String> = meta_graph
            .meta_info_def
            .as_ref()
            .map(|m| m.tags.clone())
            .unwrap_or_default();
        have.sort_unstable();
        have.dedup();
        if have.iter().map(String::as_str).eq(wanted.iter().copied()) {
            return Ok((meta_graph, encoded));
        }
        available.push(format!("[{}]", have.join(", ")));
    }
    Err(Error::NotFound(format!(
        "Could not find meta graph def matching supplied tags: {{ {} }}. The SavedModel's tag \
         sets are: {}",
        wanted.join(" "),
        available.join(", ")
    )))
}

/// `Err` naming the op, function and node of the first node of the library whose op
/// polytensor lacks (a call of another library function is an op type too).
fn check_library(library: &Option<Vec<u8>>) -> Result<()> {
    let Some(bytes) = library else {
        return Ok(());
    };
    let library = FunctionDefLibrary::decode_bytes(bytes)?;
    let functions: std::collections::HashSet<&str> = library
        .function
        .iter()
        .filter_map(|f| f.signature.as_ref().map(|s| s.name.as_str()))
        .collect();
    let known: std::collections::HashSet<&str> = crate::op_types().collect();
    for function in &library.function {
        let name = function.signature.as_ref().map_or("", |s| s.name.as_str());
        for node in &function.node_def {
            if !known.contains(node.op.as_str()) && !functions.contains(node.op.as_str()) {
                return Err(Error::invalid(format!(
                    "Op type not registered '{}' in binary (node '{}' of function '{name}')",
                    node.op, node.name
                )));
            }
        }
    }
    Ok(())
}

/// `error` with what was being done when it happened.
fn context(error: Error, doing: &str) -> Error {
    match error {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("{doing}: {m}")),
        Error::NotFound(m) => Error::NotFound(format!("{doing}: {m}")),
        Error::DataLoss(m) => Error::DataLoss(format!("{doing}: {m}")),
        other => other,
    }
}
