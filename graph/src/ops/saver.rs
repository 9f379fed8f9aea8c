//! The ops of TensorFlow's savers: `SaveV2`, `RestoreV2` and `MergeV2Checkpoints`, on
//! `polytensor_core::checkpoint` (the tensor bundle format). Their file names and specs are
//! strings, so they run on the host; the tensors saved come from any device, and those
//! restored go on to the variables' devices.

use polytensor_core::checkpoint::{self, parse_shape_and_slice, Reader, Writer};
use polytensor_core::{DataType, Error, PartialTensorShape, Result};

use super::kernels::{Outputs, RunCtx};
use super::strings::scalar_string;
use super::{InferCtx, Value};
use crate::graph::Typed;

/// A saver op.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum SaverOp {
    /// `SaveV2(prefix, tensor_names, shape_and_slices, tensors...)`.
    Save,
    /// `RestoreV2(prefix, tensor_names, shape_and_slices)`: one tensor per name, of the
    /// `dtypes` attribute.
    Restore,
    /// `MergeV2Checkpoints(checkpoint_prefixes, destination_prefix)`.
    Merge,
}

/// Saver op types by TensorFlow's name.
pub(crate) const OPS: &[(&str, SaverOp)] = &[
    ("SaveV2", SaverOp::Save),
    ("RestoreV2", SaverOp::Restore),
    ("MergeV2Checkpoints", SaverOp::Merge),
];

/// The inputs before `SaveV2`'s tensors.
const FIXED_INPUTS: usize = 3;

/// The static outputs of `op`.
pub(crate) fn infer(op: SaverOp, cx: &InferCtx<'_>) -> Result<Vec<Typed>> {
    let strings = |range: std::ops::Range<usize>| {
        range.into_iter().try_for_each(|i| match cx.inputs.get(i) {
            Some((DataType::String, _)) => Ok(()),
            Some(_) => Err(cx.type_mismatch(i, DataType::String)),
            None => Err(cx.error(format!("input {i} is missing"))),
        })
    };
    match op {
        SaverOp::Save => {
            strings(0..FIXED_INPUTS)?;
            let given = cx.inputs[FIXED_INPUTS..]
                .iter()
                .map(|t| t.0)
                .collect::<Vec<_>>();
            if cx.attrs().has("dtypes") && cx.attrs().dtypes("dtypes")? != given {
                return Err(cx.error("attr 'dtypes' does not match the tensors to save"));
            }
            Ok(Vec::new())
        }
        SaverOp::Restore => {
            cx.exactly(FIXED_INPUTS)?;
            strings(0..FIXED_INPUTS)?;
            let unknown = PartialTensorShape::unknown_rank();
            Ok(cx
                .attrs()
                .dtypes("dtypes")?
                .into_iter()
                .map(|d| (d, unknown.clone()))
                .collect())
        }
        SaverOp::Merge => {
            cx.exactly(2)?;
            strings(0..2)?;
            Ok(Vec::new())
        }
    }
}

/// Run `op`.
pub(crate) fn run(op: SaverOp, cx: &RunCtx<'_, '_>) -> Result<Outputs> {
    match op {
        SaverOp::Save => save(cx).map(|()| Outputs::new()),
        SaverOp::Restore => restore(cx),
        SaverOp::Merge => {
            let prefixes: Vec<String> = cx
                .tensor(0)?
                .to_strings()?
                .iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect();
            let destination = scalar_string(cx, 1)?;
            let delete_old_dirs = cx.attrs().bool_or("delete_old_dirs", true)?;
            if cx.attrs().bool_or("allow_missing_files", false)? {
                let present: Vec<&String> = prefixes
                    .iter()
                    .filter(|p| checkpoint::index_path(p.as_ref()).exists())
                    .collect();
                checkpoint::merge(&present, &destination, delete_old_dirs)?;
            } else {
                checkpoint::merge(&prefixes, &destination, delete_old_dirs)?;
            }
            Ok(Outputs::new())
        }
    }
}

/// `SaveV2`'s names and specs, checked as TensorFlow's `ValidateInputs` does.
fn names_and_specs(cx: &RunCtx<'_, '_>) -> Result<(String, Vec<String>, Vec<String>)> {
    let prefix = cx.tensor(0)?;
    if prefix.num_elements() != 1 {
        return Err(Error::invalid(format!(
            "Input prefix should have a single element, got {} instead.",
            prefix.num_elements()
        )));
    }
    let (names, specs) = (cx.tensor(1)?, cx.tensor(2)?);
    if names.rank() != 1 || specs.rank() != 1 {
        return Err(Error::invalid(format!(
            "Input tensor_names and shape_and_slices should be an 1-d tensors, got {} and {} \
             instead.",
            names.shape(),
            specs.shape()
        )));
    }
    if names.num_elements() != specs.num_elements() {
        return Err(Error::invalid(format!(
            "tensor_names and shape_and_slices have different number of elements: {} vs. {}",
            names.num_elements(),
            specs.num_elements()
        )));
    }
    let text = |bytes: Vec<Vec<u8>>| -> Vec<String> {
        bytes
            .into_iter()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .collect()
    };
    Ok((
        scalar_string(cx, 0)?,
        text(names.to_strings()?),
        text(specs.to_strings()?),
    ))
}

fn save(cx: &RunCtx<'_, '_>) -> Result<()> {
    let (prefix, names, specs) = names_and_specs(cx)?;
    let tensors = cx.inputs.len() - FIXED_INPUTS;
    if names.len() != tensors {
        return Err(Error::invalid(format!(
            "Got {} tensor names but {tensors} tensors.",
            names.len()
        )));
    }
    let mut writer = Writer::new(&prefix)?;
    for (i, (name, spec)) in names.iter().zip(&specs).enumerate() {
        let tensor = cx.tensor(FIXED_INPUTS + i)?;
        match parse_shape_and_slice(spec)? {
            None => writer.add(name, &tensor)?,
            Some((shape, slice)) => writer.add_slice(name, &shape, &slice, &tensor)?,
        }
    }
    writer.finish()
}

fn restore(cx: &RunCtx<'_, '_>) -> Result<Outputs> {
    let (prefix, names, specs) = names_and_specs(cx)?;
    let dtypes = cx.attrs().dtypes("dtypes")?;
    if dtypes.len() != names.len() {
        return Err(Error::invalid(format!(
            "Got {} tensor names but {} dtypes.",
            names.len(),
            dtypes.len()
        )));
    }
    let reader = Reader::open(&prefix)?;
    let device = cx.device;
    names
        .iter()
        .zip(&specs)
        .zip(dtypes)
        .map(|((name, spec), dtype)| {
            let entry = reader.entry(name)?;
            if entry.dtype() != dtype {
                return Err(Error::invalid(format!(
                    "tensor_name = {name}; expected dtype {} does not equal restored dtype {}",
                    super::cpp_dtype_name(dtype),
                    super::cpp_dtype_name(entry.dtype())
                )));
            }
            let tensor = match parse_shape_and_slice(spec)? {
                None => reader.read(name, device)?,
                Some((shape, slice)) => {
                    if shape != *entry.shape() {
                        return Err(Error::invalid(format!(
                            "tensor_name = {name}; shape in shape_and_slice spec {shape} does \
                             not match the shape stored in checkpoint: {}",
                            entry.shape()
                        )));
                    }
                    reader.read_slice(name, &slice, device)?
                }
            };
            Ok(Value::Tensor(tensor))
        })
        .collect()
}
