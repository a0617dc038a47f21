"""The Evaluator's baseline is the model serving now (components/serving/serving_model.py), found in the serving dir."""

from __future__ import annotations

from pathlib import Path

import pytest
from tfx.components.evaluator import constants
from tfx.orchestration.portable import data_types
from tfx.types import standard_artifacts
from tfx.utils import path_utils

from components import training_record
from components.serving import serving_dir
from components.serving.serving_model import (
    EMPTY,
    MODEL_URI,
    SERVING_DIR,
    SERVING_VERSION,
    ServingModelExecutor,
    is_empty,
)
from pipeline.dag.pipeline import SERVING_MODEL_ID
from pipeline.runs import mlmd


def _copy(serving: Path, out: Path) -> standard_artifacts.Model:
    model = standard_artifacts.Model()
    model.uri = str(out)
    out.mkdir(parents=True)
    ServingModelExecutor().Do({}, {"model": [model]}, {SERVING_DIR: str(serving)})
    return model


def _key(serving: Path) -> str:
    info = data_types.ExecutionInfo(exec_properties={SERVING_DIR: str(serving)})
    result = training_record.ServingVersionDriver(None).run(info)
    return result.exec_properties[SERVING_VERSION].string_value


def _push(serving: Path, version: int, tmp_path: Path, content: bytes) -> Path:
    """A version as the Pusher leaves it: its training-data record, then the version itself."""
    stats = tmp_path / f"stats-{version}"
    (stats / training_record.TRAIN_SPLIT).mkdir(parents=True)
    (stats / training_record.TRAIN_SPLIT / training_record.STATISTICS_FILE).write_bytes(b"")
    model_dir = tmp_path / f"trainer-{version}" / "Format-Serving"
    (model_dir / "variables").mkdir(parents=True)
    (model_dir / serving_dir.SAVED_MODEL).write_bytes(content)
    (model_dir / "variables" / "variables.index").write_bytes(content * 2)
    training_record.write(str(serving), version, str(stats), str(model_dir.parent))
    return Path(serving_dir.publish(str(model_dir), str(serving), version))


def test_nothing_serving_is_an_empty_artifact_and_each_push_a_new_cache_key(tmp_path):
    serving = tmp_path / "serving"
    first = _copy(serving, tmp_path / "a")
    assert is_empty(first) and not list((tmp_path / "a").iterdir())
    nothing = _key(serving)

    v1 = _push(serving, 1, tmp_path, b"one")
    v2 = _push(serving, 2, tmp_path, b"two")
    copy = _copy(serving, tmp_path / "b")
    # The highest version, the one TF Serving serves, copied whole where TFX's Trainer puts a model.
    assert not is_empty(copy) and copy.get_int_custom_property(EMPTY) == 0
    assert copy.get_string_custom_property(SERVING_VERSION) == "2"
    assert serving_dir.tree_digest(path_utils.serving_model_dir(copy.uri)) == serving_dir.tree_digest(str(v2))
    assert serving_dir.tree_digest(str(v1)) != serving_dir.tree_digest(str(v2))
    assert copy.get_string_custom_property(MODEL_URI) == str(tmp_path / "trainer-2")
    # The local cache key names the serving version: a push makes the next run copy again.
    assert len({nothing, _key(serving)}) == 2 and _key(serving) == "version 2, record"


def _evaluator(config, summary) -> tuple:
    """(the Evaluator's inputs, its blessing, the execution that made its baseline) in one finished run."""
    reader = mlmd.Reader.open(config.pipeline.metadata_path)
    evaluator = reader.execution(summary.component("Evaluator").execution_id)
    inputs = reader.inputs(evaluator)
    [blessing] = reader.outputs(evaluator)["blessing"]
    [baseline] = inputs["baseline_model"]
    return inputs, blessing, reader.producer(baseline)


@pytest.mark.e2e
def test_a_first_run_evaluates_without_a_baseline(safety_run):
    inputs, blessing, made_by = _evaluator(safety_run.config, safety_run.summary)
    [baseline] = inputs["baseline_model"]
    assert made_by.id == safety_run.summary.component(SERVING_MODEL_ID).execution_id
    assert mlmd.properties(baseline)[EMPTY] == 1
    assert constants.ARTIFACT_PROPERTY_BASELINE_MODEL_ID_KEY not in mlmd.properties(blessing)
    assert safety_run.summary.baseline_metrics == {}


@pytest.mark.e2e
def test_the_next_run_is_judged_against_the_pushed_model(safety_run, rejected_run):
    """rejected_run trains on safety_run's root after safety_run pushed: its baseline is that version."""
    version = safety_run.summary.pushed_version
    inputs, blessing, made_by = _evaluator(rejected_run.config, rejected_run.summary)
    [baseline], [candidate] = inputs["baseline_model"], inputs["model"]
    assert made_by.id == rejected_run.summary.component(SERVING_MODEL_ID).execution_id
    props = mlmd.properties(baseline)
    assert props[EMPTY] == 0 and props[SERVING_VERSION] == version
    # The very model that serves, byte for byte, and TFMA compared the candidate with it.
    assert serving_dir.tree_digest(f"{baseline.uri}/Format-Serving") == serving_dir.tree_digest(
        safety_run.summary.pushed_path)
    assert mlmd.properties(blessing)[constants.ARTIFACT_PROPERTY_BASELINE_MODEL_ID_KEY] == baseline.id
    assert set(rejected_run.summary.baseline_metrics) >= set(rejected_run.summary.metrics) > set()
    assert candidate.id != baseline.id
