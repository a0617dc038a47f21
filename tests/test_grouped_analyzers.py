"""The grouped analyzers (trainer/column_stats.py) on the numeric matrix (trainer/preprocessing.py), traced as a TF1
graph as the pipeline's Transform does, make the same transform as each column read alone with an analyzer per
column, traced as tf.functions (tf.Transform's TF2 default, which the pipeline used before): penguins, taxi and
generated wide tables through real tf.Transform (Beam, in-process)."""

import csv
import functools

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform.tf_metadata import schema_utils

from components.transform import TF_COMPAT_V1
from pipeline.config import load_config
from trainer import column_stats, features, preprocessing
from trainer.feature_config import FeatureConfig, NumericFeature, resolve
from trainer.preprocessing import preprocessing_fn


def _present(x, i):
    return tf.boolean_mask(x[:, i], ~tf.math.is_nan(x[:, i]))


def _per_column_moments(x, variance=True):
    """The reference: tft.mean and tft.var of each column's present values, a pair of analyzers per column."""
    columns = [_present(x, i) for i in range(x.shape[1])]
    return (tf.stack([tft.mean(c) for c in columns]),
            tf.stack([tft.var(c) for c in columns]) if variance else None)


def _per_column_quantiles(x, num_buckets, epsilon):
    return tf.concat([tft.quantiles(_present(x, i), num_buckets, epsilon) for i in range(x.shape[1])], axis=0)


def _per_column_matrix(columns, numeric: list[NumericFeature]):
    """The reference: each numeric column densified, clipped and logged alone, then stacked."""
    def column(x, f):
        values = tf.cast(x.values if isinstance(x, tf.SparseTensor) else x, tf.float32)
        if f.clip:
            values = tf.clip_by_value(values, *f.clip)
        if f.log:
            values = tf.math.log1p(tf.maximum(values, 0.0))
        if isinstance(x, tf.SparseTensor):
            shape = tf.stack([x.dense_shape[0], 1])
            return tf.reshape(tf.sparse.to_dense(tf.SparseTensor(x.indices, values, shape), float("nan")), [-1])
        return tf.reshape(values, [-1])
    return tf.stack([column(x, f) for x, f in zip(columns, numeric)], axis=1)


def _transform(tmp_path, name, metadata, train, test, config: FeatureConfig, compat_v1=TF_COMPAT_V1):
    fn = functools.partial(preprocessing_fn, custom_config={features.CONFIG_KEY: config.model_dump()})
    out = tmp_path / name
    with tft_beam.Context(temp_dir=str(tmp_path / f"{name}-tmp"), force_tf_compat_v1=compat_v1):
        (train_out, _), transform_fn = (train, metadata) | tft_beam.AnalyzeAndTransformDataset(fn)
        if test is None:
            return train_out, None, None
        test_out, _ = ((test, metadata), transform_fn) | tft_beam.TransformDataset()
        _ = transform_fn | tft_beam.WriteTransformFn(str(out))
    return train_out, test_out, tft.TFTransformOutput(str(out))


def _both(tmp_path, monkeypatch, metadata, train, test, config):
    grouped = _transform(tmp_path, "grouped", metadata, train, test, config)
    with monkeypatch.context() as m:
        m.setattr(column_stats, "moments", _per_column_moments)
        m.setattr(column_stats, "quantiles", _per_column_quantiles)
        m.setattr(preprocessing, "numeric_matrix", _per_column_matrix)
        reference = _transform(tmp_path, "reference", metadata, train, test, config, compat_v1=False)
    return grouped, reference


