//! TensorFlow's lookup tables (`tf.lookup.StaticHashTable` and the TF1 initializers):
//! `HashTableV2` makes a table resource, `LookupTableImportV2` / `InitializeTableV2` /
//! `InitializeTableFromTextFileV2` fill it, `LookupTableFindV2` maps keys to values (the
//! default for a missing key) and `LookupTableSizeV2` counts its entries. A table lives in
//! the session beside its variables, keyed by its resource name; lookups run on the host.

use std::collections::HashMap;
use std::sync::Arc;

use polytensor_core::{DataType, Error, PartialTensorShape, Result, Scalar, Tensor};

use super::kernels::{Outputs, RunCtx};
use super::{InferCtx, Source, Value};
use crate::graph::Typed;

/// A table op.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum TableOp {
    /// `HashTableV2`: a table's handle.
    Create,
    /// `LookupTableImportV2` and `InitializeTableV2`: the table's entries from a keys and a
    /// values tensor.
    Import,
    /// `InitializeTableFromTextFileV2`: the entries from a text file's lines.
    ImportTextFile,
    /// `LookupTableFindV2`: the value of each key.
    Find,
    /// `LookupTableSizeV2`: the number of entries.
    Size,
}

/// Table op types by TensorFlow's name.
pub(crate) const OPS: &[(&str, TableOp)] = &[
    ("HashTableV2", TableOp::Create),
    ("LookupTableImportV2", TableOp::Import),
    ("InitializeTableV2", TableOp::Import),
    ("InitializeTableFromTextFileV2", TableOp::ImportTextFile),
    ("LookupTableFindV2", TableOp::Find),
    ("LookupTableSizeV2", TableOp::Size),
];

impl TableOp {
    /// The type attributes tied to the inputs.
    pub(crate) fn typed(self) -> &'static [(&'static str, Source)] {
        match self {
            TableOp::Import | TableOp::Find => {
                &[("Tin", Source::Input(1)), ("Tout", Source::Input(2))]
            }
            _ => &[],
        }
    }

    /// Whether the op reads or writes the table its first input names.
    pub(crate) fn acts_on_table(self) -> bool {
        self != TableOp::Create
    }
}

/// A table's entries: each key (an integer or a byte string) to its row of `values`, which
/// stay on the device that filled the table.
pub(crate) struct LookupTable {
    key_dtype: DataType,
    index: HashMap<Key, usize>,
    /// The values, one per key.
    values: Values,
}

/// A table's values: strings kept on the host as bytes (read once, at import), others as a
/// tensor on the device that filled the table.
enum Values {
    Strings(Vec<Vec<u8>>),
    Dense(Tensor),
}

impl Values {
    fn dtype(&self) -> DataType {
        match self {
            Values::Strings(_) => DataType::String,
            Values::Dense(t) => t.dtype(),
        }
    }
}

#[derive(Clone, PartialEq, Eq, Hash)]
enum Key {
    Int(i64),
    Bytes(Vec<u8>),
}

/// The keys of `t` (integers or strings) as table keys.
fn keys_of(t: &Tensor) -> Result<Vec<Key>> {
    if t.dtype() == DataType::String {
        return Ok(t.to_strings()?.into_iter().map(Key::Bytes).collect());
    }
    t.to_scalars()?
        .into_iter()
        .map(|s| match s {
            Scalar::I64(v) => Ok(Key::Int(v)),
            Scalar::U64(v) => i64::try_from(v)
                .map(Key::Int)
                .map_err(|_| Error::invalid("key overflow")),
            other => Err(Error::invalid(format!(
                "a table key must be an integer or a string, got {other:?}"
            ))),
        })
        .collect()
}

/// The static outputs of `op`.
pub(crate) fn infer(op: TableOp, cx: &InferCtx<'_>) -> Result<Vec<Typed>> {
    let attrs = cx.attrs();
    let handle = |i: usize| match cx.inputs.get(i) {
        Some((DataType::Resource, _)) => Ok(()),
        Some(_) => Err(cx.type_mismatch(i, DataType::Resource)),
        None => Err(cx.error("the table handle is missing")),
    };
    match op {
        TableOp::Create => {
            cx.exactly(0)?;
            Ok(vec![(DataType::Resource, PartialTensorShape::new(&[])?)])
        }
        TableOp::Import => {
            cx.exactly(3)?;
            handle(0)?;
            Ok(Vec::new())
        }
        TableOp::ImportTextFile => {
            cx.exactly(2)?;
            handle(0)?;
            if cx.inputs[1].0 != DataType::String {
                return Err(cx.type_mismatch(1, DataType::String));
            }
            Ok(Vec::new())
        }
        TableOp::Find => {
            cx.exactly(3)?;
            handle(0)?;
            Ok(vec![(
                attrs.dtype_or("Tout", cx.inputs[2].0)?,
                cx.inputs[1].1.clone(),
            )])
        }
        TableOp::Size => {
            cx.exactly(1)?;
            handle(0)?;
            Ok(vec![(DataType::Int64, PartialTensorShape::new(&[])?)])
        }
    }
}

