"""The run report: one self-contained report.html per run, images inline. Why: docs/internals.md."""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Optional

import matplotlib

matplotlib.use("Agg")  # no display; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow_metadata.proto.v0 import statistics_pb2  # noqa: E402

from components.data.snapshot.component import TRAINING_KEY  # noqa: E402
from components.data.snapshot.newness import NEW_SPAN  # noqa: E402
from components.scoring import keys as scoring_keys  # noqa: E402
from components.splits import EVAL  # noqa: E402
from pipeline.config import Config, join  # noqa: E402
from pipeline.runs import html as page  # noqa: E402
from pipeline.runs import mlmd  # noqa: E402
from pipeline.runs.cost import TrainerCost, trainer_cost  # noqa: E402
from pipeline.runs.quality_report import main_metric, quality_section  # noqa: E402
from pipeline.runs.summary import (  # noqa: E402
    COMPONENTS_TIME,
    EXAMPLE_COUNT,
    GATES,
    RunSummary,
    main_result,
    metric_text,
    push_outcome,
    summarize,
    why_not_blessed,
)
from pipeline.runs.tuning_report import tuning_section  # noqa: E402
from pipeline.runs.verdict import allowed_regression, no_worse_than_serving  # noqa: E402
from trainer import role_table  # noqa: E402

REPORT_FILE = "report.html"
# Beside the runs' directories: <root>/runs/history.html (history_page.py).
HISTORY_FILE = "history.html"
# A snapshot's properties that say nothing to a reader: TFX's bookkeeping, and the internal run condition and key
# (the newness and the nothing-new reason have their own lines in the Run section).
_SNAPSHOT_INTERNAL = ("tfx_version", "is_external", NEW_SPAN, TRAINING_KEY)
_CONDITION_VALUE_TYPE = "Integer"  # the Snapshot's new_data output (components/data/snapshot/component.py)


def run_dir(config: Config, run_id: str) -> str:
    """Where a run's own files (its report) live: <root>/runs/<run id>/."""
    if not run_id or "/" in run_id or run_id in (".", ".."):
        raise ValueError(f"run id {run_id!r} is not a valid directory name")
    return join(config.pipeline.root_uri, "runs", mlmd.dir_name(run_id))


def write_report(config: Config, run_id: Optional[str] = None, summary: Optional[RunSummary] = None) -> str:
    """Render the report of `run_id` (default: the latest run) and return its path."""
    if summary is None:
        if not os.path.exists(config.pipeline.metadata_path):
            raise LookupError(f"no metadata store at {config.pipeline.metadata_path}: no run has happened there yet")
        summary = summarize(config.pipeline.metadata_path, config.pipeline.name, run_id)
    out_dir = run_dir(config, summary.run_id)
    os.makedirs(out_dir, exist_ok=True)
    path = join(out_dir, REPORT_FILE)
    Path(path).write_text(render(summary, config.pipeline.name, trainer_cost(summary, config)))
    return path


def render(summary: RunSummary, pipeline_name: str, cost: Optional[TrainerCost] = None) -> str:
    # The answer a reader opened it for first: what happened, how good the model is (per slice, with plots);
    # then how it was trained and evaluated; then how the run went and the data it read, the long tables folded.
    sections = [
        _overview(summary, pipeline_name, cost),
        quality_section(summary),
        _evaluation(summary),
        _training(summary),
        tuning_section(summary),
        *([_inference(summary)] if summary.predictions is not None else []),
        _components(summary),
        _data(summary),
        _snapshot(summary),
    ]
    return page.PAGE.format(title=page.escape(f"{pipeline_name} run {summary.run_id}"), body="\n".join(sections))


# -- sections ---------------------------------------------------------------

def _overview(s: RunSummary, pipeline_name: str, cost: Optional[TrainerCost]) -> str:
    failed = [c.name for c in s.components if c.state == "failed"]
    status = (f"{'blocked' if set(failed) & set(GATES) else 'failed'} in {', '.join(failed)}" if failed
              else s.nothing_new or "complete")
    # The summary's own words: a run that pushed nothing says so, even when an earlier push is serving.
    rows = [("pipeline", pipeline_name), ("run", s.run_id), ("status", status),
            ("blessed", {True: "yes", False: "NO", None: "not evaluated"}[s.blessed]),
            ("pushed", push_outcome(s))]
    if s.serving_gate:
        rows.append(("serving gate", s.serving_gate))
    if s.serving_labels:
        rows.append(("serving labels after the push", s.serving_labels))
    if cost is not None:
        rows.append(("training cost", cost.describe()))
    return page.section("overview", "Run", page.table(("", ""), rows)
                    # Text, not a link: the report stays self-contained (no href outside itself).
                    + f"<p class=dim>History of all runs on this root: ../{HISTORY_FILE}</p>")


