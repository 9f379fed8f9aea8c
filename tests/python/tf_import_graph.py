"""Run GraphDefs that polytensor built in TensorFlow itself.

For each case in the directory given as the only argument (`NAME.pb`, `NAME.json`, written
by `tests/graph_tensorflow.rs`): import the GraphDef into a fresh graph with
`tf.graph_util.import_graph_def(name="")`, open a `tf.compat.v1.Session`, run the targets,
then the fetches with the feeds, and compare every fetched value with what polytensor's
own Session returned (exact for integers and bools, a relative 1e-6 for floats, beside the
case's `atol`), and each
fetch's static dtype and shape: `str(tensor)` in TensorFlow's graph must be what polytensor
printed for it.
"""

import json
import os
import pathlib
import sys

# TensorFlow runs its oneDNN kernels by default only on some CPUs (AVX-512 ones); on others
# (an AVX2-only Zen 3) its own CPU kernels refuse dilated `Conv2DBackpropInput` ("Current
# CPU implementations do not yet support dilation rates larger than 1"), a graph oneDNN
# runs. Turned on here so that every case runs in TensorFlow on every CPU.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

import numpy as np
import tensorflow as tf


def array(spec):
    dtype = tf.as_dtype(spec["dtype"]).as_numpy_dtype
    data = np.frombuffer(bytes.fromhex(spec["data_hex"]), dtype=dtype)
    return data.reshape(spec["shape"])


def run_case(path):
    case = json.loads(path.read_text())
    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(path.with_suffix(".pb").read_bytes())
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    for name, printed in case["printed"].items():
        tensorflow = str(graph.get_tensor_by_name(name))
        assert tensorflow == printed, f"{path.stem}: TensorFlow prints {tensorflow}, polytensor {printed}"
    # Soft placement: graphs may ask for GPUs (polytensor's placement cases), which
    # tensorflow-cpu runs on its CPU.
    config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
    with tf.compat.v1.Session(graph=graph, config=config) as session:
        for targets in case["target_runs"]:
            session.run(targets)
        feeds = {name: array(spec) for name, spec in case["feeds"].items()}
        values = session.run(case["fetches"], feed_dict=feeds)
    for name, value in zip(case["fetches"], values):
        want = array(case["polytensor"][name])
        got = np.asarray(value)
        assert got.dtype == want.dtype, f"{path.stem} {name}: dtype {got.dtype} != {want.dtype}"
        assert got.shape == want.shape, f"{path.stem} {name}: shape {got.shape} != {want.shape}"
        if np.issubdtype(want.dtype, np.floating) or np.issubdtype(want.dtype, np.complexfloating):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=case.get("atol", 0.0), err_msg=f"{path.stem} {name}")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{path.stem} {name}")
    print(f"ok {path.stem}: {', '.join(case['fetches'])}")


def main():
    cases = sorted(pathlib.Path(sys.argv[1]).glob("*.json"))
    assert cases, "no cases"
    for path in cases:
        run_case(path)
    print(f"TensorFlow {tf.__version__} ran {len(cases)} polytensor graphs")


if __name__ == "__main__":
    main()
