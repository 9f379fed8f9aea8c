"""DLPack between polytensor (through its C API, with ctypes) and NumPy, both ways.

Run by `cargo test -p polytensor-capi --test it -- numpy::` with PT_LIB (libpolytensor_capi.so)
and PT_CAPSULE_LIB (capsule.c built as a shared library) in the environment.
"""

import ctypes
import gc
import os
import sys

import numpy as np

lib = ctypes.CDLL(os.environ["PT_LIB"])
capsules = ctypes.PyDLL(os.environ["PT_CAPSULE_LIB"])

c_tensor = ctypes.c_void_p
P = ctypes.POINTER


def sig(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype, f.argtypes = restype, list(argtypes)
    return f


NewStatus = sig("PT_NewStatus", ctypes.c_void_p)
GetCode = sig("PT_GetCode", ctypes.c_int32, ctypes.c_void_p)
Message = sig("PT_Message", ctypes.c_char_p, ctypes.c_void_p)
Deallocator = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
NewConstTensor = sig("PT_NewConstTensor", c_tensor, ctypes.c_int, P(ctypes.c_int64), ctypes.c_int,
                     ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
AllocateTensor = sig("PT_AllocateTensor", c_tensor, ctypes.c_int, P(ctypes.c_int64), ctypes.c_int,
                     ctypes.c_size_t, ctypes.c_void_p)
DeleteTensor = sig("PT_DeleteTensor", None, c_tensor)
TensorType = sig("PT_TensorType", ctypes.c_int, c_tensor)
NumDims = sig("PT_NumDims", ctypes.c_int, c_tensor)
Dim = sig("PT_Dim", ctypes.c_int64, c_tensor, ctypes.c_int)
ByteSize = sig("PT_TensorByteSize", ctypes.c_size_t, c_tensor)
TensorData = sig("PT_TensorData", ctypes.c_void_p, c_tensor)
IsReadOnly = sig("PT_TensorIsReadOnly", ctypes.c_int, c_tensor)
CopyTo = sig("PT_TensorCopyTo", None, c_tensor, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
DLPack = sig("PT_DLPack", ctypes.c_void_p, c_tensor, P(ctypes.c_int64), ctypes.c_int, ctypes.c_int,
             ctypes.c_int32, ctypes.c_int32, ctypes.c_int, P(ctypes.c_int), ctypes.c_void_p)
DLPackDevice = sig("PT_DLPackDevice", None, c_tensor, P(ctypes.c_int32), P(ctypes.c_int32),
                   ctypes.c_void_p)
FromDLPackVersioned = sig("PT_FromDLPackVersioned", c_tensor, ctypes.c_void_p, ctypes.c_void_p)
FromDLPack = sig("PT_FromDLPack", c_tensor, ctypes.c_void_p, ctypes.c_void_p)
LiveExports = sig("PT_LiveDLPackExports", ctypes.c_size_t)
capsules.pt_capsule.restype = ctypes.py_object
capsules.pt_capsule.argtypes = [ctypes.c_void_p, ctypes.c_int]
capsules.pt_capsule_take.restype = ctypes.c_void_p
capsules.pt_capsule_take.argtypes = [ctypes.py_object, P(ctypes.c_int)]

status = NewStatus()

# TensorFlow's dtype numbers of NumPy's dtypes.
PT_DTYPES = {
    np.dtype(np.float32): 1, np.dtype(np.float64): 2, np.dtype(np.int32): 3,
    np.dtype(np.uint8): 4, np.dtype(np.int16): 5, np.dtype(np.int8): 6,
    np.dtype(np.complex64): 8, np.dtype(np.int64): 9, np.dtype(np.bool_): 10,
    np.dtype(np.uint16): 17, np.dtype(np.complex128): 18, np.dtype(np.float16): 19,
    np.dtype(np.uint32): 22, np.dtype(np.uint64): 23,
}
PT_BFLOAT16 = 14


def check(status_ptr):
    if GetCode(status_ptr) != 0:
        raise RuntimeError(Message(status_ptr).decode())


def dims_of(shape):
    return (ctypes.c_int64 * max(len(shape), 1))(*shape)


class PtArray:
    """A polytensor tensor handle with Python's DLPack protocol."""

    def __init__(self, handle):
        self.handle = handle

    def __del__(self):
        DeleteTensor(self.handle)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        s = None if stream is None else ctypes.byref(ctypes.c_int64(stream))
        major, minor = max_version if max_version is not None else (-1, 0)
        dev_type, dev_id = dl_device if dl_device is not None else (0, 0)
        versioned = ctypes.c_int(-1)
        managed = DLPack(self.handle, s, major, minor, dev_type, dev_id,
                         -1 if copy is None else int(copy), ctypes.byref(versioned), status)
        if not managed:
            raise BufferError(Message(status).decode())
        return capsules.pt_capsule(managed, versioned.value)

    def __dlpack_device__(self):
        t, i = ctypes.c_int32(), ctypes.c_int32()
        DLPackDevice(self.handle, ctypes.byref(t), ctypes.byref(i), status)
        check(status)
        return (t.value, i.value)


class LegacyOnly:
    """A producer older than DLPack 1.0: `__dlpack__` takes only `stream`."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def pt_from_values(values):
    """A polytensor tensor (its own memory) holding `values`."""
    values = np.ascontiguousarray(values)
    handle = AllocateTensor(PT_DTYPES[values.dtype], dims_of(values.shape), values.ndim,
                            values.nbytes, status)
    check(status)
    if values.nbytes:
        ctypes.memmove(TensorData(handle), values.ctypes.data, values.nbytes)
    return handle


def pt_values(handle, dtype):
    """A polytensor tensor's elements, copied out in row-major order."""
    shape = tuple(Dim(handle, i) for i in range(NumDims(handle)))
    out = np.empty(shape, dtype=dtype)
    CopyTo(handle, out.ctypes.data if out.nbytes else None, out.nbytes, status)
    check(status)
    return out


def same(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


passed = []


def case(name):
    def run(f):
        baseline = LiveExports()
        f()
        gc.collect()
        assert LiveExports() == baseline, f"{name}: {LiveExports() - baseline} exports leaked"
        passed.append(name)
        print(f"ok {name}")
    return run


@case("polytensor -> numpy: same values, same memory, writes shared, deleter after numpy")
def _():
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = PtArray(pt_from_values(values))
    base = LiveExports()
    a = np.from_dlpack(t)
    assert same(a, values)
    assert a.ctypes.data == TensorData(t.handle), "zero copy"
    assert a.flags.writeable
    assert LiveExports() == base + 1
    a[1, 2] = 42.0  # a write through NumPy, seen by polytensor
    assert pt_values(t.handle, np.float32)[1, 2] == 42.0
    del t  # the handle goes; the export keeps the memory
    gc.collect()
    assert LiveExports() == base + 1, "the deleter must not run before NumPy is done"
    assert a[1, 2] == 42.0 and a[2, 3] == 11.0
    del a
    gc.collect()
    assert LiveExports() == base, "the deleter runs once NumPy frees the array"


@case("polytensor -> numpy: every dtype NumPy has")
def _():
    rng = np.random.default_rng(7)
    for dtype in PT_DTYPES:
        if dtype.kind == "b":
            values = rng.integers(0, 2, (4, 5)).astype(bool)
        elif dtype.kind == "c":
            values = (rng.standard_normal((4, 5)) + 1j * rng.standard_normal((4, 5))).astype(dtype)
        elif dtype.kind == "f":
            values = rng.standard_normal((4, 5)).astype(dtype)
        else:
            values = rng.integers(0, 100, (4, 5)).astype(dtype)
        t = PtArray(pt_from_values(values))
        a = np.from_dlpack(t)
        assert same(a, values), dtype
        assert a.ctypes.data == TensorData(t.handle), dtype
        del a, t


@case("polytensor -> numpy: READ_ONLY arrives as a non-writeable array")
def _():
    memory = (ctypes.c_int32 * 6)(*range(6))
    t = PtArray(NewConstTensor(3, dims_of((2, 3)), 2, ctypes.addressof(memory), 24, None, None,
                               status))
    check(status)
    a = np.from_dlpack(t)
    assert not a.flags.writeable
    assert same(a, np.arange(6, dtype=np.int32).reshape(2, 3))
    assert a.ctypes.data == ctypes.addressof(memory)
    try:
        a[0, 0] = 5
        raise AssertionError("a read-only array was written")
    except ValueError:
        pass
    del a, t


@case("polytensor -> numpy: legacy consumers, copy=True, dl_device")
def _():
    values = np.arange(6, dtype=np.int64).reshape(2, 3)
    t = PtArray(pt_from_values(values))
    legacy = np.from_dlpack(LegacyOnly(t))
    assert same(legacy, values) and legacy.ctypes.data == TensorData(t.handle)
    copied = np.from_dlpack(t, copy=True)
    assert same(copied, values) and copied.ctypes.data != TensorData(t.handle)
    on_cpu = np.from_dlpack(t, device="cpu")
    assert same(on_cpu, values)
    assert t.__dlpack_device__() == (1, 0)
    try:
        t.__dlpack__(stream=5)
        raise AssertionError("a stream for host memory was accepted")
    except BufferError:
        pass
    del legacy, copied, on_cpu, t


@case("polytensor -> numpy: a rejected dtype (bfloat16) leaks nothing and keeps NumPy's error")
def _():
    handle = AllocateTensor(PT_BFLOAT16, dims_of((4, 4)), 2, 32, status)
    check(status)
    t = PtArray(handle)
    for _ in range(3):
        try:
            np.from_dlpack(t)
            raise AssertionError("NumPy took a bfloat16 tensor")
        except SystemError as e:
            raise AssertionError(f"the capsule destructor broke NumPy's exception: {e}")
        except (BufferError, TypeError, ValueError, RuntimeError) as e:
            assert "SystemError" not in repr(e)
    del t


@case("polytensor -> numpy: a capsule nobody consumes frees its tensor once")
def _():
    values = np.ones((8,), dtype=np.float64)
    t = PtArray(pt_from_values(values))
    base = LiveExports()
    capsule = t.__dlpack__(max_version=(1, 0))
    legacy_capsule = t.__dlpack__()
    assert LiveExports() == base + 2
    del capsule, legacy_capsule
    gc.collect()
    assert LiveExports() == base
    del t


def numpy_cases():
    rng = np.random.default_rng(11)
    m = rng.standard_normal((4, 6))
    yield "contiguous", m
    yield "transposed", m.T
    yield "negative strides", m[::-1, ::-2]
    yield "broadcast", np.broadcast_to(np.arange(3.0), (4, 3))
    yield "Fortran order", np.asfortranarray(m)
    yield "0-d", np.array(5.5)
    yield "empty", np.zeros((0, 3))
    yield "offset slice", m[1:3, 2:5]
    for dtype in PT_DTYPES:
        if dtype.kind == "b":
            yield f"{dtype}", rng.integers(0, 2, (3, 5)).astype(bool).T
        elif dtype.kind in "fc":
            yield f"{dtype}", (rng.standard_normal((3, 5)) * 10).astype(dtype)[:, ::-1]
        else:
            yield f"{dtype}", rng.integers(0, 120, (3, 5)).astype(dtype)[::2]


@case("numpy -> polytensor: every layout and dtype, element by element, deleter once")
def _():
    for name, array in numpy_cases():
        for versioned in (True, False):
            if not versioned and not array.flags.writeable:
                continue  # NumPy exports read-only arrays only with the versioned struct
            before = sys.getrefcount(array)
            capsule = array.__dlpack__(max_version=(1, 0)) if versioned else array.__dlpack__()
            is_versioned = ctypes.c_int(-1)
            managed = capsules.pt_capsule_take(capsule, ctypes.byref(is_versioned))
            assert managed and is_versioned.value == int(versioned), name
            take = FromDLPackVersioned if versioned else FromDLPack
            handle = take(managed, status)
            check(status)
            del capsule
            assert TensorType(handle) == PT_DTYPES[array.dtype], name
            assert tuple(Dim(handle, i) for i in range(NumDims(handle))) == array.shape, name
            assert same(pt_values(handle, array.dtype), array), name
            assert IsReadOnly(handle) == (not array.flags.writeable), f"{name}: READ_ONLY"
            if array.flags.c_contiguous and array.size:
                assert TensorData(handle) == array.ctypes.data, f"{name}: zero copy"
            if array.size:
                assert sys.getrefcount(array) > before, f"{name}: NumPy's export holds the array"
            DeleteTensor(handle)
            gc.collect()
            assert sys.getrefcount(array) == before, f"{name}: the deleter ran once"


@case("numpy -> polytensor: shared memory both ways")
def _():
    array = np.zeros(4, dtype=np.int32)
    capsule = array.__dlpack__(max_version=(1, 0))
    handle = FromDLPackVersioned(capsules.pt_capsule_take(capsule, ctypes.byref(ctypes.c_int())),
                                 status)
    check(status)
    array[2] = 7  # a NumPy write seen by polytensor
    assert pt_values(handle, np.int32)[2] == 7
    ctypes.c_int32.from_address(TensorData(handle)).value = 9  # and the reverse
    assert array[0] == 9
    DeleteTensor(handle)


print(f"{len(passed)} DLPack cases passed with NumPy {np.__version__}")
