"""Restore a checkpoint polytensor wrote with TensorFlow's own restore op (`RestoreV2`, what
`tf.compat.v1.train.Saver.restore` runs), for tests/it/training.rs. Arguments: the
checkpoint prefix, then the variables' names. Prints the restored values as JSON
`[{"dtype", "shape", "data_hex"}, ...]`, in the order named."""

import json
import sys

import tensorflow as tf

prefix, names = sys.argv[1], sys.argv[2:]
dtypes = [tf.train.load_checkpoint(prefix).get_variable_to_dtype_map()[n] for n in names]
values = tf.raw_ops.RestoreV2(prefix=prefix, tensor_names=names,
                              shape_and_slices=[""] * len(names), dtypes=dtypes)
print(json.dumps([{"dtype": v.dtype.name, "shape": v.shape.as_list(),
                   "data_hex": v.numpy().tobytes().hex()} for v in values]))
