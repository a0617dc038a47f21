"""The report's plots of the model's quality, drawn from TFMA's own plots of the overall slice (the Evaluator
computes them, pipeline/dag/slices.py plot_metrics): binary, the ROC and precision-recall curves from the
confusion matrices over thresholds, the confusion matrix at the decision threshold and the calibration;
multiclass, the confusion matrix; regression, predicted against actual and the residuals, from TFMA's
calibration histogram over the label's range (docs/report.md says why not a scatter of every row)."""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import matplotlib

matplotlib.use("Agg")  # no display; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow_model_analysis as tfma  # noqa: E402

from trainer.tasks import DECISION_THRESHOLD  # noqa: E402

AT_THRESHOLDS = "confusion_matrix_at_thresholds"  # the metric (pipeline/dag/slices.py), not the plot
OK_COLOR, BAD_COLOR, MAIN_COLOR = "#1e8449", "#b03a2e", "#2e86c1"


@dataclasses.dataclass
class Plots:
    """TFMA's plots of the candidate on the overall slice; empty lists where TFMA computed none."""
    thresholds: list = dataclasses.field(default_factory=list)   # ConfusionMatrixAtThresholds.Matrix, ascending
    at_decision: Optional[object] = None                         # the Matrix at DECISION_THRESHOLD
    calibration: list = dataclasses.field(default_factory=list)  # CalibrationHistogramBuckets.Bucket
    multiclass: list = dataclasses.field(default_factory=list)   # MultiClassConfusionMatrix entries

    def __bool__(self) -> bool:
        return bool(self.thresholds or self.calibration or self.multiclass or self.at_decision)


def _candidate(key) -> bool:
    return key.model_name != "baseline" and not getattr(key, "is_diff", False)


def read(evaluation_uri: str) -> Plots:
    plots = Plots()
    for per_slice in tfma.load_plots(evaluation_uri):
        if per_slice.slice_key.single_slice_keys or per_slice.HasField("cross_slice_key"):
            continue
        for kv in per_slice.plot_keys_and_values:
            if not _candidate(kv.key):
                continue
            # TFMA writes a model's plots of a slice as one PlotData under a key without a name, a field each.
            value = kv.value
            if value.HasField("confusion_matrix_at_thresholds"):
                plots.thresholds = sorted(value.confusion_matrix_at_thresholds.matrices, key=lambda m: m.threshold)
            if value.HasField("calibration_histogram_buckets"):
                plots.calibration = list(value.calibration_histogram_buckets.buckets)
            if value.HasField("multi_class_confusion_matrix_at_thresholds"):
                matrices = value.multi_class_confusion_matrix_at_thresholds.matrices
                plots.multiclass = list(matrices[0].entries) if matrices else []
    for per_slice in tfma.load_metrics(evaluation_uri):
        if per_slice.slice_key.single_slice_keys or per_slice.HasField("cross_slice_key"):
            continue
        for kv in per_slice.metric_keys_and_values:
            if kv.key.name == AT_THRESHOLDS and _candidate(kv.key) and not kv.key.is_diff:
                plots.at_decision = next((m for m in kv.value.confusion_matrix_at_thresholds.matrices
                                          if abs(m.threshold - DECISION_THRESHOLD) < 1e-6), None)
    return plots


def figures(plots: Plots, task: str, class_names: Sequence[str] = ()) -> list[tuple[str, object]]:
    """(alt text, matplotlib figure) of each plot the task has and TFMA computed."""
    out = []
    if task == "binary" and plots.thresholds:
        out.append(("ROC and precision-recall curves", _curves(plots.thresholds)))
    if task == "binary" and (plots.at_decision is not None or plots.calibration):
        out.append((f"confusion matrix at threshold {DECISION_THRESHOLD} and calibration",
                    _binary_matrix_and_calibration(plots)))
    if task == "multiclass" and plots.multiclass:
        out.append(("confusion matrix", _multiclass(plots.multiclass, class_names)))
    if task == "regression" and plots.calibration:
        out.append(("predicted against actual, and residuals", _regression(plots.calibration)))
    return out


