"""The means, variances and quantile boundaries of many columns stacked as one [batch, n] matrix, from one
tf.Transform analyzer each, not one per column. Why: docs/internals.md."""

from __future__ import annotations

from typing import Optional

import tensorflow as tf
import tensorflow_transform as tft


def moments(x: tf.Tensor, variance: bool = True) -> tuple[tf.Tensor, Optional[tf.Tensor]]:
    """[n] means and (biased) variances of a [batch, n] matrix's columns over their finite values, NaN meaning
    missing: what tft.mean/tft.var of each column's present values alone give, as TFT counts finite values per
    element (tf_utils.reduce_batch_count_mean_and_var); 0 for a column with no values, as there."""
    # float64 sums: a column sum over the batch axis adds row by row, and in float32 that lost a latitude's
    # z-score its fourth digit (docs/internals.md).
    x = tf.cast(x, tf.float64)
    n = x.shape[1]
    mean = _float32(tft.mean(x, reduce_instance_dims=False), n)
    return mean, (_float32(tft.var(x, reduce_instance_dims=False), n) if variance else None)


def _float32(x: tf.Tensor, n: int) -> tf.Tensor:
    # The elementwise combiner divides 0 by 0 for a column no batch had a value of (TFT's scalar path gives 0).
    x = tf.cast(_as_shaped(x, [n]), tf.float32)
    return tf.where(tf.math.is_nan(x), tf.zeros_like(x), x)


def quantiles(x: tf.Tensor, num_buckets: int, epsilon: float) -> tf.Tensor:
    """[n, num_buckets - 1] boundaries of a [batch, n] matrix's columns from their non-NaN values (TFT's
    QuantilesCombiner keeps one summary per element with reduce_instance_dims=False, as
    tft.bucketize(elementwise=True) uses it)."""
    return _as_shaped(tft.quantiles(x, num_buckets, epsilon, reduce_instance_dims=False), [x.shape[1], -1])


def _as_shaped(analyzer_output: tf.Tensor, shape: list) -> tf.Tensor:
    """An analyzer's output, reshaped before anything else reads it. When the graph is saved, TFT puts the
    analyzer's value in as a constant, which for a single column has one dimension less; in a TF1 graph
    (components/transform.py) the op reading it keeps its old output shape and the graph no longer imports
    ("_output_shapes attribute inconsistent"). A reshape infers the same shape from either."""
    return tf.reshape(analyzer_output, shape)
