"""polytensor.Tensor from Python: construction, properties, conversions, the eager ops
with Python's operators against NumPy on every device, indexing, and errors."""

import threading
import time

import numpy as np
import pytest

import polytensor as pt
from conftest import assert_same


def test_devices_and_names():
    names = [d.name for d in pt.devices()]
    assert names[0] == "cpu:0"
    assert pt.device("cpu").name == "cpu:0"
    assert pt.device("cpu:0") == pt.devices()[0]
    assert repr(pt.device("cpu:0")) == "polytensor.device('cpu:0')"
    with pytest.raises(RuntimeError, match="nosuch"):
        pt.device("nosuch:0")


def test_construction_follows_tensorflow():
    assert pt.Tensor([1.0, 2.0]).dtype == pt.float32
    assert pt.Tensor([1, 2]).dtype == pt.int32
    assert pt.Tensor([2**40]).dtype == pt.int64
    assert pt.Tensor(True).dtype == pt.bool
    assert pt.Tensor(1 + 2j).dtype == pt.complex128
    assert pt.Tensor(np.arange(3, dtype=np.float64)).dtype == pt.float64
    assert pt.Tensor(np.arange(3, dtype=np.uint16)).dtype == pt.uint16
    assert pt.Tensor([1, 2], dtype="float64").dtype == pt.float64
    bf16 = pt.Tensor([1.5, -2.0], dtype=pt.bfloat16)
    assert bf16.dtype == "bfloat16"
    assert bf16.cast(pt.float32).tolist() == [1.5, -2.0]
    strings = pt.Tensor(["ab", b"c"])
    assert strings.dtype == pt.string and strings.numpy().tolist() == [b"ab", b"c"]
    # Any buffer NumPy reads: bytes through a memoryview, array.array.
    import array

    assert pt.Tensor(array.array("i", [1, 2, 3])).tolist() == [1, 2, 3]
    assert pt.Tensor(np.frombuffer(memoryview(b"\x01\x02"), dtype=np.uint8)).tolist() == [1, 2]


