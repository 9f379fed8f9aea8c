"""Keras models as users freeze them, for tests/models.rs.

Usage: keras_models.py OUTDIR [NAME ...]  (no NAME: every model of MODELS; the zoo of the
models bench, ZOO, only by name)

Builds seeded Keras 3 models (random weights, `weights=None`, batch-norm statistics
randomised so that inference is not the identity), freezes each the TensorFlow 2 way,
`convert_variables_to_constants_v2(tf.function(model).get_concrete_function(spec))`, and
writes, per model, `NAME.pb` (the frozen GraphDef) and `NAME.json` (feeds, fetches,
TensorFlow's outputs and the tolerance), plus `index.json` naming them all: the layout of
`shared/tf-golden/models`. Every model is built from its own seed, so a model's files do not
depend on which others are made.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402
from tensorflow.python.framework.convert_to_constants import (  # noqa: E402
    convert_variables_to_constants_v2,
)

L = keras.layers
TOLERANCE = {
    "rtol": 1e-4,
    "atol": 1e-5,
    "rule": "max|got-want| <= rtol*max|want| + atol, per fetched float32 tensor",
}


def randomise_statistics(model, rng):
    """Batch norms with moving statistics and affine parameters far from 0 and 1."""
    for layer in model._flatten_layers(include_self=False):
        if isinstance(layer, L.BatchNormalization):
            for var in layer.weights:
                shape = var.shape
                if "moving_variance" in var.path:
                    var.assign(rng.uniform(0.5, 1.5, shape).astype(np.float32))
                elif "moving_mean" in var.path:
                    var.assign(rng.normal(0.0, 0.2, shape).astype(np.float32))
                elif "gamma" in var.path:
                    var.assign(rng.uniform(0.5, 1.5, shape).astype(np.float32))
                else:
                    var.assign(rng.normal(0.0, 0.2, shape).astype(np.float32))


def text_model(cell, bidirectional=False):
    def build():
        inp = keras.Input((12,), dtype="int32")
        x = L.Embedding(50, 16)(inp)
        rnn = cell(24, return_sequences=bidirectional)
        x = L.Bidirectional(rnn)(x) if bidirectional else rnn(x)
        if bidirectional:
            x = L.GlobalAveragePooling1D()(x)
        return keras.Model(inp, L.Dense(3, activation="softmax")(x)), ("int32", (12,), 50)

    return build


def attention_block():
    inp = keras.Input((10, 32))
    x = L.MultiHeadAttention(num_heads=4, key_dim=8)(inp, inp)
    x = L.LayerNormalization()(inp + x)
    y = L.Dense(64, activation="gelu")(x)
    y = L.Dense(32)(y)
    return keras.Model(inp, L.LayerNormalization()(x + y)), ("float32", (10, 32), None)


def unet():
    inp = keras.Input((32, 32, 3))
    c1 = L.Conv2D(8, 3, padding="same", activation="relu")(inp)
    p1 = L.MaxPooling2D()(c1)
    c2 = L.Conv2D(16, 3, padding="same", activation="relu")(p1)
    p2 = L.MaxPooling2D()(c2)
    b = L.Conv2D(32, 3, padding="same", activation="relu")(p2)
    u2 = L.Conv2DTranspose(16, 3, strides=2, padding="same")(b)
    c3 = L.Conv2D(16, 3, padding="same", activation="relu")(L.Concatenate()([u2, c2]))
    u1 = L.UpSampling2D(interpolation="bilinear")(c3)
    c4 = L.Conv2D(8, 3, padding="same", activation="relu")(L.Concatenate()([u1, c1]))
    u0 = L.Conv2DTranspose(4, 2, strides=2, padding="valid")(c4)
    u0 = L.UpSampling2D(interpolation="nearest")(L.MaxPooling2D(4)(u0))
    return keras.Model(inp, [L.Conv2D(2, 1)(c4), u0]), ("float32", (32, 32, 3), None)


def causal_conv1d():
    inp = keras.Input((40, 6))
    x = L.Conv1D(12, 3, dilation_rate=2, padding="causal", activation="relu")(inp)
    x = L.Conv1D(12, 3, dilation_rate=4, padding="causal", activation="relu")(x)
    x = L.SeparableConv1D(16, 5, padding="same", activation="relu")(x)
    # Without a bias, then a batch norm and its activation (the session fuses all three).
    x = L.ReLU()(L.BatchNormalization()(L.Conv1D(16, 3, padding="same", use_bias=False)(x)))
    x = L.Conv1D(8, 3, dilation_rate=3, padding="same")(x)
    return keras.Model(inp, L.GlobalMaxPooling1D()(x)), ("float32", (40, 6), None)


def convnext_block():
    inp = keras.Input((16, 16, 32))
    x = L.DepthwiseConv2D(7, padding="same")(inp)
    x = L.LayerNormalization(epsilon=1e-6)(x)
    x = L.Dense(128, activation="gelu")(x)
    x = L.Dense(32)(x)
    x = inp + x
    x = L.Conv2D(64, 3, groups=4, padding="same")(x)
    return keras.Model(inp, x), ("float32", (16, 16, 32), None)


def dense_block():
    """DenseNet's pattern: pre-activation batch norms (no convolution before them), growing
    concatenations along the channels, and a final batch norm with no activation."""
    inp = keras.Input((12, 12, 20))
    x = inp
    for _ in range(3):
        y = L.ReLU()(L.BatchNormalization()(x))
        y = L.Conv2D(24, 1, use_bias=False)(y)
        y = L.ReLU(max_value=6.0)(L.BatchNormalization()(y))
        y = L.Conv2D(8, 3, padding="same", use_bias=False)(y)
        x = L.Concatenate()([x, y])
    x = L.BatchNormalization()(x)
    return keras.Model(inp, L.GlobalAveragePooling2D()(x)), ("float32", (12, 12, 20), None)


def vgg_block():
    """VGG's 3x3 convolutions of 64 channels and filters, on enough pixels for the CPU's
    Winograd path, with a bias + ReLU, a batch norm, and a pool between them."""
    inp = keras.Input((40, 44, 3))
    x = L.Conv2D(64, 3, padding="same", activation="relu")(inp)
    x = L.Conv2D(64, 3, padding="same", activation="relu")(x)
    x = L.BatchNormalization()(L.Conv2D(64, 3, padding="valid", use_bias=False)(x))
    x = L.MaxPooling2D()(L.ReLU()(x))
    x = L.Conv2D(64, 3, padding="same")(x)
    return keras.Model(inp, L.GlobalAveragePooling2D()(x)), ("float32", (40, 44, 3), None)


def application(constructor, size=64):
    def build():
        model = constructor(weights=None, input_shape=(size, size, 3), classes=10)
        return model, ("float32", (size, size, 3), None)

    return build


MODELS = {
    "keras_lstm": (text_model(L.LSTM), False),
    "keras_lstm_lowered": (text_model(L.LSTM), True),
    "keras_gru": (text_model(L.GRU), False),
    "keras_gru_lowered": (text_model(L.GRU), True),
    "keras_simple_rnn": (text_model(L.SimpleRNN), False),
    "keras_bidirectional": (text_model(L.LSTM, bidirectional=True), False),
    "keras_attention": (attention_block, False),
    "keras_unet": (unet, False),
    "keras_causal_conv1d": (causal_conv1d, False),
    "keras_convnext_block": (convnext_block, False),
    "keras_dense_block": (dense_block, False),
    "keras_vgg_block": (vgg_block, False),
    "keras_convnext_tiny": (
        application(lambda **kw: keras.applications.ConvNeXtTiny(include_preprocessing=False, **kw)),
        False,
    ),
    "keras_resnet50": (application(keras.applications.ResNet50), False),
    "keras_efficientnet_b0": (application(keras.applications.EfficientNetB0), False),
    "keras_mobilenet_v3_small": (
        application(lambda **kw: keras.applications.MobileNetV3Small(include_preprocessing=False, **kw)),
        False,
    ),
}

def transformer_encoder(seq=64, dim=128, heads=4):
    """A transformer encoder block as BERT-style models stack them."""

    def build():
        inp = keras.Input((seq, dim))
        a = L.MultiHeadAttention(num_heads=heads, key_dim=dim // heads)(inp, inp)
        x = L.LayerNormalization(epsilon=1e-6)(inp + a)
        f = L.Dense(4 * dim, activation="gelu")(x)
        f = L.Dense(dim)(f)
        return keras.Model(inp, L.LayerNormalization(epsilon=1e-6)(x + f)), ("float32", (seq, dim), None)

    return build


def text_cnn(seq=128, vocabulary=8000):
    """Kim's sentence CNN: an embedding, three convolution widths, max over time."""

    def build():
        inp = keras.Input((seq,), dtype="int32")
        x = L.Embedding(vocabulary, 64)(inp)
        towers = [L.GlobalMaxPooling1D()(L.Conv1D(64, k, activation="relu")(x)) for k in (3, 4, 5)]
        x = L.Dense(64, activation="relu")(L.Concatenate()(towers))
        return keras.Model(inp, L.Dense(2, activation="softmax")(x)), ("int32", (seq,), vocabulary)

    return build


