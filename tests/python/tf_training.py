"""TensorFlow-written training graphs, for tests/it/training.rs. Each case is a
`tf.compat.v1` graph of a small model and a scalar loss, its weights initialised from
constants (so the values are the same wherever they run):

- `NAME.forward.pb`: the graph up to the loss, before any gradient is taken;
- `NAME.pb`: the same graph after `tf.gradients(loss, weights)` and an optimizer's
  `minimize` added TensorFlow's gradient and update ops;
- `NAME.json`: the feeds, the loss's and the gradients' names in both graphs and their
  values in TensorFlow, and a training run: the optimizer's op, the batches it is fed in
  turn, the number of steps, and the weights TensorFlow ends with.

The cases: a CNN (convolutions, bias, ReLU, max and average pools, ReLU6, a dense layer with
tanh and sigmoid, sparse and dense softmax cross entropy, an L2 penalty) trained with
Nesterov momentum and with Adam, and an MLP trained with plain momentum, gradient descent,
Adagrad and RMSProp, a MobileNet-like stack (batch norms in training, depthwise
convolutions) trained with momentum, and a text model (an embedding, whose sparse gradient
TensorFlow's optimizers apply with `ResourceSparseApply*` ops, attention, slices) trained
with each optimizer. The directory is the only argument; `index.json` lists the cases.
"""

import json
import pathlib
import sys

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1
STEPS = 20


def spec(value):
    value = np.asarray(value)
    return {"dtype": str(value.dtype), "shape": list(value.shape),
            "data_hex": value.tobytes().hex()}


def cnn(rng, batch):
    """A small CNN on 12x12x3 images, 10 classes; its weights, inputs and loss."""
    weights = {
        "conv1": rng.normal(0, 0.3, [3, 3, 3, 8]), "bias1": rng.normal(0, 0.1, [8]),
        "conv2": rng.normal(0, 0.2, [3, 3, 8, 12]), "bias2": rng.normal(0, 0.1, [12]),
        "dense": rng.normal(0, 0.2, [2 * 2 * 12, 10]), "bias3": rng.normal(0, 0.1, [10]),
    }
    w = {k: v1.get_variable(k, initializer=tf.constant(v.astype(np.float32)))
         for k, v in weights.items()}
    x = v1.placeholder(tf.float32, [batch, 12, 12, 3], name="x")
    y = v1.placeholder(tf.int32, [batch], name="y")
    h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, w["conv1"], 1, "SAME"), w["bias1"]))
    h = tf.nn.max_pool2d(h, 2, 2, "VALID")
    h = tf.nn.conv2d(h, w["conv2"], 2, "VALID")
    h = tf.nn.relu6(tf.nn.bias_add(h, w["bias2"]) * 2.0)
    h = tf.nn.avg_pool2d(h, 3, 1, "SAME")
    h = tf.reshape(h, [batch, 2 * 2 * 12])
    logits = tf.matmul(tf.tanh(h), w["dense"]) + w["bias3"]
    logits = logits * tf.sigmoid(logits)
    sparse = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
    dense = tf.nn.softmax_cross_entropy_with_logits(
        labels=tf.one_hot(y, 10) * 0.9 + 0.01, logits=logits)
    loss = tf.reduce_mean(sparse + 0.5 * dense) + 1e-3 * tf.nn.l2_loss(w["dense"])
    data = lambda: {"x:0": rng.normal(0, 1, [batch, 12, 12, 3]).astype(np.float32),
                    "y:0": rng.integers(0, 10, [batch]).astype(np.int32)}
    return w, loss, data


