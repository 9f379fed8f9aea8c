"""The DLPack protocol against the real consumers and producers: NumPy, PyTorch and
TensorFlow, both ways, for every dtype each side has; strided, 0-d and empty tensors;
read-only memory; legacy and versioned capsules; and deleters that run exactly once."""

import ctypes
import gc
import sys

import numpy as np
import pytest

import polytensor as pt
from conftest import FLAG_IS_COPIED, FLAG_READ_ONLY, assert_same, read_capsule

NUMPY_DTYPES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
]  # fmt: skip


def sample(dtype, shape=(3, 4)):
    values = np.arange(int(np.prod(shape))).reshape(shape) % 7 - 3
    if dtype == "bool":
        return values > 0
    if dtype.startswith("uint"):
        values = abs(values)
    if dtype.startswith("complex"):
        return (values + 0.5j * values).astype(dtype)
    return values.astype(dtype)


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_numpy_consumes_polytensor(dtype, no_leaks):
    expected = sample(dtype)
    t = pt.Tensor(expected)
    array = np.from_dlpack(t)
    assert array.dtype == expected.dtype
    np.testing.assert_array_equal(array, expected)
    # The same memory, no copy.
    assert array.__array_interface__["data"][0] == t.data_ptr()
    del array


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_polytensor_consumes_numpy(dtype, no_leaks):
    array = sample(dtype)
    t = pt.from_dlpack(array)
    assert t.dtype == dtype
    assert t.data_ptr() == array.__array_interface__["data"][0]
    assert_same(t, array)


def test_strided_zero_d_and_empty_views_both_ways(no_leaks):
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    for view in (base.T, base[::2, 1::3], base[::-1], base[:, ::-2], base[1, 2, ...], base[:0], np.ones(())):
        t = pt.from_dlpack(view)
        assert t.shape == view.shape
        assert_same(t, view)
        back = np.from_dlpack(t)
        np.testing.assert_array_equal(back, view)
        if view.size > 1:
            assert back.strides == view.strides
    # polytensor's own views leave as they are (strides in elements, no copy).
    t = pt.Tensor(base)
    for view in (t.T, t[::2, 1::3], t[:, ::-1], t[1, 2], t[:0]):
        array = np.from_dlpack(view)
        assert array.shape == view.shape
        assert array.strides == tuple(s * 4 for s in view.strides) or view.size <= 1
        np.testing.assert_array_equal(array, np.asarray(view))


def test_capsules_legacy_and_versioned(no_leaks):
    t = pt.Tensor(np.arange(6, dtype=np.int64).reshape(2, 3)).T
    legacy = t.__dlpack__()
    name, managed = read_capsule(legacy)
    assert name == "dltensor" and managed.dl_tensor.ndim == 2
    versioned = t.__dlpack__(max_version=(1, 0))
    name, managed = read_capsule(versioned)
    assert name == "dltensor_versioned"
    assert (managed.version.major, managed.flags) == (1, 0)
    assert [managed.dl_tensor.strides[i] for i in range(2)] == [1, 3]
    assert managed.dl_tensor.data == t.data_ptr()
    assert t.__dlpack_device__() == (1, 0)
    # Producers' capsules of both kinds import.
    array = np.arange(5.0)
    assert pt.from_dlpack(array.__dlpack__()).tolist() == array.tolist()
    assert pt.from_dlpack(array.__dlpack__(max_version=(1, 0))).tolist() == array.tolist()


def test_consumed_capsule_is_renamed_and_refused_again(no_leaks):
    capsule = np.arange(3.0).__dlpack__(max_version=(1, 0))
    t = pt.from_dlpack(capsule)
    assert "used_dltensor_versioned" in repr(capsule)
    with pytest.raises(ValueError, match="already consumed"):
        pt.from_dlpack(capsule)
    assert t.tolist() == [0.0, 1.0, 2.0]
    mine = pt.Tensor([1.0]).__dlpack__()
    np.from_dlpack(_Capsule(mine))
    assert "used_dltensor" in repr(mine)


