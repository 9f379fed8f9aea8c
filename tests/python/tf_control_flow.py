"""TensorFlow-written graphs with loops and conditionals, for tests/control_flow.rs: each
case is built twice, with TensorFlow 1.x control flow (`Switch`, `Merge`, `Enter`,
`Exit`, `NextIteration`, `LoopCond`) and with control flow v2 (`While`/`StatelessWhile`,
`If`/`StatelessIf` calling functions of the GraphDef's library), and run in a
`tf.compat.v1.Session` (a run whose check fails keeps TensorFlow's message). Into the directory given as the only argument go `NAME.pb` (the
GraphDef) and `NAME.json` (feeds and fetches by name, TensorFlow's values, the op types
the graph holds), for every case and run."""

import json
import pathlib
import sys

import numpy as np
import tensorflow as tf
from tensorflow.python.ops import control_flow_util

v1 = tf.compat.v1


def spec(value):
    value = np.asarray(value)
    dtype = {"float32": "float32", "int32": "int32", "bool": "bool", "float64": "float64"}[
        str(value.dtype)]
    return {"dtype": dtype, "shape": list(value.shape), "data_hex": value.tobytes().hex()}


def counter():
    """A counter loop carrying a float: `i < 10: i + 1, x * 1.5`."""
    x = v1.placeholder(tf.float32, [], name="x")
    i, y = v1.while_loop(lambda i, y: i < 10, lambda i, y: (i + 1, y * 1.5),
                         [tf.constant(0), x], name="loop")
    tf.identity(i, name="i_out")
    tf.identity(y, name="y_out")
    return [({"x:0": np.float32(2.0)}, ["i_out:0", "y_out:0"])]


def growing():
    """A loop carrying a tensor whose shape changes: it doubles its length each iteration."""
    n = v1.placeholder(tf.int32, [], name="n")
    start = tf.constant([1.0, 2.0])
    _, t = v1.while_loop(lambda i, t: i < n, lambda i, t: (i + 1, tf.concat([t, t * 2.0], 0)),
                         [tf.constant(0), start],
                         shape_invariants=[tf.TensorShape([]), tf.TensorShape([None])],
                         name="grow")
    tf.identity(t, name="out")
    tf.shape(t, name="shape_out")
    return [({"n:0": np.int32(3)}, ["out:0", "shape_out:0"]),
            ({"n:0": np.int32(0)}, ["out:0", "shape_out:0"])]


def nested():
    """Nested loops: for i < 3, for j < i + 2, acc += i * j + w (w a loop invariant)."""
    w = v1.placeholder(tf.float32, [], name="w")

    def outer_body(i, acc):
        def inner_body(j, acc):
            return j + 1, acc + tf.cast(i * j, tf.float32) + w
        _, acc = v1.while_loop(lambda j, acc: j < i + 2, inner_body, [tf.constant(0), acc],
                               name="inner")
        return i + 1, acc
    _, acc = v1.while_loop(lambda i, acc: i < 3, outer_body, [tf.constant(0), tf.constant(0.0)],
                           name="outer")
    tf.identity(acc, name="out")
    return [({"w:0": np.float32(0.5)}, ["out:0"])]


def cond_in_while():
    """A conditional inside a loop: even i adds i, odd i doubles."""
    x = v1.placeholder(tf.float32, [], name="x")

    def body(i, x):
        y = v1.cond(tf.equal(i % 2, 0), lambda: x + tf.cast(i, tf.float32), lambda: x * 2.0)
        return i + 1, y
    _, y = v1.while_loop(lambda i, x: i < 7, body, [tf.constant(0), x], name="loop")
    tf.identity(y, name="out")
    return [({"x:0": np.float32(1.0)}, ["out:0"])]


def conditional():
    """A conditional at the top: a matmul on one branch, a reduction on the other."""
    p = v1.placeholder(tf.bool, [], name="p")
    m = v1.placeholder(tf.float32, [2, 3], name="m")
    out = v1.cond(p, lambda: tf.matmul(m, m, transpose_b=True),
                  lambda: tf.reshape(tf.reduce_sum(m), [1, 1]) + tf.zeros([2, 2]))
    tf.identity(out, name="out")
    m_value = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
    return [({"p:0": np.bool_(True), "m:0": m_value}, ["out:0"]),
            ({"p:0": np.bool_(False), "m:0": m_value}, ["out:0"])]


