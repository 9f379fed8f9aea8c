"""A recurrent classifier as a `tf.compat.v1` graph, for the training benchmark
(`benches/src/training.rs`, row `train_step_lstm_b32`): an LSTM (Keras's cell: one kernel
and one recurrent kernel of four gates, sigmoid and tanh) run by `tf.while_loop` over
`tf.TensorArray`s as Keras's recurrent layers run it, its last state through a dense layer
to 10 classes. Resource variables hold the weights. Writes `OUTDIR/lstm.pb` (the graph
before any gradient or loss) and `OUTDIR/lstm.json` (the input, logits and weights' names,
the variables' initializers and the input's shape); and TensorFlow's own training step of
the same model (`tf.gradients` through its `while_v2`, Adam), `OUTDIR/lstm_tensorflow.pb`
with the sidecar the benchmark's TensorFlow peer reads (`OUTDIR/lstm_tensorflow.json`:
initializers, step, feeds)."""

import json
import pathlib
import sys

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1
BATCH, STEPS, FEATURES, UNITS, CLASSES = 32, 16, 32, 64, 10


def build():
    rng = np.random.default_rng(52)

    def weight(name, shape, scale):
        value = (scale * rng.normal(size=shape)).astype(np.float32)
        return v1.get_variable(name, initializer=value, use_resource=True)

    x = v1.placeholder(tf.float32, (BATCH, STEPS, FEATURES), name="x")
    kernel = weight("kernel", (FEATURES, 4 * UNITS), 0.15)
    recurrent = weight("recurrent_kernel", (UNITS, 4 * UNITS), 0.1)
    bias = weight("bias", (4 * UNITS,), 0.1)
    dense = weight("dense", (UNITS, CLASSES), 0.2)
    inputs = tf.TensorArray(tf.float32, size=STEPS).unstack(tf.transpose(x, [1, 0, 2]))
    outputs = tf.TensorArray(tf.float32, size=STEPS)

    def body(t, h, c, outputs):
        z = tf.matmul(inputs.read(t), kernel) + tf.matmul(h, recurrent) + bias
        i, f, g, o = tf.split(z, 4, axis=1)
        c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
        h = tf.sigmoid(o) * tf.tanh(c)
        return t + 1, h, c, outputs.write(t, h)

    zeros = tf.zeros([BATCH, UNITS])
    _, h, _, outputs = tf.while_loop(lambda t, *_: t < STEPS, body,
                                     [tf.constant(0), zeros, zeros, outputs])
    logits = tf.matmul(h + tf.reduce_mean(outputs.stack(), axis=0), dense, name="logits")
    variables = [kernel, recurrent, bias, dense]
    return x, logits, variables


def spec(value):
    return {"dtype": str(value.dtype), "shape": list(value.shape),
            "data_hex": value.tobytes().hex()}


def tensorflows_step(out):
    """TensorFlow's own training graph of the model, as `tf.compat.v1.train` writes it."""
    graph = tf.Graph()
    with graph.as_default():
        x, logits, variables = build()
        labels = v1.placeholder(tf.int32, (BATCH,), name="labels")
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        step = v1.train.AdamOptimizer(1e-3, epsilon=1e-7).minimize(loss, var_list=variables)
        init = v1.global_variables_initializer()
    rng = np.random.default_rng(5)
    (out / "lstm_tensorflow.pb").write_bytes(graph.as_graph_def().SerializeToString())
    (out / "lstm_tensorflow.json").write_text(json.dumps({
        "init": [init.name],
        "step": step.name,
        "feeds": {x.name: spec(rng.normal(size=(BATCH, STEPS, FEATURES)).astype(np.float32)),
                  labels.name: spec((np.arange(BATCH) * 7 % 10).astype(np.int32))},
    }))


def main(out):
    out.mkdir(parents=True, exist_ok=True)
    graph = tf.Graph()
    with graph.as_default():
        x, logits, variables = build()
    (out / "lstm.pb").write_bytes(graph.as_graph_def().SerializeToString())
    tensorflows_step(out)
    (out / "lstm.json").write_text(json.dumps({
        "input": x.name,
        "shape": [BATCH, STEPS, FEATURES],
        "logits": logits.name,
        "weights": [v.handle.name for v in variables],
        "init": [v.initializer.name for v in variables],
    }))


main(pathlib.Path(sys.argv[1]))
