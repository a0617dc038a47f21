"""Learnable synthetic data in Transform's output format, for runs without the pipeline.
Why and sources: docs/internals.md."""

from __future__ import annotations

import os
from typing import Optional

import numpy as np
import tensorflow as tf

from trainer.feature_config import FeatureConfig
from trainer.features import CategoricalInput, ModelLayout, xf

DEFAULT_FEATURES = FeatureConfig(label="label", numeric=["x0", "x1", "x2", "x3"], categorical=["c0", "c1"])
# Ids per categorical feature (vocabulary plus OOV bucket) and the classes.
CATEGORY_SIZE = 4
NUM_CLASSES = 3
VOCAB_SIZES = {f.name: CATEGORY_SIZE for f in DEFAULT_FEATURES.categorical}


def layout(vocab_sizes: Optional[dict[str, int]] = None) -> ModelLayout:
    """The model layout of DEFAULT_FEATURES; categories have `vocab_sizes[name]` ids (default VOCAB_SIZES)."""
    sizes = {**VOCAB_SIZES, **(vocab_sizes or {})}
    return ModelLayout(dense=tuple(xf(f.name) for f in DEFAULT_FEATURES.numeric),
                       categorical=tuple(CategoricalInput(xf(n), size, 0) for n, size in sizes.items()),
                       label=xf(DEFAULT_FEATURES.label))


def feature_spec(model_layout: ModelLayout) -> dict:
    """The parsing spec: what TFTransformOutput.transformed_feature_spec() gives for preprocessing_fn."""
    spec = {n: tf.io.FixedLenFeature([], tf.float32) for n in model_layout.dense}
    spec.update({c.name: tf.io.FixedLenFeature([], tf.int64) for c in model_layout.categorical})
    spec[model_layout.label] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def write_examples(directory: str, num_examples: int, *, shards: int = 2, seed: int = 0,
                   model_layout: Optional[ModelLayout] = None, label_noise: float = 0.0) -> str:
    """Write `num_examples` rows in `shards` files; returns their glob pattern.

    Each class has its own centre in the numeric features and its own favourite
    value of the first categorical feature, plus noise, so a small MLP can
    learn it but not instantly. `label_noise`: the fraction of rows whose label is
    then replaced by a random class, which a big model memorises (overfits) on few rows.
    """
    model_layout = model_layout or layout()
    n_dense = len(model_layout.dense)
    # The class centres are fixed, so splits written with different seeds share a distribution.
    centres = np.random.default_rng(1234).normal(0.0, 1.0, (NUM_CLASSES, n_dense))
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, NUM_CLASSES, num_examples)
    numeric = centres[labels] + rng.normal(0.0, 0.8, (num_examples, n_dense))
    ids = {}
    for i, c in enumerate(model_layout.categorical):
        noise = rng.integers(0, c.size, num_examples)
        ids[c.name] = np.where(rng.random(num_examples) < 0.7, labels % c.size, noise) if i == 0 else noise
    if label_noise:
        labels = np.where(rng.random(num_examples) < label_noise, rng.integers(0, NUM_CLASSES, num_examples), labels)

    os.makedirs(directory, exist_ok=True)
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    writers = [tf.io.TFRecordWriter(os.path.join(directory, f"data-{i:05d}-of-{shards:05d}.gz"), options)
               for i in range(shards)]
    for row in range(num_examples):
        feats = {n: _floats(numeric[row, j]) for j, n in enumerate(model_layout.dense)}
        feats.update({n: _ints(values[row]) for n, values in ids.items()})
        feats[model_layout.label] = _ints(labels[row])
        example = tf.train.Example(features=tf.train.Features(feature=feats))
        writers[row % shards].write(example.SerializeToString())
    for w in writers:
        w.close()
    return os.path.join(directory, "data-*.gz")


def _floats(v) -> tf.train.Feature:
    return tf.train.Feature(float_list=tf.train.FloatList(value=[float(v)]))


def _ints(v) -> tf.train.Feature:
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v)]))
