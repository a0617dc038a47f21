"""The Evaluator's config: the task's main metric gated by the configured bounds (which the Evaluator tightens to
the trivial model's value, components/evaluation/trivial.py) and against the model serving now, plus the task's
other metrics for the record."""

from __future__ import annotations

import tensorflow_model_analysis as tfma

from pipeline.config import Config
from pipeline.dag.slices import change_absolute, plot_metrics
from pipeline.data.checks import require_features
from trainer.export import SERVING_SIGNATURE, TRANSFORM_SIGNATURE
from trainer.features import xf
from trainer.tasks import EXTRA_METRICS, MAIN_METRICS, TASKS, MainMetric


def main_metric(config: Config) -> MainMetric:
    return MAIN_METRICS[require_features(config).task]


def bounds(config: Config) -> tuple[float | None, float | None]:
    """(lower, upper) bound on the main metric as configured. The Evaluator tightens the bound on the better side
    to the trivial model's value on its rows when that is stricter (components/evaluation/trivial.py): without a
    configured bound, that is the bar."""
    return config.evaluator.lower_bound, config.evaluator.upper_bound


def eval_config(config: Config) -> tfma.EvalConfig:
    features = require_features(config)
    metric = main_metric(config)
    lower, upper = bounds(config)
    value = tfma.GenericValueThreshold()
    if lower is not None:
        value.lower_bound.value = lower
    if upper is not None:
        value.upper_bound.value = upper
    direction = (tfma.MetricDirection.HIGHER_IS_BETTER if metric.higher_is_better
                 else tfma.MetricDirection.LOWER_IS_BETTER)
    change = tfma.GenericChangeThreshold(direction=direction, absolute={
        "value": change_absolute(config.evaluator.max_regression, metric.higher_is_better)})
    threshold = tfma.MetricThreshold(change_threshold=change)
    if lower is not None or upper is not None:
        threshold.value_threshold.CopyFrom(value)
    return tfma.EvalConfig(
        model_specs=[tfma.ModelSpec(
            signature_name=SERVING_SIGNATURE,
            preprocessing_function_names=[TRANSFORM_SIGNATURE],
            label_key=xf(features.label),
            prediction_key=TASKS[features.task].prediction_key)],
        slicing_specs=[tfma.SlicingSpec()],
        metrics_specs=[tfma.MetricsSpec(metrics=[
            tfma.MetricConfig(class_name="ExampleCount"),
            tfma.MetricConfig(class_name=metric.tfma_class, threshold=threshold),
            *(tfma.MetricConfig(class_name=name) for name in EXTRA_METRICS[features.task]),
            *plot_metrics(features.task),
        ])])
