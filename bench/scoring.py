"""Scoring raw rows through a pushed model's serving_default, as a TF Serving client would.

Shared by the taxi comparison (both pipelines' models on the same held-out rows)
and the end-to-end tests. AUC is computed exactly from ranks (Mann-Whitney),
not from TFMA's thresholded approximation, so two models' figures compare
without bucketing error.
"""

from __future__ import annotations

import glob
import os
from typing import Iterable

import numpy as np
import tensorflow as tf

from components.splits import TEST


def examples(pipeline_root: str, split: str = TEST) -> list[tf.train.Example]:
    """CsvExampleGen's rows of `split` (the latest run's) under a pipeline root."""
    runs = sorted(glob.glob(os.path.join(pipeline_root, "CsvExampleGen", "examples", "*")),
                  key=lambda p: int(os.path.basename(p)))
    if not runs:
        raise FileNotFoundError(f"no CsvExampleGen output under {pipeline_root}")
    files = sorted(glob.glob(os.path.join(runs[-1], f"Split-{split}", "*")))
    return [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]


def value(example: tf.train.Example, name: str):
    """The single value of a feature, None when the cell was empty."""
    feature = example.features.feature[name]
    values = getattr(feature, feature.WhichOneof("kind")).value if feature.WhichOneof("kind") else []
    return values[0] if len(values) else None


def serve(model_dir: str, rows: Iterable[tf.train.Example], drop: Iterable[str] = (),
          batch: int = 1024) -> dict[str, np.ndarray]:
    """serving_default's outputs for `rows` sent without the features in `drop` (e.g. the label)."""
    fn = tf.saved_model.load(model_dir).signatures["serving_default"]
    requests = []
    for row in rows:
        request = tf.train.Example()
        request.CopyFrom(row)
        for name in drop:
            if name in request.features.feature:
                del request.features.feature[name]
        requests.append(request.SerializeToString())
    outputs: dict[str, list[np.ndarray]] = {}
    for start in range(0, len(requests), batch):
        for key, v in fn(examples=tf.constant(requests[start:start + batch])).items():
            outputs.setdefault(key, []).append(v.numpy())
    return {key: np.concatenate(parts) for key, parts in outputs.items()}


def auc(labels, scores) -> float:
    """Area under the ROC curve: the chance a random positive outscores a random negative (ties half)."""
    labels, scores = np.asarray(labels).reshape(-1).astype(bool), np.asarray(scores, float).reshape(-1)
    positives, negatives = labels.sum(), (~labels).sum()
    if not positives or not negatives:
        raise ValueError("AUC needs both classes among the labels")
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    # Average ranks over ties.
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    ranks[order] = np.repeat(first + (counts + 1) / 2.0, counts)
    return float((ranks[labels].sum() - positives * (positives + 1) / 2) / (positives * negatives))
