"""Transform's preprocessing_fn, driven by the config's `features` section. Why: docs/internals.md."""

from __future__ import annotations

import logging

import tensorflow as tf
import tensorflow_transform as tft
from tensorflow_transform import schema_inference

from trainer import column_stats, dates, features
from trainer import roles as data_roles
from trainer.errors import FeatureConfigError
from trainer.feature_config import CategoricalFeature, DateFeature, FeatureConfig, NumericFeature, TextFeature, resolve

log = logging.getLogger(__name__)
# Columns read and scaled as one matrix (_numbers): few enough that a graph walk from an output through its block
# stays short, enough that a wide table has few blocks.
BLOCK = 32


def preprocessing_fn(inputs, custom_config):
    # The roles components/transform.py inferred from the training data, for the columns the config leaves open.
    roles = data_roles.loads((custom_config or {}).get(data_roles.CONFIG_KEY))
    resolved = resolve(features.from_custom_config(custom_config), features.column_types(inputs), roles)
    log.info("features:\n%s", resolved.describe())
    outputs, parsed_dates = _numbers(inputs, resolved)
    outputs.update({features.xf(f.name): _categorical(inputs[f.name], f) for f in resolved.categorical})
    for f in resolved.text:
        outputs.update(_text(inputs[f.name], f, resolved.config.min_frequency))
    for f in resolved.date:
        for name, value in _date(parsed_dates[f.name], f, resolved.config).items():
            if name in outputs or (name != features.xf(f.name) and name[:-3] in inputs):
                raise FeatureConfigError(f"features.date: {f.name!r} makes the feature {name!r}, which another "
                                         "column already makes; rename one of them")
            outputs[name] = value
    # Serving requests carry no label: the exported Transform layer prunes this
    # output when its input is absent.
    outputs[features.xf(resolved.label)] = _label(inputs[resolved.label], resolved.config)
    return outputs


def _numbers(inputs, resolved) -> tuple[dict, dict]:
    """The numeric and boolean outputs by name, and each date's parsed parts with its days z-scored (`_date`).

    Numbers (after clip and log), booleans and dates' days, NaN where missing, are read in blocks of up to
    BLOCK columns, [batch, n] matrices: the numbers are read, clipped and logged, and every block imputed and
    z-scored, as matrices; the blocks side by side are one matrix for one tft.mean and one tft.var, and one
    tft.quantiles per bucket count (trainer/column_stats.py). An analyzer, or a few ops, per column made
    Transform's time and memory grow with the width of the table; one matrix for all made each output depend on
    every column, and the graph walks tf.Transform makes per output when it loads the transform graph quadratic
    in the width (docs/internals.md). Only the outputs are per column, unstacked from their block."""
    numeric, parsed = resolved.numeric, {f.name: dates.parse(_strings(inputs[f.name]), f.format)
                                         for f in resolved.date}
    others = [_boolean_values(inputs[f.name]) for f in resolved.boolean] + [p["days"] for p in parsed.values()]
    blocks = ([numeric_matrix([inputs[f.name] for f in chunk], chunk) for chunk in _blocks(numeric)]
              + [tf.stack(chunk, axis=1) for chunk in _blocks(others)])
    if not blocks:
        return {}, {}
    matrix = tf.concat(blocks, axis=1) if len(blocks) > 1 else blocks[0]
    # Which columns are z-scored: numbers that ask for it (bucketized ones are ids) and dates' days.
    scaled = [f.z_score and not f.bucketize for f in numeric] + [False] * len(resolved.boolean) + [True] * len(parsed)
    mean, var = column_stats.moments(matrix, variance=any(scaled))
    std = tf.maximum(tf.sqrt(var), 1e-6) if any(scaled) else None
    values, start = [], 0
    for block in blocks:
        end = start + block.shape[1]
        v = tf.where(tf.math.is_nan(block), mean[None, start:end], block)
        if any(scaled[start:end]):
            v = tf.where(tf.constant(scaled[start:end])[None, :], (v - mean[None, start:end]) / std[None, start:end], v)
        values += tf.unstack(v, axis=1)
        start = end
    for size in sorted({f.bucketize for f in numeric if f.bucketize}):
        # Boundaries from the present values only: imputed means would crowd one bucket.
        index = [i for i, f in enumerate(numeric) if f.bucketize == size]
        boundaries = column_stats.quantiles(tf.gather(matrix, index, axis=1), size, 0.01 if size < 100 else 0.001)
        for i, b in zip(index, tf.unstack(boundaries)):
            values[i] = _with_range(tft.apply_buckets(values[i], b[None, :]), size)
    names = [f.name for f in numeric] + [f.name for f in resolved.boolean]
    days = values[len(names):]
    return ({features.xf(n): v for n, v in zip(names, values)},
            {name: {**p, "days": d, "day_number": p["days"]} for (name, p), d in zip(parsed.items(), days)})


