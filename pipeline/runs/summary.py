"""What a run did, read back from MLMD: per-component state and time, eval
metrics against thresholds and the baseline, the blessing, the pushed model."""

from __future__ import annotations

import dataclasses
from typing import Optional

import tensorflow_model_analysis as tfma

from components.data.snapshot import newness
from components.data.snapshot.component import WAITING_SPANS
from components.evaluation import slicing, trivial
from components.evaluation.results import BASELINE, CANDIDATE, EXAMPLE_COUNT, read_metrics
from components.pusher import GATE, LABELS, REFUSED, REMOVED_DEBRIS, UNCHANGED_LABEL, UNCHANGED_VERSION
from components.scoring import keys as scoring_keys
from components.scoring.keys import BULK_INFERRER_ID, INFERENCE_SNAPSHOT_ID, PREDICTIONS_TYPE
from components.splits import EVAL
from components.tuner import LATEST_TUNING_ID, TUNER_ID
from components.tuner import record as tuning_record
from pipeline.config import Config
from pipeline.errors import EXIT_NOT_PUSHED, EXIT_NOTHING_NEW, EXIT_OK
from pipeline.runs import mlmd, verdict
from pipeline.runs import slices as slice_results
from pipeline.runs.mlmd import ArtifactInfo
from pipeline.runs.retraining import nothing_new
from trainer import outcome
from trainer.outcome import ExportChoice, Outcome
from trainer.tasks import MAIN_METRICS, MainMetric

# Components that stop a run on purpose; a failure there is a block, not a crash.
GATES = ("DataGate", "DriftGate")
# The multi-class task's main metric (trainer/tasks.py), as TFMA names it.
ACCURACY = MAIN_METRICS["multiclass"].key
# The components' own seconds added up: not the run's wall time (imports, the summary and the report are not in it).
COMPONENTS_TIME = "sum of the components"


@dataclasses.dataclass
class ComponentRun:
    name: str
    state: str
    seconds: float
    execution_id: int
    started: float = 0.0  # epoch seconds


