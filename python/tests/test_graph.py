"""TensorFlow-written GraphDefs run from Python (`polytensor.Graph`, `polytensor.Session`)
on every device, against TensorFlow's own session on the same graph and inputs."""

import numpy as np
import pytest

import polytensor as pt


@pytest.fixture(scope="module")
def dense_graph(tf):
    """A small frozen network written by TensorFlow: dense + relu + conv-free softmax,
    a reshape and a reduction, with its GraphDef bytes and TensorFlow's outputs."""
    rng = np.random.default_rng(11)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, (None, 8), name="x")
        w = tf.constant(rng.normal(size=(8, 5)).astype(np.float32))
        b = tf.constant(rng.normal(size=(5,)).astype(np.float32))
        hidden = tf.nn.relu(tf.matmul(x, w) + b, name="hidden")
        probs = tf.nn.softmax(hidden, name="probs")
        tf.reduce_sum(tf.reshape(probs, (-1,)), name="total")
    feed = rng.normal(size=(4, 8)).astype(np.float32)
    with tf.compat.v1.Session(graph=graph) as session:
        expected = session.run(["hidden:0", "probs:0", "total:0"], {"x:0": feed})
    return graph.as_graph_def().SerializeToString(), feed, expected


def test_session_runs_tensorflow_graph(dense_graph, device):
    graph_def, feed, expected = dense_graph
    graph = pt.Graph.from_graph_def(graph_def)
    assert "probs" in graph.operations() and graph.dtype_of("x:0") == pt.float32
    session = pt.Session(graph, device=device)
    got = session.run(["hidden:0", "probs:0", "total:0"], feed_dict={"x:0": feed})
    assert isinstance(got, list) and all(isinstance(g, np.ndarray) for g in got)
    for value, reference in zip(got, expected):
        np.testing.assert_allclose(value, reference, rtol=1e-5, atol=1e-6)
    single = session.run("probs:0", {"x:0": feed.tolist()})  # lists convert to x's dtype
    np.testing.assert_allclose(single, expected[1], rtol=1e-5, atol=1e-6)
    assert session.run(["probs", "total:0"], {"x:0": feed})[0] is None  # an op: a target


def test_traced_run_fills_run_metadata_that_tensorflow_reads(dense_graph, device, tf):
    """`run_metadata` records every step of the run, as TensorFlow's `FULL_TRACE` does;
    TensorFlow's own `RunMetadata` proto and `timeline.Timeline` read what it writes."""
    import json

    from tensorflow.core.protobuf import config_pb2
    from tensorflow.python.client import timeline

    graph_def, feed, expected = dense_graph
    session = pt.Session(pt.Graph.from_graph_def(graph_def), device=device)
    metadata = pt.RunMetadata()
    got = session.run("probs:0", {"x:0": feed}, run_metadata=metadata)
    np.testing.assert_allclose(got, expected[1], rtol=1e-5, atol=1e-6)
    assert metadata.runs == 1
    steps = metadata.step_stats
    by_node = {step["node"]: step for step in steps}
    assert by_node["probs"]["op"] == "Softmax"
    assert by_node["probs"]["output_shapes"] == [[4, 5]]
    assert by_node["probs"]["output_bytes"] == 4 * 5 * 4
    assert all(step["duration_us"] >= 0 for step in steps)
    assert {step["device"] for step in steps} == {pt.device(device).name}
    ops = [op for op, _, _ in metadata.by_op_type()]
    assert "Softmax" in ops and "MatMul" in ops
    assert metadata.summary(top=3).startswith("1 run(s)")
    trace = json.loads(metadata.chrome_trace())
    assert sum(e["ph"] == "X" for e in trace["traceEvents"]) == len(steps)
    read = config_pb2.RunMetadata.FromString(metadata.SerializeToString())
    names = [n.node_name for d in read.step_stats.dev_stats for n in d.node_stats]
    assert names == [step["node"] for step in steps]
    chrome = json.loads(timeline.Timeline(read.step_stats).generate_chrome_trace_format())
    assert sum(e.get("ph") == "X" for e in chrome["traceEvents"]) == len(steps)
    metadata.clear()
    assert metadata.step_stats == [] and metadata.runs == 0