def _blocks(items: list) -> list[list]:
    return [items[i:i + BLOCK] for i in range(0, len(items), BLOCK)]


def numeric_matrix(columns: list, numeric: list[NumericFeature]) -> tf.Tensor:
    """[batch, n] float32 of the numeric columns after clip and log, NaN where missing. The optional (sparse)
    columns are scattered into it at once from their values and indices, concatenated: a cell holding a second
    value has an index past the matrix and fails the scatter, as densifying that column alone did."""
    sparse = [i for i, x in enumerate(columns) if isinstance(x, tf.SparseTensor)]
    dense = [i for i, x in enumerate(columns) if not isinstance(x, tf.SparseTensor)]
    blocks = []
    if sparse:
        xs = [columns[i] for i in sparse]
        indices = tf.concat([x.indices for x in xs], axis=0)
        which = tf.repeat(tf.range(len(xs), dtype=tf.int64), tf.stack([tf.size(x.values, tf.int64) for x in xs]))
        blank = tf.fill(tf.stack([xs[0].dense_shape[0], len(xs), 1]), float("nan"))
        cells = tf.stack([indices[:, 0], which, indices[:, 1]], axis=1)
        values = tf.concat([_float32(x.values) for x in xs], axis=0)
        blocks.append(tf.reshape(tf.tensor_scatter_nd_update(blank, cells, values), [-1, len(xs)]))
    if dense:
        blocks.append(tf.stack([tf.reshape(_float32(columns[i]), [-1]) for i in dense], axis=1))
    matrix = tf.concat(blocks, axis=1) if len(blocks) > 1 else blocks[0]
    order = sparse + dense
    if order != sorted(order):
        matrix = tf.gather(matrix, [order.index(i) for i in range(len(columns))], axis=1)
    missing = tf.math.is_nan(matrix)
    if any(f.clip for f in numeric):
        low = tf.constant([f.clip[0] if f.clip else -float("inf") for f in numeric], tf.float32)
        high = tf.constant([f.clip[1] if f.clip else float("inf") for f in numeric], tf.float32)
        matrix = tf.where(missing, matrix, tf.minimum(tf.maximum(matrix, low[None, :]), high[None, :]))
    if any(f.log for f in numeric):
        logged = tf.constant([f.log for f in numeric])[None, :] & ~missing
        matrix = tf.where(logged, tf.math.log1p(tf.maximum(matrix, 0.0)), matrix)
    return matrix


def _float32(x):
    return x if x.dtype == tf.float32 else tf.cast(x, tf.float32)


def _categorical(x, f: CategoricalFeature):
    if f.int_range is not None:
        low, high = f.int_range
        value = _dense(x, tf.constant(low - 1, x.dtype))  # missing: out of range
        inside = (value >= low) & (value <= high)
        size = high - low + 2
        return _with_range(tf.where(inside, tf.cast(value - low, tf.int64), size - 1), size)
    strings = _strings(x)
    if f.hash_buckets:
        return _with_range(tf.strings.to_hash_bucket_fast(strings, f.hash_buckets), f.hash_buckets)
    return tft.compute_and_apply_vocabulary(strings, top_k=f.top_k, num_oov_buckets=f.oov_buckets,
                                            frequency_threshold=f.min_frequency,
                                            vocab_filename=features.vocab_name(f.name))


def _boolean_values(x):
    """true/yes/y/t/1 -> 1.0, false/no/n/f/0 -> 0.0 (any case); anything else or missing: NaN (then the training
    mean)."""
    strings = tf.strings.lower(tf.strings.strip(_strings(x)))
    return tf.where(_member(strings, data_roles.TRUE_VALUES), 1.0,
                    tf.where(_member(strings, data_roles.FALSE_VALUES), 0.0, float("nan")))


