"""Arrays of known values that the file-format tests (`npy_numpy.py`,
`safetensors_numpy.py`) write with their Python writers and expect back from polytensor:
signed zeros, infinities, extreme integers, bool, and an empty array."""

import numpy as np


def shared_arrays():
    """The arrays both formats carry; each script adds the dtypes only its format has."""
    return {
        "f32": np.array([[1.5, -2.0, 0.0], [np.inf, -0.0, 3.25]], dtype=np.float32),
        "f64": np.arange(6, dtype=np.float64).reshape(3, 2) / 7,
        "f16": np.array([0.5, -65504.0, 1e-4], dtype=np.float16),
        "i8": np.array([-128, 0, 127], dtype=np.int8),
        "u16": np.array([0, 65535], dtype=np.uint16),
        "mask": np.array([True, False, True]),
        "empty": np.zeros((0, 4), dtype=np.float32),
    }
