"""Transform's preprocessing_fn: impute, scale and encode the raw penguin rows.

Rows with missing values are kept: a missing number becomes the training mean
(then z-scored), a missing category becomes its own category, and a category
never seen in training falls into an out-of-vocabulary bucket.
"""

import tensorflow as tf
import tensorflow_transform as tft

from trainer import features


def _dense(x, default):
    """[batch] dense tensor from a [batch, 1] tensor or a sparse (optional) feature."""
    if isinstance(x, tf.SparseTensor):
        x = tf.sparse.to_dense(
            tf.SparseTensor(x.indices, x.values, [x.dense_shape[0], 1]), default_value=default)
    return tf.reshape(x, [-1])


def _to_float(x):
    if isinstance(x, tf.SparseTensor):
        return tf.SparseTensor(x.indices, tf.cast(x.values, tf.float32), x.dense_shape)
    return tf.cast(x, tf.float32)


def _values(x):
    return x.values if isinstance(x, tf.SparseTensor) else x


def preprocessing_fn(inputs):
    outputs = {}
    for name in features.NUMERIC:
        raw = _to_float(inputs[name])
        mean = tft.mean(_values(raw))
        std = tf.sqrt(tft.var(_values(raw)))
        value = _dense(raw, float("nan"))
        value = tf.where(tf.math.is_nan(value), mean, value)
        outputs[features.xf(name)] = (value - mean) / tf.maximum(std, 1e-6)
    for name in features.CATEGORICAL:
        outputs[features.xf(name)] = tft.compute_and_apply_vocabulary(
            _dense(inputs[name], ""), num_oov_buckets=features.OOV_BUCKETS, vocab_filename=name)
    # Serving requests carry no label: the exported Transform layer prunes this
    # output when its input is absent.
    outputs[features.LABEL_XF] = tft.compute_and_apply_vocabulary(
        _dense(inputs[features.LABEL], ""), vocab_filename=features.LABEL)
    return outputs
