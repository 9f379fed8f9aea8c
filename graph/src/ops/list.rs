//! TensorFlow's TensorLists, as Keras's recurrent layers write them (`TensorListReserve`,
//! `TensorListFromTensor`, `TensorListGetItem`, `TensorListSetItem`, `TensorListStack`, and
//! the rest of the family): a list is a `variant` value of the session ([`TensorList`]),
//! carried through loops and function calls as a handle. Its elements are tensors on the
//! device of the step that made them, shared rather than copied: `TensorListFromTensor`
//! gives views of its input, `TensorListGetItem` gives the element itself, and setting an
//! item copies the list's handles, never its elements' data.

use std::sync::Arc;

use smallvec::smallvec;

use polytensor_core::alloc::host_vec;
use polytensor_core::{DataType, Error, PartialTensorShape, Result, Tensor};

use super::kernels::{Outputs, RunCtx};
use super::{InferCtx, Source, Value};
use crate::graph::Typed;

/// A TensorList op.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ListOp {
    /// `TensorListReserve(element_shape, num_elements)`: a list of unset elements.
    Reserve,
    /// `TensorListFromTensor(tensor, element_shape)`: the tensor's rows as elements.
    FromTensor,
    /// `TensorListGetItem(handle, index, element_shape)`: one element (zeros if unset).
    GetItem,
    /// `TensorListSetItem(handle, index, item)`: the list with one element replaced.
    SetItem,
    /// `TensorListStack(handle, element_shape)`: the elements stacked on a new axis 0.
    Stack,
    /// `TensorListLength(handle)`: the number of elements, as int32.
    Length,
    /// `TensorListElementShape(handle)`: the list's element shape as a shape tensor.
    ElementShape,
    /// `TensorListPushBack(handle, tensor)`: the list with one more element.
    PushBack,
    /// `TensorListPopBack(handle, element_shape)`: the list less its last element, and it.
    PopBack,
    /// `TensorListConcatV2(handle, element_shape, leading_dims)`: the elements joined on
    /// axis 0, and each one's length.
    Concat,
    /// `TensorListSplit(tensor, element_shape, lengths)`: the tensor cut on axis 0.
    Split,
}

/// TensorList op types by TensorFlow's name.
pub(crate) const OPS: &[(&str, ListOp)] = &[
    ("TensorListReserve", ListOp::Reserve),
    ("TensorListFromTensor", ListOp::FromTensor),
    ("TensorListGetItem", ListOp::GetItem),
    ("TensorListSetItem", ListOp::SetItem),
    ("TensorListStack", ListOp::Stack),
    ("TensorListLength", ListOp::Length),
    ("TensorListElementShape", ListOp::ElementShape),
    ("TensorListPushBack", ListOp::PushBack),
    ("TensorListPopBack", ListOp::PopBack),
    ("TensorListConcatV2", ListOp::Concat),
    ("TensorListSplit", ListOp::Split),
];

impl ListOp {
    /// The type attributes tied to the inputs.
    pub(crate) fn typed(self) -> &'static [(&'static str, Source)] {
        use Source::Input;
        match self {
            ListOp::Reserve => &[("shape_type", Input(0))],
            ListOp::FromTensor | ListOp::Split => {
                &[("element_dtype", Input(0)), ("shape_type", Input(1))]
            }
            ListOp::SetItem => &[("element_dtype", Input(2))],
            ListOp::PushBack => &[("element_dtype", Input(1))],
            ListOp::Concat => &[("shape_type", Input(1))],
            ListOp::GetItem
            | ListOp::Stack
            | ListOp::Length
            | ListOp::ElementShape
            | ListOp::PopBack => &[],
        }
    }

    /// The inputs that are lists, and the type each other input must have (`None`: the
    /// op's type attributes say).
    fn inputs(self) -> &'static [Input] {
        use Input::*;
        match self {
            ListOp::Reserve => &[ShapeTensor, Int32],
            ListOp::FromTensor => &[Element, ShapeTensor],
            ListOp::GetItem => &[List, Int32, Int32],
            ListOp::SetItem => &[List, Int32, Element],
            ListOp::Stack | ListOp::PopBack => &[List, Int32],
            ListOp::Length | ListOp::ElementShape => &[List],
            ListOp::PushBack => &[List, Element],
            ListOp::Concat => &[List, ShapeTensor, Int64],
            ListOp::Split => &[Element, ShapeTensor, Int64],
        }
    }
}

