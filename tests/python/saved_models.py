"""SavedModels made in this run for tests/saved_models.rs, beyond the golden ones: a
data-dependent tf.cond and tf.while_loop in a signature, tf.lookup hash tables, a Keras
application exported with model.export, and variables split across checkpoint shards.

Usage: saved_models.py DIR. Writes DIR/NAME/ (each SavedModel) and DIR/index.json:
{"cases": [{"name", "runs": [{"signature", "feeds", "expected"}], "tolerance"}]}, tensors
as {dtype, shape, data_hex} or {dtype: "string", shape, values_b64}; "expected" is what
tf.saved_model.load(DIR/NAME).signatures[signature](**feeds) gives in this process.
"""

import base64
import json
import os
import sys

import numpy as np
import tensorflow as tf

TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}


def encode(value):
    array = np.asarray(value)
    if array.dtype == object or array.dtype.kind in "SU":
        return {"dtype": "string", "shape": list(array.shape),
                "values_b64": [base64.b64encode(v if isinstance(v, bytes) else v.encode()).decode()
                               for v in array.reshape(-1).tolist()]}
    name = {"float32": "float32", "float64": "float64", "int32": "int32", "int64": "int64",
            "bool": "bool"}[array.dtype.name]
    return {"dtype": name, "shape": list(array.shape),
            "data_hex": np.ascontiguousarray(array).tobytes().hex()}


def runs_of(directory, calls):
    """Load the SavedModel back in TensorFlow and record each call."""
    loaded = tf.saved_model.load(directory)
    runs = []
    for signature, feeds in calls:
        outputs = loaded.signatures[signature](**{k: tf.constant(v) for k, v in feeds.items()})
        runs.append({"signature": signature,
                     "feeds": {k: encode(v) for k, v in feeds.items()},
                     "expected": {k: encode(v.numpy()) for k, v in outputs.items()}})
    return runs


def control_flow(directory, rng):
    class Flow(tf.Module):
        def __init__(self):
            self.w = tf.Variable(rng.normal(0, 1, [4, 4]).astype(np.float32))
            self.steps = tf.Variable(3, dtype=tf.int32)

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
        def branch(self, x):
            # Data-dependent: which branch runs depends on the values fed.
            return tf.cond(tf.reduce_sum(x) > 0, lambda: tf.matmul(x, self.w),
                           lambda: tf.nn.relu(x) - 1.0)

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32),
                                      tf.TensorSpec([], tf.int32)])
        def iterate(self, x, n):
            i = tf.constant(0)
            _, y = tf.while_loop(lambda i, y: i < n + self.steps,
                                 lambda i, y: (i + 1, tf.tanh(tf.matmul(y, self.w))), (i, x))
            return {"y": y, "total": tf.reduce_sum(y)}

    module = Flow()
    tf.saved_model.save(module, directory, signatures={
        "serving_default": module.branch, "iterate": module.iterate})
    x = rng.normal(0, 1, [3, 4]).astype(np.float32)
    return runs_of(directory, [("serving_default", {"x": np.abs(x)}),
                               ("serving_default", {"x": -np.abs(x)}),
                               ("iterate", {"x": x, "n": np.int32(4)}),
                               ("iterate", {"x": x, "n": np.int32(0)})])


def lookup(directory, rng):
    vocabulary = os.path.join(os.path.dirname(directory), "vocabulary.txt")
    with open(vocabulary, "w") as f:
        f.write("\n".join(["[UNK]", "sat", "cat", "mat", "on"]) + "\n")

    class Vocab(tf.Module):
        def __init__(self):
            # A vocabulary file: an asset of the SavedModel, fed to its init op.
            self.lines = tf.lookup.StaticHashTable(
                tf.lookup.TextFileInitializer(
                    vocabulary, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE,
                    tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER), default_value=0)
            words = tf.constant(["the", "cat", "sat", "on", "\u00e9t\u00e9", ""])
            self.ids = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(words, tf.constant([1, 2, 3, 4, 5, 6], tf.int64)),
                default_value=-1)
            self.weights = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(tf.constant([1, 2, 3, 5, 8], tf.int64),
                                                    tf.constant([0.5, -1.0, 2.0, 4.0, 8.0])),
                default_value=0.0)
            # String values, looked up by id (a missing id gives the default string).
            self.names = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(tf.constant([1, 2, 5], tf.int64),
                                                    tf.constant(["one", "two", "\u00e9t\u00e9"])),
                default_value="?")
            self.scale = tf.Variable(1.5)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def encode(self, words):
            ids = self.ids.lookup(words)
            return {"ids": ids, "weights": self.weights.lookup(ids) * self.scale,
                    "size": self.ids.size(), "line": self.lines.lookup(words),
                    "name": self.names.lookup(ids)}

    module = Vocab()
    tf.saved_model.save(module, directory, signatures={"serving_default": module.encode})
    words = np.array([b"cat", b"dog", b"\xc3\xa9t\xc3\xa9", b"", b"the", b"on"], dtype=object)
    return runs_of(directory, [("serving_default", {"words": words})])


def keras_application(directory, rng):
    import keras
    keras.utils.set_random_seed(11)
    model = keras.applications.MobileNetV3Small(weights=None, input_shape=(64, 64, 3),
                                                classes=10, include_preprocessing=False)
    model.export(directory, verbose=False)
    x = rng.uniform(-1, 1, [2, 64, 64, 3]).astype(np.float32)
    return runs_of(directory, [("serving_default", {model.inputs[0].name: x})])


def sharded(directory, rng):
    class Wide(tf.Module):
        def __init__(self):
            self.table = tf.Variable(rng.normal(0, 1, [64, 48]).astype(np.float32))
            self.bias = tf.Variable(rng.normal(0, 1, [48]).astype(np.float32))
            self.count = tf.Variable(np.arange(40, dtype=np.int64))

        @tf.function(input_signature=[tf.TensorSpec([None, 64], tf.float32)])
        def apply(self, x):
            return {"y": tf.matmul(x, self.table) + self.bias,
                    "count": tf.reduce_sum(self.count)}

    module = Wide()
    # Shards of at most 4 KiB: the 12 KiB table is split into slices across data files.
    options = tf.saved_model.SaveOptions(
        experimental_sharding_callback=tf.train.experimental.MaxShardSizePolicy(
            max_shard_size=4096))
    tf.saved_model.save(module, directory, signatures={"serving_default": module.apply},
                        options=options)
    x = rng.normal(0, 1, [2, 64]).astype(np.float32)
    return runs_of(directory, [("serving_default", {"x": x})])


def unsupported(directory):
    """A SavedModel whose function uses an op polytensor lacks (`Cumsum`)."""
    class Running(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
        def total(self, x):
            return tf.math.cumsum(x)

    module = Running()
    tf.saved_model.save(module, directory, signatures={"serving_default": module.total})
    return {"name": "unsupported", "op": "Cumsum"}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    cases = []
    for name, make in [("control_flow", control_flow), ("lookup", lookup),
                       ("keras_mobilenet_v3_small", keras_application), ("sharded", sharded)]:
        rng = np.random.default_rng(len(cases) + 5)
        runs = make(os.path.join(out, name), rng)
        shards = sorted(f for f in os.listdir(os.path.join(out, name, "variables")))
        cases.append({"name": name, "runs": runs, "tolerance": TOLERANCE, "variables": shards})
    refused = [unsupported(os.path.join(out, "unsupported"))]
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump({"cases": cases, "refused": refused}, f)
    print(f"made {len(cases)} SavedModels in {out}")


if __name__ == "__main__":
    main()
