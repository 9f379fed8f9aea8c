"""Both directions of `.npy` and `.npz` between polytensor and NumPy itself.

Usage: `npy_numpy.py write DIR` writes NumPy's files of known arrays into DIR (C and Fortran
order, big-endian, `savez` and `savez_compressed`); `npy_numpy.py check DIR` reads the files
polytensor wrote there and checks their arrays. `tests/npy.rs` runs both.
"""

import pathlib
import sys

import numpy as np


def arrays():
    return {
        "f32": np.array([[1.5, -2.0, 0.0], [np.inf, -0.0, 3.25]], dtype=np.float32),
        "f64": np.arange(6, dtype=np.float64).reshape(3, 2) / 7,
        "f16": np.array([0.5, -65504.0, 1e-4], dtype=np.float16),
        "i8": np.array([-128, 0, 127], dtype=np.int8),
        "u16": np.array([0, 65535], dtype=np.uint16),
        "i64": np.array([[-(2**63), 2**63 - 1]], dtype=np.int64),
        "u32": np.array([2**32 - 1], dtype=np.uint32),
        "mask": np.array([True, False, True]),
        "c128": np.array([1 + 2j, -3.5 - 0j], dtype=np.complex128),
        "scalar": np.array(7, dtype=np.int32),
        "empty": np.zeros((0, 4), dtype=np.float32),
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
