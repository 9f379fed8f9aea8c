"""The Python package's speed, peers in the same run (`cargo xtask python-bench`):

- a DLPack round trip (`polytensor.from_dlpack` then `numpy.from_dlpack`) on 1 KiB and on
  1 GiB, which must be O(1) and under 10 us, next to the same round trip through PyTorch;
- the Python call overhead of a small op (16 float32 elements: `x + y`, `x.exp()`,
  `x.sum()`) in polytensor, NumPy and PyTorch.

Prints a Markdown table and writes it to `target/bench/python.md`. Exits 1 if the 1 GiB
round trip misses its 10 us target."""

import os
import sys
import timeit

import numpy as np

import polytensor as pt

try:
    import torch
except ImportError:  # the peer is optional; its column then says so
    torch = None


def per_call(statement, number=20000, repeat=7):
    """The median seconds per call of `statement` (a function of no arguments)."""
    runs = timeit.repeat(statement, number=number, repeat=repeat)
    return sorted(runs)[len(runs) // 2] / number


def fmt(seconds):
    if seconds is None:
        return "n/a"
    return f"{seconds * 1e6:.2f} us" if seconds >= 1e-6 else f"{seconds * 1e9:.0f} ns"


def main():
    rows = []
    target = 10e-6
    missed = False
    for label, count in (("1 KiB", 256), ("1 GiB", 2**28)):
        array = np.empty(count, dtype=np.float32)  # never touched: no page is faulted in
        ours = per_call(lambda: np.from_dlpack(pt.from_dlpack(array)))
        peer = per_call(lambda: np.from_dlpack(torch.from_dlpack(array))) if torch else None
        verdict = "met" if ours < target else "missed"
        missed |= label == "1 GiB" and ours >= target
        rows.append((f"DLPack round trip, {label} float32", ours, None, peer, verdict))
        del array
    small = np.arange(16, dtype=np.float32)
    x, y = pt.Tensor(small), pt.Tensor(small)
    tx = torch.from_numpy(small.copy()) if torch else None
    for name, ours, numpy_op, torch_op in (
        ("x + y (16 float32)", lambda: x + y, lambda: small + small, lambda: tx + tx),
        ("x.exp() (16 float32)", lambda: x.exp(), lambda: np.exp(small), lambda: tx.exp()),
        ("x.sum() (16 float32)", lambda: x.sum(), lambda: small.sum(), lambda: tx.sum()),
        ("x + 1.0 (16 float32)", lambda: x + 1.0, lambda: small + 1.0, lambda: tx + 1.0),
    ):
        rows.append(
            (name, per_call(ours), per_call(numpy_op), per_call(torch_op) if torch else None, "")
        )
    lines = [
        f"Python {sys.version.split()[0]}, NumPy {np.__version__}, "
        f"PyTorch {torch.__version__ if torch else 'absent'}",
        "",
        "| benchmark | polytensor | NumPy | PyTorch | target (< 10 us, O(1)) |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {n} | {fmt(a)} | {fmt(b)} | {fmt(c)} | {v} |" for n, a, b, c, v in rows]
    table = "\n".join(lines)
    print(table)
    out = os.path.join(os.path.dirname(__file__), "..", "..", "target", "bench")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "python.md"), "w") as f:
        f.write(table + "\n")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
