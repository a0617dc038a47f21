import tensorflow as tf

from trainer.features import CategoricalInput, ModelLayout
from trainer.model import build_model

LAYOUT = ModelLayout(dense=("a_xf", "b_xf"),
                     categorical=(CategoricalInput("c_xf", 4, 0), CategoricalInput("d_xf", 300, 8)), label="y_xf")


def test_model_outputs_float32_scores_per_output_with_static_shapes():
    model = build_model(LAYOUT, 3, hidden_units=[8])
    batch = {"a_xf": tf.constant([0.5, -1.0]), "b_xf": tf.constant([1.0, 0.0]),
             "c_xf": tf.constant([0, 3], tf.int64), "d_xf": tf.constant([7, 299], tf.int64)}
    logits = model(batch)
    assert logits.shape == (2, 3)
    assert logits.dtype == tf.float32
    shapes = sorted(tuple(w.shape) for w in model.weights)
    # 2 numbers + 4 one-hot + an 8-wide embedding of 300 ids feed the first layer.
    assert (300, 8) in shapes and (2 + 4 + 8, 8) in shapes
