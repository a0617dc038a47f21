"""`python -m pipeline history`: one row per run of this pipeline root, read back from MLMD.
Why and sources: docs/internals.md."""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

from components import training_record
from components.serving import rollout, serving_dir
from components.serving.model_config import CANARY, STABLE
from pipeline.config import Config
from pipeline.runs import mlmd
from pipeline.runs.cost import TrainerCost, trainer_cost
from pipeline.runs.summary import GATES, RunSummary, summarize
from trainer.tasks import MAIN_METRICS, MainMetric


@dataclasses.dataclass(frozen=True)
class Row:
    run_id: str
    spans: str
    rows: Optional[int]
    drift: str            # ok | accepted | DRIFT | - (not checked)
    metric: Optional[float]  # the task's main metric (trainer/tasks.py) on the eval split
    blessed: Optional[bool]
    pushed_version: Optional[str]
    unchanged_version: Optional[str]
    stopped_by: Optional[str]  # the component that failed, if any
    serving: bool = False  # its version (pushed, or the candidate's) is stable now
    canary: bool = False   # ... is the canary out now
    nothing_new: bool = False  # the Snapshot found nothing new, so nothing after it ran
    removed_debris: tuple[str, ...] = ()  # what killed pushes had left, removed by this run's Pusher
    cost: Optional[TrainerCost] = None  # the trainer's hours and estimated cost (pipeline/runs/cost.py)
    refused: Optional[str] = None  # why the serving gate refused the candidate (components/serving/serving_gate.py)
    # (slice, main metric, examples) of every slice but the overall one (pipeline/runs/slices.py).
    slices: tuple[tuple[str, Optional[float], int], ...] = ()

    @property
    def outcome(self) -> str:
        if self.stopped_by in GATES:
            return f"blocked by {self.stopped_by}"
        if self.stopped_by:
            return f"failed in {self.stopped_by}"
        if self.nothing_new:
            return "nothing new"
        if self.pushed_version:
            return "pushed"
        if self.unchanged_version:
            return "nothing new"
        if self.refused:
            return "refused by serving gate"
        return "not blessed" if self.blessed is False else "not pushed"


def _drift(summary: RunSummary, gate_properties: dict) -> str:
    gate = summary.component("DriftGate")
    if gate is None:
        return "-"
    if gate.state == "failed":
        return "DRIFT"
    # Nothing served yet, or the serving version has no record: the gate passed without comparing (not checked).
    # The key is what a local run's driver recorded (components/training_record.py); without it, it compared.
    key = gate_properties.get(training_record.SERVING_VERSION)
    if key is not None and not training_record.has_baseline(str(key)):
        return "-"
    return "accepted" if gate_properties.get("accepted") else "ok"


def main_metric(config: Config) -> MainMetric:
    return MAIN_METRICS[config.features.task if config.features is not None else "multiclass"]


def _row(reader: mlmd.Reader, summary: RunSummary, serving_version: Optional[str], config: Config,
         canary_version: Optional[str] = None) -> Row:
    snapshot = summary.training_snapshots()[0][1] if summary.training_snapshots() else None
    gate = summary.component("DriftGate")
    gate_properties = mlmd.properties(reader.execution(gate.execution_id)) if gate is not None else {}
    failed = next((c.name for c in summary.components if c.state == "failed"), None)
    return Row(run_id=summary.run_id,
               spans=str(snapshot.properties.get("spans", "")) or "(flat)" if snapshot else "-",
               rows=summary.snapshot_rows, drift=_drift(summary, gate_properties),
               metric=summary.metrics.get(main_metric(config).key),
               blessed=summary.blessed,
               pushed_version=summary.pushed_version,  # this run's own push only (summary.py)
               unchanged_version=summary.unchanged_version, stopped_by=failed, nothing_new=bool(summary.nothing_new),
               removed_debris=summary.removed_debris, refused=summary.refused,
               serving=serving_version is not None and serving_version in (summary.pushed_version,
                                                                            summary.unchanged_version),
               canary=canary_version is not None and canary_version == summary.pushed_version,
               cost=trainer_cost(summary, config),
               slices=tuple((r.label, r.metric, r.examples) for r in summary.slices[1:]))


def history(config: Config) -> list[Row]:
    """Every run of the pipeline on this root, oldest first."""
    if not os.path.exists(config.pipeline.metadata_path):
        return []
    reader = mlmd.Reader.open(config.pipeline.metadata_path)
    served = serving_dir.served(config.pipeline.serving_dir)
    current, canary = served.get(STABLE), served.get(CANARY)
    return [_row(reader, summarize(config.pipeline.metadata_path, config.pipeline.name, run.name, reader),
                 current.name if current else None, config, canary.name if canary else None)
            for run in reader.runs(config.pipeline.name)]


