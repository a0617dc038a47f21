"""Evaluator whose eager Keras metric updates are not converted by autograph, and
whose TFMA extractors drop the features before unbatching (components/evaluation/eval_extractors.py).
(docs/internals.md)"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from tfx import types
from tfx.components.evaluator import executor as evaluator_executor
from tfx.components.evaluator.component import Evaluator
from tfx.dsl.components.base import executor_spec
from tfx.types import standard_component_specs

from components.evaluation import eval_extractors
from components.serving.serving_model import is_empty
from trainer.tasks import MAIN_METRICS

BASELINE = standard_component_specs.BASELINE_MODEL_KEY
CUSTOM_EXTRACTORS = "custom_extractors"  # the execution property TFX's executor reads (udf_utils.get_fn)
# On the blessing: the gated metric's label (trainer/tasks.py MainMetric.label) and the candidate's value, which
# the Pusher keeps in the version's record, for what a run's notification says it pushed.
MAIN_METRIC, MAIN_METRIC_VALUE = "main_metric", "main_metric_value"
# A module of its own: TFX's executor re-imports (importlib.reload) the module it names.
EXTRACTORS_FN = f"{eval_extractors.__name__}.{eval_extractors.custom_extractors.__name__}"


class Executor(evaluator_executor.Executor):
    def Do(self, input_dict: dict[str, list[types.Artifact]], output_dict: dict[str, list[types.Artifact]],
           exec_properties: dict[str, Any]) -> None:
        if any(is_empty(m) for m in input_dict.get(BASELINE, [])):
            input_dict = {**input_dict, BASELINE: []}
        exec_properties = {**exec_properties, CUSTOM_EXTRACTORS: EXTRACTORS_FN}
        tf.autograph.experimental.do_not_convert(super().Do)(input_dict, output_dict, exec_properties)
        evaluation = output_dict.get(standard_component_specs.EVALUATION_KEY)
        blessing = output_dict.get(standard_component_specs.BLESSING_KEY)
        found = gated_metric(exec_properties[standard_component_specs.EVAL_CONFIG_KEY], evaluation[0].uri) \
            if evaluation and blessing else None
        if found is not None:
            blessing[0].set_string_custom_property(MAIN_METRIC, found[0])
            blessing[0].set_float_custom_property(MAIN_METRIC_VALUE, found[1])


def gated_metric(eval_config_json: str, evaluation_uri: str) -> tuple[str, float] | None:
    """(label, candidate value) of the metric the eval config gates on (the one with a threshold), if it is one
    of the tasks' main metrics and TFMA computed it on the overall slice."""
    import tensorflow_model_analysis as tfma
    from google.protobuf import json_format

    config = json_format.Parse(eval_config_json, tfma.EvalConfig())
    gated = {m.class_name for spec in config.metrics_specs for m in spec.metrics if m.HasField("threshold")}
    main = next((m for m in MAIN_METRICS.values() if m.tfma_class in gated), None)
    if main is None:
        return None
    for per_slice in tfma.load_metrics(evaluation_uri):
        if per_slice.slice_key.single_slice_keys:
            continue
        for kv in per_slice.metric_keys_and_values:
            if kv.key.name == main.key and not kv.key.is_diff and kv.key.model_name != "baseline":
                return main.label, kv.value.double_value.value
    return None


class EagerMetricsEvaluator(Evaluator):
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)
