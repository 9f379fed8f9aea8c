"""TensorFlow's gradients through its functional control flow, for tests/it/training.rs.

Each case is a `tf.compat.v1` graph built with TensorFlow 2's control flow (`tf.cond` as
`If`/`StatelessIf`, `tf.while_loop` as `While`/`StatelessWhile`, a `tf.function` called as a
`PartitionedCall`) and a scalar loss; `NAME.pb` is the graph before any gradient, and
`NAME.json` names its feeds (with random values), the loss, the tensors `xs` to take
gradients with respect to (weights fed as placeholders, or resource variables' handles with
the ops that initialise them) and TensorFlow's `tf.gradients(loss, xs)`. The directory is the
only argument; `index.json` lists the cases.
"""

import json
import pathlib
import sys

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1


def spec(value):
    value = np.asarray(value)
    return {"dtype": str(value.dtype), "shape": list(value.shape),
            "data_hex": value.tobytes().hex()}


def placeholder(name, value):
    return v1.placeholder(tf.as_dtype(value.dtype), value.shape, name=name)


def cond_case(rng, taken):
    """`tf.cond` whose branches use the inputs differently (one ignores `b`)."""
    values = {"x": rng.normal(size=(4, 3)).astype(np.float32),
              "w": rng.normal(size=(3, 5)).astype(np.float32),
              "b": rng.normal(size=(5,)).astype(np.float32),
              "pred": np.array(taken)}
    x, w, b, pred = (placeholder(k, v) for k, v in values.items())
    y = tf.cond(pred, lambda: tf.tanh(tf.matmul(x, w) + b),
                lambda: tf.sigmoid(tf.matmul(x * x, w)))
    loss = tf.reduce_sum(y * y)
    return values, loss, [x, w, b], []


def rnn_case(rng, steps=6):
    """A recurrent cell written with `tf.while_loop`: `h = tanh(h w + xs[t] u + b)`."""
    values = {"xs": rng.normal(size=(steps, 2, 3)).astype(np.float32),
              "h0": rng.normal(size=(2, 4)).astype(np.float32),
              "w": (0.5 * rng.normal(size=(4, 4))).astype(np.float32),
              "u": rng.normal(size=(3, 4)).astype(np.float32),
              "b": rng.normal(size=(4,)).astype(np.float32)}
    xs, h0, w, u, b = (placeholder(k, v) for k, v in values.items())

    def body(t, h, total):
        h = tf.tanh(tf.matmul(h, w) + tf.matmul(tf.gather(xs, t), u) + b)
        return t + 1, h, total + tf.reduce_sum(h, axis=0)

    _, h, total = tf.while_loop(lambda t, h, total: t < steps, body,
                                [tf.constant(0), h0, tf.zeros([4])])
    loss = tf.reduce_sum(h * h) + tf.reduce_sum(total * b)
    return values, loss, [xs, h0, w, u, b], []


def nested_case(rng, steps=5):
    """A loop whose body branches on the step (`tf.cond` inside `tf.while_loop`) and calls
    a `tf.function` inside a loop inside the loop."""
    values = {"x": rng.normal(size=(3, 4)).astype(np.float32),
              "w": (0.6 * rng.normal(size=(4, 4))).astype(np.float32),
              "scale": np.array(0.7, np.float32)}
    x, w, scale = (placeholder(k, v) for k, v in values.items())

    @tf.function
    def mix(h, w):
        return tf.matmul(h, w) * scale

    def inner(h):
        return tf.while_loop(lambda i, h: i < 2, lambda i, h: (i + 1, tf.sin(h) + h),
                             [tf.constant(0), h])[1]

    def body(t, h):
        h = tf.cond(tf.equal(t % 2, 0), lambda: tf.tanh(mix(h, w)), lambda: inner(h) * scale)
        return t + 1, h

    h = tf.while_loop(lambda t, h: t < steps, body, [tf.constant(0), x])[1]
    loss = tf.reduce_sum(h * h)
    return values, loss, [x, w, scale], []


