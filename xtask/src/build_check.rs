//! `cargo xtask build-check`: the README's two commands stay quick to build.
//!
//! - **One build.** Every crate `cargo xtask conformance` builds, `cargo test --workspace`
//!   needs with the same features, so the tests rebuild nothing: a feature that a test-only
//!   member turns on (a dev-dependency, the C API's header generator, the Python package)
//!   would otherwise rebuild the whole stack a second time. xtask's manifest pins them.
//! - **Few test binaries.** Each links the whole stack; their number may not grow past
//!   [`TEST_BINARY_BUDGET`] (nor the crates with doc tests past [`DOC_TEST_BUDGET`]).
//!
//! Both are read off Cargo's unit graph (`--unit-graph`, a nightly flag), without building.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// Integration-test and unit-test binaries `cargo test --workspace` may build: one `it`
/// per crate (tests/it/main.rs), the two `no_driver` binaries that hide a driver from their
/// process, and the crates' unit tests.
pub const TEST_BINARY_BUDGET: usize = 21;
/// Crates whose doc tests `cargo test --workspace` compiles.
pub const DOC_TEST_BUDGET: usize = 7;

/// A unit of the graph: package, target, mode; its features.
type Units = BTreeMap<(String, String, String), BTreeSet<Vec<String>>>;

/// Cargo's unit graph of `args` (on the nightly toolchain).
fn unit_graph(args: &[&str]) -> Result<Value, String> {
    let output = Command::new("cargo")
        .arg("+nightly")
        .args(args)
        .args(["--unit-graph", "-Z", "unstable-options"])
        .output()
        .map_err(|e| format!("cargo +nightly did not start: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo +nightly {} --unit-graph failed (is a nightly toolchain installed? \
             scripts/nightly.sh installs one):\n{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| format!("the unit graph: {e}"))
}

fn units(graph: &Value) -> Units {
    let mut units = Units::new();
    for unit in graph["units"].as_array().into_iter().flatten() {
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let key = (
            text(&unit["pkg_id"]),
            text(&unit["target"]["name"]),
            text(&unit["mode"]),
        );
        let features = unit["features"]
            .as_array()
            .into_iter()
            .flatten()
            .map(text)
            .collect();
        units.entry(key).or_default().insert(features);
    }
    units
}

/// The problems: units of `first` the `second` build lacks with the same features, and
/// budgets exceeded.
fn problems(first: &Units, second: &Units) -> Vec<String> {
    let mut problems = Vec::new();
    for ((package, target, mode), features) in first {
        if package.contains("/xtask#") {
            continue;
        }
        let key = (package.clone(), target.clone(), mode.clone());
        let theirs = second.get(&key);
        for set in features {
            if !theirs.is_some_and(|t| t.contains(set)) {
                problems.push(format!(
                    "{package} ({target}, {mode}) is built with features {set:?} by `cargo xtask \
                     conformance` but {:?} by `cargo test --workspace`: pin them in \
                     xtask/Cargo.toml",
                    theirs
                        .map(|t| t.iter().collect::<Vec<_>>())
                        .unwrap_or_default()
                ));
            }
        }
    }
    let count = |mode: &str| second.keys().filter(|(_, _, m)| m == mode).count();
    let (tests, docs) = (count("test"), count("doctest"));
    println!("test binaries: {tests} (budget {TEST_BINARY_BUDGET}); crates with doc tests: {docs} (budget {DOC_TEST_BUDGET})");
    if tests > TEST_BINARY_BUDGET {
        problems.push(format!(
            "`cargo test --workspace` builds {tests} test binaries, over the budget of \
             {TEST_BINARY_BUDGET}: add a module to the crate's tests/it/ instead of a new file \
             under tests/"
        ));
    }
    if docs > DOC_TEST_BUDGET {
        problems.push(format!(
            "{docs} crates compile doc tests, over the budget of {DOC_TEST_BUDGET}"
        ));
    }
    problems
}

/// Run the check; `Ok(true)` when both hold.
pub fn run() -> Result<bool, String> {
    let first = units(&unit_graph(&["build", "--package", "xtask"])?);
    let second = units(&unit_graph(&["test", "--workspace", "--no-run"])?);
    let problems = problems(&first, &second);
    for problem in &problems {
        println!("FAIL {problem}");
    }
    println!(
        "build-check: {}",
        if problems.is_empty() { "PASS" } else { "FAIL" }
    );
    Ok(problems.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(list: &[(&str, &str, &[&str])]) -> Units {
        units(&serde_json::json!({
            "units": list.iter().map(|(pkg, mode, features)| serde_json::json!({
                "pkg_id": pkg, "target": {"name": "lib"}, "mode": mode, "features": features,
            })).collect::<Vec<_>>()
        }))
    }

    #[test]
    fn a_feature_only_the_tests_turn_on_is_a_problem() {
        let first = graph(&[
            ("a#half@2", "build", &["std"]),
            ("p/xtask#0.1", "build", &[]),
        ]);
        let same = graph(&[("a#half@2", "build", &["std"]), ("a#half@2", "test", &[])]);
        assert!(problems(&first, &same).is_empty());
        let more = graph(&[("a#half@2", "build", &["std", "rand_distr"])]);
        let found = problems(&first, &more);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("a#half@2"), "{found:?}");
    }

    #[test]
    fn test_binaries_past_the_budget_are_a_problem() {
        let many: Vec<(String, &str, &[&str])> = (0..=TEST_BINARY_BUDGET)
            .map(|i| (format!("p#c{i}"), "test", &[][..]))
            .collect();
        let refs: Vec<(&str, &str, &[&str])> =
            many.iter().map(|(p, m, f)| (p.as_str(), *m, *f)).collect();
        let found = problems(&Units::new(), &graph(&refs));
        assert!(
            found.iter().any(|p| p.contains("over the budget")),
            "{found:?}"
        );
    }
}
