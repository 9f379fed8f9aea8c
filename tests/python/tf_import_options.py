"""`tf.graph_util.import_graph_def` with a name, an input map and return elements, for
tests/graph_tensorflow.rs: the directory given as the only argument holds `base.pb` (the
graph to import into), `model.pb` (the graph imported twice) and `polytensor.json` (what
polytensor's `Graph::import_graph_def` made of the same steps). TensorFlow repeats the
steps and the node names, the returned names, the colocation of the second copy and the
value of the first copy's output must be polytensor's."""

import json
import pathlib
import sys

import numpy as np
import tensorflow as tf


def read(path):
    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(path.read_bytes())
    return graph_def


def main():
    folder = pathlib.Path(sys.argv[1])
    ours = json.loads((folder / "polytensor.json").read_text())
    model = read(folder / "model.pb")
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(read(folder / "base.pb"), name="")
        feed = graph.get_tensor_by_name("feed:0")
        first = tf.graph_util.import_graph_def(
            model, input_map={"x:0": feed}, return_elements=["y:0", "init"], name="import")
        second = tf.graph_util.import_graph_def(model, return_elements=["y:0"], name="import")
    names = [op.name for op in graph.get_operations()]
    assert sorted(names) == sorted(ours["names"]), f"{sorted(names)} != {sorted(ours['names'])}"
    returned = [first[0].name, first[1].name, second[0].name]
    assert returned == ours["returned"], f"{returned} != {ours['returned']}"
    colocation = [c.decode() for c in graph.get_operation_by_name("import_1/y").get_attr("_class")]
    assert colocation == ours["colocation"], f"{colocation} != {ours['colocation']}"
    with tf.compat.v1.Session(graph=graph) as session:
        value = session.run(first[0])
    np.testing.assert_allclose(value, np.array(ours["value"], dtype=np.float32), rtol=1e-6)
    print(f"TensorFlow {tf.__version__} imported as polytensor did: {', '.join(returned)}")


main()