def mlp(rng, batch):
    """A two-layer MLP on 20 features, 5 classes; its weights, inputs and loss."""
    weights = {"w1": rng.normal(0, 0.3, [20, 32]), "b1": np.zeros([32]),
               "w2": rng.normal(0, 0.3, [32, 5]), "b2": rng.normal(0, 0.1, [5])}
    w = {k: v1.get_variable(k, initializer=tf.constant(v.astype(np.float32)))
         for k, v in weights.items()}
    x = v1.placeholder(tf.float32, [None, 20], name="x")
    y = v1.placeholder(tf.int32, [None], name="y")
    h = tf.nn.relu(tf.matmul(x, w["w1"]) + w["b1"])
    h = tf.nn.sigmoid(h) - tf.square(h) * 0.01
    logits = tf.matmul(h, w["w2"]) + w["b2"]
    loss = tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    data = lambda: {"x:0": rng.normal(0, 1, [batch, 20]).astype(np.float32),
                    "y:0": rng.integers(0, 5, [batch]).astype(np.int32)}
    return w, loss, data


def mobile(rng, batch):
    """A MobileNet-like stack on 10x10x3 images, 6 classes: a convolution, batch norms in
    training (the batch's statistics), ReLU6, depthwise convolutions (a multiplier of 2 at
    stride 2; a VALID one after a `Pad`), a 1x1 projection and a global mean."""
    weights = {
        "conv": rng.normal(0, 0.3, [3, 3, 3, 8]),
        "gamma1": rng.normal(1, 0.1, [8]), "beta1": rng.normal(0, 0.1, [8]),
        "depthwise1": rng.normal(0, 0.3, [3, 3, 8, 2]),
        "gamma2": rng.normal(1, 0.1, [16]), "beta2": rng.normal(0, 0.1, [16]),
        "depthwise2": rng.normal(0, 0.3, [3, 3, 16, 1]),
        "project": rng.normal(0, 0.2, [1, 1, 16, 6]),
    }
    w = {k: v1.get_variable(k, initializer=tf.constant(v.astype(np.float32)))
         for k, v in weights.items()}
    x = v1.placeholder(tf.float32, [batch, 10, 10, 3], name="x")
    y = v1.placeholder(tf.int32, [batch], name="y")
    h = tf.nn.conv2d(x, w["conv"], 1, "SAME")
    h, _, _ = v1.nn.fused_batch_norm(h, w["gamma1"], w["beta1"], epsilon=1e-3, is_training=True)
    h = tf.nn.relu6(h)
    h = tf.nn.depthwise_conv2d(h, w["depthwise1"], [1, 2, 2, 1], "SAME")
    h, _, _ = v1.nn.fused_batch_norm(h, w["gamma2"], w["beta2"], epsilon=1e-3, is_training=True)
    h = tf.nn.relu6(h)
    h = tf.pad(h, [[0, 0], [1, 1], [1, 1], [0, 0]])
    h = tf.nn.depthwise_conv2d(h, w["depthwise2"], [1, 1, 1, 1], "VALID")
    h = tf.nn.conv2d(h, w["project"], 1, "VALID")
    logits = tf.reduce_mean(h, [1, 2])
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    data = lambda: {"x:0": rng.normal(0, 1, [batch, 10, 10, 3]).astype(np.float32),
                    "y:0": rng.integers(0, 6, [batch]).astype(np.int32)}
    return w, loss, data


