//! TensorFlow 2's object graphs: the `SavedObjectGraph` of a MetaGraph and the
//! `TrackableObjectGraph` of its checkpoint (`_CHECKPOINTABLE_OBJECT_GRAPH`), matched node
//! for node from their roots by child name, as `tf.saved_model.load` matches them. They say
//! which checkpoint key holds each variable a signature's function captures: the variables
//! Python's loader binds, which the graph's own restore function may not write (Keras 3's
//! `tf.saved_model.save` restores copies of the variables its functions read).

use std::collections::HashMap;

use crate::proto::{GraphDef, NodeDef};

/// `SavedObjectGraph`: the objects of a SavedModel and its functions' captures.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SavedObjectGraph {
    /// The objects; node 0 is the root.
    #[prost(message, repeated, tag = "1")]
    pub nodes: Vec<SavedObject>,
    /// The concrete functions, by name.
    #[prost(btree_map = "string, message", tag = "2")]
    pub concrete_functions: std::collections::BTreeMap<String, SavedConcreteFunction>,
}

/// `SavedObject`: the parts polytensor reads.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SavedObject {
    /// The object's children by name.
    #[prost(message, repeated, tag = "1")]
    pub children: Vec<ObjectReference>,
    /// Set when the object is a variable.
    #[prost(message, optional, tag = "7")]
    pub variable: Option<SavedVariable>,
}

/// `TrackableObjectGraph.TrackableObject.ObjectReference`: a child.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ObjectReference {
    /// The child's node.
    #[prost(int32, tag = "1")]
    pub node_id: i32,
    /// Its name within the parent.
    #[prost(string, tag = "2")]
    pub local_name: String,
}

/// `SavedVariable`: the parts polytensor reads.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SavedVariable {
    /// The `DataType` wire value.
    #[prost(int32, tag = "1")]
    pub dtype: i32,
    /// The variable's name.
    #[prost(string, tag = "6")]
    pub name: String,
}

/// `SavedConcreteFunction`: the objects a function captures, in the order of its last
/// inputs.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SavedConcreteFunction {
    /// Node ids of the captured objects.
    #[prost(int32, repeated, tag = "2")]
    pub bound_inputs: Vec<i32>,
}

/// `TrackableObjectGraph`: the object graph a TensorFlow 2 checkpoint records.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackableObjectGraph {
    /// The objects; node 0 is the root.
    #[prost(message, repeated, tag = "1")]
    pub nodes: Vec<TrackableObject>,
}

/// `TrackableObjectGraph.TrackableObject`: an object's children and saved tensors.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackableObject {
    /// Children by name.
    #[prost(message, repeated, tag = "1")]
    pub children: Vec<ObjectReference>,
    /// The tensors saved for the object.
    #[prost(message, repeated, tag = "2")]
    pub attributes: Vec<SerializedTensor>,
}

/// `TrackableObjectGraph.TrackableObject.SerializedTensor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SerializedTensor {
    /// The attribute (`VARIABLE_VALUE` for a variable's value).
    #[prost(string, tag = "1")]
    pub name: String,
    /// The full name of the variable.
    #[prost(string, tag = "2")]
    pub full_name: String,
    /// The checkpoint key holding it.
    #[prost(string, tag = "3")]
    pub checkpoint_key: String,
}

/// The checkpoint key of each variable object of `saved`, by its node id: the two graphs
/// walked together from their roots, children matched by name.
pub(crate) fn variable_keys(
    saved: &SavedObjectGraph,
    checkpoint: &TrackableObjectGraph,
) -> HashMap<usize, String> {
    let mut keys = HashMap::new();
    let mut matched = vec![false; saved.nodes.len()];
    let mut queue = vec![(0usize, 0usize)];
    while let Some((s, c)) = queue.pop() {
        let (Some(object), Some(tracked)) = (saved.nodes.get(s), checkpoint.nodes.get(c)) else {
            continue;
        };
        if std::mem::replace(&mut matched[s], true) {
            continue;
        }
        if object.variable.is_some() {
            if let Some(value) = tracked
                .attributes
                .iter()
                .find(|a| a.name == "VARIABLE_VALUE")
            {
                keys.insert(s, value.checkpoint_key.clone());
            }
        }
        for child in &object.children {
            let twin = tracked
                .children
                .iter()
                .find(|t| t.local_name == child.local_name);
            if let (Ok(s), Some(Ok(c))) = (
                usize::try_from(child.node_id),
                twin.map(|t| usize::try_from(t.node_id)),
            ) {
                queue.push((s, c));
            }
        }
    }
    keys
}

/// The `VarHandleOp` nodes of `graph` that calls of concrete functions capture, each with
/// the object it stands for: a call's last inputs are its function's captures.
pub(crate) fn captured_handles(graph: &GraphDef, saved: &SavedObjectGraph) -> Vec<(String, usize)> {
    let by_name: HashMap<&str, &NodeDef> =
        graph.node.iter().map(|n| (n.name.as_str(), n)).collect();
    let mut handles = Vec::new();
    for node in &graph.node {
        let Some(function) = node.attr.get("f").and_then(|f| match &f.value {
            Some(crate::proto::AttrKind::Func(func)) => Some(func.name.as_str()),
            _ => None,
        }) else {
            continue;
        };
        let Some(concrete) = saved.concrete_functions.get(function) else {
            continue;
        };
        let data_inputs: Vec<&str> = node
            .input
            .iter()
            .map(String::as_str)
            .filter(|i| !i.starts_with('^'))
            .collect();
        let Some(first) = data_inputs.len().checked_sub(concrete.bound_inputs.len()) else {
            continue;
        };
        for (input, &object) in data_inputs[first..].iter().zip(&concrete.bound_inputs) {
            let source = input.split(':').next().unwrap_or_default();
            if let (Some(handle), Ok(object)) = (by_name.get(source), usize::try_from(object)) {
                if handle.op == "VarHandleOp" {
                    handles.push((handle.name.clone(), object));
                }
            }
        }
    }
    handles.sort();
    handles.dedup();
    handles
}
