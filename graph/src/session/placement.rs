//! Where a session runs each operation, and which tensors it copies between devices:
//! TensorFlow's `log_device_placement`.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use polytensor_core::Result;

use super::{locked, Session};

/// Where a session runs each operation and which tensors it copies between devices (what
/// TensorFlow's `log_device_placement` prints).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Each operation of the graph, in graph order.
    pub ops: Vec<PlacedOp>,
    /// The copies of the plans made so far, and of the feeds the runs so far copied.
    pub copies: Vec<Transfer>,
}

/// An operation and its device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacedOp {
    /// The operation's name.
    pub name: String,
    /// Its type.
    pub op_type: String,
    /// The device it runs on.
    pub device: String,
}

/// A tensor copied from the device that produces it to one that reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// The tensor (`name:index`).
    pub tensor: String,
    /// The producing device.
    pub from: String,
    /// The reading device.
    pub to: String,
}

impl Placement {
    /// The device operation `op` runs on, if the graph has it.
    pub fn device_of(&self, op: &str) -> Option<&str> {
        self.ops
            .iter()
            .find(|placed| placed.name == op)
            .map(|placed| placed.device.as_str())
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for op in &self.ops {
            writeln!(f, "{}: ({}): {}", op.name, op.op_type, op.device)?;
        }
        for copy in &self.copies {
            writeln!(f, "{}: copied {} -> {}", copy.tensor, copy.from, copy.to)?;
        }
        Ok(())
    }
}

impl Session {
    /// The device of every operation, placed now if no run has placed them yet, and the
    /// copies between devices of the plans run so far. `Err` where placement fails (see
    /// [`super::SessionOptions::allow_soft_placement`]).
    pub fn placement(&self) -> Result<Placement> {
        let placed = self.placed()?;
        let device = |d: usize| self.devices[d].name().to_string();
        let ops = self
            .graph
            .nodes
            .iter()
            .zip(placed.iter())
            .map(|(node, &d)| PlacedOp {
                name: node.name.to_string(),
                op_type: node.op_type.to_string(),
                device: device(d),
            })
            .collect();
        // The edges the plans cross, and the feeds the runs copied: by tensor, then device.
        let mut edges: BTreeSet<(usize, usize, usize, String)> = locked(&self.plans)
            .plans()
            .flat_map(|plan| plan.transfers.iter())
            .map(|&(node, index, to)| (node, index, to, device(placed[node])))
            .collect();
        edges.extend(locked(&self.fed_copies).iter().cloned());
        let copies = edges
            .into_iter()
            .map(|(node, index, to, from)| Transfer {
                tensor: format!("{}:{index}", self.graph.nodes[node].name),
                from,
                to: device(to),
            })
            .collect();
        Ok(Placement { ops, copies })
    }

    /// Set the variable that the `VarHandleOp` (or `VariableV2`) node `handle` names to
    /// what `read` gives on the device the node is placed on: a restore from outside the
    /// graph (a SavedModel's variables by object).
    pub(crate) fn restore_variable(
        &self,
        handle: &str,
        read: impl FnOnce(&Arc<dyn polytensor_core::Device>) -> Result<polytensor_core::Tensor>,
    ) -> Result<()> {
        let (index, name) = self.variable_of(handle)?;
        let device = &self.devices[self.placed()?[index]];
        let value = read(device)?;
        locked(&self.variables).insert(name, value);
        Ok(())
    }

    /// The value the session holds for the variable that the `VarHandleOp` (or
    /// `VariableV2`) node `handle` names (a SavedModel frozen).
    pub(crate) fn variable_value(&self, handle: &str) -> Result<polytensor_core::Tensor> {
        let (_, name) = self.variable_of(handle)?;
        locked(&self.variables).get(&name).cloned().ok_or_else(|| {
            polytensor_core::Error::invalid(format!(
                "variable '{name}' (node '{handle}') has no value: it was neither restored nor \
                 initialised"
            ))
        })
    }

    /// The node `handle` (a `VarHandleOp` or `VariableV2`) and the name of the variable it
    /// makes.
    fn variable_of(&self, handle: &str) -> Result<(usize, Arc<str>)> {
        let index = self
            .graph
            .node_index(handle)
            .ok_or_else(|| polytensor_core::Error::NotFound(format!("no node '{handle}'")))?;
        let name = crate::ops::kernels::variable_name(&self.graph.nodes[index])?;
        Ok((index, name))
    }

    /// The placement, computed on first use.
    pub(super) fn placed(&self) -> Result<Arc<[usize]>> {
        let mut placement = locked(&self.placement);
        if let Some(placed) = placement.as_ref() {
            return Ok(placed.clone());
        }
        let placed: Arc<[usize]> =
            crate::placer::place(&self.graph, &self.devices, self.soft_placement)?.into();
        *placement = Some(placed.clone());
        Ok(placed)
    }
}