@dataclasses.dataclass
class RunSummary:
    run_id: str
    components: list[ComponentRun]
    metrics: dict[str, float]           # candidate's overall metrics
    baseline_metrics: dict[str, float]  # the serving model's, empty when nothing served
    blessed: Optional[bool]
    validation_failures: list[str]
    # What THIS run pushed; None when it pushed nothing, even if an earlier run's push is serving.
    pushed_path: Optional[str]
    pushed_version: Optional[str]
    # Every component's output artifacts, for the run report and lineage.
    outputs: dict[str, list[ArtifactInfo]] = dataclasses.field(default_factory=dict)
    # Metric name -> the Evaluator's thresholds as it ran (value bounds, change bounds).
    thresholds: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    # Component -> ids of the artifacts it read: lineage within the run.
    inputs: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    snapshot_digest: Optional[str] = None
    snapshot_rows: Optional[int] = None
    # Everything ExampleValidator found (components.data.data_gate.Anomaly); empty if it did not run.
    anomalies: list = dataclasses.field(default_factory=list)
    # Set when this run pushed nothing because the candidate is already this serving version: byte-identical
    # (components/pusher.py), or pushed by an earlier run whose Pusher execution this run reused from cache.
    unchanged_version: Optional[str] = None
    # Set when the Snapshot found no span the serving model was not trained on, so nothing after it ran.
    nothing_new: Optional[str] = None
    # ... and that version is the canary out, not stable (components/serving/rollout.py).
    unchanged_is_canary: bool = False
    # Why the serving gate refused the blessed candidate (components/serving/serving_gate.py): nothing was pushed.
    refused: Optional[str] = None
    # What the serving gate found, a sentence; None when it did not run.
    serving_gate: Optional[str] = None
    # TF Serving's labels right after this run's push ("stable V[, canary W]", components/serving/rollout.py); None
    # without one.
    serving_labels: Optional[str] = None
    # What killed pushes had left in the serving directory, removed by this run's Pusher.
    removed_debris: tuple[str, ...] = ()
    # Spans the Snapshot left out because their ready marker (data.span_ready_marker) was missing.
    waiting_spans: tuple[str, ...] = ()
    # Spans the serving version was trained on whose files changed since: why this run is new.
    changed_spans: tuple[str, ...] = ()
    # What the Trainer recorded (trainer/outcome.py): the exported step and its eval metric, the
    # input-bound diagnosis, its time; None when the Trainer did not run or wrote no record.
    trainer: Optional[Outcome] = None
    # What the tuning step recorded (components/tuner/record.py): the Tuner's search, or LatestTuning's reuse of
    # the last one; None without a tuning step.
    tuning: Optional[tuning_record.TuningRecord] = None
    # The split the Evaluator's metrics and blessing come from ("test"), and the trivial model's main metric on
    # the same rows, with what that model is (components/evaluation/trivial.py); None when the Evaluator did not
    # run or recorded none (runs from before the test split evaluated on "eval").
    eval_split: Optional[str] = None
    trivial_metric: Optional[float] = None  # to 6 significant digits: what MLMD's SQLite store keeps
    trivial_model: Optional[str] = None
    trivial_sets_the_bar: bool = False  # its bound is the one the Evaluator applied
    # What the Evaluator sliced and why (components/evaluation/slicing.py), and each slice's main metric beside the
    # serving model's (pipeline/runs/slices.py), the overall slice first; empty when it recorded no slicing.
    slicing: Optional[slicing.SliceRecord] = None
    slices: list[slice_results.SliceRow] = dataclasses.field(default_factory=list)

    @property
    def exported(self) -> Optional[ExportChoice]:
        return self.trainer.export if self.trainer else None

    def component(self, name: str) -> Optional[ComponentRun]:
        return next((c for c in self.components if c.name == name), None)

    @property
    def gate_anomalies(self) -> list[str]:
        """Why the data gate stopped the run; empty when it passed or did not run."""
        gate = self.component("DataGate")
        return [str(a) for a in self.anomalies] if gate is not None and gate.state == "failed" else []

    def output(self, component: str, type_name: str) -> Optional[ArtifactInfo]:
        """The first artifact of type `type_name` that `component` wrote in this run."""
        return next((a for a in self.outputs.get(component, []) if a.type_name == type_name), None)

    def snapshots(self) -> list[tuple[str, ArtifactInfo]]:
        """(component, artifact) for every dataset snapshot a component of this run wrote."""
        return [(name, a) for name, arts in self.outputs.items() for a in arts if mlmd.is_snapshot(a.type_name)]

    def training_snapshots(self) -> list[tuple[str, ArtifactInfo]]:
        """snapshots() without the inference input's (inference.input_dir): the data this run trained on."""
        return [(name, a) for name, a in self.snapshots() if name != INFERENCE_SNAPSHOT_ID]

    @property
    def predictions(self) -> Optional[ArtifactInfo]:
        """What the BulkInferrer scored in this run (inference.input_dir); None when it did not run."""
        return self.output(BULK_INFERRER_ID, PREDICTIONS_TYPE)


def exit_code(summary: Optional[RunSummary]) -> int:
    """What a finished run exits with (pipeline/errors.py): pushed 0; nothing new (no new span, or the
    candidate is the serving version) 4; otherwise not pushed (not blessed, or no summary) 3.
    `run` and `dryrun` both exit with this."""
    if summary is not None and (summary.nothing_new or summary.unchanged_version):
        return EXIT_NOTHING_NEW
    return EXIT_OK if summary is not None and summary.pushed_path else EXIT_NOT_PUSHED


