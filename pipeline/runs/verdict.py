"""What the Evaluator decided, in the words the summary and the report share: the thresholds it applied (read
from the eval config TFMA wrote beside its results, the trivial model's bound included), the main metric against
them, and why a candidate was not blessed, with the numbers. (docs/internals.md)"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Optional

import tensorflow_model_analysis as tfma
from google.protobuf import json_format

from pipeline.config import CHANGE_EPSILON
from trainer.tasks import MainMetric


def thresholds(eval_config: Optional[tfma.EvalConfig]) -> dict[str, dict[str, float]]:
    """Metric name -> its value bounds (lower_bound, upper_bound) and change bound (change_absolute, or
    change_absolute_max for a lower-is-better metric)."""
    result: dict[str, dict[str, float]] = {}
    for spec in eval_config.metrics_specs if eval_config is not None else ():
        for metric in spec.metrics:
            # With slices, the Evaluator gives TFMA the overall bounds as per-slice thresholds on the overall slice
            # (components/evaluation/slicing.py); the slices' own are per-slice thresholds on other slices.
            threshold = metric.threshold if metric.HasField("threshold") else next(
                (t.threshold for t in metric.per_slice_thresholds if list(t.slicing_specs) == [tfma.SlicingSpec()]),
                metric.threshold)
            value, change = threshold.value_threshold, threshold.change_threshold
            bounds = {}
            if value.HasField("lower_bound"):
                bounds["lower_bound"] = value.lower_bound.value
            if value.HasField("upper_bound"):
                bounds["upper_bound"] = value.upper_bound.value
            if change.HasField("absolute"):
                lower_is_better = change.direction == tfma.MetricDirection.LOWER_IS_BETTER
                bounds["change_absolute_max" if lower_is_better else "change_absolute"] = change.absolute.value
            if bounds:
                # Results are keyed by the metric's name: snake_case of its class unless renamed.
                name = json.loads(metric.config or "{}").get("name") or re.sub(
                    r"(?<=[a-z0-9])(?=[A-Z])", "_", metric.class_name).lower()
                result[name] = bounds
    return result


def applied_eval_config(evaluation_uri: str) -> Optional[tfma.EvalConfig]:
    """The eval config TFMA ran with, as it wrote it beside the metrics (with the Evaluator's trivial bound);
    None when it wrote none."""
    from tensorflow_model_analysis.writers import eval_config_writer

    try:
        return eval_config_writer.load_eval_run(evaluation_uri)[0]
    except (OSError, ValueError, json_format.ParseError):
        return None


def parse_eval_config(raw: str) -> tfma.EvalConfig:
    return json_format.Parse(raw, tfma.EvalConfig(), ignore_unknown_fields=True)


def allowed_regression(bounds: dict[str, float]) -> Optional[float]:
    """evaluator.max_regression as the Evaluator applied it; None without a change threshold."""
    # Rounded: the threshold is -(allowed regression) - CHANGE_EPSILON in floating point
    # (+(allowed) + CHANGE_EPSILON for a lower-is-better metric).
    if "change_absolute" in bounds:
        return round(-bounds["change_absolute"] - CHANGE_EPSILON, 9)
    if "change_absolute_max" in bounds:
        return round(bounds["change_absolute_max"] - CHANGE_EPSILON, 9)
    return None


def no_worse_than_serving(allowed: float) -> str:
    return "no worse than the serving model" + (f" by more than {allowed:g}" if allowed else "")


@dataclasses.dataclass(frozen=True)
class MainResult:
    """The main metric of one evaluation with everything it was judged against."""
    metric: MainMetric
    split: str                      # where the value comes from ("test"; "eval" for runs before the test split)
    value: float
    bounds: dict[str, float]        # as thresholds() gives them for this metric
    baseline: Optional[float]       # the serving model's value; None without one
    trivial_value: Optional[float]  # None for runs before the trivial model
    trivial_model: Optional[str] = None
    trivial_sets_the_bar: bool = False  # the bound on the better side is the trivial model's

    @property
    def better_side(self) -> str:
        return "lower_bound" if self.metric.higher_is_better else "upper_bound"

    def bound_phrases(self) -> list[str]:
        """The value bounds and the change bound, as the summary and the report say them."""
        parts = []
        for side in ("lower_bound", "upper_bound"):
            if side not in self.bounds:
                continue
            if side == self.better_side and self.trivial_sets_the_bar:
                parts.append(f"better than the trivial model's {self.trivial_value:.4f}")
            else:
                parts.append(f"{side.replace('_', ' ')} {self.bounds[side]:.6g}")
        allowed = allowed_regression(self.bounds)
        if allowed is not None and self.baseline is not None:  # with nothing serving, TFMA drops it too
            parts.append(no_worse_than_serving(allowed))
        return parts

    def line(self) -> str:
        """`test accuracy: 0.9710 (trivial model 0.4412; lower bound 0.9; serving model 0.9710, ...)`."""
        parts = [f"trivial model {self.trivial_value:.4f}"] if self.trivial_value is not None else []
        parts.append(f"serving model {self.baseline:.4f}" if self.baseline is not None else "no model serving yet")
        parts.append("bar: " + ", ".join(self.bound_phrases() or ["none"]))
        return f"{self.split} {self.metric.label}: {self.value:.4f} ({'; '.join(parts)})"

    def reasons(self) -> list[str]:
        """Why this value fails its thresholds, with the numbers; [] when it meets them all."""
        name, value, found = f"{self.split} {self.metric.label}", self.value, []
        lower, upper = self.bounds.get("lower_bound"), self.bounds.get("upper_bound")
        for side, bound, fails in (("lower_bound", lower, lower is not None and value < lower),
                                   ("upper_bound", upper, upper is not None and value > upper)):
            if not fails:
                continue
            if side == self.better_side and self.trivial_sets_the_bar:
                found.append(f"{name} {value:.4f} is no better than the trivial model's {self.trivial_value:.4f} "
                             f"({self.trivial_model or 'a model that reads no feature'}; the bound is "
                             f"{bound:.6g})")
            else:
                beside = f"; the trivial model scores {self.trivial_value:.4f}" if self.trivial_value is not None \
                    else ""
                found.append(f"{name} {value:.4f} is {'below' if side == 'lower_bound' else 'above'} the "
                             f"{side.replace('_', ' ')} {bound:.6g} (evaluator.{side}{beside})")
        allowed = allowed_regression(self.bounds)
        if self.baseline is not None and allowed is not None:
            worse_by = (self.baseline - value) if self.metric.higher_is_better else (value - self.baseline)
            if worse_by > allowed + CHANGE_EPSILON:
                found.append(f"{name} {value:.4f} is worse than the serving model's {self.baseline:.4f}"
                             + (f" by more than {allowed:g} (evaluator.max_regression)" if allowed else ""))
        return found