def tuning_cell(r: Row) -> str:
    """The run's tuning: its trials and their hours, "reused", "cached", or "-" without a tuning step."""
    cost = r.cost
    if cost is None or not cost.tuning:
        return "-"
    if cost.tuning.startswith("reused"):
        return "reused"
    if cost.tuning.startswith("the Tuner came from cache"):
        return "cached"
    trials = cost.tuning.split(" ", 1)[0]
    return f"{trials} trials {cost.tuning_hours:.4f}h" if cost.tuning_hours is not None else f"{trials} trials"


def cost_cells(r: Row) -> tuple[str, str]:
    """The trainer-hours and estimated-cost cells of a row ("-" where there is no figure)."""
    hours = r.cost.pool_hours if r.cost is not None else None
    usd = r.cost.usd if r.cost is not None else None
    return (f"{hours:.4f}" if hours is not None else "-"), (f"{usd:.4f}" if usd is not None else "-")


def cost_note(rows: list[Row]) -> str:
    """What the cost columns mean, under the table: which hours, which price (read when, from where)."""
    costs = [r.cost for r in rows if r.cost is not None and r.cost.pool_hours is not None]
    if not costs:
        return "trainer h: no run trained"
    last = costs[-1]
    tuned = ("; tuning: the trials and their hours (same unit), counted in est. $"
             if any(r.cost is not None and r.cost.tuning for r in rows) else "")
    if last.where == "local":
        return ("trainer h: CPU-hours the trainer used (a local run has no worker pool); est. $: none locally"
                + tuned)
    if last.price is None:
        return f"trainer h: pool-hours on preset {last.where}; est. $: no price for it in vertex.prices" + tuned
    p = last.price
    return (f"trainer h: pool-hours on preset {last.where}; est. $: at ${p.usd_per_hour}/h, read {p.read_on} "
            f"from {p.source} (an estimate from a price list, not a bill)" + tuned)


def slice_labels(rows: list[Row]) -> list[str]:
    """Every slice any run evaluated, in the order first seen."""
    return list(dict.fromkeys(label for r in rows for label, _, _ in r.slices))


def slice_cell(r: Row, label: str) -> str:
    found = next(((m, n) for name, m, n in r.slices if name == label), None)
    if found is None:
        return "-"
    return f"{found[0]:.4f}" if found[0] is not None else "n/a"


def format_slices(rows: list[Row], metric_label: str) -> str:
    """Each slice's main metric per run; "" when no run was sliced."""
    labels = slice_labels(rows)
    if not labels:
        return ""
    widths = [max(len(label), 6) for label in labels]
    lines = [f"{metric_label} per slice:", f"{'run':<27} " + " ".join(f"{x:>{w}}" for x, w in zip(labels, widths))]
    lines.extend(f"{r.run_id[:27]:<27} " + " ".join(f"{slice_cell(r, x):>{w}}" for x, w in zip(labels, widths))
                 for r in rows if r.slices)
    return "\n".join(lines)


def format_history(rows: list[Row], metric_label: str = "accuracy") -> str:
    if not rows:
        return "no runs yet"
    header = f"{'run':<27} {'spans':<22} {'rows':>5}  {'drift':<8} {metric_label:>8}  {'blessed':<7} " \
             f"{'pushed':<11} {'outcome':<22} {'tuning':<18} {'trainer h':>9} {'est. $':>8}  serving"
    lines = [header]
    for r in rows:
        acc = f"{r.metric:.4f}" if r.metric is not None else "-"
        blessed = {True: "yes", False: "NO", None: "-"}[r.blessed]
        hours, usd = cost_cells(r)
        lines.append(f"{r.run_id[:27]:<27} {r.spans[:22]:<22} {r.rows if r.rows is not None else '-':>5}  "
                     f"{r.drift:<8} {acc:>8}  {blessed:<7} {r.pushed_version or '-':<11} {r.outcome:<22} "
                     f"{tuning_cell(r):<18} {hours:>9} {usd:>8}  "
                     f"{'<- serving now' if r.serving and r.pushed_version else '<- canary' if r.canary else ''}")
        lines.extend(f"{'':<27} removed what a killed push left: {d}" for d in r.removed_debris)
        if r.refused:
            lines.append(f"{'':<27} serving gate: {r.refused}")
    slices = format_slices(rows, metric_label)
    return "\n".join(lines + [cost_note(rows)] + ([slices] if slices else []))


def label_moves(config: Config) -> str:
    """Every move of TF Serving's labels on this root (components/serving/rollout.py): pushes, promotions, rollbacks."""
    moves = rollout.events(config.pipeline.serving_dir)
    return "\n".join(["label moves:", *(f"  {e.describe()}" for e in moves)]) if moves else ""


def cmd_history(config: Config) -> str:
    return "\n".join(filter(None, (format_history(history(config), main_metric(config).label), label_moves(config))))
