//! The conformance table (terminal and Markdown) and the JSON report.

use std::collections::BTreeMap;

use conformance::{CaseResult, Outcome, Report as DeviceReport};
use polytensor::DataType;
use serde_json::json;

/// One column of the table: a device that ran, or a backend that was skipped.
pub enum Column {
    /// The suite ran on a device of backend `kind`.
    Ran { kind: String, report: DeviceReport },
    /// A compiled-in backend had no usable device.
    Skipped {
        name: String,
        kind: String,
        why: String,
    },
}

impl Column {
    fn name(&self) -> &str {
        match self {
            Column::Ran { report, .. } => &report.device,
            Column::Skipped { name, .. } => name,
        }
    }
}

/// What the cells mean.
const LEGEND: &str = "Cells: pass (with the largest error in ulps when not exact), FAIL xN (N failing cases, largest error), \
unsupported (the device declares it), skipped (no device; reason below), - (no case).";

/// A device's case results grouped by `(op, dtype)`.
type ByCell<'a> = BTreeMap<(String, DataType), Vec<&'a CaseResult>>;

/// One cell: the cases of one (op, dtype) on one device, summarised.
enum Cell {
    Pass {
        max_error: f64,
    },
    Fail {
        failed: usize,
        max_error: f64,
        first: String,
    },
    Unsupported,
    Skipped,
    Absent,
}

impl Cell {
    fn text(&self) -> String {
        match self {
            Cell::Pass { max_error } if *max_error > 0.0 => format!("pass {max_error:.1}ulp"),
            Cell::Pass { .. } => "pass".into(),
            Cell::Fail {
                failed, max_error, ..
            } if max_error.is_finite() => format!("FAIL x{failed} {max_error:.3e}ulp"),
            Cell::Fail { failed, .. } => format!("FAIL x{failed}"),
            Cell::Unsupported => "unsupported".into(),
            Cell::Skipped => "skipped".into(),
            Cell::Absent => "-".into(),
        }
    }
}

fn summarise(results: &[&CaseResult]) -> Cell {
    let floating = results
        .first()
        .is_some_and(|r| r.dtype.is_float() || r.dtype.is_complex());
    let failures: Vec<&&CaseResult> = results
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Fail { .. }))
        .collect();
    if let Some(first) = failures.first() {
        let max_error = failures
            .iter()
            .map(|r| match r.outcome {
                Outcome::Fail { max_error, .. } => max_error,
                _ => 0.0,
            })
            .fold(0.0, f64::max);
        let message = match &first.outcome {
            Outcome::Fail { message, .. } => message.clone(),
            _ => String::new(),
        };
        let max_error = if floating { max_error } else { f64::NAN };
        return Cell::Fail {
            failed: failures.len(),
            max_error,
            first: format!("{}: {message}", first.name),
        };
    }
    if results.iter().all(|r| r.outcome == Outcome::Unsupported) {
        return Cell::Unsupported;
    }
    let max_error = results
        .iter()
        .map(|r| match r.outcome {
            Outcome::Pass { max_error } => max_error,
            _ => 0.0,
        })
        .fold(0.0, f64::max);
    Cell::Pass { max_error }
}

/// The whole run: columns, and rows `(op, dtype)` in catalogue order.
pub struct Report {
    columns: Vec<Column>,
    rows: Vec<(String, DataType)>,
}

impl Report {
    pub fn new(columns: Vec<Column>) -> Self {
        let mut rows: Vec<(String, DataType)> = Vec::new();
        for column in &columns {
            if let Column::Ran { report, .. } = column {
                for r in &report.results {
                    let key = (r.op.clone(), r.dtype);
                    if !rows.contains(&key) {
                        rows.push(key);
                    }
                }
            }
        }
        Self { columns, rows }
    }

    fn cells(&self) -> Vec<Vec<Cell>> {
        let grouped: Vec<Option<ByCell<'_>>> = self
            .columns
            .iter()
            .map(|c| match c {
                Column::Ran { report, .. } => {
                    let mut map = ByCell::new();
                    for r in &report.results {
                        map.entry((r.op.clone(), r.dtype)).or_default().push(r);
                    }
                    Some(map)
                }
                Column::Skipped { .. } => None,
            })
            .collect();
        self.rows
            .iter()
            .map(|row| {
                grouped
                    .iter()
                    .map(|g| match g {
                        None => Cell::Skipped,
                        Some(map) => map
                            .get(row)
                            .map_or(Cell::Absent, |results| summarise(results)),
                    })
                    .collect()
            })
            .collect()
    }