/// What one input of a TensorList op is.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Input {
    /// A list handle (`variant`).
    List,
    /// A tensor of the list's element dtype.
    Element,
    /// A shape: int32 or int64 (`shape_type`).
    ShapeTensor,
    Int32,
    Int64,
}

/// A TensorList: its element dtype and shape (as far as known), and its elements, `None`
/// where not set yet.
#[derive(Clone, Debug)]
pub(crate) struct TensorList {
    pub(crate) element_dtype: DataType,
    pub(crate) element_shape: PartialTensorShape,
    pub(crate) elements: Vec<Option<Tensor>>,
}

impl TensorList {
    /// This list with every element on `device` (copied where it is elsewhere), or `None`
    /// where all already are.
    pub(crate) fn on_device(
        &self,
        device: &Arc<dyn polytensor_core::Device>,
    ) -> Result<Option<TensorList>> {
        let here = |t: &Tensor| polytensor_core::device::same_device(t.device(), device);
        if self.elements.iter().flatten().all(here) {
            return Ok(None);
        }
        let elements = self
            .elements
            .iter()
            .map(|e| match e {
                Some(t) if !here(t) => t.to_device(device).map(Some),
                other => Ok(other.clone()),
            })
            .collect::<Result<_>>()?;
        Ok(Some(TensorList {
            elements,
            ..self.clone()
        }))
    }
}

/// The static outputs of `op`.
pub(crate) fn infer(op: ListOp, cx: &InferCtx<'_>) -> Result<Vec<Typed>> {
    let inputs = cx.exactly(op.inputs().len())?;
    let attrs = cx.attrs();
    let element_dtype = match op {
        ListOp::FromTensor | ListOp::Split => inputs[0].0,
        ListOp::SetItem => inputs[2].0,
        ListOp::PushBack => inputs[1].0,
        ListOp::Length | ListOp::ElementShape => DataType::Variant,
        _ => attrs.dtype("element_dtype")?,
    };
    for (i, (kind, (dtype, _))) in op.inputs().iter().zip(inputs).enumerate() {
        let expected = match kind {
            Input::List => DataType::Variant,
            Input::Element => element_dtype,
            Input::Int32 => DataType::Int32,
            Input::Int64 => DataType::Int64,
            Input::ShapeTensor => {
                if !matches!(dtype, DataType::Int32 | DataType::Int64) {
                    return Err(Error::invalid(format!(
                        "Value for attr 'shape_type' of {} is not in the list of allowed \
                         values: int32, int64",
                        super::cpp_dtype_name(*dtype)
                    )));
                }
                *dtype
            }
        };
        if *dtype != expected {
            return Err(cx.type_mismatch(i, expected));
        }
    }
    let handle = (DataType::Variant, PartialTensorShape::new(&[])?);
    let scalar = PartialTensorShape::new(&[])?;
    Ok(match op {
        ListOp::Reserve | ListOp::FromTensor | ListOp::SetItem | ListOp::PushBack => {
            if op == ListOp::Reserve {
                cx.with_rank(1, 0)?;
            }
            vec![handle]
        }
        ListOp::Split => {
            cx.with_rank(2, 1)?;
            vec![handle]
        }
        ListOp::GetItem => {
            cx.with_rank(1, 0)?;
            vec![(element_dtype, static_element_shape(cx, 2)?)]
        }
        ListOp::Stack => {
            let count = attrs.int_or("num_elements", -1)?;
            let rows = PartialTensorShape::new(&[usize::try_from(count).ok()])?;
            vec![(
                element_dtype,
                rows.concatenate(&static_element_shape(cx, 1)?)?,
            )]
        }
        ListOp::Length => vec![(DataType::Int32, scalar)],
        ListOp::ElementShape => {
            let shape_type = attrs.dtype_or("shape_type", DataType::Int32)?;
            let rank = handle_shape(cx).rank();
            vec![(shape_type, PartialTensorShape::new(&[rank])?)]
        }
        ListOp::PopBack => vec![handle, (element_dtype, static_element_shape(cx, 1)?)],
        ListOp::Concat => {
            let element = static_element_shape(cx, 1)?;
            let joined = match element.dims() {
                Some([_, rest @ ..]) => PartialTensorShape::new(&[None])?
                    .concatenate(&PartialTensorShape::new(rest)?)?,
                _ => PartialTensorShape::unknown_rank(),
            };
            vec![
                (element_dtype, joined),
                (DataType::Int64, PartialTensorShape::new(&[None])?),
            ]
        }
    })
}

