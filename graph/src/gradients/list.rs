//! The gradients of the TensorList ops, as TensorFlow's `list_ops.py` registers them: a
//! list's gradient is a list of its elements' gradients (an unset element standing for
//! zeros), so what a recurrent loop reads with `TensorListGetItem` and writes with
//! `TensorListSetItem` differentiates step by step, and several gradients of one list add
//! up element by element (`AddN` of lists).

use polytensor_core::{DataType, Result};

use super::math::dy;
use super::{Forward, GradFn};
use crate::graph::{Graph, Output};

/// The gradient function of a TensorList op type (`Some(None)`: it has none).
pub(super) fn registered(op_type: &str) -> Option<Option<GradFn>> {
    let function: GradFn = match op_type {
        "TensorListStack" => stack,
        "TensorListFromTensor" => from_tensor,
        "TensorListGetItem" => get_item,
        "TensorListSetItem" => set_item,
        "TensorListPushBack" => push_back,
        "TensorListPopBack" => pop_back,
        "TensorListReserve" | "TensorListLength" | "TensorListElementShape" => return Some(None),
        _ => return None,
    };
    Some(Some(function))
}

impl Graph {
    /// A list of `length` unset elements of `dtype` and shape `element_shape` (a shape
    /// tensor): zeros, as a gradient.
    pub(super) fn unset_list(
        &mut self,
        element_shape: &Output,
        length: &Output,
        dtype: DataType,
    ) -> Result<Output> {
        self.op("TensorListReserve")
            .input(element_shape)
            .input(length)
            .attr("element_dtype", dtype)
            .build_output()
    }

    /// Zeros of list `list`'s length, element shape and `dtype`, as its gradient.
    pub(super) fn zeros_list(&mut self, list: &Output, dtype: DataType) -> Result<Output> {
        let shape = self
            .op("TensorListElementShape")
            .input(list)
            .attr("shape_type", DataType::Int32)
            .build_output()?;
        let length = self.op("TensorListLength").input(list).build_output()?;
        self.unset_list(&shape, &length, dtype)
    }
}

/// `TensorListStack(list)`: the rows of `dy` as a list.
fn stack(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = dy(f, dys, 0)?;
    let grad = g
        .op("TensorListFromTensor")
        .input(dy)
        .input(&f.inputs[1])
        .build_output()?;
    Ok(vec![Some(grad), None])
}

/// `TensorListFromTensor(t)`: the list's gradient stacked to `t`'s shape (unset elements
/// as zeros of `t`'s rows).
fn from_tensor(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let t = &f.inputs[0];
    let dlist = dy(f, dys, 0)?;
    let shape = g.shape_of(t)?;
    let begin = g.constant_values(&[1i32], &[1])?;
    let size = g.constant_values(&[-1i32], &[1])?;
    let rows = g
        .op("Slice")
        .input(&shape)
        .input(&begin)
        .input(&size)
        .build_output()?;
    let grad = g
        .op("TensorListStack")
        .input(dlist)
        .input(&rows)
        .attr("element_dtype", t.dtype())
        .build_output()?;
    Ok(vec![Some(grad), None])
}

/// `TensorListGetItem(list, i)`: a list of the input's length with `dy` at `i`.
fn get_item(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = dy(f, dys, 0)?;
    let zeros = g.zeros_list(&f.inputs[0], dy.dtype())?;
    let grad = g
        .op("TensorListSetItem")
        .input(&zeros)
        .input(&f.inputs[1])
        .input(dy)
        .build_output()?;
    Ok(vec![Some(grad), None, None])
}

/// `TensorListSetItem(list, i, item)`: the list's gradient with zeros at `i`, and its
/// element `i` as the item's.
fn set_item(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dlist = dy(f, dys, 0)?;
    let (index, item) = (&f.inputs[1], &f.inputs[2]);
    let zeros = g.op("ZerosLike").input(item).build_output()?;
    let list_grad = g
        .op("TensorListSetItem")
        .input(dlist)
        .input(index)
        .input(&zeros)
        .build_output()?;
    let shape = g.shape_of(item)?;
    let item_grad = g
        .op("TensorListGetItem")
        .input(dlist)
        .input(index)
        .input(&shape)
        .attr("element_dtype", item.dtype())
        .build_output()?;
    Ok(vec![Some(list_grad), None, Some(item_grad)])
}

/// `TensorListPushBack(list, t)`: the last element popped off the gradient is `t`'s.
fn push_back(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dlist = dy(f, dys, 0)?;
    let t = &f.inputs[1];
    let shape = g.shape_of(t)?;
    let op = g
        .op("TensorListPopBack")
        .input(dlist)
        .input(&shape)
        .attr("element_dtype", t.dtype())
        .build()?;
    let popped = g.outputs(&op)?;
    Ok(vec![Some(popped[0].clone()), Some(popped[1].clone())])
}

/// `TensorListPopBack(list)`: the element's gradient pushed back onto the list's.
fn pop_back(g: &mut Graph, f: &Forward, dys: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let element = &f.outputs[1];
    let dlist = match &dys[0] {
        Some(dlist) => dlist.clone(),
        None => g.zeros_list(&f.outputs[0], element.dtype())?,
    };
    let delement = match &dys[1] {
        Some(d) => d.clone(),
        None => g.op("ZerosLike").input(element).build_output()?,
    };
    let grad = g
        .op("TensorListPushBack")
        .input(&dlist)
        .input(&delement)
        .build_output()?;
    Ok(vec![Some(grad), None])
}