def _assert_same(grouped, reference, config: FeatureConfig):
    (g_train, g_test, g_out), (r_train, r_test, r_out) = grouped, reference
    for g_rows, r_rows in ((g_train, r_train), (g_test, r_test)):
        assert len(g_rows) == len(r_rows) and set(g_rows[0]) == set(r_rows[0])
        for name in r_rows[0]:
            g = np.array([r[name] for r in g_rows])
            r = np.array([r[name] for r in r_rows])
            if r.dtype.kind == "f":
                # The reference sums in float32: on taxi's latitudes its z-scores are 1.6e-4 off float64 numpy.
                np.testing.assert_allclose(g, r, rtol=1e-4, atol=5e-4, err_msg=name)
            else:
                np.testing.assert_array_equal(g, r, err_msg=name)
    # The same vocabularies and the same id ranges (int_domain) the model sizes its inputs by.
    for f in config.categorical:
        if not f.int_range and not f.hash_buckets:
            vocab = features.vocab_name(f.name)
            assert g_out.vocabulary_by_name(vocab) == r_out.vocabulary_by_name(vocab)
    assert g_out.transformed_metadata.schema == r_out.transformed_metadata.schema


def _assert_z_scores_as_numpy(train_out, rows, config: FeatureConfig, metadata):
    """Every z-scored number against float64 numpy on the raw rows: clip, log, the present values' mean and
    standard deviation, a missing value on 0."""
    spec = schema_utils.schema_as_feature_spec(metadata.schema).feature_spec
    resolved = resolve(config, features.column_types(spec))
    checked = 0
    for f in resolved.numeric:
        if not f.z_score or f.bucketize:
            continue
        v = np.array([r[f.name][0] if r[f.name] else np.nan for r in rows], np.float64)
        if f.clip:
            v = np.clip(v, *f.clip)
        if f.log:
            v = np.log1p(np.maximum(v, 0.0))
        expected = np.where(np.isnan(v), 0.0, (v - np.nanmean(v)) / max(np.nanstd(v), 1e-6))
        got = np.array([r[features.xf(f.name)] for r in train_out])
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=5e-4, err_msg=f.name)
        checked += 1
    assert checked


def _read_csv(path, schema, rows=None):
    """tf.Transform instance dicts from a CSV by the schema's types; an empty or NA cell is missing."""
    kinds = {f.name: f.type for f in schema.feature}
    cast = {schema_pb2.INT: lambda v: int(float(v)), schema_pb2.FLOAT: float, schema_pb2.BYTES: str.encode}
    with open(path, newline="") as f:
        out = [{k: [] if v in ("", "NA") else [cast[kinds[k]](v)] for k, v in row.items() if k in kinds}
               for row in csv.DictReader(f)]
    return out[:rows]


def _bundled(name):
    schema = text_format.Parse(open(f"schema/{name}.pbtxt").read(), schema_pb2.Schema())
    return schema, tft.DatasetMetadata(schema)


def test_penguins_grouped_is_per_column(tmp_path, monkeypatch):
    schema, metadata = _bundled("penguins")
    rows = _read_csv("data/penguins/penguins.csv", schema)
    config = load_config("configs/local.yaml").features
    grouped, reference = _both(tmp_path, monkeypatch, metadata, rows[:300], rows[300:], config)
    _assert_same(grouped, reference, config)
    _assert_z_scores_as_numpy(grouped[0], rows[:300], config, metadata)


def test_taxi_grouped_is_per_column(tmp_path, monkeypatch):
    schema, metadata = _bundled("taxi")
    rows = _read_csv("data/taxi/data.csv", schema, 800)
    config = load_config("configs/taxi.yaml").features
    grouped, reference = _both(tmp_path, monkeypatch, metadata, rows[:600], rows[600:], config)
    _assert_same(grouped, reference, config)
    _assert_z_scores_as_numpy(grouped[0], rows[:600], config, metadata)


def _wide(columns, rows, seed=0):
    """`columns` float columns x0.. (about 10% of cells missing, scales differing by column), a label."""
    rng = np.random.default_rng(seed)
    values = rng.normal(rng.uniform(-50, 50, columns), rng.uniform(0.1, 20, columns), (rows, columns))
    values[rng.random((rows, columns)) < 0.1] = np.nan
    spec = {f"x{i}": tf.io.VarLenFeature(tf.float32) for i in range(columns)}
    spec["y"] = tf.io.FixedLenFeature([], tf.float32)
    data = [{**{f"x{i}": [] if np.isnan(v) else [float(v)] for i, v in enumerate(row)}, "y": float(row[0] > 0)}
            for row in values]
    return values, data, tft.DatasetMetadata.from_feature_spec(spec)