/// The element shape that shape input `i` stands for at build time (a scalar -1 is an
/// unknown rank), merged with what is known of the list's elements ([`handle_shape`]).
fn static_element_shape(cx: &InferCtx<'_>, i: usize) -> Result<PartialTensorShape> {
    let given = match cx.inputs.get(i).and_then(|(_, shape)| shape.rank()) {
        Some(0) => PartialTensorShape::unknown_rank(),
        _ => cx.shape_value(i)?,
    };
    Ok(given.merge_with(&handle_shape(cx)).unwrap_or(given))
}

/// What static inference knows of the element shape of the list of input 0 (TensorFlow's
/// "handle data"): the list followed back, through the ops that pass it on, to the op that
/// made it, whose element shape input is a constant (with, for `TensorListFromTensor`, its
/// tensor's rows); an unknown rank where the trail ends elsewhere (a function's argument).
fn handle_shape(cx: &InferCtx<'_>) -> PartialTensorShape {
    use super::{Flow, Kind};
    let unknown = PartialTensorShape::unknown_rank;
    let Some(&(mut node, _)) = cx.sources.first() else {
        return unknown();
    };
    // A loop's lists reach their maker through `Merge` and `Enter`: a few steps back.
    for _ in 0..32 {
        let made = match node.kind {
            Kind::List(ListOp::SetItem | ListOp::PushBack | ListOp::PopBack)
            | Kind::Identity
            | Kind::Flow(Flow::Enter | Flow::Merge | Flow::Switch | Flow::Exit) => None,
            Kind::List(ListOp::Reserve) => Some(0),
            Kind::List(ListOp::FromTensor | ListOp::Split) => Some(1),
            _ => return unknown(),
        };
        let input = |i: usize| {
            node.inputs
                .get(i)
                .map(|&(id, index)| (&cx.nodes[id], index))
        };
        if let Some(i) = made {
            let Some(shape) = input(i).and_then(|(source, _)| constant_shape(source)) else {
                return unknown();
            };
            let rows = match (node.kind, input(0)) {
                (Kind::List(ListOp::FromTensor), Some((tensor, index))) => {
                    match tensor.outputs.get(index).and_then(|(_, s)| s.dims()) {
                        Some([_, rows @ ..]) => {
                            PartialTensorShape::new(rows).unwrap_or_else(|_| unknown())
                        }
                        _ => unknown(),
                    }
                }
                _ => unknown(),
            };
            return shape.merge_with(&rows).unwrap_or(shape);
        }
        match input(0) {
            Some((source, _)) => node = source,
            None => return unknown(),
        }
    }
    unknown()
}

/// The shape a `Const` shape tensor stands for (a scalar -1: an unknown rank).
fn constant_shape(node: &crate::graph::Node) -> Option<PartialTensorShape> {
    if node.kind != super::Kind::Const {
        return None;
    }
    let attrs = crate::attr::Attrs {
        node: &node.name,
        attrs: &node.attrs,
    };
    let proto = attrs.tensor("value").ok()?;
    let values = super::infer::proto_ints(proto)?;
    let scalar = proto
        .tensor_shape
        .as_ref()
        .is_some_and(|shape| shape.dim.is_empty());
    if scalar {
        return (values == [-1]).then(PartialTensorShape::unknown_rank);
    }
    let dims: Vec<Option<usize>> = values.iter().map(|&d| usize::try_from(d).ok()).collect();
    PartialTensorShape::new(&dims).ok()
}

