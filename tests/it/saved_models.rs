//! TensorFlow's SavedModels through `polytensor::saved_model`: the golden SavedModels of
//! `shared/tf-golden/saved_models` load and run every signature of their sidecars within
//! its tolerance, on each device.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use polytensor::checkpoint::Reader;
use polytensor::graph::SessionOptions;
use polytensor::saved_model::SavedModel;
use polytensor::{DataType, Device, Error, Tensor};
use serde_json::Value as Json;

use common::golden;

/// `max|got - want| <= rtol * max|want| + atol` for floats, exact otherwise.
fn assert_close(got: &Tensor, want: &Json, tolerance: &Json, what: &str) {
    let cpu = polytensor::device("cpu:0").unwrap();
    let want_tensor = golden::tensor(want, &cpu);
    assert_eq!(got.dtype(), want_tensor.dtype(), "{what}: dtype");
    assert_eq!(got.shape(), want_tensor.shape(), "{what}: shape");
    let got = got.to_device(&cpu).unwrap();
    if got.dtype() == DataType::String {
        assert_eq!(
            got.to_strings().unwrap(),
            want_tensor.to_strings().unwrap(),
            "{what}"
        );
        return;
    }
    if !got.dtype().is_float() {
        assert_eq!(
            got.to_bytes().unwrap(),
            want_tensor.to_bytes().unwrap(),
            "{what}"
        );
        return;
    }
    let got = got.cast(DataType::Double).unwrap().to_vec::<f64>().unwrap();
    let want = want_tensor
        .cast(DataType::Double)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let bound = tolerance["rtol"].as_f64().unwrap() * scale + tolerance["atol"].as_f64().unwrap();
    let worst = got
        .iter()
        .zip(&want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0, f64::max);
    assert!(
        worst <= bound,
        "{what}: max difference {worst} over {bound}"
    );
}

/// The sessions a model loads into: each device alone (a CPU beside it for the file
/// names), then all of them.
fn placements() -> Vec<(String, Vec<Arc<dyn Device>>)> {
    let devices = golden::devices();
    let cpu = polytensor::device("cpu:0").unwrap();
    let mut placements: Vec<(String, Vec<Arc<dyn Device>>)> = devices
        .iter()
        .map(|d| {
            let mut list = vec![d.clone()];
            if d.name() != "cpu:0" {
                list.push(cpu.clone());
            }
            (d.name().to_string(), list)
        })
        .collect();
    placements.push(("every device".into(), devices));
    placements
}

/// Load `dir` in every placement and run each of `runs` (`signature`, `feeds`, `expected`
/// as TensorFlow gave them) within `tolerance`; then feeding mistakes, refused.
fn check_model(dir: &Path, runs: &[Json], tolerance: &Json) {
    let name = dir.file_name().unwrap().to_string_lossy();
    for (placement, devices) in placements() {
        let model = SavedModel::load(dir, &["serve"], SessionOptions::new(devices.clone()))
            .unwrap_or_else(|e| panic!("{name} on {placement}: {e}"));
        for run in runs {
            let signature = run["signature"].as_str().unwrap();
            let feeds: Vec<(String, Tensor)> = run["feeds"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), golden::tensor(v, &devices[0])))
                .collect();
            let refs: Vec<(&str, &Tensor)> = feeds.iter().map(|(k, t)| (k.as_str(), t)).collect();
            let outputs = model
                .run(signature, &refs)
                .unwrap_or_else(|e| panic!("{name}/{signature} on {placement}: {e}"));
            let expected = run["expected"].as_object().unwrap();
            assert_eq!(outputs.len(), expected.len(), "{name}/{signature}");
            for (key, want) in expected {
                assert_close(
                    &outputs[key],
                    want,
                    tolerance,
                    &format!("{name}/{signature}/{key} on {placement}"),
                );
            }
        }
        println!("{name}: {} runs on {placement}", runs.len());
    }
    let cpu = polytensor::device("cpu:0").unwrap();
    let model = SavedModel::load(dir, &["serve"], SessionOptions::new(vec![cpu.clone()])).unwrap();
    let signature = runs[0]["signature"].as_str().unwrap();
    let error = model.run(signature, &[]).unwrap_err();
    assert!(error.to_string().contains("needs input"), "{error}");
    let bad = Tensor::scalar(true, &cpu).unwrap();
    let key = runs[0]["feeds"].as_object().unwrap().keys().next().unwrap();
    let error = model.run(signature, &[(key, &bad)]).unwrap_err();
    assert!(error.to_string().contains("expects"), "{error}");
    assert!(matches!(model.run("nope", &[]), Err(Error::NotFound(_))));
    saves_its_variables_as_tensorflow_did(dir, &model);
    frozen_runs_match(&model, runs, tolerance);
}

