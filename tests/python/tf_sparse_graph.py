"""A TensorFlow 1.x graph with sparse placeholders (tests/sparse_graph_tensorflow.rs): a
`tf.compat.v1.sparse_placeholder` feeding SparseTensorDenseMatMul (plain and with
adjoints), SparseReduceSum(Sparse), SparseToDense, SparseReorder, SparseAdd and
SparseSegmentSum, written by TensorFlow as a GraphDef and run by TensorFlow in a
`tf.compat.v1.Session` on the feeds below, with more sparse ops built for their static shapes.
Prints one JSON document: the GraphDef (hex), the static shape TensorFlow gives each sparse
op's outputs, the placeholders' names, the feeds, and each fetch's name and TensorFlow's
value."""

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
    # Built for their static shapes only (compared, not run): index matrices of known
    # rank, counts from constants.
    known_i = tf.compat.v1.placeholder(tf.int64, (3, 2), name="known_indices")
    known_v = tf.compat.v1.placeholder(tf.float32, (3,), name="known_values")
    shape_ph = tf.compat.v1.placeholder(tf.int64, (2,), name="shape_vector")
    shape_c = tf.constant([4, 6], tf.int64, name="shape_constant")
    raw = tf.raw_ops
    for i, v in [(known_i, known_v), (sp.indices, sp.values)]:
        raw.SparseAdd(a_indices=i, a_values=v, a_shape=shape_ph, b_indices=i, b_values=v,
                      b_shape=shape_ph, thresh=0.0)
        raw.SparseReorder(input_indices=i, input_values=v, input_shape=shape_ph)
        raw.SparseReshape(input_indices=i, input_shape=shape_ph,
                          new_shape=tf.constant([24, 1, 1], tf.int64))
        raw.SparseSlice(indices=i, values=v, shape=shape_ph, start=tf.constant([0, 0], tf.int64),
                        size=tf.constant([2, 2], tf.int64))
        for dense_shape in (shape_c, shape_ph):
            raw.SparseFillEmptyRows(indices=i, values=v, dense_shape=dense_shape,
                                    default_value=0.0)
            raw.SparseTensorDenseMatMul(a_indices=i, a_values=v, a_shape=dense_shape,
                                        b=weights)
        raw.SparseTensorDenseMatMul(a_indices=i, a_values=v, a_shape=shape_c,
                                    b=tf.zeros((5, 4)), adjoint_a=True, adjoint_b=True)
        raw.SparseReduceSumSparse(input_indices=i, input_values=v, input_shape=shape_ph,
                                  reduction_axes=[0])
    raw.SparseSegmentSumWithNumSegments(data=weights, indices=[0, 1], segment_ids=[0, 0],
                                        num_segments=5)
    raw.SparseSegmentMean(data=weights, indices=[0, 1], segment_ids=[0, 0])
    raw.SparseToDense(sparse_indices=known_i, output_shape=shape_c, sparse_values=known_v,
                      default_value=0.0)
    raw.SparseToDense(sparse_indices=known_i, output_shape=shape_ph, sparse_values=known_v,
                      default_value=0.0)

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


def static_shape(t):
    return None if t.shape.rank is None else t.shape.as_list()


print(json.dumps({
    "static_shapes": {t.name: static_shape(t) for op in graph.get_operations()
                      for t in op.outputs if op.type.startswith("Sparse")},
    "graph_def": graph.as_graph_def().SerializeToString().hex(),
    "placeholders": {"ids": sparse_names(sp), "b": sparse_names(sp_b), "dense": dense.name},
    "feeds": feeds_json,
    "dense": {name: {"name": t.name, "values": np.asarray(results[name]).reshape(-1).tolist(),
                     "shape": list(np.asarray(results[name]).shape)}
              for name, t in outputs.items()},
    "sparse": {"reduced": {"names": sparse_names(reduced), **sparse_value(results["reduced"])},
               "added": {"names": sparse_names(added), **sparse_value(results["added"])}},
}))