/// Run `op`.
pub(crate) fn run(op: ListOp, cx: &RunCtx<'_, '_>) -> Result<Outputs> {
    let attrs = cx.attrs();
    let list_of = |l: TensorList| Value::List(Arc::new(l));
    match op {
        ListOp::Reserve => {
            let element_shape = shape_input(cx, 0)?;
            let count = scalar_int(cx, 1)?;
            let count = usize::try_from(count).map_err(|_| {
                Error::invalid(format!(
                    "The num_elements to reserve must be a non negative number, but got {count}"
                ))
            })?;
            let elements = host_vec(count, None, "TensorListReserve")?;
            Ok(smallvec![list_of(TensorList {
                element_dtype: attrs.dtype("element_dtype")?,
                element_shape,
                elements,
            })])
        }
        ListOp::FromTensor => {
            let t = cx.tensor(0)?;
            let element_shape = shape_input(cx, 1)?;
            let dims = t.dims();
            let Some((_, rows)) = dims.split_first() else {
                return Err(Error::invalid(format!(
                    "Tensor must be at least a vector, but saw shape: {}",
                    t.shape()
                )));
            };
            let row_shape = PartialTensorShape::from(&polytensor_core::TensorShape::new(rows)?);
            if !element_shape.is_compatible_with(&row_shape) {
                return Err(Error::invalid(format!(
                    "Specified a list with shape {element_shape} from a tensor with shape \
                     {row_shape}"
                )));
            }
            let elements = t.unstack(0)?.into_iter().map(Some).collect();
            Ok(smallvec![list_of(TensorList {
                element_dtype: t.dtype(),
                element_shape,
                elements,
            })])
        }
        ListOp::GetItem => {
            let list = typed_list(cx, 0)?;
            let index = scalar_int(cx, 1)?;
            let at = element_index(index, list.elements.len()).ok_or_else(|| {
                Error::invalid(format!(
                    "Trying to access element {index} in a list with {} elements.",
                    list.elements.len()
                ))
            })?;
            let item = match &list.elements[at] {
                Some(t) => t.clone(),
                None => unset_element(cx, list, &shape_input(cx, 2)?)?,
            };
            Ok(smallvec![Value::Tensor(item)])
        }
        ListOp::SetItem => {
            let list = typed_list(cx, 0)?;
            let index = scalar_int(cx, 1)?;
            let item = cx.tensor(2)?.into_owned();
            let resize = attrs.bool_or("resize_if_index_out_of_bounds", false)?;
            let len = match usize::try_from(index) {
                Ok(at) if resize && at >= list.elements.len() => at + 1,
                _ => list.elements.len(),
            };
            let mut elements = host_vec(len, None, "TensorListSetItem")?;
            elements[..list.elements.len()].clone_from_slice(&list.elements);
            let at = element_index(index, elements.len()).ok_or_else(|| {
                Error::invalid(format!(
                    "Trying to modify element {index} in a list with {} elements.",
                    elements.len()
                ))
            })?;
            check_item_shape(
                list,
                &item,
                "set a tensor with incompatible shape at a list index. Item",
            )?;
            elements[at] = Some(item);
            Ok(smallvec![list_of(TensorList {
                elements,
                ..list.clone()
            })])
        }
        ListOp::PushBack => {
            let list = typed_list(cx, 0)?;
            let item = cx.tensor(1)?.into_owned();
            check_item_shape(
                list,
                &item,
                "append a tensor with incompatible shape to a list. Op",
            )?;
            let mut elements = list.elements.clone();
            elements
                .try_reserve(1)
                .map_err(|_| Error::invalid("TensorListPushBack: out of memory"))?;
            elements.push(Some(item));
            Ok(smallvec![list_of(TensorList {
                elements,
                ..list.clone()
            })])
        }
        ListOp::PopBack => {
            let list = typed_list(cx, 0)?;
            let mut elements = list.elements.clone();
            let last = elements
                .pop()
                .ok_or_else(|| Error::invalid("Trying to pop from an empty list."))?;
            let item = match last {
                Some(t) => t,
                None => unset_element(cx, list, &shape_input(cx, 1)?)?,
            };
            Ok(smallvec![
                list_of(TensorList {
                    elements,
                    ..list.clone()
                }),
                Value::Tensor(item)
            ])
        }
        ListOp::Length => {
            let list = list_input(cx, 0)?;
            let length = i32::try_from(list.elements.len())
                .map_err(|_| Error::invalid("TensorListLength: the list is too long for int32"))?;
            Ok(smallvec![Value::Tensor(Tensor::scalar(length, cx.device)?)])
        }
        ListOp::ElementShape => {
            let list = list_input(cx, 0)?;
            let shape_type = attrs.dtype_or("shape_type", DataType::Int32)?;
            let shape = match list.element_shape.dims_i64() {
                Some(dims) => Tensor::from_vec(dims, cx.device)?,
                None => Tensor::scalar(-1i64, cx.device)?,
            };
            Ok(smallvec![Value::Tensor(shape.cast(shape_type)?)])
        }
        ListOp::Stack => {
            let list = typed_list(cx, 0)?;
            let count = attrs.int_or("num_elements", -1)?;
            if count != -1 && usize::try_from(count).ok() != Some(list.elements.len()) {
                return Err(Error::invalid(format!(
                    "Operation expected a list with {count} elements but got a list with {} \
                     elements.",
                    list.elements.len()
                )));
            }
            let shape = merged_element_shape(list, &shape_input(cx, 1)?)?;
            let set = list.elements.iter().flatten().count();
            if !shape.is_fully_defined() && set < list.elements.len() {
                return Err(Error::invalid(if list.elements.is_empty() {
                    format!(
                        "Tried to stack elements of an empty list with non-fully-defined \
                         element_shape: {shape}"
                    )
                } else {
                    format!(
                        "Tried to stack list which only contains uninitialized tensors and has \
                         a non-fully-defined element_shape: {shape}"
                    )
                }));
            }
            if list.elements.is_empty() {
                let dims: Vec<usize> = std::iter::once(0).chain(shape.to_shape()?.iter()).collect();
                return Ok(smallvec![Value::Tensor(Tensor::zeros(
                    dims,
                    list.element_dtype,
                    cx.device
                )?)]);
            }
            let zeros = if set < list.elements.len() {
                Some(Tensor::zeros(
                    shape.to_shape()?,
                    list.element_dtype,
                    cx.device,
                )?)
            } else {
                None
            };
            let rows: Vec<&Tensor> = list
                .elements
                .iter()
                .map(|e| e.as_ref().or(zeros.as_ref()))
                .collect::<Option<_>>()
                .ok_or_else(|| Error::invalid("TensorListStack: an unset element"))?;
            Ok(smallvec![Value::Tensor(Tensor::stack(&rows, 0)?)])
        }
        ListOp::Concat => concat(cx),
        ListOp::Split => {
            let t = cx.tensor(0)?;
            let element_shape = shape_input(cx, 1)?;
            let lengths_tensor = cx.tensor(2)?;
            if lengths_tensor.rank() != 1 {
                return Err(Error::invalid(format!(
                    "Expected lengths to be a vector, received shape: {}",
                    lengths_tensor.shape()
                )));
            }
            let dims = t.dims();
            let Some((&length, rest)) = dims.split_first() else {
                return Err(Error::invalid(format!(
                    "Tensor must be at least a vector, but saw shape: {}",
                    t.shape()
                )));
            };
            let row_shape = PartialTensorShape::new(&[None])?.concatenate(
                &PartialTensorShape::from(&polytensor_core::TensorShape::new(rest)?),
            )?;
            if !element_shape.is_compatible_with(&row_shape) {
                return Err(Error::invalid(format!(
                    "Specified a list with shape {element_shape} from a tensor with shape \
                     {row_shape}"
                )));
            }
            let mut start = 0usize;
            let mut elements = Vec::new();
            for len in cx.ints(2)? {
                let len = usize::try_from(len)
                    .map_err(|_| Error::invalid(format!("Invalid value in lengths: {len}")))?;
                let end = start
                    .checked_add(len)
                    .filter(|&end| end <= length)
                    .ok_or_else(|| {
                        Error::invalid(format!(
                            "Attempting to slice [{start}, {}] from tensor with length {length}",
                            start.saturating_add(len)
                        ))
                    })?;
                elements.push(Some(t.narrow(0, start, len)?));
                start = end;
            }
            if start != length {
                return Err(Error::invalid(format!(
                    "Unused values in tensor. Length of tensor: {length} Values used: {start}"
                )));
            }
            Ok(smallvec![list_of(TensorList {
                element_dtype: t.dtype(),
                element_shape,
                elements,
            })])
        }
    }
}

