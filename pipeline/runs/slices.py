"""What the Evaluator found, per slice, read back from its TFMA output and its slicing record
(components/evaluation/slicing.py): each slice's examples and main metric beside the serving model's, which
slices the gates applied to, and every failed threshold in words naming the slice, its metric and count and
the bound. The summary, the report and `history` share these words."""

from __future__ import annotations

import dataclasses
from typing import Optional

import tensorflow_model_analysis as tfma

from components.evaluation import slicing
from components.evaluation.results import BASELINE, CANDIDATE, EXAMPLE_COUNT, slice_key
from components.evaluation.slice_counts import SliceKey, label
from pipeline.runs import verdict
from trainer.tasks import MAIN_METRICS, MainMetric


@dataclasses.dataclass(frozen=True)
class SliceRow:
    key: SliceKey           # () is the overall slice
    examples: int
    metric: Optional[float]    # the candidate's main metric
    baseline: Optional[float]  # the serving model's, on the same rows; None when nothing served
    gated: bool             # the slice gates applied to it (a slice bound is set, and it has enough examples)
    failed: bool = False    # a threshold on it failed (TFMA's validation)

    @property
    def label(self) -> str:
        return label(self.key)


def main_metric_of(record: Optional[slicing.SliceRecord]) -> Optional[MainMetric]:
    if record is None:
        return None
    return next((m for m in MAIN_METRICS.values() if m.tfma_class == record.plan["metric"]), None)


def failed_slices(validation) -> set[SliceKey]:
    """The slices TFMA's validation failed a threshold on (() for the overall slice)."""
    return {slice_key(s.slice_key) for s in validation.metric_validations_per_slice if s.failures}


def rows(metrics: dict[SliceKey, dict[str, dict[str, float]]], record: Optional[slicing.SliceRecord],
         failed: set[SliceKey] = frozenset()) -> list[SliceRow]:
    """The overall slice, then each slice in the record's order (columns as sliced, most examples first)."""
    metric = main_metric_of(record)
    if metric is None:
        return []
    gated = record.gated_keys()
    keys = [(), *(tuple((c, v) for c, v in k) for k, _ in record.counts)]
    out = []
    for key in keys:
        m = metrics.get(key, {CANDIDATE: {}, BASELINE: {}})
        out.append(SliceRow(key, int(m[CANDIDATE].get(EXAMPLE_COUNT, 0)), m[CANDIDATE].get(metric.key),
                            m[BASELINE].get(metric.key), key in gated, key in failed))
    return out


def describe_failures(validation, metrics: dict[SliceKey, dict[str, dict[str, float]]]) -> list[str]:
    """Every failed threshold of TFMA's ValidationResult. The overall slice's as TFMA words them (`name: message`;
    the summary words the main metric's with its numbers, pipeline/runs/verdict.py); a slice's in words: the
    metric, its value, the slice and its examples, the bound it missed (for a change threshold, the serving
    model's value and the allowed regression)."""
    out = []
    for per_slice in validation.metric_validations_per_slice:
        key = slice_key(per_slice.slice_key)
        if not key:
            out.extend(f"{f.metric_key.name}: {f.message}" for f in per_slice.failures)
            continue
        by_model = metrics.get(key, {CANDIDATE: {}, BASELINE: {}})
        n = by_model[CANDIDATE].get(EXAMPLE_COUNT)
        where = (f"on the {n:.0f} examples of " if n is not None else "on ") + f"slice {label(key)}"
        for failure in per_slice.failures:
            name = failure.metric_key.name
            if failure.message and not failure.HasField("metric_value"):
                out.append(f"{name} {where}: {failure.message.strip()}")
                continue
            out.append(_failure(name, failure, where, by_model))
    if validation.missing_slices:
        out.append("slices the gates name that TFMA did not find in the data: "
                   + "; ".join(str(s).replace("\n", " ") for s in validation.missing_slices))
    return out


def _failure(name: str, failure, where: str, by_model: dict) -> str:
    value = failure.metric_value.double_value.value
    threshold = failure.metric_threshold
    if threshold.HasField("change_threshold"):
        change = threshold.change_threshold
        higher = change.direction == tfma.MetricDirection.HIGHER_IS_BETTER
        allowed = verdict.allowed_regression({"change_absolute" if higher else "change_absolute_max":
                                              change.absolute.value})
        candidate, base = by_model[CANDIDATE].get(name), by_model[BASELINE].get(name)
        setting = "evaluator.slice_max_regression"
        if candidate is None or base is None:
            return f"{name} changed by {value:+.4f} {where} against the serving model: more than {setting} {allowed:g}"
        return (f"{name} {candidate:.4f} {where}, {abs(value):.4f} worse than the serving model's {base:.4f} "
                f"on the same rows: more than {setting} {allowed:g}")
    bounds = threshold.value_threshold
    if bounds.HasField("lower_bound") and value < bounds.lower_bound.value:
        side, limit, missed = "lower", bounds.lower_bound.value, "below"
    elif bounds.HasField("upper_bound") and value > bounds.upper_bound.value:
        side, limit, missed = "upper", bounds.upper_bound.value, "above"
    else:  # NaN, e.g. the AUC of a slice with one class
        return f"{name} {value:.4f} {where}: not within its bounds"
    setting = f"evaluator.slice_{side}_bound"
    return f"{name} {value:.4f} {where}, {missed} {setting} {limit:g}"


def describe_slicing(record: slicing.SliceRecord) -> str:
    """Which slices and why, one line: `island, sex (auto: categorical columns with at most 10 values)`."""
    names = ", ".join(" x ".join(s["columns"]) for s in record.slices) or "none"
    if record.plan["slices"] is None:
        why = f"one per categorical column with at most {record.plan['auto_max_values']} values"
    else:
        why = "evaluator.slices"
    return f"{names} ({why}; {'/'.join(record.splits)} split)"