def variable_case(rng, steps=4):
    """Resource variables read inside a loop, as training graphs hold them; `xs` are the
    variables' handles."""
    values = {"x": rng.normal(size=(5, 3)).astype(np.float32)}
    x = placeholder("x", values["x"])
    w = v1.get_variable("w", initializer=rng.normal(size=(3, 3)).astype(np.float32),
                        use_resource=True)
    b = v1.get_variable("b", initializer=rng.normal(size=(3,)).astype(np.float32),
                        use_resource=True)
    h = tf.while_loop(lambda t, h: t < steps,
                      lambda t, h: (t + 1, tf.nn.relu(tf.matmul(h, w) + b) - 0.1 * h),
                      [tf.constant(0), x])[1]
    loss = tf.reduce_sum(h)
    return values, loss, [w.handle, b.handle, x], [w.initializer.name, b.initializer.name]


def tensor_array_case(rng, steps=5):
    """A recurrent cell over `tf.TensorArray`s, as Keras's recurrent layers write theirs:
    the inputs unstacked to a list the loop reads (`TensorListFromTensor`,
    `TensorListGetItem`), the outputs a list it writes (`TensorListSetItem`) and that is
    stacked after it (`TensorListStack`)."""
    values = {"xs": rng.normal(size=(steps, 2, 3)).astype(np.float32),
              "w": (0.5 * rng.normal(size=(4, 4))).astype(np.float32),
              "u": rng.normal(size=(3, 4)).astype(np.float32)}
    xs, w, u = (placeholder(k, v) for k, v in values.items())
    inputs = tf.TensorArray(tf.float32, size=steps).unstack(xs)
    outputs = tf.TensorArray(tf.float32, size=steps)

    def body(t, h, outputs):
        h = tf.tanh(tf.matmul(h, w) + tf.matmul(inputs.read(t), u))
        return t + 1, h, outputs.write(t, h)

    _, h, outputs = tf.while_loop(lambda t, h, o: t < steps, body,
                                  [tf.constant(0), tf.zeros([2, 4]), outputs])
    sequence = outputs.stack()
    loss = tf.reduce_sum(sequence * sequence[::-1]) + tf.reduce_sum(h)
    return values, loss, [xs, w, u], []


def keras_case(layer):
    """A Keras recurrent layer frozen the TF2 way with its loop kept a `While`
    (`lower_control_flow=False`); `xs` are the input and the weights, now constants."""

    def freeze(rng):
        """Keras builds and freezes eagerly, before the case's graph."""
        import keras
        from tensorflow.python.framework.convert_to_constants import (
            convert_variables_to_constants_v2,
        )
        keras.utils.set_random_seed(int(rng.integers(1 << 30)))
        inputs = keras.Input((7, 3), batch_size=2)
        model = keras.Model(inputs, layer(5, return_sequences=True)(inputs))
        function = tf.function(model).get_concrete_function(
            tf.TensorSpec((2, 7, 3), tf.float32))
        frozen = convert_variables_to_constants_v2(function, lower_control_flow=False)
        return frozen.graph.as_graph_def(), frozen.inputs[0].name, frozen.outputs[0].name

    def build(rng, frozen):
        graph_def, input_name, output_name = frozen
        values = {"x": rng.normal(size=(2, 7, 3)).astype(np.float32)}
        x = placeholder("x", values["x"])
        (y,) = tf.graph_util.import_graph_def(graph_def, input_map={input_name: x},
                                              return_elements=[output_name], name="model")
        weights = [op.outputs[0] for op in tf.compat.v1.get_default_graph().get_operations()
                   if op.type == "Const" and op.outputs[0].dtype == tf.float32
                   and op.outputs[0].shape.rank >= 1]
        loss = tf.reduce_sum(y * y)
        return values, loss, [x] + weights, []

    build.eager = freeze
    return build