def summarize(metadata_path: str, pipeline_name: str, run_id: Optional[str] = None,
              reader: Optional[mlmd.Reader] = None) -> RunSummary:
    """reader: an open reader of metadata_path, to summarize many runs of one store (history.py)."""
    reader = reader or mlmd.Reader.open(metadata_path)
    run = reader.run(pipeline_name, run_id)
    summary = RunSummary(run_id=run.name, components=[], metrics={}, baseline_metrics={}, blessed=None,
                         validation_failures=[], pushed_path=None, pushed_version=None)
    executions = {}
    for name, execution in reader.executions(run):
        executions[name] = execution
        seconds = (execution.last_update_time_since_epoch - execution.create_time_since_epoch) / 1000
        summary.components.append(ComponentRun(name, mlmd.state_of(execution), seconds, execution.id,
                                               execution.create_time_since_epoch / 1000))
        written = [a for arts in reader.outputs(execution).values() for a in arts]
        summary.outputs[name] = [reader.info(a) for a in sorted(written, key=lambda a: a.id)]
        summary.inputs[name] = [a.id for arts in reader.inputs(execution).values() for a in arts]

    evaluation = summary.output("Evaluator", "ModelEvaluation")
    if evaluation is not None:
        # As TFMA applied them (the trivial model's bound included); else as compiled, recorded in MLMD.
        applied = verdict.applied_eval_config(evaluation.uri)
        raw = mlmd.properties(executions["Evaluator"]).get("eval_config")
        summary.thresholds = verdict.thresholds(applied or (verdict.parse_eval_config(raw) if raw else None))
        found = trivial.Recorded.of(evaluation.properties)
        summary.eval_split, summary.trivial_metric, summary.trivial_model = found.split, found.value, found.what
        summary.trivial_sets_the_bar = found.sets_the_bar
        by_slice = read_metrics(evaluation.uri)
        overall = by_slice.get((), {})
        summary.metrics = overall.get(CANDIDATE, {})
        summary.baseline_metrics = overall.get(BASELINE, {})
        summary.slicing = slicing.read(evaluation.properties)
        validation = tfma.load_validation_result(evaluation.uri)
        summary.slices = slice_results.rows(by_slice, summary.slicing, slice_results.failed_slices(validation))
        summary.blessed = validation.validation_ok
        summary.validation_failures = slice_results.describe_failures(validation, by_slice)
    snapshots = summary.training_snapshots()
    if snapshots:
        summary.snapshot_digest = snapshots[0][1].properties.get("digest")
        summary.snapshot_rows = snapshots[0][1].properties.get("rows")
        summary.nothing_new = nothing_new(snapshots[0][1].properties)
        properties = snapshots[0][1].properties
        summary.waiting_spans = tuple(s for s in str(properties.get(WAITING_SPANS, "")).split(",") if s)
        found = newness.from_properties(properties)
        summary.changed_spans = found.changed_spans if found is not None else ()
    model_run = summary.output("Trainer", "ModelRun")
    if model_run is not None:
        summary.trainer = outcome.read(model_run.uri)
    tuned = summary.output(TUNER_ID, "TunerResults") or summary.output(LATEST_TUNING_ID, "TunerResults")
    if tuned is not None:
        summary.tuning = tuning_record.read(tuned.uri)
    anomalies = summary.output("ExampleValidator", "ExampleAnomalies")
    if anomalies is not None:
        summary.anomalies = mlmd.anomalies_of(reader.artifact(anomalies.id))
    pushed = summary.output("Pusher", "PushedModel")
    pusher_cached = pushed is not None and summary.component("Pusher").state == "cached"
    if pushed is not None and not pusher_cached:
        summary.removed_debris = tuple(d for d in str(pushed.properties.get(REMOVED_DEBRIS, "")).split("; ") if d)
        summary.refused = pushed.properties.get(REFUSED) or None
        summary.serving_gate = pushed.properties.get(GATE) or None
        summary.serving_labels = pushed.properties.get(LABELS) or None
    if pushed is not None and pushed.properties.get("pushed") == 1:
        if pusher_cached:
            # A rerun with nothing changed: the Pusher's output is the push of an earlier run, so this
            # run pushed nothing and that version still holds the candidate.
            summary.unchanged_version = pushed.properties.get("pushed_version")
        else:
            summary.pushed_path = pushed.properties.get("pushed_destination")
            summary.pushed_version = pushed.properties.get("pushed_version")
    elif pushed is not None:
        summary.unchanged_version = pushed.properties.get(UNCHANGED_VERSION)
        summary.unchanged_is_canary = pushed.properties.get(UNCHANGED_LABEL) == "canary"
    return summary