    /// Whether every device passed every case it ran and returned all its memory.
    pub fn all_passed(&self) -> bool {
        self.columns.iter().all(|c| match c {
            Column::Ran { report, .. } => report.failures().is_empty() && report.leak_free(),
            Column::Skipped { .. } => true,
        })
    }

    /// Whether a device of backend `kind` (or named `kind`) ran.
    pub fn ran(&self, kind: &str) -> bool {
        self.columns.iter().any(
            |c| matches!(c, Column::Ran { kind: k, report } if k == kind || report.device == kind),
        )
    }

    /// Why backend `kind` was skipped.
    pub fn skip_reason(&self, kind: &str) -> String {
        self.columns
            .iter()
            .find_map(|c| match c {
                Column::Skipped { kind: k, why, .. } if k == kind => Some(why.clone()),
                _ => None,
            })
            .unwrap_or_else(|| {
                "not compiled in (enable its cargo feature) or filtered out by --backend".into()
            })
    }

    fn footer(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for column in &self.columns {
            match column {
                Column::Ran { report, .. } => {
                    let (passed, failed, unsupported) = report.counts();
                    lines.push(format!(
                        "{}: {passed} passed, {failed} failed, {unsupported} unsupported cases; bytes_in_use {} before, {} after ({})",
                        report.device,
                        report.bytes_in_use_before,
                        report.bytes_in_use_after,
                        if report.leak_free() { "no leak" } else { "LEAK" }
                    ));
                }
                Column::Skipped { name, why, .. } => lines.push(format!("{name}: skipped: {why}")),
            }
        }
        let cells = self.cells();
        for (row, cells) in self.rows.iter().zip(&cells) {
            for (column, cell) in self.columns.iter().zip(cells) {
                if let Cell::Fail { first, .. } = cell {
                    lines.push(format!(
                        "FAIL {} {} on {}: {first}",
                        row.0,
                        row.1,
                        column.name()
                    ));
                }
            }
        }
        lines
    }