def test_construction_copies():
    source = np.arange(4.0)
    t = pt.Tensor(source)
    source[0] = 99.0
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_properties_and_repr(tf):
    t = pt.Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert t.shape == (2, 3) and t.ndim == 2 and t.size == 6 and len(t) == 2
    assert t.device == pt.device("cpu:0") and t.strides == (3, 1)
    # The repr is the Rust Display, which is TensorFlow's print form.
    for value in ([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [1, 2, 3], 7.5, [True, False]):
        assert repr(pt.Tensor(value)) == str(tf.constant(value))
    assert str(pt.Tensor(["a", "bc"])) == str(tf.constant(["a", "bc"]))


def test_python_scalars():
    t = pt.Tensor(2.5)
    assert t.item() == 2.5 and float(t) == 2.5 and int(t) == 2 and bool(t)
    assert pt.Tensor(7).item() == 7 and isinstance(pt.Tensor(7).item(), int)
    assert pt.Tensor(True).item() is True
    assert pt.Tensor(1 + 2j).item() == 1 + 2j
    with pytest.raises(ValueError, match="ambiguous"):
        bool(pt.Tensor([1, 2]))
    with pytest.raises(ValueError, match="one-element"):
        pt.Tensor([1, 2]).item()
    with pytest.raises(TypeError, match="0-d"):
        len(pt.Tensor(1.0))


BINARY = [
    ("+", lambda a, b: a + b),
    ("-", lambda a, b: a - b),
    ("*", lambda a, b: a * b),
    ("/", lambda a, b: a / b),
    ("**", lambda a, b: a**b),
    ("==", lambda a, b: a == b),
    ("!=", lambda a, b: a != b),
    ("<", lambda a, b: a < b),
    ("<=", lambda a, b: a <= b),
    (">", lambda a, b: a > b),
    (">=", lambda a, b: a >= b),
]


@pytest.mark.parametrize("name,op", BINARY, ids=[b[0] for b in BINARY])
def test_operators_broadcast_as_numpy(device, name, op):
    rng = np.random.default_rng(7)
    a = rng.uniform(0.5, 2.0, size=(3, 1, 4)).astype(np.float32)
    b = rng.uniform(0.5, 2.0, size=(5, 1)).astype(np.float32)
    ta, tb = pt.Tensor(a, device=device), pt.Tensor(b, device=device)
    got = op(ta, tb)
    assert got.device.name == device
    np.testing.assert_allclose(got.numpy(), op(a, b), rtol=1e-5)
    # Python numbers take the tensor's dtype, on either side.
    np.testing.assert_allclose(op(ta, 1.5).numpy(), op(a, np.float32(1.5)), rtol=1e-5)
    np.testing.assert_allclose(op(2.0, ta).numpy(), op(np.float32(2.0), a), rtol=1e-5)


def test_integer_and_bool_operators(device):
    a = np.array([[5, -7, 9]], dtype=np.int32)
    t = pt.Tensor(a, device=device)
    assert_same(t + 1, a + 1)
    assert_same(-t, -a)
    assert_same(abs(t), abs(a))
    assert_same(t * t, a * a)
    m = np.array([True, False, True])
    b = pt.Tensor(m, device=device)
    assert_same(b & pt.Tensor([True, True, False], device=device), m & [True, True, False])
    assert_same(b | False, m | False)
    assert_same(~b, ~m)


def test_unary_reductions_and_matmul(device):
    rng = np.random.default_rng(3)
    a = rng.uniform(0.1, 2.0, size=(4, 6)).astype(np.float32)
    t = pt.Tensor(a, device=device)
    for name in ("exp", "log", "sqrt", "tanh", "floor", "square"):
        np.testing.assert_allclose(getattr(t, name)().numpy(), getattr(np, name)(a), rtol=2e-5)
    np.testing.assert_allclose(t.sigmoid().numpy(), 1 / (1 + np.exp(-a)), rtol=2e-5)
    np.testing.assert_allclose(t.sum().numpy(), a.sum(), rtol=1e-5)
    np.testing.assert_allclose(t.mean(axis=0).numpy(), a.mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(
        t.max(axis=(0, 1), keepdims=True).numpy(), a.max(axis=(0, 1), keepdims=True)
    )
    np.testing.assert_allclose(t.sum(keepdims=True).numpy(), a.sum(keepdims=True), rtol=1e-5)
    assert t.argmax().item() == a.argmax() and t.argmin(axis=1).tolist() == list(a.argmin(1))
    b = rng.uniform(size=(6, 3)).astype(np.float32)
    np.testing.assert_allclose((t @ pt.Tensor(b, device=device)).numpy(), a @ b, rtol=1e-5)
    np.testing.assert_allclose(t.softmax().numpy().sum(axis=-1), np.ones(4), rtol=1e-5)


def test_shape_changes():
    a = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    t = pt.Tensor(a)
    assert_same(t.reshape(4, -1), a.reshape(4, -1))
    assert_same(t.reshape((6, 4)), a.reshape(6, 4))
    assert_same(t.transpose(), a.transpose())
    assert_same(t.transpose(1, 0, 2), a.transpose(1, 0, 2))
    assert_same(t.T, a.T)
    assert_same(t.flatten(), a.flatten())
    assert_same(t[:1].squeeze(), a[:1].squeeze())
    assert_same(t.expand_dims(1), np.expand_dims(a, 1))
    assert_same(pt.Tensor([1, 2]).broadcast_to(3, 2), np.broadcast_to(np.int32([1, 2]), (3, 2)))
    assert_same(t.cast(pt.float32), a.astype(np.float32))
    assert_same(pt.concat([t, t], axis=1), np.concatenate([a, a], axis=1))
    assert_same(pt.stack([t, t]), np.stack([a, a]))
    assert_same(pt.where(t > 5, t, t * 0), np.where(a > 5, a, 0))


def test_factories(device):
    assert_same(pt.zeros((2, 3), device=device), np.zeros((2, 3), np.float32))
    assert_same(pt.ones(3, dtype="int64", device=device), np.ones(3, np.int64))
    assert_same(pt.full((2,), 7, dtype="int32", device=device), np.full(2, 7, np.int32))
    assert_same(pt.arange(5), np.arange(5, dtype=np.int32))
    assert_same(pt.arange(1, 2, 0.25), np.arange(1, 2, 0.25, dtype=np.float32))


KEYS = [
    1,
    -1,
    slice(None),
    slice(1, None),
    slice(None, None, -1),
    slice(-3, None, 2),
    (1, 2),
    (slice(None), 2),
    (Ellipsis, 1),
    (None, 0),
    (0, None, slice(None, None, 2)),
    (Ellipsis, None),
    (slice(5, 1, -2), Ellipsis, slice(1, 3)),
    (np.int64(2), slice(None)),
    (),
]


@pytest.mark.parametrize("key", KEYS, ids=[repr(k) for k in KEYS])
def test_indexing_as_numpy(device, key):
    a = np.arange(6 * 5 * 4, dtype=np.float32).reshape(6, 5, 4)
    assert_same(pt.Tensor(a, device=device)[key], a[key])


def test_indexing_errors():
    t = pt.Tensor(np.zeros((2, 3)))
    with pytest.raises(IndexError, match="out of bounds for axis 1 with size 3"):
        t[0, 3]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        t[..., ...]
    with pytest.raises(ValueError, match="step cannot be zero"):
        t[::0]
    with pytest.raises(TypeError, match="valid polytensor indices"):
        t["a"]
    assert [row.tolist() for row in t] == [[0.0] * 3, [0.0] * 3]


def test_device_moves(device):
    t = pt.Tensor([[1.0, 2.0], [3.0, 4.0]]).to(device)
    assert t.device.name == device
    assert t.cpu().device.name == "cpu:0"
    assert_same(t.to(pt.device("cpu:0")), np.float32([[1, 2], [3, 4]]))


def test_errors_are_python_exceptions():
    a = pt.Tensor([1.0, 2.0])
    with pytest.raises(ValueError, match="shape"):
        a + pt.Tensor([1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="dtype mismatch"):
        a + pt.Tensor([1, 2])
    with pytest.raises(TypeError, match="Cannot convert 1.5"):
        pt.Tensor([1, 2]) + 1.5
    with pytest.raises(ValueError):
        a.reshape(3)
    with pytest.raises(TypeError, match="unknown dtype"):
        a.cast("float33")
    with pytest.raises(ValueError):
        a @ a
    with pytest.raises(TypeError):
        a + object()
    with pytest.raises(ValueError):
        pt.Tensor([[1, 2], [3]])


def test_bfloat16_and_float8_through_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for name in ("bfloat16", "float8_e4m3fn", "float8_e5m2", "int4"):
        values = np.array([1.5, -2.0, 0.25] if "float" in name else [1, -2, 7], dtype=getattr(ml_dtypes, name))
        t = pt.Tensor(values)
        assert t.dtype == name
        back = t.numpy()
        assert back.dtype == values.dtype
        np.testing.assert_array_equal(back.astype(np.float32), values.astype(np.float32))


def test_gil_is_released_during_device_work():
    # A matmul long enough to see: while it runs on another thread, this thread keeps
    # running Python, which it could not if the op held the GIL.
    a = pt.Tensor(np.random.default_rng(0).uniform(size=(1200, 1200)).astype(np.float32))
    started = time.perf_counter()
    (a @ a).sum().item()
    duration = time.perf_counter() - started
    worker = threading.Thread(target=lambda: [(a @ a).sum().item() for _ in range(3)])
    gaps, last = [], time.perf_counter()
    worker.start()
    while worker.is_alive():
        now = time.perf_counter()
        gaps.append(now - last)
        last = now
    worker.join()
    assert max(gaps) < max(duration / 2, 0.05), (max(gaps), duration)
