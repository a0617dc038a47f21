"""Evaluator whose eager Keras metric updates are not converted by autograph, and
whose TFMA extractors drop the features before unbatching (components/eval_extractors.py).

TFMA updates Keras metrics (here SparseCategoricalAccuracy) eagerly, batch by
batch, inside its Beam combiners. tf_keras wraps every metric's update_state
and result in autograph's tf_convert, which converts when no one has said
otherwise, as in eager code: it transpiles the metric's Python source and all
it calls, nearly half of the Evaluator's CPU time on the bundled data.
Eager code runs the same converted or not, so this executor runs TFX's under
`do_not_convert`; a tf.function with autograph on still converts, as it sets
its own status. The status is per thread: Beam's in-memory runner processes
bundles on this thread, while multi-processing workers convert as before.

It also names components/eval_extractors.py's extractors to TFX's executor
(the `custom_extractors` execution property, looked up by
tfx/components/util/udf_utils.py get_fn): TFMA's, with the features dropped
before TFMA splits each batch into one dict per example.

Its baseline is the model serving now (components/serving_model.py). With
nothing serving, that artifact is marked empty and holds no model: it is
dropped here, and TFX's executor then evaluates without a baseline (change
thresholds are ignored, as on TFX's own first run: `rubber_stamp`).
"""

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
