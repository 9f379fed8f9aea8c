"""Write a GraphDef that uses the fields polytensor keeps without reading them.

TensorFlow builds a small graph (a placeholder, an op on it, a function in the library that
no node calls) and sets what real GraphDefs carry: `experimental_debug_info` and
`experimental_type` on a node, `VersionDef.min_consumer` and `bad_consumers`, and the
deprecated `GraphDef.version`. The message is written, with TensorFlow's deterministic
serialization, to the path given as the only argument; `tests/graph_tensorflow.rs` reads
it into a polytensor `Graph`, writes it back and expects the same bytes.
"""

import sys

import tensorflow as tf
from tensorflow.core.framework import full_type_pb2


def main():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        tf.math.multiply(x, 2.0, name="y")

        @tf.function
        def double(v):
            return v * 2.0

        double.get_concrete_function(tf.TensorSpec([None, 3], tf.float32)).add_to_graph(graph)
    graph_def = graph.as_graph_def()
    assert graph_def.library.function, "the function is in the library"
    y = next(node for node in graph_def.node if node.name == "y")
    y.experimental_debug_info.original_node_names.append("model/dense/y")
    y.experimental_debug_info.original_func_names.append("double")
    y.experimental_type.type_id = full_type_pb2.TFT_PRODUCT
    y.experimental_type.args.add().type_id = full_type_pb2.TFT_TENSOR
    graph_def.versions.min_consumer = 12
    graph_def.versions.bad_consumers.extend([3, 7])
    graph_def.version = 21
    with open(sys.argv[1], "wb") as out:
        out.write(graph_def.SerializeToString(deterministic=True))
    print(f"wrote {len(graph_def.node)} nodes, {len(graph_def.library.function)} functions")


if __name__ == "__main__":
    main()
