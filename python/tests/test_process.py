"""polytensor in one process with TensorFlow, whichever is imported first: PoCL and
lavapipe, both built on LLVM, must not bind to the LLVM TensorFlow loads globally (they
crashed inside LLVM before `polytensor._drivers`). Each order runs in a fresh interpreter,
since a process can import TensorFlow only once."""

import subprocess
import sys

import pytest

SCRIPT = """
import os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
{first}
{second}
import numpy as np
for device in pt.devices():
    for op in ("exp", "tanh", "sqrt"):  # each a kernel not compiled before
        x = pt.Tensor([1.5, 2.0], device=device)
        np.testing.assert_allclose(getattr(x, op)().numpy(), getattr(np, op)([1.5, 2.0]), rtol=1e-6)
    print(device.name, "ok")
print(tf.reduce_sum(tf.constant([1.0, 2.0])).numpy())
"""


@pytest.mark.parametrize("tensorflow_first", [True, False], ids=["tensorflow-first", "polytensor-first"])
def test_with_tensorflow_in_one_process(tf, tensorflow_first):
    imports = ["import tensorflow as tf", "import polytensor as pt"]
    if not tensorflow_first:
        imports.reverse()
    script = SCRIPT.format(first=imports[0], second=imports[1])
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stdout}\n{run.stderr[-3000:]}"
    import polytensor as pt

    for device in pt.devices():
        assert f"{device.name} ok" in run.stdout
    assert run.stdout.strip().endswith("3.0")