def _member(strings, values):
    return tf.reduce_any(tf.equal(strings[:, None], tf.constant(values)[None, :]), axis=1)


def _date(parts, f: DateFeature, config: FeatureConfig) -> dict:
    """Days since 1970-01-01 (z-scored by _numbers, missing: the mean), and day of week, month and hour as
    categories with one more id for a missing or unreadable date; with `each_day`, also the day itself as a
    category (a vocabulary of the days seen at least min_frequency times: a flight's date carries its weather)."""
    out = {features.xf(f.name): parts["days"]}
    sizes = {"day_of_week": 7, "month": 12, **({"hour": 24} if f.hour else {})}
    for part, size in sizes.items():
        ids = parts[part]
        out[features.xf(f"{f.name}_{part}")] = _with_range(tf.where(ids < 0, tf.constant(size, tf.int64), ids),
                                                           size + 1)
    if f.each_day:
        number = parts["day_number"]
        days = tf.strings.as_string(tf.where(tf.math.is_nan(number), tf.constant(-1, tf.int64),
                                             tf.cast(number, tf.int64)))
        out[features.xf(f"{f.name}_day")] = tft.compute_and_apply_vocabulary(
            days, top_k=config.max_vocabulary, frequency_threshold=config.min_frequency, num_oov_buckets=1,
            vocab_filename=features.vocab_name(f"{f.name}_day"))
    return out


def _text(x, f: TextFeature, min_frequency: int) -> dict:
    """A bag of words: lower-cased words (runs of letters and digits), the `max_tokens` most frequent in the
    training data, each an output of 0.0/1.0 (`<name>_word<i>_xf`): whether the row holds it."""
    words = tf.strings.split(tf.strings.strip(tf.strings.regex_replace(
        tf.strings.lower(_strings(x)), r"[^\pL\pN]+", " ")))
    ids = tft.compute_and_apply_vocabulary(words.to_sparse(), top_k=f.max_tokens, default_value=-1,
                                           frequency_threshold=min_frequency,
                                           vocab_filename=features.vocab_name(f.name))
    # A sum, not a max: a batch whose rows hold no word has no words axis to take a max over.
    counts = tf.reduce_sum(tf.one_hot(tf.sparse.to_dense(ids, default_value=-1), f.max_tokens), axis=1)
    present = tf.minimum(counts, 1.0)
    return {features.xf(f"{f.name}_word{i}"): present[:, i] for i in range(f.max_tokens)}


def _label(x, config: FeatureConfig):
    if config.task == "multiclass":
        return tft.compute_and_apply_vocabulary(_strings(x), vocab_filename=features.vocab_name(config.label))
    if config.task == "binary":
        if config.positive_class is not None or x.dtype == tf.string:
            positive = tf.equal(_strings(x), config.positive_class)
        else:
            positive = tf.not_equal(_dense(x, tf.zeros([], x.dtype)), 0)
        return _with_range(tf.cast(positive, tf.int64), 2)
    return _dense(_map_values(x, lambda v: tf.cast(v, tf.float32)), float("nan"))


def _with_range(ids, size: int):
    """Record ids in [0, size) in the transformed schema (int_domain): the model's static sizes."""
    schema_inference.set_tensor_schema_override(ids, tf.constant(0, tf.int64), tf.constant(size - 1, tf.int64))
    return ids


def _strings(x):
    """[batch] strings; numbers are formatted, a missing value is ''."""
    x = _map_values(x, lambda v: v if v.dtype == tf.string else tf.strings.as_string(v))
    return _dense(x, "")


def _dense(x, default):
    """[batch] dense tensor from a [batch, 1] tensor or a sparse (optional) feature."""
    if isinstance(x, tf.SparseTensor):
        x = tf.sparse.to_dense(
            tf.SparseTensor(x.indices, x.values, [x.dense_shape[0], 1]), default_value=default)
    return tf.reshape(x, [-1])


def _map_values(x, fn):
    if isinstance(x, tf.SparseTensor):
        return tf.SparseTensor(x.indices, fn(x.values), x.dense_shape)
    return fn(x)