def text(rng, batch):
    """A small text classifier on sequences of 6 token ids, 4 classes: an embedding table
    (a variable read by gathers) and a position table (gathered from a read), a single
    self-attention (batched matmuls), a split, gated halves, strided slices (a negative
    step among them), max and mean pooling, ERF and power activations, a leaky `where`."""
    vocab, width, length = 20, 8, 6
    weights = {
        "embedding": rng.normal(0, 0.5, [vocab, width]),
        "position": rng.normal(0, 0.1, [length, width]),
        "query": rng.normal(0, 0.3, [width, width]),
        "dense": rng.normal(0, 0.3, [3 * width, 4]), "bias": rng.normal(0, 0.1, [4]),
    }
    w = {k: v1.get_variable(k, initializer=tf.constant(v.astype(np.float32)))
         for k, v in weights.items()}
    ids = v1.placeholder(tf.int32, [batch, length], name="x")
    y = v1.placeholder(tf.int32, [batch], name="y")
    h = tf.nn.embedding_lookup(w["embedding"], ids)
    h = h + tf.gather(tf.identity(w["position"]), tf.range(length))
    q = tf.matmul(h, w["query"])
    scores = tf.matmul(q, h, transpose_b=True) / np.sqrt(width).astype(np.float32)
    h = tf.matmul(tf.nn.softmax(scores), h)
    a, b = tf.split(h, 2, axis=2)
    h = tf.concat([tf.tanh(a) * tf.sigmoid(b), tf.math.erf(b)], axis=2)
    h = tf.pow(tf.sigmoid(h) + 0.5, 1.5)
    first, backwards = h[:, 0, :], h[:, ::-2, :]
    feats = tf.concat([first, tf.reduce_mean(backwards, 1), tf.reduce_max(h, 1)], axis=1)
    logits = tf.matmul(feats, w["dense"]) + w["bias"]
    logits = tf.where(logits > 0, logits, 0.1 * logits)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    # Some ids twice in a batch: a sparse update sums their rows' gradients first.
    data = lambda: {"x:0": rng.integers(0, vocab, [batch, length]).astype(np.int32),
                    "y:0": rng.integers(0, 4, [batch]).astype(np.int32)}
    return w, loss, data


# Each optimizer as the test builds it in polytensor (`Graph::minimize`), and in TensorFlow.
OPTIMIZERS = {
    "nesterov": {"kind": "momentum", "learning_rate": 0.05, "momentum": 0.9, "nesterov": True},
    "momentum": {"kind": "momentum", "learning_rate": 0.1, "momentum": 0.9, "nesterov": False},
    # Adam's epsilon is 1e-3, not its default 1e-8: with 1e-8, Adam takes a full step for a
    # gradient at the level of float32 rounding, in the direction of that rounding, so two
    # float32 implementations (any order of summation) part by ~3e-5 in 20 steps on some
    # weights; with 1e-3, polytensor is within 1% of the tolerance on every device.
    "adam": {"kind": "adam", "learning_rate": 0.01, "beta1": 0.9, "beta2": 0.999,
             "epsilon": 1e-3},
    "sgd": {"kind": "sgd", "learning_rate": 0.2},
    "adagrad": {"kind": "adagrad", "learning_rate": 0.1, "initial_accumulator": 0.1},
    "rmsprop": {"kind": "rmsprop", "learning_rate": 0.01, "decay": 0.9, "momentum": 0.5,
                "epsilon": 1e-10},
}


def tensorflow_optimizer(o):
    kind = o["kind"]
    if kind == "momentum":
        return v1.train.MomentumOptimizer(o["learning_rate"], o["momentum"],
                                          use_nesterov=o["nesterov"])
    if kind == "adam":
        return v1.train.AdamOptimizer(o["learning_rate"], o["beta1"], o["beta2"], o["epsilon"])
    if kind == "sgd":
        return v1.train.GradientDescentOptimizer(o["learning_rate"])
    if kind == "adagrad":
        return v1.train.AdagradOptimizer(o["learning_rate"], o["initial_accumulator"])
    return v1.train.RMSPropOptimizer(o["learning_rate"], o["decay"], o["momentum"], o["epsilon"])


CASES = [("cnn_nesterov", cnn, 8, "nesterov"), ("cnn_adam", cnn, 8, "adam"),
         ("mlp_momentum", mlp, 32, "momentum"), ("mlp_sgd", mlp, 32, "sgd"),
         ("mlp_adagrad", mlp, 32, "adagrad"), ("mlp_rmsprop", mlp, 32, "rmsprop"),
         ("mobile_momentum", mobile, 8, "momentum"),
         ("text_momentum", text, 8, "momentum"), ("text_adagrad", text, 8, "adagrad"),
         ("text_rmsprop", text, 8, "rmsprop"), ("text_sgd", text, 8, "sgd"),
         ("text_adam", text, 8, "adam")]


