"""How Python data becomes tensor elements: TensorFlow's rules for Python values, NumPy's
arrays as they are, and the dtypes NumPy lacks (bfloat16, float8, int4) through ml_dtypes.

Called by the extension module; each function does one conversion."""

import numbers

import numpy as np


def _python_data(data):
    """Whether `data` is Python numbers or (nested) lists and tuples of them."""
    return isinstance(data, (numbers.Number, list, tuple)) and not isinstance(data, np.generic)


def _tensorflow_dtype(array):
    """The dtype `tf.constant` gives Python data that NumPy read as `array`: float32 for
    floats, int32 for ints that fit (else int64), complex128, bool, as it is."""
    if array.dtype == np.float64:
        return np.float32
    if array.dtype == np.int64:
        info = np.iinfo(np.int32)
        if array.size == 0 or (array.min() >= info.min and array.max() <= info.max):
            return np.int32
    return None


def _numpy_dtype(name):
    """NumPy's dtype for a polytensor dtype name, or None where NumPy has none."""
    try:
        return np.dtype("bool" if name == "bool" else name)
    except TypeError:
        return None


def as_array(data, dtype=None):
    """`data` ready to import, as one of:

    - ``("array", array, stored_as)``: a C-contiguous array in native byte order, whose
      bits are of dtype `stored_as` where that is not the array's own (ml_dtypes arrays
      travel as unsigned integers of their size, since DLPack export needs NumPy dtypes);
    - ``("strings", [bytes, ...], shape)`` for text and bytes.

    A requested `dtype` NumPy has is applied here; one it lacks (bfloat16) is left to the
    caller's cast."""
    target = _numpy_dtype(dtype) if dtype is not None else None
    array = np.asarray(data, dtype=target)
    if target is None and dtype is None and _python_data(data):
        narrowed = _tensorflow_dtype(array)
        if narrowed is not None:
            array = array.astype(narrowed)
    if array.dtype.kind in "USO":
        flat = [
            item.encode("utf-8") if isinstance(item, str) else bytes(item)
            for item in array.reshape(-1).tolist()
        ]
        return ("strings", flat, array.shape)
    array = np.asarray(array, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    if array.dtype.isbuiltin == 2:
        # A dtype NumPy itself lacks, ml_dtypes' (bfloat16, float8_*, int4): its name is
        # polytensor's.
        unsigned = np.dtype(f"uint{array.dtype.itemsize * 8}")
        return ("array", array.view(unsigned), array.dtype.name)
    return ("array", array, None)


def object_array(values, shape):
    """A NumPy object array of `bytes` (TensorFlow's form for string tensors)."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(shape)


def ml_dtypes_view(raw, name):
    """The bits of `raw` (a tensor of unsigned integers) as an `ml_dtypes` array of dtype
    `name`, as TensorFlow's `.numpy()` gives bfloat16 and float8."""
    try:
        import ml_dtypes
    except ImportError:
        raise TypeError(
            f"NumPy has no {name} dtype: install ml_dtypes (TensorFlow's), or cast first "
            f"(t.cast('float32').numpy())"
        ) from None
    return np.from_dlpack(raw).view(getattr(ml_dtypes, name))
