"""The history page beside the run reports: <root>/runs/history.html, every run's metric and outcome.

Each run's report.html names it (as text: reports stay self-contained). The plot shows the task's main
eval metric per run, with pushed runs, runs blocked by a gate and runs that pushed nothing marked.
It uses the run report's page template and helpers, so both look the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import matplotlib.pyplot as plt

from pipeline.config import Config, join
from pipeline.runs.history import Row, history, main_metric
from pipeline.runs.report import _PAGE, HISTORY_FILE, _e, _img, _section, _table


def history_path(config: Config) -> str:
    return join(config.pipeline.root_uri, "runs", HISTORY_FILE)


def _plot(rows: list[Row], label: str) -> str:
    fig, ax = plt.subplots(figsize=(9, 3.2))
    xs = list(range(1, len(rows) + 1))
    ax.plot([x for x, r in zip(xs, rows) if r.metric is not None],
            [r.metric for r in rows if r.metric is not None], color="#2e86c1", label=f"eval {label}")
    marks = (("pushed", "^", "#1e8449", lambda r: r.pushed_version),
             ("nothing new / not blessed", "o", "#b9770e", lambda r: not r.pushed_version and r.metric is not None),
             ("blocked by a gate", "x", "#b03a2e", lambda r: r.outcome.startswith("blocked")))
    low = min([r.metric for r in rows if r.metric is not None], default=1.0)
    for label, marker, color, pick in marks:
        chosen = [(x, r) for x, r in zip(xs, rows) if pick(r)]
        if chosen:
            ax.scatter([x for x, _ in chosen], [r.metric if r.metric is not None else low for _, r in chosen],
                       marker=marker, color=color, s=70, label=label, zorder=3)
    ax.set_xlabel("run")
    ax.set_ylabel(f"eval {label}")
    ax.set_xticks(xs)
    ax.legend(loc="lower left", fontsize=8)
    return _img(fig, f"eval {label} over runs")


def render_history(rows: list[Row], pipeline_name: str, metric_label: str = "accuracy") -> str:
    table = _table(["#", "run", "spans", "rows", "drift", metric_label, "blessed", "pushed", "outcome", "serving now"],
                   [[i, r.run_id, r.spans, r.rows if r.rows is not None else "-", r.drift,
                     f"{r.metric:.4f}" if r.metric is not None else "-",
                     {True: "yes", False: "NO", None: "-"}[r.blessed], r.pushed_version or "-", r.outcome,
                     "yes" if r.serving and r.pushed_version else ""] for i, r in enumerate(rows, 1)])
    body = _section("history", "Runs", (_plot(rows, metric_label) if rows else "<p>no runs yet</p>") + table)
    return _PAGE.format(title=_e(f"{pipeline_name}: history of runs"), body=body)


def write_history_page(config: Config, rows: Optional[list[Row]] = None) -> str:
    """rows: history(config), when the caller has read it already."""
    path = history_path(config)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    rows = history(config) if rows is None else rows
    Path(path).write_text(render_history(rows, config.pipeline.name, main_metric(config).label))
    return path