def lowered_case(rng):
    """A Keras LSTM frozen with its loop lowered to TensorFlow 1.x control flow (`Enter`,
    `Merge`, `Switch`, ...), as `convert_variables_to_constants_v2` does by default: refused."""
    import keras
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )
    keras.utils.set_random_seed(int(rng.integers(1 << 30)))
    inputs = keras.Input((4, 3), batch_size=2)
    model = keras.Model(inputs, keras.layers.LSTM(3)(inputs))
    function = tf.function(model).get_concrete_function(tf.TensorSpec((2, 4, 3), tf.float32))
    frozen = convert_variables_to_constants_v2(function)
    return frozen.graph.as_graph_def(), frozen.inputs[0].name, frozen.outputs[0].name


def read_and_written_case():
    """A loop that reads back what it wrote to a list (each step the one before): refused,
    as the gradient does not record lists yet."""
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, (3,), name="x")
        outputs = tf.TensorArray(tf.float32, size=4, clear_after_read=False).write(0, x)

        def body(t, outputs):
            return t + 1, outputs.write(t, tf.sin(outputs.read(t - 1)))

        outputs = tf.while_loop(lambda t, o: t < 4, body, [tf.constant(1), outputs])[1]
        loss = tf.reduce_sum(outputs.stack())
    return graph.as_graph_def(), x.name, loss.name


def refused(out, rng):
    """The graphs whose gradients polytensor refuses, with what the error must say."""
    graph_def, x, y = lowered_case(rng)
    (out / "lowered.pb").write_bytes(graph_def.SerializeToString())
    read_def, rx, ry = read_and_written_case()
    (out / "read_and_written.pb").write_bytes(read_def.SerializeToString())
    return [
        {"graph": "lowered.pb", "x": x, "y": y, "error": "TensorFlow 1.x control flow"},
        {"graph": "read_and_written.pb", "x": rx, "y": ry,
         "error": "which the gradient cannot record yet"},
    ]


CASES = {
    "cond_then": lambda rng: cond_case(rng, True),
    "cond_else": lambda rng: cond_case(rng, False),
    "rnn": rnn_case,
    "nested": nested_case,
    "variables": variable_case,
    "tensor_array": tensor_array_case,
    "keras_lstm": keras_case(lambda n, **kw: __import__("keras").layers.LSTM(n, **kw)),
    "keras_gru": keras_case(lambda n, **kw: __import__("keras").layers.GRU(n, **kw)),
    "keras_simple_rnn": keras_case(
        lambda n, **kw: __import__("keras").layers.SimpleRNN(n, **kw)),
}


def main(out):
    out.mkdir(parents=True, exist_ok=True)
    for seed, (name, build) in enumerate(CASES.items()):
        rng = np.random.default_rng(100 + seed)
        eager = [build.eager(rng)] if hasattr(build, "eager") else []
        graph = tf.Graph()
        with graph.as_default():
            values, loss, xs, init = build(rng, *eager)
            forward = graph.as_graph_def()
            ops = {n.op for n in forward.node}
            assert ops & {"If", "StatelessIf", "While", "StatelessWhile"}, (name, ops)
            grads = tf.gradients(loss, xs)
            feeds = {graph.get_tensor_by_name(k + ":0"): v for k, v in values.items()}
            with v1.Session(graph=graph) as session:
                session.run(init)
                expected = session.run(grads, feeds)
        (out / f"{name}.pb").write_bytes(forward.SerializeToString())
        (out / f"{name}.json").write_text(json.dumps({
            "feeds": {k + ":0": spec(v) for k, v in values.items()},
            "loss": loss.name,
            "xs": [x.name for x in xs],
            "init": init,
            "expected": [spec(e) for e in expected],
        }))
    (out / "refused.json").write_text(json.dumps(refused(out, np.random.default_rng(7))))
    (out / "index.json").write_text(json.dumps(list(CASES)))
    print(f"wrote {len(CASES)} control-flow gradient cases to {out}")


main(pathlib.Path(sys.argv[1]))
