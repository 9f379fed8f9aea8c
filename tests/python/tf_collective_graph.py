"""Write, with TensorFlow, a GraphDef of its collective ops, and what TensorFlow computes
with it in a group of one.

usage: tf_collective_graph.py OUT.pb

The graph feeds `x` (float32 [2, 3]) and `group_size` (int32) to CollectiveReduceV2 (sum,
mean, max), CollectiveGatherV2, CollectiveBcastSendV2 (of 2x) and CollectiveBcastRecvV2
(of [2, 3]); the op names are `sum`, `mean`, `max`, `gathered`, `sent` and `received`.
Prints a JSON object: each output's values that TensorFlow's own session gives with
group_size 1 for x = [[1, -2, 3], [4, 5, -6]] (`received` has no sender in a group of
one, so it is left out).
"""

import json
import sys

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1


def build():
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [2, 3], name="x")
        group_size = tf1.placeholder(tf.int32, [], name="group_size")
        key = tf.constant(1, name="group_key")

        def instance(i):
            return tf.constant(i, name=f"instance_{i}")

        def reduce(name, merge, final, i):
            return tf.raw_ops.CollectiveReduceV2(
                input=x, group_size=group_size, group_key=key, instance_key=instance(i),
                ordering_token=[], merge_op=merge, final_op=final, name=name)

        reduce("sum", "Add", "Id", 1)
        reduce("mean", "Add", "Div", 2)
        reduce("max", "Max", "Id", 3)
        tf.raw_ops.CollectiveGatherV2(
            input=x, group_size=group_size, group_key=key, instance_key=instance(4),
            ordering_token=[], name="gathered")
        tf.raw_ops.CollectiveBcastSendV2(
            input=x * 2.0, group_size=group_size, group_key=key, instance_key=instance(5),
            name="sent")
        tf.raw_ops.CollectiveBcastRecvV2(
            group_size=group_size, group_key=key, instance_key=instance(5),
            shape=tf.constant([2, 3], name="received_shape"), T=tf.float32, name="received")
    return graph


def main():
    graph = build()
    with open(sys.argv[1], "wb") as f:
        f.write(graph.as_graph_def().SerializeToString())
    x = np.array([[1, -2, 3], [4, 5, -6]], np.float32)
    fetches = ["sum", "mean", "max", "gathered", "sent"]
    with tf1.Session(graph=graph) as session:
        values = session.run([f"{name}:0" for name in fetches],
                             {"x:0": x, "group_size:0": 1})
    print(json.dumps({name: v.reshape(-1).tolist() for name, v in zip(fetches, values)}))


if __name__ == "__main__":
    main()
