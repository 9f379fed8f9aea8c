"""`polytensor.wrap(fn)`: a polytensor function run on NumPy, PyTorch or TensorFlow
tensors, as TVM's `to_pytorch_func` runs a compiled operator on PyTorch tensors."""

import functools

from ._native import Tensor, from_dlpack

# The frameworks whose tensors `wrap` takes, by the top-level module of their types.
_FRAMEWORKS = ("numpy", "torch", "tensorflow", "jax", "jaxlib", "cupy")


def _framework_of(value):
    """The framework a value's type comes from, if it is one `wrap` converts."""
    module = type(value).__module__.split(".")[0]
    if module in _FRAMEWORKS and hasattr(value, "__dlpack__"):
        return module
    return None


def _to_polytensor(value, seen):
    """A framework tensor as a polytensor tensor sharing its memory (DLPack, no copy);
    tuples and lists element by element; anything else as it is. Records the framework."""
    if isinstance(value, (tuple, list)):
        return type(value)(_to_polytensor(v, seen) for v in value)
    framework = _framework_of(value)
    if framework is None:
        return value
    seen.append(framework)
    return from_dlpack(value)


def _from_polytensor(value, framework):
    """A polytensor result as a tensor of `framework`, sharing its memory where the
    framework can take it (DLPack); tuples and lists element by element."""
    if isinstance(value, (tuple, list)):
        return type(value)(_from_polytensor(v, framework) for v in value)
    if not isinstance(value, Tensor) or framework is None:
        return value
    if framework == "numpy":
        return value.numpy()
    if framework == "torch":
        import torch

        return torch.from_dlpack(value)
    if framework == "tensorflow":
        import tensorflow as tf

        # TensorFlow's from_dlpack takes a capsule (the legacy struct, which it reads).
        return tf.experimental.dlpack.from_dlpack(value.__dlpack__())
    if framework in ("jax", "jaxlib"):
        import jax.numpy as jnp

        return jnp.from_dlpack(value)
    import cupy

    return cupy.from_dlpack(value)


def wrap(fn):
    """`fn`, a function of polytensor tensors, as a function of NumPy, PyTorch, TensorFlow
    (or JAX, CuPy) tensors: the arguments cross into polytensor without a copy (DLPack),
    `fn` runs, and its results go back to the framework of the first tensor argument,
    without a copy where the framework takes polytensor's memory.

    >>> import torch, polytensor
    >>> mm = polytensor.wrap(lambda a, b: a @ b)
    >>> z = mm(torch.ones(2, 3), torch.ones(3, 4))   # a torch.Tensor
    """

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        seen = []
        args = _to_polytensor(list(args), seen)
        kwargs = {key: _to_polytensor(value, seen) for key, value in kwargs.items()}
        result = fn(*args, **kwargs)
        return _from_polytensor(result, seen[0] if seen else None)

    return wrapped
