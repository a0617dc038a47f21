"""The run report's first answer, right under the run's outcome: the model's main metric against its bound, the
model serving now and the trivial model, on the split the Evaluator blessed on; then every slice with its
examples (table and chart) and TFMA's plots of the task (pipeline/runs/eval_plots.py). Why: docs/report.md."""

from __future__ import annotations

from typing import Optional

import matplotlib

matplotlib.use("Agg")  # no display; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402

from components.evaluation.slicing import SliceRecord  # noqa: E402
from components.scoring.model import class_names  # noqa: E402
from components.splits import EVAL  # noqa: E402
from pipeline.runs import eval_plots  # noqa: E402
from pipeline.runs import html as page  # noqa: E402
from pipeline.runs.slices import SliceRow, main_metric_of  # noqa: E402
from pipeline.runs.summary import EXAMPLE_COUNT, RunSummary, main_result, why_not_blessed  # noqa: E402
from pipeline.runs.verdict import MainResult  # noqa: E402
from trainer.tasks import MAIN_METRICS, MainMetric  # noqa: E402


def main_metric(s: RunSummary) -> Optional[MainMetric]:
    """The task's main metric: the one the Evaluator sliced on, else the one it bounded."""
    return main_metric_of(s.slicing) or next((m for m in MAIN_METRICS.values() if m.key in s.thresholds), None)


def split_of(s: RunSummary) -> str:
    """The split the Evaluator's numbers come from ("eval" for runs from before the test split)."""
    return s.eval_split or EVAL


def quality_section(s: RunSummary) -> str:
    main = main_result(s)
    if s.blessed is None or main is None:
        return page.section("quality", "Model quality", "<p>The Evaluator did not run, so there is no measure of "
                                                        "this model's quality.</p>")
    parts = [_headline(s, main)]
    if s.slicing is not None:
        parts.append(_slices(s, main.metric))
    parts.append(_plots(s))
    return page.section("quality", "Model quality", "\n".join(parts))


def _headline(s: RunSummary, main: MainResult) -> str:
    """Blessed or why not, then the main metric against its bar, the serving model and the trivial model."""
    bar = ", ".join(main.bound_phrases()) or "none"
    met = not main.reasons()
    rows = [("this model", f"<b>{main.value:.4f}</b>", f"bar: {page.escape(bar)}: "
             + ('<span class="ok">met</span>' if met else '<span class="bad">missed</span>'))]
    if main.baseline is not None:
        better = main.value > main.baseline if main.metric.higher_is_better else main.value < main.baseline
        how = ("as good as it" if main.value == main.baseline else
               f"{'better' if better else 'worse'} by {abs(main.value - main.baseline):.4f}")
        rows.append(("the model serving now", f"{main.baseline:.4f}", f"this model is {how} on the same rows"))
    else:
        rows.append(("the model serving now", "&ndash;", "none was serving"))
    if main.trivial_value is not None:
        beats = (main.value > main.trivial_value if main.metric.higher_is_better else main.value < main.trivial_value)
        rows.append(("the trivial model", f"{main.trivial_value:.4f}",
                     page.escape(main.trivial_model or "a model that reads no feature") + ", on the same rows: "
                     + ("this model is better" if beats else '<span class="bad">this model is no better</span>')))
    verdict = ('<p class="ok"><b>Blessed</b></p>' if s.blessed else
               '<p class="bad"><b>Not blessed</b>: ' + "; ".join(page.escape(f) for f in why_not_blessed(s, main))
               + "</p>")
    count = s.metrics.get(EXAMPLE_COUNT)
    head = f"{main.metric.label} on the {main.split} split" + (f" ({count:,.0f} examples)" if count else "")
    return verdict + page.table(("", head, ""), rows, escaped=False)