def _components(s: RunSummary) -> str:
    rows = [(c.name, c.state, f"{c.seconds:.1f}") for c in s.components]
    rows.append((COMPONENTS_TIME, "", f"{sum(c.seconds for c in s.components):.1f}"))
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(s.components) + 1))
    names = [c.name for c in s.components][::-1]
    ax.barh(names, [c.seconds for c in s.components][::-1],
            color=["#c0392b" if c.state == "failed" else "#2e86c1" for c in s.components][::-1])
    ax.set_xlabel("seconds")
    ax.set_title("time per component")
    return page.section("components", "Components",
                    page.img(fig, "time per component") + page.table(("component", "state", "seconds"), rows))


def _data(s: RunSummary) -> str:
    stats = s.output("StatisticsGen", "ExampleStatistics")
    if stats is None:
        return page.section("data", "Data", "<p>No statistics were computed in this run.</p>")
    parts = []
    for split_dir in sorted(glob.glob(os.path.join(stats.uri, "Split-*"))):
        split = os.path.basename(split_dir)[len("Split-"):]
        path = os.path.join(split_dir, "FeatureStats.pb")
        if not os.path.exists(path):
            continue
        stats_list = statistics_pb2.DatasetFeatureStatisticsList.FromString(Path(path).read_bytes())
        for dataset in stats_list.datasets:
            parts.append(page.folded(f"{page.escape(split)}: {dataset.num_examples:,} examples, "
                                     f"{len(dataset.features)} columns", _featuretable(dataset)))
    parts.append(_columns(s))
    validated = s.output("ExampleValidator", "ExampleAnomalies") is not None
    parts.append("<h3>Anomalies (data against the schema)</h3>" + (
        _anomalies(s) if validated else "<p>No validation ran in this run.</p>"))
    return page.section("data", "Data", "\n".join(parts))


def _columns(s: RunSummary) -> str:
    """How the run read each column: the table Transform kept (components/data/column_roles.py)."""
    graph = s.output("Transform", "TransformGraph")
    table = role_table.loads(str(graph.properties.get(role_table.ARTIFACT_PROPERTY, ""))) if graph is not None else []
    if not table:
        return "<h3>Columns as the model reads them</h3><p>Not recorded (Transform did not run in this run).</p>"
    return page.folded(f"Columns as the model reads them ({len(table)})",
                       page.table(role_table.HEADER, [tuple(r[h] for h in role_table.HEADER) for r in table]))


def _featuretable(dataset: statistics_pb2.DatasetFeatureStatistics) -> str:
    rows = []
    for f in dataset.features:
        name = ".".join(f.path.step) or f.name
        kind = statistics_pb2.FeatureNameStatistics.Type.Name(f.type).lower()
        if f.HasField("num_stats"):
            n = f.num_stats
            common, detail = n.common_stats, f"mean {n.mean:.4g}, std {n.std_dev:.4g}, min {n.min:.4g}, max {n.max:.4g}"
        elif f.HasField("string_stats"):
            st = f.string_stats
            top = ", ".join(f"{v.value} ({v.frequency:.0f})" for v in st.top_values[:5])
            common, detail = st.common_stats, f"{st.unique} unique; top: {top}"
        else:
            continue
        total = common.num_non_missing + common.num_missing
        # An empty CSV cell becomes a present feature with no values, which
        # TFDV counts as non-missing: for single-valued features count it here.
        empty = common.num_non_missing - common.tot_num_values if common.max_num_values <= 1 else 0
        missing = 100 * (common.num_missing + empty) / total if total else 0.0
        rows.append((name, kind, f"{missing:.1f}%", detail))
    return page.table(("feature", "type", "missing or empty", "distribution"), rows)