/// `TensorListConcatV2`: the elements joined on axis 0 (unset ones as zeros of
/// `leading_dims[i]` rows, or of the element shape), and the rows each gave.
fn concat(cx: &RunCtx<'_, '_>) -> Result<Outputs> {
    let list = typed_list(cx, 0)?;
    let given = shape_input(cx, 1)?;
    let leading = cx.ints(2)?;
    let scalars = given.rank() == Some(0)
        || list.element_shape.rank() == Some(0)
        || list.elements.iter().flatten().any(|t| t.rank() == 0);
    if scalars {
        return Err(Error::invalid(
            "Concat requires elements to be at least vectors, found scalars instead.",
        ));
    }
    let mut shape = given.merge_with(&list.element_shape)?;
    let unset = list.elements.iter().any(Option::is_none);
    if unset && !shape.is_fully_defined() {
        for t in list.elements.iter().flatten() {
            shape = shape.merge_with(&PartialTensorShape::from(t.shape()))?;
        }
    }
    let tail = |shape: &PartialTensorShape| -> Result<Vec<usize>> {
        let dims = shape.to_shape().map_err(|_| {
            Error::invalid(format!(
                "Trying to concat list with only uninitialized tensors but element_shape_except_\
                 first_dim is not fully defined: {shape}"
            ))
        })?;
        Ok(dims.iter().skip(1).collect())
    };
    let device = cx.device;
    if list.elements.is_empty() {
        let rest = match shape.dims() {
            Some([_, rest @ ..]) if rest.iter().all(Option::is_some) => {
                rest.iter().flatten().copied().collect::<Vec<usize>>()
            }
            _ => {
                return Err(Error::invalid(format!(
                    "All except the first dimension must be fully defined when concating an \
                     empty tensor list. element_shape: {shape}"
                )))
            }
        };
        let dims: Vec<usize> = std::iter::once(0).chain(rest).collect();
        return Ok(smallvec![
            Value::Tensor(Tensor::zeros(dims, list.element_dtype, device)?),
            Value::Tensor(Tensor::from_vec(Vec::<i64>::new(), device)?),
        ]);
    }
    let mut parts = Vec::with_capacity(list.elements.len());
    for (i, element) in list.elements.iter().enumerate() {
        parts.push(match element {
            Some(t) => t.clone(),
            None => {
                let rows = match leading.get(i) {
                    Some(&rows) => usize::try_from(rows)
                        .map_err(|_| Error::invalid(format!("Invalid leading dim: {rows}")))?,
                    None => shape
                        .dims()
                        .and_then(|d| d.first().copied().flatten())
                        .ok_or_else(|| {
                            Error::invalid(format!(
                                "Trying to concat list with uninitialized tensors but \
                                 element_shape is not fully defined: {shape}"
                            ))
                        })?,
                };
                let dims: Vec<usize> = std::iter::once(rows).chain(tail(&shape)?).collect();
                Tensor::zeros(dims, list.element_dtype, device)?
            }
        });
    }
    let lengths: Vec<i64> = parts.iter().map(|t| t.dims()[0] as i64).collect();
    let refs: Vec<&Tensor> = parts.iter().collect();
    Ok(smallvec![
        Value::Tensor(Tensor::concat(&refs, 0)?),
        Value::Tensor(Tensor::from_vec(lengths, device)?),
    ])
}

