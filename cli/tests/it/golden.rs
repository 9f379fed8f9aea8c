//! The command on TensorFlow's own files, the golden data beside the repository
//! (`../shared/tf-golden`): frozen models shown and run, SavedModels shown and frozen,
//! checkpoints listed key by key as their sidecars describe them. Without the data the
//! tests say why and skip, unless `POLYTENSOR_REQUIRE_GOLDEN` is set (CI).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{arg, polytensor, scratch};

/// `../shared/tf-golden/PART`, or `None` after saying why the test skips.
fn golden(part: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/tf-golden")
        .join(part);
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("POLYTENSOR_REQUIRE_GOLDEN").is_none(),
        "POLYTENSOR_REQUIRE_GOLDEN is set but {} is missing",
        dir.display()
    );
    eprintln!("skipped: no TensorFlow golden data at {}", dir.display());
    None
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn tensorflows_frozen_models_are_shown_and_run() {
    let Some(dir) = golden("models") else { return };
    let index = json(&dir.join("index.json"));
    for model in index["models"].as_array().unwrap() {
        let name = model["name"].as_str().unwrap();
        let path = dir.join(format!("{name}.pb"));
        let shown = polytensor(&["show", arg(&path), "--device", "cpu:0"]).expect(0);
        for (feed, spec) in model["feeds"].as_object().unwrap() {
            let dtype = spec["dtype"].as_str().unwrap();
            assert!(
                shown.stdout.contains(&format!("  {feed} {dtype} (None, ")),
                "{name}: input {feed}\n{}",
                shown.stdout
            );
        }
        for op in model["ops"].as_array().unwrap() {
            let op = op.as_str().unwrap();
            let row = shown
                .stdout
                .lines()
                .find(|l| l.split_whitespace().next() == Some(op))
                .unwrap_or_else(|| panic!("{name}: no row for {op}\n{}", shown.stdout));
            assert!(row.ends_with(" yes"), "{name}: {row}");
        }
        for fetch in model["fetches"].as_array().unwrap() {
            let fetch = fetch.as_str().unwrap();
            let ran = polytensor(&["run", arg(&path), "--batch", "2", "--output", fetch]).expect(0);
            assert!(
                ran.stdout.starts_with(&format!("{fetch}: tf.Tensor(")),
                "{name}: {}",
                ran.stdout
            );
            assert!(ran.stdout.contains("shape=(2, "), "{name}: {}", ran.stdout);
        }
    }
}

#[test]
fn tensorflows_saved_models_are_shown_and_frozen() {
    let Some(dir) = golden("saved_models") else {
        return;
    };
    let out = scratch("golden-saved");
    let index = json(&dir.join("index.json"));
    for case in index["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let model = dir.join(name);
        let sidecar = json(&dir.join(format!("{name}.json")));
        let shown = polytensor(&["show", arg(&model)]).expect(0);
        for key in sidecar["signatures"].as_object().unwrap().keys() {
            assert!(
                shown.stdout.contains(&format!("signature {key:?}")),
                "{name}: {key}\n{}",
                shown.stdout
            );
            let frozen = out.join(format!("{name}-{key}.pb"));
            let converted = polytensor(&[
                "convert",
                arg(&model),
                "--signature",
                key,
                "-o",
                arg(&frozen),
            ])
            .expect(0);
            assert!(
                converted.stdout.starts_with("wrote "),
                "{}",
                converted.stdout
            );
            let again = polytensor(&["show", arg(&frozen)]).expect(0);
            assert!(
                !again.stdout.contains("VarHandleOp"),
                "{name}/{key}: variables are constants\n{}",
                again.stdout
            );
        }
    }
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn tensorflows_checkpoints_are_listed_key_by_key() {
    let Some(dir) = golden("checkpoints") else {
        return;
    };
    let index = json(&dir.join("index.json"));
    for case in index["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let sidecar = json(&dir.join(format!("{name}.json")));
        let prefix = dir.join(sidecar["prefix"].as_str().unwrap());
        let shown = polytensor(&["show", arg(&prefix)]).expect(0);
        for (key, spec) in case["keys"].as_object().unwrap() {
            let dims: Vec<String> = spec["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.to_string())
                .collect();
            let line = format!(
                "  {key} ({}) [{}]",
                spec["dtype"].as_str().unwrap(),
                dims.join(",")
            );
            assert!(
                shown.stdout.contains(&line),
                "{name}: {line}\n{}",
                shown.stdout
            );
        }
        for (key, slices) in case["sliced_keys"].as_object().into_iter().flatten() {
            let line = shown
                .stdout
                .lines()
                .find(|l| l.starts_with(&format!("  {key} (")))
                .unwrap();
            assert!(
                line.contains(" in slices ") && slices.as_array().is_some_and(|s| !s.is_empty()),
                "{name}: {line}"
            );
        }
    }
}
