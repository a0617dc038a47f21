"""Evaluator whose eager Keras metric updates are not converted by autograph, and
whose TFMA extractors drop the features before unbatching (components/eval_extractors.py). (docs/internals.md)"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from tfx import types
from tfx.components.evaluator import executor as evaluator_executor
from tfx.components.evaluator.component import Evaluator
from tfx.dsl.components.base import executor_spec
from tfx.types import standard_component_specs

from components import eval_extractors
from components.serving_model import is_empty

BASELINE = standard_component_specs.BASELINE_MODEL_KEY
CUSTOM_EXTRACTORS = "custom_extractors"  # the execution property TFX's executor reads (udf_utils.get_fn)
# A module of its own: TFX's executor re-imports (importlib.reload) the module it names.
EXTRACTORS_FN = f"{eval_extractors.__name__}.{eval_extractors.custom_extractors.__name__}"


class Executor(evaluator_executor.Executor):
    def Do(self, input_dict: dict[str, list[types.Artifact]], output_dict: dict[str, list[types.Artifact]],
           exec_properties: dict[str, Any]) -> None:
        if any(is_empty(m) for m in input_dict.get(BASELINE, [])):
            input_dict = {**input_dict, BASELINE: []}
        exec_properties = {**exec_properties, CUSTOM_EXTRACTORS: EXTRACTORS_FN}
        tf.autograph.experimental.do_not_convert(super().Do)(input_dict, output_dict, exec_properties)


class EagerMetricsEvaluator(Evaluator):
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)