def test_session_over_every_device(dense_graph):
    graph_def, feed, expected = dense_graph
    session = pt.Session(pt.Graph.from_graph_def(graph_def))
    np.testing.assert_allclose(session.run("total:0", {"x:0": feed}), expected[2], rtol=1e-5)


def test_graph_errors(dense_graph):
    graph_def, feed, _ = dense_graph
    with pytest.raises(ValueError):
        pt.Graph.from_graph_def(b"\xff\xff\xff garbage")
    session = pt.Session(pt.Graph.from_graph_def(graph_def))
    with pytest.raises(ValueError, match="nosuch"):
        session.run("nosuch:0", {"x:0": feed})
    with pytest.raises(ValueError):
        session.run("probs:0", {"x:0": np.ones((4, 3), np.float32)})
    with pytest.raises(ValueError):
        session.run("probs:0")  # x is not fed


@pytest.fixture(scope="module")
def endless_loop(tf):
    """`while True: i += 1` as TensorFlow 2 writes it (a functional `StatelessWhile`), and a
    constant beside it."""
    graph = tf.Graph()
    with graph.as_default():
        start = tf.constant(0, name="start")
        tf.compat.v1.while_loop(lambda i: tf.constant(True), lambda i: i + 1, [start], name="loop")
    return graph.as_graph_def().SerializeToString()


def test_runs_stop_at_their_deadline_or_when_cancelled(endless_loop):
    import threading

    graph = pt.Graph.from_graph_def(endless_loop)
    exit_name = "loop/Identity_2:0"  # the loop's `i`
    session = pt.Session(graph, device="cpu:0", operation_timeout_in_ms=50)
    with pytest.raises(pt.DeadlineExceededError, match="Timed out waiting for notification"):
        session.run(exit_name)
    assert issubclass(pt.DeadlineExceededError, TimeoutError)
    # A run's own timeout, and a handle cancelled from another thread while it runs.
    session = pt.Session(graph, device="cpu:0")
    with pytest.raises(TimeoutError):
        session.run(exit_name, options=pt.RunOptions(timeout_in_ms=20))
    cancel = pt.CancellationManager()
    timer = threading.Timer(0.05, cancel.start_cancel)
    timer.start()
    with pytest.raises(pt.CancelledError, match="Run call was cancelled"):
        session.run(exit_name, options=pt.RunOptions(cancellation=cancel))
    timer.join()
    assert cancel.is_cancelled
    # The session runs on.
    assert session.run("start:0") == 0


def test_bf16_weights_stay_within_bf16_rounding_of_float32(tf):
    """`Session(bf16_weights=True)`: a convolution and a dense layer on constant weights
    move by bf16's rounding on a CPU with AVX512-BF16, and not at all elsewhere."""
    rng = np.random.default_rng(5)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, (None, 12, 12, 16), name="x")
        f = tf.constant(rng.normal(size=(3, 3, 16, 32)).astype(np.float32))
        y = tf.nn.relu(tf.nn.conv2d(x, f, strides=1, padding="SAME"))
        w = tf.constant(rng.normal(size=(12 * 12 * 32, 10)).astype(np.float32))
        tf.matmul(tf.reshape(y, (-1, 12 * 12 * 32)), w, name="logits")
    feed = rng.normal(size=(3, 12, 12, 16)).astype(np.float32)
    with tf.compat.v1.Session(graph=graph) as session:
        want = session.run("logits:0", {"x:0": feed})
    imported = pt.Graph.from_graph_def(graph.as_graph_def().SerializeToString())
    f32 = pt.Session(imported, device="cpu:0").run("logits:0", {"x:0": feed})
    bf16 = pt.Session(imported, device="cpu:0", bf16_weights=True).run("logits:0", {"x:0": feed})
    scale = np.abs(want).max()
    np.testing.assert_allclose(f32, want, atol=1e-4 * scale)
    with open("/proc/cpuinfo") as cpuinfo:
        native = "avx512_bf16" in cpuinfo.read()
    if native:
        assert 0 < np.abs(bf16 - f32).max() <= 2e-2 * scale
    else:
        np.testing.assert_array_equal(bf16, f32)
