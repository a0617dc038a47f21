"""The trivial model: the task's main metric of a model that reads no feature, scored on the rows the Evaluator
evaluates, and the bound it sets on the candidate before TFMA runs. Why: docs/internals.md."""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any, Optional, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from tfx import types
from tfx.types import standard_component_specs as specs
from tfx.utils import json_utils

from components.errors import EvaluationInputError
from components.evaluation.slice_counts import split_files
from components.splits import TRAIN
from trainer.tasks import MAIN_METRICS, MainMetric

# The Evaluator's input with Transform's output: the labels exactly as TFMA gets them (its label key is the
# transformed label, which TFMA computes with the same Transform graph inside the model).
TRANSFORMED_EXAMPLES = "transformed_examples"
# On the evaluation artifact (what the summary and the report read): the split(s) the metrics and the blessing
# were computed on, the trivial model's main metric on the same rows, and what that model is, in words.
SPLIT, TRIVIAL_VALUE, TRIVIAL_MODEL = "split", "trivial_value", "trivial_model"
# 1 when the trivial model's bound is the one applied (no configured bound was stricter). Recorded, not worked out
# from the value: MLMD's SQLite store keeps a double custom property to 6 significant digits only.
TRIVIAL_SETS_THE_BAR = "trivial_sets_the_bar"
# "Better than the trivial model" must be more than float32's rounding of the same value: TFMA's metrics are
# float32, ours float64 (one row's worth of accuracy is above this up to a million rows).
MARGIN = 1e-6
_BATCH = 4096

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class TrivialModel:
    task: str
    value: float  # the main metric on the evaluated rows
    what: str     # the model, in words
    sets_the_bar: bool = False  # its bound is the one applied (set by score())


def trivial_model(task: str, train_labels: Optional[np.ndarray], labels: Optional[np.ndarray]) -> TrivialModel:
    """The trivial model's main metric on `labels` (the evaluated rows), fitted on `train_labels`.

    binary: one score for every row (any constant, e.g. the train split's positive rate) ranks no row above
    another, so its AUC is 0.5 whatever the rows; no labels are needed. multiclass: always the train split's most
    frequent class (ties: the lowest id), its accuracy. regression: always the train split's mean label, its RMSE.
    """
    if task == "binary":
        return TrivialModel(task, 0.5, "the same score for every row: AUC 0.5")
    if train_labels is None or not train_labels.size:
        raise EvaluationInputError(f"the {TRAIN} split has no labels to fit the trivial model on")
    if labels is None or not labels.size:
        raise EvaluationInputError("the evaluated split has no rows to score the trivial model on")
    if task == "multiclass":
        known = train_labels[train_labels >= 0]
        counts = np.bincount(known) if known.size else np.zeros(1, int)
        majority = int(np.argmax(counts))
        return TrivialModel(task, float(np.mean(labels == majority)),
                            f"always class id {majority}, the {TRAIN} split's most frequent "
                            f"({counts[majority] / train_labels.size:.0%} of its {train_labels.size} rows)")
    if task == "regression":
        for name, values in ((TRAIN, train_labels), ("evaluated", labels)):
            missing = int(np.isnan(values).sum())
            if missing:
                raise EvaluationInputError(f"the {name} split has {missing} rows without a label: the trivial "
                                           "model's RMSE, like TFMA's, is undefined with them")
        mean = float(np.mean(train_labels.astype(np.float64)))
        return TrivialModel(task, float(np.sqrt(np.mean(np.square(labels.astype(np.float64) - mean)))),
                            f"always {mean:.6g}, the {TRAIN} split's mean label")
    raise ValueError(f"no trivial model for task {task!r}")


def bound(value: float, higher_is_better: bool) -> float:
    """The bound a candidate must reach to be better than a trivial model scoring `value`."""
    step = MARGIN * max(1.0, abs(value))
    return value + step if higher_is_better else value - step


def with_trivial_bound(eval_config: tfma.EvalConfig, main: MainMetric, value: float
                       ) -> tuple[tfma.EvalConfig, bool]:
    """`eval_config` with the main metric's value threshold at least as strict as "better than `value`": a
    configured bound that is stricter stays, a laxer one (or none) becomes the trivial model's; and whether it
    did."""
    result = tfma.EvalConfig()
    result.CopyFrom(eval_config)
    floor, raised = bound(value, main.higher_is_better), False
    side = "lower_bound" if main.higher_is_better else "upper_bound"
    for spec in result.metrics_specs:
        for metric in spec.metrics:
            if metric.class_name != main.tfma_class or not metric.HasField("threshold"):
                continue
            threshold = metric.threshold.value_threshold
            configured = getattr(threshold, side).value if threshold.HasField(side) else None
            if configured is None or (configured < floor if main.higher_is_better else configured > floor):
                getattr(threshold, side).value = floor
                raised = True
    return result, raised


