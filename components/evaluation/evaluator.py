"""Evaluator whose eager Keras metric updates are not converted by autograph, whose TFMA extractors drop the
features no slice reads before unbatching (components/evaluation/eval_extractors.py), whose candidate must beat
the trivial model on the rows it evaluates (components/evaluation/trivial.py), and whose slices and per-slice
gates are decided when it runs (components/evaluation/slicing.py). (docs/internals.md)"""

from __future__ import annotations

from typing import Any, Optional

import tensorflow as tf
from tfx import types
from tfx.components.evaluator import executor as evaluator_executor
from tfx.components.evaluator.component import Evaluator
from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.types import component_spec, standard_artifacts, standard_component_specs
from tfx.utils import json_utils

from components.evaluation import eval_extractors, slicing, trivial
from components.evaluation.results import CANDIDATE, read_metrics
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
        # Before TFMA: the trivial model's bound on the main metric, so TFMA's blessing already holds it.
        exec_properties, trivial_model = trivial.score(input_dict, exec_properties)
        # The bounds as configured and tightened, before the slicing moves them to per-slice thresholds.
        bounded = exec_properties.get(standard_component_specs.EVAL_CONFIG_KEY)
        plan = slicing.plan_of(exec_properties)
        if plan is not None:
            sliced, record = slicing.prepare(plan, bounded, input_dict, exec_properties)
            exec_properties = {**exec_properties, standard_component_specs.EVAL_CONFIG_KEY: sliced}
        tf.autograph.experimental.do_not_convert(super().Do)(input_dict, output_dict, exec_properties)
        evaluation = output_dict.get(standard_component_specs.EVALUATION_KEY)
        if evaluation:
            trivial.record(evaluation[0], exec_properties, trivial_model)
        blessing = output_dict.get(standard_component_specs.BLESSING_KEY)
        if plan is not None and evaluation:
            slicing.check_counts(record, evaluation[0].uri)
            slicing.keep(evaluation[0], record)
        found = gated_metric(bounded, evaluation[0].uri) if evaluation and blessing else None
        if found is not None:
            blessing[0].set_string_custom_property(MAIN_METRIC, found[0])
            blessing[0].set_float_custom_property(MAIN_METRIC_VALUE, found[1])


def gated_metric(eval_config_json: str, evaluation_uri: str) -> tuple[str, float] | None:
    """(label, candidate value) of the metric the eval config gates on (the one with a threshold), if it is one
    of the tasks' main metrics and TFMA computed it on the overall slice."""
    import tensorflow_model_analysis as tfma
    from google.protobuf import json_format

    task = trivial.gated_task(json_format.Parse(eval_config_json, tfma.EvalConfig()))
    if task is None:
        return None
    main = MAIN_METRICS[task]
    value = read_metrics(evaluation_uri).get((), {}).get(CANDIDATE, {}).get(main.key)
    return None if value is None else (main.label, value)


class EvaluatorSpec(standard_component_specs.EvaluatorSpec):
    """TFX's, with Transform's output (the labels the trivial model is fitted on, train, and scored on), the run's
    TransformGraph (its column roles pick the auto slices) and the slice plan."""
    PARAMETERS = {**standard_component_specs.EvaluatorSpec.PARAMETERS,
                  slicing.SLICING_KEY: component_spec.ExecutionParameter(type=str, optional=True)}
    INPUTS = {**standard_component_specs.EvaluatorSpec.INPUTS,
              trivial.TRANSFORMED_EXAMPLES: component_spec.ChannelParameter(type=standard_artifacts.Examples),
              slicing.TRANSFORM_GRAPH_KEY: component_spec.ChannelParameter(type=standard_artifacts.TransformGraph,
                                                                           optional=True)}


class EagerMetricsEvaluator(Evaluator):
    SPEC_CLASS = EvaluatorSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)

    def __init__(self, examples: types.BaseChannel, model: types.BaseChannel, baseline_model: types.BaseChannel,
                 transformed_examples: types.BaseChannel, eval_config, example_splits: list[str],
                 transform_graph: Optional[types.BaseChannel] = None, slice_plan: Optional[str] = None):
        # The parameters TFX's Evaluator.__init__ sets for these arguments, and the inputs and parameter more.
        base_beam_component.BaseBeamComponent.__init__(self, spec=EvaluatorSpec(
            examples=examples, model=model, baseline_model=baseline_model, eval_config=eval_config,
            fairness_indicator_thresholds=json_utils.dumps(None), example_splits=json_utils.dumps(example_splits),
            evaluation=types.Channel(type=standard_artifacts.ModelEvaluation),
            blessing=types.Channel(type=standard_artifacts.ModelBlessing),
            **{trivial.TRANSFORMED_EXAMPLES: transformed_examples, slicing.TRANSFORM_GRAPH_KEY: transform_graph,
               slicing.SLICING_KEY: slice_plan}))
