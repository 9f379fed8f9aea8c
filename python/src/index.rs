//! Python indexing (`t[1, ::2, None, ...]`) as TensorFlow's strided slice: integers take
//! one element and drop the dim, slices keep it, `None` inserts a dim of size 1, and `...`
//! stands for the dims the others leave. Out-of-range integers and too many indices are
//! `IndexError`s, as in NumPy (so `for row in t` stops where it should).

use polytensor::StridedSliceSpec;
use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyEllipsis, PySlice, PyTuple};

/// One entry of an index.
enum Entry {
    /// An integer: one element, the dim dropped.
    Int(i64),
    /// `start:stop:step`, each optional.
    Slice(Option<i64>, Option<i64>, i64),
    /// `None`: a new dim of size 1.
    NewAxis,
    /// `...`.
    Ellipsis,
}

impl Entry {
    fn parse(item: &Bound<'_, PyAny>) -> PyResult<Self> {
        if item.is_none() {
            return Ok(Entry::NewAxis);
        }
        if item.is(PyEllipsis::get(item.py())) {
            return Ok(Entry::Ellipsis);
        }
        if let Ok(slice) = item.cast::<PySlice>() {
            let bound = |name: &str| -> PyResult<Option<i64>> {
                let value = slice.getattr(name)?;
                if value.is_none() {
                    Ok(None)
                } else {
                    index_of(&value).map(Some)
                }
            };
            let step = bound("step")?.unwrap_or(1);
            if step == 0 {
                return Err(PyValueError::new_err("slice step cannot be zero"));
            }
            return Ok(Entry::Slice(bound("start")?, bound("stop")?, step));
        }
        if item.is_instance_of::<pyo3::types::PyBool>() {
            return Err(not_an_index());
        }
        index_of(item).map(Entry::Int)
    }

    /// Whether the entry stands for one dim of the input.
    fn consumes_dim(&self) -> bool {
        matches!(self, Entry::Int(_) | Entry::Slice(..))
    }
}

/// An integer index (anything with `__index__`: Python and NumPy integers).
fn index_of(item: &Bound<'_, PyAny>) -> PyResult<i64> {
    item.extract::<i64>().map_err(|_| not_an_index())
}

fn not_an_index() -> PyErr {
    PyTypeError::new_err(
        "only integers, slices (`:`), ellipsis (`...`), None and tuples of them are valid \
         polytensor indices",
    )
}

/// The strided slice that `key` asks of a tensor of shape `dims`.
pub fn spec(key: &Bound<'_, PyAny>, dims: &[usize]) -> PyResult<StridedSliceSpec> {
    let entries = match key.cast::<PyTuple>() {
        Ok(tuple) => tuple.iter().map(|item| Entry::parse(&item)).collect(),
        Err(_) => Entry::parse(key).map(|entry| vec![entry]),
    }?;
    if entries.len() > 64 {
        return Err(PyIndexError::new_err(format!(
            "an index of {} entries: at most 64",
            entries.len()
        )));
    }
    let consumed = entries.iter().filter(|e| e.consumes_dim()).count();
    if consumed > dims.len() {
        return Err(PyIndexError::new_err(format!(
            "too many indices for tensor: tensor is {}-dimensional, but {consumed} were indexed",
            dims.len()
        )));
    }
    if entries
        .iter()
        .filter(|e| matches!(e, Entry::Ellipsis))
        .count()
        > 1
    {
        return Err(PyIndexError::new_err(
            "an index can only have a single ellipsis ('...')",
        ));
    }
    let mut spec = StridedSliceSpec::default();
    let mut dim = 0;
    for (bit, entry) in entries.iter().enumerate() {
        let bit = 1i64 << bit;
        let (begin, end, stride) = match *entry {
            Entry::Int(i) => {
                let size = dims[dim] as i64;
                if i >= size || i < -size {
                    return Err(PyIndexError::new_err(format!(
                        "index {i} is out of bounds for axis {dim} with size {size}"
                    )));
                }
                spec.shrink_axis_mask |= bit;
                dim += 1;
                (i, i + 1, 1)
            }
            Entry::Slice(start, stop, step) => {
                if start.is_none() {
                    spec.begin_mask |= bit;
                }
                if stop.is_none() {
                    spec.end_mask |= bit;
                }
                dim += 1;
                (start.unwrap_or(0), stop.unwrap_or(0), step)
            }
            Entry::NewAxis => {
                spec.new_axis_mask |= bit;
                (0, 0, 1)
            }
            Entry::Ellipsis => {
                spec.ellipsis_mask |= bit;
                dim += dims.len() - consumed;
                (0, 0, 1)
            }
        };
        spec.begin.push(begin);
        spec.end.push(end);
        spec.strides.push(stride);
    }
    Ok(spec)
}
