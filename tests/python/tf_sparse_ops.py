"""TensorFlow's answers for the sparse ops (tests/sparse_ops_tensorflow.rs): each case names
an op, its inputs (sparse tensors as indices, values, dense shape and dtype; dense tensors
as values, shape and dtype) and what TensorFlow gives: a dense tensor, a sparse tensor, or
its error message. Prints one JSON document."""

import json

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(32)


def plain(values):
    """Tensor elements as JSON values (strings decoded, NaN as the string "nan")."""
    flat = np.asarray(values).reshape(-1).tolist()
    out = []
    for v in flat:
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, float) and v != v:
            v = "nan"
        out.append(v)
    return out


def sparse_json(sp):
    return {"indices": sp.indices.numpy().reshape(-1).tolist(), "values": plain(sp.values.numpy()),
            "shape": sp.dense_shape.numpy().tolist(), "dtype": sp.values.dtype.name}


def dense_json(t):
    t = tf.convert_to_tensor(t)
    return {"values": plain(t.numpy()), "shape": list(t.shape), "dtype": t.dtype.name}


def sparse(indices, values, shape, dtype="float32"):
    indices = tf.constant(indices, dtype=tf.int64, shape=(len(indices), len(shape)))
    return tf.sparse.SparseTensor(indices, tf.constant(values, dtype=dtype), shape)


def random_sparse(shape, count, dtype="float32", unique=True):
    cells = int(np.prod(shape))
    flat = rng.choice(cells, size=count, replace=not unique)
    indices = np.stack(np.unravel_index(flat, shape), axis=1).tolist()
    values = rng.integers(-8, 9, size=count).astype(np.float64)
    if dtype.startswith("float"):
        values = values / 4
    return sparse(indices, values.tolist(), list(shape), dtype)


cases = []


def case(op, name, inputs, run):
    """Record `run()`'s result (or its error) for the inputs (JSON already)."""
    entry = {"op": op, "name": name, **inputs}
    try:
        result = run()
        if isinstance(result, tf.sparse.SparseTensor):
            entry["sparse_result"] = sparse_json(result)
        elif isinstance(result, tuple):
            entry["sparse_result"] = sparse_json(result[0])
            entry["extra"] = [plain(r.numpy()) for r in result[1:]]
        else:
            entry["dense_result"] = dense_json(result)
    except (tf.errors.InvalidArgumentError, ValueError) as e:
        entry["error"] = getattr(e, "message", str(e))
    cases.append(entry)


# to_dense with a default value, and unordered indices without validation.
sp = sparse([[0, 1], [2, 3]], [5, 7], [3, 4], "int32")
case("to_dense", "default", {"a": sparse_json(sp), "default": -1},
     lambda: tf.sparse.to_dense(sp, default_value=-1))
sp = sparse([[2, 0], [0, 3], [2, 0]], [1.0, 2.0, 3.0], [3, 4])
case("to_dense_unordered", "repeated_last_wins", {"a": sparse_json(sp), "default": 0},
     lambda: tf.raw_ops.SparseToDense(sparse_indices=sp.indices, output_shape=sp.dense_shape,
                                      sparse_values=sp.values, default_value=0.0,
                                      validate_indices=False))
for rank in range(1, 6):
    shape = [3, 4, 2, 3, 2][:rank]
    sp = random_sparse(shape, min(10, int(np.prod(shape))), "float64")
    case("to_dense", f"rank{rank}", {"a": sparse_json(tf.sparse.reorder(sp)), "default": 0},
         lambda sp=sp: tf.sparse.to_dense(tf.sparse.reorder(sp)))

# Sparse x dense matmul: every adjoint, unordered and repeated indices, dtypes, errors.
a = sparse([[2, 1], [0, 0], [0, 2], [2, 1], [1, 3]], [1.0, -2.0, 0.5, 3.0, 4.0], [3, 4])
for adjoint_a in (False, True):
    for adjoint_b in (False, True):
        m, k = (4, 3) if adjoint_a else (3, 4)
        b = tf.constant(rng.integers(-4, 5, size=(5, k) if adjoint_b else (k, 5)).astype(np.float32))
        case("matmul", f"adjoint_{adjoint_a}_{adjoint_b}",
             {"a": sparse_json(a), "b": dense_json(b), "adjoint_a": adjoint_a, "adjoint_b": adjoint_b},
             lambda a=a, b=b, x=adjoint_a, y=adjoint_b:
             tf.sparse.sparse_dense_matmul(a, b, adjoint_a=x, adjoint_b=y))
