"""The report's quality part (pipeline/runs/quality_report.py, eval_plots.py) and the history's slices, on made-up
summaries and TFMA plot protos: what each says and draws follows the numbers it is given."""

from __future__ import annotations

import html
import re

import pytest
from tensorflow_model_analysis.proto import metrics_for_slice_pb2

from components.evaluation import slicing
from pipeline.runs import eval_plots
from pipeline.runs.history import Row, format_history
from pipeline.runs.history_page import render_history, slices_figure
from pipeline.runs.quality_report import quality_section, slice_figure
from pipeline.runs.slices import SliceRow
from pipeline.runs.summary import RunSummary
from trainer.tasks import MAIN_METRICS

AUC = MAIN_METRICS["binary"]
PLAN = dict(slices=None, auto_max_values=10, min_examples=20, metric="AUC", higher_is_better=True, label="bought",
            task="binary", lower_bound=0.6, upper_bound=None, max_regression=None, change_absolute=None)


def _summary(blessed=False, baseline=0.9, **extra) -> RunSummary:
    record = slicing.SliceRecord(plan=PLAN, splits=["eval"], rows=300,
                                 slices=[{"columns": ["region"], "source": "auto", "values": 3}],
                                 left_out=[{"columns": ["city"], "values": 57, "why": "more than 10 values"}])
    s = RunSummary(run_id="r", components=[], metrics={"auc": 0.85, "example_count": 300.0},
                   baseline_metrics={"auc": baseline} if baseline is not None else {}, blessed=blessed,
                   validation_failures=[] if blessed else ["auc 0.4000 on the 150 examples of slice region=west, "
                                                           "below evaluator.slice_lower_bound 0.6"],
                   pushed_path=None, pushed_version=None, thresholds={"auc": {"lower_bound": 0.7}},
                   slicing=record, slices=[
                       SliceRow((), 300, 0.85, baseline, False),
                       SliceRow((("region", "west"),), 150, 0.40, 0.45, True, failed=True),
                       SliceRow((("region", "east"),), 140, 0.97, 0.96, True),
                       SliceRow((("region", "tiny"),), 10, 0.20, None, False)])
    for k, v in extra.items():
        setattr(s, k, v)
    return s


def _rows(section: str) -> list[list[str]]:
    return [[html.unescape(re.sub("<[^>]+>", "", c)) for c in re.findall(r"<td>(.*?)</td>", r)]
            for r in re.findall(r"<tr>(.*?)</tr>", section)]


def test_quality_first_the_metric_its_bound_and_the_serving_model_then_every_slice():
    section = quality_section(_summary())
    rows = _rows(section)
    assert ["this model", "0.8500", "bar: lower bound 0.7: met"] in rows
    assert ["the model serving now", "0.9000", "this model is worse by 0.0500 on the same rows"] in rows
    assert "auc on the eval split (300 examples)" in section  # a run from before the test split
    assert "Not blessed" in section and "slice region=west" in section
    assert ["region=west", "150", "0.4000", "0.4500", "FAILED"] in rows
    assert ["region=east", "140", "0.9700", "0.9600", "passed"] in rows
    assert ["region=tiny", "10", "0.2000", "–", "not gated: fewer than 20 examples"] in rows
    assert "Not sliced: city (more than 10 values)" in html.unescape(section)
    assert "trivial model" not in section  # not recorded by this run


def test_the_trivial_model_and_the_split_show_when_the_run_recorded_them():
    rows = _rows(quality_section(_summary(trivial_metric=0.5, eval_split="test", baseline=None,
                                          trivial_model="the same score for every row: AUC 0.5")))
    assert ["the trivial model", "0.5000", "the same score for every row: AUC 0.5, on the same rows: this model is "
                                           "better"] in rows
    assert ["the model serving now", "–", "none was serving"] in rows
    assert "auc on the test split" in quality_section(_summary(eval_split="test"))
    [trivial] = [r for r in _rows(quality_section(_summary(trivial_metric=0.9))) if r[:1] == ["the trivial model"]]
    assert trivial[-1].endswith("this model is no better")


def test_the_slice_chart_colours_each_slice_by_its_gate_and_draws_the_bound():
    fig = slice_figure(_summary().slices, AUC, PLAN)
    [ax] = fig.axes
    bars = {t.get_text(): p for t, p in zip(ax.get_yticklabels(), ax.patches)}
    assert {k: round(p.get_width(), 2) for k, p in bars.items()} == {
        "overall": 0.85, "region=west": 0.4, "region=east": 0.97, "region=tiny": 0.2}
    colour = {k: matplotlib_hex(p.get_facecolor()) for k, p in bars.items()}
    assert colour["region=west"] == eval_plots.BAD_COLOR and colour["region=east"] == eval_plots.OK_COLOR
    assert colour["region=tiny"] == "#a6acaf"
    assert [x.get_xdata()[0] for x in ax.lines if x.get_linestyle() == "--"] == [0.6]
    assert "evaluator.slice_lower_bound 0.6" in [t.get_text() for t in ax.get_legend().get_texts()]


