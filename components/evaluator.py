"""Evaluator whose eager Keras metric updates are not converted by autograph.

TFMA updates Keras metrics (here SparseCategoricalAccuracy) eagerly, batch by
batch, inside its Beam combiners. tf_keras wraps every metric's update_state
and result in autograph's tf_convert, which converts when no one has said
otherwise, as in eager code: it transpiles the metric's Python source and all
it calls, nearly half of the Evaluator's CPU time on the bundled data.
Eager code runs the same converted or not, so this executor runs TFX's under
`do_not_convert`; a tf.function with autograph on still converts, as it sets
its own status. The status is per thread: Beam's in-memory runner processes
bundles on this thread, while multi-processing workers convert as before.

It also hands TFX's executor a list of extractors (`custom_extractors`, which
TFX's executor looks up by the `custom_extractors` execution property: a
function's import path, tfx/components/util/udf_utils.py get_fn): TFMA's
default ones, with the parsed and transformed features and the serialized
example dropped from each batch right before TFMA splits the batch back into
one dict per example (UnbatchExtractor, util.split_extracts: Python work per
example and per feature). The model has already run and the labels are already
extracted by then; after it, TFMA reads features only to slice on them or for
a metric that asks for them (a query key, a FeaturePreprocessor), so they are
dropped only while the eval config has no slice but the overall one and no
query key. The metrics are the same (tests/test_evaluator.py compares).

Its baseline is the model serving now (components/serving_model.py). With
nothing serving, that artifact is marked empty and holds no model: it is
dropped here, and TFX's executor then evaluates without a baseline (change
thresholds are ignored, as on TFX's own first run: `rubber_stamp`).
"""

from __future__ import annotations

from typing import Any

import apache_beam as beam
import tensorflow as tf
import tensorflow_model_analysis as tfma
from tfx import types
from tfx.components.evaluator import executor as evaluator_executor
from tfx.components.evaluator.component import Evaluator
from tfx.dsl.components.base import executor_spec
from tfx.types import standard_component_specs

from components.serving_model import is_empty

BASELINE = standard_component_specs.BASELINE_MODEL_KEY
CUSTOM_EXTRACTORS = "custom_extractors"  # the execution property TFX's executor reads (udf_utils.get_fn)
# What no metric of ours reads after the model has run: the parsed features, the
# transformed ones (the label is extracted from them before) and the serialized example.
PER_EXAMPLE_UNUSED = (tfma.constants.FEATURES_KEY, tfma.constants.TRANSFORMED_FEATURES_KEY,
                      tfma.constants.INPUT_KEY, tfma.constants.ARROW_RECORD_BATCH_KEY)
DROP_STAGE = "DropFeaturesBeforeUnbatch"


def features_unused(eval_config: tfma.EvalConfig) -> bool:
    """Whether nothing after the labels and predictions reads the features: only the overall
    slice, no cross slices, no query key (the metrics of pipeline/dag/evaluation.py read
    labels, predictions and weights only)."""
    return (all(spec == tfma.SlicingSpec() for spec in eval_config.slicing_specs)
            and not eval_config.cross_slicing_specs
            and not any(spec.query_key for spec in eval_config.metrics_specs))


def _drop_unused(batch: dict) -> dict:
    return {k: v for k, v in batch.items() if k not in PER_EXAMPLE_UNUSED}


def custom_extractors(eval_shared_model, eval_config: tfma.EvalConfig, tensor_adapter_config):
    """TFMA's default extractors, with the features dropped before unbatching when unused."""
    extractors = tfma.default_extractors(eval_shared_model=eval_shared_model, eval_config=eval_config,
                                         tensor_adapter_config=tensor_adapter_config)
    if not features_unused(eval_config):
        return extractors
    names = [x.stage_name for x in extractors]
    unbatch = names.index(tfma.extractors.unbatch_extractor.UNBATCH_EXTRACTOR_STAGE_NAME)
    drop = tfma.extractors.Extractor(stage_name=DROP_STAGE, ptransform=beam.Map(_drop_unused))
    return [*extractors[:unbatch], drop, *extractors[unbatch:]]


class Executor(evaluator_executor.Executor):
    def Do(self, input_dict: dict[str, list[types.Artifact]], output_dict: dict[str, list[types.Artifact]],
           exec_properties: dict[str, Any]) -> None:
        if any(is_empty(m) for m in input_dict.get(BASELINE, [])):
            input_dict = {**input_dict, BASELINE: []}
        exec_properties = {**exec_properties, CUSTOM_EXTRACTORS: f"{__name__}.{custom_extractors.__name__}"}
        tf.autograph.experimental.do_not_convert(super().Do)(input_dict, output_dict, exec_properties)


class EagerMetricsEvaluator(Evaluator):
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)
