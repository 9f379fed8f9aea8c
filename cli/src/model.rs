//! A model named on the command line, told apart by what the path is (a frozen `GraphDef`
//! file, a SavedModel directory, a checkpoint prefix), and loaded to run on one device.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use polytensor::graph::{Graph, Output, RunOptions, Session, SessionOptions};
use polytensor::saved_model::SavedModel;
use polytensor::{Device, Tensor};

use crate::error::{CliError, CliResult, Context};
use crate::feeds::InputSpec;
use crate::progress::Progress;

/// What a path on the command line holds.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelPath {
    /// A serialized `GraphDef` (`.pb`), frozen: its weights are constants.
    Frozen(PathBuf),
    /// A SavedModel directory (`saved_model.pb` and `variables/`).
    SavedModel(PathBuf),
    /// A checkpoint, by its prefix (`model.ckpt` of `model.ckpt.index` and its data files).
    Checkpoint(PathBuf),
}

impl ModelPath {
    /// What `path` is: a directory with `saved_model.pb`, a file (a `GraphDef`), or the
    /// prefix of a checkpoint (given as the prefix or as its `.index` file).
    pub fn find(path: &Path) -> CliResult<ModelPath> {
        if path.is_dir() {
            if path.join("saved_model.pb").is_file() {
                return Ok(ModelPath::SavedModel(path.to_path_buf()));
            }
            return Err(CliError::bad_input(format!(
                "{} is a directory without saved_model.pb: not a SavedModel",
                path.display()
            )));
        }
        if let Some(prefix) = path.to_str().and_then(|p| p.strip_suffix(".index")) {
            return Ok(ModelPath::Checkpoint(PathBuf::from(prefix)));
        }
        if path.is_file() {
            return Ok(ModelPath::Frozen(path.to_path_buf()));
        }
        if polytensor::checkpoint::index_path(path).is_file() {
            return Ok(ModelPath::Checkpoint(path.to_path_buf()));
        }
        Err(CliError::bad_input(format!(
            "{}: no such file, SavedModel directory or checkpoint prefix",
            path.display()
        )))
    }

    /// The path as given.
    pub fn path(&self) -> &Path {
        match self {
            ModelPath::Frozen(p) | ModelPath::SavedModel(p) | ModelPath::Checkpoint(p) => p,
        }
    }
}

/// The file's bytes, with a progress bar for large files.
pub fn read_bytes(path: &Path) -> CliResult<Vec<u8>> {
    let reading = format!("reading {}", path.display());
    let mut file = std::fs::File::open(path)
        .map_err(|e| polytensor::Error::io(&reading, e))
        .context(&reading)?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    const CHUNK: usize = 8 << 20;
    let mut progress = (size > 4 * CHUNK as u64)
        .then(|| Progress::start(format!("reading {} MB", size >> 20), size >> 20));
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    loop {
        let before = bytes.len();
        (&mut file)
            .take(CHUNK as u64)
            .read_to_end(&mut bytes)
            .map_err(|e| polytensor::Error::io(&reading, e))?;
        if bytes.len() == before {
            break;
        }
        if let Some(progress) = &mut progress {
            progress.set((bytes.len() >> 20) as u64);
        }
    }
    if let Some(progress) = progress {
        progress.finish(&format!("read {} MB", size >> 20));
    }
    Ok(bytes)
}

/// What to load: the device, a SavedModel's signature, and which outputs to fetch.
pub struct LoadOptions<'a> {
    /// The device the model runs on.
    pub device: &'a Arc<dyn Device>,
    /// A SavedModel's signature key.
    pub signature: &'a str,
    /// The outputs to fetch (a frozen graph's tensors `name:0`, a signature's keys); empty:
    /// every output (a frozen graph's: the outputs of the operations nothing reads).
    pub outputs: &'a [String],
    /// The session's mixed-precision pass (`GraphOptimizations::bf16_weights`).
    pub bf16: bool,
}

impl LoadOptions<'_> {
    /// The session options these ask for, over `devices`.
    fn session(&self, devices: Vec<Arc<dyn Device>>) -> SessionOptions {
        let mut options = SessionOptions::new(devices);
        options.optimizations.bf16_weights = self.bf16;
        options
    }
}

