"""The accuracy of mixed precision on the zoo of issue 50 (docs/PERFORMANCE.md): for each
model of `target/zoo-bench` (made by the models bench), polytensor's `bf16_weights`
(`polytensor run --bf16`, the release build in target/release) and TensorFlow's oneDNN bf16
auto mixed precision, each against its own f32, on one seeded batch of 4: the largest
difference relative to the largest f32 value, and how often the top-1 class agrees.

    cargo build --release -p polytensor-cli
    target/tf-venv/bin/python benches/python/bf16_accuracy.py
"""
import json
import os
import subprocess
import tempfile
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, tensorflow as tf
from tensorflow.core.protobuf import rewriter_config_pb2
names = ["resnet50","densenet121","inception_v3","xception","efficientnet_b0","mobilenet_v3_small","vgg16","transformer_encoder","text_cnn"]
tmp = tempfile.mkdtemp()
for name in names:
    path = f"target/zoo-bench/zoo_{name}.pb"
    side = json.load(open(path[:-3] + ".json"))
    spec = side["input"]
    rng = np.random.default_rng(1)
    shape = [4] + spec["shape"]
    x = rng.integers(0, spec["vocabulary"], shape).astype(spec["dtype"]) if spec["vocabulary"] else rng.standard_normal(shape).astype(spec["dtype"])
    feed_file = os.path.join(tmp, "input.npy")
    np.save(feed_file, x)
    out = {}
    for mode in ["f32", "bf16"]:
        args = ["target/release/polytensor", "run", path, "--input", f"{spec['name'].split(':')[0]}={feed_file}", "--save", os.path.join(tmp, f"{mode}.npz")]
        if mode == "bf16": args.append("--bf16")
        subprocess.run(args, check=True, capture_output=True)
        d = np.load(os.path.join(tmp, f"{mode}.npz")); out[mode] = d[list(d.keys())[0]]
    gd = tf.compat.v1.GraphDef(); gd.ParseFromString(open(path, "rb").read())
    g = tf.Graph()
    with g.as_default(): tf.graph_util.import_graph_def(gd, name="")
    feed = {g.get_tensor_by_name(spec["name"]): x}
    fetch = g.get_tensor_by_name(side["fetches"][0])
    for amp in [False, True]:
        cfg = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=2, inter_op_parallelism_threads=1)
        if amp: cfg.graph_options.rewrite_options.auto_mixed_precision_onednn_bfloat16 = rewriter_config_pb2.RewriterConfig.ON
        out["tf_amp" if amp else "tf"] = tf.compat.v1.Session(graph=g, config=cfg).run(fetch, feed)
    def rel(a, b): return np.abs(a - b).max() / np.abs(b).max()
    def agree(a, b): return (a.reshape(a.shape[0], -1).argmax(1) == b.reshape(b.shape[0], -1).argmax(1)).mean()
    print(f"{name}: polytensor f32 vs TF {rel(out['f32'], out['tf']):.1e}; bf16 vs f32 {rel(out['bf16'], out['f32']):.1e} (top-1 agree {agree(out['bf16'], out['f32']):.2f}); TF AMP vs TF f32 {rel(out['tf_amp'], out['tf']):.1e} (top-1 agree {agree(out['tf_amp'], out['tf']):.2f})", flush=True)