def _anomalies(s: RunSummary) -> str:
    if not s.anomalies:
        return '<p class="ok">None: every split matches the schema.</p>'
    rows = [(a.split, a.feature, a.kind, a.description) for a in s.anomalies]
    return page.table(("split", "feature", "kind", "description"), rows, css="bad")


def _training(s: RunSummary) -> str:
    model_run = s.output("Trainer", "ModelRun")
    if model_run is None:
        return page.section("training", "Training", "<p>The Trainer did not run.</p>")
    scalars = read_scalars(model_run.uri)
    if not scalars:
        return page.section("training", "Training",
                        f"<p>No training summaries found in {page.escape(model_run.uri)}.</p>")
    fig = _curves(scalars, s)
    rows = [(k, f"{v[-1][1]:.4g}", str(v[-1][0])) for k, v in sorted(scalars.items())]
    if s.trainer is None:
        exported = "<p>The Trainer recorded no export choice or input check (trainer/outcome.py).</p>"
    else:
        check = s.trainer.input
        exported = (f"<p><b>Budget</b>: {page.escape(s.trainer.budget.describe())}</p>" if s.trainer.budget else "")
        exported += (f"<p><b>Model</b>: {page.escape(s.trainer.model)}</p>" if s.trainer.model else "")
        exported += (f"<p><b>Exported</b> {page.escape(s.trainer.export.describe())}</p>"
                    + (f'<p class="{"bad" if check.advice else "ok"}"><b>Input</b>: {page.escape(check.describe())}</p>'
                       if check else "<p><b>Input</b>: not measured (trainer.check_input off, "
                                     "or no training step ran)</p>"))
        fit = s.trainer.overfit
        if fit is not None:
            css = {"overfitting": "bad", "not overfitting": "ok"}.get(fit.verdict, "")  # still improving: plain
            exported += (f'<p class="{css}"><b>Fit</b>: '
                         f"{page.escape(fit.describe())}</p>")
    return page.section("training", "Training", exported + page.img(fig, "training curves")
                    + "<h3>Last values</h3>" + page.table(("scalar", "value", "at step"), rows)
                    + f"<p class=dim>from {page.escape(model_run.uri)}</p>")


def curve_keys(s: RunSummary, scalars: dict) -> list[tuple[str, str, str]]:
    """(train scalar, eval scalar, title) of each plot: the loss, then the task's main metric (the one that picks
    the exported step and gates the push: AUC for binary, not accuracy); the training metric when the Evaluator
    did not run."""
    metric = main_metric(s)
    label = metric.label if metric is not None and f"eval_{metric.label}" in scalars else next(
        (k[len("eval_"):] for k in scalars if k.startswith("eval_") and k != "eval_loss"), None)
    return [("loss", "eval_loss", "loss"), *([(label, f"eval_{label}", label)] if label else [])]


def _curves(scalars: dict, s: RunSummary):
    keys = curve_keys(s, scalars)
    fig, axes = plt.subplots(1, len(keys), figsize=(11, 3.6), squeeze=False)
    for ax, (train_key, eval_key, label) in zip(axes[0], keys):
        for key, style in ((train_key, "-"), (eval_key, "o-")):
            if key in scalars:
                steps, values = zip(*scalars[key])
                ax.plot(steps, values, style, label=key, markersize=4)
        if s.exported is not None:
            ax.axvline(s.exported.step, color="#1e8449", linestyle="--", label=f"exported (step {s.exported.step})")
        ax.set_xlabel("step")
        ax.set_title(label)
        ax.legend()
        ax.grid(alpha=0.3)
    return fig


def read_scalars(logdir: str) -> dict[str, list[tuple[int, float]]]:
    """name -> [(step, value)] from the TensorBoard event files directly in `logdir`."""
    scalars: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                number = (float(tf.make_ndarray(value.tensor)) if value.HasField("tensor")
                          else float(value.simple_value))
                scalars.setdefault(value.tag, []).append((int(event.step), number))
    return {k: sorted(v) for k, v in scalars.items()}