for dtype in ("float64", "int32", "float16"):
    ai = sparse([[0, 1], [1, 0], [1, 2]], [2, 3, -1], [2, 3], dtype)
    bi = tf.constant([[1, 2], [3, 4], [5, 6]], dtype=dtype)
    case("matmul", f"dtype_{dtype}", {"a": sparse_json(ai), "b": dense_json(bi),
                                      "adjoint_a": False, "adjoint_b": False},
         lambda ai=ai, bi=bi: tf.sparse.sparse_dense_matmul(ai, bi))
large = random_sparse([200, 300], 6000)
bl = tf.constant(rng.integers(-4, 5, size=(300, 17)).astype(np.float32))
case("matmul", "large", {"a": sparse_json(large), "b": dense_json(bl), "adjoint_a": False,
                         "adjoint_b": False},
     lambda: tf.sparse.sparse_dense_matmul(large, bl))
empty = sparse([], [], [3, 4])
case("matmul", "empty", {"a": sparse_json(empty), "b": dense_json(tf.ones([4, 2])),
                         "adjoint_a": False, "adjoint_b": False},
     lambda: tf.sparse.sparse_dense_matmul(empty, tf.ones([4, 2])))
case("matmul", "inner_mismatch", {"a": sparse_json(a), "b": dense_json(tf.ones([3, 2])),
                                  "adjoint_a": False, "adjoint_b": False},
     lambda: tf.sparse.sparse_dense_matmul(a, tf.ones([3, 2])))
bad = sparse([[0, 0], [0, 5]], [1.0, 2.0], [3, 4])
case("matmul", "k_out_of_bounds", {"a": sparse_json(bad), "b": dense_json(tf.ones([4, 2])),
                                   "adjoint_a": False, "adjoint_b": False},
     lambda: tf.sparse.sparse_dense_matmul(bad, tf.ones([4, 2])))
bad = sparse([[0, 0], [7, 1]], [1.0, 2.0], [3, 4])
case("matmul", "m_out_of_bounds", {"a": sparse_json(bad), "b": dense_json(tf.ones([4, 2])),
                                   "adjoint_a": False, "adjoint_b": False},
     lambda: tf.sparse.sparse_dense_matmul(bad, tf.ones([4, 2])))

# Reductions: dense and sparse outputs, keep_dims, repeated and negative axes, NaN.
r3 = sparse([[1, 2, 0], [0, 0, 1], [1, 2, 0], [0, 3, 1], [1, 0, 1]], [1.0, -2.0, 4.0, 0.5, -3.0], [2, 4, 2])
nan = sparse([[0, 0], [0, 1], [1, 0], [1, 1]], [float("nan"), 1.0, 1.0, float("nan")], [2, 2])
ints = sparse([[0, 1], [2, 0], [2, 2]], [5, -7, 3], [3, 3], "int32")
# Negative values and an empty row: TensorFlow gives an empty row 0, not the lowest value.
negative = sparse([[0, 0], [0, 1]], [-1.0, -4.0], [2, 2])
for label, sp in (("rank3", r3), ("nan", nan), ("ints", ints), ("empty", empty),
                  ("negative", negative)):
    for axes in ([0], [1], [-1], [0, 1], [1, 1]):
        for keep in (False, True):
            for reduce in ("sum", "max"):
                if label == "nan" and reduce == "sum" and axes != [0]:
                    continue
                for output in ("dense", "sparse"):
                    raw = {("sum", "dense"): tf.raw_ops.SparseReduceSum,
                           ("sum", "sparse"): tf.raw_ops.SparseReduceSumSparse,
                           ("max", "dense"): tf.raw_ops.SparseReduceMax,
                           ("max", "sparse"): tf.raw_ops.SparseReduceMaxSparse}[(reduce, output)]

                    def run(sp=sp, raw=raw, axes=axes, keep=keep, output=output):
                        result = raw(input_indices=sp.indices, input_values=sp.values,
                                     input_shape=sp.dense_shape, reduction_axes=axes,
                                     keep_dims=keep)
                        if output == "sparse":
                            return tf.sparse.SparseTensor(*result)
                        return result
                    case(f"reduce_{reduce}_{output}", f"{label}_{axes}_{keep}",
                         {"a": sparse_json(sp), "axes": axes, "keep_dims": keep}, run)
