"""The Evaluator's slices and the gates on each, decided when it runs: the configured slices, or one per
categorical (or boolean) column of the run's column roles with few values in the evaluated split; the task's
main metric bounded, and compared with the model serving now, in every slice with enough examples. All of it is
TFMA's: its SlicingSpecs, its per-slice thresholds (MetricConfig.per_slice_thresholds), its metrics and
validation. What was sliced and why is kept on the evaluation artifact for the summary and report.
(docs/internals.md, docs/evaluation.md)"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Optional

import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from tfx import types
from tfx.types import artifact_utils, standard_component_specs

from components.errors import SliceConfigError, SliceCountMismatch
from components.evaluation import slice_counts, trivial
from components.evaluation.results import CANDIDATE, EXAMPLE_COUNT, read_metrics
from trainer import role_table

# The Evaluator's execution parameter: the SlicePlan as JSON; without it, it evaluates the overall slice only.
SLICING_KEY = "slicing"
# Its optional input: the run's TransformGraph, whose column roles (trainer/role_table.py) pick the auto slices.
TRANSFORM_GRAPH_KEY = "transform_graph"
# On the evaluation artifact: the SliceRecord as JSON.
RECORD_PROPERTY = "slicing"
# Roles whose columns make a slice each by default: a few values that name groups of rows.
SLICEABLE_ROLES = ("categorical", "boolean")
# TFMA's calibration plot buckets: enough for a smooth curve from a few thousand rows.
CALIBRATION_BUCKETS = {"binary": 20, "regression": 500}


@dataclasses.dataclass(frozen=True)
class SlicePlan:
    """What the config asks (pipeline/dag/slices.py builds it), as the Evaluator's parameter."""
    slices: Optional[list[list[str]]]  # None: one per categorical column with at most auto_max_values values
    auto_max_values: int
    min_examples: int
    metric: str          # the main metric's TFMA class (MetricConfig.class_name)
    higher_is_better: bool
    label: str           # the raw label column: never a slice; its range bounds a regression's calibration plot
    task: str
    lower_bound: Optional[float] = None
    upper_bound: Optional[float] = None
    max_regression: Optional[float] = None  # as configured
    change_absolute: Optional[float] = None  # TFMA's change threshold for it (signed, with the epsilon)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "SlicePlan":
        return cls(**json.loads(text))

    @property
    def gated(self) -> bool:
        return any(x is not None for x in (self.lower_bound, self.upper_bound, self.change_absolute))


@dataclasses.dataclass
class SliceRecord:
    """What the Evaluator sliced, gated and left out, and why (on the evaluation artifact)."""
    plan: dict
    splits: list[str]
    rows: int
    # {"columns": [...], "source": "auto" | "config", "values": distinct values in the split}
    slices: list[dict] = dataclasses.field(default_factory=list)
    # Categorical columns not sliced: {"columns": [...], "values": n, "why": ...}
    left_out: list[dict] = dataclasses.field(default_factory=list)
    # Every slice's key ([[column, value], ...]) and its examples, as counted before TFMA ran.
    counts: list[list] = dataclasses.field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "SliceRecord":
        return cls(**json.loads(text))

    @property
    def gated(self) -> bool:
        """A slice bound is set."""
        return SlicePlan(**self.plan).gated

    def gated_keys(self) -> set[slice_counts.SliceKey]:
        """The slices the per-slice gates apply to (none without a slice bound)."""
        if not self.gated:
            return set()
        return {_key(k) for k, n in self.counts if n >= self.plan["min_examples"]}


def _key(pairs) -> slice_counts.SliceKey:
    return tuple((c, v) for c, v in pairs)


def plan_of(exec_properties: dict[str, Any]) -> Optional[SlicePlan]:
    raw = exec_properties.get(SLICING_KEY)
    return SlicePlan.from_json(raw) if raw else None


def sliceable_columns(input_dict: dict[str, list[types.Artifact]], label: str) -> list[str]:
    """The categorical and boolean columns of the run's column roles (Transform's table), the label left out."""
    graphs = input_dict.get(TRANSFORM_GRAPH_KEY) or []
    if not graphs:
        return []
    table = role_table.loads(graphs[0].get_string_custom_property(role_table.ARTIFACT_PROPERTY))
    return [r["column"] for r in table if r["role"] in SLICEABLE_ROLES and r["column"] != label]


