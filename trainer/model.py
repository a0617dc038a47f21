"""The Keras (tf_keras) classifier over Transform's outputs."""

import tensorflow as tf
import tf_keras

from trainer import features


class PenguinClassifier(tf_keras.Model):
    """A small MLP: z-scored numbers plus one-hot categories in, class logits out.

    Takes the transformed feature dict, so the same model serves training
    (pre-transformed TFRecords) and serving (raw examples through the
    Transform layer in the exported signature).
    """

    def __init__(self, vocab_sizes: dict[str, int], num_classes: int,
                 hidden_units=(16, 16), l2: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.vocab_sizes = dict(vocab_sizes)
        reg = tf_keras.regularizers.L2(l2) if l2 else None
        self.hidden = [tf_keras.layers.Dense(u, activation="relu", kernel_regularizer=reg)
                       for u in hidden_units]
        # Logits stay float32 under mixed precision: softmax/loss need the range.
        self.logits = tf_keras.layers.Dense(num_classes, dtype="float32")

    def call(self, inputs):
        numeric = [tf.reshape(tf.cast(inputs[features.xf(n)], tf.float32), [-1, 1])
                   for n in features.NUMERIC]
        onehot = [tf.one_hot(tf.reshape(inputs[features.xf(n)], [-1]), self.vocab_sizes[n])
                  for n in features.CATEGORICAL]
        x = tf.concat(numeric + onehot, axis=1)
        for layer in self.hidden:
            x = layer(x)
        return self.logits(x)


def build_model(vocab_sizes: dict[str, int], num_classes: int, hidden_units=(16, 16),
                l2: float = 0.0) -> PenguinClassifier:
    """Build and create the variables (needed before checkpoint restore and strategy.run)."""
    model = PenguinClassifier(vocab_sizes, num_classes, hidden_units, l2)
    dummy = {features.xf(n): tf.zeros([1], tf.float32) for n in features.NUMERIC}
    dummy.update({features.xf(n): tf.zeros([1], tf.int64) for n in features.CATEGORICAL})
    model(dummy)
    return model