def gated_task(eval_config: tfma.EvalConfig) -> Optional[str]:
    """The task whose main metric the eval config gates on (the one with a threshold); None when none is."""
    gated = {m.class_name for spec in eval_config.metrics_specs for m in spec.metrics if m.HasField("threshold")}
    return next((task for task, m in MAIN_METRICS.items() if m.tfma_class in gated), None)


def evaluated_splits(exec_properties: dict[str, Any]) -> list[str]:
    """The splits TFX's Evaluator executor evaluates on: example_splits, or 'eval' when unset (its default)."""
    return json_utils.loads(exec_properties.get(specs.EXAMPLE_SPLITS_KEY, "null") or "null") or ["eval"]


def labels(examples: Sequence[types.Artifact], splits: Sequence[str], label_key: str) -> np.ndarray:
    """The label of every row of `splits` in Transform's output (gzipped TFRecords of tf.Examples)."""
    files = split_files(examples, splits)
    where = f"split {','.join(splits)} of {examples[0].uri}"
    if not files:
        raise EvaluationInputError(f"{where}: no files")
    records = tf.data.TFRecordDataset(files, compression_type="GZIP")
    first = next(iter(records.take(1)), None)
    if first is None:
        raise EvaluationInputError(f"{where}: no rows")
    feature = tf.train.Example.FromString(first.numpy()).features.feature
    kind = feature[label_key].WhichOneof("kind") if label_key in feature else None
    dtype = {"int64_list": tf.int64, "float_list": tf.float32}.get(kind)
    if dtype is None:
        raise EvaluationInputError(f"{where}: the label {label_key!r} is {kind or 'not in the rows'}, "
                                   "not an integer or a float")
    spec = {label_key: tf.io.FixedLenFeature([], dtype)}
    try:
        batches = records.batch(_BATCH).map(lambda x: tf.io.parse_example(x, spec)[label_key])
        return np.concatenate(list(batches.as_numpy_iterator()))
    except tf.errors.InvalidArgumentError as e:
        raise EvaluationInputError(f"{where}: the label {label_key!r} is not one value in every row "
                                   f"({e.message.splitlines()[0]})") from None


def score(input_dict: dict[str, list[types.Artifact]], exec_properties: dict[str, Any]
          ) -> tuple[dict[str, Any], Optional[TrivialModel]]:
    """Before TFMA runs: the trivial model on the rows it evaluates, and the exec properties with its bound on
    the main metric. Unchanged, and None, when the eval config gates on no main metric."""
    raw = exec_properties.get(specs.EVAL_CONFIG_KEY)
    eval_config = json_format.Parse(raw, tfma.EvalConfig()) if raw else None
    task = gated_task(eval_config) if eval_config else None
    if task is None:
        return exec_properties, None
    splits = evaluated_splits(exec_properties)
    if task == "binary":
        trivial = trivial_model(task, None, None)
    else:
        examples = input_dict.get(TRANSFORMED_EXAMPLES)
        if not examples:
            raise EvaluationInputError(f"the Evaluator needs Transform's output as its {TRANSFORMED_EXAMPLES!r} "
                                       "input to score the trivial model")
        label_key = eval_config.model_specs[0].label_key
        trivial = trivial_model(task, labels(examples, [TRAIN], label_key), labels(examples, splits, label_key))
    if not math.isfinite(trivial.value):
        raise EvaluationInputError(f"the trivial model's {MAIN_METRICS[task].label} on split "
                                   f"{','.join(splits)} is {trivial.value}")
    log.info("trivial model on split %s: %s, %s %.6g", ",".join(splits), trivial.what, MAIN_METRICS[task].label,
             trivial.value)
    bounded, raised = with_trivial_bound(eval_config, MAIN_METRICS[task], trivial.value)
    return ({**exec_properties, specs.EVAL_CONFIG_KEY: json_format.MessageToJson(bounded)},
            dataclasses.replace(trivial, sets_the_bar=raised))


def record(evaluation: types.Artifact, exec_properties: dict[str, Any], trivial: Optional[TrivialModel]) -> None:
    """What the summary and the report read off the evaluation artifact (docs/internals.md)."""
    evaluation.set_string_custom_property(SPLIT, ",".join(evaluated_splits(exec_properties)))
    if trivial is not None:
        evaluation.set_float_custom_property(TRIVIAL_VALUE, trivial.value)
        evaluation.set_string_custom_property(TRIVIAL_MODEL, trivial.what)
        evaluation.set_int_custom_property(TRIVIAL_SETS_THE_BAR, int(trivial.sets_the_bar))


@dataclasses.dataclass(frozen=True)
class Recorded:
    """What record() put on an evaluation artifact; None (False) where a run recorded nothing (from before)."""
    split: Optional[str] = None
    value: Optional[float] = None
    what: Optional[str] = None
    sets_the_bar: bool = False

    @classmethod
    def of(cls, properties: dict[str, Any]) -> "Recorded":
        value = properties.get(TRIVIAL_VALUE)
        return cls(properties.get(SPLIT) or None, float(value) if value is not None else None,
                   properties.get(TRIVIAL_MODEL) or None, properties.get(TRIVIAL_SETS_THE_BAR) == 1)