/// Run `op`.
pub(crate) fn run(op: TableOp, cx: &mut RunCtx<'_, '_>) -> Result<Outputs> {
    let one = |t: Tensor| -> Result<Outputs> { Ok(std::iter::once(Value::Tensor(t)).collect()) };
    if op == TableOp::Create {
        return Ok(
            std::iter::once(Value::Resource(super::kernels::variable_name(cx.node)?)).collect(),
        );
    }
    let name = cx.variable(0)?;
    match op {
        TableOp::Create => unreachable!("handled above"),
        TableOp::Import => {
            let (keys, values) = (cx.tensor(1)?.into_owned(), cx.tensor(2)?.into_owned());
            let table = import(cx, keys, values)?;
            cx.variables.tables.insert(name, Arc::new(table));
            Ok(Outputs::new())
        }
        TableOp::ImportTextFile => {
            let path = super::strings::scalar_string(cx, 1)?;
            let (keys, values) = text_file_entries(cx, &path)?;
            let table = import(cx, keys, values)?;
            cx.variables.tables.insert(name, Arc::new(table));
            Ok(Outputs::new())
        }
        TableOp::Find => {
            let table = table(cx, &name)?;
            let keys = cx.tensor(1)?;
            if keys.dtype() != table.key_dtype {
                return Err(Error::invalid(format!(
                    "Key must be type {} but got {}",
                    super::cpp_dtype_name(table.key_dtype),
                    super::cpp_dtype_name(keys.dtype())
                )));
            }
            let default = cx.tensor(2)?;
            if default.dtype() != table.values.dtype() || default.num_elements() != 1 {
                return Err(Error::invalid(format!(
                    "the default value must be a scalar {}, got {} of shape {}",
                    table.values.dtype(),
                    default.dtype(),
                    default.shape()
                )));
            }
            one(find(&table, &keys, &default, cx.device)?)
        }
        TableOp::Size => {
            let size = table(cx, &name)?.index.len() as i64;
            one(Tensor::scalar(size, cx.device)?)
        }
    }
}

/// The value of each of `keys` in `table`, `default` for a key it lacks, on `device`:
/// rows found on the host, gathered where the values are, the default put in by a select
/// (strings picked on the host).
fn find(
    table: &LookupTable,
    keys: &Tensor,
    default: &Tensor,
    device: &Arc<dyn polytensor_core::Device>,
) -> Result<Tensor> {
    let rows: Vec<Option<usize>> = keys_of(keys)?
        .iter()
        .map(|k| table.index.get(k).copied())
        .collect();
    let values = match &table.values {
        Values::Dense(values) => values,
        Values::Strings(values) => {
            let fallback = default.to_strings()?;
            let picked: Vec<Vec<u8>> = rows
                .iter()
                .map(|row| row.map_or(&fallback[0], |r| &values[r]).clone())
                .collect();
            return Tensor::from_strings(picked, keys.shape().clone(), default.device());
        }
    };
    let at = values.device();
    let found: Vec<bool> = rows.iter().map(Option::is_some).collect();
    let indices: Vec<i64> = rows.iter().map(|r| r.unwrap_or(0) as i64).collect();
    let default = default.to_device(at)?.reshape(Vec::<usize>::new())?;
    let result = if table.index.is_empty() {
        default.broadcast_to(keys.shape().clone())?.contiguous()?
    } else {
        let gathered = values.gather(
            &Tensor::from_slice(&indices, keys.shape().clone(), at)?,
            0,
            0,
        )?;
        Tensor::from_slice(&found, keys.shape().clone(), at)?.where_(&gathered, &default)?
    };
    result.to_device(device)
}

fn table(cx: &RunCtx<'_, '_>, name: &str) -> Result<Arc<LookupTable>> {
    cx.variables.tables.get(name).cloned().ok_or_else(|| {
        Error::NotFound(format!(
            "Resource localhost/{name}/N10tensorflow6lookup15LookupInterfaceE does not exist. \
             (the table has not been initialized)"
        ))
    })
}