case("reduce_sum_dense", "bad_axis", {"a": sparse_json(ints), "axes": [5], "keep_dims": False},
     lambda: tf.raw_ops.SparseReduceSum(input_indices=ints.indices, input_values=ints.values,
                                        input_shape=ints.dense_shape, reduction_axes=[5]))

# Segment reductions.
data = tf.constant(rng.integers(-8, 9, size=(6, 3)).astype(np.float32) / 2)
segment_cases = [
    ("plain", [0, 2, 5, 1, 1], [0, 0, 1, 3, 3], None),
    ("num_segments", [0, 1], [0, 1], 4),
    ("empty", [], [], None),
    ("not_increasing", [0, 1], [1, 0], None),
    ("index_out_of_range", [0, 9], [0, 0], None),
    ("negative_id", [0, 1], [0, -1], None),
    ("too_many_ids", [0, 1], [0, 3], 2),
    ("size_mismatch", [0, 1, 1], [0, 1], None),
]
for combiner in ("sum", "mean", "sqrt_n"):
    for name, indices, ids, num in segment_cases:
        fn = {"sum": tf.sparse.segment_sum, "mean": tf.sparse.segment_mean,
              "sqrt_n": tf.sparse.segment_sqrt_n}[combiner]
        case(f"segment_{combiner}", name,
             {"data": dense_json(data), "indices": indices, "segment_ids": ids, "num_segments": num},
             lambda fn=fn, indices=indices, ids=ids, num=num:
             fn(data, tf.constant(indices, tf.int32), tf.constant(ids, tf.int32), num_segments=num))
case("segment_sum", "int64_data", {"data": dense_json(tf.constant([[1, 2], [3, 4]], tf.int64)),
                                   "indices": [1, 0, 1], "segment_ids": [0, 0, 2], "num_segments": None},
     lambda: tf.sparse.segment_sum(tf.constant([[1, 2], [3, 4]], tf.int64), [1, 0, 1], [0, 0, 2]))

# Embedding lookups.
params = tf.constant(rng.integers(-8, 9, size=(5, 4)).astype(np.float32) / 4)
ids = sparse([[0, 0], [0, 1], [2, 0], [2, 1], [2, 2], [3, 0]], [1, 4, 0, 0, 3, 2], [5, 3], "int64")
weights = sparse([[0, 0], [0, 1], [2, 0], [2, 1], [2, 2], [3, 0]], [2.0, 0.5, 1.0, -1.0, 3.0, 0.25], [5, 3])
for combiner in ("sum", "mean", "sqrtn"):
    for weighted in (False, True):
        case("embedding_lookup_sparse", f"{combiner}_{weighted}",
             {"params": dense_json(params), "a": sparse_json(ids),
              "weights": sparse_json(weights) if weighted else None, "combiner": combiner},
             lambda combiner=combiner, weighted=weighted:
             tf.nn.embedding_lookup_sparse(params, ids, weights if weighted else None,
                                           combiner=combiner))

# Addition.
b = sparse([[0, 0], [1, 1], [2, 1]], [-1.0, 5.0, -3.0], [3, 3])
a = sparse([[0, 0], [0, 2], [2, 1]], [1.0, -2.0, 3.0], [3, 3])
for thresh in (0.0, 0.5):
    case("add", f"thresh_{thresh}", {"a": sparse_json(a), "b": sparse_json(b), "thresh": thresh},
         lambda thresh=thresh: tf.sparse.add(a, b, threshold=thresh))