def _curves(matrices) -> object:
    fpr = [m.false_positive_rate for m in matrices]
    tpr = [m.recall for m in matrices]
    # TFMA sets precision to 1 where nothing is predicted positive (no predictions: no false ones).
    pr = [(m.recall, m.precision) for m in matrices if m.true_positives + m.false_positives > 0]
    fig, (roc, prc) = plt.subplots(1, 2, figsize=(10, 4))
    roc.plot(fpr, tpr, color=MAIN_COLOR)
    roc.plot([0, 1], [0, 1], color="#aaa", linestyle=":", label="chance")
    roc.set(xlabel="false positive rate", ylabel="true positive rate (recall)", title="ROC curve",
            xlim=(0, 1), ylim=(0, 1.02))
    roc.legend(loc="lower right", fontsize=8)
    if pr:
        recall, precision = zip(*pr)
        prc.plot(recall, precision, color=MAIN_COLOR)
        positives = matrices[0].true_positives + matrices[0].false_negatives
        total = positives + matrices[0].true_negatives + matrices[0].false_positives
        if total:
            prc.axhline(positives / total, color="#aaa", linestyle=":", label=f"positive rate {positives / total:.2f}")
            prc.legend(loc="lower left", fontsize=8)
    prc.set(xlabel="recall", ylabel="precision", title="precision-recall curve", xlim=(0, 1), ylim=(0, 1.02))
    for ax in (roc, prc):
        ax.grid(alpha=0.3)
    return fig


def _binary_matrix_and_calibration(plots: Plots) -> object:
    fig, (cm, cal) = plt.subplots(1, 2, figsize=(10, 4))
    m = plots.at_decision
    if m is not None:
        _matrix(cm, np.array([[m.true_negatives, m.false_positives], [m.false_negatives, m.true_positives]]),
                ["0", "1"], f"confusion matrix at threshold {DECISION_THRESHOLD}")
    else:
        cm.axis("off")
    _calibration(cal, plots.calibration, "predicted probability", "observed rate of class 1", "calibration",
                 bins=(0.0, 1.0))
    return fig


def _matrix(ax, counts: np.ndarray, names: Sequence[str], title: str) -> None:
    ax.imshow(counts, cmap="Blues")
    top = counts.max() or 1
    for (i, j), n in np.ndenumerate(counts):
        ax.text(j, i, f"{n:.0f}", ha="center", va="center", color="white" if n > top / 2 else "#222")
    ax.set_xticks(range(len(names)), names, rotation=30 if len(names) > 4 else 0)
    ax.set_yticks(range(len(names)), names)
    ax.set(xlabel="predicted", ylabel="actual", title=title)


def _multiclass(entries, class_names: Sequence[str]) -> object:
    size = max([max(e.actual_class_id, e.predicted_class_id) for e in entries] + [len(class_names) - 1]) + 1
    counts = np.zeros((size, size))
    for e in entries:
        if e.actual_class_id >= 0 and e.predicted_class_id >= 0:  # -1: no prediction above the threshold
            counts[e.actual_class_id, e.predicted_class_id] += e.num_weighted_examples
    names = [class_names[i] if i < len(class_names) else str(i) for i in range(size)]
    fig, ax = plt.subplots(figsize=(1.2 * size + 3, 1.0 * size + 2))
    _matrix(ax, counts, names, "confusion matrix")
    return fig


def _means(buckets) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per non-empty bucket: mean prediction, mean label, examples."""
    # Wrapped doubles (google.protobuf.DoubleValue) in TFMA's proto.
    kept = [b for b in buckets if b.num_weighted_examples.value > 0]
    n = np.array([b.num_weighted_examples.value for b in kept])
    predicted = np.array([b.total_weighted_refined_prediction.value for b in kept]) / n if kept else np.array([])
    actual = np.array([b.total_weighted_label.value for b in kept]) / n if kept else np.array([])
    return predicted, actual, n


def _calibration(ax, buckets, xlabel: str, ylabel: str, title: str, bins: Optional[tuple] = None) -> None:
    predicted, actual, n = _means(buckets)
    if not len(n):
        ax.axis("off")
        return
    ax.scatter(predicted, actual, s=20 + 180 * n / n.max(), color=MAIN_COLOR, alpha=0.7, label="rows by prediction")
    low, high = bins or (min(predicted.min(), actual.min()), max(predicted.max(), actual.max()))
    ax.plot([low, high], [low, high], color="#aaa", linestyle=":", label="perfect")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)


def _regression(buckets) -> object:
    fig, (scatter, residual) = plt.subplots(1, 2, figsize=(10, 4))
    _calibration(scatter, buckets, "predicted", "actual (mean of the rows at that prediction)",
                 "predicted against actual")
    predicted, actual, n = _means(buckets)
    if len(n):
        residual.scatter(predicted, actual - predicted, s=20 + 180 * n / n.max(), color=MAIN_COLOR, alpha=0.7)
        residual.axhline(0, color="#aaa", linestyle=":")
    residual.set(xlabel="predicted", ylabel="actual - predicted", title="residuals")
    residual.grid(alpha=0.3)
    return fig