/// A table of `keys` and `values` (one value per key, on the host), checked against the
/// node's `key_dtype` / `value_dtype` where the op has them.
fn import(cx: &RunCtx<'_, '_>, keys: Tensor, values: Tensor) -> Result<LookupTable> {
    if keys.shape() != values.shape() || keys.rank() > 1 {
        return Err(Error::invalid(format!(
            "Expected shape {} for value, got {}",
            keys.shape(),
            values.shape()
        )));
    }
    let attrs = cx.attrs();
    for (attr, given) in [("Tin", keys.dtype()), ("Tout", values.dtype())] {
        if attrs.has(attr) && attrs.dtype(attr)? != given {
            return Err(Error::invalid(format!(
                "attr '{attr}' does not match the {given} given"
            )));
        }
    }
    let mut index = HashMap::with_capacity(keys.num_elements());
    for (row, key) in keys_of(&keys)?.into_iter().enumerate() {
        // The first of repeated keys wins, as TensorFlow's HashTable keeps the first.
        index.entry(key).or_insert(row);
    }
    let values = match values.dtype() {
        DataType::String => Values::Strings(values.to_strings()?),
        _ => Values::Dense(values.reshape([keys.num_elements()])?),
    };
    Ok(LookupTable {
        key_dtype: keys.dtype(),
        index,
        values,
    })
}

/// `InitializeTableFromTextFileV2`'s entries: per line, the key and the value taken from
/// the column `key_index` / `value_index` (split at `delimiter`), `-1` the line number,
/// `-2` the whole line; at most `vocab_size` lines (`-1`: all).
fn text_file_entries(cx: &RunCtx<'_, '_>, path: &str) -> Result<(Tensor, Tensor)> {
    let attrs = cx.attrs();
    let key_index = attrs.int("key_index")?;
    let value_index = attrs.int("value_index")?;
    let vocab_size = attrs.int_or("vocab_size", -1)?;
    let delimiter = attrs.string_or("delimiter", "\t")?;
    let text = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let mut lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    if let Ok(limit) = usize::try_from(vocab_size) {
        if lines.len() < limit {
            return Err(Error::invalid(format!(
                "Invalid vocab_size in {path}: expected {limit} lines, got {}",
                lines.len()
            )));
        }
        lines.truncate(limit);
    }
    let column = |line: &[u8], n: usize, index: i64| -> Result<Vec<u8>> {
        match index {
            -1 => Ok(n.to_string().into_bytes()),
            -2 => Ok(line.to_vec()),
            i => {
                let fields: Vec<&[u8]> = if delimiter.is_empty() {
                    line.split(|b| b.is_ascii_whitespace())
                        .filter(|f| !f.is_empty())
                        .collect()
                } else {
                    split_bytes(line, delimiter.as_bytes())
                };
                usize::try_from(i)
                    .ok()
                    .and_then(|i| fields.get(i))
                    .map(|f| f.to_vec())
                    .ok_or_else(|| {
                        Error::invalid(format!("Invalid number of columns in {path} line {n}"))
                    })
            }
        }
    };
    let typed = |index: i64, dtype: DataType| -> Result<Tensor> {
        let items = lines
            .iter()
            .enumerate()
            .map(|(n, line)| column(line, n, index))
            .collect::<Result<Vec<_>>>()?;
        let count = items.len();
        if dtype == DataType::String {
            return Tensor::from_strings(items, [count], cx.device);
        }
        let numbers = items
            .iter()
            .map(|b| {
                std::str::from_utf8(b)
                    .ok()
                    .and_then(|s| s.trim().parse::<f64>().ok())
                    .ok_or_else(|| {
                        Error::invalid(format!(
                            "{path}: {:?} is not a number",
                            String::from_utf8_lossy(b)
                        ))
                    })
            })
            .collect::<Result<Vec<f64>>>()?;
        Tensor::from_slice(&numbers, [count], cx.device)?.cast(dtype)
    };
    let key_dtype = if key_index == -1 {
        DataType::Int64
    } else {
        DataType::String
    };
    let value_dtype = if value_index == -1 {
        DataType::Int64
    } else {
        DataType::String
    };
    Ok((
        typed(key_index, key_dtype)?,
        typed(value_index, value_dtype)?,
    ))
}

fn split_bytes<'a>(line: &'a [u8], delimiter: &[u8]) -> Vec<&'a [u8]> {
    let mut fields = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.windows(delimiter.len()).position(|w| w == delimiter) {
        fields.push(&rest[..at]);
        rest = &rest[at + delimiter.len()..];
    }
    fields.push(rest);
    fields
}