def format_summary(summary: RunSummary, config: Config, log_file: Optional[str] = None) -> str:
    lines = [f"run {summary.run_id}", "components:"]
    for c in summary.components:
        lines.append(f"  {c.name:<32} {c.state:<7} {c.seconds:7.1f}s")
    lines.append(f"  {COMPONENTS_TIME:<32} {'':<7} {sum(c.seconds for c in summary.components):7.1f}s")
    if summary.snapshot_digest:
        lines.append(f"data snapshot: {summary.snapshot_digest} ({summary.snapshot_rows} rows)")
    if summary.waiting_spans:
        lines.append(f"spans waiting for their ready marker, left out of this run: {', '.join(summary.waiting_spans)}")
    if summary.changed_spans:
        lines.append(f"spans changed since the serving model was trained on them: {', '.join(summary.changed_spans)}")
    if summary.gate_anomalies:
        lines.append("data gate: STOPPED the run before Transform; anomalies:")
        lines.extend(f"  {a}" for a in summary.gate_anomalies)
    if summary.tuning is not None:
        lines.append(f"tuning: {summary.tuning.describe()}")
    if summary.trainer is not None:
        if summary.trainer.budget is not None:  # how much it trained and why it stopped (trainer/budget.py)
            lines.append(f"budget: {summary.trainer.budget.describe()}")
        if summary.trainer.model:
            lines.append(f"model: {summary.trainer.model}")
        lines.append(f"trained: exported {summary.trainer.export.describe()}")
        lines.append(f"input: {summary.trainer.input.describe()}" if summary.trainer.input
                     else "input: not measured (trainer.check_input off, or no training step ran)")
        if summary.trainer.overfit is not None:
            lines.append(f"fit: {summary.trainer.overfit.describe()}")
    main = main_result(summary, config)
    if main is not None:
        lines.append(main.line())
        lines.append(f"{main.split} examples: {metric_text(EXAMPLE_COUNT, summary.metrics.get(EXAMPLE_COUNT, 0))}")
        if summary.trivial_model:
            lines.append(f"trivial model: {summary.trivial_model}")
    if summary.slicing is not None:
        lines.extend(_slice_lines(summary))
    if summary.blessed is not None:
        lines.append("blessed: yes" if summary.blessed else "blessed: NO")
        lines.extend(f"  why: {f}" for f in why_not_blessed(summary, main))
    if summary.serving_gate:
        lines.append(f"serving gate: {summary.serving_gate}")
    lines.append(f"pushed: {push_outcome(summary)}")
    if summary.serving_labels:
        lines.append(f"  serving labels now: {summary.serving_labels} (python -m pipeline serving status)")
    lines.extend(f"  removed what a killed push left: {d}" for d in summary.removed_debris)
    if summary.predictions is not None:
        lines.append(f"inference: {scoring_keys.describe(summary.predictions.properties)}")
        lines.append(f"  predictions: {summary.predictions.uri}")
    lines.append(f"artifacts: {config.pipeline.pipeline_root}")
    lines.append(f"metadata:  {config.pipeline.metadata_path}")
    if log_file:
        lines.append(f"log:       {log_file}")
    return "\n".join(lines)


