"""The Keras (tf_keras) model over Transform's outputs, shaped by the data's layout."""

from __future__ import annotations

import importlib
from typing import Callable, Optional, Sequence

import tensorflow as tf
import tf_keras

from trainer import sizing
from trainer.config import TrainerConfig
from trainer.features import ModelLayout, vocab_name

# builder(layout, width, trainer_config) -> a built tf_keras.Model with `width` outputs per example. The config's
# hidden_units are set: the trainer's, or those sized from the layout (trainer/sizing.py).
ModelBuilder = Callable[[ModelLayout, int, TrainerConfig], tf_keras.Model]


class TabularModel(tf_keras.Model):
    """An MLP: dense numbers, one-hot small categories and embedded large ones in,
    `width` raw scores out (logits, or a standardized value; see trainer/tasks.py).

    Takes the transformed feature dict, so the same model serves training
    (pre-transformed TFRecords) and serving (raw examples through the
    Transform layer in the exported signature). Every shape is static: the
    category sizes come from Transform's schema, not from the data at run time.
    """

    def __init__(self, layout: ModelLayout, width: int, hidden_units=(16, 16), l2: float = 0.0,
                 dropout: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.layout = layout
        reg = tf_keras.regularizers.L2(l2) if l2 else None
        self.embeddings = {c.name: tf_keras.layers.Embedding(c.size, c.embedding_dim,
                                                             name=f"embed_{vocab_name(c.name)}")
                           for c in layout.categorical if c.embedding_dim}
        self.hidden = [tf_keras.layers.Dense(u, activation="relu", kernel_regularizer=reg)
                       for u in hidden_units]
        # Without dropout the model has no dropout layers: its structure is what it was before trainer.dropout.
        self.dropouts = [tf_keras.layers.Dropout(dropout) for _ in hidden_units] if dropout else []
        # Outputs stay float32 under mixed precision: softmax/loss need the range.
        self.logits = tf_keras.layers.Dense(width, dtype="float32")

    def call(self, inputs, training=None):
        # The dense inputs as one [batch, n] stack, not a reshape and a cast each: on a wide table that was
        # thousands of ops in every trace of the steps and the serving signature ([batch] or [batch, 1] each).
        dense = [inputs[n] if inputs[n].dtype == tf.float32 else tf.cast(inputs[n], tf.float32)
                 for n in self.layout.dense]
        parts = [tf.reshape(tf.stack(dense, axis=1), [-1, len(dense)])] if dense else []
        for c in self.layout.categorical:
            ids = tf.reshape(inputs[c.name], [-1])
            if c.embedding_dim:
                parts.append(tf.cast(self.embeddings[c.name](ids), tf.float32))
            else:
                parts.append(tf.one_hot(ids, c.size))
        x = tf.concat(parts, axis=1)
        for i, layer in enumerate(self.hidden):
            x = layer(x)
            if self.dropouts:
                x = self.dropouts[i](x, training=training)
        return self.logits(x)


def build_model(layout: ModelLayout, width: int, hidden_units: Optional[Sequence[int]] = None, l2: float = 0.0,
                dropout: float = 0.0) -> TabularModel:
    """Build and create the variables (needed before checkpoint restore and strategy.run). `hidden_units` None:
    sized from the layout (trainer/sizing.py)."""
    model = TabularModel(layout, width, sizing.size(layout, hidden_units).hidden_units, l2, dropout)
    model(dummy_batch(layout))
    return model


def dummy_batch(layout: ModelLayout, rows: int = 1) -> dict[str, tf.Tensor]:
    batch = {n: tf.zeros([rows], tf.float32) for n in layout.dense}
    batch.update({c.name: tf.zeros([rows], tf.int64) for c in layout.categorical})
    return batch


def default_builder(layout: ModelLayout, width: int, cfg: TrainerConfig) -> tf_keras.Model:
    return build_model(layout, width, cfg.hidden_units, cfg.l2 or 0.0, cfg.dropout)


def load_builder(import_path: Optional[str]) -> ModelBuilder:
    """features.model_builder ('package.module.function'), or the MLP above."""
    if not import_path:
        return default_builder
    module, _, name = import_path.rpartition(".")
    try:
        builder = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"features.model_builder: cannot import {import_path!r}: {e}") from e
    if not callable(builder):
        raise ValueError(f"features.model_builder: {import_path!r} is not callable")
    return builder
