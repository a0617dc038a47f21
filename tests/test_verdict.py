"""pipeline/runs/verdict.py: the main metric against the thresholds the Evaluator applied (the pipeline's eval config
with the trivial model's bound), and why it was not blessed, in words with the numbers."""

from __future__ import annotations

import pytest

from components.evaluation import trivial
from pipeline.config import load_config
from pipeline.dag.evaluation import eval_config
from pipeline.runs import verdict
from trainer.tasks import MAIN_METRICS

ACCURACY, RMSE = MAIN_METRICS["multiclass"], MAIN_METRICS["regression"]


def _result(metric, value, settings=(), trivial_value=None, baseline=None, task_settings=()) -> verdict.MainResult:
    """The main metric judged as the Evaluator would: the shipped config's eval config plus `settings`, with the
    trivial bound the executor adds, read back as the summary reads it."""
    config, raised = eval_config(load_config("configs/local.yaml", [*task_settings, *settings])), False
    if trivial_value is not None:
        config, raised = trivial.with_trivial_bound(config, metric, trivial_value)
    bounds = verdict.thresholds(config)[metric.key]
    return verdict.MainResult(metric, "test", value, bounds, baseline, trivial_value,
                              "always class id 0, the train split's most frequent (44% of its 205 rows)", raised)


def test_a_model_no_better_than_the_trivial_one_is_told_so_with_the_numbers():
    result = _result(ACCURACY, 0.4412, ["evaluator.lower_bound=null"], trivial_value=0.4412)
    assert result.trivial_sets_the_bar
    assert result.reasons() == ["test accuracy 0.4412 is no better than the trivial model's 0.4412 (always class "
                                "id 0, the train split's most frequent (44% of its 205 rows); the bound is 0.441201)"]
    assert result.line() == ("test accuracy: 0.4412 (trivial model 0.4412; no model serving yet; bar: better than "
                             "the trivial model's 0.4412)")
    assert _result(ACCURACY, 0.4413, ["evaluator.lower_bound=null"], trivial_value=0.4412).reasons() == []


def test_a_configured_bound_above_the_trivial_model_is_the_one_named():
    result = _result(ACCURACY, 0.85, trivial_value=0.4412)  # configs/local.yaml: lower_bound 0.9
    assert not result.trivial_sets_the_bar
    assert result.reasons() == ["test accuracy 0.8500 is below the lower bound 0.9 (evaluator.lower_bound; "
                                "the trivial model scores 0.4412)"]
    assert "bar: lower bound 0.9" in result.line()


@pytest.mark.parametrize("max_regression, value, expected", [
    ("0.0", 0.95, ["test accuracy 0.9500 is worse than the serving model's 0.9710"]),
    ("0.01", 0.955, ["test accuracy 0.9550 is worse than the serving model's 0.9710 by more than 0.01 "
                     "(evaluator.max_regression)"]),
    ("0.01", 0.965, []),
    ("0.0", 0.971, []),  # as good as the serving model passes
])
def test_a_regression_against_the_serving_model(max_regression, value, expected):
    result = _result(ACCURACY, value, [f"evaluator.max_regression={max_regression}"], trivial_value=0.44,
                     baseline=0.971)
    assert result.reasons() == expected
    allowed = float(max_regression)
    assert result.bound_phrases()[-1] == ("no worse than the serving model" +
                                          (f" by more than {allowed:g}" if allowed else ""))


def test_lower_is_better_rmse_against_the_trivial_model_and_an_upper_bound():
    regression = ("features.task=regression", "features.label=body_mass_g", "features.numeric=[bill_length_mm]",
                  "evaluator.lower_bound=null")
    laxer = _result(RMSE, 805.0, ["evaluator.upper_bound=900"], trivial_value=800.0, task_settings=regression)
    assert laxer.bound_phrases()[0] == "better than the trivial model's 800.0000"
    assert laxer.reasons()[0].startswith("test rmse 805.0000 is no better than the trivial model's 800.0000")
    stricter = _result(RMSE, 705.0, ["evaluator.upper_bound=700"], trivial_value=800.0, task_settings=regression)
    assert stricter.reasons() == ["test rmse 705.0000 is above the upper bound 700 (evaluator.upper_bound; "
                                  "the trivial model scores 800.0000)"]
    assert _result(RMSE, 650.0, ["evaluator.upper_bound=700"], trivial_value=800.0,
                   task_settings=regression).reasons() == []
