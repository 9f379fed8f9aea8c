"""polytensor: TensorFlow's tensor core in Rust, on whatever device a machine has.

Tensors (``polytensor.Tensor``) live on a device (``polytensor.devices()``: ``cpu:0``, and
``opencl:0``, ``wgpu:0``, ``cuda:0`` where a driver is), run eager ops with Python's
operators and NumPy broadcasting, and cross to NumPy, PyTorch and TensorFlow without a copy
through DLPack (``polytensor.from_dlpack(x)``, ``numpy.from_dlpack(t)``). TensorFlow graphs
run through ``polytensor.Graph`` and ``polytensor.Session``, SavedModels through
``polytensor.saved_model.load``; ``polytensor.wrap(fn)`` runs a
polytensor function on another framework's tensors.
"""

from ._drivers import isolate_llvm_drivers

# Before any device opens: PoCL and lavapipe must not bind to TensorFlow's LLVM.
isolate_llvm_drivers()

from ._native import (  # noqa: E402
    CancellationManager,
    CancelledError,
    DataLossError,
    DeadlineExceededError,
    Device,
    Graph,
    NotFoundError,
    RunMetadata,
    RunOptions,
    Session,
    Tensor,
    arange,
    concat,
    device,
    devices,
    dtype_names,
    from_dlpack,
    full,
    live_exports,
    matmul,
    ones,
    stack,
    tensor,
    unavailable,
    where,
    zeros,
)
from ._wrap import wrap
from . import saved_model  # noqa: E402

# The dtypes, by TensorFlow's names: `polytensor.float32 == "float32"`, so that
# `t.dtype == polytensor.float32` and `t.cast(polytensor.bfloat16)` read as in TensorFlow.
for _name in dtype_names():
    globals()[_name] = _name
del _name

__all__ = [
    "CancellationManager",
    "CancelledError",
    "DataLossError",
    "DeadlineExceededError",
    "Device",
    "Graph",
    "NotFoundError",
    "RunMetadata",
    "RunOptions",
    "Session",
    "Tensor",
    "arange",
    "concat",
    "device",
    "devices",
    "from_dlpack",
    "full",
    "live_exports",
    "matmul",
    "ones",
    "saved_model",
    "stack",
    "tensor",
    "unavailable",
    "where",
    "wrap",
    "zeros",
] + dtype_names()
