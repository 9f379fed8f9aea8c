//! What `--input` feeds a model: a `.npy` file, an array of a `.npz` or `.safetensors` file,
//! or seeded random values of a shape, matched to the model's inputs by name.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use polytensor::{DataType, Device, PartialTensorShape, Tensor};

use crate::error::{CliError, CliResult, Context};

/// One `--input`: `[NAME=]SOURCE`.
#[derive(Clone, Debug, PartialEq)]
pub struct FeedSpec {
    /// The model input it feeds (`None`: the model's one input).
    pub name: Option<String>,
    /// Where its values come from.
    pub source: Source,
}

/// Where a feed's values come from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// A `.npy` file, or one array (`FILE:KEY`, or the only one) of a `.npz` or
    /// `.safetensors` file.
    File { path: PathBuf, key: Option<String> },
    /// Seeded random values (`random` or `random:1x224x224x3`): standard normal floats,
    /// integers in [0, 100), strings of the element indices; the shape is the input's, with
    /// unknown dims set to `--batch`, unless given.
    Random { dims: Option<Vec<usize>> },
}

impl std::str::FromStr for FeedSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (name, source) = match text.split_once('=') {
            Some((name, source)) if !name.is_empty() => (Some(name.to_string()), source),
            _ => (None, text),
        };
        let source = if source == "random" {
            Source::Random { dims: None }
        } else if let Some(shape) = source.strip_prefix("random:") {
            let dims = shape
                .split(['x', ','])
                .filter(|d| !d.is_empty())
                .map(|d| {
                    d.parse::<usize>()
                        .map_err(|_| format!("{shape:?} is not a shape like 1x224x224x3"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Source::Random { dims: Some(dims) }
        } else {
            let archive = [".npz:", ".safetensors:"]
                .iter()
                .find_map(|ext| source.find(ext).map(|at| at + ext.len() - 1));
            match archive {
                Some(at) => Source::File {
                    path: PathBuf::from(&source[..at]),
                    key: Some(source[at + 1..].to_string()),
                },
                None => Source::File {
                    path: PathBuf::from(source),
                    key: None,
                },
            }
        };
        Ok(FeedSpec { name, source })
    }
}

/// A model input: its name, dtype and (partly known) shape.
#[derive(Clone, Debug)]
pub struct InputSpec {
    /// The name feeds use (a SavedModel signature's key, a frozen graph's tensor `x:0`).
    pub name: String,
    /// Its dtype.
    pub dtype: DataType,
    /// Its shape, as far as the model says.
    pub shape: PartialTensorShape,
}

impl InputSpec {
    /// Whether `--input NAME=...` names this input (`x` names `x:0`).
    fn is_named(&self, name: &str) -> bool {
        self.name == name || self.name.strip_suffix(":0") == Some(name)
    }
}

/// The tensors to feed `inputs`, in their order, on `device`: each from its `--input`, or
/// random; `batch` sets unknown dims.
pub fn assemble(
    inputs: &[InputSpec],
    specs: &[FeedSpec],
    batch: usize,
    seed: u64,
    device: &Arc<dyn Device>,
) -> CliResult<Vec<Tensor>> {
    let names = || {
        inputs
            .iter()
            .map(|i| i.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for spec in specs {
        match &spec.name {
            Some(name) if !inputs.iter().any(|i| i.is_named(name)) => {
                return Err(CliError::bad_input(format!(
                    "--input {name}=...: the model has no input {name:?}; its inputs are: {}",
                    names()
                )))
            }
            None if inputs.len() != 1 || specs.len() != 1 => {
                return Err(CliError::bad_input(format!(
                    "the model has {} inputs ({}): name each, as --input NAME=FILE",
                    inputs.len(),
                    names()
                )))
            }
            _ => {}
        }
    }
    inputs
        .iter()
        .enumerate()
        .map(|(i, input)| {
            let spec = specs
                .iter()
                .find(|s| s.name.as_deref().is_some_and(|n| input.is_named(n)))
                .or_else(|| specs.iter().find(|s| s.name.is_none()));
            let source = spec.map_or(&Source::Random { dims: None }, |s| &s.source);
            feed(input, source, batch, seed.wrapping_add(i as u64), device)
                .context(format!("feeding input {}", input.name))
        })
        .collect()
}

/// The tensor for `input` from `source`.
fn feed(
    input: &InputSpec,
    source: &Source,
    batch: usize,
    seed: u64,
    device: &Arc<dyn Device>,
) -> CliResult<Tensor> {
    let tensor = match source {
        Source::Random { dims } => {
            let dims = match dims {
                Some(dims) => dims.clone(),
                None => fed_dims(&input.shape, batch)?,
            };
            random(&dims, input.dtype, seed, device)?
        }
        Source::File { path, key } => read(path, key.as_deref(), &input.name, device)?,
    };
    if tensor.dtype() != input.dtype {
        return Err(CliError::bad_input(format!(
            "the model's input is {}, the values are {} (convert them first)",
            input.dtype,
            tensor.dtype()
        )));
    }
    if !input
        .shape
        .is_compatible_with(&PartialTensorShape::from(tensor.shape()))
    {
        return Err(CliError::bad_input(format!(
            "the values' shape {} does not fit the input's {}",
            tensor.shape(),
            polytensor::graph::python_shape(&input.shape)
        )));
    }
    Ok(tensor)
}

/// `shape` with unknown dims set to `batch`.
pub fn fed_dims(shape: &PartialTensorShape, batch: usize) -> CliResult<Vec<usize>> {
    match shape.dims() {
        Some(dims) => Ok(dims.iter().map(|d| d.unwrap_or(batch)).collect()),
        None => Err(CliError::bad_input(
            "its rank is unknown: give its shape, as --input NAME=random:1x224x224x3",
        )),
    }
}

/// An array from a `.npy`, `.npz` or `.safetensors` file (the `key`'s, else the only one,
/// else the one named as the input).
fn read(
    path: &Path,
    key: Option<&str>,
    input: &str,
    device: &Arc<dyn Device>,
) -> CliResult<Tensor> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let reading = format!("reading {}", path.display());
    let arrays = match ext {
        "npy" => return polytensor::npy::load(path, device).context(reading),
        "npz" => polytensor::npy::load_npz(path, device).context(&reading)?,
        "safetensors" => polytensor::safetensors::load(path, device).context(&reading)?,
        _ => {
            return Err(CliError::bad_input(format!(
                "{}: inputs are read from .npy, .npz or .safetensors files",
                path.display()
            )))
        }
    };
    let wanted = key.map(str::to_string).or_else(|| {
        (arrays.len() != 1).then(|| input.strip_suffix(":0").unwrap_or(input).to_string())
    });
    let keys = || {
        arrays
            .iter()
            .map(|(k, _)| k.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match wanted {
        None => Ok(arrays.into_iter().next().map(|(_, t)| t).ok_or_else(|| {
            CliError::bad_input(format!("{}: the file holds no array", path.display()))
        })?),
        Some(wanted) => {
            let names = keys();
            arrays
                .into_iter()
                .find(|(k, _)| *k == wanted)
                .map(|(_, t)| t)
                .ok_or_else(|| {
                    CliError::bad_input(format!(
                        "{}: no array {wanted:?} (it holds: {names}); pick one with FILE:KEY",
                        path.display()
                    ))
                })
        }
    }
}

/// Seeded random values of `dims`: standard normal floats (Box-Muller over an xorshift
/// stream), integers in [0, 100) (token ids, indices), or for strings the element indices
/// as text (on the CPU, where strings live).
pub fn random(
    dims: &[usize],
    dtype: DataType,
    seed: u64,
    device: &Arc<dyn Device>,
) -> CliResult<Tensor> {
    let n = dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .filter(|&n| n <= 1 << 31)
        .ok_or_else(|| CliError::bad_input(format!("the shape {dims:?} is too large")))?;
    if dtype == DataType::String {
        let text = (0..n).map(|i| i.to_string());
        return Ok(Tensor::from_strings(
            text,
            dims,
            &polytensor::device("cpu:0")?,
        )?);
    }
    let mut state = 0x2545_f491_4f6c_dd1d_u64 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    let values: Vec<f32> = if dtype.is_integer() || dtype == DataType::Bool {
        let high = if dtype == DataType::Bool { 2.0 } else { 100.0 };
        (0..n).map(|_| (uniform() * high).floor() as f32).collect()
    } else {
        (0..n)
            .map(|_| {
                let (u, v) = (uniform(), uniform());
                ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
            })
            .collect()
    };
    Ok(Tensor::from_slice(&values, dims, device)?.cast(dtype)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> FeedSpec {
        text.parse().unwrap()
    }

    #[test]
    fn input_specs_parse() {
        assert_eq!(
            spec("x=random:1x3,4"),
            FeedSpec {
                name: Some("x".into()),
                source: Source::Random {
                    dims: Some(vec![1, 3, 4])
                }
            }
        );
        assert_eq!(spec("random").source, Source::Random { dims: None });
        assert_eq!(
            spec("images:0=in/batch.npz:pixels").source,
            Source::File {
                path: "in/batch.npz".into(),
                key: Some("pixels".into())
            }
        );
        assert_eq!(
            spec("a.npy"),
            FeedSpec {
                name: None,
                source: Source::File {
                    path: "a.npy".into(),
                    key: None
                }
            }
        );
        assert!("x=random:1xq".parse::<FeedSpec>().is_err());
    }

    #[test]
    fn random_values_are_seeded_and_sized() {
        let cpu = polytensor::device("cpu:0").unwrap();
        let a = random(&[2, 3], DataType::Float, 7, &cpu).unwrap();
        let b = random(&[2, 3], DataType::Float, 7, &cpu).unwrap();
        assert_eq!(a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
        let ids = random(&[50], DataType::Int32, 1, &cpu).unwrap();
        assert!(ids
            .to_vec::<i32>()
            .unwrap()
            .iter()
            .all(|&v| (0..100).contains(&v)));
        assert!(random(&[1 << 20, 1 << 20], DataType::Float, 0, &cpu).is_err());
    }

    #[test]
    fn feeds_match_inputs_by_name() {
        let cpu = polytensor::device("cpu:0").unwrap();
        let inputs = [InputSpec {
            name: "x:0".into(),
            dtype: DataType::Float,
            shape: PartialTensorShape::new(&[None, Some(4)]).unwrap(),
        }];
        let fed = assemble(&inputs, &[spec("x=random")], 3, 0, &cpu).unwrap();
        assert_eq!(fed[0].dims(), &[3, 4]);
        let wrong = assemble(&inputs, &[spec("y=random")], 1, 0, &cpu).unwrap_err();
        assert!(wrong.to_string().contains("its inputs are: x:0"), "{wrong}");
        let misfit = assemble(&inputs, &[spec("random:2x5")], 1, 0, &cpu).unwrap_err();
        assert!(misfit.to_string().contains("does not fit"), "{misfit}");
    }
}