def case(out, name, model, batch, optimizer, seed):
    rng = np.random.default_rng(seed)
    graph = tf.Graph()
    with graph.as_default():
        w, loss, data = model(rng, batch)
        loss = tf.identity(loss, name="loss")
        forward = graph.as_graph_def()
        names = sorted(w)
        grads = tf.gradients(loss, [w[k] for k in names])
        # A table's gradient is `IndexedSlices`: recorded densified.
        grads = [tf.identity(tf.convert_to_tensor(g), name="grad_" + k)
                 for g, k in zip(grads, names)]
        train = tensorflow_optimizer(OPTIMIZERS[optimizer]).minimize(loss, name="train")
        finals = [tf.identity(w[k], name="final_" + k) for k in names]
        init = v1.global_variables_initializer()
        batches = [data() for _ in range(4)]
        with v1.Session(graph=graph) as session:
            session.run(init)
            values = session.run([loss] + grads, batches[0])
            for step in range(STEPS):
                session.run(train, batches[step % len(batches)])
            trained = session.run(finals)
        types = sorted({n.op for n in graph.as_graph_def().node})
    (out / f"{name}.forward.pb").write_bytes(forward.SerializeToString())
    (out / f"{name}.pb").write_bytes(graph.as_graph_def().SerializeToString())
    record = {
        "init": init.name,
        # The weights' handles: what the gradients are of.
        "weights": [w[k].handle.name for k in names],
        # Their initializers, in the forward graph as in the whole.
        "initializers": [w[k].initializer.name for k in names],
        "feeds": {k: spec(v) for k, v in batches[0].items()},
        "loss": "loss:0",
        "grads": [g.name for g in grads],
        "expected": [spec(v) for v in values],
        "optimizer": OPTIMIZERS[optimizer],
        "train": {"op": train.name, "steps": STEPS,
                  "batches": [{k: spec(v) for k, v in b.items()} for b in batches],
                  "fetches": [f.name for f in finals],
                  "expected": [spec(v) for v in trained]},
        "op_types": types,
    }
    (out / f"{name}.json").write_text(json.dumps(record))


def eager_tape(out):
    """`tape.json`: a small CNN run eagerly under `tf.GradientTape`, its inputs, weights,
    loss and the tape's gradients (tests/it/training.rs replays it on polytensor's tape)."""
    rng = np.random.default_rng(99)
    f32 = lambda shape, scale: (rng.normal(0, scale, shape)).astype(np.float32)
    x, labels = f32([4, 6, 6, 2], 1.0), rng.integers(0, 3, [4]).astype(np.int32)
    weights = {"filter": f32([3, 3, 2, 4], 0.3), "bias": f32([4], 0.1),
               "dense": f32([36, 3], 0.3), "offset": f32([3], 0.1)}
    w = {k: tf.constant(v) for k, v in weights.items()}
    with tf.GradientTape() as tape:
        tape.watch(list(w.values()))
        h = tf.nn.conv2d(x, w["filter"], 1, "SAME")
        h = tf.nn.relu(tf.nn.bias_add(h, w["bias"]))
        h = tf.nn.max_pool2d(h, 2, 2, "VALID")
        h = tf.reshape(h, [4, 36])
        logits = tf.tanh(tf.matmul(h, w["dense"]) + w["offset"])
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    names = sorted(w)
    grads = tape.gradient(loss, [w[k] for k in names])
    record = {"x": spec(x), "labels": spec(labels),
              "weights": {k: spec(weights[k]) for k in names}, "loss": spec(loss.numpy()),
              "grads": {k: spec(g.numpy()) for k, g in zip(names, grads)}}
    (out / "tape.json").write_text(json.dumps(record))


def main():
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for seed, (name, model, batch, optimizer) in enumerate(CASES):
        case(out, name, model, batch, optimizer, seed)
    eager_tape(out)
    (out / "index.json").write_text(json.dumps([c[0] for c in CASES]))
    print(f"tf_training.py: {len(CASES)} cases in {out}")


if __name__ == "__main__":
    main()