/// Each signature frozen (`SavedModel::freeze`, `polytensor convert`) into a GraphDef runs
/// in a session of its own as the SavedModel ran it, its outputs `KEY:0`. A signature that
/// passes a variable to anything but a read (a loop carrying it) or uses a lookup table is
/// refused with why.
fn frozen_runs_match(model: &SavedModel, runs: &[Json], tolerance: &Json) {
    let name = model
        .dir()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    let cpu = polytensor::device("cpu:0").unwrap();
    for run in runs {
        let key = run["signature"].as_str().unwrap();
        let frozen = match model.freeze(key) {
            Ok(frozen) => frozen,
            Err(e) => {
                let message = e.to_string();
                assert!(
                    message.contains("does not freeze"),
                    "{name}/{key} does not freeze: {message}"
                );
                println!("{name}/{key}: not frozen ({message})");
                continue;
            }
        };
        assert!(
            !frozen.node.iter().any(|n| n.op.contains("PartitionedCall")
                || n.op == "VarHandleOp"
                || n.op == "ReadVariableOp"),
            "{name}/{key}: calls and variables are gone"
        );
        let graph = polytensor::graph::Graph::from_graph_def(&frozen)
            .unwrap_or_else(|e| panic!("{name}/{key} frozen: {e}"));
        let session = polytensor::graph::Session::new(&graph, cpu.clone());
        let signature = model.signature(key).unwrap();
        let feeds: Vec<(String, Tensor)> = run["feeds"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (signature.inputs[k].name.clone(), golden::tensor(v, &cpu)))
            .collect();
        let refs: Vec<(&str, &Tensor)> = feeds.iter().map(|(k, t)| (k.as_str(), t)).collect();
        let expected = run["expected"].as_object().unwrap();
        let fetches: Vec<String> = expected.keys().map(|k| format!("{k}:0")).collect();
        let fetch_refs: Vec<&str> = fetches.iter().map(String::as_str).collect();
        let outputs = session
            .run_by_name(&refs, &fetch_refs, &[])
            .unwrap_or_else(|e| panic!("{name}/{key} frozen: {e}"));
        for ((output, want), got) in expected.iter().zip(&outputs) {
            assert_close(
                got,
                want,
                tolerance,
                &format!("{name}/{key}/{output} frozen"),
            );
        }
        println!(
            "{name}/{key}: frozen, {} nodes, runs alike",
            frozen.node.len()
        );
    }
}

/// The model's own save function (TensorFlow 2's `_traced_save`: `StaticRegexFullMatch`,
/// `StringJoin`, `ShardedFilename`, `SaveV2`, `MergeV2Checkpoints`), run through the
/// saver's tensors, writes the variables it restored: the same keys and bytes as the
/// SavedModel's own `variables/` (the object graph aside, which TensorFlow re-encodes).
fn saves_its_variables_as_tensorflow_did(dir: &Path, model: &SavedModel) {
    use polytensor::saved_model::MetaGraphDef;
    use prost::Message;
    let meta_graph = MetaGraphDef::decode(model.meta_graph_def_bytes()).unwrap();
    let Some(saver) = meta_graph.saver_def else {
        return;
    };
    let cpu = polytensor::device("cpu:0").unwrap();
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "saved-model-save-{}",
        dir.file_name().unwrap().to_string_lossy()
    ));
    let _ = std::fs::remove_dir_all(&out);
    let prefix = out.join("ckpt");
    let filename = Tensor::from_strings([prefix.to_str().unwrap()], [], &cpu).unwrap();
    model
        .session()
        .run_by_name(
            &[(saver.filename_tensor_name.as_str(), &filename)],
            &[saver.save_tensor_name.as_str()],
            &[],
        )
        .unwrap_or_else(|e| panic!("{}: saving: {e}", dir.display()));
    let ours = Reader::open(&prefix).unwrap();
    let theirs = Reader::open(dir.join("variables/variables")).unwrap();
    let keys = |r: &Reader| -> Vec<String> { r.entries().map(|(k, _)| k.to_string()).collect() };
    assert_eq!(keys(&ours), keys(&theirs), "{}", dir.display());
    for key in keys(&theirs)
        .iter()
        .filter(|k| *k != "_CHECKPOINTABLE_OBJECT_GRAPH")
    {
        let (a, b) = (
            ours.read(key, &cpu).unwrap(),
            theirs.read(key, &cpu).unwrap(),
        );
        assert_eq!(a.dtype(), b.dtype(), "{key}");
        assert_eq!(a.shape(), b.shape(), "{key}");
        if a.dtype() == DataType::String {
            assert_eq!(a.to_strings().unwrap(), b.to_strings().unwrap(), "{key}");
        } else {
            assert!(
                a.to_bytes().unwrap() == b.to_bytes().unwrap(),
                "{key}: bytes differ"
            );
        }
    }
}