def matplotlib_hex(rgba) -> str:
    from matplotlib.colors import to_hex

    return to_hex(rgba)


def _binary_plots() -> eval_plots.Plots:
    m = metrics_for_slice_pb2.ConfusionMatrixAtThresholds()
    for t, tp, fp, tn, fn in ((0.0, 50, 50, 0, 0), (0.5, 40, 10, 40, 10), (1.0, 0, 0, 50, 50)):
        x = m.matrices.add(threshold=t, true_positives=tp, false_positives=fp, true_negatives=tn, false_negatives=fn)
        x.recall, x.false_positive_rate = tp / 50, fp / 50
        x.precision = tp / (tp + fp) if tp + fp else 1.0
    cal = metrics_for_slice_pb2.CalibrationHistogramBuckets()
    for lo, n, label, pred in ((0.0, 40, 8, 6), (0.5, 60, 42, 45)):
        b = cal.buckets.add()
        b.lower_threshold_inclusive, b.upper_threshold_exclusive = lo, lo + 0.5
        b.num_weighted_examples.value, b.total_weighted_label.value = n, label
        b.total_weighted_refined_prediction.value = pred
    return eval_plots.Plots(thresholds=list(m.matrices), at_decision=m.matrices[1], calibration=list(cal.buckets))


def test_binary_plots_draw_roc_and_precision_recall_from_tfmas_matrices_and_the_decision_matrix():
    figures = dict(eval_plots.figures(_binary_plots(), "binary"))
    assert list(figures) == ["ROC and precision-recall curves", "confusion matrix at threshold 0.5 and calibration"]
    roc, pr = figures["ROC and precision-recall curves"].axes
    assert list(roc.lines[0].get_xdata()) == [1.0, 0.2, 0.0] and list(roc.lines[0].get_ydata()) == [1.0, 0.8, 0.0]
    assert list(pr.lines[0].get_xdata()) == [1.0, 0.8]  # nothing predicted positive at 1.0: no precision there
    matrix, calibration = figures["confusion matrix at threshold 0.5 and calibration"].axes
    assert [t.get_text() for t in matrix.texts] == ["40", "10", "10", "40"]  # TN FP / FN TP
    points = calibration.collections[0].get_offsets()
    assert points.tolist() == [[6 / 40, 8 / 40], [45 / 60, 42 / 60]]


def test_regression_plots_predicted_against_actual_and_residuals_per_bucket():
    plots = _binary_plots()
    [(alt, fig)] = eval_plots.figures(eval_plots.Plots(calibration=plots.calibration), "regression")
    assert alt == "predicted against actual, and residuals"
    scatter, residual = fig.axes
    assert residual.collections[0].get_offsets().ravel().tolist() == pytest.approx([6 / 40, 2 / 40, 45 / 60, -3 / 60])
    assert eval_plots.figures(eval_plots.Plots(), "regression") == []


def test_multiclass_confusion_matrix_names_the_classes():
    m = metrics_for_slice_pb2.MultiClassConfusionMatrixAtThresholds.MultiClassConfusionMatrix()
    for actual, predicted, n in ((0, 0, 30), (1, 1, 20), (1, 0, 3), (2, 2, 25)):
        m.entries.add(actual_class_id=actual, predicted_class_id=predicted, num_weighted_examples=n)
    [(alt, fig)] = eval_plots.figures(eval_plots.Plots(multiclass=list(m.entries)), "multiclass",
                                      ["Adelie", "Gentoo", "Chinstrap"])
    [ax] = fig.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["Adelie", "Gentoo", "Chinstrap"]
    assert [t.get_text() for t in ax.texts] == ["30", "0", "0", "3", "20", "0", "0", "0", "25"]


def _row(run_id, slices):
    return Row(run_id=run_id, spans="-", rows=None, drift="-", metric=0.9, blessed=True, pushed_version=None,
               unchanged_version=None, stopped_by=None, slices=slices)


def test_history_shows_each_slices_metric_over_runs():
    rows = [_row("run-1", (("region=west", 0.45, 150), ("region=east", 0.96, 140))),
            _row("run-2", ()),
            _row("run-3", (("region=west", 0.40, 150), ("region=north", None, 3)))]
    text = format_history(rows, "auc")
    table = text.split("auc per slice:\n", 1)[1].splitlines()
    assert table[0].split() == ["run", "region=west", "region=east", "region=north"]
    assert table[1].split() == ["run-1", "0.4500", "0.9600", "-"]
    assert table[2].split() == ["run-3", "0.4000", "-", "n/a"]
    fig = slices_figure(rows, "auc")
    lines = {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in fig.axes[0].lines}
    assert lines == {"region=west": ([1, 3], [0.45, 0.40]), "region=east": ([1], [0.96])}
    assert '<section id="slices">' in render_history(rows, "shop", "auc")
    assert "per slice" not in format_history([_row("run-2", ())], "auc")