def prepare(plan: SlicePlan, eval_config_json: str, input_dict: dict[str, list[types.Artifact]],
            exec_properties: dict[str, Any]) -> tuple[str, SliceRecord]:
    """The eval config TFMA runs with (slices, per-slice thresholds, the calibration range) and the record."""
    splits = trivial.evaluated_splits(exec_properties)
    examples = artifact_utils.get_single_instance(input_dict[standard_component_specs.EXAMPLES_KEY])
    configured = plan.slices is not None
    wanted = plan.slices if configured else [[c] for c in sliceable_columns(input_dict, plan.label)]
    counts = slice_counts.count(
        slice_counts.record_batches(slice_counts.split_files([examples], splits)), wanted,
        limited=() if configured else [c for [c] in wanted], limit=plan.auto_max_values,
        numeric_range=plan.label if plan.task == "regression" else None)
    record = SliceRecord(plan=dataclasses.asdict(plan), splits=list(splits), rows=counts.rows)
    if configured and counts.absent - {plan.label}:
        raise SliceConfigError(f"evaluator.slices names {sorted(counts.absent - {plan.label})}, which no example of "
                               f"the {'/'.join(splits)} split has; its columns: see the run report's Data section")
    chosen = []
    for columns in wanted:
        cols = tuple(sorted(columns))
        values = counts.values(cols[0]) if len(cols) == 1 else len(counts.slices.get(cols, ()))
        if not configured and cols[0] in counts.too_many:
            why = f"more than evaluator.auto_slice_max_values ({plan.auto_max_values}) values"
        elif not configured and values < 2:
            why = "one value at most: the overall slice already"
        else:
            chosen.append(cols)
            record.slices.append({"columns": list(columns), "source": "config" if configured else "auto",
                                  "values": values})
            continue
        record.left_out.append({"columns": list(columns), "values": values, "why": why})
    record.counts = [[list(map(list, key)), n] for cols in chosen for key, n in sorted(
        counts.slices[cols].items(), key=lambda kv: (-kv[1], str(kv[0])))]
    config = json_format.Parse(eval_config_json, tfma.EvalConfig())
    _add_slices(config, chosen)
    _gate(config, plan, record)
    _calibration_range(config, plan, counts)
    return json_format.MessageToJson(config, sort_keys=True), record


def _add_slices(config: tfma.EvalConfig, chosen: list[tuple[str, ...]]) -> None:
    for cols in chosen:
        spec = tfma.SlicingSpec(feature_keys=list(cols))
        if spec not in config.slicing_specs:
            config.slicing_specs.append(spec)
    if any(s != tfma.SlicingSpec() for s in config.slicing_specs):
        # A MetricConfig.threshold applies to every slice (tfma/evaluators/metrics_validator.py, validate_metrics:
        # a threshold without a slicing spec is checked on each slice key): the configured bounds are the
        # overall slice's, so they become per-slice thresholds on the overall slice alone.
        for spec in config.metrics_specs:
            for metric in spec.metrics:
                if metric.HasField("threshold"):
                    metric.per_slice_thresholds.add(slicing_specs=[tfma.SlicingSpec()]).threshold.CopyFrom(
                        metric.threshold)
                    metric.ClearField("threshold")


def _gate(config: tfma.EvalConfig, plan: SlicePlan, record: SliceRecord) -> None:
    """Per-slice thresholds on the main metric, each naming exactly the slices with enough examples."""
    keys = sorted(record.gated_keys(), key=str)
    if not keys:
        return
    threshold = tfma.MetricThreshold()
    if plan.lower_bound is not None or plan.upper_bound is not None:
        if plan.lower_bound is not None:
            threshold.value_threshold.lower_bound.value = plan.lower_bound
        if plan.upper_bound is not None:
            threshold.value_threshold.upper_bound.value = plan.upper_bound
    if plan.change_absolute is not None:
        threshold.change_threshold.direction = (tfma.MetricDirection.HIGHER_IS_BETTER if plan.higher_is_better
                                                else tfma.MetricDirection.LOWER_IS_BETTER)
        threshold.change_threshold.absolute.value = plan.change_absolute
    # Values as strings: TFMA converts both sides alike (slicer_lib._to_type), so "3" matches an int 3.
    specs = [tfma.SlicingSpec(feature_values={c: str(v) for c, v in key}) for key in keys]
    metric = next((m for s in config.metrics_specs for m in s.metrics if m.class_name == plan.metric), None)
    if metric is None:
        raise SliceConfigError(f"the eval config computes no {plan.metric}, the metric the slice gates bound")
    metric.per_slice_thresholds.add(slicing_specs=specs).threshold.CopyFrom(threshold)


def _calibration_range(config: tfma.EvalConfig, plan: SlicePlan, counts: slice_counts.Counts) -> None:
    """A regression's predicted-against-actual plot (TFMA's CalibrationPlot) over the label's range in the split;
    TFMA's default range is [0, 1], a probability's."""
    if plan.task != "regression" or counts.low is None:
        return
    pad = 0.05 * ((counts.high - counts.low) or 1.0)
    for spec in config.metrics_specs:
        for metric in spec.metrics:
            if metric.class_name == "CalibrationPlot":
                metric.config = json.dumps({"num_buckets": CALIBRATION_BUCKETS["regression"],
                                            "left": counts.low - pad, "right": counts.high + pad})


def check_counts(record: SliceRecord, evaluation_uri: str) -> None:
    """Fails closed when TFMA counted a slice's examples otherwise than we did: a gate might then have been
    applied to a slice below evaluator.slice_min_examples, or not to one above it."""
    ours = {_key(k): n for k, n in record.counts}
    theirs = {key: int(m[CANDIDATE][EXAMPLE_COUNT]) for key, m in read_metrics(evaluation_uri).items()
              if key and EXAMPLE_COUNT in m[CANDIDATE]}
    if theirs != ours:
        differ = sorted(set(ours.items()) ^ set(theirs.items()), key=str)[:5]
        raise SliceCountMismatch(f"TFMA counted the slices' examples otherwise than the Evaluator did before it ran "
                             f"(ours, then TFMA's, differing: {differ}): the slice gates can't be trusted")


def keep(evaluation: types.Artifact, record: SliceRecord) -> None:
    evaluation.set_string_custom_property(RECORD_PROPERTY, record.to_json())


def read(evaluation_properties: dict[str, object]) -> Optional[SliceRecord]:
    raw = evaluation_properties.get(RECORD_PROPERTY)
    return SliceRecord.from_json(str(raw)) if raw else None
