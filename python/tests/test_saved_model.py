"""SavedModels from Python (`polytensor.saved_model.load`), against TensorFlow's own
`tf.saved_model.load` of the same directory, on every device."""

import numpy as np
import pytest

import polytensor as pt


@pytest.fixture(scope="module")
def exported(tf, tmp_path_factory):
    """A tf.Module with two signatures, one with a data-dependent tf.cond, and a lookup
    table, saved by TensorFlow; its directory and TensorFlow's outputs."""
    rng = np.random.default_rng(5)

    class Model(tf.Module):
        def __init__(self):
            self.w = tf.Variable(rng.normal(size=(6, 3)).astype(np.float32))
            self.table = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(["a", "b"], tf.constant([7, 9], tf.int64)), -1)

        @tf.function(input_signature=[tf.TensorSpec([None, 6], tf.float32)])
        def predict(self, x):
            y = tf.matmul(x, self.w)
            return tf.cond(tf.reduce_sum(y) > 0, lambda: tf.nn.relu(y), lambda: -y)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def ids(self, words):
            return {"ids": self.table.lookup(words)}

    model = Model()
    path = str(tmp_path_factory.mktemp("saved") / "model")
    tf.saved_model.save(model, path, signatures={"serving_default": model.predict, "ids": model.ids})
    x = rng.normal(size=(4, 6)).astype(np.float32)
    loaded = tf.saved_model.load(path)
    expected = loaded.signatures["serving_default"](x=tf.constant(x))["output_0"].numpy()
    words = np.array([b"b", b"z", b"a"], dtype=object)
    ids = loaded.signatures["ids"](words=tf.constant(words))["ids"].numpy()
    return path, x, expected, words, ids


def test_signatures_match_tensorflow(exported, device):
    path, x, expected, words, ids = exported
    model = pt.saved_model.load(path, device=device)
    assert sorted(model.signatures) == ["ids", "serving_default"]
    predict = model.signatures["serving_default"]
    assert predict.structured_input_signature == {"x": ("float32", [None, 6])}
    out = predict(x=x)
    assert list(out) == ["output_0"] and isinstance(out["output_0"], pt.Tensor)
    np.testing.assert_allclose(out["output_0"].numpy(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(predict(x=x.tolist())["output_0"].numpy(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(model.signatures["ids"](words=words)["ids"].numpy(), ids)


def test_mistakes_raise(exported):
    path, x, *_ = exported
    model = pt.saved_model.load(path)
    with pytest.raises(ValueError, match="needs input"):
        model.signatures["serving_default"]()
    with pytest.raises(ValueError, match="has no input"):
        model.signatures["serving_default"](x=x, y=x)
    with pytest.raises(TypeError):
        model.signatures["serving_default"](x)
    with pytest.raises(pt.NotFoundError):
        pt.saved_model.load(path + "-missing")
    with pytest.raises(pt.NotFoundError, match="tags"):
        pt.saved_model.load(path, tags=["train"])