    /// The table for a terminal: rows op x dtype, one column per device.
    pub fn table(&self) -> String {
        let cells = self.cells();
        let headers: Vec<String> = ["op".to_string(), "dtype".to_string()]
            .into_iter()
            .chain(self.columns.iter().map(|c| c.name().to_string()))
            .collect();
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .zip(&cells)
            .map(|(row, cells)| {
                [row.0.clone(), row.1.to_string()]
                    .into_iter()
                    .chain(cells.iter().map(Cell::text))
                    .collect()
            })
            .collect();
        let widths: Vec<usize> = (0..headers.len())
            .map(|i| {
                rows.iter()
                    .map(|r| r[i].len())
                    .chain([headers[i].len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: &[String]| {
            cells
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        };
        let mut out = vec![
            line(&headers),
            widths
                .iter()
                .map(|w| "-".repeat(*w))
                .collect::<Vec<_>>()
                .join("  "),
        ];
        out.extend(rows.iter().map(|r| line(r)));
        out.push(String::new());
        out.extend(self.footer());
        out.join("\n")
    }

    /// The same table as Markdown.
    pub fn markdown(&self) -> String {
        let cells = self.cells();
        let mut out = String::from("# Conformance report\n\n");
        out.push_str(LEGEND);
        out.push_str("\n\n");
        out.push_str(&format!(
            "| op | dtype | {} |\n",
            self.columns
                .iter()
                .map(Column::name)
                .collect::<Vec<_>>()
                .join(" | ")
        ));
        out.push_str(&format!("|---|---|{}\n", "---|".repeat(self.columns.len())));
        for (row, cells) in self.rows.iter().zip(&cells) {
            out.push_str(&format!(
                "| {} | {} | {} |\n",
                row.0,
                row.1,
                cells.iter().map(Cell::text).collect::<Vec<_>>().join(" | ")
            ));
        }
        out.push('\n');
        for line in self.footer() {
            out.push_str(&format!("- {line}\n"));
        }
        out
    }

    /// Every case of every device as JSON.
    pub fn json(&self) -> String {
        let devices: Vec<serde_json::Value> = self
            .columns
            .iter()
            .map(|c| match c {
                Column::Ran { kind, report } => {
                    let (passed, failed, unsupported) = report.counts();
                    json!({
                        "device": report.device,
                        "backend": kind,
                        "status": "ran",
                        "passed": passed,
                        "failed": failed,
                        "unsupported": unsupported,
                        "bytes_in_use_before": report.bytes_in_use_before,
                        "bytes_in_use_after": report.bytes_in_use_after,
                        "leak_free": report.leak_free(),
                        "cases": report.results.iter().map(|r| {
                            let (outcome, max_error, message) = match &r.outcome {
                                Outcome::Pass { max_error } => ("pass", Some(*max_error), None),
                                Outcome::Fail { max_error, message } => ("fail", max_error.is_finite().then_some(*max_error), Some(message.clone())),
                                Outcome::Unsupported => ("unsupported", None, None),
                            };
                            json!({"op": r.op, "dtype": r.dtype.name(), "case": r.name, "outcome": outcome, "max_error_ulp": max_error, "message": message})
                        }).collect::<Vec<_>>(),
                    })
                }
                Column::Skipped { name, kind, why } => json!({"device": name, "backend": kind, "status": "skipped", "reason": why}),
            })
            .collect();
        serde_json::to_string_pretty(&json!({ "passed": self.all_passed(), "devices": devices }))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use conformance::CaseResult;

    fn report(outcomes: Vec<(DataType, Outcome)>) -> DeviceReport {
        DeviceReport {
            device: "test:0".into(),
            results: outcomes
                .into_iter()
                .enumerate()
                .map(|(i, (dtype, outcome))| CaseResult {
                    op: "add".to_string(),
                    dtype,
                    name: format!("add/{dtype}/case{i}"),
                    outcome,
                })
                .collect(),
            bytes_in_use_before: 0,
            bytes_in_use_after: 0,
        }
    }

    #[test]
    fn cells_summarise_cases() {
        let ran = report(vec![
            (DataType::Float, Outcome::Pass { max_error: 0.5 }),
            (
                DataType::Float,
                Outcome::Fail {
                    max_error: 3.0,
                    message: "element 4: got 1, expected 2".into(),
                },
            ),
            (DataType::Int32, Outcome::Pass { max_error: 0.0 }),
            (DataType::Bool, Outcome::Unsupported),
        ]);
        let table = Report::new(vec![
            Column::Ran {
                kind: "test".into(),
                report: ran,
            },
            Column::Skipped {
                name: "wgpu".into(),
                kind: "wgpu".into(),
                why: "no Vulkan driver".into(),
            },
        ]);
        let text = table.table();
        assert!(text.contains("FAIL x1 3.000e0ulp"), "{text}");
        assert!(
            text.contains("FAIL add float32 on test:0: add/float32/case1: element 4"),
            "{text}"
        );
        assert!(
            text.contains("unsupported") && text.contains("skipped"),
            "{text}"
        );
        assert!(text.contains("wgpu: skipped: no Vulkan driver"), "{text}");
        assert!(!table.all_passed());
        assert!(table.ran("test") && !table.ran("wgpu"));
        assert_eq!(table.skip_reason("wgpu"), "no Vulkan driver");
        let json: serde_json::Value = serde_json::from_str(&table.json()).unwrap();
        assert_eq!(json["passed"], false);
        assert_eq!(json["devices"][0]["cases"][1]["outcome"], "fail");
        assert!(table
            .markdown()
            .contains("| add | int32 | pass | skipped |"));
    }

    #[test]
    fn a_leak_fails_the_run() {
        let mut leaky = report(vec![(DataType::Float, Outcome::Pass { max_error: 0.0 })]);
        leaky.bytes_in_use_after = 64;
        let table = Report::new(vec![Column::Ran {
            kind: "test".into(),
            report: leaky,
        }]);
        assert!(!table.all_passed());
        assert!(table.table().contains("LEAK"));
    }
}
