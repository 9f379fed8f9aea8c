"""Both directions of `.npy` and `.npz` between polytensor and NumPy itself.

Usage: `npy_numpy.py write DIR` writes NumPy's files of known arrays into DIR (C and Fortran
order, big-endian, `savez` and `savez_compressed`); `npy_numpy.py check DIR` reads the files
polytensor wrote there and checks their arrays. `tests/npy.rs` runs both.
"""

import pathlib
import sys

import numpy as np

from known_arrays import shared_arrays


def arrays():
    return {
        **shared_arrays(),
        "i64": np.array([[-(2**63), 2**63 - 1]], dtype=np.int64),
        "u32": np.array([2**32 - 1], dtype=np.uint32),
        "c128": np.array([1 + 2j, -3.5 - 0j], dtype=np.complex128),
        "scalar": np.array(7, dtype=np.int32),
    }


def main():
    mode, out = sys.argv[1], pathlib.Path(sys.argv[2])
    want = arrays()
    if mode == "write":
        np.save(out / "c_order.npy", want["f64"])
        np.save(out / "fortran.npy", np.asfortranarray(np.arange(24, dtype=np.int32).reshape(2, 3, 4)))
        np.save(out / "big_endian.npy", np.array([1.5, -2.25], dtype=">f8"))
        np.savez(out / "plain.npz", **want)
        np.savez_compressed(out / "compressed.npz", **want)
        print("wrote NumPy's files")
        return
    for name, array in want.items():
        got = np.load(out / f"{name}.npy")
        assert got.dtype == array.dtype and got.shape == array.shape, f"{name}: {got.dtype} {got.shape}"
        np.testing.assert_array_equal(got, array, err_msg=name)
    with np.load(out / "ours.npz") as archive:
        assert sorted(archive.files) == sorted(want), archive.files
        for name, array in want.items():
            np.testing.assert_array_equal(archive[name], array, err_msg=name)
            assert archive[name].dtype == array.dtype, name
    print(f"checked {len(want)} arrays and the archive")


if __name__ == "__main__":
    main()
