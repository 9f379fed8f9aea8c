"""TensorFlow's gradients of frozen models with respect to every weight, for
tests/it/training.rs.

Each case is a frozen GraphDef (its weights `Const` nodes) and, in `NAME.json`, its input
and output, a random input and output weighting `grad_ys`, the names of its float weights
and `tf.gradients(output, weights, grad_ys)` as TensorFlow computes them. The cases: Keras
models frozen the TF2 way (`convert_variables_to_constants_v2`), their weights as Keras
initialises them and their batch norms' made random: a
MobileNetV2 (alpha 0.35, 32x32) and a small stack of batch norms and depthwise
convolutions (a multiplier of 2, strides); and the public frozen models of
`../shared/tf-golden/models/` where that folder is beside the checkout. The directory is the
only argument; `index.json` lists the cases.
"""

import json
import pathlib
import sys

import numpy as np
import tensorflow as tf
from tensorflow.python.framework.convert_to_constants import (
    convert_variables_to_constants_v2,
)

v1 = tf.compat.v1
GOLDEN = pathlib.Path(__file__).resolve().parents[3] / "shared" / "tf-golden" / "models"


def spec(value):
    value = np.asarray(value)
    return {"dtype": str(value.dtype), "shape": list(value.shape),
            "data_hex": value.tobytes().hex()}


def randomised(model, rng):
    """`model` with its batch norms' statistics and parameters made random (Keras starts
    them at the identity), its other weights as Keras initialises them."""
    weights = []
    for w, value in zip(model.weights, model.get_weights()):
        name = w.path if hasattr(w, "path") else w.name
        if "moving_variance" in name:
            value = rng.uniform(0.5, 1.5, value.shape)
        elif "gamma" in name:
            value = rng.normal(1, 0.1, value.shape)
        elif "moving_mean" in name or "beta" in name:
            value = rng.normal(0, 0.1, value.shape)
        weights.append(np.asarray(value, np.float32))
    model.set_weights(weights)
    return model


def stack():
    """Batch norms (inference) and depthwise convolutions, as Keras writes them."""
    layers = tf.keras.layers
    x = tf.keras.Input((12, 12, 4))
    h = layers.Conv2D(8, 3, padding="same", use_bias=False)(x)
    h = layers.BatchNormalization()(h)
    h = layers.ReLU(6.0)(h)
    h = layers.DepthwiseConv2D(3, strides=2, depth_multiplier=2, padding="same")(h)
    h = layers.BatchNormalization()(h)
    h = layers.Activation("relu")(h)
    h = layers.DepthwiseConv2D(3, padding="valid", use_bias=False)(h)
    h = layers.GlobalAveragePooling2D()(h)
    y = layers.Dense(5, activation="softmax")(h)
    return tf.keras.Model(x, y)


def keras_cases(rng):
    """(name, frozen GraphDef, input name, output name, input shape) of the Keras models."""
    models = [
        ("keras_mobilenet_v2", lambda: tf.keras.applications.MobileNetV2(
            weights=None, input_shape=(32, 32, 3), alpha=0.35, classes=10), [2, 32, 32, 3]),
        ("keras_depthwise_stack", stack, [3, 12, 12, 4]),
    ]
    for name, make, shape in models:
        model = randomised(make(), rng)
        function = tf.function(lambda x, model=model: model(x, training=False))
        concrete = function.get_concrete_function(tf.TensorSpec(shape, tf.float32))
        frozen = convert_variables_to_constants_v2(concrete)
        yield (name, frozen.graph.as_graph_def(), frozen.inputs[0].name,
               frozen.outputs[0].name, shape)


def golden_cases():
    """The same of the public frozen models, where they are beside the checkout."""
    if not (GOLDEN / "index.json").exists():
        return
    for model in json.loads((GOLDEN / "index.json").read_text())["models"]:
        graph_def = v1.GraphDef()
        graph_def.ParseFromString((GOLDEN / f"{model['name']}.pb").read_bytes())
        (feed, info), = model["feeds"].items()
        yield (f"golden_{model['name']}", graph_def, feed, model["fetches"][-1],
               info["shape"])


# The activations whose gradient jumps, and where: at those points the gradient of any two
# float32 implementations may fall on either side.
KINKS = {"Relu": (0.0,), "Relu6": (0.0, 6.0)}
CANDIDATES = 8


def farthest_from_kinks(session, x, kinked, shape, rng):
    """Of a few random inputs, the one whose activations' inputs lie farthest from a point
    where their gradient jumps (ReLU's 0, ReLU6's 0 and 6), and that distance: as finite
    differences keep off kinks, so the gradients compared are those of the same pieces."""
    best = None
    for _ in range(CANDIDATES):
        image = rng.normal(0, 1, shape).astype(np.float32)
        values = session.run([t for t, _ in kinked], {x: image})
        margin = min((np.abs(v - k).min() for v, (_, kinks) in zip(values, kinked)
                      for k in kinks), default=np.inf)
        if best is None or margin > best[1]:
            best = (image, float(margin))
    return best


def case(out, name, graph_def, input_name, output_name, shape, rng):
    graph = tf.Graph()
    with graph.as_default():
        tf.import_graph_def(graph_def, name="")
        x, y = graph.get_tensor_by_name(input_name), graph.get_tensor_by_name(output_name)
        weights = [op.outputs[0] for op in graph.get_operations()
                   if op.type == "Const" and op.outputs[0].dtype == tf.float32
                   and op.outputs[0].shape.num_elements() not in (None, 0, 1)]
        grad_ys = v1.placeholder(tf.float32, y.shape, name="grad_ys")
        grads = tf.gradients(y, weights, grad_ys)
        kept = [(w, g) for w, g in zip(weights, grads) if g is not None]
        kinked = [(op.inputs[0], KINKS[op.type]) for op in graph.get_operations()
                  if op.type in KINKS]
        with v1.Session(graph=graph) as session:
            image, margin = farthest_from_kinks(session, x, kinked, shape, rng)
            output = session.run(y, {x: image})
            feeds = {x: image, grad_ys: rng.normal(0, 1, output.shape).astype(np.float32)}
            values = session.run([g for _, g in kept], feeds)
    (out / f"{name}.pb").write_bytes(graph_def.SerializeToString())
    record = {
        "input": input_name, "output": output_name,
        "feeds": {"input": spec(feeds[x]), "grad_ys": spec(feeds[grad_ys])},
        "weights": [w.op.name for w, _ in kept],
        "kink_margin": margin,
        "expected": [spec(v) for v in values],
    }
    (out / f"{name}.json").write_text(json.dumps(record))
    return name


def main():
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    tf.keras.utils.set_random_seed(7)
    names = [case(out, *c, rng) for c in [*keras_cases(rng), *golden_cases()]]
    (out / "index.json").write_text(json.dumps(names))
    print(f"tf_frozen_gradients.py: {len(names)} cases in {out}")


if __name__ == "__main__":
    main()