#[test]
fn golden_saved_models_run_their_signatures_on_every_device() {
    let Some(dir) = golden::dir("saved_models") else {
        return;
    };
    let index: Json = golden::json(dir.join("index.json"));
    let cases = index["cases"].as_array().unwrap();
    assert!(cases.len() >= 4);
    let cpu = polytensor::device("cpu:0").unwrap();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let sidecar: Json = golden::json(dir.join(format!("{name}.json")));
        let model = SavedModel::load(
            dir.join(name),
            &["serve"],
            SessionOptions::new(vec![cpu.clone()]),
        )
        .unwrap();
        for (key, want) in sidecar["signatures"].as_object().unwrap() {
            let have = model.signature(key).unwrap();
            let inputs: Vec<&String> = want["inputs"].as_object().unwrap().keys().collect();
            assert_eq!(
                have.inputs.keys().collect::<Vec<_>>(),
                inputs,
                "{name}/{key}"
            );
            for (input, spec) in want["inputs"].as_object().unwrap() {
                assert_eq!(
                    have.inputs[input].dtype.to_string(),
                    spec["dtype"].as_str().unwrap()
                );
            }
        }
        check_model(
            &dir.join(name),
            sidecar["runs"].as_array().unwrap(),
            &sidecar["tolerance"],
        );
    }
}

/// SavedModels TensorFlow makes in this run: data-dependent `tf.cond` and `tf.while_loop`
/// in signatures, `tf.lookup` tables, a Keras application, variables split across shards.
#[test]
fn saved_models_tensorflow_makes_in_this_run_match_it() {
    let Some(dir) = common::generated(
        "saved_models.py",
        "saved-models",
        "tensorflow, keras",
        "POLYTENSOR_SAVED_MODELS",
    ) else {
        return;
    };
    let index: Json = golden::json(dir.join("index.json"));
    let cases = index["cases"].as_array().unwrap();
    assert!(cases.len() >= 4);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        check_model(
            &dir.join(name),
            case["runs"].as_array().unwrap(),
            &case["tolerance"],
        );
    }
    // A model with an op polytensor lacks fails at load, naming the op, node and function.
    let cpu = polytensor::device("cpu:0").unwrap();
    let refused = index["refused"].as_array().unwrap();
    assert!(!refused.is_empty());
    for case in refused {
        let name = case["name"].as_str().unwrap();
        let op = case["op"].as_str().unwrap();
        let options = SessionOptions::new(vec![cpu.clone()]);
        let message = SavedModel::load(dir.join(name), &["serve"], options)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains(&format!("Op type not registered '{op}'"))
                && message.contains("of function '__inference_"),
            "{message}"
        );
    }
}

#[test]
fn missing_directories_and_tags_are_not_found() {
    let Some(dir) = golden::dir("saved_models") else {
        return;
    };
    let cpu = polytensor::device("cpu:0").unwrap();
    let options = || SessionOptions::new(vec![cpu.clone()]);
    let error = SavedModel::load(dir.join("nothing-here"), &["serve"], options()).unwrap_err();
    assert!(matches!(error, Error::NotFound(_)), "{error}");
    let error = SavedModel::load(dir.join("keras_mlp_export"), &["train"], options()).unwrap_err();
    assert!(error.to_string().contains("[serve]"), "{error}");
    let model = polytensor::saved_model::load(dir.join("keras_mlp_export"), &["serve"]).unwrap();
    assert!(model.signatures().contains_key("serving_default"));
}