/// Input `i` as a list.
fn list_input<'a>(cx: &'a RunCtx<'_, '_>, i: usize) -> Result<&'a TensorList> {
    match cx.inputs[i] {
        Value::List(list) => Ok(list),
        _ => Err(Error::invalid(format!(
            "Input {i} of '{}' is not a TensorList",
            cx.node.name
        ))),
    }
}

/// `AddN` of TensorLists (the gradients of one list, summed as TensorFlow's variant add
/// does): element by element, an unset element counting as zeros. `Err` for lists of
/// different lengths or element dtypes.
pub(crate) fn add_lists(cx: &RunCtx<'_, '_>) -> Result<Outputs> {
    let first = list_input(cx, 0)?;
    let mut sum = first.clone();
    for i in 1..cx.inputs.len() {
        let list = list_input(cx, i)?;
        if list.elements.len() != sum.elements.len() || list.element_dtype != sum.element_dtype {
            return Err(Error::invalid(format!(
                "AddN of TensorLists: a list of {} {} elements and one of {} {}",
                sum.elements.len(),
                super::cpp_dtype_name(sum.element_dtype),
                list.elements.len(),
                super::cpp_dtype_name(list.element_dtype)
            )));
        }
        sum.element_shape = sum
            .element_shape
            .merge_with(&list.element_shape)
            .unwrap_or_else(|_| PartialTensorShape::unknown_rank());
        for (total, item) in sum.elements.iter_mut().zip(&list.elements) {
            *total = match (total.take(), item) {
                (Some(a), Some(b)) => Some(a.binary(polytensor_core::ops::BinaryOp::Add, b)?),
                (a, b) => a.or_else(|| b.clone()),
            };
        }
    }
    Ok(smallvec![Value::List(Arc::new(sum))])
}

