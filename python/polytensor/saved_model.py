"""TensorFlow SavedModels (``tf.saved_model.save``, Keras ``model.export``) on polytensor:

    model = polytensor.saved_model.load("exported/")
    outputs = model.signatures["serving_default"](x=numpy_array)
    outputs["output_0"].numpy()

``load(export_dir, tags=None, device=None)`` reads the graph tagged ``tags`` (``["serve"]``),
restores its variables and runs its init op; ``device`` pins the session to one device
(a CPU beside it holds the file names), otherwise it spans every device present.
"""

from ._native import ConcreteFunction, SavedModel
from ._native import load_saved_model as load

__all__ = ["ConcreteFunction", "SavedModel", "load"]
