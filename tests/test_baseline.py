"""components/baseline.py: the Evaluator's baseline is the latest blessed model other than the candidate."""

from __future__ import annotations

import pytest
from tfx.components.evaluator import constants
from tfx.dsl.input_resolution.strategies.latest_blessed_model_strategy import LatestBlessedModelStrategy
from tfx.types import standard_artifacts

from components.baseline import CANDIDATE_KEY, PreviousBlessedModelStrategy


def _model(model_id: int) -> standard_artifacts.Model:
    model = standard_artifacts.Model()
    model.id = model_id
    return model


def _blessing(model_id: int, blessed: bool) -> standard_artifacts.ModelBlessing:
    blessing = standard_artifacts.ModelBlessing()
    blessing.id = 1000 + model_id
    blessing.set_int_custom_property(constants.ARTIFACT_PROPERTY_CURRENT_MODEL_ID_KEY, model_id)
    blessing.set_int_custom_property(constants.ARTIFACT_PROPERTY_BLESSED_KEY, int(blessed))
    return blessing


def _resolve(strategy, candidate: list, models: list[int], blessed: list[int], not_blessed: list[int] = ()):
    inputs = {"model": [_model(i) for i in models],
              "model_blessing": [_blessing(i, True) for i in blessed] + [_blessing(i, False) for i in not_blessed]}
    if candidate is not None:
        inputs[CANDIDATE_KEY] = [_model(i) for i in candidate]
    result = strategy().resolve_artifacts(None, inputs)
    return [a.id for a in result["model"]], [a.id for a in result["model_blessing"]], result


def test_rerun_of_the_blessed_model_gets_the_baseline_it_had_before():
    # Model 3 was blessed last run and is this run's candidate again (Trainer from cache).
    models, blessings, result = _resolve(PreviousBlessedModelStrategy, [3], models=[1, 2, 3], blessed=[1, 3],
                                         not_blessed=[2])
    assert (models, blessings) == ([1], [1001])
    assert [a.id for a in result[CANDIDATE_KEY]] == [3]
    # TFX's strategy would compare the model with itself.
    assert _resolve(LatestBlessedModelStrategy, None, models=[1, 2, 3], blessed=[1, 3], not_blessed=[2])[:2] == (
        [3], [1003])


def test_new_candidate_gets_what_tfx_gives():
    ours = _resolve(PreviousBlessedModelStrategy, [4], models=[1, 2, 3, 4], blessed=[1, 3])[:2]
    assert ours == _resolve(LatestBlessedModelStrategy, None, models=[1, 2, 3, 4], blessed=[1, 3])[:2] == ([3], [1003])


def test_first_blessed_model_rerun_has_no_baseline_as_on_its_first_run():
    assert _resolve(PreviousBlessedModelStrategy, [1], models=[1], blessed=[1])[:2] == ([], [])
    assert _resolve(PreviousBlessedModelStrategy, [1], models=[1], blessed=[])[:2] == ([], [])


def test_missing_candidate_channel_is_named():
    with pytest.raises(ValueError, match="needs a 'candidate' input channel"):
        _resolve(PreviousBlessedModelStrategy, None, models=[1], blessed=[1])
