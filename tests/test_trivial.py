"""components/evaluation/trivial.py: the trivial model's main metric, worked out by hand on tiny tables, its labels
read from Transform-shaped output, and the bound it puts on the candidate before TFMA runs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import json_format
from tfx.components.evaluator import executor as tfx_evaluator_executor
from tfx.types import artifact_utils, standard_artifacts
from tfx.types import standard_component_specs as specs
from tfx.utils import proto_utils

from components.errors import EvaluationInputError
from components.evaluation import trivial
from components.evaluation.evaluator import Executor
from pipeline.config import load_config
from pipeline.dag.evaluation import eval_config
from trainer.features import xf
from trainer.tasks import MAIN_METRICS

LABEL = xf("species")  # configs/local.yaml's label, transformed


def test_multiclass_is_the_train_splits_majority_class_accuracy():
    # train: class 1 three times, 0 and 2 once, an unknown (-1) ignored; test: class 1 in 2 of 4 rows.
    model = trivial.trivial_model("multiclass", np.array([0, 1, 1, 2, 1, -1]), np.array([1, 0, 1, 2]))
    assert model.value == 0.5
    assert model.what == "always class id 1, the train split's most frequent (50% of its 6 rows)"
    # A tie goes to the lowest id: 0 and 2 twice each; 0 is right once in 3 test rows.
    assert trivial.trivial_model("multiclass", np.array([2, 0, 2, 0]), np.array([0, 2, 2])).value == 1 / 3


def test_regression_is_the_rmse_of_the_train_splits_mean():
    # mean of train = 3; test errors 0 and 2: sqrt((0 + 4) / 2).
    model = trivial.trivial_model("regression", np.array([1.0, 2.0, 3.0, 6.0], np.float32), np.array([3.0, 5.0]))
    assert model.value == pytest.approx(math.sqrt(2), abs=1e-12)
    assert model.what == "always 3, the train split's mean label"
    with pytest.raises(EvaluationInputError, match="the evaluated split has 1 rows without a label"):
        trivial.trivial_model("regression", np.array([1.0, 2.0]), np.array([np.nan, 2.0]))


def test_binary_is_auc_one_half_whatever_the_rows():
    assert trivial.trivial_model("binary", None, None).value == 0.5


def test_a_value_equal_to_the_trivial_one_in_float32_is_not_better():
    """TFMA's metrics are float32: 15 of 34 right is a hair above 15/34 in float64, and still not better."""
    value = 15 / 34
    assert float(np.float32(value)) > value
    assert float(np.float32(value)) < trivial.bound(value, higher_is_better=True)
    assert 16 / 34 > trivial.bound(value, higher_is_better=True)  # one row more is
    rmse = 955.25
    assert float(np.float32(rmse)) > trivial.bound(rmse, higher_is_better=False) > 955.0


def _config(*settings: str):
    return load_config("configs/local.yaml", list(settings))


def _regression(*settings: str):
    return _config("features.task=regression", "features.label=body_mass_g",
                   "features.numeric=[bill_length_mm]", "evaluator.lower_bound=null", *settings)


@pytest.mark.parametrize("settings, expected, raised", [
    ((), {"upper_bound": trivial.bound(100.0, False)}, True),                      # no bound: the trivial model's
    (("evaluator.upper_bound=150",), {"upper_bound": trivial.bound(100.0, False)}, True),  # a laxer one is raised
    (("evaluator.upper_bound=80",), {"upper_bound": 80.0}, False),                 # a stricter one stays
    (("evaluator.lower_bound=5",), {"lower_bound": 5.0, "upper_bound": trivial.bound(100.0, False)}, True),
], ids=["none", "laxer", "stricter", "other-side"])
def test_the_trivial_bound_combines_with_the_configured_ones(settings, expected, raised):
    bounded, was_raised = trivial.with_trivial_bound(eval_config(_regression(*settings)), MAIN_METRICS["regression"],
                                                     100.0)
    assert was_raised is raised
    [threshold] = [m.threshold for m in bounded.metrics_specs[0].metrics if m.class_name == "RootMeanSquaredError"]
    value = threshold.value_threshold
    found = {side: getattr(value, side).value for side in ("lower_bound", "upper_bound") if value.HasField(side)}
    assert found == expected
    assert threshold.HasField("change_threshold")  # the comparison with the serving model stays


def _transformed(tmp_path, splits: dict[str, list], kind: str = "int64_list") -> standard_artifacts.Examples:
    """Transform's output as the Evaluator reads it: Split-<name>/ of gzipped TFRecords of tf.Examples."""
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / "transformed")
    examples.split_names = artifact_utils.encode_split_names(list(splits))
    for name, values in splits.items():
        split = tmp_path / "transformed" / f"Split-{name}"
        split.mkdir(parents=True)
        with tf.io.TFRecordWriter(str(split / "transformed_examples-00000-of-00001.gz"), options="GZIP") as w:
            for v in values:
                feature = {"x_xf": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0]))}
                if v is not None:
                    lists = {"int64_list": tf.train.Int64List, "float_list": tf.train.FloatList,
                             "bytes_list": tf.train.BytesList}
                    feature[LABEL] = tf.train.Feature(**{kind: lists[kind](value=[v])})
                w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return examples


