"""Run training graphs polytensor wrote (`Graph::minimize`) in TensorFlow, for
tests/it/training.rs. The argument is a JSON file listing runs: each names the GraphDef,
the ops that initialise its variables, the step op, the batches fed to it in turn, the number
of steps, the tensors to fetch at the end and, optionally, what to feed them. Prints, as JSON, each run's fetched values
`[{"dtype", "shape", "data_hex"}, ...]`."""

import json
import sys

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1


def array(spec):
    return np.frombuffer(bytes.fromhex(spec["data_hex"]), dtype=spec["dtype"]).reshape(
        spec["shape"])


def run(plan):
    graph_def = tf.compat.v1.GraphDef()
    with open(plan["graph"], "rb") as f:
        graph_def.ParseFromString(f.read())
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    with v1.Session(graph=graph) as session:
        session.run(plan["init"])
        batches = [{k: array(v) for k, v in b.items()} for b in plan["batches"]]
        for step in range(plan["steps"]):
            session.run(plan["step"], batches[step % len(batches)])
        feeds = {k: array(v) for k, v in plan.get("feeds", {}).items()}
        values = session.run(plan["fetches"], feeds)
    return [{"dtype": str(v.dtype), "shape": list(v.shape), "data_hex": v.tobytes().hex()}
            for v in values]


with open(sys.argv[1]) as f:
    plans = json.load(f)
print(json.dumps([run(p) for p in plans]))