# The zoo of the models bench (issue 50): one network of each family people run, made only
# when named (the tests cover their layers through MODELS).
ZOO = {
    "zoo_resnet50": (application(keras.applications.ResNet50), False),
    "zoo_densenet121": (application(keras.applications.DenseNet121), False),
    "zoo_inception_v3": (application(keras.applications.InceptionV3, size=96), False),
    "zoo_xception": (application(keras.applications.Xception, size=96), False),
    "zoo_efficientnet_b0": (application(keras.applications.EfficientNetB0), False),
    "zoo_mobilenet_v3_small": (
        application(lambda **kw: keras.applications.MobileNetV3Small(include_preprocessing=False, **kw)),
        False,
    ),
    "zoo_vgg16": (application(keras.applications.VGG16), False),
    "zoo_transformer_encoder": (transformer_encoder(), False),
    "zoo_text_cnn": (text_cnn(), False),
}

BATCH = 2


def spec(array):
    return {
        "dtype": str(array.dtype),
        "shape": list(array.shape),
        "data_hex": np.ascontiguousarray(array).tobytes().hex(),
    }


def make(name, out):
    build, lower = {**MODELS, **ZOO}[name]
    seed = sum(name.encode()) * 7919 % 2**31
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    model, (dtype, shape, vocabulary) = build()
    randomise_statistics(model, rng)
    if vocabulary:
        feed = rng.integers(0, vocabulary, (BATCH, *shape)).astype(dtype)
    else:
        feed = rng.normal(0.0, 1.0, (BATCH, *shape)).astype(dtype)
    signature = tf.TensorSpec((None, *shape), dtype, name="input")
    function = tf.function(lambda x: model(x, training=False))
    concrete = function.get_concrete_function(signature)
    frozen = convert_variables_to_constants_v2(concrete, lower_control_flow=lower)
    graph_def = frozen.graph.as_graph_def()
    inputs = [t.name for t in frozen.inputs]
    fetches = [t.name for t in frozen.outputs]
    results = frozen(tf.constant(feed))
    results = results if isinstance(results, (list, tuple)) else [results]
    with open(os.path.join(out, f"{name}.pb"), "wb") as f:
        f.write(graph_def.SerializeToString())
    ops = sorted({n.op for n in graph_def.node} | {n.op for f in graph_def.library.function for n in f.node_def})
    sidecar = {
        "name": name,
        "what": f"Keras {keras.__version__}, frozen by convert_variables_to_constants_v2 "
        f"(lower_control_flow={lower}), batch {BATCH}",
        "feeds": {inputs[0]: spec(feed)},
        # How to make a feed of another batch: integers below `vocabulary`, else normal.
        "input": {"name": inputs[0], "dtype": dtype, "shape": list(shape), "vocabulary": vocabulary},
        "fetches": fetches,
        "expected": {f: spec(np.asarray(r)) for f, r in zip(fetches, results)},
        "tolerance": TOLERANCE,
        "ops": ops,
        "bytes": len(graph_def.SerializeToString()),
    }
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        json.dump(sidecar, f)
    return {"name": name, "ops": ops}


def main():
    out = sys.argv[1]
    names = sys.argv[2:] or list(MODELS)
    os.makedirs(out, exist_ok=True)
    made = [make(name, out) for name in names]
    index = {
        "made_by": f"TensorFlow {tf.__version__}, Keras {keras.__version__}, tests/python/keras_models.py",
        "tolerance": TOLERANCE,
        "count": len(made),
        "models": made,
    }
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
    print(f"made {len(made)} Keras models in {out}")


if __name__ == "__main__":
    main()
