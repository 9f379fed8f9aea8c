//! `polytensor devices`: every device of every compiled-in backend, and every backend
//! without one with the reason (what `polytensor::devices()` finds), with what each device
//! runs.

use std::fmt::Write as _;

use polytensor::{DeviceStatus, Op};

/// The listing; `ops`: each device's ops with the dtypes it runs them for.
pub fn list(ops: bool) -> String {
    let mut text = String::new();
    for entry in polytensor::devices() {
        match &entry.status {
            DeviceStatus::Available(device) => {
                let _ = writeln!(text, "{}: {}", entry.name, device.description());
                let capabilities = device.capabilities();
                let pairs: usize = capabilities.iter().map(|(_, set)| set.iter().count()).sum();
                let ran = capabilities
                    .iter()
                    .filter(|(_, set)| set.iter().next().is_some());
                let semantics = device.float_semantics();
                let mut float = Vec::new();
                if semantics.flushes_subnormals {
                    float.push("flushes f32 subnormals to zero");
                }
                if semantics.inexact_division {
                    float.push("division and sqrt within 2.5 ulp");
                }
                let _ = writeln!(
                    text,
                    "  runs {} of {} ops, {pairs} (op, dtype) pairs; float arithmetic: {}",
                    ran.count(),
                    Op::all().len(),
                    if float.is_empty() {
                        "IEEE 754".to_string()
                    } else {
                        float.join(", ")
                    }
                );
                if ops {
                    for (op, set) in capabilities {
                        let dtypes: Vec<String> = set.iter().map(|d| d.to_string()).collect();
                        let _ = writeln!(
                            text,
                            "    {:<24} {}",
                            op.to_string(),
                            if dtypes.is_empty() {
                                "-".to_string()
                            } else {
                                dtypes.join(" ")
                            }
                        );
                    }
                }
            }
            DeviceStatus::Unavailable(why) => {
                let _ = writeln!(text, "{}: unavailable ({why})", entry.name);
            }
        }
    }
    text
}
