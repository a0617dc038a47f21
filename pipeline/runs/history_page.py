"""The history page beside the run reports: <root>/runs/history.html, every run's metric and outcome.
Why and sources: docs/internals.md."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import matplotlib.pyplot as plt

from components.serving import rollout
from pipeline.config import Config, join
from pipeline.runs import html as page
from pipeline.runs.history import (
    Row,
    cost_cells,
    cost_note,
    history,
    main_metric,
    slice_cell,
    slice_labels,
    tuning_cell,
)
from pipeline.runs.report import HISTORY_FILE


def history_path(config: Config) -> str:
    return join(config.pipeline.root_uri, "runs", HISTORY_FILE)


def _plot(rows: list[Row], metric_label: str) -> str:
    return page.img(history_figure(rows, metric_label), f"test {metric_label} over runs")


def history_figure(rows: list[Row], metric_label: str):
    """The task's main metric per run as the Evaluator measured it (on the test split; on eval in runs from before
    there was one), each run's outcome marked (blocked runs on the run axis)."""
    fig, ax = plt.subplots(figsize=(9, 3.2))
    xs = list(range(1, len(rows) + 1))
    scored = [(x, r) for x, r in zip(xs, rows) if r.metric is not None]
    ax.plot([x for x, _ in scored], [r.metric for _, r in scored], color="#2e86c1", label=f"test {metric_label}")
    marks = (("pushed", "^", "#1e8449", lambda r: r.pushed_version),
             ("nothing new / not blessed", "o", "#b9770e", lambda r: not r.pushed_version))
    for name, marker, color, pick in marks:
        chosen = [(x, r) for x, r in scored if pick(r)]
        if chosen:
            ax.scatter([x for x, _ in chosen], [r.metric for _, r in chosen],
                       marker=marker, color=color, s=70, label=name, zorder=3)
    # A blocked run has no metric: mark it on the run axis, not at a made-up height on the metric's.
    blocked = [x for x, r in zip(xs, rows) if r.outcome.startswith("blocked")]
    if blocked:
        ax.scatter(blocked, [0.03] * len(blocked), transform=ax.get_xaxis_transform(), marker="x",
                   color="#b03a2e", s=70, label="blocked by a gate (no metric)", zorder=3, clip_on=False)
    ax.set_xlabel("run")
    ax.set_ylabel(f"test {metric_label}")
    ax.set_xticks(xs)
    ax.legend(loc="best", fontsize=8)
    return fig


def slices_figure(rows: list[Row], metric_label: str):
    """Each slice's main metric per run (the run axis as in history_figure); None when no run was sliced."""
    labels = slice_labels(rows)
    if not labels:
        return None
    fig, ax = plt.subplots(figsize=(9, 3.6))
    xs = list(range(1, len(rows) + 1))
    for label in labels:
        points = [(x, m) for x, r in zip(xs, rows) for name, m, _ in r.slices if name == label and m is not None]
        if points:
            ax.plot(*zip(*points), marker="o", markersize=4, label=label)
    ax.set_xlabel("run")
    ax.set_ylabel(f"eval {metric_label}")
    ax.set_xticks(xs)
    ax.set_title(f"{metric_label} per slice")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return fig


def _slices_section(rows: list[Row], metric_label: str) -> str:
    fig = slices_figure(rows, metric_label)
    if fig is None:
        return ""
    labels = slice_labels(rows)
    table = page.table(["#", "run", *labels], [[i, r.run_id, *(slice_cell(r, x) for x in labels)]
                                               for i, r in enumerate(rows, 1) if r.slices])
    return page.section("slices", f"{metric_label} per slice", page.img(fig, f"eval {metric_label} per slice over runs")
                        + table)


def render_history(rows: list[Row], pipeline_name: str, metric_label: str = "accuracy", moves: tuple = ()) -> str:
    """moves: TF Serving's label moves on this root (components/serving/rollout.py Event), oldest first."""
    table = page.table(["#", "run", "spans", "rows", "drift", metric_label, "blessed", "pushed", "outcome", "tuning",
                    "trainer h", "est. $", "serving now"],
                   [[i, r.run_id, r.spans, r.rows if r.rows is not None else "-", r.drift,
                     f"{r.metric:.4f}" if r.metric is not None else "-",
                     {True: "yes", False: "NO", None: "-"}[r.blessed], r.pushed_version or "-", r.outcome,
                     tuning_cell(r), *cost_cells(r),
                     "yes" if r.serving and r.pushed_version else "canary" if r.canary else ""]
                    for i, r in enumerate(rows, 1)])
    body = page.section("history", "Runs", (_plot(rows, metric_label) if rows else "<p>no runs yet</p>") + table
                    + (f"<p class=dim>{page.escape(cost_note(rows))}</p>" if rows else ""))
    body += _slices_section(rows, metric_label)
    if moves:
        body += page.section("labels", "TF Serving's labels: every push, promotion and rollback", page.table(
            ["when", "action", "stable before", "canary before", "stable", "canary", "by"],
            [[e.when, e.action, *("-" if v is None else v for v in (e.before_stable, e.before_canary, e.stable,
                                                                   e.canary)), e.by] for e in moves]))
    return page.PAGE.format(title=page.escape(f"{pipeline_name}: history of runs"), body=body)


def write_history_page(config: Config, rows: Optional[list[Row]] = None) -> str:
    """rows: history(config), when the caller has read it already."""
    path = history_path(config)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    rows = history(config) if rows is None else rows
    moves = tuple(rollout.events(config.pipeline.serving_dir))
    Path(path).write_text(render_history(rows, config.pipeline.name, main_metric(config).label, moves))
    return path
