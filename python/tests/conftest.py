"""Shared fixtures: the devices present, and the real peers (NumPy always; PyTorch and
TensorFlow where installed, required where CI says so).

- ``POLYTENSOR_REQUIRE`` (``cpu,opencl,wgpu,...``): those backends must have a device here;
- ``POLYTENSOR_REQUIRE_TORCH=1`` / ``POLYTENSOR_REQUIRE_TENSORFLOW=1``: a test that needs
  PyTorch or TensorFlow fails instead of skipping when it is missing."""

import ctypes
import importlib
import os

import numpy as np
import pytest

import polytensor as pt


def _required(variable):
    return os.environ.get(variable, "") not in ("", "0")


def _peer(module, variable):
    try:
        return importlib.import_module(module)
    except ImportError as e:
        if _required(variable):
            raise RuntimeError(f"{variable} is set, but {module} cannot be imported: {e}")
        pytest.skip(f"{module} is not installed ({e}); set {variable}=1 to require it")


@pytest.fixture(scope="session")
def torch():
    return _peer("torch", "POLYTENSOR_REQUIRE_TORCH")


@pytest.fixture(scope="session")
def tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return _peer("tensorflow", "POLYTENSOR_REQUIRE_TENSORFLOW")


def _device_names():
    present = [d.name for d in pt.devices()]
    required = [b for b in os.environ.get("POLYTENSOR_REQUIRE", "").split(",") if b]
    for backend in required:
        if backend.startswith("cuda-"):
            continue  # cuda-ptx is a compile check, not a device
        if not any(name.split(":")[0] == backend for name in present):
            reasons = pt.unavailable()
            raise RuntimeError(
                f"POLYTENSOR_REQUIRE names {backend}, which has no device here: "
                f"{reasons.get(backend, 'not compiled in')}"
            )
    return present


DEVICES = _device_names()


@pytest.fixture(params=DEVICES)
def device(request):
    """Each device present (cpu:0 always; opencl:0, wgpu:0, cuda:0 where a driver is)."""
    return request.param


@pytest.fixture
def no_leaks():
    """Checks that every tensor polytensor exported through DLPack in the test was deleted
    (its deleter ran) by the end of it."""
    before = pt.live_exports()
    yield
    import gc

    gc.collect()
    assert pt.live_exports() == before, "a DLPack export was never deleted"


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [
        ("dl_tensor", DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    ]


def read_capsule(capsule):
    """The managed struct a DLPack capsule holds, read through `dlpack.h`'s layout (the
    capsule is not consumed): ``(name, struct)``. The struct lives as long as the capsule:
    keep that alive while reading."""
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    name = get_name(capsule)
    pointer = get_pointer(capsule, name)
    kind = DLManagedTensorVersioned if name == b"dltensor_versioned" else DLManagedTensor
    return name.decode(), kind.from_address(pointer)


FLAG_READ_ONLY, FLAG_IS_COPIED = 1, 2


def assert_same(tensor, expected):
    """A polytensor tensor equals a NumPy array in dtype, shape and values."""
    got = tensor.numpy()
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
