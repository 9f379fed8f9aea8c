"""TensorFlow as a benchmark peer, timed by the Rust benchmark that starts this script.

The benchmark writes one command per line and reads one line back:
- `model PATH BATCH THREADS`: import the frozen GraphDef at PATH, feed its `input:0` a
  seeded standard-normal batch of BATCH, fetch `probs:0`; answers `ready`.
- `frozen PATH BATCH THREADS`: import the frozen GraphDef at PATH (one
  `tests/python/keras_models.py` made), feed its input a seeded batch of BATCH as its
  sidecar `PATH.json` describes (integers below its vocabulary, else standard normal),
  fetch its outputs; answers `ready`.
- `frozen_bf16 PATH BATCH THREADS`: as `frozen`, with grappler's bf16 auto mixed precision
  (`auto_mixed_precision_onednn_bfloat16`), oneDNN's bf16 on CPUs that have it.
- `conv2d N H W C K O THREADS`: one Conv2D (NHWC, K x K, SAME, stride 1) of a seeded
  [N, H, W, C] input and a [K, K, C, O] filter; answers `ready`.
- `conv1d N W C K O THREADS`: one Conv1D (`tf.nn.conv1d`, NWC, width K, VALID, stride 1,
  as Keras's `Conv1D` runs it) of a seeded [N, W, C] input and a [K, C, O] filter; answers
  `ready`.
- `while PATH STEPS VERSION THREADS`: a `tf.compat.v1.while_loop` of STEPS iterations
  carrying a counter and a [16] float32 vector (`x * 0.999 + 0.5`), with control flow
  VERSION (`v1`: Switch/Merge/Enter/Exit/NextIteration; `v2`: StatelessWhile and its
  functions); writes its GraphDef to PATH and answers `ready`.
- `spmm M K N EVERY THREADS`: SparseTensorDenseMatMul of an [M, K] float32 sparse matrix
  holding every EVERY-th element (row-major; value 1 + its position) by a seeded [K, N]
  matrix; answers `ready`.
- `import PATH`: `tf.graph_util.import_graph_def` of the GraphDef at PATH into a new
  graph, as what `time` runs; answers `ready`.
- `saved_model DIR`: `tf.saved_model.load(DIR)` then one call of the signature that
  `DIR/../index.json` (written by `tests/python/saved_models.py`) records for DIR's case,
  on its feeds, as what `time` runs: load plus first result; answers `ready`.
- `time ITERS`: run the loaded session ITERS times; answers the seconds they took.
- `ping`: answers `ready` (the benchmark waits for it before timing anything, so that no
  row is timed while TensorFlow imports).
Sessions run with THREADS intra-op threads and one inter-op thread, as the Rust side does.
"""

import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np
import tensorflow as tf


def session(graph, threads, bf16=False):
    config = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=threads, inter_op_parallelism_threads=1
    )
    if bf16:
        from tensorflow.core.protobuf import rewriter_config_pb2

        config.graph_options.rewrite_options.auto_mixed_precision_onednn_bfloat16 = (
            rewriter_config_pb2.RewriterConfig.ON
        )
    return tf.compat.v1.Session(graph=graph, config=config)


def imported(path):
    """A new graph holding the GraphDef at PATH."""
    graph_def = tf.compat.v1.GraphDef()
    with open(path, "rb") as f:
        graph_def.ParseFromString(f.read())
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    return graph


def decoded(spec):
    """A NumPy array from a `{dtype, shape, data_hex | values_b64}` tensor."""
    if spec["dtype"] == "string":
        import base64
        values = [base64.b64decode(v) for v in spec["values_b64"]]
        return np.array(values, dtype=object).reshape(spec["shape"])
    return np.frombuffer(bytes.fromhex(spec["data_hex"]), spec["dtype"]).reshape(spec["shape"])


