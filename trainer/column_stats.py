"""Means, variances and quantile boundaries of many columns from one tf.Transform analyzer each, not one per
column. Why: docs/internals.md."""

from __future__ import annotations

from typing import Mapping

import tensorflow as tf
import tensorflow_transform as tft


def _stacked(columns: Mapping[str, tf.Tensor]) -> tf.Tensor:
    """[batch, n] float32 from n [batch] columns, in the mapping's order."""
    return tf.stack([tf.cast(columns[n], tf.float32) for n in columns], axis=1)


def moments(columns: Mapping[str, tf.Tensor], variance: bool = True) -> tuple[dict, dict]:
    """Each [batch] column's mean and (biased) variance over its finite values, NaN meaning missing: what
    tft.mean/tft.var of that column's present values alone give, as TFT counts finite values per element
    (tf_utils.reduce_batch_count_mean_and_var); 0 for a column with no values, as there."""
    if not columns:
        return {}, {}
    # float64 sums: a column sum over the batch axis adds row by row, and in float32 that lost a latitude's
    # z-score its fourth digit (docs/internals.md).
    stacked = tf.cast(_stacked(columns), tf.float64)
    # The elementwise combiner divides 0 by 0 for a column no batch had a value of (TFT's scalar path gives 0).
    mean = _float32(tft.mean(stacked, reduce_instance_dims=False))
    var = _float32(tft.var(stacked, reduce_instance_dims=False)) if variance else None
    means = {n: mean[i] for i, n in enumerate(columns)}
    return means, ({n: var[i] for i, n in enumerate(columns)} if variance else {})


def _float32(x: tf.Tensor) -> tf.Tensor:
    x = tf.cast(x, tf.float32)
    return tf.where(tf.math.is_nan(x), tf.zeros_like(x), x)


def quantiles(columns: Mapping[str, tf.Tensor], num_buckets: int, epsilon: float) -> dict[str, tf.Tensor]:
    """Each [batch] column's [1, num_buckets - 1] boundaries from its non-NaN values (TFT's QuantilesCombiner
    keeps one summary per element with reduce_instance_dims=False, as tft.bucketize(elementwise=True) uses it)."""
    if not columns:
        return {}
    boundaries = tft.quantiles(_stacked(columns), num_buckets, epsilon, reduce_instance_dims=False)
    return {n: boundaries[i:i + 1] for i, n in enumerate(columns)}
