"""components/evaluator.py: TFMA's eager Keras metric updates run without autograph conversion."""

from __future__ import annotations

import inspect

import tensorflow as tf
import tf_keras
from tfx.components.evaluator import executor as tfx_evaluator_executor

from components.evaluator import EagerMetricsEvaluator, Executor


class _WhereItRuns(tf_keras.metrics.Metric):
    """Records the file of the frame its update_state sees. Converted code calls
    everything, inspect.currentframe too, through autograph's converted_call, so
    the frame is then autograph's, not this file's."""

    def __init__(self):
        super().__init__(name="where_it_runs")
        self.total = self.add_weight(name="total", initializer="zeros")
        self.files: list[str] = []

    def update_state(self, values):
        self.files.append(inspect.currentframe().f_code.co_filename)
        if tf.reduce_sum(values) > 0:  # Python control flow on a tensor: what autograph would rewrite
            self.total.assign_add(tf.reduce_sum(values))

    def result(self):
        return self.total


def test_tf_keras_converts_an_eager_metric_update_by_default():
    """The cost the executor avoids: without a status, tf_keras transpiles update_state."""
    metric = _WhereItRuns()
    metric.update_state(tf.constant([1.0, 2.0]))
    assert metric.files[-1] != __file__ and "autograph" in metric.files[-1]
    assert float(metric.result()) == 3.0


def test_executor_runs_tfx_evaluator_with_metric_updates_unconverted(monkeypatch):
    metric = _WhereItRuns()
    seen = {}

    def tfx_do(self, input_dict, output_dict, exec_properties):  # stands in for TFMA's combiners
        metric.update_state(tf.constant([1.0, 2.0]))
        seen["args"] = (input_dict, output_dict, exec_properties)

    monkeypatch.setattr(tfx_evaluator_executor.Executor, "Do", tfx_do)
    Executor().Do({"in": []}, {"out": []}, {"p": 1})
    assert seen["args"] == ({"in": []}, {"out": []}, {"p": 1})
    assert metric.files == [__file__]
    assert float(metric.result()) == 3.0


def test_component_keeps_the_evaluator_interface_with_this_executor():
    assert EagerMetricsEvaluator.EXECUTOR_SPEC.executor_class is Executor
    assert EagerMetricsEvaluator.SPEC_CLASS is tfx_evaluator_executor.standard_component_specs.EvaluatorSpec