/// Input `i` as a list whose element dtype is the op's `element_dtype`.
fn typed_list<'a>(cx: &'a RunCtx<'_, '_>, i: usize) -> Result<&'a TensorList> {
    let list = list_input(cx, i)?;
    let op_dtype = match cx.attrs().dtype("element_dtype") {
        Ok(dtype) => dtype,
        Err(_) => return Ok(list),
    };
    if op_dtype != list.element_dtype {
        return Err(Error::invalid(format!(
            "Invalid data types; op elements {} but list elements {}",
            super::cpp_dtype_name(op_dtype),
            super::cpp_dtype_name(list.element_dtype)
        )));
    }
    Ok(list)
}

/// Input `i`, a scalar integer.
fn scalar_int(cx: &RunCtx<'_, '_>, i: usize) -> Result<i64> {
    cx.require_rank(i, 0, |s| {
        format!("Expected a scalar, but input {i} has shape {s}")
    })?;
    Ok(cx.ints(i)?[0])
}

/// `index` as a position in a list of `len` elements, if it is one.
fn element_index(index: i64, len: usize) -> Option<usize> {
    usize::try_from(index).ok().filter(|&at| at < len)
}

/// Shape input `i` as TensorFlow reads one (`TensorShapeFromTensor`): a scalar -1 is an
/// unknown rank, a vector's -1 entries unknown dims.
fn shape_input(cx: &RunCtx<'_, '_>, i: usize) -> Result<PartialTensorShape> {
    let t = cx.tensor(i)?;
    let values = cx.ints(i)?;
    match t.rank() {
        0 if values == [-1] => Ok(PartialTensorShape::unknown_rank()),
        0 => Err(Error::invalid(
            "The only valid scalar shape tensor is the fully unknown shape specified as -1.",
        )),
        1 => {
            let dims = values
                .iter()
                .map(|&d| match d {
                    -1 => Ok(None),
                    d => usize::try_from(d)
                        .map(Some)
                        .map_err(|_| Error::invalid(format!("Dimension {d} must be >= -1"))),
                })
                .collect::<Result<Vec<_>>>()?;
            PartialTensorShape::new(&dims)
        }
        rank => Err(Error::invalid(format!(
            "Shape must be at most rank 1 but is rank {rank}"
        ))),
    }
}

/// The shape `given` merged with the list's element shape and every set element's shape.
fn merged_element_shape(
    list: &TensorList,
    given: &PartialTensorShape,
) -> Result<PartialTensorShape> {
    let mut shape = given.merge_with(&list.element_shape)?;
    for t in list.elements.iter().flatten() {
        shape = shape.merge_with(&PartialTensorShape::from(t.shape()))?;
    }
    Ok(shape)
}

/// What an unset element reads as: zeros of the list's element shape merged with `given`,
/// which must be fully defined.
fn unset_element(
    cx: &RunCtx<'_, '_>,
    list: &TensorList,
    given: &PartialTensorShape,
) -> Result<Tensor> {
    let shape = list.element_shape.merge_with(given)?;
    if !shape.is_fully_defined() {
        return Err(Error::invalid(format!(
            "Trying to read an uninitialized tensor but element_shape is not fully defined: \
             {shape} and no list element is set."
        )));
    }
    Tensor::zeros(shape.to_shape()?, list.element_dtype, cx.device)
}

/// `Err` with TensorFlow's message (`what` names the op's part) unless `item` fits the
/// list's element shape.
fn check_item_shape(list: &TensorList, item: &Tensor, what: &str) -> Result<()> {
    let shape = PartialTensorShape::from(item.shape());
    if !list.element_shape.is_compatible_with(&shape) {
        return Err(Error::invalid(format!(
            "Tried to {what} element shape: {shape} list shape: {}",
            list.element_shape
        )));
    }
    Ok(())
}
