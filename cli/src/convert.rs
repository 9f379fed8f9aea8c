//! `polytensor convert SAVED_MODEL -o frozen.pb`: a SavedModel's signature frozen into a
//! `GraphDef` ([`SavedModel::freeze`](polytensor::saved_model::SavedModel::freeze)), which
//! TensorFlow and polytensor then load as one file.

use std::path::Path;

use polytensor::graph::SessionOptions;
use polytensor::saved_model::SavedModel;
use prost::Message;

use crate::error::{CliError, CliResult, Context};
use crate::model::ModelPath;
use crate::progress::Progress;
use crate::show::human_bytes;

/// Freeze signature `key` of `model` into `output`.
pub fn convert(model: &ModelPath, key: &str, output: &Path) -> CliResult<()> {
    let ModelPath::SavedModel(dir) = model else {
        return Err(CliError::bad_input(format!(
            "{}: convert freezes a SavedModel directory",
            model.path().display()
        )));
    };
    let loading = format!("loading the SavedModel {}", dir.display());
    let progress = Progress::start(&loading, 0);
    let cpu = polytensor::device("cpu:0")?;
    let saved =
        SavedModel::load(dir, &["serve"], SessionOptions::new(vec![cpu])).context(&loading)?;
    let frozen = saved
        .freeze(key)
        .context(format!("freezing signature {key:?} of {}", dir.display()))?;
    progress.finish(&format!("froze signature {key:?}"));
    let bytes = frozen.encode_to_vec();
    std::fs::write(output, &bytes)
        .map_err(|e| polytensor::Error::io(&format!("writing {}", output.display()), e))?;
    let signature = saved.signature(key)?;
    println!(
        "wrote {} ({}, {} nodes)",
        output.display(),
        human_bytes(bytes.len()),
        frozen.node.len()
    );
    for (name, spec) in &signature.inputs {
        println!("  input {name}: {}", spec.name);
    }
    for name in signature.outputs.keys() {
        println!("  output {name}: {name}:0");
    }
    Ok(())
}
