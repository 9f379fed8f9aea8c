"""TensorFlow's answers for SparseTensor cases (tests/sparse_tensorflow.rs): for each case
its inputs and what tf.sparse gives: str(), to_dense (or its error), reorder, and
from_dense. Prints one JSON document."""

import json

import numpy as np
import tensorflow as tf


def plain(values):
    """Tensor elements as JSON values (strings decoded)."""
    flat = np.asarray(values).reshape(-1).tolist()
    return [v.decode() if isinstance(v, bytes) else v for v in flat]


def sparse_case(name, indices, values, shape, dtype):
    indices_tensor = tf.constant(indices, dtype=tf.int64, shape=(len(indices), len(shape)))
    sp = tf.sparse.SparseTensor(indices_tensor, tf.constant(values, dtype=dtype), shape)
    case = {"name": name, "indices": indices, "values": values, "dense_shape": shape,
            "dtype": dtype, "str": str(sp)}
    try:
        case["dense"] = plain(tf.sparse.to_dense(sp).numpy())
    except tf.errors.InvalidArgumentError as e:
        case["to_dense_error"] = e.message
    reordered = tf.sparse.reorder(sp)
    case["reordered_indices"] = reordered.indices.numpy().tolist()
    case["reordered_values"] = plain(reordered.values.numpy())
    return case


def dense_case(name, values, dtype):
    dense = tf.constant(values, dtype=dtype)
    sp = tf.sparse.from_dense(dense)
    return {"name": name, "dense": plain(dense.numpy()), "shape": list(dense.shape),
            "dtype": dtype, "indices": sp.indices.numpy().tolist(),
            "values": plain(sp.values.numpy())}


sparse = [
    sparse_case("matrix", [[0, 1], [2, 3]], [5, 7], [3, 4], "int32"),
    sparse_case("floats_rank3", [[0, 0, 1], [1, 2, 0], [1, 2, 2]], [1.5, -2.0, 0.25], [2, 3, 3], "float32"),
    sparse_case("unsorted", [[2, 0], [0, 3], [1, 1]], [1.0, 2.0, 3.0], [3, 4], "float64"),
    sparse_case("repeated", [[0, 1], [0, 1]], [1, 2], [2, 2], "int64"),
    sparse_case("empty", [], [], [4, 5], "float32"),
    sparse_case("strings", [[1], [3]], ["a", "bc"], [5], "string"),
    sparse_case("bools", [[0, 0, 0, 0, 1], [1, 0, 0, 0, 0]], [True, True], [2, 1, 1, 1, 2], "bool"),
]
dense = [
    dense_case("matrix", [[0, 3, 0], [-0.0, 0, 2.5]], "float32"),
    dense_case("ints", [[[1, 0], [0, 0]], [[0, 4], [5, 0]]], "int64"),
    dense_case("zeros", [[0, 0], [0, 0]], "int32"),
    dense_case("strings", ["", "x", "", "yz"], "string"),
]
print(json.dumps({"sparse": sparse, "dense": dense}))
