"""TensorFlow's side of the checkpoint tests (tests/checkpoints.rs). Prints one JSON
document; tensors as {dtype, shape, data_hex} or {dtype: "string", shape, values_b64}.

  read PREFIX...            every key of each checkpoint, read by tf.train.load_checkpoint
  restore PREFIX SPEC       a TF1 Saver with partitioned variables restores PREFIX
                            (SPEC: JSON {name: {shape, dtype, parts, axis}}); their values
  write DIR SEED            TensorFlow writes new checkpoints under DIR: a tf.train.Checkpoint
                            of seeded variables (one above 8 MB) and a sharded, partitioned
                            TF1 Saver checkpoint; their prefixes and every tensor
  saver_graph DIR           a graph of resource variables with a sharded TF1 Saver, as
                            DIR/graph.pb; the saver's tensor names, the variables' initial
                            values, and a checkpoint TensorFlow saved of other values
"""

import base64
import json
import os
import sys

import numpy as np
import tensorflow as tf

DTYPE_NAMES = {tf.bfloat16: "bfloat16", tf.float16: "float16", tf.float32: "float32",
               tf.float64: "float64", tf.int8: "int8", tf.int16: "int16", tf.int32: "int32",
               tf.int64: "int64", tf.uint8: "uint8", tf.uint16: "uint16", tf.uint32: "uint32",
               tf.uint64: "uint64", tf.bool: "bool", tf.complex64: "complex64",
               tf.complex128: "complex128", tf.string: "string"}


def encode(value, dtype):
    name = DTYPE_NAMES[tf.as_dtype(dtype)]
    array = np.asarray(value)
    if name == "string":
        return {"dtype": name, "shape": list(array.shape),
                "values_b64": [base64.b64encode(v).decode() for v in array.reshape(-1).tolist()]}
    return {"dtype": name, "shape": list(array.shape),
            "data_hex": np.ascontiguousarray(array).tobytes().hex()}


def read(prefix):
    reader = tf.train.load_checkpoint(prefix)
    dtypes = reader.get_variable_to_dtype_map()
    return {key: encode(reader.get_tensor(key), dtypes[key]) for key in sorted(dtypes)}


def restore(prefix, spec):
    graph = tf.Graph()
    with graph.as_default():
        variables = {}
        for name, var in spec.items():
            partitioner = tf.compat.v1.fixed_size_partitioner(var["parts"], axis=var["axis"])
            variables[name] = tf.compat.v1.get_variable(
                name, shape=var["shape"], dtype=tf.as_dtype(var["dtype"]),
                partitioner=partitioner, initializer=tf.compat.v1.zeros_initializer())
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as session:
            saver.restore(session, prefix)
            return {name: encode(session.run(tf.convert_to_tensor(v)), v.dtype)
                    for name, v in variables.items()}


def write(directory, seed):
    rng = np.random.default_rng(seed)
    values = {
        "big": rng.normal(0, 1, [1024, 2100]).astype(np.float32),
        "f64": rng.normal(0, 1, [3, 5]),
        "i64": rng.integers(-2**62, 2**62, [7], dtype=np.int64),
        "u8": rng.integers(0, 256, [2, 3, 4], dtype=np.uint8),
        "flags": rng.random([9]) < 0.5,
        "c64": (rng.normal(0, 1, [4]) + 1j * rng.normal(0, 1, [4])).astype(np.complex64),
        "words": np.array([b"", b"\x00nul", bytes(range(250, 256)), b"x" * 1000], dtype=object),
        "scalar": np.float16(rng.normal()),
    }
    module = tf.Module()
    for name, value in values.items():
        setattr(module, name, tf.Variable(value))
    tf2_prefix = tf.train.Checkpoint(model=module).write(os.path.join(directory, "tf2", "ckpt"))

    os.makedirs(os.path.join(directory, "tf1"), exist_ok=True)
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/cpu:0"):
            tf.compat.v1.get_variable(
                "emb", shape=[11, 6], dtype=tf.float32,
                initializer=tf.compat.v1.random_normal_initializer(seed=seed),
                partitioner=tf.compat.v1.fixed_size_partitioner(4, axis=0))
        with tf.device("/cpu:1"):
            tf.compat.v1.get_variable(
                "ids", initializer=np.arange(24, dtype=np.int32).reshape(4, 6))
        saver = tf.compat.v1.train.Saver(sharded=True)
        config = tf.compat.v1.ConfigProto(device_count={"CPU": 2})
        with tf.compat.v1.Session(config=config) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            tf1_prefix = saver.save(session, os.path.join(directory, "tf1", "ckpt"),
                                    write_meta_graph=False, write_state=False)
    return {"checkpoints": {"tf2": {"prefix": tf2_prefix, "tensors": read(tf2_prefix)},
                            "tf1_sharded_partitioned": {"prefix": tf1_prefix,
                                                        "tensors": read(tf1_prefix)}}}


def saver_graph(directory):
    graph = tf.Graph()
    with graph.as_default():
        initial = {"dense/kernel": np.arange(12, dtype=np.float32).reshape(3, 4) / 8,
                   "step": np.int64(41), "names": np.array([b"a", b"\xffb"], dtype=object)}
        variables = {name: tf.compat.v1.get_variable(name, initializer=value, use_resource=True)
                     for name, value in initial.items()}
        emb = tf.compat.v1.get_variable(
            "emb", shape=[5, 3], initializer=tf.compat.v1.random_normal_initializer(seed=3),
            partitioner=tf.compat.v1.fixed_size_partitioner(2), use_resource=True)
        reads = {name: tf.identity(v, name=f"read_{i}").name
                 for i, (name, v) in enumerate(variables.items())}
        reads["emb"] = tf.identity(tf.convert_to_tensor(emb), name="read_emb").name
        bump = tf.group(*[v.assign(v * 2 if v.dtype != tf.string else v) for v in variables.values()],
                        name="bump")
        init = tf.compat.v1.global_variables_initializer()
        saver = tf.compat.v1.train.Saver(sharded=True)
        with tf.compat.v1.Session() as session:
            session.run(init)
            session.run(bump)
            os.makedirs(os.path.join(directory, "tf"), exist_ok=True)
            prefix = saver.save(session, os.path.join(directory, "tf", "ckpt"),
                                write_meta_graph=False, write_state=False)
            saved = {name: encode(session.run(t), graph.get_tensor_by_name(t).dtype)
                     for name, t in reads.items()}
        tf.io.write_graph(graph.as_graph_def(), directory, "graph.pb", as_text=False)
        ops = sorted({n.op for n in graph.as_graph_def().node})
    return {"graph": os.path.join(directory, "graph.pb"), "init": init.name,
            "filename": saver.saver_def.filename_tensor_name,
            "save": saver.saver_def.save_tensor_name, "restore": saver.saver_def.restore_op_name,
            "reads": reads, "tf_prefix": prefix, "tf_saved": saved, "ops": ops}


def main():
    mode = sys.argv[1]
    if mode == "read":
        result = {prefix: read(prefix) for prefix in sys.argv[2:]}
    elif mode == "restore":
        result = restore(sys.argv[2], json.loads(sys.argv[3]))
    elif mode == "saver_graph":
        result = saver_graph(sys.argv[2])
    elif mode == "write":
        result = write(sys.argv[2], int(sys.argv[3]))
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
