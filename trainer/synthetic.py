"""Learnable synthetic data in Transform's output format, for runs without the pipeline.

The records look exactly like the Transform component's transformed_examples
(gzipped TFRecords of tf.Examples with the `*_xf` features of
trainer/preprocessing.py), so the trainer, its tests and the benchmark read
them through the same input code as the real pipeline's data.
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from trainer import features

# Vocabulary sizes (with the OOV bucket) and classes of the synthetic data;
# the real penguins data has the same shape: 3 islands, 2 sexes plus "missing".
VOCAB_SIZES = {"island": 3 + features.OOV_BUCKETS, "sex": 3 + features.OOV_BUCKETS}
NUM_CLASSES = 3


def feature_spec() -> dict:
    """The parsing spec: what TFTransformOutput.transformed_feature_spec() gives for preprocessing_fn."""
    spec = {features.xf(n): tf.io.FixedLenFeature([], tf.float32) for n in features.NUMERIC}
    spec.update({features.xf(n): tf.io.FixedLenFeature([], tf.int64) for n in features.CATEGORICAL})
    spec[features.LABEL_XF] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def write_examples(directory: str, num_examples: int, *, shards: int = 2, seed: int = 0) -> str:
    """Write `num_examples` rows in `shards` files; returns their glob pattern.

    Each class has its own centre in the numeric features and its own favourite
    island, plus noise, so a small MLP can learn it but not instantly.
    """
    # The class centres are fixed, so splits written with different seeds share a distribution.
    centres = np.random.default_rng(1234).normal(0.0, 1.0, (NUM_CLASSES, len(features.NUMERIC)))
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, NUM_CLASSES, num_examples)
    numeric = centres[labels] + rng.normal(0.0, 0.8, (num_examples, len(features.NUMERIC)))
    island = np.where(rng.random(num_examples) < 0.7, labels % VOCAB_SIZES["island"],
                      rng.integers(0, VOCAB_SIZES["island"], num_examples))
    sex = rng.integers(0, VOCAB_SIZES["sex"], num_examples)

    os.makedirs(directory, exist_ok=True)
    options = tf.io.TFRecordOptions(compression_type="GZIP")
    writers = [tf.io.TFRecordWriter(os.path.join(directory, f"data-{i:05d}-of-{shards:05d}.gz"), options)
               for i in range(shards)]
    for row in range(num_examples):
        feats = {features.xf(n): _floats(numeric[row, j]) for j, n in enumerate(features.NUMERIC)}
        feats[features.xf("island")] = _ints(island[row])
        feats[features.xf("sex")] = _ints(sex[row])
        feats[features.LABEL_XF] = _ints(labels[row])
        example = tf.train.Example(features=tf.train.Features(feature=feats))
        writers[row % shards].write(example.SerializeToString())
    for w in writers:
        w.close()
    return os.path.join(directory, "data-*.gz")


def _floats(v) -> tf.train.Feature:
    return tf.train.Feature(float_list=tf.train.FloatList(value=[float(v)]))


def _ints(v) -> tf.train.Feature:
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v)]))