def metric_text(name: str, value: Optional[float]) -> str:
    """A metric as the summary and the report print it: a count (TFMA's example_count, weighted_example_count) as
    the whole number it is, anything else to four decimals."""
    if value is None:
        return "-"
    if name.endswith("_count") and float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:.4f}"


def _slice_lines(summary: RunSummary) -> list[str]:
    """The slices and the worst of those the gates applied to (or could have: with enough examples)."""
    lines = [f"slices: {slice_results.describe_slicing(summary.slicing)}"]
    metric = slice_results.main_metric_of(summary.slicing)
    enough = [r for r in summary.slices[1:] if r.metric is not None
              and r.examples >= summary.slicing.plan["min_examples"]]
    if metric is not None and enough:
        worst = (min if metric.higher_is_better else max)(enough, key=lambda r: r.metric)
        lines.append(f"  worst slice with >= {summary.slicing.plan['min_examples']} examples: {worst.label}, "
                     f"{metric.label} {worst.metric:.4f} on {worst.examples} examples"
                     + ("" if worst.gated else " (no slice bound set)"))
    small = [r for r in summary.slices[1:] if r.examples < summary.slicing.plan["min_examples"]]
    if small and summary.slicing.gated:
        lines.append(f"  not gated, fewer than evaluator.slice_min_examples ({summary.slicing.plan['min_examples']})"
                     f" examples: {', '.join(f'{r.label} ({r.examples})' for r in small)}")
    return lines


def push_outcome(summary: RunSummary) -> str:
    """What this run pushed, in the words the summary, the report and `history` share."""
    if summary.nothing_new:
        return f"nothing new: {summary.nothing_new}"
    if summary.unchanged_version:
        what = "the canary out" if summary.unchanged_is_canary else "the model serving now"
        return f"nothing new: the candidate is {what} (version {summary.unchanged_version}), so it was not pushed again"
    if summary.pushed_path:
        return f"{summary.pushed_path} (version {summary.pushed_version})"
    stopped = next((c.name for c in summary.components if c.state == "failed"), None)
    if summary.refused and not stopped:
        return f"nothing, refused by the serving gate: {summary.refused} (the model serving now, if any, is unchanged)"
    why = (f"{'blocked by' if stopped in GATES else 'the run failed in'} {stopped}" if stopped
           else "not blessed" if summary.blessed is False else "")
    return f"nothing{f', {why}' if why else ''} (the model serving now, if any, is unchanged)"


def _gated_metric(summary: RunSummary, config: Optional[Config]) -> Optional[MainMetric]:
    """The task's main metric: the config's task, else whichever main metric the Evaluator gated on."""
    if config is not None and config.features is not None:
        return MAIN_METRICS[config.features.task]
    return next((m for m in MAIN_METRICS.values() if m.key in summary.thresholds), None)


def main_result(summary: RunSummary, config: Optional[Config] = None) -> Optional[verdict.MainResult]:
    """The main metric of the run's evaluation with what it was judged against; None without one."""
    metric = _gated_metric(summary, config)
    if metric is None or metric.key not in summary.metrics:
        return None
    return verdict.MainResult(metric, summary.eval_split or EVAL, summary.metrics[metric.key],
                              summary.thresholds.get(metric.key, {}), summary.baseline_metrics.get(metric.key),
                              summary.trivial_metric, summary.trivial_model, summary.trivial_sets_the_bar)


def why_not_blessed(summary: RunSummary, main: Optional[verdict.MainResult]) -> list[str]:
    """Each failed threshold in words with its numbers: the main metric's from the numbers, any other as TFMA
    said it; TFMA's own words where the numbers show no failure (TFMA decided; this only explains)."""
    if summary.blessed is not False:
        return []
    ours = main.reasons() if main is not None else []
    others = [f for f in summary.validation_failures if main is None or not f.startswith(f"{main.metric.key}:")]
    return [*ours, *others] if ours else summary.validation_failures