def test_labels_are_read_from_transforms_output_and_bad_ones_named(tmp_path):
    examples = _transformed(tmp_path, {"train": [2, 0, 2], "test": [0, 2]})
    assert trivial.labels([examples], ["train"], LABEL).tolist() == [2, 0, 2]
    assert trivial.labels([examples], ["train", "test"], LABEL).tolist() == [2, 0, 2, 0, 2]
    floats = _transformed(tmp_path / "f", {"train": [1.5]}, "float_list")
    assert trivial.labels([floats], ["train"], LABEL).dtype == np.float32
    with pytest.raises(EvaluationInputError, match=r"split train of .*: the label 'species_xf' is bytes_list"):
        trivial.labels([_transformed(tmp_path / "b", {"train": [b"a"]}, "bytes_list")], ["train"], LABEL)
    with pytest.raises(EvaluationInputError, match="the label 'species_xf' is not one value in every row"):
        trivial.labels([_transformed(tmp_path / "m", {"train": [1, None]})], ["train"], LABEL)
    with pytest.raises(EvaluationInputError, match="split train of .*: no rows"):
        trivial.labels([_transformed(tmp_path / "e", {"train": []})], ["train"], LABEL)


def _do(monkeypatch, tmp_path, config, inputs: dict) -> tuple[dict, standard_artifacts.ModelEvaluation]:
    """Our executor up to TFX's (which stands in for TFMA here): what TFX's gets, and the evaluation artifact."""
    seen = {}
    monkeypatch.setattr(tfx_evaluator_executor.Executor, "Do",
                        lambda self, i, o, exec_properties: seen.update(exec_properties))
    evaluation = standard_artifacts.ModelEvaluation()
    evaluation.uri = str(tmp_path / "evaluation")
    Executor().Do(inputs, {specs.EVALUATION_KEY: [evaluation]},
                  {specs.EVAL_CONFIG_KEY: proto_utils.proto_to_json(eval_config(config)),
                   specs.EXAMPLE_SPLITS_KEY: json.dumps(["test"])})
    return seen, evaluation


def test_the_executor_hands_tfma_the_trivial_bound_and_records_it(monkeypatch, tmp_path):
    """Multiclass on a tiny table: train's majority is class 2 (3 of 4 rows); it is right in 1 of 4 test rows,
    so the bar is just above 0.25 where no bound was set, and the evaluation artifact says so, and where."""
    config = _config("evaluator.lower_bound=null")
    examples = _transformed(tmp_path, {"train": [2, 0, 2, 2], "eval": [0, 0, 0], "test": [2, 1, 0, 1]})
    seen, evaluation = _do(monkeypatch, tmp_path, config, {trivial.TRANSFORMED_EXAMPLES: [examples]})
    applied = json_format.Parse(seen[specs.EVAL_CONFIG_KEY], eval_config(config).__class__())
    [accuracy] = [m for m in applied.metrics_specs[0].metrics if m.class_name == "SparseCategoricalAccuracy"]
    assert accuracy.threshold.value_threshold.lower_bound.value == trivial.bound(0.25, True)
    assert evaluation.get_string_custom_property(trivial.SPLIT) == "test"
    assert evaluation.get_float_custom_property(trivial.TRIVIAL_VALUE) == 0.25
    assert "class id 2" in evaluation.get_string_custom_property(trivial.TRIVIAL_MODEL)
    assert evaluation.get_int_custom_property(trivial.TRIVIAL_SETS_THE_BAR) == 1
    # Above the configured bound (0.9) the trivial model is no bar, and the artifact says so.
    examples = _transformed(tmp_path / "high", {"train": [2, 2], "test": [2] * 19 + [1]})
    seen, evaluation = _do(monkeypatch, tmp_path / "high", _config(), {trivial.TRANSFORMED_EXAMPLES: [examples]})
    assert '"lowerBound": 0.950001' in seen[specs.EVAL_CONFIG_KEY]
    assert evaluation.get_int_custom_property(trivial.TRIVIAL_SETS_THE_BAR) == 1
    examples = _transformed(tmp_path / "low", {"train": [2, 2], "test": [2, 1]})
    seen, evaluation = _do(monkeypatch, tmp_path / "low", _config(), {trivial.TRANSFORMED_EXAMPLES: [examples]})
    assert '"lowerBound": 0.9' in seen[specs.EVAL_CONFIG_KEY]
    assert evaluation.get_int_custom_property(trivial.TRIVIAL_SETS_THE_BAR) == 0


def test_without_transforms_output_the_executor_refuses_before_tfma(monkeypatch, tmp_path):
    with pytest.raises(EvaluationInputError, match="needs Transform's output"):
        _do(monkeypatch, tmp_path, _config(), {})
    # Binary needs no labels: a constant score's AUC is 0.5 on any rows.
    seen, evaluation = _do(monkeypatch, tmp_path, _config("features.task=binary", "features.positive_class=Adelie",
                                                          "evaluator.lower_bound=null"), {})
    assert '"lowerBound": 0.500001' in seen[specs.EVAL_CONFIG_KEY]
    assert evaluation.get_float_custom_property(trivial.TRIVIAL_VALUE) == 0.5