def _slices(s: RunSummary, metric: MainMetric) -> str:
    record = s.slicing
    plan = record.plan
    intro = (f"<p>Slices: {page.escape(', '.join(' x '.join(x['columns']) for x in record.slices) or 'none')} "
             + ("(one per categorical column with at most "
                f"{plan['auto_max_values']} values in the split; <code>evaluator.slices</code> names others)"
                if plan["slices"] is None else "(<code>evaluator.slices</code>)") + ".")
    if record.left_out:
        intro += " Not sliced: " + "; ".join(page.escape(f"{' x '.join(x['columns'])} ({x['why']})")
                                             for x in record.left_out) + "."
    intro += "</p>"
    if len(s.slices) <= 1:
        return intro
    rows = [(page.escape(r.label), f"{r.examples:,}", _num(r.metric), _num(r.baseline), _gate(r, record))
            for r in s.slices]
    table = page.table(("slice", "examples", f"{metric.label} (this model)", "serving model", "slice gate"), rows,
                       escaped=False)
    return intro + page.img(slice_figure(s.slices, metric, plan), f"{metric.label} per slice") + table


def _num(x: Optional[float]) -> str:
    return "&ndash;" if x is None else f"{x:.4f}"


def _gate(r: SliceRow, record: SliceRecord) -> str:
    if not r.key:
        return "the overall bounds"
    if r.failed:
        return '<span class="bad">FAILED</span>'
    if r.gated:
        return '<span class="ok">passed</span>'
    if not record.gated:
        return "no slice bound set"
    return f"not gated: fewer than {record.plan['min_examples']} examples"


def slice_figure(rows: list[SliceRow], metric: MainMetric, plan: dict):
    """The main metric per slice as bars (failed red, gated green, the rest grey), each with its examples, the
    serving model's value as a tick and the slice bounds as lines."""
    fig, ax = plt.subplots(figsize=(9, 0.38 * len(rows) + 1.4))
    shown = [r for r in rows if r.metric is not None]
    names = [r.label for r in shown][::-1]
    values = [r.metric for r in shown][::-1]
    colors = [eval_plots.BAD_COLOR if r.failed else eval_plots.OK_COLOR if r.gated else
              eval_plots.MAIN_COLOR if not r.key else "#a6acaf" for r in shown][::-1]
    ax.barh(names, values, color=colors)
    for y, r in enumerate(shown[::-1]):
        ax.annotate(f"{r.metric:.3f}  ({r.examples:,})", (max(r.metric, r.baseline or 0), y), xytext=(6, 0),
                    textcoords="offset points", va="center", fontsize=8)
        if r.baseline is not None:
            ax.plot([r.baseline], [y], marker="|", markersize=14, color="#222",
                    label="serving model" if y == len(shown) - 1 else None)
    for key, style in (("lower_bound", "--"), ("upper_bound", ":")):
        if plan.get(key) is not None:
            ax.axvline(plan[key], color=eval_plots.BAD_COLOR, linestyle=style,
                       label=f"evaluator.slice_{key} {plan[key]:g}")
    right = max(values + [r.baseline or 0 for r in shown] + [plan.get("upper_bound") or 0,
                                                             plan.get("lower_bound") or 0])
    ax.set_xlim(0, 1.2 * right if right > 0 else 1)
    ax.set_xlabel(f"{metric.label} (examples in brackets)")
    ax.set_title(f"{metric.label} per slice")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return fig


def _class_names(s: RunSummary) -> list[str]:
    """The label's classes in id order: Transform's vocabulary of the label (multiclass), as scoring reads it."""
    graph = s.output("Transform", "TransformGraph")
    if graph is None or s.slicing is None:
        return []
    return class_names(f"{graph.uri}/transform_fn", s.slicing.plan["label"])


def _plots(s: RunSummary) -> str:
    evaluation = s.output("Evaluator", "ModelEvaluation")
    task = s.slicing.plan["task"] if s.slicing is not None else None
    if evaluation is None or task is None:
        return ""
    found = eval_plots.read(evaluation.uri)
    figures = eval_plots.figures(found, task, _class_names(s) if task == "multiclass" else ())
    if not figures:
        return "<p class=dim>TFMA computed no plots in this run.</p>"
    return (f"<h3>Plots (this model, {page.escape(split_of(s))} split, TFMA)</h3>"
            + "".join(page.img(fig, alt) for alt, fig in figures))