class _Capsule:
    """An object whose `__dlpack__` hands out one given capsule (to feed NumPy a capsule)."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


def test_deleters_run_exactly_once():
    # polytensor's exports: consumed (NumPy deletes when its array dies) or not (the
    # capsule's destructor deletes).
    before = pt.live_exports()
    t = pt.Tensor(np.ones(1000))
    array = np.from_dlpack(t)
    capsules = [t.__dlpack__(), t.__dlpack__(max_version=(1, 0))]
    assert pt.live_exports() == before + 3
    del array, capsules
    gc.collect()
    assert pt.live_exports() == before
    # NumPy's exports: NumPy's deleter drops the reference its capsule holds on the
    # array, once: the count comes back exactly (twice would free the array under us).
    source = np.arange(1000.0)
    references = sys.getrefcount(source)
    views = [pt.from_dlpack(source), pt.from_dlpack(source.__dlpack__())]
    slices = [v[1:] for v in views]
    assert sys.getrefcount(source) > references
    del views
    gc.collect()
    assert sys.getrefcount(source) > references  # the slices still view it
    del slices
    gc.collect()
    assert sys.getrefcount(source) == references
    # A capsule nobody consumes: NumPy's own destructor deletes it.
    capsule = source.__dlpack__()
    del capsule
    assert sys.getrefcount(source) == references


def test_read_only_stays_read_only(no_leaks):
    source = np.arange(4.0)
    source.flags.writeable = False
    t = pt.from_dlpack(source)
    versioned = t.__dlpack__(max_version=(1, 0))
    name, managed = read_capsule(versioned)
    assert managed.flags & FLAG_READ_ONLY
    back = np.from_dlpack(t)
    assert not back.flags.writeable
    assert back.__array_interface__["data"][0] == source.__array_interface__["data"][0]
    # The legacy struct cannot say read-only: that consumer gets a copy.
    legacy = t.__dlpack__()
    name, managed = read_capsule(legacy)
    assert name == "dltensor" and managed.dl_tensor.data != t.data_ptr()
    with pytest.raises(BufferError, match="copy=False"):
        t.__dlpack__(copy=False)
    # Ops read it and write elsewhere.
    assert (t + 1.0).tolist() == [1.0, 2.0, 3.0, 4.0]


def test_copy_and_device_requests(device, no_leaks):
    t = pt.Tensor([1.0, 2.0, 3.0], device=device)
    copied = t.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=True)
    name, managed = read_capsule(copied)
    assert managed.flags & FLAG_IS_COPIED
    assert managed.dl_tensor.device.device_type == 1
    np.testing.assert_array_equal(np.from_dlpack(t, device="cpu"), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(t.numpy(), [1.0, 2.0, 3.0])
    if not t.device.is_host and t.data_ptr() is None:
        # wgpu memory has no address to share: a clean error, and copies on request.
        with pytest.raises(BufferError, match="no address"):
            t.__dlpack__(max_version=(1, 0))
        with pytest.raises(BufferError):
            np.from_dlpack(t)


def test_bfloat16_numpy_refuses_cleanly(no_leaks):
    t = pt.Tensor([1.5, 2.0], dtype="bfloat16")
    with pytest.raises((BufferError, TypeError, RuntimeError), match="[Dd]type"):
        np.from_dlpack(t)
    del t


def test_bad_input_is_an_exception(no_leaks):
    with pytest.raises(TypeError, match="__dlpack__"):
        pt.from_dlpack(3.0)
    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype = ctypes.py_object
    new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    other = new_capsule(ctypes.addressof(ctypes.c_int(1)), b"something_else", None)
    with pytest.raises(ValueError, match="not a DLPack capsule"):
        pt.from_dlpack(other)
    with pytest.raises(BufferError, match="stream"):
        pt.Tensor([1.0]).__dlpack__(stream=5)
    with pytest.raises(TypeError, match="not a capsule"):
        pt.from_dlpack(_NotACapsule())


class _NotACapsule:
    def __dlpack__(self, **kwargs):
        return 42


TORCH_DTYPES = NUMPY_DTYPES[:-6] + ["float16", "bfloat16", "float32", "float64", "complex64", "complex128"]


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_torch_both_ways(torch, dtype, no_leaks):
    torch_dtype = getattr(torch, dtype)
    if dtype in ("uint16", "uint32", "uint64"):
        source = torch.arange(12).reshape(3, 4).to(torch_dtype)
    elif dtype == "bool":
        source = torch.arange(12).reshape(3, 4) % 3 == 0
    else:
        source = (torch.arange(12).reshape(3, 4) - 5).to(torch_dtype)
    t = pt.from_dlpack(source)
    assert t.dtype == dtype and t.shape == (3, 4)
    assert t.data_ptr() == source.data_ptr()
    back = torch.from_dlpack(t)
    assert back.dtype == torch_dtype and back.data_ptr() == source.data_ptr()
    assert torch.equal(back, source)
    # A transposed view, both ways.
    view = pt.from_dlpack(source.T)
    assert view.strides == source.T.stride()
    assert torch.equal(torch.from_dlpack(view), source.T)
    ours = pt.Tensor(source.T)
    assert torch.equal(torch.from_dlpack(ours.T), source)
    del back, view, t


def test_torch_zero_d_and_empty(torch, no_leaks):
    for source in (torch.tensor(3.5), torch.zeros(0, 4), torch.ones(2, 1, 3)[:, :, ::2]):
        t = pt.from_dlpack(source)
        assert t.shape == tuple(source.shape)
        assert torch.equal(torch.from_dlpack(t), source)


TF_DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "int32", "int64", "uint8", "complex64", "bool"]


@pytest.mark.parametrize("dtype", TF_DTYPES)
def test_tensorflow_both_ways(tf, dtype, no_leaks):
    values = np.arange(6).reshape(2, 3) - 2
    source = tf.cast(tf.constant(values), getattr(tf, dtype))
    # TensorFlow's to_dlpack gives a capsule; polytensor takes it without a copy.
    t = pt.from_dlpack(tf.experimental.dlpack.to_dlpack(source))
    assert t.dtype == dtype and t.shape == (2, 3)
    np.testing.assert_array_equal(t.cast("float64").numpy(), tf.cast(source, tf.float64).numpy())
    # And back: TensorFlow reads polytensor's capsule.
    back = tf.experimental.dlpack.from_dlpack(t.__dlpack__())
    assert back.dtype == source.dtype
    np.testing.assert_array_equal(tf.cast(back, tf.float64).numpy(), tf.cast(source, tf.float64).numpy())
    # TensorFlow tensors are DLPack producers too.
    assert pt.from_dlpack(source).dtype == dtype
    del t, back
