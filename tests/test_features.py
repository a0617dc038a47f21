"""The features section: validation naming the field, inference from column types,
every per-feature transform through real tf.Transform, and the model layout it implies."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from pydantic import ValidationError
from tensorflow_transform.tf_metadata import schema_utils

from components.transform import TF_COMPAT_V1
from trainer import features
from trainer.errors import FeatureConfigError
from trainer.feature_config import FeatureConfig, resolve
from trainer.model import build_model

COLUMNS = {"y": "int", "fare": "float", "miles": "float", "company": "string", "tract": "int", "hour": "int",
           "note": "string", "day": "int"}


def _config(**values) -> FeatureConfig:
    return FeatureConfig.model_validate({"label": "y", "task": "binary", **values})


def test_entries_may_be_names_or_names_with_options():
    config = _config(numeric=["fare", {"miles": {"log": True}}, {"name": "hour", "bucketize": 4}],
                     categorical=[{"tract": {"hash_buckets": 64}}])
    # log left empty: the data decides (a positive, skewed column: trainer/roles.py).
    assert [(f.name, f.log, f.bucketize) for f in config.numeric] == [
        ("fare", None, None), ("miles", True, None), ("hour", None, 4)]
    assert config.categorical[0].hash_buckets == 64


@pytest.mark.parametrize("values, message", [
    ({"numeric": ["fare", "fare"]}, "'fare' is named twice (numeric)"),
    ({"numeric": ["fare"], "categorical": ["fare"]}, "'fare' is named twice (numeric and categorical)"),
    ({"ignore": ["y"]}, "'y' is named twice (label and ignore)"),
    ({"categorical": [{"company": {"top_k": 5, "hash_buckets": 9}}]}, "top_k and hash_buckets exclude each other"),
    ({"categorical": [{"hour": {"int_range": [23, 0]}}]}, "min <= max"),
    ({"numeric": [{"fare": {"clip": [5, 1]}}]}, "min < max"),
    ({"model_builder": "not a path"}, "not an import path"),
    ({"task": "multiclass", "positive_class": "1"}, "positive_class is for task binary"),
    ({"label_log": True}, "label_log is for task regression, not binary"),
])
def test_bad_sections_are_rejected_by_validation(values, message):
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _config(**values)


@pytest.mark.parametrize("values, field", [
    ({"label": "tip"}, "features.label: 'tip' is not a column"),
    ({"numeric": ["farez"]}, "features.numeric: 'farez' is not a column"),
    ({"ignore": ["nope"]}, "features.ignore: 'nope' is not a column"),
    ({"categorical": ["fare"]}, "features.categorical: 'fare' is a float column"),
    ({"numeric": ["company"]}, "features.numeric: 'company' holds strings"),
    ({"task": "regression", "label": "company"}, "features.task: regression needs a numeric label"),
    ({"task": "multiclass", "label": "fare"}, "features.task: multiclass needs a string or integer label"),
    ({"label": "company"}, "features.positive_class"),
    ({"infer": False}, "features: no model inputs"),
    ({"categorical": [{"company": {"int_range": [0, 3]}}]}, "'company' has int_range but holds strings"),
])
def test_sections_that_do_not_fit_the_columns_name_the_field(values, field):
    with pytest.raises(FeatureConfigError, match=field):
        resolve(_config(**values), COLUMNS)


def test_unnamed_columns_are_inferred_by_type_and_said_so():
    resolved = resolve(_config(numeric=["fare"], categorical=["tract"], ignore=["note"]), COLUMNS)
    assert [f.name for f in resolved.numeric] == ["fare", "day", "hour", "miles"]
    assert [f.name for f in resolved.categorical] == ["tract", "company"]
    assert resolved.inferred == {"company": "categorical", "day": "numeric", "hour": "numeric", "miles": "numeric"}
    assert resolved.unused == ("note",)
    text = resolved.describe()
    assert "numeric: fare, day (inferred), hour (inferred), miles (inferred)" in text and "not used: note" in text
    assert resolve(_config(numeric=["fare"], infer=False), COLUMNS).unused == (
        "company", "day", "hour", "miles", "note", "tract")


# Rows for a real Transform run: missing values (None) in a float, an int and a string column.
ROWS = [{"y": [i % 2], "fare": [float(i)] if i % 5 else [], "miles": [float(i * i)],
         "company": [b"acme" if i % 3 else b"zed"] if i % 7 else [], "tract": [17031000000 + i % 11],
         "hour": [i % 24], "day": [i % 9] if i % 10 else []} for i in range(1, 101)]
SPEC = {"y": tf.io.FixedLenFeature([1], tf.int64), "fare": tf.io.VarLenFeature(tf.float32),
        "miles": tf.io.FixedLenFeature([1], tf.float32), "company": tf.io.VarLenFeature(tf.string),
        "tract": tf.io.FixedLenFeature([1], tf.int64), "hour": tf.io.FixedLenFeature([1], tf.int64),
        "day": tf.io.VarLenFeature(tf.int64)}


def _transform(config: FeatureConfig, tmp_path):
    from trainer.preprocessing import preprocessing_fn

    metadata = tft.DatasetMetadata(schema_utils.schema_from_feature_spec(SPEC))
    fn = functools.partial(preprocessing_fn, custom_config={features.CONFIG_KEY: config.model_dump()})
    import apache_beam as beam

    out = tmp_path / "transform_fn"
    with beam.Pipeline() as p, tft_beam.Context(temp_dir=str(tmp_path / "tmp"), force_tf_compat_v1=TF_COMPAT_V1):
        (rows, _), transform_fn = ((p | beam.Create(ROWS), metadata)
                                   | tft_beam.AnalyzeAndTransformDataset(fn))
        _ = transform_fn | tft_beam.WriteTransformFn(str(out))
        _ = rows | beam.io.WriteToText(str(tmp_path / "rows"), shard_name_template="")
    import ast
    transformed = [ast.literal_eval(line) for line in (tmp_path / "rows").read_text().splitlines()]
    return tft.TFTransformOutput(str(out)), transformed


def test_every_transform_and_the_layout_it_gives(tmp_path):
    config = _config(numeric=[{"fare": {"clip": [0, 50], "log": True}}, {"hour": {"bucketize": 4}},
                              {"miles": {"z_score": False}}],
                     categorical=[{"tract": {"hash_buckets": 64}}, {"company": {"encoding": "embedding"}},
                                  {"day": {"int_range": [1, 7]}}])
    output, rows = _transform(config, tmp_path)
    fare = np.array([r["fare_xf"] for r in rows])
    present = np.log1p(np.clip([float(i) for i in range(1, 101) if i % 5], 0, 50))
    # Clipped, logged, missing ones at the mean of the present ones, then z-scored.
    assert fare[4] == pytest.approx(0.0, abs=1e-5)
    np.testing.assert_allclose(sorted(fare[[i - 1 for i in range(1, 101) if i % 5]]),
                               sorted((present - present.mean()) / present.std()), rtol=1e-4, atol=1e-5)
    assert {r["hour_xf"] for r in rows} == {0, 1, 2, 3}
    assert [r["miles_xf"] for r in rows][:3] == [1.0, 4.0, 9.0]  # no z-score asked
    assert all(0 <= r["tract_xf"] < 64 for r in rows) and len({r["tract_xf"] for r in rows}) > 5
    # company: acme, zed, and one OOV bucket that a missing value ('', never in a tft vocabulary) shares.
    assert {r["company_xf"] for r in rows} == {0, 1, 2}
    assert [r["y_xf"] for r in rows][:4] == [1, 0, 1, 0]
    # Days 1..7 are ids 0..6; day 0, day 8 and a missing day (rows 10, 20, ...) share id 7.
    assert [r["day_xf"] for r in rows][:10] == [0, 1, 2, 3, 4, 5, 6, 7, 7, 7]

    resolved = resolve(config, features.column_types(SPEC))
    layout = features.layout_from_schema(output.transformed_metadata.schema, resolved)
    assert layout.dense == ("fare_xf", "miles_xf") and layout.label == "y_xf"
    sizes = {c.name: (c.size, c.embedding_dim) for c in layout.categorical}
    assert sizes == {"hour_xf": (4, 0), "tract_xf": (64, features.embedding_dim(64)),
                     "company_xf": (3, features.embedding_dim(3)), "day_xf": (8, 0)}
    model = build_model(layout, 1, [8])
    names = (*layout.dense, *(c.name for c in layout.categorical))
    batch = {n: tf.constant([r[n] for r in rows[:5]]) for n in names}
    assert model(batch).shape == (5, 1)
    embeddings = {w.name.split("/")[1]: tuple(w.shape) for w in model.weights if "/embed_" in w.name}
    assert embeddings == {"embed_tract_xf": (64, features.embedding_dim(64)),
                          "embed_company_xf": (3, features.embedding_dim(3))}


def test_string_labels_for_binary_and_float_labels_for_regression(tmp_path):
    binary = FeatureConfig(label="company", task="binary", positive_class="zed", numeric=["miles"], infer=False)
    _, rows = _transform(binary, tmp_path / "binary")
    # Rows 1..7: company is zed when i % 3 == 0, missing at 7 (not positive).
    assert [r["company_xf"] for r in rows][:7] == [0, 0, 1, 0, 0, 1, 0]
    regression = FeatureConfig(label="miles", task="regression", numeric=["fare"], infer=False)
    _, rows = _transform(regression, tmp_path / "regression")
    assert [r["miles_xf"] for r in rows][:3] == [1.0, 4.0, 9.0]


def tiny_builder(layout, width, cfg):
    """A model builder named by import path (features.model_builder) in the hook test."""
    import tf_keras

    class Linear(tf_keras.Model):
        def __init__(self):
            super().__init__()
            self.out = tf_keras.layers.Dense(width)

        def call(self, inputs):
            return self.out(tf.stack([tf.cast(inputs[n], tf.float32) for n in layout.dense], axis=1))

    model = Linear()
    model({n: tf.zeros([1]) for n in layout.dense})
    return model


def test_model_builder_hook_is_used_by_import_path():
    from trainer.features import ModelLayout
    from trainer.spec import TrainingSpec
    from trainer.tasks import Binary

    config = _config(numeric=["fare", "miles"], model_builder="tests.test_features.tiny_builder")
    layout = ModelLayout(dense=("fare_xf", "miles_xf"), categorical=(), label="y_xf")
    spec = TrainingSpec(resolve(config, COLUMNS), layout, Binary())
    from trainer.config import TrainerConfig

    model = spec.build_model(TrainerConfig())
    assert type(model).__name__ == "Linear" and len(model.weights) == 2
    broken = TrainingSpec(resolve(_config(model_builder="tests.nowhere.build"), COLUMNS), layout, Binary())
    with pytest.raises(ValueError, match="features.model_builder: cannot import 'tests.nowhere.build'"):
        broken.build_model(TrainerConfig())


def test_preprocessing_fn_hook_and_the_features_section_reach_transform_and_trainer():
    import json

    from pipeline.config import load_config
    from pipeline.dag.pipeline import PREPROCESSING_FN, create_pipeline

    def transform_and_trainer(config):
        pipeline = create_pipeline(config)
        [transform] = [c for c in pipeline.components if c.id == "Transform"]
        [trainer] = [c for c in pipeline.components if c.id == "Trainer"]
        return transform.exec_properties, json.loads(trainer.exec_properties["custom_config"])

    config = load_config("configs/local.yaml")
    transform, trainer = transform_and_trainer(config)
    assert transform["preprocessing_fn"] == PREPROCESSING_FN
    assert json.loads(transform["custom_config"])[features.CONFIG_KEY] == config.features.model_dump()
    assert trainer[features.CONFIG_KEY] == config.features.model_dump() and "trainer" in trainer
    custom = load_config("configs/local.yaml", ["features.preprocessing_fn=my_team.transforms.preprocessing_fn"])
    assert transform_and_trainer(custom)[0]["preprocessing_fn"] == "my_team.transforms.preprocessing_fn"