def _evaluation(s: RunSummary) -> str:
    if s.blessed is None:
        return page.section("evaluation", "Evaluation", "<p>The Evaluator did not run.</p>")
    main = main_result(s)
    rows = []
    for name in sorted(set(s.metrics) | set(s.thresholds)):
        if main is not None and name == main.metric.key:
            threshold = " and ".join(main.bound_phrases()) or "none"
        else:
            threshold = " and ".join(_bound_phrases(s.thresholds.get(name, {}))) or "none"
        trivial = _fmt(s.trivial_metric) if main is not None and name == main.metric.key else "&ndash;"
        rows.append((page.escape(name), _fmt(s.metrics.get(name), name), _fmt(s.baseline_metrics.get(name), name),
                     trivial, page.escape(threshold)))
    split = s.eval_split or EVAL
    table = (f"<p>On the <b>{page.escape(split)}</b> split "
             f"({metric_text(EXAMPLE_COUNT, s.metrics.get(EXAMPLE_COUNT, 0))} rows)"
             + (f"; the trivial model: {page.escape(s.trivial_model)}" if s.trivial_model else "") + ".</p>"
             + page.table(("metric", "candidate", "serving model", "trivial model", "threshold"), rows,
                          escaped=False))
    if s.blessed:
        why = ("it met every threshold" + (" and did not regress against the model serving now"
                                           if s.baseline_metrics else "; no model was serving yet, "
                                           "so only the absolute thresholds applied"))
        verdict = f'<p class="ok"><b>Blessed</b>: {page.escape(why)}.</p>'
    else:
        reasons = "".join(f"<li>{page.escape(f)}</li>" for f in why_not_blessed(s, main)) or \
            "<li>no reason recorded</li>"
        verdict = f'<p class="bad"><b>Not blessed</b>, so nothing was pushed:</p><ul>{reasons}</ul>'
    pushed = f"<p>Pushed by this run: {page.escape(push_outcome(s))}</p>"
    return page.section("evaluation", "Evaluation and blessing", table + verdict + pushed)


def _bound_phrases(t: dict[str, float]) -> list[str]:
    """A metric's thresholds other than the main metric's (which MainResult says with its trivial model)."""
    bounds = [f"{'≥' if side == 'lower_bound' else '≤'} {t[side]:.4g}"
              for side in ("lower_bound", "upper_bound") if side in t]
    allowed = allowed_regression(t)
    return bounds + ([no_worse_than_serving(allowed)] if allowed is not None else [])


def _inference(s: RunSummary) -> str:
    p = s.predictions
    rows = [("scored", scoring_keys.describe(p.properties)), ("predictions", p.uri),
            ("model version", str(p.properties.get(scoring_keys.MODEL_VERSION) or "none")),
            ("snapshot", str(p.properties.get(scoring_keys.SNAPSHOT_DIGEST, "")))]
    return page.section("inference", "Inference (inference.input_dir)", page.table(("", ""), rows))


def _snapshot(s: RunSummary) -> str:
    snaps = s.snapshots()
    if not snaps:
        return page.section("snapshot", "Data snapshot", "<p>This pipeline recorded no data snapshot.</p>")
    consumers = _consumers(s)
    parts = []
    for component, a in snaps:
        rows = [("produced by", component), ("type", a.type_name), ("uri", a.uri)]
        rows += [(k, str(v)) for k, v in sorted(a.properties.items())
                 if k not in _SNAPSHOT_INTERNAL and str(v).strip() not in ("", "{}", "[]")]
        parts.append(page.table(("", ""), rows))
        # The snapshot may reach ExampleGen through a sibling output (e.g. its data directory); the run condition's
        # value (its new_data Integer, pipeline/dag/conditions.py) is internal.
        lineage = [(o.type_name, o.uri, ", ".join(consumers.get(o.id, [])) or "no later component of this run")
                   for o in s.outputs[component] if o.type_name.rpartition(".")[2] != _CONDITION_VALUE_TYPE]
        parts.append(f"<h3>Lineage: what {page.escape(component)} produced and who read it</h3>"
                     + page.table(("artifact", "uri", "read by"), lineage))
    return page.section("snapshot", "Data snapshot and lineage", "\n".join(parts))


def _consumers(s: RunSummary) -> dict[int, list[str]]:
    """Artifact id -> the components of this run that read it."""
    result: dict[int, list[str]] = {}
    for component, artifact_ids in s.inputs.items():
        for artifact_id in artifact_ids:
            result.setdefault(artifact_id, []).append(component)
    return result


# -- helpers ----------------------------------------------------------------

def _fmt(x: Optional[float], name: str = "") -> str:
    return "&ndash;" if x is None else metric_text(name, x)
