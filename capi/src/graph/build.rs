//! Building an operation (TensorFlow's `TF_NewOperation`, its inputs, device and
//! attributes, `TF_FinishOperation`).

use std::ffi::{c_char, c_int};
use std::ptr::null_mut;

use polytensor::graph::AttrValue;
use polytensor::{DataType, Error};

use crate::status::{arg, array, guard, PT_Status};
use crate::tensor::{text, PT_DataType, PT_Tensor};

use super::{
    locked, output_of, same_graph, PT_Graph, PT_Operation, PT_OperationDescription, PT_Output,
};

/// Start building an operation of type `op_type` named `name` in `graph`, finished (and
/// freed) by [`PT_FinishOperation`]. NULL on error.
///
/// # Safety
///
/// `graph` is a live graph, `op_type` and `name` NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn PT_NewOperation(
    graph: *mut PT_Graph,
    op_type: *const c_char,
    name: *const c_char,
) -> *mut PT_OperationDescription {
    guard(null_mut(), null_mut(), || {
        // SAFETY: the caller's contract.
        let graph = unsafe { arg(graph as *const PT_Graph, "graph") }?;
        Ok(Box::into_raw(Box::new(PT_OperationDescription {
            state: graph.state.clone(),
            graph: locked(&graph.state).id,
            // SAFETY: the caller's contract.
            op_type: unsafe { text(op_type, "op_type") }?.to_string(),
            // SAFETY: the caller's contract.
            name: unsafe { text(name, "name") }?.to_string(),
            inputs: Vec::new(),
            control_inputs: Vec::new(),
            attrs: Vec::new(),
            device: String::new(),
            error: None,
        })))
    })
}

/// Apply `change` to a live description (ignoring NULL); a failure is kept in the
/// description for [`PT_FinishOperation`] (and set in `status`, where there is one).
///
/// # Safety
///
/// `desc` is NULL or a live description.
unsafe fn describe(
    desc: *mut PT_OperationDescription,
    status: *mut PT_Status,
    change: impl FnOnce(&mut PT_OperationDescription) -> Result<(), Error>,
) {
    guard(status, (), || {
        // SAFETY: the caller's contract.
        let desc = unsafe { desc.as_mut() }.ok_or_else(|| Error::invalid("desc is NULL"))?;
        change(desc).inspect_err(|e| {
            desc.error.get_or_insert_with(|| e.to_string());
        })
    })
}

/// Append a data input.
///
/// # Safety
///
/// `desc` is a live description and `input.oper` an operation of its graph.
#[no_mangle]
pub unsafe extern "C" fn PT_AddInput(desc: *mut PT_OperationDescription, input: PT_Output) {
    let change = |d: &mut PT_OperationDescription| {
        // SAFETY: the caller's contract: an operation of the description's graph.
        d.inputs.push(unsafe { output_of(&input, d.graph) }?);
        Ok(())
    };
    // SAFETY: the caller's contract.
    unsafe { describe(desc, null_mut(), change) }
}

/// Append `num_inputs` data inputs, for an input that is a list (`AddN`'s, `ConcatV2`'s
/// values): polytensor's graphs keep a list as consecutive inputs, as a GraphDef does.
///
/// # Safety
///
/// `desc` is a live description; `inputs` NULL or `num_inputs` outputs of its graph.
#[no_mangle]
pub unsafe extern "C" fn PT_AddInputList(
    desc: *mut PT_OperationDescription,
    inputs: *const PT_Output,
    num_inputs: c_int,
) {
    let change = |d: &mut PT_OperationDescription| {
        // SAFETY: the caller's contract.
        for input in unsafe { array(inputs, num_inputs, "inputs") }? {
            // SAFETY: the caller's contract: operations of the description's graph.
            d.inputs.push(unsafe { output_of(input, d.graph) }?);
        }
        Ok(())
    };
    // SAFETY: the caller's contract.
    unsafe { describe(desc, null_mut(), change) }
}

/// Add a control input: the operation runs after `input` (TensorFlow's `^input`).
///
/// # Safety
///
/// `desc` is a live description and `input` an operation of its graph.
#[no_mangle]
pub unsafe extern "C" fn PT_AddControlInput(
    desc: *mut PT_OperationDescription,
    input: *mut PT_Operation,
) {
    let change = |d: &mut PT_OperationDescription| {
        // SAFETY: the caller's contract.
        let op = unsafe { arg(input as *const PT_Operation, "input") }?;
        same_graph(&op.op, op.graph, d.graph)?;
        d.control_inputs.push(op.op.clone());
        Ok(())
    };
    // SAFETY: the caller's contract.
    unsafe { describe(desc, null_mut(), change) }
}

