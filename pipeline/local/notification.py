"""A local run's outcome sent where the notify section says (components/coordination/notify.py), at the end of `run`."""

from __future__ import annotations

from typing import Optional, TextIO

from components.coordination import notify
from pipeline.config import Config
from pipeline.dag.evaluation import main_metric
from pipeline.runs.summary import RunSummary


def outcome(config: Config, summary: Optional[RunSummary], failed: str = "", error: str = "",
            report: str = "") -> notify.Outcome:
    """What the message says of a run that ended with `summary` (None: it failed before recording one)."""
    metric = main_metric(config) if config.features is not None else None
    value = summary.metrics.get(metric.key) if summary is not None and metric is not None else None
    return notify.Outcome(
        pipeline=config.pipeline.name, run=summary.run_id if summary is not None else "",
        state=notify.FAILED if failed else notify.SUCCEEDED, failed_task=failed, error=error,
        pushed_version=str(summary.pushed_version or "") if summary is not None else "",
        metric=metric.label if value is not None else "", metric_value=value, link=report)


def send(config: Config, result: notify.Outcome, stream: TextIO) -> None:
    """Send it as configured; say what happened to each destination. Never raises (notify.send)."""
    ns = config.notify
    if not ns.enabled or (ns.on == "failure" and result.state == notify.SUCCEEDED):
        return
    for line in notify.send(result, ns.pubsub_topic or "", ns.webhook_url or ""):
        stream.write(f"notify:    {line}\n")
