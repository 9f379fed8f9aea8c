"""Both directions of `.safetensors` between polytensor and Hugging Face's own Python
package (`safetensors.numpy`).

Usage: `safetensors_numpy.py write PATH` writes a file of known arrays (every dtype NumPy
and the format share); `safetensors_numpy.py check PATH` reads a file polytensor wrote and
checks it holds the same arrays. `tests/safetensors.rs` runs both.
"""

import sys

import numpy as np
from safetensors.numpy import load_file, save_file

from known_arrays import shared_arrays


def arrays():
    return {
        **shared_arrays(),
        "i32": np.array([[-(2**31), 2**31 - 1]], dtype=np.int32),
        "u64": np.array([2**64 - 1], dtype=np.uint64),
        "c64": np.array([1 + 2j, -3.5 - 0j], dtype=np.complex64),
        "scalar": np.array(7, dtype=np.int64),
    }


def main():
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "write":
        save_file(arrays(), path)
        print(f"wrote {len(arrays())} arrays")
        return
    got = load_file(path)
    want = arrays()
    assert sorted(got) == sorted(want), f"names {sorted(got)} != {sorted(want)}"
    for name, array in want.items():
        assert got[name].dtype == array.dtype, f"{name}: {got[name].dtype} != {array.dtype}"
        assert got[name].shape == array.shape, f"{name}: {got[name].shape} != {array.shape}"
        np.testing.assert_array_equal(got[name], array, err_msg=name)
    print(f"checked {len(want)} arrays")


if __name__ == "__main__":
    main()