/// Ask for a device (TensorFlow's names, or polytensor's: `wgpu:0`).
///
/// # Safety
///
/// `desc` is a live description and `device` NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn PT_SetDevice(desc: *mut PT_OperationDescription, device: *const c_char) {
    let change = |d: &mut PT_OperationDescription| {
        // SAFETY: the caller's contract.
        d.device = unsafe { text(device, "device") }?.to_string();
        Ok(())
    };
    // SAFETY: the caller's contract.
    unsafe { describe(desc, null_mut(), change) }
}

/// Set attribute `name` to what `value` makes, in a live description.
///
/// # Safety
///
/// `desc` is NULL or a live description, `name` NUL-terminated.
pub(crate) unsafe fn set_attr(
    desc: *mut PT_OperationDescription,
    name: *const c_char,
    status: *mut PT_Status,
    value: impl FnOnce() -> Result<AttrValue, Error>,
) {
    let change = |d: &mut PT_OperationDescription| {
        // SAFETY: the caller's contract.
        let name = unsafe { text(name, "name") }?.to_string();
        d.attrs.push((name, value()?));
        Ok(())
    };
    // SAFETY: the caller's contract.
    unsafe { describe(desc, status, change) }
}

/// Set a dtype attribute.
///
/// # Safety
///
/// `desc` is a live description and `name` NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn PT_SetAttrType(
    desc: *mut PT_OperationDescription,
    name: *const c_char,
    value: PT_DataType,
) {
    // SAFETY: the caller's contract.
    unsafe {
        set_attr(desc, name, null_mut(), || {
            Ok(DataType::from_i32(value)?.into())
        })
    }
}

/// Set an integer attribute.
///
/// # Safety
///
/// `desc` is a live description and `name` NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn PT_SetAttrInt(
    desc: *mut PT_OperationDescription,
    name: *const c_char,
    value: i64,
) {
    // SAFETY: the caller's contract.
    unsafe { set_attr(desc, name, null_mut(), || Ok(value.into())) }
}

/// Set a bool attribute (non-zero is true).
///
/// # Safety
///
/// `desc` is a live description and `name` NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn PT_SetAttrBool(
    desc: *mut PT_OperationDescription,
    name: *const c_char,
    value: c_int,
) {
    // SAFETY: the caller's contract.
    unsafe { set_attr(desc, name, null_mut(), || Ok((value != 0).into())) }
}

/// Set a tensor attribute (a `Const`'s `value`) from a tensor's values.
///
/// # Safety
///
/// `desc` is a live description, `name` NUL-terminated, `value` a live tensor; `status`
/// NULL or live.
#[no_mangle]
pub unsafe extern "C" fn PT_SetAttrTensor(
    desc: *mut PT_OperationDescription,
    name: *const c_char,
    value: *const PT_Tensor,
    status: *mut PT_Status,
) {
    let proto = || {
        // SAFETY: the caller's contract.
        let tensor = &unsafe { arg(value, "value") }?.tensor;
        Ok(tensor.to_proto()?.into())
    };
    // SAFETY: the caller's contract.
    unsafe { set_attr(desc, name, status, proto) }
}

/// Add the described operation to its graph and free the description; the new operation,
/// or NULL on error (dtypes and shapes are checked and inferred as the Rust builder does).
///
/// # Safety
///
/// `desc` is a description from [`PT_NewOperation`], not used afterwards; `status` NULL or
/// live.
#[no_mangle]
pub unsafe extern "C" fn PT_FinishOperation(
    desc: *mut PT_OperationDescription,
    status: *mut PT_Status,
) -> *mut PT_Operation {
    guard(status, null_mut(), || {
        if desc.is_null() {
            return Err(Error::invalid("desc is NULL"));
        }
        // SAFETY: the caller's contract: a description from `PT_NewOperation`.
        let desc = unsafe { Box::from_raw(desc) };
        if let Some(error) = &desc.error {
            return Err(Error::invalid(format!(
                "operation '{}' was described with an error: {error}",
                desc.name
            )));
        }
        let mut state = locked(&desc.state);
        if state.graph.operation(&desc.name).is_some() {
            return Err(Error::invalid(format!(
                "Duplicate node name in graph: '{}'",
                desc.name
            )));
        }
        let inputs = desc
            .inputs
            .iter()
            .map(|(op, index)| state.graph.output(op, *index))
            .collect::<Result<Vec<_>, Error>>()?;
        let mut builder = state
            .graph
            .op(&desc.op_type)
            .name(&desc.name)
            .inputs(&inputs)
            .device(&desc.device);
        for (name, value) in &desc.attrs {
            builder = builder.attr(name, value.clone());
        }
        for control in &desc.control_inputs {
            builder = builder.control_input(control);
        }
        let op = builder.build()?;
        state.handle(op)
    })
}