def main():
    run = None
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        rng = np.random.default_rng(0)
        if words[0] == "model":
            path, batch, threads = words[1], int(words[2]), int(words[3])
            graph = imported(path)
            x = graph.get_tensor_by_name("input:0")
            shape = [batch] + x.shape.as_list()[1:]
            feed = {x: rng.standard_normal(shape).astype(np.float32)}
            fetch = graph.get_tensor_by_name("probs:0")
            s = session(graph, threads)
            run = lambda: s.run(fetch, feed)
        elif words[0] in ("frozen", "frozen_bf16"):
            path, batch, threads = words[1], int(words[2]), int(words[3])
            with open(path[: -len(".pb")] + ".json") as f:
                sidecar = json.load(f)
            graph = imported(path)
            spec = sidecar["input"]
            shape = [batch] + spec["shape"]
            if spec["vocabulary"]:
                value = rng.integers(0, spec["vocabulary"], shape).astype(spec["dtype"])
            else:
                value = rng.standard_normal(shape).astype(spec["dtype"])
            feed = {graph.get_tensor_by_name(spec["name"]): value}
            fetch = [graph.get_tensor_by_name(name) for name in sidecar["fetches"]]
            s = session(graph, threads, bf16=words[0] == "frozen_bf16")
            run = lambda: s.run(fetch, feed)
        elif words[0] == "conv2d":
            n, h, w, c, k, o, threads = map(int, words[1:8])
            graph = tf.Graph()
            with graph.as_default():
                # Variables, not constants: grappler would fold a convolution of constants.
                x = tf.compat.v1.Variable(rng.standard_normal([n, h, w, c]).astype(np.float32))
                f = tf.compat.v1.Variable(rng.standard_normal([k, k, c, o]).astype(np.float32))
                y = tf.nn.conv2d(x, f, strides=1, padding="SAME")
                # Fetching one element keeps the copy of the output out of the timing.
                fetch = y[:1, :1, :1, :1]
                init = tf.compat.v1.global_variables_initializer()
            s = session(graph, threads)
            s.run(init)
            run = lambda: s.run(fetch)
        elif words[0] == "conv1d":
            n, w, c, k, o, threads = map(int, words[1:7])
            graph = tf.Graph()
            with graph.as_default():
                x = tf.compat.v1.Variable(rng.standard_normal([n, w, c]).astype(np.float32))
                f = tf.compat.v1.Variable(rng.standard_normal([k, c, o]).astype(np.float32))
                y = tf.nn.conv1d(x, f, stride=1, padding="VALID")
                fetch = y[:1, :1, :1]
                init = tf.compat.v1.global_variables_initializer()
            s = session(graph, threads)
            s.run(init)
            run = lambda: s.run(fetch)
        elif words[0] == "train":
            # A training step polytensor wrote (`Graph::minimize`): the same graph in both.
            path, threads = words[1], int(words[2])
            with open(path[: -len(".pb")] + ".json") as f:
                sidecar = json.load(f)
            graph = imported(path)
            feed = {graph.get_tensor_by_name(name): decoded(spec)
                    for name, spec in sidecar["feeds"].items()}
            step = graph.get_operation_by_name(sidecar["step"])
            s = session(graph, threads)
            s.run([graph.get_operation_by_name(name) for name in sidecar["init"]])
            run = lambda: s.run(step, feed)
        elif words[0] == "while":
            path, steps, version, threads = words[1], int(words[2]), words[3], int(words[4])
            if version == "v1":
                tf.compat.v1.disable_control_flow_v2()
            else:
                tf.compat.v1.enable_control_flow_v2()
            graph = tf.Graph()
            with graph.as_default():
                x = tf.constant(np.arange(16, dtype=np.float32))
                _, y = tf.compat.v1.while_loop(
                    lambda i, x: i < steps, lambda i, x: (i + 1, x * 0.999 + 0.5),
                    (tf.constant(0), x), name="loop")
                fetch = tf.identity(y, name="out")
            with open(path, "wb") as f:
                f.write(graph.as_graph_def().SerializeToString())
            s = session(graph, threads)
            run = lambda: s.run(fetch)
        elif words[0] == "spmm":
            m, k, n, every, threads = map(int, words[1:6])
            flat = np.arange(0, m * k, every)
            indices = np.stack([flat // k, flat % k], axis=1).astype(np.int64)
            graph = tf.Graph()
            with graph.as_default():
                # Variables, not constants: grappler would fold a product of constants.
                values = tf.compat.v1.Variable((1 + flat).astype(np.float32))
                b = tf.compat.v1.Variable(rng.standard_normal([k, n]).astype(np.float32))
                a = tf.sparse.SparseTensor(indices, values.read_value(), [m, k])
                y = tf.sparse.sparse_dense_matmul(a, b)
                fetch = y[:1, :1]
                init = tf.compat.v1.global_variables_initializer()
            s = session(graph, threads)
            s.run(init)
            run = lambda: s.run(fetch)
        elif words[0] == "saved_model":
            directory = words[1]
            with open(os.path.join(os.path.dirname(directory), "index.json")) as f:
                case = next(c for c in json.load(f)["cases"]
                            if c["name"] == os.path.basename(directory))
            call = case["runs"][0]
            feeds = {key: tf.constant(decoded(spec)) for key, spec in call["feeds"].items()}

            def load_and_call(directory=directory, signature=call["signature"], feeds=feeds):
                loaded = tf.saved_model.load(directory)
                return loaded.signatures[signature](**feeds)

            run = load_and_call
        elif words[0] == "import":
            graph_def = tf.compat.v1.GraphDef()
            with open(words[1], "rb") as f:
                graph_def.ParseFromString(f.read())

            def run(graph_def=graph_def):
                with tf.Graph().as_default():
                    tf.graph_util.import_graph_def(graph_def, name="")
        elif words[0] == "ping":
            print("ready", flush=True)
            continue
        elif words[0] == "time":
            iters = int(words[1])
            run()
            start = time.perf_counter()
            for _ in range(iters):
                run()
            print(time.perf_counter() - start, flush=True)
            continue
        else:
            print(f"unknown command {words[0]}", flush=True)
            continue
        run()
        print("ready", flush=True)


if __name__ == "__main__":
    main()