/// A model loaded on a device, ready to run.
pub struct Loaded {
    /// One line: what was loaded, on which device.
    pub description: String,
    /// The inputs a run feeds, in order.
    pub inputs: Vec<InputSpec>,
    runner: Runner,
}

enum Runner {
    Frozen {
        session: Box<Session>,
        inputs: Vec<Output>,
        fetches: Vec<Output>,
    },
    Saved {
        model: Box<SavedModel>,
        key: String,
        outputs: Vec<String>,
    },
}

impl Loaded {
    /// Load `model` as `options` say.
    pub fn load(model: &ModelPath, options: &LoadOptions) -> CliResult<Loaded> {
        match model {
            ModelPath::Frozen(path) => load_frozen(path, options),
            ModelPath::SavedModel(dir) => load_saved_model(dir, options),
            ModelPath::Checkpoint(prefix) => Err(CliError::bad_input(format!(
                "{} is a checkpoint: it holds variables, not a graph to run (`polytensor show` \
                 lists them)",
                prefix.display()
            ))),
        }
    }

    /// One run with `feeds` (in the order of [`inputs`](Self::inputs)): the outputs, by name.
    pub fn run(
        &self,
        run_options: &RunOptions,
        feeds: &[Tensor],
    ) -> CliResult<Vec<(String, Tensor)>> {
        match &self.runner {
            Runner::Frozen {
                session,
                inputs,
                fetches,
            } => {
                let fed: Vec<(&Output, &Tensor)> = inputs.iter().zip(feeds).collect();
                let fetch: Vec<&Output> = fetches.iter().collect();
                let values = session.run_with(run_options, &fed, &fetch, &[])?;
                Ok(fetches.iter().map(Output::name).zip(values).collect())
            }
            Runner::Saved {
                model,
                key,
                outputs,
            } => {
                let fed: Vec<(&str, &Tensor)> = self
                    .inputs
                    .iter()
                    .map(|i| i.name.as_str())
                    .zip(feeds)
                    .collect();
                let mut values = model.run_with(run_options, key, &fed)?;
                if outputs.is_empty() {
                    return Ok(values.into_iter().collect());
                }
                Ok(outputs
                    .iter()
                    .filter_map(|k| values.remove(k).map(|v| (k.clone(), v)))
                    .collect())
            }
        }
    }

    /// The path TensorFlow would load, and how it names what this feeds and fetches:
    /// what `--compare-tf` hands to TensorFlow.
    pub fn tensorflow_view(&self) -> (Vec<String>, Vec<String>) {
        match &self.runner {
            Runner::Frozen {
                inputs, fetches, ..
            } => (
                inputs.iter().map(Output::name).collect(),
                fetches.iter().map(Output::name).collect(),
            ),
            Runner::Saved {
                model,
                key,
                outputs,
            } => {
                let signature = model.signature(key).ok();
                let all = signature
                    .map(|s| s.outputs.keys().cloned().collect())
                    .unwrap_or_default();
                (
                    self.inputs.iter().map(|i| i.name.clone()).collect(),
                    if outputs.is_empty() {
                        all
                    } else {
                        outputs.clone()
                    },
                )
            }
        }
    }
}

fn load_frozen(path: &Path, options: &LoadOptions) -> CliResult<Loaded> {
    let loading = format!("loading {}", path.display());
    let bytes = read_bytes(path).context(&loading)?;
    let progress = Progress::start(format!("importing {}", path.display()), 0);
    let def = polytensor::graph::proto::GraphDef::decode_shared(bytes.into()).context(&loading)?;
    let graph = Graph::from_graph_def(&def).context(&loading)?;
    let inputs: Vec<Output> = graph
        .operations()
        .filter(|op| op.op_type() == "Placeholder")
        .map(|op| graph.output(&op, 0))
        .collect::<polytensor::Result<_>>()?;
    let fetches = if options.outputs.is_empty() {
        sink_outputs(&graph)?
    } else {
        options
            .outputs
            .iter()
            .map(|name| graph.tensor(name))
            .collect::<polytensor::Result<_>>()
            .context("finding the --output tensors")?
    };
    if fetches.is_empty() {
        return Err(CliError::bad_input(format!(
            "{}: no output found; name one with --output NAME:0",
            path.display()
        )));
    }
    let session = Session::with_options(&graph, options.session(vec![options.device.clone()]))?;
    let session = Box::new(session);
    progress.finish(&format!(
        "imported {} operations",
        graph.operations().count()
    ));
    Ok(Loaded {
        description: format!(
            "{}: a frozen GraphDef of {} operations, on {}",
            path.display(),
            graph.operations().count(),
            options.device.name()
        ),
        inputs: inputs
            .iter()
            .map(|o| InputSpec {
                name: o.name(),
                dtype: o.dtype(),
                shape: o.shape().clone(),
            })
            .collect(),
        runner: Runner::Frozen {
            session,
            inputs,
            fetches,
        },
    })
}