def test_wide_table_is_z_scored_per_column(tmp_path):
    """200 columns by one pair of analyzers: each column z-scored by its own present values, missing cells on 0."""
    values, data, metadata = _wide(200, 120)
    config = FeatureConfig(label="y", task="regression")
    train, _, _ = _transform(tmp_path, "wide", metadata, data, None, config)
    got = np.array([[r[features.xf(f"x{i}")] for i in range(values.shape[1])] for r in train])
    mean, std = np.nanmean(values, axis=0), np.nanstd(values, axis=0)
    expected = np.where(np.isnan(values), 0.0, (values - mean) / std)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_mixed_wide_table_grouped_is_per_column(tmp_path, monkeypatch):
    """Options that differ by column (clip, log, no z-score, two bucket counts), booleans and a date."""
    values, data, _ = _wide(10, 400, seed=1)
    rng = np.random.default_rng(2)
    days = np.datetime64("2024-01-01") + rng.integers(0, 700, len(data))
    for i, row in enumerate(data):
        row["x7"] = []  # no values: imputed with 0, as TFT's per-column mean of nothing is
        row["flag"] = [] if i % 7 == 0 else [rng.choice([b"yes", b"no", b"maybe"])]
        row["when"] = [] if i % 11 == 0 else [str(days[i]).encode()]
    spec = {**{f"x{i}": tf.io.VarLenFeature(tf.float32) for i in range(values.shape[1])},
            "flag": tf.io.VarLenFeature(tf.string), "when": tf.io.VarLenFeature(tf.string),
            "y": tf.io.FixedLenFeature([], tf.float32)}
    metadata = tft.DatasetMetadata.from_feature_spec(spec)
    numeric = [{"name": "x0", "clip": [-10, 10]}, {"name": "x1", "log": True}, {"name": "x2", "z_score": False},
               {"name": "x3", "bucketize": 4}, {"name": "x4", "bucketize": 4}, {"name": "x5", "bucketize": 10},
               {"name": "x6", "bucketize": 10, "log": True}]
    config = FeatureConfig(label="y", task="regression", numeric=numeric, boolean=[{"name": "flag"}],
                           date=[{"name": "when", "format": "iso"}])
    grouped, reference = _both(tmp_path, monkeypatch, metadata, data[:300], data[300:], config)
    _assert_same(grouped, reference, config)
    _assert_z_scores_as_numpy(grouped[0], data[:300], config, metadata)
    buckets = {r[features.xf("x5")] for r in grouped[0]}
    assert buckets == set(range(10)), "ten buckets from the column's own quantiles"


def test_an_output_depends_on_its_block_of_columns_alone():
    """Each output reads only the columns of its block (trainer/preprocessing.py BLOCK): tf.Transform walks every
    output's sources when the Trainer loads the transform graph, quadratic in the width if each read them all."""
    from tensorflow_transform import graph_tools

    columns = 2 * preprocessing.BLOCK + 5  # zero-padded names: the inferred columns' order is by name
    config = FeatureConfig(label="y", task="regression")
    graph = tf.Graph()
    with graph.as_default():
        inputs = {f"x{i:03d}": tf.compat.v1.sparse_placeholder(tf.float32, [None, None], name=f"x{i:03d}")
                  for i in range(columns)}
        inputs["y"] = tf.compat.v1.placeholder(tf.float32, [None], name="y")
        outputs = preprocessing_fn(inputs, {features.CONFIG_KEY: config.model_dump()})
        for i in (0, preprocessing.BLOCK + 1, columns - 1):
            block = i // preprocessing.BLOCK
            expected = {f"x{j:03d}" for j in range(block * preprocessing.BLOCK,
                                                min(columns, (block + 1) * preprocessing.BLOCK))}
            got = graph_tools.get_dependent_inputs(graph, inputs, {"out": outputs[features.xf(f"x{i:03d}")]})
            assert set(got) == expected, f"x{i:03d}_xf reads {sorted(set(got) - expected)} beyond its block"
