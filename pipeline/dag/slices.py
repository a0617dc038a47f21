"""What the Evaluator slices and plots, from the config: the slice plan it decides on when it runs
(components/evaluation/slicing.py) and TFMA's plots the report draws (docs/evaluation.md)."""

from __future__ import annotations

import json

import tensorflow_model_analysis as tfma

from components.evaluation.slicing import CALIBRATION_BUCKETS, SlicePlan
from pipeline.config import CHANGE_EPSILON, Config
from pipeline.data.checks import require_features
from trainer.tasks import DECISION_THRESHOLD, MAIN_METRICS


def change_absolute(max_regression: float, higher_is_better: bool) -> float:
    """TFMA's absolute change threshold allowing `max_regression`: signed by the metric's direction and loosened by
    CHANGE_EPSILON, so a candidate exactly as good as the serving model passes."""
    allowed = max_regression + CHANGE_EPSILON
    return -allowed if higher_is_better else allowed


def slice_plan(config: Config) -> str:
    """The Evaluator's slicing parameter (JSON)."""
    features, ev = require_features(config), config.evaluator
    metric = MAIN_METRICS[features.task]
    change = (None if ev.slice_max_regression is None
              else change_absolute(ev.slice_max_regression, metric.higher_is_better))
    return SlicePlan(slices=ev.slice_columns(), auto_max_values=ev.auto_slice_max_values,
                     min_examples=ev.slice_min_examples, metric=metric.tfma_class,
                     higher_is_better=metric.higher_is_better, label=features.label, task=features.task,
                     lower_bound=ev.slice_lower_bound, upper_bound=ev.slice_upper_bound,
                     max_regression=ev.slice_max_regression, change_absolute=change).to_json()


def plot_metrics(task: str) -> list[tfma.MetricConfig]:
    """TFMA's plots of the task, computed with the metrics (the report draws the overall slice's):
    binary, the confusion matrices over thresholds (ROC and precision-recall curves), the matrix at the decision
    threshold and the calibration; multiclass, the confusion matrix; regression, the calibration histogram over
    the label's range (predicted against actual; the Evaluator sets the range when it runs)."""
    if task == "binary":
        # 200 thresholds draw smooth curves; TFMA's default 1000 make the plots file 5 times the size, per slice.
        return [tfma.MetricConfig(class_name="ConfusionMatrixPlot", config=json.dumps({"num_thresholds": 200})),
                tfma.MetricConfig(class_name="ConfusionMatrixAtThresholds",
                                  config=json.dumps({"thresholds": [DECISION_THRESHOLD]})),
                tfma.MetricConfig(class_name="CalibrationPlot",
                                  config=json.dumps({"num_buckets": CALIBRATION_BUCKETS["binary"]}))]
    if task == "multiclass":
        return [tfma.MetricConfig(class_name="MultiClassConfusionMatrixPlot")]
    return [tfma.MetricConfig(class_name="CalibrationPlot",
                              config=json.dumps({"num_buckets": CALIBRATION_BUCKETS["regression"]}))]
