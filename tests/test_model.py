import tensorflow as tf

from trainer import features
from trainer.model import build_model


def test_model_outputs_float32_logits_per_class():
    model = build_model({"island": 4, "sex": 3}, num_classes=3, hidden_units=[8])
    batch = {features.xf(n): tf.constant([0.5, -1.0]) for n in features.NUMERIC}
    batch.update({features.xf(n): tf.constant([0, 3], tf.int64) for n in features.CATEGORICAL})
    logits = model(batch)
    assert logits.shape == (2, 3)
    assert logits.dtype == tf.float32
