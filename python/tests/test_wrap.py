"""`polytensor.wrap`: polytensor functions on PyTorch, NumPy and TensorFlow tensors, zero-copy
both ways, as the seed's TVM example (`to_pytorch_func`) has it."""

import numpy as np
import pytest

import polytensor as pt


def test_the_seed_example_runs_as_written(torch, no_leaks):
    x = torch.rand(56, 56)
    y = torch.rand(56, 56)
    wrapped = pt.wrap(pt.matmul)
    z = wrapped(x, y)
    assert isinstance(z, torch.Tensor)
    torch.testing.assert_close(z, torch.mm(x, y))
    del z


def test_zero_copy_both_ways(torch, no_leaks):
    x = torch.rand(8, 8)
    seen = {}

    def double_in_place_free(a):
        seen["input"] = a.data_ptr()
        out = a * 2.0
        seen["output"] = out.data_ptr()
        return out

    z = pt.wrap(double_in_place_free)(x)
    assert seen["input"] == x.data_ptr()  # polytensor read torch's memory
    assert z.data_ptr() == seen["output"]  # torch reads polytensor's
    assert pt.live_exports() >= 1  # polytensor's buffer lives on in z
    torch.testing.assert_close(z, x * 2)
    del z


def test_numpy_and_structures(no_leaks):
    a = np.arange(6.0).reshape(2, 3)
    split = pt.wrap(lambda t: (t.sum(axis=0), [t.T, 3]))(a)
    sums, (transposed, three) = split
    assert isinstance(sums, np.ndarray) and three == 3
    np.testing.assert_array_equal(sums, a.sum(axis=0))
    np.testing.assert_array_equal(transposed, a.T)
    # keyword arguments convert too
    out = pt.wrap(lambda a, b: a @ b)(a, b=np.ones((3, 2)))
    np.testing.assert_array_equal(out, a @ np.ones((3, 2)))


def test_tensorflow(tf, no_leaks):
    x = tf.random.uniform((16, 16))
    y = tf.random.uniform((16, 16))
    z = pt.wrap(pt.matmul)(x, y)
    assert isinstance(z, tf.Tensor)
    np.testing.assert_allclose(z.numpy(), tf.matmul(x, y).numpy(), rtol=1e-5)
    del z


def test_errors_pass_through(torch):
    with pytest.raises(ValueError, match="matmul"):
        pt.wrap(pt.matmul)(torch.ones(2, 3), torch.ones(2, 3))