/// The outputs of the operations nothing reads (a frozen model's results), but for
/// placeholders and constants left unused.
pub fn sink_outputs(graph: &Graph) -> polytensor::Result<Vec<Output>> {
    let mut read = std::collections::HashSet::new();
    for op in graph.operations() {
        for input in graph.inputs(&op)? {
            read.insert(input.op().name().to_string());
        }
    }
    let mut outputs = Vec::new();
    for op in graph.operations() {
        if read.contains(op.name()) || matches!(op.op_type(), "Placeholder" | "Const" | "NoOp") {
            continue;
        }
        outputs.extend(graph.outputs(&op)?);
    }
    Ok(outputs)
}

fn load_saved_model(dir: &Path, options: &LoadOptions) -> CliResult<Loaded> {
    let loading = format!("loading the SavedModel {}", dir.display());
    let progress = Progress::start(format!("{loading} (graph, variables, init op)"), 0);
    let mut devices = vec![options.device.clone()];
    if options.device.name() != "cpu:0" {
        devices.push(polytensor::device("cpu:0")?);
    }
    let model = SavedModel::load(dir, &["serve"], options.session(devices)).context(&loading)?;
    let signature = model.signature(options.signature).context(&loading)?;
    for key in options.outputs {
        if !signature.outputs.contains_key(key) {
            return Err(CliError::bad_input(format!(
                "--output {key}: signature {:?} has no output {key:?}; its outputs are: {}",
                options.signature,
                signature
                    .outputs
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    let inputs = signature
        .inputs
        .iter()
        .map(|(key, spec)| InputSpec {
            name: key.clone(),
            dtype: spec.dtype,
            shape: spec.shape.clone(),
        })
        .collect();
    progress.finish(&format!("loaded {}", dir.display()));
    Ok(Loaded {
        description: format!(
            "{}: a SavedModel, signature {} of {:?}, on {}",
            dir.display(),
            options.signature,
            model.signatures().keys().collect::<Vec<_>>(),
            options.device.name()
        ),
        inputs,
        runner: Runner::Saved {
            model: Box::new(model),
            key: options.signature.to_string(),
            outputs: options.outputs.to_vec(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_told_apart() {
        let dir = std::env::temp_dir().join(format!("polytensor-cli-paths-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("saved")).unwrap();
        std::fs::write(dir.join("saved/saved_model.pb"), b"").unwrap();
        std::fs::write(dir.join("m.pb"), b"").unwrap();
        std::fs::write(dir.join("ckpt.index"), b"").unwrap();
        assert_eq!(
            ModelPath::find(&dir.join("saved")).unwrap(),
            ModelPath::SavedModel(dir.join("saved"))
        );
        assert_eq!(
            ModelPath::find(&dir.join("m.pb")).unwrap(),
            ModelPath::Frozen(dir.join("m.pb"))
        );
        for given in ["ckpt", "ckpt.index"] {
            assert_eq!(
                ModelPath::find(&dir.join(given)).unwrap(),
                ModelPath::Checkpoint(dir.join("ckpt"))
            );
        }
        let missing = ModelPath::find(&dir.join("nothing")).unwrap_err();
        assert!(missing.to_string().contains("no such file"), "{missing}");
        assert!(
            ModelPath::find(&dir).is_err(),
            "a directory without saved_model.pb"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
