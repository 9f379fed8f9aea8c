"""Read a `RunMetadata` proto polytensor wrote (a traced run's step stats) with
TensorFlow's own protos and `timeline.Timeline`, and print what TensorFlow sees as JSON:
the devices, the node count, the node names with their op labels and durations, and the
number of Chrome trace events `Timeline` makes of it."""

import json
import sys

from tensorflow.core.protobuf import config_pb2
from tensorflow.python.client import timeline


def main():
    metadata = config_pb2.RunMetadata()
    with open(sys.argv[1], "rb") as f:
        metadata.ParseFromString(f.read())
    stats = metadata.step_stats
    nodes = [n for d in stats.dev_stats for n in d.node_stats]
    trace = json.loads(timeline.Timeline(stats).generate_chrome_trace_format())
    print(
        json.dumps(
            {
                "devices": [d.device for d in stats.dev_stats],
                "nodes": len(nodes),
                "names": [n.node_name for n in nodes],
                "micros": sum(n.op_end_rel_micros for n in nodes),
                "output_bytes": sum(
                    o.tensor_description.allocation_description.requested_bytes
                    for n in nodes
                    for o in n.output
                ),
                "complete_events": sum(1 for e in trace["traceEvents"] if e.get("ph") == "X"),
            }
        )
    )


if __name__ == "__main__":
    main()
