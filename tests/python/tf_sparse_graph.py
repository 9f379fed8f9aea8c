"""A TensorFlow 1.x graph with sparse placeholders (tests/sparse_graph_tensorflow.rs): a
`tf.compat.v1.sparse_placeholder` feeding SparseTensorDenseMatMul (plain and with
adjoints), SparseReduceSum(Sparse), SparseToDense, SparseReorder, SparseAdd and
SparseSegmentSum, written by TensorFlow as a GraphDef and run by TensorFlow in a
`tf.compat.v1.Session` on the feeds below. Prints one JSON document: the GraphDef (hex), the
placeholders' names, the feeds, and each fetch's name and TensorFlow's value."""

import json

import numpy as np
import tensorflow as tf

tf.compat.v1.disable_eager_execution()
rng = np.random.default_rng(7)

graph = tf.Graph()
with graph.as_default():
    sp = tf.compat.v1.sparse_placeholder(tf.float32, shape=[None, None], name="ids")
    sp_b = tf.compat.v1.sparse_placeholder(tf.float32, shape=[None, None])
    weights = tf.constant(rng.integers(-4, 5, size=(6, 3)).astype(np.float32), name="weights")
    weights_t = tf.constant(rng.integers(-4, 5, size=(3, 6)).astype(np.float32), name="weights_t")
    dense = tf.compat.v1.placeholder(tf.float32, shape=[None, None], name="dense")
    outputs = {
        "matmul": tf.sparse.sparse_dense_matmul(sp, weights),
        "matmul_adjoint": tf.sparse.sparse_dense_matmul(sp, weights_t, adjoint_b=True),
        "relu_matmul": tf.nn.relu(tf.sparse.sparse_dense_matmul(sp, weights) + 1.0),
        "reduce_sum": tf.sparse.reduce_sum(sp, axis=1),
        "to_dense": tf.sparse.to_dense(tf.sparse.reorder(sp)),
        "add_dense": tf.sparse.add(sp, dense),
        "segment_sum": tf.sparse.segment_sum(weights, [0, 2, 2, 5], [0, 0, 1, 3]),
    }
    reduced = tf.sparse.reduce_sum(sp, axis=0, output_is_sparse=True)
    added = tf.sparse.add(tf.sparse.reorder(sp), tf.sparse.reorder(sp_b))

indices = [[3, 1], [0, 0], [0, 5], [2, 2], [3, 4]]
values = [1.5, -2.0, 0.5, 4.0, 3.0]
feeds_json = {
    "ids": {"indices": indices, "values": values, "shape": [4, 6]},
    "b": {"indices": [[0, 0], [1, 1]], "values": [1.0, 2.0], "shape": [4, 6]},
    "dense": rng.integers(-3, 4, size=(4, 6)).astype(np.float32).tolist(),
}
feed_dict = {
    sp: tf.compat.v1.SparseTensorValue(indices, values, [4, 6]),
    sp_b: tf.compat.v1.SparseTensorValue([[0, 0], [1, 1]], [1.0, 2.0], [4, 6]),
    dense: feeds_json["dense"],
}
with tf.compat.v1.Session(graph=graph) as session:
    results = session.run({**outputs, "reduced": reduced, "added": added}, feed_dict=feed_dict)


def sparse_names(s):
    return {"indices": s.indices.name, "values": s.values.name, "shape": s.dense_shape.name}


def sparse_value(v):
    return {"indices": np.asarray(v.indices).reshape(-1).tolist(),
            "values": np.asarray(v.values).tolist(), "shape": np.asarray(v.dense_shape).tolist()}


print(json.dumps({
    "graph_def": graph.as_graph_def().SerializeToString().hex(),
    "placeholders": {"ids": sparse_names(sp), "b": sparse_names(sp_b), "dense": dense.name},
    "feeds": feeds_json,
    "dense": {name: {"name": t.name, "values": np.asarray(results[name]).reshape(-1).tolist(),
                     "shape": list(np.asarray(results[name]).shape)}
              for name, t in outputs.items()},
    "sparse": {"reduced": {"names": sparse_names(reduced), **sparse_value(results["reduced"])},
               "added": {"names": sparse_names(added), **sparse_value(results["added"])}},
}))