nan_b = sparse([[0, 0]], [float("nan")], [3, 3])
case("add", "nan_sum_dropped", {"a": sparse_json(a), "b": sparse_json(nan_b), "thresh": 0.0},
     lambda: tf.sparse.add(a, nan_b))
ai = sparse([[0, 1], [1, 0]], [3, 4], [2, 2], "int64")
bi = sparse([[0, 1], [1, 1]], [-3, 2], [2, 2], "int64")
case("add", "ints", {"a": sparse_json(ai), "b": sparse_json(bi), "thresh": 0.0},
     lambda: tf.sparse.add(ai, bi))
case("add", "shape_mismatch", {"a": sparse_json(a), "b": sparse_json(sparse([[0, 0]], [1.0], [3, 4])),
                               "thresh": 0.0},
     lambda: tf.sparse.add(a, sparse([[0, 0]], [1.0], [3, 4])))
rep = sparse([[0, 0], [1, 2], [0, 0]], [1.0, 2.0, 4.0], [3, 3])
dense = tf.constant(rng.integers(-4, 5, size=(3, 3)).astype(np.float32))
case("add_dense", "repeated", {"a": sparse_json(rep), "b": dense_json(dense)},
     lambda: tf.sparse.add(rep, dense))
case("add_dense", "shape_mismatch", {"a": sparse_json(rep), "b": dense_json(tf.ones([3, 4]))},
     lambda: tf.sparse.add(rep, tf.ones([3, 4])))

# Structure: reshape, slice, retain, fill_empty_rows.
for shape in ([9], [1, 9], [-1, 3], [3, 1, -1], [4, 2], [-1, 2], [-1, -1], [-2, 9]):
    case("reshape", str(shape), {"a": sparse_json(a), "new_shape": shape},
         lambda shape=shape: tf.sparse.reshape(a, shape))
for start, size in (([1, 1], [5, 5]), ([0, 0], [2, 2]), ([4, 1], [5, 5]), ([0, 2], [3, 1])):
    case("slice", f"{start}_{size}", {"a": sparse_json(a), "start": start, "size": size},
         lambda start=start, size=size: tf.sparse.slice(a, start, size))
case("retain", "some", {"a": sparse_json(a), "keep": [True, False, True]},
     lambda: tf.sparse.retain(a, [True, False, True]))


def fill_empty_rows(sp, default):
    result = tf.raw_ops.SparseFillEmptyRows(indices=sp.indices, values=sp.values,
                                            dense_shape=sp.dense_shape, default_value=default)
    filled = tf.sparse.SparseTensor(result.output_indices, result.output_values, sp.dense_shape)
    return filled, result.empty_row_indicator, result.reverse_index_map


unordered = sparse([[2, 1], [0, 2], [0, 0], [5, 1]], [1.0, -2.0, 3.0, 4.0], [7, 3])
case("fill_empty_rows", "unordered", {"a": sparse_json(unordered), "default": 9.0},
     lambda: fill_empty_rows(unordered, 9.0))
strings = sparse([[1, 0], [3, 1]], ["a", "bc"], [4, 2], "string")
case("fill_empty_rows", "strings", {"a": sparse_json(strings), "default": ""},
     lambda: fill_empty_rows(strings, ""))

# Serialization: TensorFlow's SerializeSparse bytes of each component.
serialized = []
for name, sp in (("floats", r3), ("ints", ints), ("strings", strings), ("empty", empty),
                 ("bools", sparse([[0], [3]], [True, False], [5], "bool")),
                 ("halves", sparse([[1, 1]], [0.5], [2, 2], "float16"))):
    parts = tf.raw_ops.SerializeSparse(sparse_indices=sp.indices, sparse_values=sp.values,
                                       sparse_shape=sp.dense_shape).numpy()
    serialized.append({"name": name, "a": sparse_json(sp), "hex": [p.hex() for p in parts]})
try:
    tf.raw_ops.DeserializeSparse(serialized_sparse=tf.constant(
        [bytes.fromhex(h) for h in serialized[0]["hex"]]), dtype=tf.int32)
except tf.errors.InvalidArgumentError as e:
    deserialize_error = e.message

print(json.dumps({"cases": cases, "serialized": serialized,
                  "deserialize_error": deserialize_error}))