def recurrent():
    """A recurrent cell: h = tanh(W h + b), five steps, with a maximum_iterations bound."""
    h0 = v1.placeholder(tf.float32, [4, 1], name="h0")
    rng = np.random.default_rng(7)
    w = tf.constant(rng.standard_normal((4, 4)).astype(np.float32) / 2)
    b = tf.constant(rng.standard_normal((4, 1)).astype(np.float32) / 4)
    _, h = v1.while_loop(lambda k, h: k < 100, lambda k, h: [k + 1, tf.tanh(tf.matmul(w, h) + b)],
                         [tf.constant(0), h0], maximum_iterations=5, name="rnn")
    tf.identity(h, name="out")
    return [({"h0:0": rng.standard_normal((4, 1)).astype(np.float32)}, ["out:0"])]


def checked():
    """Checks and prints in a loop: an assert on the counter, a `tf.print`, and
    `check_numerics` on what the loop carries; runs that pass, and runs whose assert or
    check fails (TensorFlow's message is what they must give)."""
    x = v1.placeholder(tf.float32, [2], name="x")
    limit = v1.placeholder(tf.int32, [], name="limit")

    def body(i, x):
        checks = [tf.debugging.assert_less(i, limit, message="too many"),
                  tf.print("step", i, x, [[1.5, 2.0], [3.0, 4.25]], summarize=1)]
        with tf.control_dependencies(checks):
            y = tf.debugging.check_numerics(x * 2.0, "doubled")
        return i + 1, y
    _, y = v1.while_loop(lambda i, x: i < 4, body, [tf.constant(0), x], name="loop")
    tf.identity(y, name="out")
    x_value = np.array([1.0, -2.5], np.float32)
    return [({"x:0": x_value, "limit:0": np.int32(10)}, ["out:0"]),
            # Only the last iteration fails: TensorFlow's executor may run iterations at
            # once, and the first failure it meets is what it reports.
            ({"x:0": x_value, "limit:0": np.int32(3)}, ["out:0"]),
            ({"x:0": np.array([1.0, 3e38], np.float32), "limit:0": np.int32(10)}, ["out:0"])]


CASES = [counter, growing, nested, cond_in_while, conditional, recurrent, checked]


def main():
    folder = pathlib.Path(sys.argv[1])
    for version in ("v1", "v2"):
        if version == "v1":
            v1.disable_control_flow_v2()
        else:
            v1.enable_control_flow_v2()
        for case in CASES:
            graph = tf.Graph()
            with graph.as_default():
                runs = case()
            graph_def = graph.as_graph_def()
            ops = sorted({node.op for node in graph_def.node})
            assert control_flow_util.ENABLE_CONTROL_FLOW_V2 == (version == "v2")
            with v1.Session(graph=graph) as session:
                for k, (feeds, fetches) in enumerate(runs):
                    try:
                        values, error = session.run(fetches, feed_dict=feeds), None
                    except tf.errors.InvalidArgumentError as e:
                        # The line that says what failed (TensorFlow adds where it was).
                        values = []
                        error = next(line for line in e.message.splitlines()
                                     if "assertion failed" in line or "Tensor had" in line)
                    name = f"{case.__name__}_{version}_{k}"
                    (folder / f"{name}.pb").write_bytes(graph_def.SerializeToString())
                    (folder / f"{name}.json").write_text(json.dumps({
                        "feeds": {key: spec(value) for key, value in feeds.items()},
                        "fetches": fetches,
                        "expected": [spec(value) for value in values],
                        "error": error,
                        "ops": ops,
                        # String tensors anywhere, functions included (host devices hold them).
                        "strings": case is checked,
                    }))
    print(f"TensorFlow {tf.__version__} wrote {2 * len(CASES)} control-flow graphs")


main()
